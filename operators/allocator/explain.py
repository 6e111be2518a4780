"""Explanations for "does not fit": per claim and request, where the node's devices went.

Runs only after the search failed, so it may be slower than the search: it looks at every
device of the node once per request and sorts it into the first reason that excludes it
(class selectors, request selectors, not reachable, allocated, tainted, counters, capacity).
Messages are short enough for a pod condition.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from decimal import Decimal

from operators.allocator import capacity as cap
from operators.allocator.compatibility import admits
from operators.allocator.errors import InvalidInputError
from operators.allocator.outcome import Reason
from operators.allocator.search import Candidate, RequestSpec, Search
from operators.api.core import OPTIONAL_NODE_OPERATIONS
from operators.api.quantity import Quantity


def _counter_block(search: Search, candidate: Candidate) -> str | None:
    """Why the pool's counters (after allocated devices) cannot cover this device, if so."""
    if not candidate.counters:
        return None
    available = search.allocator.available_counters(candidate.pool)
    for set_name, counters in candidate.counters:
        left_set = available.get(set_name, {})
        for n, need in counters:
            left = left_set.get(n, Decimal(0))
            if need > left:
                return (
                    f"counter set {set_name} {n} needs {Quantity.from_decimal(need)}, "
                    f"{Quantity.from_decimal(max(left, Decimal(0)))} left"
                )
    return None


def _group_clash(search: Search, candidate: Candidate) -> str | None:
    """Why the device's compatibility groups do not go with the allocated devices on one of
    its counter sets, if so (1.37, DRADeviceCompatibilityGroups)."""
    allocated = search.allocator.members(candidate.pool)
    for use in candidate.device.consumes_counters:
        name = use.counter_set or ""
        members = allocated.get(name)
        groups = frozenset(use.compatibility_groups)
        if not admits(members, groups):
            assert members is not None  # a counter set with no device admits any
            theirs = ", ".join(sorted(members.common)) or "none"
            mine = ", ".join(sorted(groups)) or "none"
            return (
                f"counter set {name}: its groups ({mine}) share none with the allocated "
                f"devices' ({theirs})"
            )
    return None


def _classify(search: Search, request: RequestSpec, candidate: Candidate) -> tuple[str, str | None]:
    """The first reason that keeps the device from the request alone, ignoring the other
    requests of the call: what a user can act on, in the order the search checks it."""
    features = search.features
    allocated = search.allocator.allocated
    device = candidate.device
    if not features.binding_and_status and device.binding_conditions:
        return "need binding conditions", None
    try:
        if not search.selectors_match(
            request, candidate, request.device_class.spec.selectors, from_class=True
        ):
            return f"fail class {request.device_class.metadata.name} selectors", None
        if not search.selectors_match(request, candidate, request.selectors, from_class=False):
            return "fail request selectors", None
    except InvalidInputError:
        return "selector errors", None
    if not search.selectable(request, candidate):
        return "not reachable from node", None
    if not request.admin_access and candidate.id in allocated.devices:
        return "allocated", None
    multi = features.consumable_capacity and bool(device.allow_multiple_allocations)
    # 1.38: a share taken before allowMultipleAllocations went off keeps the device.
    if (
        features.since_1_38
        and not request.admin_access
        and not multi
        and (candidate.id in allocated.capacity or candidate.id in search.shared_devices)
    ):
        return "allocated", None
    if features.device_taints and search.taint_blocks(candidate, request):
        return "tainted", None
    if (
        candidate.slice.spec.skip_node_operations
        and search.skips_node_operations
        and not search.node_operations_optional
    ):
        if not features.node_operations:
            return "skip node operations (feature off)", None
        return f"skip node operations (node does not declare {OPTIONAL_NODE_OPERATIONS})", None
    if not features.partitionable_devices and candidate.counters:
        return "consume counters (feature off)", None
    if not (multi and candidate.id in allocated.capacity):
        if features.compatibility_groups:
            clash = _group_clash(search, candidate)
            if clash is not None:
                return "incompatible groups", clash
        block = _counter_block(search, candidate)
        if block is not None:
            return "blocked", block
    if features.consumable_capacity:
        have = allocated.capacity.get(candidate.id)
        try:
            if features.since_1_38:
                fits = cap.request_fits_qualified(
                    request.capacity, device.capacity, have, None, driver=candidate.id.driver
                )
            else:
                fits = cap.request_fits(request.capacity, device.capacity, have, None)
        except cap.CapacityArithmeticError:
            fits = False
        if not fits:
            return "insufficient capacity", None
    return "usable", None


def explain(search: Search) -> list[Reason]:
    """One reason per request that cannot be satisfied alone, else one per claim."""
    node = search.node.metadata.name or ""
    total = len(search.view.devices)
    reasons: list[Reason] = []
    for claim_index, claim in enumerate(search.claims):
        claim_reasons: list[Reason] = []
        for alternatives in search.requests[claim_index]:
            for request in alternatives.options:
                tally: Counter[str] = Counter()
                details: dict[str, str] = {}  # the first device's detail, per kind
                for candidate in search.view.devices:
                    kind, detail = _classify(search, request, candidate)
                    tally[kind] += 1
                    if detail and kind not in details:
                        details[kind] = detail
                usable = tally.pop("usable", 0)
                need = request.num_devices if request.mode != "All" else max(request.num_devices, 1)
                if usable >= need:
                    continue
                parts = [f"{total} devices on {node}"]
                for kind, n in sorted(tally.items(), key=lambda kv: (-kv[1], kv[0])):
                    text = f"{n} {kind}"
                    if kind in details:
                        text += f": {details[kind]}"
                    parts.append(text)
                parts.append(f"{usable} usable, {need} needed")
                counts = dict(tally)
                counts["usable"] = usable
                counts["needed"] = need
                claim_reasons.append(Reason(claim.key, request.full_name, "; ".join(parts), counts))
        if not claim_reasons:
            claim_reasons.append(
                Reason(
                    claim.key,
                    None,
                    f"enough devices on {node} for each request alone, but not together "
                    "(constraints, counters, capacity or other claims)",
                )
            )
        reasons.extend(claim_reasons)
    return reasons


# --- the device-by-device breakdown (``kopf-dra simulate --explain``) -----------------------

SHOWN_DEVICES = 4  # device names listed per reason


@dataclasses.dataclass(frozen=True)
class RequestBreakdown:
    """Where one request's candidate devices on a node went, device by device."""

    claim: str
    request: str
    needed: int
    usable: tuple[str, ...]
    eliminated: tuple[tuple[str, tuple[str, ...]], ...]  # (reason, device names), in order


@dataclasses.dataclass(frozen=True)
class ClaimBreakdown:
    claim: str
    requests: tuple[RequestBreakdown, ...]
    constraints: tuple[str, ...]  # matchAttribute / distinctAttribute, as written


def _first_failing(
    search: Search, request: RequestSpec, candidate: Candidate, from_class: bool
) -> str | None:
    """Which selector (class or request, by index and expression) rejects the device."""
    selectors = request.device_class.spec.selectors if from_class else request.selectors
    for index, selector in enumerate(selectors):
        if not search.selectors_match(request, candidate, [selector], from_class=from_class):
            expression = (selector.cel.expression if selector.cel is not None else "") or ""
            owner = (
                f"class {request.device_class.metadata.name} selector #{index}"
                if from_class
                else f"request selector #{index}"
            )
            return f"{owner} ({_short(expression)})"
    return None


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def breakdown(search: Search) -> list[ClaimBreakdown]:
    """Per claim and request: the usable devices and, for every other device of the node, the
    first check that eliminated it (with the selector that said no)."""
    out: list[ClaimBreakdown] = []
    for claim_index, claim in enumerate(search.claims):
        requests: list[RequestBreakdown] = []
        for alternatives in search.requests[claim_index]:
            for request in alternatives.options:
                usable: list[str] = []
                eliminated: dict[str, list[str]] = {}
                for candidate in search.view.devices:
                    kind, detail = _classify(search, request, candidate)
                    name = str(candidate.id)
                    if kind == "usable":
                        usable.append(name)
                        continue
                    try:
                        if kind.startswith("fail class"):
                            kind = _first_failing(search, request, candidate, True) or kind
                        elif kind == "fail request selectors":
                            kind = _first_failing(search, request, candidate, False) or kind
                    except InvalidInputError as e:
                        kind = f"selector error: {e}"
                    if detail:
                        kind = f"{kind}: {detail}"
                    eliminated.setdefault(kind, []).append(name)
                need = request.num_devices if request.mode != "All" else max(request.num_devices, 1)
                requests.append(
                    RequestBreakdown(
                        claim.key,
                        request.full_name,
                        need,
                        tuple(usable),
                        tuple((k, tuple(v)) for k, v in eliminated.items()),
                    )
                )
        constraints = tuple(
            (f"matchAttribute {c.match_attribute}" if c.match_attribute else "")
            + (f"distinctAttribute {c.distinct_attribute}" if c.distinct_attribute else "")
            + f" on {', '.join(c.requests) or 'every request'}"
            for c in claim.spec.devices.constraints
        )
        out.append(ClaimBreakdown(claim.key, tuple(requests), constraints))
    return out
