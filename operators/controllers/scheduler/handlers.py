"""The scheduler, in kube-scheduler's extension points; one scheduling attempt at a time.

Where each step lives, in the order a pod meets them:

- queueing (``queueing``): the scheduling queue, a record per pending pod, and which watch
  events bring a pod back, with a hint and its reason;
- PreEnqueue and PreFilter (``pre_filter``): ``scheduling.attempt.prepare`` says whether the
  pod waits (its claims not there yet, binding conditions pending), or what must happen
  first (a shared device repaired, a stale special claim deleted, failed binding conditions
  undone), or that it is ready for Filter; the same preparation ``simulate`` answers from;
- Filter (``filter``): the pure cycle (``scheduling.cycle``) off the event loop;
- then ``scheduling.decision`` says what the pod gets, for the scheduler and for ``simulate``:
  Reserve (``reserve``) and the binding cycle (``binder``: PreBind, Bind, Unreserve), or
  PostFilter (``post_filter``): the pod's stranded claim, its victims' claims, preemption
  (``preemptor``; with ``rank-first``, before reserving a worse alternative), or
  unschedulable;
- beside the attempts: the double-allocation repair (``repair``).

The ledger and the claims' statuses are the whole state: after a restart or a change of
leader, claims allocated and reserved for an unbound pod simply continue (every pending pod is
queued when this replica starts leading). Writes are fenced by the Lease (``runtime.leader``).
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import structlog

from operators.allocator import AllocatedState, Features
from operators.allocator.allocator import Allocator
from operators.allocator.features import V1_37
from operators.api.core import Pod
from operators.api.groups import PodGroup
from operators.api.keys import ObjectKey
from operators.api.resource import ResourceClaim
from operators.controllers.scheduler import metrics, planning, queueing
from operators.controllers.scheduler.binder import Binder
from operators.controllers.scheduler.budget import AttemptBudget, TimedAllocator
from operators.controllers.scheduler.cache import SchedulerCache
from operators.controllers.scheduler.groups import GroupScheduler
from operators.controllers.scheduler.preemptor import Preemptor
from operators.controllers.scheduler.queueing import (
    INITIAL_BACKOFF,
    PodRecord,
    PodState,
    SchedulingQueue,
)
from operators.controllers.scheduler.repair import Repair
from operators.controllers.scheduler.settings import SchedulerSettings
from operators.kube.api import ConflictError, NotFoundError
from operators.observability import fields
from operators.runtime.actions import Patch, ReplaceStatus, Write
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
from operators.scheduling.extended import final_name
from operators.scheduling.node_allocatable import NodeAllocatableInput
from operators.scheduling.nodes import pod_requests

log = structlog.get_logger(__name__)

COMPONENT = "scheduler"


def _namespace(key: ObjectKey) -> str:
    return key.namespace


class Scheduler(Controller[SchedulerSettings]):
    """One scheduler replica."""

    component = COMPONENT
    metrics_registry = metrics.REGISTRY

    def __init__(self, settings: SchedulerSettings, **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        self.features = Features.of(settings.gates(), settings.version())
        #: KEP-5004: container requests of extended resources that DeviceClasses back.
        self.extended_enabled = settings.gate("DRAExtendedResource")
        #: KEP-5517 (1.37's shape): devices that take the node's cpu, memory, ... count there.
        self.node_allocatable = self.features.kubernetes >= V1_37 and settings.gate(
            "DRANodeAllocatableResources"
        )
        # The selectors mean what the cluster's release makes of them (the local control
        # plane's, for now).
        self.cache = SchedulerCache(
            settings.scheduler_name,
            self.features,
            kubernetes=str(self.features.kubernetes),
            node_allocatable=self.node_allocatable,
        )
        self.indices = self.cache.indices
        # kube-scheduler watches DeviceTaintRules only with DRADeviceTaintRules on: off, there
        # are none (the API server may not even serve them).
        self.taint_rules = settings.gate("DRADeviceTaintRules")
        #: kube-scheduler's filter timeout, as DRASchedulerFilterTimeout has it (off: none).
        self.filter_timeout = (
            settings.filter_timeout if settings.gate("DRASchedulerFilterTimeout") else 0.0
        )
        #: The budget of the attempt whose cycle runs (one at a time), None between cycles.
        self.running_budget: AttemptBudget | None = None
        #: Every task this replica starts while it leads (binding cycles, the requeue flush).
        self.tasks = TaskOwner("scheduler")
        # One lane per namespace: every tenant's pods get their turn (see ``AttemptBudget``).
        self.queue = SchedulingQueue(
            self.schedule,
            clock=self.clock,
            tasks=self.tasks,
            lane_of=_namespace,
            leading=lambda: self.active,
        )
        #: 1.37's pod groups (GenericWorkload), and their shared claims
        #: (DRAWorkloadResourceClaims): on a 1.36 cluster a pod naming a group is told why not.
        self.groups_enabled = self.features.kubernetes >= V1_37 and settings.gate("GenericWorkload")
        self.group_claims = self.groups_enabled and settings.gate("DRAWorkloadResourceClaims")
        self.binder = Binder(self)
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
            preemption=self.settings.preemption_alternatives if self.settings.preemption else None,
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
            binding_timeout=self.settings.binding_timeout,
            extended_classes=(
                self.cache.extended_resource_classes() if self.extended_enabled else None
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
            await self._delete_special_claim(pod, prepared.claim)
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
            preemption.with_nominated(self.cache.usage.usage, nominations),
            state,
            releases=self.cache.allocated.releases,
            moves=self.queue.moves,
            left_alone=tuple(promised),
        )

    async def filter(
        self, attempt: Attempt, *, every_fit: bool = False
    ) -> tuple[CycleResult, NodeFit | None] | None:
        """Filter: every node filtered, the pod's claims allocated on each, the fits scored,
        off the event loop (watches, lease renewals and other pods' binds go on meanwhile).
        None: the attempt gave way to other tenants (its turn comes again after theirs; what
        it evaluated stays cached). ``every_fit``: every node that fits, not only the best
        (a pod group's search tries others)."""
        key = attempt.key
        record = self.queue.record(key)
        budget = self.running_budget = self.budget(key, record)
        allocator = (
            self.allocator(attempt.state, self.out_of_time, timed=True)
            if attempt.allocating
            else None
        )
        nominated = self.queue.nominated_node(attempt.pod)
        started, evaluations = time.perf_counter(), self.cache.selectors.evaluations
        # The cycle gets snapshots (usage copied, the allocator's state frozen); one cycle at
        # a time, so the view and selector caches it fills are its own.
        try:
            result = await asyncio.to_thread(
                run_cycle,
                attempt.pod,
                attempt.claims,
                attempt.nodes,
                attempt.usage,
                allocator,
                policy=self.settings.score_policy,
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
                    NodeAllocatableInput(self.cache.all_slices(), self.group_claims)
                    if self.node_allocatable
                    else None
                ),
            )
        finally:
            self.running_budget = None
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

    def out_of_time(self) -> bool:
        """The running attempt's budget, not the one an allocator was made for: a node known
        unsatisfiable from an earlier attempt is explained lazily, by that attempt's search,
        during the attempt that reports it (a spent budget there would leave the node
        unexplained for no reason)."""
        budget = self.running_budget
        return budget is not None and budget.spent()

    def budget(self, key: ObjectKey, record: PodRecord) -> AttemptBudget:
        """The attempt's time: the filter timeout over all its turns, and its turn while
        other tenants wait."""
        return AttemptBudget(
            self.clock,
            spent_before=record.spent or 0.0,
            filter_timeout=self.filter_timeout,
            tenant_slice=self.settings.tenant_slice,
            others_waiting=lambda: self.queue.others_waiting(key),
        )

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
            self.settings.allocation_policy,
            lambda: str(uuid.uuid4()),
            out_of_time,
            kind=TimedAllocator if timed else Allocator,
            allocated=state,
        )

    def reserve(self, attempt: Attempt, fit: NodeFit) -> None:
        """Reserve, when a node fits: the attempt's devices are taken for every later cycle
        (the in-flight ledger), its node usage assumed, and the binding cycle starts."""
        self.binder.start(*self.assume(attempt, fit))

    def assume(
        self, attempt: Attempt, fit: NodeFit
    ) -> tuple[Pod, list[planning.Reservation], str, Patch | None]:
        """Reserve's bookkeeping: the attempt's claims as they will be written, in the ledger,
        and its node usage assumed; returns what the binding cycle needs (``unassume`` undoes
        it, for a pod group that is not placed after all)."""
        pod, key = attempt.pod, attempt.key
        self.queue.set_state(key, PodState.QUEUED)
        self.preemptor.nominations.pop(key, None)  # its devices are in the ledger from here on
        claims, results, created = list(attempt.claims), fit.results, None
        node_claim = fit.extended
        if node_claim is None and attempt.extended is not None:
            # The special claim of an earlier attempt, reused: its mappings on this node.
            node = next(n for n in attempt.nodes if n.metadata.name == fit.node)
            node_claim = attempt.extended.for_node(node)
        if fit.extended is not None:
            generate = fit.extended.claim.metadata.generate_name or ""
            created = fit.extended.named(final_name(generate, random.randrange))
            in_memory = fit.extended.claim.key
            results = {(created.key if k == in_memory else k): r for k, r in results.items()}
            claims = [*claims, created]
        plan = planning.reservations(
            pod,
            claims,
            results,
            self.clock.now(),
            creating=created.key if created else None,
            group=attempt.ready.group,
            shared=attempt.ready.shared,
        )
        for reservation in plan:
            self.cache.ledger.reserve(planning.claim_key(reservation.target), reservation.target)
        # As upstream's assume: the claims' node resources count for the pod from here on.
        self.cache.usage.assume(key, (fit.node, pod_requests(pod, fit.node_allocatable)))
        status = None
        special = created or (attempt.extended.existing if attempt.extended else None)
        if node_claim is not None and special is not None:
            status = planning.extended_status(pod, node_claim.status_patch(special))
        if fit.node_allocatable:
            status = planning.node_allocatable_status(pod, fit.node_allocatable, status)
        return pod, plan, fit.node, status

    def unassume(self, pod: Pod, plan: Sequence[planning.Reservation]) -> None:
        """``assume`` undone: nothing of it was written."""
        for reservation in reversed(plan):
            self.cache.ledger.discard_unwritten(planning.claim_key(reservation.target))
        self.cache.usage.assume(planning.pod_key(pod), None)

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
            self.attempt_ended(key, "unschedulable")
            raise Requeue(self.settings.unschedulable_retry, "waiting for preemption victims")
        self.attempt_ended(key, "unschedulable")
        message = unschedulable_message(len(attempt.nodes), result)
        if isinstance(decision, Deallocate):
            await self._deallocate_stranded(pod, decision.claim)
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

    async def _delete_special_claim(self, pod: Pod, claim: ResourceClaim) -> None:
        """A special claim of an earlier attempt that cannot be used as it is (not allocated
        for the pod): deleted before the attempt (``attempt.DropStaleClaim`` says why not at
        PostFilter, as upstream); its event brings the pod back."""
        try:
            await self.binder.delete_special_claim(claim)
        except (ConflictError, NotFoundError):
            return
        log.info(
            "deleted a stale claim for extended resources",
            **{fields.POD: pod.key, fields.CLAIM: claim.key},
        )

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

    async def _deallocate_stranded(self, pod: Pod, claim: ResourceClaim) -> None:
        """A claim whose allocation no node can use, held by nobody else, is deallocated so the
        pod can be placed again (upstream's PostFilter). Its event brings the pod back."""
        try:
            await self.write_claim(planning.deallocation(claim))
        except (ConflictError, NotFoundError):
            return  # changed meanwhile: its event brings the pod back
        self.queue.unsatisfiable.clear()
        log.info(
            "deallocated a claim no node can use (PostFilter)",
            **{fields.POD: pod.key, fields.CLAIM: claim.key},
        )

    # --- metrics -------------------------------------------------------------------------------

    def attempt_ended(self, key: ObjectKey, result: str) -> None:
        """kube-scheduler's attempt metrics: ``result`` is scheduled, unschedulable or error;
        the duration runs from the attempt's start to its result (the bind, for scheduled),
        and for a scheduled pod, from its first attempt (the SLI)."""
        profile = self.settings.scheduler_name
        metrics.SCHEDULE_ATTEMPTS.labels(result, profile).inc()
        record = self.queue.records.get(key)
        if record is None:
            return
        now = time.perf_counter()
        if record.attempt_started is not None:
            metrics.ATTEMPT_DURATION.labels(result, profile).observe(now - record.attempt_started)
        if result == "scheduled":
            attempts = max(record.attempts, 1)
            metrics.POD_ATTEMPTS.observe(attempts)
            if record.first_attempt is not None:
                metrics.SCHEDULING_SLI.labels(str(attempts)).observe(now - record.first_attempt)

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
            self,
            taint_rules=self.taint_rules,
            pod_groups=self.groups_enabled,
        )

    def victim_gone(self, uid: str) -> ObjectKey | None:
        return self.preemptor.victim_gone(uid)

    def pod_left(self, key: ObjectKey) -> None:
        self.preemptor.drop_nomination(key)

    def repair(self, claim: ObjectKey) -> None:
        self.repairs.add(claim)

    def group_changed(self, group: ObjectKey) -> None:
        self.groups.changed(group)

    async def permit(self, group: ObjectKey, min_count: int) -> bool:
        return await self.groups.permit(group, min_count)

    def permit_timeout_message(self) -> str:
        return self.groups.timeout_message()
