"""Preemption for pods with DRA devices (PostFilter), pure: who would have to go, and where.

kube-scheduler's DefaultPreemption, with what KEP-5690 adds for devices. A pod that fits
nowhere may evict pods of lower priority from one node:

1. Eligibility: ``preemptionPolicy: Never`` never preempts; a pod whose nominated node still
   has a terminating pod of lower priority waits for it instead of preempting again.
2. Per node (at most ``max(10% of nodes, 100)`` candidates, nodes in name order): remove every
   pod of lower priority, releasing what their claims hold when every consumer of the claim is
   removed (all its devices, the counters its partitions consume in shared counter sets, the
   capacity its shares consume), and run the real node filters and allocator on that state.
   Then put the pods back one at a time, highest priority first, those whose eviction would
   violate a PodDisruptionBudget before the others (``SelectVictimsOnNode``): a pod whose
   return still leaves room stays. Claims shared with a pod that stays, claims of multi-node
   or network-attached devices and devices with binding conditions are never released
   (KEP-5690's scope); when they are what blocks the pod, the message says so.
3. Among candidate nodes (``pick``): fewest PDB violations, lowest priority of the
   highest-priority victim, smallest sum of priorities, fewest victims, latest start time of
   the highest-priority victims, then node order.

Prioritized alternatives (KEP-4816): with ``no-preemption-first`` (the default) an alternative
that fits without evicting anybody beats a higher-ranked one that needs an eviction, so a pod
that fits anywhere never preempts, and a victim is reprieved whenever the pod still fits with a
lower-ranked alternative. With ``rank-first``, the scheduler preempts for a better-ranked
alternative than the best that fits now (``better_than``), reprieves only while the best rank
reached stays, and ranks candidates by the alternative first.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections import Counter
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Literal, TypeVar

from operators.allocator import Allocator, Features, Status
from operators.allocator.state import Holding
from operators.api.core import (
    PREEMPT_LOWER_PRIORITY,
    PREEMPT_NEVER,
    LabelSelector,
    Node,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
)
from operators.api.groups import PodGroup
from operators.api.ids import DeviceID
from operators.api.resource import AllocationResult, ResourceClaim
from operators.api.timestamps import parse_time
from operators.scheduling.binding_conditions import allocated_node
from operators.scheduling.cycle import unavailable_claim
from operators.scheduling.extended import ExtendedResources, delegated, new_claim
from operators.scheduling.nodes import (
    NodeUsage,
    UsageSnapshot,
    insufficient_resources,
    node_failure,
    pod_requests,
)
from operators.scheduling.plugins import Unresolvable
from operators.scheduling.pod_filters import PluginError, PodFilters
from operators.scheduling.score import subrequest_rank

AlternativesPolicy = Literal["no-preemption-first", "rank-first"]
ALTERNATIVES_POLICIES: tuple[AlternativesPolicy, ...] = ("no-preemption-first", "rank-first")
MIN_CANDIDATE_NODES_PERCENTAGE = 10  # DefaultPreemptionArgs' defaults
MIN_CANDIDATE_NODES_ABSOLUTE = 100
# Upstream adds MaxInt32+1 to every priority before summing, so that negative ones count.
_PRIORITY_OFFSET = 2**31

NEVER = "not eligible due to preemptionPolicy=Never."
TERMINATING = "not eligible due to a terminating pod on the nominated node."
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
# Why a lower-priority pod's claim stays allocated (KEP-5690's non-goals).
SHARED = "a claim shared with pods that are not preempted"
MULTI_NODE = "a multi-node or network-attached device"
BINDING_CONDITIONS = "a device with binding conditions"


# --- priorities and budgets ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PodPriority:
    value: int
    preempts: bool  # preemptionPolicy is not Never


def priority_of(pod: Pod, classes: Mapping[str, PriorityClass]) -> PodPriority:
    """spec.priority and spec.preemptionPolicy as the Priority admission plugin fills them in;
    where a pod got neither (admission without that plugin), its PriorityClass's (the global
    default class for a pod naming none), else 0 and PreemptLowerPriority."""
    name = pod.spec.priority_class_name
    if name:
        found = classes.get(name)
    else:
        defaults = [c for c in classes.values() if c.global_default]
        found = min(defaults, key=lambda c: c.value) if defaults else None
    value = pod.spec.priority
    if value is None:
        value = found.value if found is not None else 0
    policy = pod.spec.preemption_policy or (found.preemption_policy if found is not None else None)
    return PodPriority(value, (policy or PREEMPT_LOWER_PRIORITY) != PREEMPT_NEVER)


@dataclasses.dataclass(frozen=True)
class Budget:
    """A PodDisruptionBudget as preemption reads it: selector and ``status.disruptionsAllowed``
    (kept current by the disruption controller, or by tests where none runs)."""

    namespace: str
    selector: LabelSelector | None
    allowed: int
    disrupted: frozenset[str] = frozenset()

    @classmethod
    def of(cls, pdb: PodDisruptionBudget) -> Budget:
        return cls(
            pdb.metadata.namespace or "",
            pdb.spec.selector,
            pdb.status.disruptions_allowed,
            frozenset(pdb.status.disrupted_pods),
        )

    def covers(self, pod: Pod) -> bool:
        """Upstream: a nil or empty selector matches nothing; pods the API server already
        counts as disrupted are not counted again."""
        if pod.metadata.namespace != self.namespace or self.selector is None:
            return False
        if self.selector.is_empty or (pod.metadata.name or "") in self.disrupted:
            return False
        return self.selector.matches(pod.metadata.labels)


# --- the pods on a node --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RunningPod:
    """A pod bound to a node: what preemption needs to know to evict it."""

    pod: Pod
    priority: int
    claims: tuple[ResourceClaim, ...] = ()  # its allocated claims (reserved for it)
    grouped: bool = False  # a member of a PodGroup (upstream ranks these above plain pods)
    unit: str | None = None  # its PodGroup's key when the group's disruptionMode is all

    @property
    def uid(self) -> str:
        return self.pod.metadata.uid or ""

    @property
    def key(self) -> str:
        return self.pod.key

    def started(self, now: datetime.datetime) -> datetime.datetime:
        """status.startTime; a pod not started yet counts as started now (upstream)."""
        return parse_time(self.pod.status.start_time) or now


DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


def terminating_by_preemption(pod: Pod) -> bool:
    """PodTerminatingByPreemption: being deleted, with a scheduler's DisruptionTarget."""
    if not pod.metadata.is_deleting:
        return False
    condition = pod.condition(DISRUPTION_TARGET)
    return (
        condition is not None
        and condition.status == "True"
        and condition.reason == PREEMPTION_BY_SCHEDULER
    )


def group_priority(group: PodGroup) -> int:
    """PodGroupPriority: ``spec.priority`` as the Priority admission plugin filled it in, else
    0 (a group created with no global default class and no class named)."""
    return group.spec.priority if group.spec.priority is not None else 0


def whole(group: PodGroup) -> bool:
    """``disruptionMode: all``: the group's pods are disrupted together or not at all."""
    return bool(group.spec.disruption_mode and "all" in group.spec.disruption_mode)


def running_pod(
    pod: Pod,
    claims: tuple[ResourceClaim, ...],
    classes: Mapping[str, PriorityClass],
    group: Callable[[Pod], PodGroup | None] | None,
) -> RunningPod:
    """A bound pod as a victim. ``group`` (None while GenericWorkload is off) finds the
    PodGroup a pod names: its members take the group's priority (GetPodPriority; the pod's own
    when the group is gone) and rank as group members; a whole group's go together."""
    if group is None or pod.spec.scheduling_group is None:
        return RunningPod(pod, priority_of(pod, classes).value, claims)
    found = group(pod)
    if found is None:
        return RunningPod(pod, priority_of(pod, classes).value, claims, grouped=True)
    unit = f"podgroup:{found.metadata.namespace}/{found.metadata.name}" if whole(found) else None
    return RunningPod(pod, group_priority(found), claims, grouped=True, unit=unit)


def lower_priority_pods(
    bound: Iterable[Pod],
    priority: int,
    classes: Mapping[str, PriorityClass],
    group: Callable[[Pod], PodGroup | None] | None,
    held: Callable[[Pod], tuple[ResourceClaim, ...]],
) -> dict[str, list[RunningPod]]:
    """The pods of ``bound`` (bound, not finished) with a priority below ``priority``, by node,
    as victims (``running_pod``: a PodGroup's member takes its group's priority, so a group's
    members are all here or none), each with the claims it holds (``held``, asked of those
    only). The candidates of a single pod's preemption and of a group's."""
    out: dict[str, list[RunningPod]] = {}
    for pod in bound:
        victim = running_pod(pod, (), classes, group)
        if victim.priority < priority:
            victim = dataclasses.replace(victim, claims=held(pod))
            out.setdefault(pod.spec.node_name or "", []).append(victim)
    return out


def more_important_first(pods: Sequence[RunningPod], now: datetime.datetime) -> list[RunningPod]:
    """Upstream's MoreImportantVictim for single pods: higher priority first, a PodGroup's
    member before a plain pod, then the one started earlier."""
    return sorted(pods, key=lambda p: (-p.priority, -p.grouped, p.started(now), p.key))


@dataclasses.dataclass(frozen=True)
class Unit:
    """What preemption evicts as one (upstream's Victim): a pod, or every bound pod of a
    PodGroup whose ``disruptionMode`` is ``all``, on any node."""

    pods: tuple[RunningPod, ...]

    @property
    def key(self) -> str:
        return self.pods[0].unit or self.pods[0].key

    @property
    def priority(self) -> int:
        return self.pods[0].priority

    @property
    def uids(self) -> frozenset[str]:
        return frozenset(p.uid for p in self.pods)

    def order(self, now: datetime.datetime) -> tuple[int, int, int, datetime.datetime, str]:
        """MoreImportantVictim, more important first: priority, a PodGroup's (whole or one
        member) before a plain pod, the larger, then the one started earlier."""
        rank = 2 if self.pods[0].grouped else 1
        started = min(p.started(now) for p in self.pods)
        return (-self.priority, -rank, -len(self.pods), started, self.key)


def units_of(
    pods: Sequence[RunningPod], members: Mapping[str, Sequence[RunningPod]] | None = None
) -> list[Unit]:
    """The units ``pods`` belong to, in their first pod's order; a whole group's unit has
    every bound member (``members``: group key -> its pods), not only those in ``pods``."""
    grouped: dict[str, list[RunningPod]] = {}
    for p in pods:
        grouped.setdefault(p.unit or p.key, []).append(p)
    out = []
    for key, found in grouped.items():
        every = members.get(key) if members is not None and found[0].unit else None
        out.append(Unit(tuple(every) if every else tuple(found)))
    return out


def members(on_node: Mapping[str, Sequence[RunningPod]]) -> dict[str, list[RunningPod]]:
    """The pods of each whole group (``RunningPod.unit``), from every node."""
    out: dict[str, list[RunningPod]] = {}
    for pods in on_node.values():
        for p in pods:
            if p.unit:
                out.setdefault(p.unit, []).append(p)
    return out


def more_important_units(units: Sequence[Unit], now: datetime.datetime) -> list[Unit]:
    return sorted(units, key=lambda u: u.order(now))


def release_blocker(claim: ResourceClaim, node: str, removed: Collection[str]) -> str | None:
    """Why evicting the pods ``removed`` (uids) does not free ``claim``'s devices, if so."""
    results = claim.allocated_results()
    if any(r.binding_conditions for r in results):
        return BINDING_CONDITIONS
    if allocated_node(claim) != node:
        return MULTI_NODE
    for ref in claim.status.reserved_for:
        if ref.resource != "pods" or ref.api_group or (ref.uid or "") not in removed:
            return SHARED
    return None


def device_names(claim: ResourceClaim) -> list[str]:
    """driver/pool/device of each result (shares marked), as messages name devices."""
    return [
        f"{r.driver}/{r.pool}/{r.device}" + (" (share)" if r.share_id else "")
        for r in claim.allocated_results()
        if not r.admin_access
    ]


# --- nominations ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Nomination:
    """What a preemptor was promised on its nominated node while its victims go: the devices
    its allocation would take there, and what it requests of the node."""

    node: str
    priority: int
    holding: Holding
    requests: Mapping[str, Decimal]

    @classmethod
    def of(cls, pod: Pod, priority: int, candidate: Candidate, features: Features) -> Nomination:
        return cls(
            candidate.node, priority, holding(candidate.results, features), pod_requests(pod)
        )


def holding(results: Mapping[str, AllocationResult], features: Features) -> Holding:
    """What a pod given these allocations (claim key -> result) would hold."""
    return Holding.of_results([r for a in results.values() for r in a.devices.results], features)


K = TypeVar("K", bound=Hashable)


def protected(nominations: Mapping[K, Nomination], pod: K, priority: int) -> list[K]:
    """The nominations a pod of ``priority`` must leave alone: other pods' of higher or equal
    priority (upstream's addNominatedPods)."""
    return sorted(
        (k for k, n in nominations.items() if k != pod and n.priority >= priority), key=str
    )


def with_nominated(
    usage: Mapping[str, NodeUsage], nominations: Sequence[Nomination]
) -> Mapping[str, NodeUsage]:
    """Node usage with the nominated pods counted on their nodes (a snapshot stays one, with
    those nodes marked as not the tracker's)."""
    entries: dict[str, NodeUsage] = {}
    for n in nominations:
        before = entries.get(n.node) or usage.get(n.node) or NodeUsage()
        requests = dict(before.requests)
        for name, value in n.requests.items():
            requests[name] = requests.get(name, Decimal(0)) + value
        # Filters count them; scores do not (upstream scores the snapshot without them).
        entries[n.node] = NodeUsage(requests, before.pods + 1, before.nonzero_requested())
    if isinstance(usage, UsageSnapshot):
        return usage.with_entries(entries)
    return {**usage, **entries}


# --- the search ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A node where evicting ``victims`` (highest priority first) makes room."""

    node: str
    victims: tuple[RunningPod, ...]
    pdb_violations: int
    results: Mapping[str, AllocationResult]  # claim key -> what the preemptor would get
    freed: Mapping[str, tuple[str, ...]]  # victim pod key -> devices its eviction frees
    rank: int = 0

    def order(self, now: datetime.datetime) -> tuple[int, int, int, int, float]:
        """pickOneNodeForPreemption's criteria, smaller first."""
        if not self.victims:
            return (self.pdb_violations, -_PRIORITY_OFFSET, 0, 0, 0.0)
        highest = self.victims[0].priority
        total = sum(v.priority + _PRIORITY_OFFSET for v in self.victims)
        earliest = min(v.started(now) for v in self.victims if v.priority == highest)
        return (self.pdb_violations, highest, total, len(self.victims), -earliest.timestamp())

    def describe(self) -> str:
        """The victims and what each frees, for the pod's message and Event."""
        parts = []
        for victim in self.victims:
            freed = self.freed.get(victim.key, ())
            parts.append(victim.key + (f" (frees {', '.join(freed)})" if freed else ""))
        return f"node {self.node}: preempting " + "; ".join(parts or ["nobody"])


@dataclasses.dataclass(frozen=True)
class Preemption:
    """The chosen candidate, or why no node qualifies (node -> reason)."""

    candidate: Candidate | None
    failures: Mapping[str, str] = dataclasses.field(default_factory=dict)
    not_eligible: str | None = None
    nodes_tried: int = 0
    allocations: int = 0  # allocator calls (the cost, for benchmarks)

    def message(self, total_nodes: int) -> str:
        """What follows kube-scheduler's "preemption: " in the PodScheduled message."""
        if self.not_eligible is not None:
            return self.not_eligible
        if self.candidate is not None:
            return self.candidate.describe()
        counts = Counter(self.failures.values())
        parts = [f"{n} {r}" for r, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
        return f"0/{total_nodes} nodes are available: " + ", ".join(parts) + "."


@dataclasses.dataclass(frozen=True)
class _Fit:
    results: Mapping[str, AllocationResult]
    rank: int

    @property
    def devices(self) -> frozenset[DeviceID]:
        return frozenset(r.device_id for a in self.results.values() for r in a.devices.results)


class _Search:
    """The preemptor and the cluster snapshot every trial on every node shares."""

    def __init__(
        self,
        pod: Pod,
        claims: Sequence[ResourceClaim],
        usage: Mapping[str, NodeUsage],
        allocator: Allocator | None,
        features: Features,
        extended: ExtendedResources | None = None,
        filters: PodFilters | Unresolvable | None = None,
    ) -> None:
        self.pod = pod
        self.filters = filters
        self.requests = pod_requests(pod)
        self.extended = extended
        self.to_allocate = [c for c in claims if not c.is_allocated]
        self.allocated = [c for c in claims if c.is_allocated]
        self.usage = usage
        self.allocator = allocator
        self.features = features
        self.calls = 0
        self._pod_requests: dict[str, Mapping[str, Decimal]] = {}
        self._holdings: dict[str, Holding] = {}

    def unresolvable(self, node: Node) -> bool:
        """A filter no eviction changes: readiness, cordon, taints, affinity, an allocated
        claim of the pod that cannot be used there, a refusal of the other plugins that is
        UnschedulableAndUnresolvable (a volume's node affinity, a missing topology label, pod
        affinity), or their PreFilter's rejection."""
        if isinstance(self.filters, Unresolvable):
            return True
        free = NodeUsage()  # resources are what evictions change; judged separately
        dra = delegated(self.extended, node)
        if node_failure(self.pod, node, self.requests, free, dra) is not None:
            return True
        if self.filters is not None:
            usage = self.usage.get(node.metadata.name or "", NodeUsage())

            def fits() -> bool:
                return not insufficient_resources(node, self.requests, usage, dra)

            try:
                if not self.filters.resolvable(node, fits):
                    return True
            except PluginError:
                return True  # bad input: no eviction helps
        return unavailable_claim(self.allocated, node) is not None

    def fits(self, node: Node, pods: Sequence[RunningPod], removed: Collection[str]) -> _Fit | None:
        """Whether the pod fits on ``node`` once the pods ``removed`` (uids) are gone."""
        name = node.metadata.name or ""
        if not self._room(node, pods, removed):
            return None
        claims = self.claims_on(node)
        if not claims:
            return _Fit({}, 0)
        assert self.allocator is not None
        released = {
            c.key: c
            for p in pods
            if p.uid in removed
            for c in p.claims
            if release_blocker(c, name, removed) is None
        }
        state = self.allocator.allocated.without(self._holding(c) for c in released.values())
        self.calls += 1
        outcome = self.allocator.rebased(state).allocate(node, claims)
        if outcome.status is not Status.SUCCESS:
            return None
        results = dict(zip((c.key for c in claims), outcome.results, strict=True))
        return _Fit(results, subrequest_rank(claims, results))

    def still_fits(
        self,
        node: Node,
        pods: Sequence[RunningPod],
        removed: Collection[str],
        back: Sequence[RunningPod],
        fit: _Fit,
    ) -> bool:
        """Whether ``fit`` stays valid with ``back`` put back (``removed`` no longer has them):
        the node's resources still suffice, and the claims that stop being released take
        none of its devices, and neither they nor its devices draw on shared counters (where
        they would, only the allocator can tell). Saves the allocator call of most reprieves."""
        name = node.metadata.name or ""
        if not self._room(node, pods, removed):
            return False
        if not self.claims_on(node):
            return True
        assert self.allocator is not None
        was_removed = {*removed, *(p.uid for p in back)}
        held: set[DeviceID] = set()
        for c in (c for p in back for c in p.claims):
            if release_blocker(c, name, was_removed) is None:
                h = self._holding(c)
                held.update(h.devices)
                held.update(d for d, _ in h.shared)
        taken = fit.devices
        if held & taken:
            return False
        return not self.allocator.consumes_counters(node, held | taken)

    def _room(self, node: Node, pods: Sequence[RunningPod], removed: Collection[str]) -> bool:
        """The node filters pass once the pods ``removed`` no longer request anything."""
        before = self.usage.get(node.metadata.name or "", NodeUsage())
        requests = dict(before.requests)
        gone = 0
        for p in pods:
            if p.uid in removed:
                gone += 1
                for resource, value in self._requests(p).items():
                    requests[resource] = requests.get(resource, Decimal(0)) - value
        usage = NodeUsage(requests, before.pods - gone)
        filters = self.filters
        if isinstance(filters, PodFilters):
            # Their ports, volumes, anti-affinity terms and share of a spread go with them.
            filters = filters.without([p.uid for p in pods if p.uid in removed])
            if isinstance(filters, Unresolvable):
                return False
        try:
            failure = node_failure(
                self.pod,
                node,
                self.requests,
                usage,
                delegated(self.extended, node),
                filters if isinstance(filters, PodFilters) else None,
            )
        except PluginError:
            return False
        return failure is None

    def claims_on(self, node: Node) -> list[ResourceClaim]:
        """The claims to allocate on ``node``: the pod's, and its special claim there."""
        node_claim = new_claim(self.extended, node)
        return self.to_allocate if node_claim is None else [*self.to_allocate, node_claim.claim]

    def _requests(self, p: RunningPod) -> Mapping[str, Decimal]:
        found = self._pod_requests.get(p.uid)
        if found is None:
            found = self._pod_requests[p.uid] = pod_requests(p.pod)
        return found

    def _holding(self, claim: ResourceClaim) -> Holding:
        found = self._holdings.get(claim.key)
        if found is None:
            found = self._holdings[claim.key] = Holding.of(claim, self.features)
        return found


def split_by_budget(
    units: Sequence[Unit], budgets: Sequence[Budget]
) -> tuple[list[tuple[Unit, int]], list[Unit]]:
    """FilterVictimsWithPDBViolation: units (most important first) whose eviction would take a
    budget below zero, each with how many of its pods would, and the others. Each pod uses one
    allowed disruption of each budget covering it, up to the first it takes below zero; a unit
    with one such pod is violating as a whole (it goes whole or not at all)."""
    allowed = [b.allowed for b in budgets]

    def violates(pod: Pod) -> bool:
        for i, budget in enumerate(budgets):
            if budget.covers(pod):
                allowed[i] -= 1
                if allowed[i] < 0:
                    return True
        return False

    violating: list[tuple[Unit, int]] = []
    other: list[Unit] = []
    for unit in units:
        count = sum(violates(p.pod) for p in unit.pods)
        if count:
            violating.append((unit, count))
        else:
            other.append(unit)
    return violating, other


def _select_victims(
    search: _Search,
    node: Node,
    lower: Sequence[RunningPod],
    budgets: Sequence[Budget],
    now: datetime.datetime,
    alternatives: AlternativesPolicy,
    better_than: int | None,
    members: Mapping[str, Sequence[RunningPod]] | None = None,
) -> Candidate | str:
    """SelectVictimsOnNode: the fewest lower-priority units whose eviction makes room, or the
    reason there is none. A whole group's members on other nodes go with it; their claims
    free nothing here."""
    name = node.metadata.name or ""
    units = units_of(lower, members)
    everyone = {uid for u in units for uid in u.uids}
    fit = search.fits(node, lower, everyone)
    if fit is None or (better_than is not None and fit.rank >= better_than):
        blockers = sorted(
            {b for p in lower for c in p.claims if (b := release_blocker(c, name, everyone))}
        )
        return NO_VICTIMS + (f": the devices are held by {blockers[0]}" if blockers else "")
    best_rank = fit.rank
    removed = set(everyone)
    victims: list[RunningPod] = []
    violations = 0
    final = fit
    violating, other = split_by_budget(more_important_units(units, now), budgets)
    tries = [(u, n) for u, n in violating] + [(u, 0) for u in other]
    for unit, count in tries:
        back = [p for p in lower if p.uid in unit.uids]
        removed.difference_update(unit.uids)
        if search.still_fits(node, lower, removed, back, final):
            continue  # the allocation found stays valid: no need to search again
        kept = search.fits(node, lower, removed)
        if kept is not None and (alternatives != "rank-first" or kept.rank <= best_rank):
            final = kept
            continue
        # A failed reprieve restores the set of the last fit: ``final`` stays its answer.
        removed.update(unit.uids)
        victims.extend(unit.pods)
        violations += count
    ordered = tuple(more_important_first(victims, now))
    freed = {
        v.key: tuple(
            d
            for c in v.claims
            if release_blocker(c, name, removed) is None
            for d in device_names(c)
        )
        for v in ordered
    }
    return Candidate(name, ordered, violations, final.results, freed, final.rank)


def wanted(fit_rank: int | None, alternatives: AlternativesPolicy) -> bool:
    """Whether to look for victims after a cycle whose best fit has ``fit_rank`` (None: the
    pod fits nowhere). With no-preemption-first a pod that fits never preempts; with
    rank-first it does for a better alternative than the one that fits."""
    return fit_rank is None or (alternatives == "rank-first" and fit_rank > 0)


def candidates_wanted(nodes: int) -> int:
    """GetOffsetAndNumCandidates: 10% of the nodes, at least 100, at most all."""
    return min(
        nodes, max(nodes * MIN_CANDIDATE_NODES_PERCENTAGE // 100, MIN_CANDIDATE_NODES_ABSOLUTE)
    )


def eligibility(
    priority: PodPriority,
    nominated: str | None,
    on_nominated: Sequence[RunningPod],
    *,
    evicting: bool = False,
) -> str | None:
    """PodEligibleToPreemptOthers: why the pod may not preempt now, or None. ``evicting``: the
    pod's own victims are not gone yet, although the cache may not show their deletion yet
    (upstream keeps such a pod out of the queue while its preemption's calls run)."""
    if not priority.preempts:
        return NEVER
    if nominated and evicting:
        return TERMINATING
    if nominated and any(
        p.pod.metadata.is_deleting and p.priority < priority.value for p in on_nominated
    ):
        return TERMINATING
    return None


def preempt(
    pod: Pod,
    *,
    priority: PodPriority,
    claims: Sequence[ResourceClaim],
    nodes: Sequence[Node],
    usage: Mapping[str, NodeUsage],
    on_node: Mapping[str, Sequence[RunningPod]],
    allocator: Allocator | None,
    budgets: Sequence[Budget],
    now: datetime.datetime,
    features: Features,
    alternatives: AlternativesPolicy = "no-preemption-first",
    better_than: int | None = None,
    extended: ExtendedResources | None = None,
    members: Mapping[str, Sequence[RunningPod]] | None = None,
    filters: PodFilters | Unresolvable | None = None,
) -> Preemption:
    """Find the node and victims for ``pod`` (eligibility is checked by the caller).

    ``allocator`` is the one the cycle used (the allocated state with the in-flight ledger and
    the devices nominated for pods of higher or equal priority), None when no claim needs
    allocating. ``on_node`` lists the pods bound to each node. ``better_than`` (rank-first
    only): the rank of the best alternative that fits without preemption; only a better one
    is worth evicting for. ``extended``: the pod's extended resources backed by DRA (their
    special claim is allocated with the pod's claims, as in the cycle). ``members``: the bound
    pods of each PodGroup whose ``disruptionMode`` is ``all`` (evicted together).
    ``filters``: the pod's other plugins as its cycle ran them (``pod_filters``).
    """
    search = _Search(pod, claims, usage, allocator, features, extended, filters)
    ordered = sorted(nodes, key=lambda n: n.metadata.name or "")
    wanted = candidates_wanted(len(ordered))
    failures: dict[str, str] = {}
    found: list[tuple[int, Candidate]] = []
    non_violating = 0
    tried = 0
    for position, node in enumerate(ordered):
        name = node.metadata.name or ""
        if search.unresolvable(node):
            failures[name] = NOT_HELPFUL
            continue
        lower = [p for p in on_node.get(name, ()) if p.priority < priority.value]
        if not lower:
            failures[name] = NO_VICTIMS
            continue
        tried += 1
        outcome = _select_victims(
            search, node, lower, budgets, now, alternatives, better_than, members
        )
        if isinstance(outcome, str):
            failures[name] = outcome
            continue
        found.append((position, outcome))
        non_violating += outcome.pdb_violations == 0
        if non_violating and len(found) >= wanted:
            break
    chosen = pick([c for _, c in found], now, alternatives)
    return Preemption(chosen, failures, nodes_tried=tried, allocations=search.calls)


def pick(
    candidates: Sequence[Candidate], now: datetime.datetime, alternatives: AlternativesPolicy
) -> Candidate | None:
    """pickOneNodeForPreemption; ties keep the earlier candidate (node order). A node that
    needs no victim at all wins at once, as upstream."""
    for c in candidates:
        if not c.victims:
            return c
    if not candidates:
        return None
    if alternatives == "rank-first":
        return min(candidates, key=lambda c: (c.rank, *c.order(now)))
    return min(candidates, key=lambda c: (*c.order(now), c.rank))
