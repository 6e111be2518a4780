"""Explanations for "does not fit": per claim and request, where the node's devices went.

Runs only after the search failed, so it may be slower than the search: it looks at every
device of the node once per request and sorts it into the first reason that excludes it
(class selectors, request selectors, not reachable, allocated, tainted, counters, capacity).
Messages are short enough for a pod condition.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

from operators.allocator import capacity as cap
from operators.allocator.errors import InvalidInputError
from operators.allocator.outcome import Reason
from operators.allocator.search import Candidate, RequestSpec, Search
from operators.api.quantity import Quantity


def _counter_block(call: Search, dev: Candidate) -> str | None:
    """Why the pool's counters (after allocated devices) cannot cover this device, if so."""
    if not dev.counters:
        return None
    avail = call.a.available_counters(dev.pool)
    for set_name, counters in dev.counters:
        left_set = avail.get(set_name, {})
        for n, need in counters:
            left = left_set.get(n, Decimal(0))
            if need > left:
                return (
                    f"counter set {set_name} {n} needs {Quantity.from_decimal(need)}, "
                    f"{Quantity.from_decimal(max(left, Decimal(0)))} left"
                )
    return None


def _classify(call: Search, r: RequestSpec, dev: Candidate) -> tuple[str, str | None]:
    if not call.f.binding_and_status and dev.device.binding_conditions:
        return "need binding conditions", None
    try:
        if not call.selectors_match(r, dev, r.device_class.spec.selectors, True):
            return f"fail class {r.device_class.metadata.name} selectors", None
        if not call.selectors_match(r, dev, r.selectors, False):
            return "fail request selectors", None
    except InvalidInputError:
        return "selector errors", None
    if not call.selectable(r, dev):
        return "not reachable from node", None
    if not r.admin and dev.id in call.a.allocated.devices:
        return "allocated", None
    if call.f.device_taints and call.taint_blocks(dev, r):
        return "tainted", None
    if not call.f.partitionable_devices and dev.counters:
        return "consume counters (feature off)", None
    multi = call.f.consumable_capacity and bool(dev.device.allow_multiple_allocations)
    if not (multi and dev.id in call.a.allocated.capacity):
        block = _counter_block(call, dev)
        if block is not None:
            return "blocked", block
    if call.f.consumable_capacity:
        fits = cap.request_fits(
            r.capacity, dev.device.capacity, call.a.allocated.capacity.get(dev.id), None
        )
        if not fits:
            return "insufficient capacity", None
    return "usable", None


def explain(call: Search) -> list[Reason]:
    """One reason per request that cannot be satisfied alone, else one per claim."""
    node = call.node.metadata.name or ""
    total = len(call.view.devices)
    reasons: list[Reason] = []
    for ci, claim in enumerate(call.claims):
        claim_reasons: list[Reason] = []
        for slot in call.slots[ci]:
            for r in slot.alternatives:
                tally: Counter[str] = Counter()
                details: list[str] = []
                for dev in call.view.devices:
                    kind, detail = _classify(call, r, dev)
                    tally[kind] += 1
                    if detail and len(details) < 1:
                        details.append(detail)
                usable = tally.pop("usable", 0)
                need = r.num if r.mode != "All" else max(r.num, 1)
                if usable >= need:
                    continue
                parts = [f"{total} devices on {node}"]
                for kind, n in sorted(tally.items(), key=lambda kv: (-kv[1], kv[0])):
                    text = f"{n} {kind}"
                    if kind == "blocked" and details:
                        text += f": {details[0]}"
                    parts.append(text)
                parts.append(f"{usable} usable, {need} needed")
                counts = dict(tally)
                counts["usable"] = usable
                counts["needed"] = need
                claim_reasons.append(Reason(claim.key, r.full_name, "; ".join(parts), counts))
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
