"""One scheduling cycle for one pod, pure: resolve claims, filter nodes, allocate, score, explain.

The controller hands in a consistent snapshot (nodes, node usage, the pod's claims, an
Allocator built on the cluster's slices and allocated/in-flight claims) and gets back either
the feasible nodes best-first, with the allocations each one would get, or the reasons per
node, ready to become kube-scheduler-style messages.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, MutableMapping, Sequence

from operators.allocator import (
    AllocatedState,
    Allocator,
    InvalidInputError,
    Outcome,
    OutOfTimeError,
    Status,
)
from operators.allocator.errors import InvalidNodeSelectorError
from operators.allocator.nodes import selector_matches
from operators.api.core import Node, Pod
from operators.api.limits import ResourceClaimReservedForMaxSize
from operators.api.resource import AllocationResult, ResourceClaim
from operators.scheduling.extended import (
    ExtendedClaim,
    ExtendedResources,
    delegated,
    makes_claim,
    new_claim,
)
from operators.scheduling.nodes import NodeUsage, node_failure, pod_requests
from operators.scheduling.score import NodeOrder, Score, ScoreKey, ScorePolicy


@dataclasses.dataclass(frozen=True)
class ClaimsNotReady:
    """PreEnqueue: the pod waits (no cycle) until this is resolved; ``reason`` says why."""

    reason: str


def resolve_claims(
    pod: Pod, claims: Mapping[str, ResourceClaim]
) -> list[ResourceClaim] | ClaimsNotReady:
    """The pod's claims, from direct names or the names recorded for its templates.

    ``claims`` are the pod namespace's claims by name (cache plus in-flight ledger).
    """
    found: list[ResourceClaim] = []
    ns = pod.metadata.namespace
    for entry in pod.spec.resource_claims:
        known, name = pod.claim_status(entry)
        if not known:
            return ClaimsNotReady(
                f"waiting for the ResourceClaim of entry {entry.name} (template "
                f"{entry.resource_claim_template_name}) to be created"
            )
        if name is None:
            continue  # no claim needed for this entry
        claim = claims.get(name)
        if claim is None:
            return ClaimsNotReady(f"resourceclaim {ns}/{name} not found")
        if claim.metadata.is_deleting:
            return ClaimsNotReady(f"resourceclaim {ns}/{name} is being deleted")
        if entry.resource_claim_template_name:
            owner = claim.metadata.controller_ref()
            if owner is None or owner.uid != pod.metadata.uid:
                return ClaimsNotReady(
                    f"resourceclaim {ns}/{name} was not created for pod {pod.metadata.key}"
                )
        found.append(claim)
    return found


# A node where claims did not fit, the allocated state that outcome was computed on, and the
# claims (keys, in order) it was computed for: another pod's, of the same specs.
KnownOutcome = tuple[AllocatedState, Outcome, tuple[str, ...]]


@dataclasses.dataclass(frozen=True)
class NodeFit:
    """A feasible node: the allocations it gets for the pod's unallocated claims."""

    node: str
    results: Mapping[str, AllocationResult]  # claim key -> new allocation
    score: Score
    # The pod's special claim for extended resources backed by DRA (KEP-5004), if this node
    # needs one: its allocation is in ``results`` under its in-memory key.
    extended: ExtendedClaim | None = None


@dataclasses.dataclass(frozen=True)
class CycleResult:
    fits: tuple[NodeFit, ...]  # best first
    failures: Mapping[str, str]  # node -> reason (grouping key)
    details: Mapping[str, str]  # reason -> one detailed explanation
    pod_error: str | None = None  # bad input that no node can fix (invalid CEL, ...)
    # Allocated claims whose allocation did not fit a node that passed the other filters
    # (upstream's unavailableClaims): PostFilter may deallocate one of them.
    unavailable: tuple[str, ...] = ()
    # The allocator's time budget ran out: the nodes not decided say so.
    timed_out: bool = False
    # node -> its own detailed reason (``explain_all``; ``details`` has one per grouped reason)
    explanations: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def chosen(self) -> NodeFit | None:
        return self.fits[0] if self.fits else None


def _node_name(node: Node) -> str:
    return node.metadata.name or ""


def run_cycle(
    pod: Pod,
    claims: Sequence[ResourceClaim],
    nodes: Sequence[Node],
    usage: Mapping[str, NodeUsage],
    allocator: Allocator | None,
    *,
    policy: ScorePolicy = "least-allocated",
    known_unsatisfiable: MutableMapping[str, KnownOutcome] | None = None,
    best_only: bool = False,
    nominated: str | None = None,
    explain_all: bool = False,
    node_order: NodeOrder | None = None,
    extended: ExtendedResources | None = None,
) -> CycleResult:
    """Filter every node, allocate the pod's unallocated claims on each, score the fits.

    ``allocator`` may be None only when no claim needs allocating. ``known_unsatisfiable``
    holds, by node, the outcome where claims of the same specs did not fit since nothing was
    freed, with the allocated state it was computed on: allocations only ever take devices
    away, so such nodes are skipped (and the map gains the new ones); the caller empties it
    whenever devices, counters, capacity or nodes may have been freed. When the pod ends up
    unschedulable, a skipped node is explained by its own outcome (recomputed if anything was
    allocated since), so the message is the one a cycle without skipping gives.

    With ``best_only``, nodes are visited in the order of the best score they could reach
    (rank and binding devices 0, their utilisation known before allocating), and the visit
    stops once a fit beats every node not yet visited: the chosen node is the one a full scan
    picks, for a fraction of the allocator calls. ``nominated`` is visited first, and a fit
    there ends the visit (it is preferred whatever its score). ``node_order`` keeps the
    ranking of nodes by bound across cycles (the scheduler's: the same visit, cheaper).
    ``explain_all`` explains every node that does not fit even when others do (``simulate``;
    the scheduler only needs why when nothing fits).

    ``extended``: the pod's extended resources backed by DRA. On a node that does not
    advertise one, NodeResourcesFit leaves it to DRA and a special claim for it is allocated
    with the pod's claims (one of the pod's own from an earlier attempt is used as it is).
    Such a pod's claims differ by node: nothing is skipped as known unsatisfiable.
    """
    requests = pod_requests(pod)
    if makes_claim(extended):
        known_unsatisfiable = None
    to_allocate = [c for c in claims if not c.is_allocated]
    allocated = [c for c in claims if c.is_allocated]
    failures: dict[str, str] = {}
    details: dict[str, str] = {}
    fits: list[NodeFit] = []
    # By node: the outcome, and its claims' keys to this pod's (an outcome known from another
    # pod's claims of the same specs explains this pod's claims, not that pod's).
    unsatisfiable: list[tuple[str, Outcome, Mapping[str, str]]] = []
    skipped: list[Node] = []
    keys = tuple(c.key for c in to_allocate)
    for claim in allocated:
        if not claim.is_reserved_for(pod.metadata.uid or "") and (
            len(claim.status.reserved_for) >= ResourceClaimReservedForMaxSize
        ):
            return CycleResult(
                (),
                {},
                {},
                f"resourceclaim {claim.key} is reserved by the "
                f"maximum of {ResourceClaimReservedForMaxSize} consumers",
            )

    unavailable: dict[str, None] = {}  # ordered set

    def node_reason(node: Node, node_usage: NodeUsage) -> str | None:
        reason = node_failure(pod, node, requests, node_usage, delegated(extended, node))
        if reason is not None:
            return reason
        claim = unavailable_claim(allocated, node)
        if claim is None:
            return None
        unavailable[claim.key] = None
        return f"node(s) didn't match allocated claim {claim.key}'s node selector"

    bounds: Sequence[ScoreKey] = ()  # best_only: each visited node's bound, in visit order
    order: Sequence[Node]
    if best_only:
        bounds, order = (node_order or NodeOrder()).ranked(nodes, usage, requests, policy)
    else:
        order = sorted(nodes, key=_node_name)
    if nominated:  # visited first, the others in the same order
        at = next((i for i, n in enumerate(order) if n.metadata.name == nominated), None)
        if at is not None:
            order = [order[at], *order[:at], *order[at + 1 :]]
            if best_only:
                bounds = [bounds[at], *bounds[:at], *bounds[at + 1 :]]
    timed_out = False
    for position, node in enumerate(order):
        name = node.metadata.name or ""
        if (
            best_only
            and fits
            and (
                name == nominated
                or fits[0].node == nominated
                or fits[0].score.key() <= bounds[position]
            )
        ):
            break
        if to_allocate and known_unsatisfiable is not None and name in known_unsatisfiable:
            # Cannot fit whatever the node filters say; they run below if the pod ends up
            # unschedulable and its explanation needs them. Full nodes cost a set lookup.
            skipped.append(node)
            continue
        node_usage = usage.get(name, NodeUsage())
        reason = node_reason(node, node_usage)
        if reason is not None:
            failures[name] = reason
            continue
        results: dict[str, AllocationResult] = {}
        node_claim = new_claim(extended, node)
        here = [*to_allocate, node_claim.claim] if node_claim is not None else to_allocate
        if here:
            assert allocator is not None
            try:
                outcome = allocator.allocate(node, here)
            except InvalidInputError as e:
                return CycleResult((), {}, {}, str(e))
            except OutOfTimeError as e:
                # Upstream's per-node verdict; nodes not visited yet are not decided either.
                timed_out = True
                for undecided in order[position:]:
                    failures.setdefault(undecided.metadata.name or "", e.message)
                break
            if outcome.status is Status.ERROR:
                key = f"node(s) had errors in their resource pools: {outcome.error}"
                failures[name] = key
                continue
            if outcome.status is Status.UNSATISFIABLE:
                unsatisfiable.append((name, outcome, {}))
                if known_unsatisfiable is not None:
                    known_unsatisfiable[name] = (allocator.allocated, outcome, keys)
                continue
            results = dict(zip((c.key for c in here), outcome.results, strict=True))
        score = Score.of(node, node_usage, requests, here, results, policy)
        fits.append(NodeFit(name, results, score, node_claim))
        if best_only:
            fits.sort(key=lambda f: (f.node != nominated, f.score))
    fits.sort(key=lambda f: f.score)
    if not fits:
        # Explained as kube-scheduler would: the node filters come before DynamicResources.
        for node in skipped:
            name = node.metadata.name or ""
            reason = node_reason(node, usage.get(name, NodeUsage()))
            if reason is not None:
                failures[name] = reason
                continue
            assert allocator is not None
            assert known_unsatisfiable is not None
            basis, outcome, computed_for = known_unsatisfiable[name]
            if basis is not allocator.allocated and not timed_out:
                try:  # devices were taken since: explain it as it is now
                    outcome = allocator.allocate(node, to_allocate)
                except InvalidInputError as e:  # a class or selector changed since
                    return CycleResult((), {}, {}, str(e))
                except OutOfTimeError as e:
                    timed_out = True
                    failures[name] = e.message
                    continue
                known_unsatisfiable[name] = (allocator.allocated, outcome, keys)
                computed_for = keys
            if outcome.status is Status.ERROR:
                failures[name] = f"node(s) had errors in their resource pools: {outcome.error}"
            else:
                unsatisfiable.append((name, outcome, dict(zip(computed_for, keys, strict=True))))
    else:
        for node in skipped:  # a fit exists: no explanation needed
            failures.setdefault(node.metadata.name or "", "cannot allocate all claims")
    # One detail per grouped reason: that of the first node by name, whatever the visit order.
    unsatisfiable.sort(key=lambda item: item[0])
    explanations: dict[str, str] = {}
    for name, outcome, renamed in unsatisfiable:
        # Explanations cost a pass over every device: only an unschedulable pod needs them.
        try:
            first = outcome.reasons[0] if (explain_all or not fits) and outcome.reasons else None
        except OutOfTimeError:
            timed_out, first = True, None
        where = (
            f"cannot allocate claim {renamed.get(first.claim, first.claim)}"
            + (f", request {first.request}" if first.request else "")
            if first is not None
            else "cannot allocate all claims"
        )
        failures.setdefault(name, where)
        if first is not None:
            details.setdefault(where, first.message)
            if explain_all:
                explanations[name] = first.message
    return CycleResult(
        tuple(fits),
        failures,
        details,
        unavailable=tuple(unavailable),
        timed_out=timed_out,
        explanations=explanations,
    )


def unavailable_claim(claims: Sequence[ResourceClaim], node: Node) -> ResourceClaim | None:
    """The first allocated claim whose allocation cannot be used on ``node``."""
    for claim in claims:
        allocation = claim.status.allocation
        selector = allocation.node_selector if allocation is not None else None
        if selector is None:
            continue
        try:
            matches = selector_matches(selector, node)
        except InvalidNodeSelectorError:
            matches = False
        if not matches:
            return claim
    return None


def prefer_nominated(result: CycleResult, nominated: str | None) -> NodeFit | None:
    """The nominated node when it still fits (KEP-5007 retry), else the best-scored one."""
    if nominated:
        for fit in result.fits:
            if fit.node == nominated:
                return fit
    return result.chosen


def unschedulable_message(total_nodes: int, result: CycleResult, max_reasons: int = 6) -> str:
    """kube-scheduler's "0/N nodes are available: ..." with DRA details, short enough for a
    pod condition."""
    if result.pod_error:
        return result.pod_error
    if total_nodes == 0:
        return "0/0 nodes are available: no nodes in the cluster."
    counts = Counter(result.failures.values())
    parts = []
    for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:max_reasons]:
        text = f"{n} {reason}"
        detail = result.details.get(reason)
        if detail:
            text += f": {detail}"
        parts.append(text)
    if len(counts) > max_reasons:
        parts.append(f"{len(counts) - max_reasons} more reasons")
    return f"0/{total_nodes} nodes are available: " + "; ".join(parts) + "."
