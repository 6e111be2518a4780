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
that cycle with ``pod_attempt`` for each of its pods (the PodGroup given, no PostFilter).

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
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from operators.allocator import (
    AllocatedState,
    Allocator,
    Features,
    InvalidInputError,
    Outcome,
    OutOfTimeError,
    Status,
)
from operators.allocator.allocator import Policy
from operators.allocator.explain import ClaimBreakdown
from operators.allocator.features import V1_37
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
    DEFAULT_FILTER_TIMEOUT,
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
from operators.scheduling.nodes import NodeUsage, UsageTracker, bound_requests
from operators.scheduling.preemption import AlternativesPolicy, RunningPod, members
from operators.scheduling.score import Score, ScorePolicy
from operators.simulate.snapshot import InputError, Snapshot

Verdict = Literal["success", "unsatisfiable", "waiting", "error"]
SIMULATED_SHARE_ID = "00000000-0000-0000-0000-000000000000"


@dataclasses.dataclass(frozen=True)
class Options:
    """The scheduler's flags that change its answer (``kopf-dra run scheduler``'s names)."""

    score_policy: ScorePolicy = "least-allocated"
    allocation_policy: Policy = "first-fit"
    binding_timeout: float = 600.0
    explain: bool = False
    #: --feature-gates as given (checked for ``version``); the rest are that version's defaults.
    feature_gates: Mapping[str, bool] = dataclasses.field(default_factory=dict)
    #: The cluster's Kubernetes version: whose gate defaults (and behaviour) to answer with.
    version: KubernetesVersion = DEFAULT_VERSION

    def gates(self) -> dict[str, bool]:
        """Every gate's value, as the scheduler's settings resolve them."""
        return resolve(self.feature_gates, self.version)

    def node_allocatable(self) -> bool:
        """DRANodeAllocatableResources in 1.37's shape, as the scheduler reads it."""
        features = Features.of(self.gates(), self.version)
        return features.kubernetes >= V1_37 and self.gates()["DRANodeAllocatableResources"]

    preemption: bool = True
    preemption_alternatives: AlternativesPolicy = "no-preemption-first"
    #: --gang-search: a pod group's failed cycle is followed by a search of its pods' choices.
    gang_search: bool = True
    #: Seconds the pod's allocation may take (DRASchedulerFilterTimeout on; 0: none).
    filter_timeout: float = DEFAULT_FILTER_TIMEOUT


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


def _allocator(
    snapshot: Snapshot,
    options: Options,
    leave_out: set[str],
    out_of_time: Callable[[], bool] | None = None,
) -> Allocator:
    gates = options.gates()
    features = Features.of(gates, options.version)
    allocated = [c for c in snapshot.claims.values() if c.is_allocated and c.key not in leave_out]
    return Allocator(
        features,
        AllocatedState.from_claims(allocated, features),
        list(snapshot.classes.values()),
        list(snapshot.slices.values()),
        # The CEL of the cluster's release, as the scheduler's.
        CelSelectorEngine(CELEnvironment(kubernetes=str(options.version.release))),
        share_ids=lambda: SIMULATED_SHARE_ID,
        # As the scheduler: without DRADeviceTaintRules it watches none.
        taint_rules=list(snapshot.taint_rules.values()) if gates["DRADeviceTaintRules"] else [],
        policy=options.allocation_policy,
        out_of_time=out_of_time,
    )


def _out_of_time(options: Options, monotonic: Callable[[], float]) -> Callable[[], bool] | None:
    """The scheduler's filter timeout, from now (None: the gate is off, or no limit)."""
    if not options.gates()["DRASchedulerFilterTimeout"]:
        return None
    return deadline(monotonic, options.filter_timeout)


def _usage(snapshot: Snapshot, leave_out: ObjectKey, node_allocatable: bool) -> UsageTracker:
    """What bound pods request per node, as the scheduler's cache counts it
    (``node_allocatable``: their claims' node resources too, DRANodeAllocatableResources)."""
    usage = UsageTracker()
    for key, pod in snapshot.pods.items():
        if key == leave_out or not pod.spec.node_name or pod.status.phase in TERMINAL_PHASES:
            continue
        usage.observe(key, (pod.spec.node_name, bound_requests(pod, node_allocatable)))
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
class Attempted:
    """One pod's attempt as ``pod_answer`` ran it: the answer, and what a group's cycle needs
    to assume the placement (``ready``: the attempt after PostFilter, None while the pod waits;
    ``result`` and ``fit``: Filter's, ``fit`` None where no node fits; ``nodes``: how many
    were filtered; ``released``: the claims whose devices preparing it freed, in memory)."""

    answer: Answer
    ready: Ready | None = None
    result: CycleResult | None = None
    fit: NodeFit | None = None
    nodes: int = 0
    released: frozenset[str] = frozenset()


def pod_answer(
    snapshot: Snapshot,
    key: ObjectKey,
    options: Options,
    now: datetime.datetime,
    monotonic: Callable[[], float] = time.monotonic,
    *,
    group: PodGroup | None = None,
    post_filter: bool = True,
) -> Answer:
    """The scheduler's answer for the pod ``key`` of the snapshot; ``monotonic`` measures
    the filter timeout, as the scheduler's clock does. ``group``: the pod's PodGroup, given
    as the scheduler gives it (DRAWorkloadResourceClaims on): claims made for it are the pod's
    too. ``post_filter`` False: a pod of a group's cycle, which has no PostFilter of its own
    (no stranded claim deallocated, no preemption: kopf-dra has no group preemption yet)."""
    answer = pod_attempt(snapshot, key, options, now, monotonic, group, post_filter).answer
    name = group_name(snapshot.pods[key])
    if name is not None and group is None and post_filter:
        answer.notes.append(
            f"the pod names PodGroup {name!r}: the scheduler tries it in its group's cycle, "
            f"with the group's other pods (--pod-group {key.namespace}/{name}); this answer is "
            "for the pod alone"
        )
    return answer


def pod_attempt(
    snapshot: Snapshot,
    key: ObjectKey,
    options: Options,
    now: datetime.datetime,
    monotonic: Callable[[], float] = time.monotonic,
    group: PodGroup | None = None,
    post_filter: bool = True,
) -> Attempted:
    """``pod_answer`` with what it decided on (see ``Attempted``)."""
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
    if not isinstance(prepared, Ready):
        return Attempted(Answer("waiting", error=prepared.reason, notes=notes))
    if prepared.extended is not None:
        notes.append(_extended_note(pod, prepared.extended))
    nodes = sorted(snapshot.nodes.values(), key=lambda n: n.metadata.name or "")
    usage = _usage(snapshot, key, options.node_allocatable()).usage
    filtered = _filter(
        snapshot, prepared, nodes, usage, options, released, notes, monotonic, post_filter
    )
    ready, result, fit, decision = filtered
    answer = _answer(result, fit.node if fit is not None else None, ready.claims, nodes, notes)
    if ready.extended is not None:
        _show_extended(answer, pod, ready.extended, snapshot.nodes)
    if isinstance(decision, Preempt) and post_filter:
        answer.preemption = _preemption(
            snapshot, ready, nodes, usage, options, released, now, decision.better_than, monotonic
        )
        if answer.outcome == "unsatisfiable":
            answer.reasons = [
                f"{r} preemption: {answer.preemption.message}" for r in answer.reasons
            ]
    if result.timed_out:
        notes.append(
            f"the allocation did not finish within the filter timeout ({options.filter_timeout:g}s,"
            " --filter-timeout): the scheduler retries the pod with backoff"
        )
    if options.explain and ready.allocating:
        _explain(snapshot, answer, ready, options, released)
    return Attempted(answer, ready, result, fit, len(nodes), frozenset(released))


def filter_ready(
    snapshot: Snapshot,
    ready: Ready,
    options: Options,
    released: frozenset[str],
    monotonic: Callable[[], float] = time.monotonic,
) -> CycleResult:
    """Filter alone for an attempt already prepared (``pod_attempt``'s, its claims changed):
    every node, every fit, best first; what a pod group's search asks for each way to try a
    pod."""
    nodes = sorted(snapshot.nodes.values(), key=lambda n: n.metadata.name or "")
    usage = _usage(snapshot, ready.key, options.node_allocatable()).usage
    notes: list[str] = []
    _, result, _, _ = _filter(
        snapshot, ready, nodes, usage, options, set(released), notes, monotonic, False
    )
    return result


def _prepare(
    snapshot: Snapshot,
    pod: Pod,
    claims: dict[str, ResourceClaim],
    options: Options,
    now: datetime.datetime,
    notes: list[str],
    group: PodGroup | None = None,
) -> tuple[Wait | SharedDevice | Ready, set[str]]:
    """The scheduler's preparation of the attempt; what it would write before trying again
    (a stale special claim deleted, failed binding conditions undone) is applied to
    ``claims`` in memory, and the pod prepared again. Also the keys of the claims whose
    devices that frees. ``group``: the pod's PodGroup, whose claims are the pod's too."""
    released: set[str] = set()
    gates = options.gates()
    classes = class_mapping(snapshot.classes.values()) if gates["DRAExtendedResource"] else None
    for _ in range(len(claims) + 2):
        prepared = prepare(
            pod,
            claims,
            now=now,
            binding_timeout=options.binding_timeout,
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
    nodes: Sequence[Node],
    usage: Mapping[str, NodeUsage],
    options: Options,
    released: set[str],
    notes: list[str],
    monotonic: Callable[[], float],
    post_filter: bool = True,
) -> tuple[Ready, CycleResult, NodeFit | None, Decision]:
    """Filter and the decision after it, as the scheduler's attempts would go: a claim
    stranded where no node can use it is deallocated (in memory) and the pod tried again
    (not with ``post_filter`` off: a group's pod goes through Filter alone)."""
    nominated = ready.pod.status.nominated_node_name
    # The scheduler's decision after each cycle (``scheduling.decision``), from the snapshot:
    # nothing is being written, and no victim of an earlier preemption is awaited.
    alternatives = options.preemption_alternatives if options.preemption and post_filter else None
    for _ in range(len(ready.claims) + 1):
        allocator = (
            _allocator(snapshot, options, released, _out_of_time(options, monotonic))
            if ready.allocating
            else None
        )
        result = run_cycle(
            ready.pod,
            ready.claims,
            nodes,
            usage,
            allocator,
            policy=options.score_policy,
            nominated=nominated,
            explain_all=True,
            extended=ready.extended,
            node_allocatable=(
                NodeAllocatableInput(list(snapshot.slices.values()), ready.group is not None)
                if options.node_allocatable()
                else None
            ),
        )
        fit = prefer_nominated(result, nominated)
        decision = decide(ready.pod, ready.claims, result, fit, preemption=alternatives)
        if not post_filter or not isinstance(decision, Deallocate):
            break
        stranded = decision.claim
        claims = tuple(deallocated(c) if c is stranded else c for c in ready.claims)
        ready = dataclasses.replace(ready, claims=claims)
        released.add(stranded.key)
        notes.append(
            f"claim {stranded.key} is allocated where no node can use it: the scheduler "
            "deallocates it (PostFilter) and tries again"
        )
    return ready, result, fit, decision


def _explain(
    snapshot: Snapshot, answer: Answer, ready: Ready, options: Options, released: set[str]
) -> None:
    """--explain: per node that fits nowhere (and the chosen one), which classes, selectors
    and checks eliminated which devices."""
    allocator = _allocator(snapshot, options, released)
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


def _preemption(
    snapshot: Snapshot,
    ready: Ready,
    nodes: Sequence[Node],
    usage: Mapping[str, NodeUsage],
    options: Options,
    released: set[str],
    now: datetime.datetime,
    better_than: int | None,
    monotonic: Callable[[], float],
) -> PreemptionAnswer:
    """The scheduler's preemption on the snapshot: eligibility, then the victims' search
    (with a filter timeout of its own, as the scheduler's)."""
    pod = ready.pod
    priority = preemption.priority_of(pod, snapshot.priority_classes)
    gates = options.gates()
    features = Features.of(gates, options.version)
    groups = features.kubernetes >= V1_37 and gates["GenericWorkload"]

    def pod_group(other: Pod) -> PodGroup | None:
        return snapshot.pod_groups.get(
            ObjectKey(other.metadata.namespace or "", group_name(other) or "")
        )

    lower: dict[str, list[RunningPod]] = {}
    for key, other in sorted(snapshot.pods.items()):
        on = other.spec.node_name
        if (
            not on
            or other.status.phase in TERMINAL_PHASES
            or key == ObjectKey(pod.metadata.namespace or "", pod.metadata.name or "")
        ):
            continue
        namespace = other.metadata.namespace or ""
        held = tuple(
            c
            for name in sorted(other.claim_names())
            if (c := snapshot.claims.get(ObjectKey(namespace, name))) is not None
            and c.is_allocated
            and c.is_reserved_for(other.metadata.uid or "")
        )
        victim = preemption.running_pod(
            other, held, snapshot.priority_classes, pod_group if groups else None
        )
        if victim.priority < priority.value:
            lower.setdefault(on, []).append(victim)
    nominated = pod.status.nominated_node_name
    reason = preemption.eligibility(
        priority, nominated, lower.get(nominated, ()) if nominated else ()
    )
    if reason is not None:
        return PreemptionAnswer("not-eligible", reason, priority.value)
    allocator = _allocator(snapshot, options, released, _out_of_time(options, monotonic))
    try:
        result = preemption.preempt(
            pod,
            priority=priority,
            claims=ready.claims,
            nodes=nodes,
            usage=usage,
            on_node=lower,
            allocator=allocator if ready.allocating else None,
            budgets=[preemption.Budget.of(b) for b in snapshot.budgets.values()],
            now=now,
            features=features,
            alternatives=options.preemption_alternatives,
            better_than=better_than,
            extended=ready.extended,
            members=members(lower) if groups else None,
        )
    except OutOfTimeError as e:
        return PreemptionAnswer("none", f"{e.message} while looking for victims", priority.value)
    candidate = result.candidate
    message = result.message(len(nodes))
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
    snapshot: Snapshot, node_name: str, claim_keys: Sequence[ObjectKey], options: Options
) -> Answer:
    """Do these claims fit on this node together (no pod, no node filters)?"""
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
    allocator = _allocator(snapshot, options, {c.key for c in claims})
    try:
        outcome: Outcome = allocator.allocate(node, pending)
    except InvalidInputError as e:  # the claims themselves are wrong
        return Answer("error", error=str(e))
    except OutOfTimeError as e:  # simulate gives no budget; if one ran out, no verdict
        return Answer("error", error=str(e), nodes={node_name: NodeAnswer("error")})
    answer = NodeAnswer("success")
    if outcome.status is Status.ERROR:
        return Answer("error", error=str(outcome.error), nodes={node_name: NodeAnswer("error")})
    if outcome.status is Status.UNSATISFIABLE:
        reasons = [str(r) for r in outcome.reasons]
        answer = NodeAnswer("unsatisfiable", reason="; ".join(reasons))
        if options.explain:
            answer.explanation = allocator.breakdown(node, pending)
        return Answer("unsatisfiable", reasons=reasons, nodes={node_name: answer})
    allocations = dict(zip((c.key for c in pending), outcome.results, strict=True))
    answer.chosen = True
    if options.explain:
        answer.explanation = allocator.breakdown(node, pending)
    return Answer("success", node=node_name, allocations=allocations, nodes={node_name: answer})
