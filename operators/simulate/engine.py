"""The scheduler's answer for one pod, from a snapshot: its own code, not a copy of it.

``pod_answer`` does what ``Scheduler.schedule`` does, with nothing written: the attempt
prepared by ``scheduling.attempt.prepare`` (a claim not yet generated from its template is
generated in memory first, as the claim-template controller would; what the scheduler would
write before trying again, a stale special claim deleted or failed binding conditions undone,
is applied in memory and the pod prepared again), node usage from the bound pods, the
allocator over every allocated claim, ``run_cycle`` with the same policies and the same filter
timeout, the nominated node preferred, upstream's PostFilter (a claim no node can use, held
by nobody else, is deallocated and the pod tried again), and then preemption
(``scheduling.preemption``): which pods would be evicted from which node, and what their
eviction frees, without evicting anybody. A pod held by scheduling gates is answered as if
they were lifted. ``node_answer`` answers the narrower question "do these claims fit on this
node together".

A pod of a PodGroup is placed in its group's cycle: ``simulate.group`` (``--pod-group``) runs
the scheduler's cycle (``scheduling.group_cycle``) with this module's steps for each of its pods
(``prepare_pod``, ``attempt_of``, ``filter_attempt``: the PodGroup given, no PostFilter of their
own) and the group's preemption on the same snapshot (``lower_priority_pods``).

Extended resources backed by DRA (KEP-5004, gate DRAExtendedResource): a container's
``example.com/gpu: 1`` that a DeviceClass backs is allocated as the scheduler's special claim
on nodes that do not advertise it; the answer names that claim ``<pod>-extended-resources-*``
(the API server picks the suffix when the scheduler creates it at binding) and gives its
container -> request mappings. A special claim of an earlier attempt, allocated and reserved
for the pod, is used as it is; any other is left out, as the scheduler deletes it first.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Literal

from operators.allocator import (
    AllocatedState,
    Allocator,
    InvalidInputError,
    Outcome,
    OutOfTimeError,
    Status,
)
from operators.allocator.explain import ClaimBreakdown
from operators.allocator.selectors import CelSelectorEngine
from operators.api.claim_status import edited_status
from operators.api.core import ContainerExtendedResourceRequest, Node, Pod
from operators.api.features import DEFAULT_VERSION, KubernetesVersion, resolve
from operators.api.groups import PodGroup, group_name
from operators.api.keys import ObjectKey
from operators.api.names import TERMINAL_PHASES
from operators.api.resource import AllocationResult, ResourceClaim
from operators.api.templates import claim_from_template
from operators.cel import CELEnvironment
from operators.scheduling import preemption
from operators.scheduling.attempt import (
    Attempt,
    BindingFailed,
    DropStaleClaim,
    Ready,
    SharedDevice,
    Wait,
    deadline,
    prepare,
)
from operators.scheduling.cycle import (
    CycleResult,
    NodeFit,
    prefer_nominated,
    run_cycle,
    unschedulable_message,
)
from operators.scheduling.decision import Deallocate, Decision, Preempt, decide
from operators.scheduling.extended import (
    IN_MEMORY_NAME,
    ExtendedResources,
    class_mapping,
    find_special_claim,
    new_claim,
)
from operators.scheduling.node_allocatable import NodeAllocatableInput
from operators.scheduling.nodes import UsageTracker, bound_requests
from operators.scheduling.plugins.scores import counted_placement
from operators.scheduling.pod_filters import pre_filter
from operators.scheduling.preemption import RunningPod, members
from operators.scheduling.profile import Policies, Profile
from operators.scheduling.score import Score
from operators.simulate.snapshot import InputError, Snapshot

Verdict = Literal["success", "unsatisfiable", "waiting", "error"]
SIMULATED_SHARE_ID = "00000000-0000-0000-0000-000000000000"


@dataclasses.dataclass(frozen=True)
class Options:
    """What the answer is for: the scheduler's policies (its flags, ``kopf-dra run
    scheduler``'s), the cluster's release and gates, and ``--explain``."""

    policies: Policies = dataclasses.field(default_factory=Policies)
    explain: bool = False
    #: --feature-gates as given (checked for ``version``); the rest are that version's defaults.
    feature_gates: Mapping[str, bool] = dataclasses.field(default_factory=dict)
    #: The cluster's Kubernetes version: whose gate defaults (and behaviour) to answer with.
    version: KubernetesVersion = DEFAULT_VERSION

    @functools.cached_property
    def profile(self) -> Profile:
        """The scheduler's profile on that cluster, as the scheduler derives it."""
        return Profile.of(self.policies, self.version, resolve(self.feature_gates, self.version))


@dataclasses.dataclass
class NodeAnswer:
    outcome: Verdict
    reason: str | None = None
    score: Score | None = None
    allocations: dict[str, AllocationResult] = dataclasses.field(default_factory=dict)
    chosen: bool = False
    explanation: list[ClaimBreakdown] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class ExtendedAnswer:
    """The pod's special claim for extended resources on the chosen node (KEP-5004).

    ``claim``: its key in ``allocations``; ``<pod>-extended-resources-*`` until the scheduler
    creates it (``created`` False), its own name when an earlier attempt's is reused."""

    claim: str
    generate_name: str
    created: bool
    mappings: tuple[ContainerExtendedResourceRequest, ...]


@dataclasses.dataclass
class Answer:
    outcome: Verdict
    error: str | None = None
    node: str | None = None
    allocations: dict[str, AllocationResult] = dataclasses.field(default_factory=dict)
    reasons: list[str] = dataclasses.field(default_factory=list)
    nodes: dict[str, NodeAnswer] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    preemption: PreemptionAnswer | None = None
    extended: ExtendedAnswer | None = None


@dataclasses.dataclass
class PreemptionAnswer:
    """What the scheduler's preemption would do: nothing yet is evicted by ``simulate``."""

    outcome: Literal["victims", "none", "not-eligible"]
    message: str
    priority: int
    node: str | None = None
    victims: list[tuple[str, int, tuple[str, ...]]] = dataclasses.field(default_factory=list)


def allocated_state(
    snapshot: Snapshot, profile: Profile, leave_out: Collection[str] = ()
) -> AllocatedState:
    """Every device the snapshot's claims hold, but those of ``leave_out`` (claim keys: what
    the scheduler would have freed first)."""
    allocated = [c for c in snapshot.claims.values() if c.is_allocated and c.key not in leave_out]
    return AllocatedState.from_claims(allocated, profile.features)


def allocator_of(
    snapshot: Snapshot,
    profile: Profile,
    state: AllocatedState,
    out_of_time: Callable[[], bool] | None = None,
) -> Allocator:
    """The scheduler's allocator, on the snapshot's objects and ``state``."""
    return Allocator(
        profile.features,
        state,
        list(snapshot.classes.values()),
        list(snapshot.slices.values()),
        # The CEL of the cluster's release, as the scheduler's.
        CelSelectorEngine(CELEnvironment(kubernetes=str(profile.version.release))),
        share_ids=lambda: SIMULATED_SHARE_ID,
        # As the scheduler: without DRADeviceTaintRules it watches none.
        taint_rules=list(snapshot.taint_rules.values()) if profile.taint_rules else [],
        policy=profile.allocation_policy,
        out_of_time=out_of_time,
    )


def _usage(snapshot: Snapshot, leave_out: ObjectKey, node_allocatable: bool) -> UsageTracker:
    """What bound pods request per node, as the scheduler's cache counts it
    (``node_allocatable``: their claims' node resources too, DRANodeAllocatableResources)."""
    usage = UsageTracker()
    for key, pod in snapshot.pods.items():
        if key == leave_out or not pod.spec.node_name or pod.status.phase in TERMINAL_PHASES:
            continue
        requests = bound_requests(pod, node_allocatable)
        usage.observe(
            key,
            counted_placement(pod, pod.spec.node_name, requests, node_allocatable=node_allocatable),
        )
    return usage


def _generated(
    snapshot: Snapshot, pod: Pod, notes: list[str]
) -> tuple[Pod, dict[str, ResourceClaim]]:
    """The pod (with its claim statuses) and its namespace's claims, with a claim generated in
    memory for every template entry the claim-template controller has not served yet."""
    namespace = pod.metadata.namespace or ""
    claims = snapshot.claim_in(namespace)
    body = pod.dump()
    statuses = list((body.get("status") or {}).get("resourceClaimStatuses") or [])
    if not pod.metadata.uid:
        body["metadata"]["uid"] = f"simulated-{namespace}-{pod.metadata.name}"
    for entry in pod.spec.resource_claims:
        known, _ = pod.claim_status(entry)
        if known or not entry.resource_claim_template_name:
            continue
        template = snapshot.templates.get(ObjectKey(namespace, entry.resource_claim_template_name))
        if template is None:
            raise InputError(
                f"pod {pod.key}: ResourceClaimTemplate {namespace}/"
                f"{entry.resource_claim_template_name} of entry {entry.name} is not in the input"
            )
        generated = claim_from_template(Pod.load(body), entry.name or "", template)
        name = f"{generated['metadata'].pop('generateName')}simulated"
        generated["metadata"]["name"] = name
        claims[name] = ResourceClaim.load(generated)
        statuses.append({"name": entry.name, "resourceClaimName": name})
        notes.append(
            f"claim {namespace}/{name} generated in memory from template "
            f"{entry.resource_claim_template_name} (entry {entry.name})"
        )
    body.setdefault("status", {})["resourceClaimStatuses"] = statuses
    return Pod.load(body), claims


def _shown_name(pod: Pod) -> str:
    """The special claim's key before it exists: its generateName and a wildcard."""
    return f"{pod.metadata.namespace}/{pod.metadata.name}-extended-resources-*"


@dataclasses.dataclass(frozen=True)
class PreparedPod:
    """A pod's attempt prepared on the snapshot (``prepare_pod``): the pod as the scheduler
    would see it (claims generated from templates named in its status), what its preparation
    said (writes it would ask for applied in memory), the claims whose devices those writes
    free, and the notes on the way."""

    pod: Pod
    prepared: Wait | SharedDevice | Ready
    released: frozenset[str]
    notes: tuple[str, ...]


def prepare_pod(
    snapshot: Snapshot,
    key: ObjectKey,
    options: Options,
    now: datetime.datetime,
    group: PodGroup | None = None,
) -> PreparedPod:
    """The scheduler's PreEnqueue and PreFilter for the pod ``key`` (``attempt.prepare``):
    a claim not generated from its template yet is generated in memory, as the claim-template
    controller would; what the scheduler would write before trying again (a stale special
    claim deleted, failed binding conditions undone) is applied in memory and the pod
    prepared again. ``group``: the pod's PodGroup, whose claims are the pod's too."""
    pod = snapshot.pods.get(key)
    if pod is None:
        raise InputError(f"pod {key} is not in the input")
    if pod.spec.node_name:
        raise InputError(f"pod {key} is already bound to node {pod.spec.node_name}")
    notes: list[str] = []
    if pod.spec.scheduling_gates:
        gates = ", ".join(g.name or "" for g in pod.spec.scheduling_gates)
        notes.append(f"scheduling gates ({gates}) ignored: the answer is for when they are lifted")
    pod, namespace_claims = _generated(snapshot, pod, notes)
    prepared, released = _prepare(snapshot, pod, namespace_claims, options, now, notes, group)
    if isinstance(prepared, Ready) and prepared.extended is not None:
        notes.append(_extended_note(pod, prepared.extended))
    return PreparedPod(pod, prepared, frozenset(released), tuple(notes))


def attempt_of(
    snapshot: Snapshot, ready: Ready, options: Options, released: Collection[str] = ()
) -> Attempt:
    """What the pod's Filter runs on, as the scheduler's snapshot has it: every node (by
    name), their usage by the bound pods, and the devices the snapshot's claims hold but those
    ``released`` (no nominations: simulate knows of none)."""
    profile = options.profile
    return Attempt(
        ready,
        preemption.priority_of(ready.pod, snapshot.priority_classes),
        sorted(snapshot.nodes.values(), key=lambda n: n.metadata.name or ""),
        _usage(snapshot, ready.key, profile.node_allocatable).usage,
        allocated_state(snapshot, profile, released),
        filters=pre_filter(ready.pod, snapshot.plugins(ready.key), profile.plugins),
    )


def filter_attempt(
    snapshot: Snapshot,
    attempt: Attempt,
    options: Options,
    monotonic: Callable[[], float] = time.monotonic,
) -> tuple[CycleResult, NodeFit | None]:
    """Filter as the scheduler runs it, with the same policies and filter timeout: every node,
    every fit (best first), each node's own reason; the pod's nominated node preferred."""
    profile = options.profile
    ready = attempt.ready
    nominated = ready.pod.status.nominated_node_name
    assert attempt.state is not None
    allocator = (
        allocator_of(snapshot, profile, attempt.state, deadline(monotonic, profile.filter_timeout))
        if attempt.allocating
        else None
    )
    result = run_cycle(
        ready.pod,
        ready.claims,
        attempt.nodes,
        attempt.usage,
        allocator,
        scoring=profile.scoring,
        nominated=nominated,
        explain_all=True,
        extended=ready.extended,
        node_allocatable=(
            NodeAllocatableInput(
                list(snapshot.slices.values()),
                ready.group is not None,
                profile.features.since_1_38,
            )
            if profile.node_allocatable
            else None
        ),
        filters=attempt.filters,
    )
    return result, prefer_nominated(result, nominated)


def pod_answer(
    snapshot: Snapshot,
    key: ObjectKey,
    options: Options,
    now: datetime.datetime,
    monotonic: Callable[[], float] = time.monotonic,
) -> Answer:
    """The scheduler's answer for the pod ``key`` of the snapshot; ``monotonic`` measures
    the filter timeout, as the scheduler's clock does. A pod of a PodGroup is answered alone,
    with a note (its group's cycle: ``simulate.group``)."""
    prepared = prepare_pod(snapshot, key, options, now)
    notes = list(prepared.notes)
    if not isinstance(prepared.prepared, Ready):
        answer = Answer("waiting", error=prepared.prepared.reason, notes=notes)
    else:
        answer = _answer_ready(snapshot, prepared, options, now, monotonic)
    name = group_name(snapshot.pods[key])
    if name is not None:
        answer.notes.append(
            f"the pod names PodGroup {name!r}: the scheduler tries it in its group's cycle, "
            f"with the group's other pods (--pod-group {key.namespace}/{name}); this answer is "
            "for the pod alone"
        )
    return answer


def _answer_ready(
    snapshot: Snapshot,
    prepared: PreparedPod,
    options: Options,
    now: datetime.datetime,
    monotonic: Callable[[], float],
) -> Answer:
    """Filter, then what ``decide`` says, as the scheduler's attempts would go."""
    assert isinstance(prepared.prepared, Ready)
    pod, released, notes = prepared.pod, set(prepared.released), list(prepared.notes)
    attempt, result, fit, decision = _filter(
        snapshot, prepared.prepared, options, released, notes, monotonic
    )
    ready = attempt.ready
    answer = _answer(
        result, fit.node if fit is not None else None, ready.claims, attempt.nodes, notes
    )
    if ready.extended is not None:
        _show_extended(answer, pod, ready.extended, snapshot.nodes)
    if isinstance(decision, Preempt):
        answer.preemption = _preemption(
            snapshot, attempt, options, now, decision.better_than, monotonic
        )
        if answer.outcome == "unsatisfiable":
            answer.reasons = [
                f"{r} preemption: {answer.preemption.message}" for r in answer.reasons
            ]
    if result.timed_out:
        notes.append(
            "the allocation did not finish within the filter timeout "
            f"({options.policies.filter_timeout:g}s, --filter-timeout): the scheduler retries "
            "the pod with backoff"
        )
    if options.explain and ready.allocating:
        _explain(snapshot, answer, ready, options, released)
    return answer


def _prepare(
    snapshot: Snapshot,
    pod: Pod,
    claims: dict[str, ResourceClaim],
    options: Options,
    now: datetime.datetime,
    notes: list[str],
    group: PodGroup | None = None,
) -> tuple[Wait | SharedDevice | Ready, set[str]]:
    """``attempt.prepare`` until it says what the attempt does; what the scheduler would
    write first is applied to ``claims`` in memory. Also the keys of the claims whose devices
    that frees."""
    released: set[str] = set()
    profile = options.profile
    classes = class_mapping(snapshot.classes.values()) if profile.extended else None
    for _ in range(len(claims) + 2):
        prepared = prepare(
            pod,
            claims,
            now=now,
            binding_timeout=profile.binding_timeout,
            extended_classes=classes,
            special_claim=lambda p: find_special_claim(p, claims.values()),
            group=group,
        )
        if isinstance(prepared, DropStaleClaim):
            stale = prepared.claim
            claims.pop(stale.metadata.name or "", None)
            released.add(stale.key)  # deleted by the scheduler: its devices are free
            notes.append(
                f"claim {stale.key} for extended resources is not allocated and reserved for "
                "the pod: the scheduler deletes it and tries again"
            )
        elif isinstance(prepared, BindingFailed):
            for claim in prepared.released:
                claims[claim.metadata.name or ""] = claim
                if not claim.is_allocated:
                    released.add(claim.key)
            notes.append(f"{prepared.message}: the scheduler deallocates it and tries again")
        else:
            return prepared, released
    raise AssertionError("each round drops a claim or a reservation")  # pragma: no cover


def _extended_note(pod: Pod, extended: ExtendedResources) -> str:
    backed = ", ".join(f"{r} (DeviceClass {c})" for r, c in sorted(extended.backed.items()))
    special = extended.existing.key if extended.existing is not None else _shown_name(pod)
    return (
        f"extended resources backed by DRA: {backed}; on a node that does not advertise "
        f"them the pod's special claim {special} serves them (reasons name it "
        f"{pod.metadata.namespace}/{IN_MEMORY_NAME}, the scheduler's name before creation)"
    )


def _filter(
    snapshot: Snapshot,
    ready: Ready,
    options: Options,
    released: set[str],
    notes: list[str],
    monotonic: Callable[[], float],
) -> tuple[Attempt, CycleResult, NodeFit | None, Decision]:
    """Filter and the decision after it, as the scheduler's attempts would go: a claim
    stranded where no node can use it is deallocated (in memory) and the pod tried again."""
    # The scheduler's decision after each cycle (``scheduling.decision``), from the snapshot:
    # nothing is being written, and no victim of an earlier preemption is awaited.
    for _ in range(len(ready.claims) + 1):
        attempt = attempt_of(snapshot, ready, options, released)
        result, fit = filter_attempt(snapshot, attempt, options, monotonic)
        decision = decide(
            ready.pod, ready.claims, result, fit, preemption=options.profile.preemption
        )
        if not isinstance(decision, Deallocate):
            break
        stranded = decision.claim
        claims = tuple(deallocated(c) if c is stranded else c for c in ready.claims)
        ready = dataclasses.replace(ready, claims=claims)
        released.add(stranded.key)
        notes.append(
            f"claim {stranded.key} is allocated where no node can use it: the scheduler "
            "deallocates it (PostFilter) and tries again"
        )
    return attempt, result, fit, decision


def _explain(
    snapshot: Snapshot, answer: Answer, ready: Ready, options: Options, released: set[str]
) -> None:
    """--explain: per node that fits nowhere (and the chosen one), which classes, selectors
    and checks eliminated which devices."""
    state = allocated_state(snapshot, options.profile, released)
    allocator = allocator_of(snapshot, options.profile, state)
    unallocated = [c for c in ready.claims if not c.is_allocated]
    for name, node_answer in answer.nodes.items():
        if node_answer.outcome == "unsatisfiable" or node_answer.chosen:
            node = snapshot.nodes[name]
            node_claim = new_claim(ready.extended, node)
            here = [*unallocated, node_claim.claim] if node_claim else unallocated
            node_answer.explanation = [
                dataclasses.replace(b, claim=_renamed(b.claim, ready.pod))
                for b in allocator.breakdown(node, here)
            ]


def _renamed(key: str, pod: Pod) -> str:
    """A claim key as the answer shows it: the special claim's in-memory key renamed."""
    in_memory = f"{pod.metadata.namespace}/{IN_MEMORY_NAME}"
    return _shown_name(pod) if key == in_memory else key


def _show_extended(
    answer: Answer, pod: Pod, extended: ExtendedResources, nodes: Mapping[str, Node]
) -> None:
    """The special claim in the answer: under its shown name in every allocation, and its
    mappings on the chosen node (none where the node advertises every resource itself)."""
    answer.allocations = {_renamed(k, pod): v for k, v in answer.allocations.items()}
    for node_answer in answer.nodes.values():
        node_answer.allocations = {_renamed(k, pod): v for k, v in node_answer.allocations.items()}
    if answer.node is None:
        return
    node_claim = extended.for_node(nodes[answer.node])
    if node_claim is None:
        return
    existing = extended.existing
    answer.extended = ExtendedAnswer(
        claim=existing.key if existing is not None else _shown_name(pod),
        generate_name=node_claim.claim.metadata.generate_name or "",
        created=existing is not None,
        mappings=node_claim.mappings,
    )


def lower_priority_pods(
    snapshot: Snapshot, options: Options, priority: int, preemptor: ObjectKey | None = None
) -> dict[str, list[RunningPod]]:
    """The snapshot's bound pods of lower priority than ``priority``, by node, each with the
    claims allocated and reserved for it (``preemption.lower_priority_pods``, as the
    scheduler's preemptor collects them from its cache)."""

    def pod_group(other: Pod) -> PodGroup | None:
        return snapshot.pod_groups.get(
            ObjectKey(other.metadata.namespace or "", group_name(other) or "")
        )

    def held(other: Pod) -> tuple[ResourceClaim, ...]:
        namespace = other.metadata.namespace or ""
        return tuple(
            c
            for name in sorted(other.claim_names())
            if (c := snapshot.claims.get(ObjectKey(namespace, name))) is not None
            and c.is_allocated
            and c.is_reserved_for(other.metadata.uid or "")
        )

    bound = (
        other
        for key, other in sorted(snapshot.pods.items())
        if other.spec.node_name and other.status.phase not in TERMINAL_PHASES and key != preemptor
    )
    groups = pod_group if options.profile.groups else None
    return preemption.lower_priority_pods(bound, priority, snapshot.priority_classes, groups, held)


def _preemption(
    snapshot: Snapshot,
    attempt: Attempt,
    options: Options,
    now: datetime.datetime,
    better_than: int | None,
    monotonic: Callable[[], float],
) -> PreemptionAnswer:
    """The scheduler's preemption on the snapshot: eligibility, then the victims' search
    (with a filter timeout of its own, as the scheduler's) on the state the cycle saw."""
    ready, priority, profile = attempt.ready, attempt.priority, options.profile
    pod = ready.pod
    lower = lower_priority_pods(snapshot, options, priority.value, ready.key)
    nominated = pod.status.nominated_node_name
    reason = preemption.eligibility(
        priority, nominated, lower.get(nominated, ()) if nominated else ()
    )
    if reason is not None:
        return PreemptionAnswer("not-eligible", reason, priority.value)
    assert attempt.state is not None
    allocator = allocator_of(
        snapshot, profile, attempt.state, deadline(monotonic, profile.filter_timeout)
    )
    try:
        result = preemption.preempt(
            pod,
            priority=priority,
            claims=ready.claims,
            nodes=attempt.nodes,
            usage=attempt.usage,
            on_node=lower,
            allocator=allocator if ready.allocating else None,
            budgets=[preemption.Budget.of(b) for b in snapshot.budgets.values()],
            now=now,
            features=profile.features,
            alternatives=profile.policies.preemption_alternatives,
            better_than=better_than,
            extended=ready.extended,
            filters=attempt.filters,
            members=members(lower) if profile.groups else None,
        )
    except OutOfTimeError as e:
        return PreemptionAnswer("none", f"{e.message} while looking for victims", priority.value)
    candidate = result.candidate
    message = result.message(len(attempt.nodes))
    if candidate is None:
        return PreemptionAnswer("none", message, priority.value)
    victims = [(v.key, v.priority, candidate.freed.get(v.key, ())) for v in candidate.victims]
    return PreemptionAnswer("victims", message, priority.value, candidate.node, victims)


def deallocated(claim: ResourceClaim) -> ResourceClaim:
    """The claim as the scheduler's deallocation leaves it (the same status edit)."""
    return ResourceClaim.load(
        edited_status(claim, unreserve=claim.reserved_for_uids(), deallocate=True)
    )


def _answer(
    result: CycleResult,
    chosen: str | None,
    claims: Sequence[ResourceClaim],
    nodes: Sequence[Node],
    notes: list[str],
) -> Answer:
    answers: dict[str, NodeAnswer] = {}
    for fit in result.fits:
        answers[fit.node] = NodeAnswer(
            "success", score=fit.score, allocations=dict(fit.results), chosen=fit.node == chosen
        )
    for name, reason in result.failures.items():
        detail = result.explanations.get(name) or result.details.get(reason)
        outcome: Verdict = (
            "error" if "errors in their resource pools" in reason else "unsatisfiable"
        )
        answers[name] = NodeAnswer(outcome, reason=f"{reason}: {detail}" if detail else reason)
    if result.pod_error is not None:
        return Answer("error", error=result.pod_error, notes=notes)
    if chosen is None:
        return Answer(
            "unsatisfiable",
            reasons=[unschedulable_message(len(nodes), result)],
            nodes=answers,
            notes=notes,
        )
    allocations = {c.key: c.status.allocation for c in claims if c.status.allocation}
    allocations.update(answers[chosen].allocations)
    answers[chosen].allocations = {}  # carried once, at the top
    return Answer("success", node=chosen, allocations=allocations, nodes=answers, notes=notes)


def node_answer(
    snapshot: Snapshot,
    node_name: str,
    claim_keys: Sequence[ObjectKey],
    options: Options,
    monotonic: Callable[[], float] = time.monotonic,
) -> Answer:
    """Do these claims fit on this node together (no pod, no node filters)? Within the
    scheduler's filter timeout, as a pod's allocation."""
    node = snapshot.nodes.get(node_name)
    if node is None:
        raise InputError(f"node {node_name} is not in the input")
    claims = []
    for key in claim_keys:
        claim = snapshot.claims.get(key)
        if claim is None:
            raise InputError(f"claim {key} is not in the input")
        claims.append(claim)
    pending = [c for c in claims if not c.is_allocated]
    profile = options.profile
    state = allocated_state(snapshot, profile, {c.key for c in claims})
    out_of_time = deadline(monotonic, profile.filter_timeout)
    allocator = allocator_of(snapshot, profile, state, out_of_time)
    try:
        outcome: Outcome = allocator.allocate(node, pending)
    except InvalidInputError as e:  # the claims themselves are wrong
        return Answer("error", error=str(e))
    except OutOfTimeError as e:  # no verdict within the filter timeout
        note = (
            "the allocation did not finish within the filter timeout "
            f"({options.policies.filter_timeout:g}s, --filter-timeout)"
        )
        return Answer("error", error=str(e), nodes={node_name: NodeAnswer("error")}, notes=[note])
    answer = NodeAnswer("success")
    if outcome.status is Status.ERROR:
        return Answer("error", error=str(outcome.error), nodes={node_name: NodeAnswer("error")})
    if outcome.status is Status.UNSATISFIABLE:
        reasons = [str(r) for r in outcome.reasons]
        answer = NodeAnswer("unsatisfiable", reason="; ".join(reasons))
        if options.explain:  # what --explain adds is not bound by the filter timeout
            answer.explanation = allocator_of(snapshot, profile, state).breakdown(node, pending)
        return Answer("unsatisfiable", reasons=reasons, nodes={node_name: answer})
    allocations = dict(zip((c.key for c in pending), outcome.results, strict=True))
    answer.chosen = True
    if options.explain:
        answer.explanation = allocator_of(snapshot, profile, state).breakdown(node, pending)
    return Answer("success", node=node_name, allocations=allocations, nodes={node_name: answer})
