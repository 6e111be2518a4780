"""The scheduler's answer for a PodGroup (1.37's GenericWorkload), from a snapshot: what one
cycle of the group would do, with nothing written.

``group_answer`` takes ``GroupScheduler.schedule`` and ``_cycle``'s steps with the rules they
use (``scheduling.groups``) and each pod's attempt as ``pod_answer`` makes it:

- groups need Kubernetes 1.37 and GenericWorkload: otherwise every pod is told why not;
- the group's pods are its pods that are not finished; too few for a gang wait, as upstream's
  PreEnqueue; one scheduler name and the PodGroup's priority on every pod, or they are refused;
- with DRAWorkloadResourceClaims on, a PodGroup template entry that has no claim yet gets one,
  generated in memory once for the group (as kube-controller-manager would), and each pod's
  entry equal to it (``is_group_claim``) resolves to that claim, not to one of its own;
- the pods not bound are tried in the cycle's order, each with ``pod_attempt`` on a working
  copy of the snapshot in which every placement before it is assumed (the pod on its node, its
  claims allocated and reserved as the scheduler's Reserve writes them: a group claim for the
  PodGroup, once), until ``minCount`` is out of reach;
- the verdict is ``outcome``'s; when it fails although some pods fit, the search of the pods'
  prioritized alternatives and other nodes (``scheduling.group_search``, the scheduler's
  ``--gang-search``) may still place the group; when nothing is placed, a group claim
  allocated where none of its pods can go is deallocated (in memory, PodGroupPostFilter) and
  the cycle runs again.

A pod of a group has no PostFilter of its own in kopf-dra: no stranded claim of its own is
deallocated and no victims are looked for (upstream 1.37 preempts for a whole group; kopf-dra
does not yet), so the answer names no victims for a group.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterator, Sequence
from typing import Any, Literal, TypeVar, cast

from operators.allocator import Features
from operators.allocator.features import V1_37
from operators.api.core import Pod
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
from operators.scheduling.attempt import DEFAULT_FILTER_TIMEOUT, Ready
from operators.scheduling.cycle import NodeFit, unschedulable_message
from operators.scheduling.group_search import NODE_OPTIONS, restricted, search, variants
from operators.scheduling.groups import (
    GroupOutcome,
    cannot_be_satisfied,
    gates_off,
    key_of,
    needs_newer_release,
    ordered,
    outcome,
    pod_message,
    refused,
    stranded_group_claims,
    waits,
)
from operators.scheduling.node_allocatable import NODE_ALLOCATABLE_FIELD, dump_statuses
from operators.scheduling.reserve import reserved_claims
from operators.simulate.engine import (
    Attempted,
    Options,
    Verdict,
    deallocated,
    filter_ready,
    pod_attempt,
)
from operators.simulate.snapshot import InputError, Snapshot

#: What became of one pod of the group: ``bound`` before the cycle; ``placed`` by it (the group
#: is placed); ``fits`` a node but the group is not placed; ``unschedulable`` fits no node;
#: ``not-tried`` once ``minCount`` was out of reach; ``left-out`` of the placement the search
#: found (told nothing, tried again later); ``waiting`` or ``error`` with the group.
MemberOutcome = Literal[
    "placed", "bound", "fits", "unschedulable", "not-tried", "left-out", "waiting", "error"
]

GROUP_PREEMPTION_NOTE = (
    "group preemption is not simulated: the scheduler would look for lower-priority pods to "
    "evict so that the whole group fits (PodGroupPostFilter); simulate says only whether the "
    "group fits as the cluster is now"
)


@dataclasses.dataclass
class MemberAnswer:
    """One pod: its node and its own claims' allocations where it is placed (or bound), else
    what the scheduler tells it (the PodScheduled message)."""

    outcome: MemberOutcome
    node: str | None = None
    allocations: dict[str, AllocationResult] = dataclasses.field(default_factory=dict)
    message: str | None = None


@dataclasses.dataclass
class GroupAnswer:
    """The group's cycle: its verdict and message (None on success, else the PodGroup's
    reason, or why it waits or is refused), its pods by key in the order the cycle tried them
    (bound ones last), the allocations of its shared claims (each once), and notes."""

    group: ObjectKey
    outcome: Verdict
    message: str | None = None
    policy: Literal["gang", "basic"] | None = None
    min_count: int | None = None
    placed_before: int = 0
    members: dict[ObjectKey, MemberAnswer] = dataclasses.field(default_factory=dict)
    shared: dict[str, AllocationResult] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class _Run:
    """What each pod's attempt in the group's cycles is given: the PodGroup (passed on to the
    pods only with DRAWorkloadResourceClaims on, ``with_claims``, as the scheduler does)."""

    group: PodGroup
    options: Options
    now: datetime.datetime
    monotonic: Callable[[], float]
    with_claims: bool


#: Where a pod goes and how: its prepared attempt, and the node that fits it.
Placement = tuple[Ready, NodeFit]
#: What assuming a placement replaced in the working copy (None: nothing was there).
Replaced = tuple[tuple[ObjectKey, Pod | None], dict[ObjectKey, ResourceClaim | None]]


@dataclasses.dataclass
class _Cycle:
    """One cycle as it went: ``base`` the snapshot it started from, ``working`` with what it
    assumed; the pods it tried (with their attempts), those placed, and the claims a pod found
    no node could use. ``waiting``: the pod whose claims are not ready, and why (the whole
    group waits, nothing is kept)."""

    base: Snapshot
    working: Snapshot
    tried: dict[ObjectKey, Attempted] = dataclasses.field(default_factory=dict)
    placed: dict[ObjectKey, Placement] = dataclasses.field(default_factory=dict)
    verdict: GroupOutcome | None = None
    waiting: tuple[ObjectKey, str] | None = None
    unavailable: set[str] = dataclasses.field(default_factory=set)


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
    answer = _empty(key, "success", group)
    bound = [p for p in members if p.spec.node_name]
    answer.placed_before = len(bound)
    queued = ordered(
        [p for p in members if not p.spec.node_name and not p.metadata.is_deleting], {}
    )
    reason = waits(group, key, len(members))
    error = refused(group, members) if reason is None else None
    if reason is not None or error is not None:
        answer.outcome, answer.message = ("waiting", reason) if reason else ("error", error)
        for pod in queued:
            answer.members[key_of(pod)] = MemberAnswer(answer.outcome, message=error)
    elif not queued:
        answer.notes.append("every pod of the group is bound already: nothing to place")
    else:
        run = _Run(group, options, now, monotonic, options.gates()["DRAWorkloadResourceClaims"])
        base, group_claims = _group_claims(snapshot, group, queued, run.with_claims, answer.notes)
        cycle = _cycles(run, base, queued, answer, group_claims)
        _verdict(answer, queued, cycle, group_claims)
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
    gates = options.gates()
    release = Features.of(gates, options.version).kubernetes
    if release >= V1_37 and gates["GenericWorkload"]:
        return None
    if group is None and not members:
        raise InputError(f"PodGroup {key} is not in the input, and no pod names it")
    answer = _empty(key, "unsatisfiable", group)
    if release < V1_37:
        answer.message = (
            f"PodGroup {key}: gang scheduling (GenericWorkload) needs Kubernetes 1.37, and this "
            f"cluster runs {release}"
        )
    else:
        answer.message = (
            f"PodGroup {key}: kopf-dra runs with the GenericWorkload feature gate off, so it "
            "places no pod groups (--feature-gates GenericWorkload=true)"
        )
    for pod in ordered(members, {}):
        told = needs_newer_release(pod, str(release)) if release < V1_37 else gates_off(pod)
        member = MemberAnswer("unschedulable", message=told)
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


def _cycles(
    run: _Run,
    base: Snapshot,
    queued: Sequence[Pod],
    answer: GroupAnswer,
    group_claims: Sequence[ObjectKey],
) -> _Cycle:
    """The group's cycle; when it fails although some pods fit, the search of the pods'
    choices (--gang-search); while nothing is placed and a group claim is allocated where none
    of its pods can go, that claim is deallocated (in memory) and the cycle runs again, as the
    scheduler's next one would."""
    for _ in range(len(group_claims) + 1):
        cycle = _cycle(run, base, queued, answer.placed_before)
        if cycle.verdict is None or cycle.verdict.succeeded:
            return cycle
        if cycle.placed and run.options.gang_search:
            found = _search(run, base, queued, answer.placed_before)
            if found is not None:
                found.tried = cycle.tried
                answer.notes.append(
                    "placed by searching the pods' prioritized alternatives and other nodes "
                    f"(--gang-search; without it: {cycle.verdict.message})"
                )
                return found
        shared = [c for k in group_claims if (c := base.claims.get(k)) is not None]
        stranded = stranded_group_claims(run.group, shared, cycle.unavailable, answer.placed_before)
        if not stranded:
            return cycle
        base = _copy(base)
        for claim in stranded:
            base.claims[ObjectKey.parse(claim.key)] = deallocated(claim)
            answer.notes.append(
                f"claim {claim.key} of PodGroup {answer.group} is allocated where none of its "
                "pods can go: the scheduler deallocates it (PodGroupPostFilter) and tries the "
                "group again"
            )
    return cycle


def _cycle(run: _Run, base: Snapshot, queued: Sequence[Pod], placed_before: int) -> _Cycle:
    """``GroupScheduler._cycle`` on a working copy of ``base``: each pod tried in turn, a pod
    that fits assumed at once, until ``minCount`` cannot be reached."""
    group = run.group
    cycle = _Cycle(base, _copy(base))
    remaining = len(queued)
    failed: dict[ObjectKey, str] = {}
    for member in queued:
        if cannot_be_satisfied(group.min_count, placed_before + len(cycle.placed), remaining):
            break
        mkey = key_of(member)
        attempted = _attempt(run, cycle.working, mkey)
        cycle.tried[mkey] = attempted
        if attempted.ready is None:  # its claims are not ready: the whole group waits
            cycle.waiting = (mkey, attempted.answer.error or "")
            return cycle
        remaining -= 1
        result = attempted.result
        if result is not None:
            cycle.unavailable.update(result.unavailable)
        if attempted.fit is None:
            failed[mkey] = (
                unschedulable_message(attempted.nodes, result)
                if result is not None
                else attempted.answer.error or ""
            )
            continue
        _assume(cycle.working, attempted.ready, attempted.fit, run.now)
        cycle.placed[mkey] = (attempted.ready, attempted.fit)
    cycle.verdict = outcome(group, placed_before, list(cycle.placed), failed, remaining)
    return cycle


def _attempt(run: _Run, working: Snapshot, key: ObjectKey) -> Attempted:
    """One pod's attempt in the group's cycle: Filter alone, the PodGroup passed on as the
    scheduler passes it."""
    group = run.group if run.with_claims else None
    return pod_attempt(working, key, run.options, run.now, run.monotonic, group, post_filter=False)


def _search(run: _Run, base: Snapshot, queued: Sequence[Pod], placed_before: int) -> _Cycle | None:
    """``GroupScheduler._search``: the pods placed by searching their prioritized alternatives
    and the other nodes that fit them (``scheduling.group_search``), within the filter timeout;
    None when no combination reaches ``minCount``."""
    working = _copy(base)
    deadline = run.monotonic() + (run.options.filter_timeout or DEFAULT_FILTER_TIMEOUT)

    async def choices(member: Pod) -> AsyncGenerator[tuple[ObjectKey, Ready, NodeFit], None]:
        for choice in _choices(run, working, member):
            yield choice

    def take(choice: tuple[ObjectKey, Ready, NodeFit]) -> tuple[ObjectKey, Placement, Replaced]:
        key, ready, fit = choice
        return key, (ready, fit), _assume(working, ready, fit, run.now)

    def undo(taken: tuple[ObjectKey, Placement, Replaced]) -> None:
        _unassume(working, taken[2])

    found = _to_the_end(
        search(
            queued,
            run.group.min_count,
            placed_before,
            choices,
            take,
            undo,
            lambda: run.monotonic() > deadline,
        )
    )
    if found is None:
        return None
    cycle = _Cycle(base, working, placed={k: p for k, p, _ in found})
    cycle.verdict = outcome(run.group, placed_before, list(cycle.placed), {}, 0)
    return cycle


def _choices(
    run: _Run, working: Snapshot, member: Pod
) -> Iterator[tuple[ObjectKey, Ready, NodeFit]]:
    """Each way to place one pod, most preferred first: per way to try its prioritized lists
    (``variants``), the nodes that fit it, best first (``NODE_OPTIONS`` at most); computed when
    asked, against what the search has placed before it."""
    key = key_of(member)
    attempted = _attempt(run, working, key)
    ready, result = attempted.ready, attempted.result
    if ready is None or result is None:
        return
    for variant in variants(ready.claims):
        fits = result.fits
        if any(skip for _, _, skip in variant):
            tried = dataclasses.replace(ready, claims=tuple(restricted(ready.claims, variant)))
            options, released = run.options, attempted.released
            fits = filter_ready(working, tried, options, released, run.monotonic).fits
        for fit in fits[:NODE_OPTIONS]:
            yield key, ready, fit  # assumed with the claims as they are


T = TypeVar("T")


def _to_the_end(coroutine: Coroutine[Any, Any, T]) -> T:
    """The search's coroutine, run here to its end: its choices are computed, never awaited,
    so it never suspends (no event loop is needed)."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    coroutine.close()
    raise AssertionError("the pod group search suspended")  # pragma: no cover


def _assume(working: Snapshot, ready: Ready, fit: NodeFit, now: datetime.datetime) -> Replaced:
    """``Scheduler.assume`` in the working copy: the pod bound to its node (its requests count
    there), its claims allocated and reserved as Reserve writes them, so that the pods after
    it see its node usage and devices, and a group claim is allocated once. Returns what it
    replaced (``_unassume`` puts it back)."""
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


def _verdict(
    answer: GroupAnswer, queued: Sequence[Pod], cycle: _Cycle, group_claims: Sequence[ObjectKey]
) -> None:
    """The answer from the cycle: the group's verdict and each pod's, the notes of each pod's
    attempt, and the group claims' allocations (those it made only when the group is placed:
    otherwise nothing the cycle assumed is kept)."""
    for mkey, attempted in cycle.tried.items():
        answer.notes += [f"pod {mkey}: {n}" for n in attempted.answer.notes]
    for key in group_claims:  # allocated before the cycle
        claim = cycle.base.claims.get(key)
        if claim is not None and claim.status.allocation is not None:
            answer.shared[claim.key] = claim.status.allocation
    if cycle.verdict is not None and cycle.verdict.succeeded:  # allocated by a pod it placed
        for ready, fit in cycle.placed.values():
            for claim_key, allocation in fit.results.items():
                if claim_key in ready.shared:
                    answer.shared.setdefault(claim_key, allocation)
    if cycle.waiting is not None:
        waiting, reason = cycle.waiting
        answer.outcome, answer.message = "waiting", f"pod {waiting} waits: {reason}"
        for pod in queued:
            told = reason if key_of(pod) == waiting else None
            answer.members[key_of(pod)] = MemberAnswer("waiting", message=told)
        return
    verdict = cycle.verdict
    assert verdict is not None
    answer.message = verdict.message
    if not verdict.succeeded:
        answer.outcome = "unsatisfiable"
        answer.notes.append(GROUP_PREEMPTION_NOTE)
    for pod in queued:
        answer.members[key_of(pod)] = _member(verdict, key_of(pod), cycle)


def _member(verdict: GroupOutcome, key: ObjectKey, cycle: _Cycle) -> MemberAnswer:
    """One pod's part: where it goes, with its own claims (the group's are the answer's), when
    the group is placed; what it is told otherwise (``pod_message``)."""
    if verdict.succeeded:
        placement = cycle.placed.get(key)
        if placement is not None:
            ready, fit = placement
            return MemberAnswer("placed", node=fit.node, allocations=_own(ready, fit))
        if key in verdict.failed:
            return MemberAnswer("unschedulable", message=verdict.failed[key])
        return MemberAnswer("left-out")
    if key not in cycle.tried:
        return MemberAnswer("not-tried", message=pod_message(verdict, key, False))
    if key in verdict.failed:
        return MemberAnswer("unschedulable", message=pod_message(verdict, key, True))
    return MemberAnswer("fits", message=pod_message(verdict, key, True))


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
