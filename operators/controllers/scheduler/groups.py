"""Pod groups (1.37's GenericWorkload): the pods of a PodGroup tried in one cycle and placed
together, or none of them, with the claims they share allocated once (DRAWorkloadResourceClaims).

The rules are ``scheduling.groups`` (pure); this module runs them against the scheduler's cache:

- any pod of the group popped from the queue runs the group's cycle, for every queued pod of it;
- each pod goes through the same preparation and Filter as a single pod (``prepare``,
  ``Scheduler.filter``), and a pod that fits is assumed at once (``Scheduler.assume``: its
  claims in the in-flight ledger, its node usage), so the next pod sees its devices; a claim of
  the group, allocated for the first pod, is in the ledger allocated and reserved for the
  PodGroup, so the pods after it use that allocation and must reach its devices;
- when the group is not placed, everything assumed is undone (nothing was written) and each pod
  is told why; when it is, the binding task (``Binder.start_group``) waits at Permit until the
  group's placed pods reach ``minCount``, then binds them one after another, the group's claims
  written by the first.

The PodGroup's ``PodGroupInitiallyScheduled`` condition says how the last cycle ended, as
kube-scheduler 1.37.2 writes it (True once, never back).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncGenerator, Sequence
from typing import Protocol

import structlog

from operators.allocator import Features
from operators.allocator.features import V1_37
from operators.api.core import Pod
from operators.api.groups import INITIALLY_SCHEDULED, SCHEDULED_REASON, PodGroup, group_name
from operators.api.keys import ObjectKey
from operators.api.resource import ResourceClaim
from operators.controllers.scheduler import planning
from operators.controllers.scheduler.binder import Binder
from operators.controllers.scheduler.protocol import SchedulerIO
from operators.controllers.scheduler.queueing import PodState, SchedulingQueue
from operators.controllers.scheduler.settings import SchedulerSettings
from operators.kube.api import ConflictError, NotFoundError
from operators.observability import fields
from operators.runtime.actions import Patch
from operators.runtime.errors import Requeue
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


class GroupScheduler:
    """The group cycles and the Permit waits of one scheduler replica."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        #: PodGroup -> an event set when the group or one of its pods changes (Permit waits).
        self.waiters: dict[ObjectKey, asyncio.Event] = {}
        #: PodGroup -> its last cycle, while that placed nothing.
        self.failed: dict[ObjectKey, FailedCycle] = {}

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
        remaining = len(order)
        assumed: list[Assumed] = []
        failed: dict[ObjectKey, str] = {}
        evaluated: set[ObjectKey] = set()
        unavailable: set[str] = set()  # claims a pod's cycle found no node could use
        shared: dict[str, ResourceClaim] = {}  # the group's claims, as the cycle saw them
        try:
            for member in order:
                if cannot_be_satisfied(group.min_count, placed_before + len(assumed), remaining):
                    break
                mkey = key_of(member)
                prepared = s.prepare_pod(member, group if s.group_claims else None)
                if not isinstance(prepared, Ready):
                    # The whole group waits for, or retries after, what this pod needs first
                    # (upstream's PreEnqueue gates the group on any of its pods).
                    self._undo(assumed)
                    assumed = []
                    await s.prepared(mkey, member, prepared)
                    return
                record = s.queue.record(mkey)
                record.begin_attempt(time.perf_counter())
                attempt = s.snapshot(prepared)
                if not assumed:  # before the cycle assumed any: as the cache has them
                    shared.update({c.key: c for c in prepared.claims if c.key in prepared.shared})
                filtered = await s.filter(attempt)
                remaining -= 1
                evaluated.add(mkey)
                if filtered is not None:
                    unavailable.update(filtered[0].unavailable)
                if filtered is None or filtered[1] is None:
                    failed[mkey] = (
                        unschedulable_message(len(attempt.nodes), filtered[0])
                        if filtered is not None
                        else "the pod's allocation gave way to other tenants' pods"
                    )
                    continue
                assumed.append(s.assume(attempt, filtered[1]))
        except BaseException:
            self._undo(assumed)
            raise
        verdict = outcome(group, placed_before, [key_of(a[0]) for a in assumed], failed, remaining)
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
        for claim in stranded_group_claims(
            group, list(shared.values()), unavailable, placed_before
        ):
            await self._deallocate(group_key, claim)
        for member in order:
            mkey = key_of(member)
            if mkey not in failed:
                s.attempt_ended(mkey, "unschedulable")
            await s.unschedulable(member, pod_message(verdict, mkey, mkey in evaluated))
        # Upstream's condition carries the group's reason without the pods' prefix.
        reason = message.removeprefix(f"{UNSCHEDULABLE}, ")
        await self._condition(group, "False", "Unschedulable", reason)
        tried = frozenset(key_of(p) for p in order)
        self.failed[group_key] = FailedCycle(moves, version, tried, s.clock.monotonic())
        s.queue.set_state(popped, PodState.UNSCHEDULABLE)
        raise Requeue(s.settings.unschedulable_retry, "pod group unschedulable")

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
