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
from operators.api.core import OPTIONAL_NODE_OPERATIONS, Node, Pod
from operators.api.groups import is_for_pod
from operators.api.limits import ResourceClaimReservedForMaxSize
from operators.api.resource import AllocationResult, ResourceClaim
from operators.scheduling.extended import (
    ExtendedClaim,
    ExtendedResources,
    delegated,
    makes_claim,
    new_claim,
)
from operators.scheduling.node_allocatable import (
    NodeAllocatableError,
    NodeAllocatableInput,
    Statuses,
    check,
    has_mapped_device,
    sharing_refusal,
)
from operators.scheduling.nodes import NodeUsage, node_failure, pod_requests
from operators.scheduling.plugins import Unresolvable
from operators.scheduling.plugins.volumebinding import PodVolumes
from operators.scheduling.pod_filters import PluginError, PodFilters
from operators.scheduling.score import (
    DEFAULT_SCORING,
    Candidate,
    CycleScorer,
    NodeOrder,
    ResourceScorer,
    Score,
    ScoreKey,
    Scoring,
)


@dataclasses.dataclass(frozen=True)
class ClaimsNotReady:
    """PreEnqueue: the pod waits (no cycle) until this is resolved; ``reason`` says why."""

    reason: str


def resolve_claims(
    pod: Pod, claims: Mapping[str, ResourceClaim], *, group_claims: bool = False
) -> list[ResourceClaim] | ClaimsNotReady:
    """The pod's claims, from direct names or the names recorded for its templates.

    ``claims`` are the pod namespace's claims by name (cache plus in-flight ledger).
    ``group_claims`` (DRAWorkloadResourceClaims): a template's claim may be the pod's
    PodGroup's, as upstream's ``IsForPod``.
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
        if entry.resource_claim_template_name and not is_for_pod(claim, pod, group_claims):
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
    # DRANodeAllocatableResources: what the pod's claims take of this node's resources
    # (``pod.status.nodeAllocatableResourceClaimStatuses`` once bound here).
    node_allocatable: Statuses = ()
    # VolumeBinding: the pod's unbound delayed claims, matched to PVs or to provision here.
    volumes: PodVolumes | None = None


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
    # A plugin's PreFilter rejected the pod (``pod_filters``): no node was tried.
    rejected: str | None = None

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
    scoring: Scoring = DEFAULT_SCORING,
    known_unsatisfiable: MutableMapping[str, KnownOutcome] | None = None,
    best_only: bool = False,
    nominated: str | None = None,
    explain_all: bool = False,
    node_order: NodeOrder | None = None,
    extended: ExtendedResources | None = None,
    node_allocatable: NodeAllocatableInput | None = None,
    filters: PodFilters | Unresolvable | None = None,
) -> CycleResult:
    """Filter every node, allocate the pod's unallocated claims on each, score the fits.

    ``allocator`` may be None only when no claim needs allocating. ``known_unsatisfiable``
    holds, by node, the outcome where claims of the same specs did not fit since nothing was
    freed, with the allocated state it was computed on: allocations only ever take devices
    away, so such nodes are skipped (and the map gains the new ones); the caller empties it
    whenever devices, counters, capacity or nodes may have been freed. When the pod ends up
    unschedulable, a skipped node is explained by its own outcome (recomputed if anything was
    allocated since), so the message is the one a cycle without skipping gives.

    Fits are scored as ``scoring`` says (``score``). With ``best_only``, nodes are visited by
    the best total they could reach (``CycleScorer.bound``) until a fit beats every node left:
    the full scan's choice for a fraction of the allocator calls. ``nominated`` is visited
    first, and a fit there ends the visit (it is preferred whatever its score). ``node_order``
    keeps the ranking of nodes by bound across cycles (the scheduler's: the same, cheaper).
    ``explain_all`` explains every node that does not fit even when others do (``simulate``;
    the scheduler only needs why when nothing fits).

    ``extended``: the pod's extended resources backed by DRA. On a node that does not
    advertise one, NodeResourcesFit leaves it to DRA and a special claim for it is allocated
    with the pod's claims (one of the pod's own from an earlier attempt is used as it is).
    Such a pod's claims differ by node: nothing is skipped as known unsatisfiable.

    ``node_allocatable``: given when DRANodeAllocatableResources is on (1.37): claims whose
    devices take node resources add them to the pod's demand on each node
    (``node_allocatable``), and such claims are not shared.

    ``filters``: the default profile's other plugins, PreFilter done (``pod_filters``).
    """
    if isinstance(filters, Unresolvable):
        return _rejected(filters)
    order = node_order or NodeOrder()
    scorer = _scorer(pod, claims, nodes, scoring, filters, order)
    if isinstance(scorer, CycleResult):
        return scorer
    cycle = _Cycle(
        pod,
        claims,
        usage,
        allocator,
        scorer,
        None if makes_claim(extended) else known_unsatisfiable,
        explain_all,
        extended,
        node_allocatable,
        filters,
    )
    error = cycle.too_many_consumers()
    if error is not None:
        return CycleResult((), {}, {}, error)
    try:
        cycle.visit(
            *_visit_order(nodes, usage, scorer.resources, best_only, nominated, order),
            best_only=best_only,
            nominated=nominated,
        )
        if cycle.fits:
            cycle.skipped_fit_elsewhere()
        else:
            cycle.explain_skipped()
    except (InvalidInputError, NodeAllocatableError, PluginError) as e:
        return CycleResult((), {}, {}, str(e))
    return cycle.result()


def _scorer(
    pod: Pod,
    claims: Sequence[ResourceClaim],
    nodes: Sequence[Node],
    scoring: Scoring,
    filters: PodFilters | None,
    order: NodeOrder,
) -> CycleScorer | CycleResult:
    """The pod's scores for this cycle (their PreScore), or its error (a preferred node
    affinity term that does not parse)."""
    try:
        snapshot = filters.snapshot if filters is not None else None
        resources = ResourceScorer.of(pod, scoring)
        return CycleScorer(pod, claims, scoring, snapshot, order.index(nodes), resources)
    except InvalidInputError as e:
        return CycleResult((), {}, {}, str(e))


def _rejected(rejection: Unresolvable) -> CycleResult:
    """A plugin's PreFilter rejected the pod: no node is tried (an Error status is the pod's
    error, as bad input)."""
    if rejection.error:
        return CycleResult((), {}, {}, rejection.message)
    return CycleResult((), {}, {}, rejected=rejection.message)


def _visit_order(
    nodes: Sequence[Node],
    usage: Mapping[str, NodeUsage],
    resources: ResourceScorer,
    best_only: bool,
    nominated: str | None,
    node_order: NodeOrder,
) -> tuple[Sequence[Node], Sequence[ScoreKey]]:
    """The nodes in the order a cycle visits them, with each one's resource scores' key when
    ``best_only`` (else by name); the nominated node first, the others in the same order."""
    bounds: Sequence[ScoreKey] = ()
    order: Sequence[Node]
    if best_only:
        bounds, order = node_order.ranked(nodes, usage, resources)
    else:
        order = sorted(nodes, key=_node_name)
    if nominated:
        at = next((i for i, n in enumerate(order) if n.metadata.name == nominated), None)
        if at is not None:
            order = [order[at], *order[:at], *order[at + 1 :]]
            if best_only:
                bounds = [bounds[at], *bounds[:at], *bounds[at + 1 :]]
    return order, bounds


class _Cycle:
    """One cycle's state as it visits the nodes: the fits, the reasons, and the nodes known
    not to fit that were skipped (explained only if nothing fits)."""

    def __init__(
        self,
        pod: Pod,
        claims: Sequence[ResourceClaim],
        usage: Mapping[str, NodeUsage],
        allocator: Allocator | None,
        scorer: CycleScorer,
        known_unsatisfiable: MutableMapping[str, KnownOutcome] | None,
        explain_all: bool,
        extended: ExtendedResources | None,
        node_allocatable: NodeAllocatableInput | None = None,
        filters: PodFilters | None = None,
    ) -> None:
        self.pod = pod
        self.filters = filters if filters is not None and not filters.empty else None
        self.requests = pod_requests(pod)
        self.usage = usage
        self.allocator = allocator
        self.scorer = scorer
        self.known = known_unsatisfiable
        self.explain_all = explain_all
        self.extended = extended
        self.to_allocate = [c for c in claims if not c.is_allocated]
        self.allocated = [c for c in claims if c.is_allocated]
        self.keys = tuple(c.key for c in self.to_allocate)
        self.failures: dict[str, str] = {}
        self.details: dict[str, str] = {}
        self.fits: list[_Found] = []
        # By node: the outcome, and its claims' keys to this pod's (an outcome known from
        # another pod's claims of the same specs explains this pod's claims, not that pod's).
        self.unsatisfiable: list[tuple[str, Outcome, Mapping[str, str]]] = []
        self.skipped: list[Node] = []
        self.unavailable: dict[str, None] = {}  # ordered set
        self.timed_out = False
        self.claims = claims
        self.node_allocatable = node_allocatable
        # PreFilter's claimHasNodeAllocatableMappedDevice: the allocated claims that may not
        # be shared.
        self.mapped = (
            frozenset(
                c.key
                for c in self.allocated
                if has_mapped_device(c.status.allocation, node_allocatable.slices)
            )
            if node_allocatable is not None
            else frozenset()
        )

    def too_many_consumers(self) -> str | None:
        """An allocated claim of the pod's that no further consumer may reserve."""
        for claim in self.allocated:
            if not claim.is_reserved_for(self.pod.metadata.uid or "") and (
                len(claim.status.reserved_for) >= ResourceClaimReservedForMaxSize
            ):
                return (
                    f"resourceclaim {claim.key} is reserved by the "
                    f"maximum of {ResourceClaimReservedForMaxSize} consumers"
                )
        return None

    def node_reason(self, node: Node) -> str | None:
        """The node filters before DynamicResources, then the allocated claims' selectors."""
        node_usage = self.usage.get(node.metadata.name or "", NodeUsage())
        reason = node_failure(
            self.pod, node, self.requests, node_usage, delegated(self.extended, node), self.filters
        )
        if reason is not None:
            return reason
        if self.mapped:
            reason = self.shared_mapped_claim(node)
            if reason is not None:
                return reason
        claim = unavailable_claim(self.allocated, node)
        if claim is None:
            return None
        self.unavailable[claim.key] = None
        if not _selector_matches(claim, node):
            return f"node(s) didn't match allocated claim {claim.key}'s node selector"
        return (
            f"resource claim {claim.key} allocation requires {OPTIONAL_NODE_OPERATIONS} feature "
            "on the node"
        )

    def shared_mapped_claim(self, node: Node) -> str | None:
        """Filter's sharing rule (DRANodeAllocatableResources): an allocated claim usable on
        the node, with a mapped device, reserved for another consumer."""
        assert self.node_allocatable is not None
        for claim in self.allocated:
            if claim.key not in self.mapped or unavailable_claim([claim], node) is not None:
                continue
            refused = sharing_refusal(self.pod, claim, self.node_allocatable.group_claims)
            if refused is not None:
                return refused
        return None

    def footprint(
        self, node: Node, results: Mapping[str, AllocationResult], usage: NodeUsage
    ) -> tuple[str | None, Statuses]:
        """Filter's node-allocatable check, after allocating: why the node cannot take what
        the pod's claims add to its requests, else the claims' shares there."""
        if self.node_allocatable is None:
            return None, ()
        allocations = []
        for claim in self.claims:
            allocation = results.get(claim.key) or claim.status.allocation
            if allocation is not None and allocation.devices.results:
                allocations.append((claim, allocation))
        found = check(
            self.pod,
            allocations,
            node,
            usage,
            self.node_allocatable.slices,
            self.node_allocatable.qualified,
        )
        if found.refusal is not None:
            return found.refusal.message, ()
        return None, found.statuses

    def visit(
        self,
        order: Sequence[Node],
        bounds: Sequence[ScoreKey],
        *,
        best_only: bool,
        nominated: str | None,
    ) -> None:
        """Each node in turn, until a fit beats every bound left (``best_only``)."""
        scorer = self.scorer
        best_only = best_only and not scorer.full_scan
        for position, node in enumerate(order):
            name = node.metadata.name or ""
            if (
                best_only
                and self.fits
                and (
                    name == nominated
                    or self.fits[0].node == nominated
                    or (scorer.dra_settled and self.fits[0].least <= scorer.bound(bounds[position]))
                )
            ):
                break
            if self.to_allocate and self.known is not None and name in self.known:
                # Cannot fit whatever the node filters say; they run below if the pod ends up
                # unschedulable and its explanation needs them. Full nodes cost a set lookup.
                self.skipped.append(node)
                continue
            try:
                fitted = self.try_node(node)
            except OutOfTimeError as e:
                # Upstream's per-node verdict; nodes not visited yet are not decided either.
                self.timed_out = True
                for undecided in order[position:]:
                    self.failures.setdefault(undecided.metadata.name or "", e.message)
                break
            if best_only and fitted:
                self.fits.sort(key=lambda f: (f.node != nominated, f.least))

    def try_node(self, node: Node) -> bool:
        """Filter: the node's filters, then the pod's claims (and its special claim for
        extended resources, if the node needs one) allocated there, scored if they fit."""
        name = node.metadata.name or ""
        reason = self.node_reason(node)
        if reason is not None:
            self.failures[name] = reason
            return False
        results: dict[str, AllocationResult] = {}
        node_claim = new_claim(self.extended, node)
        here = [*self.to_allocate, node_claim.claim] if node_claim is not None else self.to_allocate
        if here:
            assert self.allocator is not None
            outcome = self.allocator.allocate(node, here)
            if outcome.status is Status.ERROR:
                self.failures[name] = f"node(s) had errors in their resource pools: {outcome.error}"
                return False
            if outcome.status is Status.UNSATISFIABLE:
                self.unsatisfiable.append((name, outcome, {}))
                if self.known is not None:
                    self.known[name] = (self.allocator.allocated, outcome, self.keys)
                return False
            results = dict(zip((c.key for c in here), outcome.results, strict=True))
        node_usage = self.usage.get(name, NodeUsage())
        refused, statuses = self.footprint(node, results, node_usage)
        if refused is None and self.filters is not None:
            refused = self.filters.after_devices(node)
        if refused is not None:
            self.failures[name] = refused
            return False
        volumes = self.filters.volumes.get(name) if self.filters is not None else None
        candidate = self.scorer.candidate(
            node, node_usage, [*self.allocated, *here], results, volumes
        )
        self.fits.append(_Found(candidate, self.scorer.least(candidate), node_claim, statuses))
        return True

    def skipped_fit_elsewhere(self) -> None:
        for node in self.skipped:  # a fit exists: no explanation needed
            self.failures.setdefault(node.metadata.name or "", "cannot allocate all claims")

    def explain_skipped(self) -> None:
        """Nothing fits: the skipped nodes explained as kube-scheduler would (the node filters
        come before DynamicResources), each by its own outcome, recomputed if devices were
        taken since it was known."""
        for node in self.skipped:
            name = node.metadata.name or ""
            reason = self.node_reason(node)
            if reason is not None:
                self.failures[name] = reason
                continue
            assert self.allocator is not None
            assert self.known is not None
            # Gone when the node's devices were freed since it was skipped: the event loop
            # forgets freed nodes while a cycle runs in its thread (``Unsatisfiable``).
            known = self.known.get(name)
            basis, outcome, computed_for = known if known is not None else (None, None, self.keys)
            if outcome is None or (basis is not self.allocator.allocated and not self.timed_out):
                try:  # devices were taken since, or freed: explain it as it is now
                    outcome = self.allocator.allocate(node, self.to_allocate)
                except OutOfTimeError as e:
                    self.timed_out = True
                    self.failures[name] = e.message
                    continue
                if outcome.status is not Status.SUCCESS:
                    self.known[name] = (self.allocator.allocated, outcome, self.keys)
                computed_for = self.keys
            if outcome.status is Status.ERROR:
                self.failures[name] = f"node(s) had errors in their resource pools: {outcome.error}"
            elif outcome.status is Status.SUCCESS:  # fits as the cycle saw it: not skipped now
                self.failures[name] = "cannot allocate all claims"
            else:
                renamed = dict(zip(computed_for, self.keys, strict=True))
                self.unsatisfiable.append((name, outcome, renamed))

    def result(self) -> CycleResult:
        """The fits, and the reasons: one detail per grouped reason, that of the first node
        by name, whatever the visit order."""
        self.unsatisfiable.sort(key=lambda item: item[0])
        explanations: dict[str, str] = {}
        for name, outcome, renamed in self.unsatisfiable:
            # Explanations cost a pass over every device: only an unschedulable pod needs them.
            wanted = self.explain_all or not self.fits
            try:
                first = outcome.reasons[0] if wanted and outcome.reasons else None
            except OutOfTimeError:
                self.timed_out, first = True, None
            where = (
                f"cannot allocate claim {renamed.get(first.claim, first.claim)}"
                + (f", request {first.request}" if first.request else "")
                if first is not None
                else "cannot allocate all claims"
            )
            self.failures.setdefault(name, where)
            if first is not None:
                self.details.setdefault(where, first.message)
                if self.explain_all:
                    explanations[name] = first.message
        scores = self.scorer.finish([f.candidate for f in self.fits])
        fits = sorted(
            (
                NodeFit(
                    f.node,
                    f.candidate.results,
                    scores[f.node],
                    f.extended,
                    f.statuses,
                    f.candidate.volumes,
                )
                for f in self.fits
            ),
            key=lambda fit: fit.score.key(),
        )
        return CycleResult(
            tuple(fits),
            self.failures,
            self.details,
            unavailable=tuple(self.unavailable),
            timed_out=self.timed_out,
            explanations=explanations,
        )


@dataclasses.dataclass(frozen=True)
class _Found:
    """A fit as the visit knows it: its scores before normalising over every fit, the least
    its total can be (``CycleScorer.least``)."""

    candidate: Candidate
    least: ScoreKey
    extended: ExtendedClaim | None
    statuses: Statuses

    @property
    def node(self) -> str:
        return self.candidate.name


def unavailable_claim(claims: Sequence[ResourceClaim], node: Node) -> ResourceClaim | None:
    """The first allocated claim whose allocation cannot be used on ``node``: its node selector
    does not match, or (1.37) a device skips node operations and the node does not declare
    that it can do without them, checked whatever the gate says, as DynamicResources' Filter."""
    for claim in claims:
        if not _selector_matches(claim, node):
            return claim
        allocation = claim.status.allocation
        if (
            allocation is not None
            and any(r.skip_node_operations for r in allocation.devices.results)
            and OPTIONAL_NODE_OPERATIONS not in node.status.declared_features
        ):
            return claim
    return None


def _selector_matches(claim: ResourceClaim, node: Node) -> bool:
    allocation = claim.status.allocation
    selector = allocation.node_selector if allocation is not None else None
    if selector is None:
        return True
    try:
        return selector_matches(selector, node)
    except InvalidNodeSelectorError:
        return False


def prefer_nominated(result: CycleResult, nominated: str | None) -> NodeFit | None:
    """The nominated node when it still fits (KEP-5007 retry), else the best-scored one."""
    if nominated:
        for fit in result.fits:
            if fit.node == nominated:
                return fit
    return result.chosen


def unschedulable_message(
    total_nodes: int, result: CycleResult, max_reasons: int | None = None
) -> str:
    """kube-scheduler's "0/N nodes are available: ..." with DRA details: every reason, as
    kube-scheduler lists them (``max_reasons``: at most that many, then how many more)."""
    if result.pod_error:
        return result.pod_error
    if result.rejected is not None:
        return f"0/{total_nodes} nodes are available: {result.rejected}."
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
    if max_reasons is not None and len(counts) > max_reasons:
        parts.append(f"{len(counts) - max_reasons} more reasons")
    return f"0/{total_nodes} nodes are available: " + "; ".join(parts) + "."
