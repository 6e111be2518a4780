"""Pod groups (1.37's GenericWorkload): the pods of a PodGroup tried in one cycle and placed
together, or none of them, with the claims they share allocated once (DRAWorkloadResourceClaims).

The cycle is ``scheduling.group_cycle`` (pure, the one ``simulate --pod-group`` runs too) and its
preemption ``scheduling.group_preemption``; this module runs them against the scheduler's cache
(``_Host``: each pod's preparation, snapshot and Filter are the single pod's, and Reserve is
``reserve.assume``) and carries out what they say:

- any pod of the group popped from the queue runs the group's cycle, for every queued pod of it,
  once the group may be tried (``scheduling.groups``: its PodGroup there, ``minCount`` pods,
  no scheduling gates, one scheduler name and the group's priority on each);
- a pod not ready (its claims, binding conditions): what its preparation says is done, as for
  a single pod (``Scheduler.prepared``), and the group waits;
- placed: the binding task (``Binder.start_group``) waits at Permit (``permit``) until the
  group's placed pods reach ``minCount``, then binds them one after another, the group's claims
  written by the first;
- not placed: nothing assumed stays; a group claim no pod can use is deallocated, else the
  group may preempt (evictions and nominations by ``Preemptor.evict_group``), and each pod is
  told why.

The PodGroup's ``PodGroupInitiallyScheduled`` condition says how the last cycle ended, as
kube-scheduler 1.37.2 writes it (True once, never back).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import structlog

from operators.allocator import AllocatedState, Allocator, Features
from operators.api.core import Node, Pod
from operators.api.groups import INITIALLY_SCHEDULED, SCHEDULED_REASON, PodGroup, group_name
from operators.api.keys import ObjectKey
from operators.api.resource import ResourceClaim
from operators.controllers.scheduler import planning
from operators.controllers.scheduler.binder import Binder
from operators.controllers.scheduler.permit import Permit
from operators.controllers.scheduler.preemptor import Preemptor
from operators.controllers.scheduler.protocol import SchedulerIO
from operators.controllers.scheduler.queueing import PodState, SchedulingQueue
from operators.controllers.scheduler.reserve import Reserved, assume
from operators.controllers.scheduler.settings import SchedulerSettings
from operators.controllers.scheduler.trees import TreeScheduler
from operators.kube.api import NotFoundError
from operators.observability import fields
from operators.runtime.errors import Requeue
from operators.scheduling import group_cycle, group_preemption, preemption
from operators.scheduling.attempt import Attempt, Prepared, Ready
from operators.scheduling.cycle import NodeFit
from operators.scheduling.group_cycle import Cycle, Filtered
from operators.scheduling.groups import (
    SCHEDULER_ERROR,
    FailedCycle,
    key_of,
    not_placed,
    ordered,
    refused,
    tried_with_group,
    waits,
)
from operators.scheduling.profile import Profile
from operators.scheduling.topology import Domain, DomainError

log = structlog.get_logger(__name__)


class Scheduler(SchedulerIO, Protocol):
    """What the group cycles use of their scheduler (the handlers' ``Scheduler``): the single
    pod's steps, which a group's pods go through one by one."""

    settings: SchedulerSettings
    profile: Profile
    queue: SchedulingQueue
    binder: Binder
    preemptor: Preemptor
    permit: Permit

    def prepare_pod(self, pod: Pod, group: PodGroup | None = None) -> Prepared: ...

    def snapshot(self, ready: Ready) -> Attempt: ...

    async def filter(self, attempt: Attempt, *, every_fit: bool = False) -> Filtered | None: ...

    def allocator(
        self,
        state: AllocatedState | None,
        out_of_time: Callable[[], bool] | None,
        *,
        timed: bool = False,
    ) -> Allocator: ...

    async def prepared(self, key: ObjectKey, pod: Pod, prepared: Prepared) -> Ready | None: ...

    async def deallocate(self, claim: ResourceClaim) -> bool: ...

    async def unschedulable(self, pod: Pod, message: str, reason: str = ...) -> bool: ...


@dataclasses.dataclass
class _Host:
    """The group's cycle against the scheduler's cache (``group_cycle.Host``). ``group``: the
    PodGroup each pod's preparation is given (with DRAWorkloadResourceClaims on)."""

    scheduler: Scheduler
    group: PodGroup | None
    #: A tree's PodGroups by name: each pod prepared with its own (``trees``).
    tree: Mapping[str, PodGroup] | None = None

    @property
    def features(self) -> Features:
        return self.scheduler.profile.features

    def prepare(self, pod: Pod) -> Prepared:
        if self.tree is not None and self.scheduler.profile.group_claims:
            return self.scheduler.prepare_pod(pod, self.tree.get(group_name(pod) or ""))
        return self.scheduler.prepare_pod(pod, self.group)

    def snapshot(self, ready: Ready) -> Attempt:
        return self.scheduler.snapshot(ready)

    def state(self) -> AllocatedState:
        return self.scheduler.cache.allocated.state()

    async def filter(self, attempt: Attempt, *, every_fit: bool = False) -> Filtered | None:
        return await self.scheduler.filter(attempt, every_fit=every_fit)

    def assume(self, attempt: Attempt, fit: NodeFit) -> Reserved:
        return assume(self.scheduler, attempt, fit)

    def began(self, key: ObjectKey) -> None:
        self.scheduler.queue.record(key).begin_attempt(time.perf_counter())

    def nodes(self) -> Sequence[Node]:
        return self.scheduler.cache.all_nodes()

    def allocator(self) -> Allocator:
        return self.scheduler.allocator(None, None)

    def monotonic(self) -> float:
        return self.scheduler.clock.monotonic()


class GroupScheduler:
    """The group cycles of one scheduler replica."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        #: PodGroup -> its last cycle, while that placed nothing.
        self.failed: dict[ObjectKey, FailedCycle] = {}
        self.trees = TreeScheduler(self)

    def in_flight(self, key: ObjectKey) -> bool:
        s = self.scheduler
        return key in s.binder or key in s.queue.bound_unseen

    def queued(self, members: Sequence[Pod]) -> list[Pod]:
        """The group's pods this replica is to place now: not bound, not binding, its own,
        not being deleted."""
        s = self.scheduler
        return [
            p
            for p in members
            if not p.spec.node_name
            and not self.in_flight(key_of(p))
            and p.spec.scheduler_name == s.settings.scheduler_name
            and not p.metadata.is_deleting
        ]

    def host(self, tree: Mapping[str, PodGroup] | None = None) -> _Host:
        """The cycle's host (``tree``: a tree's PodGroups, each pod prepared with its own)."""
        return _Host(self.scheduler, None, tree)

    async def schedule(self, pod: Pod) -> None:
        """The cycle of the group ``pod`` names, for every queued pod of it."""
        s = self.scheduler
        key = key_of(pod)
        off = s.profile.groups_off()
        if off is not None:
            if await s.unschedulable(pod, not_placed(pod, off)):
                raise Requeue(s.settings.unschedulable_retry, "pod groups are off")
            return
        group_key = ObjectKey(key.namespace, group_name(pod) or "")
        group = s.cache.pod_group(group_key)
        if group is not None and group.spec.parent_composite_pod_group_name and s.profile.composite:
            await self.trees.schedule(pod, group)
            return
        members = s.cache.group_pods(group_key)
        reason = waits(group, group_key, len(members))
        if group is None or reason is not None:
            # Said in the log only, as upstream: the PodGroup, or the next pod of the group,
            # brings the group back.
            log.debug("pod group waits", **{fields.POD: str(key)}, group=str(group_key), why=reason)
            return
        queued = self.queued(members)
        if not queued:
            return
        if any(p.spec.scheduling_gates for p in queued):
            log.debug("pod group waits for a pod's scheduling gates", group=str(group_key))
            return
        if tried_with_group(
            self.failed.get(group_key),
            key,
            [key_of(p) for p in queued],
            s.queue.moves,
            group.metadata.resource_version,
            s.clock.monotonic(),
            s.settings.unschedulable_retry,
        ):
            log.debug("pod tried in its group's last cycle", **{fields.POD: str(key)})
            s.queue.set_state(key, PodState.UNSCHEDULABLE)
            raise Requeue(s.settings.unschedulable_retry, "tried in its group's last cycle")
        refusal = refused(
            group, queued, [p for p in members if p.spec.node_name], s.profile.group_rules
        )
        if refusal is not None:
            for member in queued:
                await s.unschedulable(member, refusal.message, refusal.reason)
            await self.condition(group, "False", refusal.reason, refusal.message)
            raise Requeue(s.queue.backoff_of(key), refusal.message)
        await self._cycle(group_key, group, queued, key)

    async def _cycle(
        self, group_key: ObjectKey, group: PodGroup, queued: list[Pod], popped: ObjectKey
    ) -> None:
        s = self.scheduler
        self.failed.pop(group_key, None)
        for gone in [k for k in self.failed if s.cache.pod_group(k) is None]:
            del self.failed[gone]  # PodGroups deleted since their last cycle
        moves, version = s.queue.moves, group.metadata.resource_version
        placed_on = s.permit.placed_on(group_key)
        placed_before = len(placed_on)
        attempts = {key_of(p): s.queue.record(key_of(p)).attempts for p in queued}
        order = ordered(queued, attempts)
        host = _Host(s, group if s.profile.group_claims else None)
        rules = s.profile.topology
        try:
            cycle = await group_cycle.run_group(
                host,
                group,
                order,
                placed_on,
                rules=rules,
                nominated={n for m in order if (n := s.queue.nominated_node(m))},
                count_devices=s.profile.policies.domain_device_count,
                gang_search=s.profile.gang_search,
                search_timeout=s.profile.search_timeout,
                fit_errors=s.profile.group_rules.fit_errors,
            )
        except DomainError as e:
            assert rules is not None
            log.info("pod group has no single domain", group=str(group_key), error=str(e))
            for member in order:
                await s.unschedulable(member, e.told(rules, group_key.name), SCHEDULER_ERROR)
            await self.condition(group, "False", SCHEDULER_ERROR, str(e))
            raise Requeue(s.queue.backoff_of(popped), str(e)) from None
        placement = cycle.placement
        if placement.waiting is not None:
            # The whole group waits for, or retries after, what this pod needs first.
            waiting, prepared = placement.waiting
            await s.prepared(key_of(waiting), waiting, prepared)
            return
        for mkey in placement.failed:
            s.queue.attempt_ended(mkey, "unschedulable")
        if cycle.succeeded:
            await self.placed(group_key, group, order, cycle, placed_before)
            return
        verdict = cycle.verdict
        assert verdict is not None
        log.info("pod group unschedulable", group=str(group_key), reason=verdict.message)
        for claim in cycle.stranded:
            if await s.deallocate(claim):
                log.info(
                    "deallocated a pod group's claim no node can use (PodGroupPostFilter)",
                    group=str(group_key),
                    **{fields.CLAIM: claim.key},
                )
        said = None
        if not cycle.stranded and s.profile.preemption is not None:
            # PodGroupPostFilter: DynamicResources' deallocation first, then preemption, whose
            # answer upstream appends to the group's reason.
            constrained = rules is not None and group.topology_key is not None
            domains = [t.domain for t in cycle.domains] if constrained else None
            said = group_preemption.PREFIX + await self._preempt(
                host, group, order, placed_before, domains
            )
        message, told = cycle.told([key_of(m) for m in order], said)
        for member in order:
            mkey = key_of(member)
            if mkey not in placement.failed:
                s.queue.attempt_ended(mkey, "unschedulable")
            await s.unschedulable(member, told[mkey])
        await self.condition(group, "False", "Unschedulable", group_cycle.condition(message))
        tried = frozenset(key_of(p) for p in order)
        self.failed[group_key] = FailedCycle(moves, version, tried, s.clock.monotonic())
        s.queue.set_state(popped, PodState.UNSCHEDULABLE)
        raise Requeue(s.settings.unschedulable_retry, "pod group unschedulable")

    async def placed(
        self,
        group_key: ObjectKey,
        group: PodGroup,
        order: list[Pod],
        cycle: Cycle[Reserved],
        placed_before: int,
    ) -> None:
        """The group placed: its pods go to Permit and their binding cycles; those that fit
        nowhere are told why."""
        s = self.scheduler
        assumed = cycle.placement.assumed
        if cycle.greedy is not None:
            log.info(
                "pod group placed by searching its pods' choices",
                group=str(group_key),
                pods=[str(a.key) for a in assumed],
            )
        log.info(
            "pod group placed",
            group=str(group_key),
            pods=[str(a.key) for a in assumed],
            placed_before=placed_before,
            domain=cycle.domain,
        )
        s.binder.start_group(group_key, group.min_count, assumed)
        failed = cycle.placement.failed
        for member in order:
            if key_of(member) in failed:
                await s.unschedulable(member, failed[key_of(member)])
        await self.condition(group, "True", SCHEDULED_REASON, "")

    async def _preempt(
        self,
        host: _Host,
        group: PodGroup,
        order: list[Pod],
        placed_before: int,
        placements: list[Domain] | None,
    ) -> str:
        """The group's preemption (``scheduling.group_preemption``): the reads it needs, then
        its writes; what follows "pod group preemption: " in the pods' message."""
        s = self.scheduler
        p = s.preemptor
        releases = [r for member in order for r in await p.victim_claims(member)]
        decided = await group_preemption.preempt(
            host,
            group,
            order,
            placed_before,
            classes=s.cache.classes_by_name(),
            policy=s.profile.group_rules.policy,
            victims_gone=bool(releases),
            lower=p.lower_priority_pods(preemption.group_priority(group)),
            evicting=set(p.victims.values()),
            nominated={n for m in order if (n := s.queue.nominated_node(m))},
            budgets=[preemption.Budget.of(b) for b in s.cache.all_of(s.cache.budgets, "pdbs")],
            now=s.clock.now(),
            placements=placements,
            fit_errors=s.profile.group_rules.fit_errors,
            release=s.profile.topology.release if s.profile.topology else None,
        )
        await p.carry_out(group, order, decided, releases)
        return decided.message

    async def condition(self, group: PodGroup, status: str, reason: str, message: str) -> None:
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
