"""The scheduler, in kube-scheduler's extension points; one scheduling attempt at a time.

Where each step lives, in the order a pod meets them:

- queueing (``queueing``): the scheduling queue, a record per pending pod, and which watch
  events bring a pod back, with a hint and its reason;
- PreEnqueue and PreFilter (``pre_filter``): ``scheduling.attempt.prepare`` says whether the
  pod waits (its claims not there yet, binding conditions pending), or what must happen
  first (a shared device repaired, a stale special claim deleted, failed binding conditions
  undone), or that it is ready for Filter; the same preparation ``simulate`` answers from;
- Filter (``filter``): the pure cycle (``scheduling.cycle``) off the event loop, within the
  attempt's time (``budget``);
- then ``scheduling.decision`` says what the pod gets, for the scheduler and for ``simulate``:
  Reserve (``reserve``) and the binding cycle (``binder``: PreBind, Bind, Unreserve), or
  PostFilter (``post_filter``): the pod's stranded claim, its victims' claims, preemption
  (``preemptor``; with ``rank-first``, before reserving a worse alternative), or
  unschedulable;
- a pod of a PodGroup goes through its group's cycle instead (``groups``: the same steps for
  each of its pods, ``scheduling.group_cycle``), its binding through Permit (``permit``);
- beside the attempts: the double-allocation repair (``repair``).

What the release, the gates and the flags switch on is ``profile`` (``scheduling.profile``),
derived once. The ledger and the claims' statuses are the whole state: after a restart or a
change of leader, claims allocated and reserved for an unbound pod simply continue (every
pending pod is queued when this replica starts leading). Writes are fenced by the Lease
(``runtime.leader``).
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Callable
from typing import Any

import structlog

from operators.allocator import AllocatedState
from operators.allocator.allocator import Allocator
from operators.api.core import Pod
from operators.api.groups import PodGroup
from operators.api.keys import ObjectKey
from operators.api.resource import ResourceClaim
from operators.controllers.scheduler import metrics, planning, queueing
from operators.controllers.scheduler.binder import Binder
from operators.controllers.scheduler.budget import RunningBudget, TimedAllocator
from operators.controllers.scheduler.cache import SchedulerCache
from operators.controllers.scheduler.groups import GroupScheduler
from operators.controllers.scheduler.permit import Permit
from operators.controllers.scheduler.preemptor import Preemptor
from operators.controllers.scheduler.queueing import INITIAL_BACKOFF, PodState, SchedulingQueue
from operators.controllers.scheduler.repair import Repair
from operators.controllers.scheduler.reserve import assume
from operators.controllers.scheduler.settings import SchedulerSettings
from operators.kube.api import ConflictError, NotFoundError
from operators.observability import fields
from operators.runtime.actions import ReplaceStatus, Write
from operators.runtime.controller import Controller
from operators.runtime.errors import Requeue, TemporaryError
from operators.runtime.informer import EventFeed, Feeds
from operators.runtime.tasks import TaskOwner
from operators.scheduling import preemption
from operators.scheduling.attempt import (
    Attempt,
    DropStaleClaim,
    Prepared,
    Ready,
    SharedDevice,
    Wait,
    prepare,
)
from operators.scheduling.cycle import (
    CycleResult,
    NodeFit,
    prefer_nominated,
    run_cycle,
    unschedulable_message,
)
from operators.scheduling.decision import (
    Deallocate,
    Decision,
    Preempt,
    ReleaseVictimClaims,
    Reserve,
    Unschedulable,
    decide,
)
from operators.scheduling.group_cycle import Filtered
from operators.scheduling.node_allocatable import NodeAllocatableInput
from operators.scheduling.pod_filters import pre_filter
from operators.scheduling.snapshot import waits_for_pods

log = structlog.get_logger(__name__)

#: CPU seconds under which a cycle runs on the event loop rather than in a thread: a thread
#: holds the interpreter for 5 ms at a time (the switch interval) and the loop waits anyway.
INLINE_CYCLE = 0.01
#: Weight of the last cycle in the smoothed seconds per node.
CYCLE_SMOOTHING = 0.2

COMPONENT = "scheduler"


def _timed(cycle: Callable[[], CycleResult]) -> tuple[CycleResult, float]:
    """The cycle's result and the CPU seconds its thread spent on it."""
    started = time.thread_time()
    result = cycle()
    return result, time.thread_time() - started


def _namespace(key: ObjectKey) -> str:
    return key.namespace


class Scheduler(Controller[SchedulerSettings]):
    """One scheduler replica."""

    component = COMPONENT
    metrics_registry = metrics.REGISTRY

    def __init__(self, settings: SchedulerSettings, **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        #: What this scheduler does on this cluster, derived once from its settings, the
        #: cluster's release and the gates; every part follows it.
        self.profile = settings.profile()
        # The selectors mean what the cluster's release makes of them (the local control
        # plane's, for now).
        self.cache = SchedulerCache(
            settings.scheduler_name,
            self.profile.features,
            kubernetes=str(self.profile.features.kubernetes),
            node_allocatable=self.profile.node_allocatable,
        )
        self.indices = self.cache.indices
        #: Every task this replica starts while it leads (binding cycles, the requeue flush).
        self.tasks = TaskOwner("scheduler")
        # One lane per namespace: every tenant's pods get their turn (see ``AttemptBudget``).
        self.queue = SchedulingQueue(
            self.schedule,
            clock=self.clock,
            tasks=self.tasks,
            lane_of=_namespace,
            leading=lambda: self.active,
            profile_name=settings.scheduler_name,
            backoff_pops=self.profile.backoff_pops,
            starving_after=settings.starving_after,
        )
        # CPU seconds per candidate node of recent cycles (smoothed): predicts the next's.
        self._cycle_per_node = INLINE_CYCLE / 100
        self.budget = RunningBudget(
            self.clock,
            filter_timeout=self.profile.filter_timeout,
            tenant_slice=settings.tenant_slice,
            others_waiting=lambda key: self.queue.others_waiting(key),
        )
        self.permit = Permit(self)
        self.binder = Binder(self, self.permit)
        self.groups = GroupScheduler(self)
        self.preemptor = Preemptor(self)
        self.repairs = Repair(self)
        self.feeds = Feeds(self.events_to_register())
        metrics.PENDING_PODS.samples = lambda: self.queue.pending_pods(self.cache.gated())
        metrics.OLDEST_PENDING.samples = lambda: [
            ((), self.cache.oldest_pending_age(self.clock.now()))
        ]

    # --- one scheduling attempt ----------------------------------------------------------------

    async def schedule(self, key: ObjectKey) -> None:
        """One attempt for one pod: PreEnqueue and PreFilter, Filter, then what ``decide``
        says: Reserve, or PostFilter."""
        ready = await self.pre_filter(key)
        if ready is None:
            return
        record = self.queue.record(key)
        record.begin_attempt(time.perf_counter())
        log.debug("attempt", **{fields.POD: str(key)}, attempt=record.attempts)
        attempt = self.snapshot(ready)
        filtered = await self.filter(attempt)
        if filtered is None:
            return  # it gave way to other tenants
        result, fit = filtered
        # The reads the decision needs come first: the claims of victims that are gone.
        victims = await self.preemptor.victim_claims(ready.pod) if fit is None else []
        decision = decide(
            ready.pod,
            ready.claims,
            result,
            fit,
            preemption=self.profile.preemption,
            freed=self._freed_since(attempt),
            in_flight={c.key for c in ready.claims if planning.claim_key(c) in self.cache.ledger},
            victim_claims=[claim for claim, _ in victims],
        )
        if isinstance(decision, Reserve):
            self.reserve(attempt, decision.fit)
        else:
            await self.post_filter(attempt, result, decision, victims)

    async def pre_filter(self, key: ObjectKey) -> Ready | None:
        """PreEnqueue and PreFilter, first in every attempt (``scheduling.attempt.prepare``):
        the pod ready for Filter, or None while it waits (bound, gated, deleting, its claims
        not there yet, binding conditions pending: their events bring it back). What must
        happen first (a shared device repaired, a stale special claim deleted, failed binding
        conditions undone) happens here, and the pod is tried again."""
        if not self.active or key in self.binder or key in self.queue.bound_unseen:
            return None
        pod = self.cache.pending(key)
        if (
            pod is None
            or pod.spec.node_name
            or pod.spec.scheduling_gates
            or pod.metadata.is_deleting
        ):
            self.queue.forget(key)
            return None
        if pod.spec.scheduling_group is not None:
            await self.groups.schedule(pod)  # the group's pods are tried together
            return None
        return await self.prepared(key, pod, self.prepare_pod(pod))

    def prepare_pod(self, pod: Pod, group: PodGroup | None = None) -> Prepared:
        """PreFilter's reading of the pod against the cache (``group``: the PodGroup whose
        claims the pod shares, for a pod of a group)."""
        return prepare(
            pod,
            self.cache.claims_of(pod),
            now=self.clock.now(),
            binding_timeout=self.profile.binding_timeout,
            extended_classes=(
                self.cache.extended_resource_classes() if self.profile.extended else None
            ),
            special_claim=self.cache.extended_claim,
            shares_device=lambda claim: bool(self.cache.conflicts(planning.claim_key(claim))),
            group=group,
        )

    async def prepared(self, key: ObjectKey, pod: Pod, prepared: Prepared) -> Ready | None:
        """What ``prepare`` said, carried out: Ready goes on; a wait is noted (its event, or
        ``retry_after``, brings the pod back); anything else happens now, then the pod is tried
        again (``Requeue``)."""
        waiting = isinstance(prepared, Wait) and prepared.on_binding_conditions
        self.queue.wait_on_conditions(key, waiting)
        if isinstance(prepared, Ready):
            return prepared
        if isinstance(prepared, Wait):
            log.debug("pod waits", pod=str(key), reason=prepared.reason)
            if prepared.retry_after is not None:
                self.queue.add_after(key, prepared.retry_after + 0.5)
            return None
        if isinstance(prepared, SharedDevice):
            # Binding first would leave two bound pods on one device, which nothing can
            # repair: the repair decides who gives it back.
            for claim in prepared.claims:
                self.repairs.add(planning.claim_key(claim))
            raise Requeue(1.0, prepared.reason)
        if isinstance(prepared, DropStaleClaim):
            await self.binder.drop_stale_claim(pod, prepared.claim)
            raise Requeue(INITIAL_BACKOFF, "a stale claim for extended resources was deleted")
        await self.binder.binding_failed(pod, prepared)
        raise Requeue(1.0, prepared.message)

    def snapshot(self, ready: Ready) -> Attempt:
        """What the attempt allocates against: devices nominated for preemptors of higher or
        equal priority are not its to take (their devices and node usage count as taken)."""
        priority = preemption.priority_of(ready.pod, self.cache.classes_by_name())
        promised = self.preemptor.promised(ready.key, priority.value)
        nominations = list(promised.values())
        state = (
            self.cache.allocated.state().plus(n.holding for n in nominations) if promised else None
        )
        return Attempt(
            ready,
            priority,
            self.cache.all_nodes(),
            preemption.with_nominated(self.cache.usage.snapshot(), nominations),
            state,
            releases=self.cache.allocated.releases,
            moves=self.queue.moves,
            left_alone=tuple(promised),
            promised=tuple(n.holding for n in nominations),
            filters=pre_filter(ready.pod, self.cache.cluster(), self.profile.plugins),
        )

    async def filter(self, attempt: Attempt, *, every_fit: bool = False) -> Filtered | None:
        """Filter: every node filtered, the pod's claims allocated on each, the fits scored,
        off the event loop (watches, lease renewals and other pods' binds go on meanwhile)
        unless the cycle is predicted shorter than ``INLINE_CYCLE``.
        None: the attempt gave way to other tenants (its turn comes again after theirs; what
        it evaluated stays cached). ``every_fit``: every node that fits, not only the best
        (a pod group's search tries others)."""
        key = attempt.key
        record = self.queue.record(key)
        budget = self.budget.start(key, record.spent or 0.0)
        allocator = (
            self.allocator(attempt.state, self.budget.out_of_time, timed=True)
            if attempt.allocating
            else None
        )
        nominated = self.queue.nominated_node(attempt.pod)
        started, evaluations = time.perf_counter(), self.cache.selectors.evaluations
        # The cycle gets snapshots (usage copied, the allocator's state frozen); one cycle at
        # a time, so the view and selector caches it fills are its own.
        cycle = functools.partial(
            run_cycle,
            attempt.pod,
            attempt.claims,
            attempt.nodes,
            attempt.usage,
            allocator,
            scoring=self.profile.scoring,
            known_unsatisfiable=(
                None
                if attempt.what_if
                else self.queue.unsatisfiable.known(attempt.claims, attempt.left_alone)
            ),
            best_only=not every_fit,
            nominated=nominated,
            node_order=self.cache.order,
            extended=attempt.extended,
            node_allocatable=(
                NodeAllocatableInput(
                    self.cache.all_slices(),
                    self.profile.group_claims,
                    self.profile.features.since_1_38,
                )
                if self.profile.node_allocatable
                else None
            ),
            filters=attempt.filters,
        )
        # A cycle predicted short runs on the event loop: handing it to a thread and back costs
        # more than it would block the loop (issue 61: a tenth of the scheduler's CPU).
        inline = self._cycle_per_node * len(attempt.nodes) <= INLINE_CYCLE
        try:
            result, cpu = _timed(cycle) if inline else await asyncio.to_thread(_timed, cycle)
        finally:
            self.budget.running = None
        per_node = cpu / max(1, len(attempt.nodes))
        self._cycle_per_node += CYCLE_SMOOTHING * (per_node - self._cycle_per_node)
        if isinstance(allocator, TimedAllocator):
            metrics.ALLOCATOR_DURATION.observe(allocator.seconds)
            log.debug(
                "attempt filtered",
                **{fields.POD: str(key)},
                wall_s=round(time.perf_counter() - started, 4),
                allocator_s=round(allocator.seconds, 4),
                allocator_cpu_s=round(allocator.cpu_seconds, 4),
                cel_evaluations=self.cache.selectors.evaluations - evaluations,
                fits=len(result.fits),
                timed_out=result.timed_out,
                yielded=budget.yielded,
            )
        fit = prefer_nominated(result, nominated)
        if fit is None and result.timed_out and budget.yielded:
            record.spent = budget.total()
            self.queue.yield_turn(key)
            return None
        if result.timed_out and budget.timed_out:
            metrics.FILTER_TIMEOUTS.inc()
        record.spent = None
        return result, fit

    def allocator(
        self,
        state: AllocatedState | None,
        out_of_time: Callable[[], bool] | None,
        *,
        timed: bool = False,
    ) -> Allocator:
        """An allocator over the cache (``state``: the allocated state to allocate against,
        default every allocated and in-flight claim)."""
        return self.cache.allocator(
            self.profile.allocation_policy,
            lambda: str(uuid.uuid4()),
            out_of_time,
            kind=TimedAllocator if timed else Allocator,
            allocated=state,
        )

    def reserve(self, attempt: Attempt, fit: NodeFit) -> None:
        """Reserve, when a node fits (``reserve.assume``: the attempt's devices taken for every
        later cycle, its node usage assumed), and the binding cycle starts."""
        self.binder.start(assume(self, attempt, fit))

    async def post_filter(
        self,
        attempt: Attempt,
        result: CycleResult,
        decision: Decision,
        victims: list[tuple[ResourceClaim, ReplaceStatus]],
    ) -> None:
        """PostFilter: the decision's step (the pod's stranded claim, its victims' claims, or
        preemption), then PodScheduled=False with the reason, once. With ``rank-first``,
        preemption comes before reserving a fit whose alternative is worse than victims could
        give, and that fit is reserved when no victims are found."""
        pod, key = attempt.pod, attempt.key
        if isinstance(decision, Preempt) and decision.fallback is not None:
            if await self.preemptor.preempt(attempt, better_than=decision.better_than) is None:
                self.reserve(attempt, decision.fallback)
                return
            self.queue.attempt_ended(key, "unschedulable")
            raise Requeue(self.settings.unschedulable_retry, "waiting for preemption victims")
        self.queue.attempt_ended(key, "unschedulable")
        message = unschedulable_message(len(attempt.nodes), result)
        if isinstance(decision, Deallocate) and await self.deallocate(decision.claim):
            log.info(
                "deallocated a claim no node can use (PostFilter)",
                **{fields.POD: pod.key, fields.CLAIM: decision.claim.key},
            )
        elif isinstance(decision, ReleaseVictimClaims):
            await self.preemptor.release_victim_claims(pod, victims)
            message += f" {decision.note}"
        elif isinstance(decision, Preempt):
            outcome = await self.preemptor.preempt(attempt)
            assert outcome is not None  # without ``better_than`` there is always an answer
            message += f" preemption: {outcome}"
        elif isinstance(decision, Unschedulable) and decision.note:
            message += f" {decision.note}"
        if not await self.unschedulable(pod, message):
            return
        if result.timed_out:
            raise TemporaryError(f"pod {key}: {message}")  # retried with backoff
        if self._freed_since(attempt):
            # A claim gave up devices since the cycle's snapshot: the pod comes back after the
            # initial backoff, as upstream's queue treats an event that came in flight.
            raise Requeue(INITIAL_BACKOFF, "devices were freed during the attempt")
        if self.queue.moves != attempt.moves:
            # Something that may make room changed while the cycle ran; the requeue it caused
            # may have come before the pod was unschedulable, so it would wait the full retry.
            raise Requeue(INITIAL_BACKOFF, "the cluster changed during the attempt")
        raise Requeue(self.settings.unschedulable_retry, "unschedulable")

    async def unschedulable(self, pod: Pod, message: str, reason: str = "Unschedulable") -> bool:
        """The pod waits for a change, told why once: PodScheduled=False and a
        FailedScheduling Event when ``message`` is news (False: the pod is gone)."""
        key = planning.pod_key(pod)
        self.queue.set_state(key, PodState.UNSCHEDULABLE)
        if waits_for_pods(pod):
            self.queue.pod_waiters.add(key)
        record = self.queue.record(key)
        shown = pod.condition("PodScheduled")
        if shown is not None and shown.status == "False" and shown.message == message:
            record.last_message = message  # said before a restart, or by a leader
        if record.last_message != message:
            record.last_message = message
            log.info("pod unschedulable", **{fields.POD: str(key), fields.REASON: message})
            try:
                await self.apply(planning.unschedulable(pod, message, self.clock.now(), reason))
            except NotFoundError:
                return False
            await self.post(planning.failed_scheduling(pod, message))
        return True

    async def write_claim(self, action: Write) -> ResourceClaim:
        """A claim write of ours, kept in the in-flight ledger until the cache shows it (the
        next cycle may run before the watch event does)."""
        written = await self.apply(action)
        assert written is not None
        claim = ResourceClaim.load(written)
        self.cache.written(claim)
        return claim

    def _freed_since(self, attempt: Attempt) -> bool:
        return self.cache.allocated.releases != attempt.releases

    async def deallocate(self, claim: ResourceClaim) -> bool:
        """A claim whose allocation no node can use, held by nobody else, deallocated so that
        its pods can be placed again (upstream's PostFilter, and PodGroupPostFilter for a
        group's); its event brings them back. False: it changed meanwhile (so does that)."""
        try:
            await self.write_claim(planning.deallocation(claim))
        except (ConflictError, NotFoundError):
            return False
        self.queue.unsatisfiable.clear()
        return True

    # --- leadership ----------------------------------------------------------------------------

    async def prepare(self) -> None:
        # Every kind is listed before any cycle can run, then kept current by informers (whose
        # re-list on an expired watch reports deletions: no periodic resync is needed).
        await self.feeds.start(self.api)

    async def activate(self) -> None:
        self.queue.start()
        self.repairs.queue.start()
        # Every pending pod, including those whose claims an earlier leader allocated and
        # reserved for them but did not bind (stranded or waiting on binding conditions).
        for key in self.cache.pending_keys():
            self.queue.add(key)
        for key in self.cache.allocated_keys():
            if self.cache.conflicts(key):
                self.repairs.add(key)

    async def deactivate(self) -> None:
        """Nothing this replica started outlives its leadership."""
        self.preemptor.clear()
        await self.queue.stop()
        await self.repairs.queue.stop()
        await self.tasks.cancel_all()
        self.binder.forget()
        self.cache.forget_in_flight()
        self.queue.reset()

    async def release(self) -> None:
        await self.feeds.stop()

    # --- queueing: watch events ------------------------------------------------------------------

    def events_to_register(self) -> dict[str, EventFeed]:
        """Every watched kind to its feed, with its queueing hint (``queueing.feeds``)."""
        return queueing.feeds(
            self.cache,
            self.queue,
            queueing.Watched(
                victim_gone=self.preemptor.victim_gone,
                pod_left=self.preemptor.drop_nomination,
                repair=self.repairs.add,
                group_changed=self.permit.changed,
            ),
            taint_rules=self.profile.taint_rules,
            pod_groups=self.profile.groups,
            composites=self.profile.composite,
        )
