"""Pod groups (1.37's GenericWorkload): the pods of a PodGroup tried in one cycle and placed
together, or none of them, with the claims they share allocated once (DRAWorkloadResourceClaims).

The rules are ``scheduling.groups`` (pure); this module runs them against the scheduler's cache:

- any pod of the group popped from the queue runs the group's cycle, for every queued pod of it;
- each pod goes through the same preparation and Filter as a single pod (``prepare``,
  ``Scheduler.filter``), and a pod that fits is assumed at once (``Scheduler.assume``: its
  claims in the in-flight ledger, its node usage), so the next pod sees its devices; a claim of
  the group, allocated for the first pod, is in the ledger allocated and reserved for the
  PodGroup, so the pods after it use that allocation and must reach its devices;
- when the group is not placed, everything assumed is undone (nothing was written), then
  PodGroupPostFilter: a group claim no pod can use is deallocated, else the group may preempt
  (``scheduling.group_preemption``: trials of the same cycle with victims taken out of the
  snapshots), and each pod is told why; when it is, the binding task (``Binder.start_group``)
  waits at Permit until the group's placed pods reach ``minCount``, then binds them one after
  another, the group's claims written by the first.

The PodGroup's ``PodGroupInitiallyScheduled`` condition says how the last cycle ended, as
kube-scheduler 1.37.2 writes it (True once, never back).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Protocol

import structlog

from operators.allocator import AllocatedState, Features
from operators.allocator.features import V1_37
from operators.allocator.state import Holding
from operators.api.core import Pod
from operators.api.groups import INITIALLY_SCHEDULED, SCHEDULED_REASON, PodGroup, group_name
from operators.api.keys import ObjectKey
from operators.api.resource import ResourceClaim
from operators.controllers.scheduler import planning
from operators.controllers.scheduler.binder import Binder
from operators.controllers.scheduler.preemptor import Preemptor
from operators.controllers.scheduler.protocol import SchedulerIO
from operators.controllers.scheduler.queueing import PodState, SchedulingQueue
from operators.controllers.scheduler.settings import SchedulerSettings
from operators.kube.api import ConflictError, NotFoundError
from operators.observability import fields
from operators.runtime.actions import Patch
from operators.runtime.errors import Requeue
from operators.scheduling import group_preemption, preemption
from operators.scheduling.attempt import DEFAULT_FILTER_TIMEOUT, Attempt, Prepared, Ready
from operators.scheduling.cycle import CycleResult, NodeFit, unschedulable_message
from operators.scheduling.group_search import NODE_OPTIONS, restricted, search, variants
from operators.scheduling.groups import (
    UNSCHEDULABLE,
    FailedCycle,
    cannot_be_satisfied,
    gates_off,
    key_of,
    needs_newer_release,
    ordered,
    outcome,
    pod_message,
    refused,
    stranded_group_claims,
    tried_with_group,
    waits,
)
from operators.scheduling.preemption import RunningPod, Unit, holding

log = structlog.get_logger(__name__)

#: One pod's Reserve, as ``Scheduler.assume`` returns it: the pod, its claims' writes, its node
#: and its pod status write (extended resources).
Assumed = tuple[Pod, list[planning.Reservation], str, Patch | None]


class Scheduler(SchedulerIO, Protocol):
    """What the group cycles use of their scheduler (the handlers' ``Scheduler``): the single
    pod's steps, which a group's pods go through one by one."""

    settings: SchedulerSettings
    queue: SchedulingQueue
    binder: Binder
    preemptor: Preemptor
    features: Features
    groups_enabled: bool
    group_claims: bool
    extended_enabled: bool

    def prepare_pod(self, pod: Pod, group: PodGroup | None = None) -> Prepared: ...

    def snapshot(self, ready: Ready) -> Attempt: ...

    async def filter(
        self, attempt: Attempt, *, every_fit: bool = False
    ) -> tuple[CycleResult, NodeFit | None] | None: ...

    def assume(self, attempt: Attempt, fit: NodeFit) -> Assumed: ...

    def unassume(self, pod: Pod, plan: Sequence[planning.Reservation]) -> None: ...

    async def prepared(self, key: ObjectKey, pod: Pod, prepared: Prepared) -> Ready | None: ...

    async def unschedulable(self, pod: Pod, message: str, reason: str = ...) -> bool: ...

    def attempt_ended(self, key: ObjectKey, result: str) -> None: ...


def go_duration(seconds: float) -> str:
    """Go's ``time.Duration`` spelling of whole seconds ("5m0s"), as upstream's messages."""
    total = int(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


@dataclasses.dataclass
class Trial:
    """A preemption trial: the victims taken out, the allocated state without their devices
    (taken before the trial assumed anything), and the devices the trial assumed since."""

    removed: group_preemption.Removed
    base: AllocatedState
    assumed: list[Holding] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Placement:
    """One pass of a group's cycle: what it assumed (each pod's fit), the pods that fit
    nowhere, the claims no node could use, the group's claims as the cycle saw them, and the
    pod whose attempt is not ready (the group waits for it; nothing stays assumed)."""

    assumed: list[Assumed] = dataclasses.field(default_factory=list)
    fits: dict[ObjectKey, NodeFit] = dataclasses.field(default_factory=dict)
    failed: dict[ObjectKey, str] = dataclasses.field(default_factory=dict)
    evaluated: set[ObjectKey] = dataclasses.field(default_factory=set)
    unavailable: set[str] = dataclasses.field(default_factory=set)
    shared: dict[str, ResourceClaim] = dataclasses.field(default_factory=dict)
    remaining: int = 0
    waiting: tuple[ObjectKey, Pod, Prepared] | None = None


class GroupScheduler:
    """The group cycles and the Permit waits of one scheduler replica."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        #: PodGroup -> an event set when the group or one of its pods changes (Permit waits).
        self.waiters: dict[ObjectKey, asyncio.Event] = {}
        #: PodGroup -> its last cycle, while that placed nothing.
        self.failed: dict[ObjectKey, FailedCycle] = {}
        #: A preemption trial, while it runs: its snapshots have the victims taken out.
        self._trial: Trial | None = None

    def changed(self, group: ObjectKey) -> None:
        event = self.waiters.get(group)
        if event is not None:
            event.set()

    def _in_flight(self, key: ObjectKey) -> bool:
        s = self.scheduler
        return key in s.binder or key in s.queue.bound_unseen

    def placed(self, group: ObjectKey) -> int:
        """The group's pods bound, or being bound by this replica (upstream's
        ``ScheduledPodsCount``: assigned and assumed)."""
        return sum(
            1
            for pod in self.scheduler.cache.group_pods(group)
            if pod.spec.node_name or self._in_flight(key_of(pod))
        )

    # --- the group's cycle ---------------------------------------------------------------------

    async def schedule(self, pod: Pod) -> None:
        """The cycle of the group ``pod`` names, for every queued pod of it."""
        s = self.scheduler
        key = key_of(pod)
        if not s.groups_enabled:
            release = s.features.kubernetes
            message = needs_newer_release(pod, str(release)) if release < V1_37 else gates_off(pod)
            if await s.unschedulable(pod, message):
                raise Requeue(s.settings.unschedulable_retry, "pod groups are off")
            return
        group_key = ObjectKey(key.namespace, group_name(pod) or "")
        group = s.cache.pod_group(group_key)
        members = s.cache.group_pods(group_key)
        reason = waits(group, group_key, len(members))
        if group is None or reason is not None:
            # Said in the log only, as upstream: the PodGroup, or the next pod of the group,
            # brings the group back.
            log.debug("pod group waits", **{fields.POD: str(key)}, group=str(group_key), why=reason)
            return
        queued = [
            p
            for p in members
            if not p.spec.node_name
            and not self._in_flight(key_of(p))
            and p.spec.scheduler_name == s.settings.scheduler_name
            and not p.metadata.is_deleting
        ]
        if not queued:
            return
        if any(p.spec.scheduling_gates for p in queued):
            log.debug("pod group waits for a pod's scheduling gates", group=str(group_key))
            return
        version = group.metadata.resource_version
        if tried_with_group(
            self.failed.get(group_key),
            key,
            [key_of(p) for p in queued],
            s.queue.moves,
            version,
            s.clock.monotonic(),
            s.settings.unschedulable_retry,
        ):
            log.debug("pod tried in its group's last cycle", **{fields.POD: str(key)})
            s.queue.set_state(key, PodState.UNSCHEDULABLE)
            raise Requeue(s.settings.unschedulable_retry, "tried in its group's last cycle")
        error = refused(group, members)
        if error is not None:
            for member in queued:
                await s.unschedulable(member, error, "SchedulerError")
            await self._condition(group, "False", "SchedulerError", error)
            raise Requeue(s.queue.backoff_of(key), error)
        await self._cycle(group_key, group, queued, key)

    async def _cycle(
        self, group_key: ObjectKey, group: PodGroup, queued: list[Pod], popped: ObjectKey
    ) -> None:
        s = self.scheduler
        self.failed.pop(group_key, None)
        for gone in [k for k in self.failed if s.cache.pod_group(k) is None]:
            del self.failed[gone]  # PodGroups deleted since their last cycle
        moves, version = s.queue.moves, group.metadata.resource_version
        placed_before = self.placed(group_key)
        attempts = {key_of(p): s.queue.record(key_of(p)).attempts for p in queued}
        order = ordered(queued, attempts)
        placement = await self._place(group, order, placed_before)
        if placement.waiting is not None:
            # The whole group waits for, or retries after, what this pod needs first
            # (upstream's PreEnqueue gates the group on any of its pods).
            await s.prepared(*placement.waiting)
            return
        assumed, failed = placement.assumed, placement.failed
        verdict = outcome(
            group, placed_before, [key_of(a[0]) for a in assumed], failed, placement.remaining
        )
        if not verdict.succeeded and assumed and s.settings.gang_search:
            # Some pods fit: another combination of their choices may fit the whole group.
            self._undo(assumed)
            assumed = []
            found = await self._search(group, order, placed_before)
            if found is not None:
                log.info(
                    "pod group placed by searching its pods' choices",
                    group=str(group_key),
                    pods=[str(key_of(a[0])) for a in found],
                )
                assumed, failed = found, {}
                placed = [key_of(a[0]) for a in assumed]
                verdict = outcome(group, placed_before, placed, failed, 0)
        for mkey in failed:
            s.attempt_ended(mkey, "unschedulable")
        if verdict.succeeded:
            log.info(
                "pod group placed",
                group=str(group_key),
                pods=[str(key_of(a[0])) for a in assumed],
                placed_before=placed_before,
            )
            s.binder.start_group(group_key, group.min_count, assumed)
            for member in order:
                if key_of(member) in failed:
                    await s.unschedulable(member, failed[key_of(member)])
            await self._condition(group, "True", SCHEDULED_REASON, "")
            return
        self._undo(assumed)
        message = verdict.message or ""
        log.info("pod group unschedulable", group=str(group_key), reason=message)
        stranded = stranded_group_claims(
            group, list(placement.shared.values()), placement.unavailable, placed_before
        )
        for claim in stranded:
            await self._deallocate(group_key, claim)
        if not stranded and s.settings.preemption:
            # PodGroupPostFilter: DynamicResources' deallocation first, then preemption, whose
            # answer upstream appends to the group's reason.
            said = await self._preempt(group, order, placed_before)
            message = f"{message}, {group_preemption.PREFIX}{said}"
        for member in order:
            mkey = key_of(member)
            if mkey not in failed:
                s.attempt_ended(mkey, "unschedulable")
            told = pod_message(verdict, mkey, mkey in placement.evaluated)
            await s.unschedulable(member, message if told == verdict.message else told)
        # Upstream's condition carries the group's reason without the pods' prefix.
        reason = message.removeprefix(f"{UNSCHEDULABLE}, ")
        await self._condition(group, "False", "Unschedulable", reason)
        tried = frozenset(key_of(p) for p in order)
        self.failed[group_key] = FailedCycle(moves, version, tried, s.clock.monotonic())
        s.queue.set_state(popped, PodState.UNSCHEDULABLE)
        raise Requeue(s.settings.unschedulable_retry, "pod group unschedulable")

    async def _place(
        self,
        group: PodGroup,
        order: list[Pod],
        placed_before: int,
        on: Mapping[ObjectKey, str] | None = None,
    ) -> Placement:
        """The cycle's placement: each pod in ``order`` filtered and, when it fits, assumed for
        the next. ``on`` (a preemption's reprieve): only these pods, each on its node; every
        one must fit. What is assumed stays until ``_undo``; an exception undoes it."""
        s = self.scheduler
        out = Placement(remaining=len(order))
        try:
            for member in order:
                mkey = key_of(member)
                if on is None and cannot_be_satisfied(
                    group.min_count, placed_before + len(out.assumed), out.remaining
                ):
                    break
                if on is not None and mkey not in on:
                    continue
                prepared = s.prepare_pod(member, group if s.group_claims else None)
                if not isinstance(prepared, Ready):
                    self._undo(out.assumed)
                    out.assumed = []
                    out.waiting = (mkey, member, prepared)
                    return out
                if self._trial is None:
                    s.queue.record(mkey).begin_attempt(time.perf_counter())
                attempt = self._snapshot(prepared)
                if on is not None:
                    attempt = dataclasses.replace(
                        attempt, nodes=[n for n in attempt.nodes if n.metadata.name == on[mkey]]
                    )
                if not out.assumed:  # before the cycle assumed any: as the cache has them
                    out.shared.update(
                        {c.key: c for c in prepared.claims if c.key in prepared.shared}
                    )
                filtered = await s.filter(attempt)
                out.remaining -= 1
                out.evaluated.add(mkey)
                if filtered is not None:
                    out.unavailable.update(filtered[0].unavailable)
                if filtered is None or filtered[1] is None:
                    out.failed[mkey] = (
                        unschedulable_message(len(attempt.nodes), filtered[0])
                        if filtered is not None
                        else "the pod's allocation gave way to other tenants' pods"
                    )
                    if on is not None:
                        return out
                    continue
                fit = out.fits[mkey] = filtered[1]
                out.assumed.append(s.assume(attempt, fit))
                if self._trial is not None:
                    self._trial.assumed.append(holding(fit.results, s.features))
        except BaseException:
            self._undo(out.assumed)
            raise
        return out

    def _snapshot(self, prepared: Ready) -> Attempt:
        """The pod's snapshot, with a preemption trial's victims taken out."""
        s = self.scheduler
        attempt = s.snapshot(prepared)
        trial = self._trial
        if trial is None:
            return attempt
        promised = s.preemptor.promised(prepared.key, attempt.priority.value)
        state = trial.base.plus(trial.assumed).plus(n.holding for n in promised.values())
        return dataclasses.replace(
            attempt, state=state, usage=trial.removed.usage(attempt.usage), what_if=True
        )

    # --- PodGroupPostFilter: preemption for the group ------------------------------------------

    async def _preempt(self, group: PodGroup, order: list[Pod], placed_before: int) -> str:
        """The group's preemption (``scheduling.group_preemption``); what follows "pod group
        preemption: " in the pods' message."""
        s = self.scheduler
        p = s.preemptor
        classes = s.cache.classes_by_name()
        gate = s.settings.gate("PodGroupPreemptionPolicy")
        if not group_preemption.preempts(group, order, classes, gate):
            return preemption.NEVER
        releases = [r for member in order for r in await p.victim_claims(member)]
        if releases:
            # Victims gone: their devices are about to be free, no more evictions.
            await p.release_victim_claims(order[0], releases)
            return group_preemption.RELEASING
        priority = preemption.group_priority(group)
        lower = p.lower_priority_pods(priority)
        if self._ongoing(order, lower):
            return group_preemption.ONGOING
        units = preemption.units_of(
            [r for pods in lower.values() for r in pods], preemption.members(lower)
        )
        chosen = await self._victims(group, order, placed_before, units) if units else None
        if not isinstance(chosen, tuple):
            for member in order:
                if s.queue.nominated_node(member):
                    await p.clear_nomination(member)
            return chosen or group_preemption.NO_VICTIMS
        victims, fits = chosen
        await p.evict_group(group, order, fits, [u.pods for u in victims])
        return group_preemption.found(sum(len(u.pods) for u in victims))

    def _ongoing(self, order: list[Pod], lower: Mapping[str, Sequence[RunningPod]]) -> bool:
        """isOngoingPreemption: the group's victims are not gone yet (pods of lower priority
        terminating by preemption on its pods' nominated nodes, or evictions this replica waits
        for)."""
        s = self.scheduler
        waited = set(s.preemptor.victims.values())
        if any(key_of(m) in waited for m in order):
            return True
        nodes = {n for m in order if (n := s.queue.nominated_node(m))}
        return any(
            preemption.terminating_by_preemption(r.pod)
            for node in nodes
            for r in lower.get(node, ())
        )

    async def _victims(
        self, group: PodGroup, order: list[Pod], placed_before: int, units: list[Unit]
    ) -> tuple[list[Unit], dict[ObjectKey, NodeFit]] | str:
        """selectVictimsOnDomain: the group's cycle with every lower-priority unit gone, then
        each unit put back when the placement survives it; the units left and each pod's fit
        (or why no placement was found)."""
        s = self.scheduler
        fits = await self._try(group, order, placed_before, units, None)
        if isinstance(fits, str):
            return fits
        proposed = {k: f.node for k, f in fits.items()}
        nodes = frozenset(proposed.values())
        budgets = [preemption.Budget.of(b) for b in s.cache.all_of(s.cache.budgets, "pdbs")]
        important = preemption.more_important_units(units, s.clock.now())
        violating, other = preemption.split_by_budget(important, budgets)
        removed = list(units)
        victims: list[Unit] = []
        for unit in [u for u, _ in violating] + other:
            rest = [u for u in removed if u is not unit]
            if group_preemption.touches(unit, nodes):
                kept = await self._try(group, order, placed_before, rest, proposed)
                if isinstance(kept, str):
                    victims.append(unit)
                    continue
                fits = kept
            removed = rest
        return victims, fits

    async def _try(
        self,
        group: PodGroup,
        order: list[Pod],
        placed_before: int,
        removed: list[Unit],
        on: Mapping[ObjectKey, str] | None,
    ) -> dict[ObjectKey, NodeFit] | str:
        """The group's cycle with the ``removed`` units' pods gone (``on``: each pod on its
        proposed node); the pods' fits, or why it fails. Nothing of it stays assumed."""
        s = self.scheduler
        gone = group_preemption.Removed.of(removed)
        self._trial = Trial(gone, gone.state(s.cache.allocated.state(), s.features))
        try:
            placement = await self._place(group, order, placed_before, on)
        finally:
            self._trial = None
        self._undo(placement.assumed)
        placed = [key_of(a[0]) for a in placement.assumed]
        if on is not None:
            return placement.fits if len(placed) == len(on) else "a proposed node no longer fits"
        if placement.waiting is not None:
            return "a pod of the group is not ready to be scheduled"
        verdict = outcome(group, placed_before, placed, placement.failed, placement.remaining)
        return placement.fits if verdict.succeeded else verdict.message or UNSCHEDULABLE

    async def _search(
        self, group: PodGroup, order: list[Pod], placed_before: int
    ) -> list[Assumed] | None:
        """The pods of a cycle that failed, placed by searching their prioritized alternatives
        and the other nodes that fit them (``scheduling.group_search``), within the filter
        timeout; None (nothing kept) when no combination reaches ``minCount``."""
        s = self.scheduler
        budget = s.settings.filter_timeout or DEFAULT_FILTER_TIMEOUT
        deadline = s.clock.monotonic() + budget

        async def options(member: Pod) -> AsyncGenerator[tuple[Attempt, NodeFit], None]:
            prepared = s.prepare_pod(member, group if s.group_claims else None)
            if not isinstance(prepared, Ready):
                return
            for variant in variants(prepared.claims):
                tried = dataclasses.replace(
                    prepared, claims=tuple(restricted(prepared.claims, variant))
                )
                filtered = await s.filter(s.snapshot(tried), every_fit=True)
                if filtered is None:
                    continue
                attempt = s.snapshot(prepared)  # assumed with the claims as they are
                for fit in filtered[0].fits[:NODE_OPTIONS]:
                    yield attempt, fit

        def undo(placed: Assumed) -> None:
            self._undo([placed])

        return await search(
            order,
            group.min_count,
            placed_before,
            options,
            lambda option: s.assume(*option),
            undo,
            lambda: s.clock.monotonic() > deadline,
        )

    async def _deallocate(self, group: ObjectKey, claim: ResourceClaim) -> None:
        """A claim of the group's that none of its pods can use, held by no placed pod:
        deallocated so that the next cycle can allocate it afresh; its event brings the
        group's pods back."""
        s = self.scheduler
        try:
            await s.write_claim(planning.deallocation(claim))
        except (ConflictError, NotFoundError):
            return  # changed meanwhile: its event brings the pods back
        s.queue.unsatisfiable.clear()
        log.info(
            "deallocated a pod group's claim no node can use (PodGroupPostFilter)",
            group=str(group),
            **{fields.CLAIM: claim.key},
        )

    def _undo(self, assumed: list[Assumed]) -> None:
        """What the cycle assumed, undone, last first: devices it took are free again, so
        outcomes known unsatisfiable meanwhile may be wrong now."""
        s = self.scheduler
        for pod, plan, _node, _status in reversed(assumed):
            s.unassume(pod, plan)
            s.queue.set_state(key_of(pod), PodState.QUEUED)
        if assumed:
            s.queue.unsatisfiable.clear()

    async def _condition(self, group: PodGroup, status: str, reason: str, message: str) -> None:
        """The PodGroup's PodGroupInitiallyScheduled, as upstream: written when it changes,
        never from True back to False."""
        s = self.scheduler
        patch = planning.group_condition(
            group, INITIALLY_SCHEDULED, status, reason, message, s.clock.now()
        )
        if patch is None:
            return
        try:
            await s.apply(patch)
        except NotFoundError:
            return

    # --- Permit --------------------------------------------------------------------------------

    async def permit(self, group: ObjectKey, min_count: int) -> bool:
        """GangScheduling's Permit: wait until ``min_count`` pods of the group are placed
        (bound, or binding here); False when the timeout passes first."""
        s = self.scheduler
        deadline = s.clock.monotonic() + s.settings.gang_permit_timeout
        while self.placed(group) < min_count:
            left = deadline - s.clock.monotonic()
            if left <= 0:
                return False
            event = self.waiters.setdefault(group, asyncio.Event())
            event.clear()
            try:
                await asyncio.wait_for(event.wait(), left)
            except TimeoutError:
                return False
        return True

    def timeout_message(self) -> str:
        """kube-scheduler's message for a pod rejected at Permit by the timeout."""
        waited = go_duration(self.scheduler.settings.gang_permit_timeout)
        return (
            "0/1 nodes are available: 1 rejected due to timeout after waiting "
            f"{waited} at plugin GangScheduling."
        )
