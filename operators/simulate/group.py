"""The scheduler's answer for a PodGroup (1.37's GenericWorkload), from a snapshot: what one
cycle of the group would do, with nothing written.

``group_answer`` runs the scheduler's own cycle (``scheduling.group_cycle``) and its
preemption (``scheduling.group_preemption``) on a working copy of the snapshot (``_Host``: each
pod prepared and filtered as ``engine`` does it for a single pod, each placement assumed as
the scheduler's Reserve writes it), and answers from them:

- groups need Kubernetes 1.37 and GenericWorkload: otherwise every pod is told why not;
- the group's pods are its pods that are not finished; too few for a gang wait, as upstream's
  PreEnqueue; one scheduler name and the PodGroup's priority on every pod, or they are refused;
- with DRAWorkloadResourceClaims on, a PodGroup template entry that has no claim yet gets one,
  generated in memory once for the group (as kube-controller-manager would), and each pod's
  entry equal to it (``is_group_claim``) resolves to that claim, not to one of its own;
- the pods not bound are tried in the cycle's order; when the cycle places nothing and a group
  claim is allocated where none of its pods can go, the claim is deallocated (in memory,
  PodGroupPostFilter) and the cycle runs again, as the scheduler's next one would; when none
  is, the group's preemption says which pods would be evicted from which nodes, and where its
  pods would be nominated (nobody is evicted).
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Literal, TypeVar, cast

from operators.allocator import AllocatedState, Allocator, Features
from operators.api.core import Node, Pod
from operators.api.groups import (
    PodGroup,
    PodGroupResourceClaim,
    group_name,
    is_group_claim,
)
from operators.api.keys import ObjectKey
from operators.api.names import TERMINAL_PHASES
from operators.api.resource import AllocationResult, ResourceClaim
from operators.api.templates import claim_from_template
from operators.scheduling import (
    composite,
    group_cycle,
    group_preemption,
    preemption,
    topology,
    tree_preemption,
)
from operators.scheduling.attempt import Attempt, Prepared, Ready, SharedDevice, Wait
from operators.scheduling.cycle import NodeFit
from operators.scheduling.group_cycle import Cycle, Filtered
from operators.scheduling.groups import key_of, not_placed, ordered, refused, waits
from operators.scheduling.node_allocatable import NODE_ALLOCATABLE_FIELD, dump_statuses
from operators.scheduling.reserve import reserved_claims
from operators.scheduling.topology import Domain, DomainError
from operators.simulate import engine
from operators.simulate.engine import Options, PreparedPod, Verdict, deallocated
from operators.simulate.snapshot import InputError, Snapshot

#: What became of one pod of the group: ``bound`` before the cycle; ``placed`` by it (the group
#: is placed); ``fits`` a node but the group is not placed; ``unschedulable`` fits no node;
#: ``not-tried`` once ``minCount`` was out of reach; ``left-out`` of the placement the search
#: found (told nothing, tried again later); ``waiting`` or ``error`` with the group.
MemberOutcome = Literal[
    "placed", "bound", "fits", "unschedulable", "not-tried", "left-out", "waiting", "error"
]


@dataclasses.dataclass
class MemberAnswer:
    """One pod: its node and its own claims' allocations where it is placed (or bound), else
    what the scheduler tells it (the PodScheduled message)."""

    outcome: MemberOutcome
    node: str | None = None
    allocations: dict[str, AllocationResult] = dataclasses.field(default_factory=dict)
    message: str | None = None


@dataclasses.dataclass
class GroupPreemptionAnswer:
    """What the group's preemption would do, nobody evicted: ``victims`` (pod, node,
    priority) and, when it finds a placement, the node each placed pod is nominated to."""

    outcome: Literal["victims", "none", "not-eligible"]
    message: str
    priority: int
    victims: list[tuple[str, str, int]] = dataclasses.field(default_factory=list)
    nominations: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class DomainAnswer:
    """One domain of a topology-constrained group: ``chosen``, ``fits`` (another that would
    hold the group, with fewer of its pods or later by name), ``unschedulable`` (with each
    pod's own reason there), ``ruled-out`` (its free devices cannot hold the group's claims:
    no pod was filtered in it) or ``not-tried`` (1.38's search stopped before it)."""

    name: str
    nodes: int
    outcome: Literal["chosen", "fits", "unschedulable", "ruled-out", "not-tried"]
    pods: int | None = None
    message: str | None = None
    failed: dict[ObjectKey, str] = dataclasses.field(default_factory=dict)
    #: How many of the group's pods were filtered there (0: ruled out, or not tried).
    filtered: int = 0


@dataclasses.dataclass
class GroupAnswer:
    """The group's cycle: its verdict and message (None on success, else what its pods are
    told of the group, or why it waits or is refused), its pods by key in the order the cycle
    tried them (bound ones last), the allocations of its shared claims (each once), its
    preemption when it fits nowhere, and notes."""

    group: ObjectKey
    outcome: Verdict
    message: str | None = None
    policy: Literal["gang", "basic"] | None = None
    min_count: int | None = None
    placed_before: int = 0
    members: dict[ObjectKey, MemberAnswer] = dataclasses.field(default_factory=dict)
    shared: dict[str, AllocationResult] = dataclasses.field(default_factory=dict)
    preemption: GroupPreemptionAnswer | None = None
    notes: list[str] = dataclasses.field(default_factory=list)
    #: A topology-constrained group's key, domains and the one chosen.
    topology_key: str | None = None
    domain: str | None = None
    domains: list[DomainAnswer] = dataclasses.field(default_factory=list)
    #: A PodGroup of a tree (CompositePodGroup): every group of the tree, its root first.
    tree: list[TreeGroupAnswer] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class TreeGroupAnswer:
    """One group of a tree: ``ref`` (``podgroup/NS/NAME`` or ``compositepodgroup/NS/NAME``),
    its depth (the root's is 0), ``placed`` (a PodGroup whose pods are placed), ``fits`` (a
    CompositePodGroup whose subtree is placed), ``unschedulable`` (with its status), and its
    domain where it has a topology key and one was chosen."""

    ref: str
    depth: int
    outcome: Literal["placed", "fits", "unschedulable"]
    message: str | None = None
    domain: str | None = None


#: What assuming a placement replaced in the working copy (None: nothing was there).
Replaced = tuple[tuple[ObjectKey, Pod | None], dict[ObjectKey, ResourceClaim | None]]


@dataclasses.dataclass(eq=False)
class _Assumed:
    """A placement assumed in the working copy (``group_cycle.Assumed``)."""

    ready: Ready
    fit: NodeFit
    working: Snapshot
    replaced: Replaced

    @property
    def key(self) -> ObjectKey:
        return self.ready.key

    def undo(self) -> None:
        _unassume(self.working, self.replaced)


class _Host:
    """The group's cycle on ``working`` (``group_cycle.Host``): each pod prepared, its
    snapshot taken and filtered as ``engine`` does for a single pod (the PodGroup given where
    its claims are the pods', as the scheduler gives it), each placement assumed in memory."""

    def __init__(
        self,
        working: Snapshot,
        options: Options,
        now: datetime.datetime,
        monotonic: Callable[[], float],
        group: PodGroup | None,
        tree: Mapping[str, PodGroup] | None = None,
    ) -> None:
        self.working = working
        self.options = options
        self.now = now
        self.clock = monotonic
        self.group = group
        #: A tree's PodGroups by name: each pod prepared with its own (claims on).
        self.tree = tree
        #: Each pod's last preparation (its notes, the claims it freed in memory).
        self.prepared: dict[ObjectKey, PreparedPod] = {}

    @property
    def features(self) -> Features:
        return self.options.profile.features

    def prepare(self, pod: Pod) -> Prepared:
        key = key_of(pod)
        group = self.tree.get(group_name(pod) or "") if self.tree is not None else self.group
        got = engine.prepare_pod(self.working, key, self.options, self.now, group)
        self.prepared[key] = got
        return got.prepared

    def snapshot(self, ready: Ready) -> Attempt:
        released = self.prepared[ready.key].released
        return engine.attempt_of(self.working, ready, self.options, released)

    def state(self) -> AllocatedState:
        return engine.allocated_state(self.working, self.options.profile)

    async def filter(self, attempt: Attempt, *, every_fit: bool = False) -> Filtered | None:
        return engine.filter_attempt(self.working, attempt, self.options, self.clock)

    def assume(self, attempt: Attempt, fit: NodeFit) -> _Assumed:
        replaced = _assume(self.working, attempt.ready, fit, self.now)
        return _Assumed(attempt.ready, fit, self.working, replaced)

    def began(self, key: ObjectKey) -> None:
        pass

    def nodes(self) -> Sequence[Node]:
        return sorted(self.working.nodes.values(), key=lambda n: n.metadata.name or "")

    def allocator(self) -> Allocator:
        return engine.allocator_of(self.working, self.options.profile, self.state())

    def monotonic(self) -> float:
        return self.clock()


def group_answer(
    snapshot: Snapshot,
    key: ObjectKey,
    options: Options,
    now: datetime.datetime,
    monotonic: Callable[[], float] = time.monotonic,
) -> GroupAnswer:
    """The scheduler's cycle for the PodGroup ``key`` of the snapshot. The snapshot is left
    as it is: what the cycle assumes lives in a working copy."""
    group = snapshot.pod_groups.get(key)
    members = _members(snapshot, key)
    off = _groups_off(options, key, group, members)
    if off is not None:
        return off
    if group is None:
        waiting = f" ({len(members)} pods name it: the scheduler keeps them waiting)"
        raise InputError(f"PodGroup {key} is not in the input{waiting if members else ''}")
    group = _with_uid(group)
    if group.spec.parent_composite_pod_group_name and options.profile.composite:
        return _tree_answer(snapshot, key, group, options, now, monotonic)
    answer = _empty(key, "success", group)
    bound = [p for p in members if p.spec.node_name]
    answer.placed_before = len(bound)
    queued = ordered(
        [p for p in members if not p.spec.node_name and not p.metadata.is_deleting], {}
    )
    reason = waits(group, key, len(members))
    refusal = refused(group, queued, bound, options.profile.group_rules) if reason is None else None
    error = refusal.message if refusal else None
    if reason is not None or error is not None:
        answer.outcome, answer.message = ("waiting", reason) if reason else ("error", error)
        for pod in queued:
            answer.members[key_of(pod)] = MemberAnswer(answer.outcome, message=error)
    elif not queued:
        answer.notes.append("every pod of the group is bound already: nothing to place")
    else:
        profile = options.profile
        working, group_claims = _group_claims(
            snapshot, group, queued, profile.group_claims, answer.notes
        )
        host = _Host(working, options, now, monotonic, group if profile.group_claims else None)
        _answer(answer, host, group, queued, group_claims)
    for pod in bound:
        answer.members[key_of(pod)] = MemberAnswer("bound", node=pod.spec.node_name)
    return answer


def _members(snapshot: Snapshot, key: ObjectKey) -> list[Pod]:
    """The pods that name the group, in its namespace, not finished (the scheduler's
    ``group_pods``), bound or not."""
    return [
        pod
        for pkey, pod in sorted(snapshot.pods.items())
        if pkey.namespace == key.namespace
        and group_name(pod) == key.name
        and pod.status.phase not in TERMINAL_PHASES
    ]


def _empty(key: ObjectKey, verdict: Verdict, group: PodGroup | None) -> GroupAnswer:
    if group is None:
        return GroupAnswer(key, verdict)
    policy: Literal["gang", "basic"] = "gang" if group.is_gang else "basic"
    return GroupAnswer(key, verdict, policy=policy, min_count=group.min_count)


def _groups_off(
    options: Options, key: ObjectKey, group: PodGroup | None, members: Sequence[Pod]
) -> GroupAnswer | None:
    """Groups off (before 1.37, or GenericWorkload off): every pod of the group is
    Unschedulable with the scheduler's reason; None when groups are on."""
    why = options.profile.groups_off()
    if why is None:
        return None
    if group is None and not members:
        raise InputError(f"PodGroup {key} is not in the input, and no pod names it")
    answer = _empty(key, "unsatisfiable", group)
    answer.message = f"PodGroup {key}: {why}"
    for pod in ordered(members, {}):
        member = MemberAnswer("unschedulable", message=not_placed(pod, why))
        answer.members[key_of(pod)] = (
            MemberAnswer("bound", node=pod.spec.node_name) if pod.spec.node_name else member
        )
    return answer


def _with_uid(group: PodGroup) -> PodGroup:
    """The group with a uid (one made up for a file's object, as ``pod_answer`` does for a
    pod): its claims' owner and reservations name it."""
    if group.metadata.uid:
        return group
    body = group.dump()
    body["metadata"]["uid"] = f"simulated-{group.metadata.namespace}-{group.metadata.name}"
    return PodGroup.load(body)


def _group_claims(
    snapshot: Snapshot,
    group: PodGroup,
    queued: Sequence[Pod],
    with_claims: bool,
    notes: list[str],
) -> tuple[Snapshot, list[ObjectKey]]:
    """A working copy where the group's claims are there and named in its pods' status, as
    the claim controllers would leave them (DRAWorkloadResourceClaims on): a template entry
    with no claim yet gets one, in memory, once for the group. Also the group claims' keys."""
    working = _copy(snapshot)
    if not with_claims:
        return working, []
    namespace = group.metadata.namespace or ""
    names: dict[str, str | None] = {}  # the group's entry -> its claim's name
    for entry in group.spec.resource_claims:
        known, name = group.claim_name(entry)
        if not known and entry.resource_claim_template_name:
            name = _generated_for_group(working, group, entry, notes)
        names[entry.name or ""] = name
    for pod in queued:
        statuses = [s.dump() for s in pod.status.resource_claim_statuses]
        for own in pod.spec.resource_claims:
            if is_group_claim(own, group) and not pod.claim_status(own)[0]:
                claim = names.get(own.name or "")
                statuses.append({"name": own.name, "resourceClaimName": claim})
        body = pod.dump()
        body.setdefault("status", {})["resourceClaimStatuses"] = statuses
        working.pods[key_of(pod)] = Pod.load(body)
    return working, [ObjectKey(namespace, n) for n in names.values() if n]


def _generated_for_group(
    working: Snapshot, group: PodGroup, entry: PodGroupResourceClaim, notes: list[str]
) -> str:
    """The claim kube-controller-manager would generate for the group's template entry, added
    to ``working`` under ``<generateName>simulated``; its name."""
    namespace = group.metadata.namespace or ""
    template_name = entry.resource_claim_template_name or ""
    template = working.templates.get(ObjectKey(namespace, template_name))
    if template is None:
        raise InputError(
            f"PodGroup {group.metadata.key}: ResourceClaimTemplate {namespace}/{template_name} "
            f"of entry {entry.name} (spec.resourceClaims) is not in the input"
        )
    body = claim_from_template(group, entry.name or "", template)
    name = f"{body['metadata'].pop('generateName')}simulated"
    body["metadata"]["name"] = name
    working.claims[ObjectKey(namespace, name)] = ResourceClaim.load(body)
    notes.append(
        f"claim {namespace}/{name} generated in memory for PodGroup {group.metadata.key} from "
        f"template {template_name} (entry {entry.name}); the group's pods share it"
    )
    return name


def _copy(snapshot: Snapshot) -> Snapshot:
    """A working copy: what a cycle assumes replaces its pods and claims, never the input's."""
    return dataclasses.replace(snapshot, pods=dict(snapshot.pods), claims=dict(snapshot.claims))


def _answer(
    answer: GroupAnswer,
    host: _Host,
    group: PodGroup,
    queued: Sequence[Pod],
    group_claims: Sequence[ObjectKey],
) -> None:
    """The group's cycle and what follows it, as the scheduler's: while nothing is placed and
    a group claim is allocated where none of its pods can go, that claim is deallocated (in
    memory) and the cycle runs again, as the scheduler's next one would; then, when it still
    places nothing, the group's preemption."""
    profile = host.options.profile
    working = host.working
    for claim_key in group_claims:  # allocated before the cycle
        claim = working.claims.get(claim_key)
        if claim is not None and claim.status.allocation is not None:
            answer.shared[claim.key] = claim.status.allocation
    rules = profile.topology
    if rules is not None:
        answer.topology_key = group.topology_key
    for _ in range(len(group_claims) + 1):
        try:
            cycle = _cycle(answer, host, group, queued)
        except DomainError as e:
            assert rules is not None
            answer.outcome, answer.message = "error", str(e)
            each = e.told(rules, answer.group.name)
            for member in queued:
                answer.members[key_of(member)] = MemberAnswer("error", message=each)
            return
        _domains(answer, cycle)
        if not cycle.stranded:
            break
        for claim in cycle.stranded:
            working.claims[ObjectKey.parse(claim.key)] = deallocated(claim)
            answer.shared.pop(claim.key, None)
            answer.notes.append(
                f"claim {claim.key} of PodGroup {answer.group} is allocated where none of its "
                "pods can go: the scheduler deallocates it (PodGroupPostFilter) and tries the "
                "group again"
            )
    placement = cycle.placement
    tried = [*placement.evaluated, *([key_of(placement.waiting[0])] if placement.waiting else [])]
    for mkey in tried:
        answer.notes += [f"pod {mkey}: {n}" for n in host.prepared[mkey].notes]
    if placement.waiting is not None:
        pod, prepared = placement.waiting
        waiting = key_of(pod)
        # simulate's preparation applies every write in memory: what is left waits.
        reason = prepared.reason if isinstance(prepared, Wait | SharedDevice) else ""
        answer.outcome, answer.message = "waiting", f"pod {waiting} waits: {reason}"
        for member in queued:
            own = reason if key_of(member) == waiting else None
            answer.members[key_of(member)] = MemberAnswer("waiting", message=own)
        return
    if cycle.succeeded:
        _placed(answer, cycle, queued)
        return
    said = None
    if not cycle.stranded and profile.preemption is not None:
        constrained = rules is not None and group.topology_key is not None
        domains = [t.domain for t in cycle.domains] if constrained else None
        said = group_preemption.PREFIX + _preempt(answer, host, group, queued, domains)
    message, told = cycle.told([key_of(m) for m in queued], said)
    answer.outcome, answer.message = "unsatisfiable", message
    evaluated = set(placement.evaluated)
    for member in queued:
        mkey = key_of(member)
        outcome: MemberOutcome = (
            "not-tried"
            if mkey not in evaluated
            else "unschedulable"
            if mkey in placement.failed
            else "fits"
        )
        answer.members[mkey] = MemberAnswer(outcome, message=told[mkey])


def _cycle(
    answer: GroupAnswer, host: _Host, group: PodGroup, queued: Sequence[Pod]
) -> Cycle[_Assumed]:
    """One cycle of the group, as the scheduler's (``group_cycle.run_group``)."""
    profile = host.options.profile
    bound = {
        key_of(p): p.spec.node_name or ""
        for p in _members(host.working, answer.group)
        if p.spec.node_name
    }
    return _to_the_end(
        group_cycle.run_group(
            host,
            group,
            queued,
            bound,
            rules=profile.topology,
            nominated={n for p in queued if (n := p.status.nominated_node_name)},
            count_devices=profile.policies.domain_device_count,
            gang_search=profile.gang_search,
            search_timeout=profile.search_timeout,
            fit_errors=profile.group_rules.fit_errors,
        )
    )


def _domains(answer: GroupAnswer, cycle: Cycle[_Assumed]) -> None:
    """Each domain the cycle considered, and what it found there."""
    answer.domain = cycle.domain
    answer.domains = []
    for tried in cycle.domains:
        name, nodes = tried.domain.name, len(tried.domain.nodes)
        if tried.ruled_out is not None:
            answer.domains.append(DomainAnswer(name, nodes, "ruled-out", message=tried.ruled_out))
            continue
        assert tried.cycle is not None
        verdict = tried.cycle.verdict
        failed = dict(tried.cycle.placement.failed)
        filtered = len(tried.cycle.placement.evaluated)
        if tried.fits:
            outcome: Literal["chosen", "fits"] = "chosen" if name == cycle.domain else "fits"
            answer.domains.append(
                DomainAnswer(name, nodes, outcome, tried.pods, failed=failed, filtered=filtered)
            )
        else:
            message = verdict.message if verdict is not None else None
            answer.domains.append(
                DomainAnswer(
                    name, nodes, "unschedulable", message=message, failed=failed, filtered=filtered
                )
            )
    for domain in cycle.untried:
        answer.domains.append(DomainAnswer(domain.name, len(domain.nodes), "not-tried"))


def _placed(answer: GroupAnswer, cycle: Cycle[_Assumed], queued: Sequence[Pod]) -> None:
    """The group placed: each placed pod's node and its own claims' allocations (the group's
    are the answer's); the pods left out of it, told their own reason or nothing."""
    if cycle.greedy is not None:
        answer.notes.append(
            "placed by searching the pods' prioritized alternatives and other nodes "
            f"(--gang-search; without it: {cycle.greedy.message})"
        )
    placed = {a.key: a for a in cycle.placement.assumed}
    for assumed in placed.values():
        for claim_key, allocation in assumed.fit.results.items():
            if claim_key in assumed.ready.shared:
                answer.shared.setdefault(claim_key, allocation)
    failed = cycle.placement.failed
    for member in queued:
        mkey = key_of(member)
        found = placed.get(mkey)
        if found is not None:
            allocations = _own(found.ready, found.fit)
            answer.members[mkey] = MemberAnswer(
                "placed", node=found.fit.node, allocations=allocations
            )
        elif mkey in failed:
            answer.members[mkey] = MemberAnswer("unschedulable", message=failed[mkey])
        else:
            answer.members[mkey] = MemberAnswer("left-out")


def _preempt(
    answer: GroupAnswer,
    host: _Host,
    group: PodGroup,
    queued: Sequence[Pod],
    placements: Sequence[Domain] | None,
) -> str:
    """The group's preemption on the snapshot (``group_preemption.preempt``), as the
    scheduler's: nothing in flight (no evictions awaited, no victims' claims to release);
    what it would do goes into the answer."""
    working, options = host.working, host.options
    priority = preemption.group_priority(group)
    decided = _to_the_end(
        group_preemption.preempt(
            host,
            group,
            queued,
            answer.placed_before,
            classes=working.priority_classes,
            policy=options.profile.group_rules.policy,
            victims_gone=False,
            lower=engine.lower_priority_pods(working, options, priority),
            nominated={n for p in queued if (n := p.status.nominated_node_name)},
            budgets=[preemption.Budget.of(b) for b in working.budgets.values()],
            now=host.now,
            placements=placements,
            fit_errors=options.profile.group_rules.fit_errors,
            release=options.profile.topology.release if options.profile.topology else None,
        )
    )
    return _preemption_answer(answer, decided, priority)


def _preemption_answer(
    answer: GroupAnswer, decided: group_preemption.GroupPreemption, priority: int
) -> str:
    """What the preemption would do, into the answer; its message."""
    if decided.victims:
        outcome: Literal["victims", "none", "not-eligible"] = "victims"
    elif decided.message in (preemption.NEVER, group_preemption.ONGOING):
        outcome = "not-eligible"
    else:
        outcome = "none"
    answer.preemption = GroupPreemptionAnswer(
        outcome,
        decided.message,
        priority,
        victims=[(v.key, v.pod.spec.node_name or "", v.priority) for v in decided.evicted],
        nominations={str(k): f.node for k, f in decided.fits.items()},
    )
    return decided.message


T = TypeVar("T")


def _to_the_end(coroutine: Coroutine[Any, Any, T]) -> T:
    """A cycle's coroutine, run here to its end: the host's filter is computed, never awaited,
    so it never suspends (no event loop is needed)."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    coroutine.close()
    raise AssertionError("the pod group cycle suspended")  # pragma: no cover


def _assume(working: Snapshot, ready: Ready, fit: NodeFit, now: datetime.datetime) -> Replaced:
    """Reserve in the working copy, as the scheduler's ``reserve.assume``: the pod bound to
    its node (its requests count there), its claims allocated and reserved as Reserve writes
    them, so that the pods after it see its node usage and devices, and a group claim is
    allocated once. Returns what it replaced (``_unassume`` puts it back)."""
    claims, results = list(ready.claims), dict(fit.results)
    if fit.extended is not None:  # the special claim (KEP-5004), under a name of its own
        special = fit.extended.named(f"{fit.extended.claim.metadata.generate_name}simulated")
        in_memory = fit.extended.claim.key
        results = {(special.key if k == in_memory else k): r for k, r in results.items()}
        claims.append(special)
    replaced: dict[ObjectKey, ResourceClaim | None] = {}
    for _, claim, _ in reserved_claims(
        ready.pod, claims, results, now, group=ready.group, shared=ready.shared
    ):
        key = ObjectKey.parse(claim.key)
        replaced[key] = working.claims.get(key)
        working.claims[key] = claim
    body = ready.pod.dump()
    body["spec"]["nodeName"] = fit.node
    # As the scheduler's assume: the claims' node resources (DRANodeAllocatableResources)
    # count for the pod from here on.
    shares = dump_statuses(fit.node_allocatable)
    if shares:
        body.setdefault("status", {})[NODE_ALLOCATABLE_FIELD] = shares
    elif NODE_ALLOCATABLE_FIELD in (body.get("status") or {}):
        del body["status"][NODE_ALLOCATABLE_FIELD]
    pod_key = key_of(ready.pod)
    before = working.pods.get(pod_key)
    working.pods[pod_key] = Pod.load(body)
    return (pod_key, before), replaced


def _unassume(working: Snapshot, replaced: Replaced) -> None:
    """``_assume`` undone: what it replaced put back."""
    (pod_key, pod), claims = replaced
    if pod is None:
        working.pods.pop(pod_key, None)
    else:
        working.pods[pod_key] = pod
    for key, claim in claims.items():
        if claim is None:
            working.claims.pop(key, None)
        else:
            working.claims[key] = claim


def _own(ready: Ready, fit: NodeFit) -> dict[str, AllocationResult]:
    """The pod's own claims' allocations on ``fit``'s node (those it has, and those it gets),
    its special claim under the name the answer gives it before creation."""
    own = {
        c.key: c.status.allocation
        for c in ready.claims
        if c.status.allocation is not None and c.key not in ready.shared
    }
    for key, allocation in fit.results.items():
        if key in ready.shared:
            continue
        if fit.extended is not None and key == fit.extended.claim.key:
            namespace = ready.pod.metadata.namespace
            key = f"{namespace}/{fit.extended.claim.metadata.generate_name}*"
        own[key] = allocation
    return own


# --- trees of groups (CompositePodGroup) ---------------------------------------------------------


def _tree_answer(
    snapshot: Snapshot,
    key: ObjectKey,
    group: PodGroup,
    options: Options,
    now: datetime.datetime,
    monotonic: Callable[[], float],
) -> GroupAnswer:
    """The cycle of the tree PodGroup ``key`` is a leaf of (``scheduling.composite``), as the
    scheduler's ``trees``: the answer is ``key``'s pods, and every group of the tree."""
    answer = _empty(key, "success", group)
    namespace = key.namespace
    composites = {
        k.name: c for k, c in snapshot.composite_groups.items() if k.namespace == namespace
    }
    parent = group.spec.parent_composite_pod_group_name or ""
    root, chain = composite.root_name(parent, composites)
    if root is None:
        missing = f"CompositePodGroup {namespace}/{chain[-1]} is not in the input: the tree waits"
        return _all(answer, snapshot, "waiting", missing)
    working, leaves, bound = _tree_leaves(snapshot, namespace, options, answer.notes)
    tree = composite.build(composites[root], list(composites.values()), leaves)
    answer.notes.append(
        f"PodGroup {key} is in the tree of CompositePodGroup {namespace}/{root}: "
        "the tree is placed in one cycle"
    )
    why = composite.waits(tree)
    rules = options.profile.group_rules
    refusal = composite.refused(
        tree, bound, hierarchy=rules.hierarchy, gated=rules.policy != "pods"
    )
    if why is not None or refusal is not None:
        return _all(answer, snapshot, "waiting" if why else "error", why or refusal)
    topology_rules = options.profile.topology
    assert topology_rules is not None  # CompositePodGroup needs its gate
    by_name = {leaf.key.name: leaf.group for leaf in composite.leaves(tree)}
    claims = by_name if options.profile.group_claims else None
    host = _Host(working, options, now, monotonic, None, claims)
    settings = composite.Settings(
        topology_rules,
        count_devices=options.profile.policies.domain_device_count,
        gang_search=options.profile.gang_search,
        search_timeout=options.profile.search_timeout,
    )
    try:
        cycle = _to_the_end(composite.run_tree(host, tree, settings))
    except DomainError as e:
        return _all(answer, snapshot, "error", str(e))
    if cycle.waiting is not None:
        pod, prepared = cycle.waiting
        reason = prepared.reason if isinstance(prepared, Wait | SharedDevice) else ""
        return _all(answer, snapshot, "waiting", f"pod {key_of(pod)} waits: {reason}")
    _tree_members(answer, snapshot, tree, cycle, host, settings)
    return answer


def _all(
    answer: GroupAnswer, snapshot: Snapshot, outcome: Verdict, message: str | None
) -> GroupAnswer:
    """Every pod of the group waits or is refused with the tree."""
    answer.outcome, answer.message = outcome, message
    member: MemberOutcome = "waiting" if outcome == "waiting" else "error"
    for pod in _members(snapshot, answer.group):
        if pod.spec.node_name:
            answer.members[key_of(pod)] = MemberAnswer("bound", node=pod.spec.node_name)
        else:
            each = message if outcome == "error" else None
            answer.members[key_of(pod)] = MemberAnswer(member, message=each)
    return answer


def _tree_leaves(
    snapshot: Snapshot, namespace: str, options: Options, notes: list[str]
) -> tuple[Snapshot, dict[ObjectKey, composite.Leaf], dict[ObjectKey, list[Pod]]]:
    """The working copy with each PodGroup's claims there (as ``_group_claims``), each
    PodGroup with a parent as a leaf, and each one's bound pods."""
    working = _copy(snapshot)
    leaves: dict[ObjectKey, composite.Leaf] = {}
    bound: dict[ObjectKey, list[Pod]] = {}
    for gkey, pod_group in sorted(snapshot.pod_groups.items()):
        if gkey.namespace != namespace or not pod_group.spec.parent_composite_pod_group_name:
            continue
        pod_group = _with_uid(pod_group)
        members = _members(snapshot, gkey)
        queued = ordered(
            [p for p in members if not p.spec.node_name and not p.metadata.is_deleting], {}
        )
        working, _ = _group_claims(working, pod_group, queued, options.profile.group_claims, notes)
        placed = {key_of(p): p.spec.node_name or "" for p in members if p.spec.node_name}
        order = tuple(working.pods[key_of(p)] for p in queued)
        leaves[gkey] = composite.Leaf(pod_group, order, placed, len(members))
        bound[gkey] = [p for p in members if p.spec.node_name]
    return working, leaves, bound


def _tree_members(
    answer: GroupAnswer,
    snapshot: Snapshot,
    tree: composite.Composite,
    cycle: composite.TreeCycle[_Assumed],
    host: _Host,
    settings: composite.Settings,
) -> None:
    """The asked PodGroup's pods, and every group of the tree, from the tree's cycle (and
    its preemption when it is not placed)."""
    options = host.options
    rules = options.profile.topology
    assert rules is not None
    said = None
    if not cycle.succeeded and options.profile.preemption is not None:
        said = group_preemption.PREFIX + _preempt_tree(answer, host, tree, settings)
    _tree_groups(answer, tree, cycle, rules, said)
    mine = next(leaf for leaf in composite.leaves(tree) if leaf.key == answer.group)
    placed = {leaf.key: c for leaf, c in cycle.placed()}
    if mine.key in placed:
        _placed(answer, placed[mine.key], mine.order)
    else:
        told = composite.told(cycle, rules, said)
        answer.outcome = "unsatisfiable"
        answer.message = composite.condition_of(cycle, mine.ref, rules, said)
        own = cycle.outcomes.get(mine.ref)
        own_cycle = own.cycle if own is not None and own.inherited is None else None
        for pod in mine.order:
            pkey = key_of(pod)
            outcome: MemberOutcome = "fits"
            if own_cycle is not None and pkey in own_cycle.placement.failed:
                outcome = "unschedulable"
            elif own_cycle is not None and pkey not in own_cycle.placement.evaluated:
                outcome = "not-tried"
            answer.members[pkey] = MemberAnswer(outcome, message=told.get(pkey))
    for pod in _members(snapshot, answer.group):
        if pod.spec.node_name:
            answer.members[key_of(pod)] = MemberAnswer("bound", node=pod.spec.node_name)


def _preempt_tree(
    answer: GroupAnswer, host: _Host, tree: composite.Composite, settings: composite.Settings
) -> str:
    """The tree's preemption on the snapshot (``tree_preemption.preempt``), as the
    scheduler's, nobody evicted; what it would do goes into the answer."""
    working, options = host.working, host.options
    priority = tree.group.spec.priority or 0
    queued = [p for leaf in composite.leaves(tree) for p in leaf.order]
    decided = _to_the_end(
        tree_preemption.preempt(
            host,
            tree,
            settings,
            classes=working.priority_classes,
            policy=options.profile.group_rules.policy,
            victims_gone=False,
            lower=engine.lower_priority_pods(working, options, priority),
            nominated={n for p in queued if (n := p.status.nominated_node_name)},
            budgets=[preemption.Budget.of(b) for b in working.budgets.values()],
            now=host.now,
        )
    )
    return _preemption_answer(answer, decided, priority)


def _tree_groups(
    answer: GroupAnswer,
    tree: composite.Composite,
    cycle: composite.TreeCycle[_Assumed],
    rules: topology.TopologyRules,
    said: str | None,
) -> None:
    """Every group of the tree: placed (a PodGroup), fits (a CompositePodGroup), or
    unschedulable with its status; its domain."""
    placed = {leaf.key for leaf, _ in cycle.placed()}
    for node, depth in composite.walk(tree):
        outcome = cycle.outcomes.get(node.ref)
        if outcome is None:
            continue
        done: Literal["placed", "fits", "unschedulable"]
        if isinstance(node, composite.Leaf):
            done = "placed" if node.key in placed else "unschedulable"
        else:
            done = "fits" if cycle.succeeded and outcome.fits else "unschedulable"
        message = (
            composite.condition_of(cycle, node.ref, rules, said)
            if done == "unschedulable"
            else None
        )
        answer.tree.append(TreeGroupAnswer(node.ref, depth, done, message, outcome.domain))
