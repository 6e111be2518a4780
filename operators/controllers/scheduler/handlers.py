"""The scheduler: kopf handlers feed the cache and the queue; one scheduling cycle at a time.

A cycle (``schedule``) reads the cache, runs the pure cycle (``scheduling.cycle``), records
the chosen allocations in the in-flight ledger (Reserve: every later cycle sees them taken),
and hands the writes to a binding task (``binder``) that runs beside the next cycles. The
ledger and the claims' statuses are the whole state: after a restart or a change of leader,
claims allocated and reserved for an unbound pod simply continue (every pending pod is queued
when this replica starts leading). Writes are fenced by the Lease (``runtime.leader``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog

from operators.allocator import AllocatedState, Features, OutOfTimeError
from operators.allocator.allocator import Allocator
from operators.allocator.outcome import Outcome
from operators.api.core import Node, Pod
from operators.api.keys import ObjectKey
from operators.api.names import TERMINAL_PHASES
from operators.api.resource import ResourceClaim
from operators.api.timestamps import age
from operators.controllers.reservations.planning import PodInfo, pods_to_look_up
from operators.controllers.scheduler import metrics, planning
from operators.controllers.scheduler.binder import Binder
from operators.controllers.scheduler.cache import (
    ModelCache,
    SchedulerCache,
    node_may_make_room,
    worth_an_attempt,
)
from operators.controllers.scheduler.settings import SchedulerSettings
from operators.kube.api import ConflictError, NotFoundError
from operators.observability import fields
from operators.runtime.actions import PostEvent
from operators.runtime.controller import Controller
from operators.runtime.errors import Requeue, TemporaryError
from operators.runtime.informer import EventFeed, Feeds
from operators.runtime.queue import WorkQueue
from operators.scheduling import preemption
from operators.scheduling.binding import Binding, allocated_node, binding_verdict
from operators.scheduling.cycle import (
    ClaimsNotReady,
    CycleResult,
    KnownOutcome,
    prefer_nominated,
    resolve_claims,
    run_cycle,
    unschedulable_message,
)
from operators.scheduling.nodes import NodeUsage, pod_requests
from operators.scheduling.preemption import Nomination, PodPriority, RunningPod

log = structlog.get_logger(__name__)

COMPONENT = "scheduler"
REQUEUE_COALESCE = 0.2  # seconds
INITIAL_BACKOFF = 1.0  # seconds: kube-scheduler's podInitialBackoffSeconds
MAX_UNSATISFIABLE_SPECS = 1000
# (old body or None, new body): whether a change of a listed kind may make room.
RoomCheck = Callable[[Mapping[str, Any] | None, Mapping[str, Any]], bool]


@dataclasses.dataclass
class PodStates:
    """What the scheduler remembers per pending pod between cycles (its scheduling queue)."""

    unschedulable: set[ObjectKey] = dataclasses.field(default_factory=set)
    waiting: set[ObjectKey] = dataclasses.field(default_factory=set)  # on binding conditions
    bound: set[ObjectKey] = dataclasses.field(default_factory=set)  # not yet seen bound
    last_message: dict[ObjectKey, str] = dataclasses.field(default_factory=dict)
    # Node of a failed binding attempt (KEP-5007): the retry prefers it. Kept here as well as
    # in pod.status.nominatedNodeName, because the retry runs before the cache shows it.
    nominated: dict[ObjectKey, str] = dataclasses.field(default_factory=dict)
    # claim specs -> nodes where they did not fit since the last time anything was freed
    unsatisfiable: dict[str, dict[str, KnownOutcome]] = dataclasses.field(default_factory=dict)
    # Allocation time a pod has used in attempts that yielded to other tenants.
    spent: dict[ObjectKey, float] = dataclasses.field(default_factory=dict)
    # Scheduling attempts so far, and when the last one began (scheduler_pod_scheduling_*).
    attempts: dict[ObjectKey, int] = dataclasses.field(default_factory=dict)
    attempt_started: dict[ObjectKey, float] = dataclasses.field(default_factory=dict)

    def forget(self, key: ObjectKey) -> None:
        self.spent.pop(key, None)
        self.attempts.pop(key, None)
        self.attempt_started.pop(key, None)
        self.unschedulable.discard(key)
        self.waiting.discard(key)
        self.last_message.pop(key, None)
        self.nominated.pop(key, None)


def _namespace(key: ObjectKey) -> str:
    return key.namespace


class Scheduler(Controller[SchedulerSettings]):
    """One scheduler replica."""

    component = COMPONENT
    metrics_registry = metrics.REGISTRY

    def __init__(self, settings: SchedulerSettings, **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        self.features = Features.from_gates(settings.gates())
        self.cache = SchedulerCache(settings.scheduler_name, self.features)
        self.indices = self.cache.indices
        # kube-scheduler watches DeviceTaintRules only with DRADeviceTaintRules on: off, there
        # are none (the API server may not even serve them).
        self.taint_rules = settings.gate("DRADeviceTaintRules")
        #: kube-scheduler's filter timeout, as DRASchedulerFilterTimeout has it (off: none).
        self.filter_timeout = (
            settings.filter_timeout if settings.gate("DRASchedulerFilterTimeout") else 0.0
        )
        # One lane per namespace: every tenant's pods get their turn (see ``_budget``).
        self.queue: WorkQueue[ObjectKey] = WorkQueue(
            self.schedule, name="scheduler", workers=1, clock=self.clock, lane_of=_namespace
        )
        self.repairs: WorkQueue[ObjectKey] = WorkQueue(
            self.repair, name="scheduler-repairs", workers=1, clock=self.clock
        )
        self.binder = Binder(self)
        self.pods = PodStates()
        # Preemption: what each preemptor was promised on its nominated node, and whose
        # victim each evicted pod is (its disappearance brings the preemptor back at once).
        self.nominations: dict[ObjectKey, Nomination] = {}
        self.victims: dict[str, ObjectKey] = {}
        self.feeds = Feeds(self._feeds_by_kind())
        self._flush: asyncio.Task[None] | None = None
        self.moves = 0  # calls of requeue_unschedulable: a cycle that saw one came in flight
        metrics.PENDING_PODS.samples = self.pending_pods

    # --- the scheduling cycle ----------------------------------------------------------------

    async def schedule(self, key: ObjectKey) -> None:
        if not self.active or key in self.binder or key in self.pods.bound:
            return
        pod = self.cache.pending(key)
        if (
            pod is None
            or pod.spec.node_name
            or pod.spec.scheduling_gates
            or pod.metadata.is_deleting
        ):
            self.pods.forget(key)
            return
        resolved = resolve_claims(pod, self.cache.claims_of(pod))
        if isinstance(resolved, ClaimsNotReady):
            # PreEnqueue: claim events bring the pod back; nothing to write yet.
            log.debug("pod waits for its claims", pod=str(key), reason=resolved.reason)
            return
        claims = resolved
        shared = [
            c for c in claims if c.is_allocated and self.cache.conflicts(planning.claim_key(c))
        ]
        if shared:
            # A device of its claim is in another claim's allocation too (two schedulers, a
            # resumed old leader): the repair decides who gives it back. Binding first would
            # leave two bound pods on one device, which nothing can repair.
            for claim in shared:
                self.repairs.add(planning.claim_key(claim))
            raise Requeue(1.0, f"resourceclaim {shared[0].key} shares a device with another claim")
        if await self._binding_conditions(pod, claims):
            return

        started = time.perf_counter()
        if key not in self.pods.spent:  # not the continuation of an attempt that yielded
            self.pods.attempts[key] = self.pods.attempts.get(key, 0) + 1
            self.pods.attempt_started[key] = started
        nodes = self.cache.all_nodes()
        priority = preemption.priority_of(pod, self.cache.classes_by_name())
        # Devices nominated for preemptors of higher or equal priority are not ours to take.
        protected = preemption.protected(self.nominations, key, priority.value)
        promised = [self.nominations[k] for k in protected]
        state = self.cache.allocated.state().plus(n.holding for n in promised) if promised else None
        usage = preemption.with_nominated(self.cache.usage.usage, promised)
        budget = _Budget(self, key)
        allocator = (
            self.cache.allocator(
                self.settings.allocation_policy,
                lambda: str(uuid.uuid4()),
                budget.spent,
                kind=TimedAllocator,
                allocated=state,
            )
            if any(not c.is_allocated for c in claims)
            else None
        )
        specs = (
            "|".join(
                json.dumps(c.spec.dump(), sort_keys=True) for c in claims if not c.is_allocated
            )
            + "|nominated:"
            + ",".join(map(str, protected))
        )
        if len(self.pods.unsatisfiable) > MAX_UNSATISFIABLE_SPECS:
            self.pods.unsatisfiable.clear()
        nominated = self.pods.nominated.get(key) or pod.status.nominated_node_name
        releases, moves = self.cache.allocated.releases, self.moves
        # Off the event loop: watches, lease renewals and other pods' binds go on meanwhile.
        # The cycle gets snapshots (usage copied, the allocator's state frozen); one cycle at
        # a time, so the view and selector caches it fills are its own.
        result = await asyncio.to_thread(
            run_cycle,
            pod,
            claims,
            nodes,
            usage,
            allocator,
            policy=self.settings.score_policy,
            known_unsatisfiable=self.pods.unsatisfiable.setdefault(specs, {}),
            best_only=True,
            nominated=nominated,
            node_order=self.cache.order,
        )
        if isinstance(allocator, TimedAllocator):
            metrics.ALLOCATOR_DURATION.observe(allocator.seconds)
        fit = prefer_nominated(result, nominated)
        if fit is None and result.timed_out and budget.yielded:
            # It gave way to other tenants: its turn comes again after theirs, and what it
            # evaluated stays cached.
            self.pods.spent[key] = budget.total()
            self.queue.yield_turn(key)
            return
        self.pods.spent.pop(key, None)
        context = _Context(pod, priority, claims, nodes, usage, state, releases, moves)
        if fit is None:
            await self._unschedulable(context, result)
            return
        if (
            self.settings.preemption
            and preemption.wanted(fit.score.rank, self.settings.preemption_alternatives)
            and not self._freed_since(context)
            and await self._preempt(context, better_than=fit.score.rank) is not None
        ):
            # rank-first: victims make room for a better alternative than the one that fits.
            self.attempt_ended(key, "unschedulable")
            raise Requeue(self.settings.unschedulable_retry, "waiting for preemption victims")
        self.pods.unschedulable.discard(key)
        self.nominations.pop(key, None)  # its devices are in the ledger from here on
        # Reserve: devices of this attempt are taken for every later cycle.
        plan = planning.reservations(pod, claims, fit.results, self.clock.now())
        for reservation in plan:
            self.cache.ledger.reserve(planning.claim_key(reservation.target), reservation.target)
        self.cache.usage.assume(key, (fit.node, pod_requests(pod)))
        self.binder.start(pod, plan, fit.node)

    async def _binding_conditions(self, pod: Pod, claims: list[ResourceClaim]) -> bool:
        """Claims allocated and reserved for this pod wait for their binding conditions
        (KEP-5007): True while they do (nothing else to do this cycle)."""
        key = planning.pod_key(pod)
        uid = pod.metadata.uid or ""
        for claim in claims:
            if not (claim.is_allocated and claim.is_reserved_for(uid)):
                continue
            allocation = claim.status.allocation
            verdict = binding_verdict(
                claim,
                age(allocation.allocation_timestamp if allocation else None, self.clock.now()),
                self.settings.binding_timeout,
            )
            if verdict.state in (Binding.FAILED, Binding.TIMED_OUT):
                self.pods.waiting.discard(key)
                metrics.WAITING_BINDING_CONDITIONS.set(len(self.pods.waiting))
                await self._binding_failed(pod, claims, verdict.message, allocated_node(claim))
                raise Requeue(1.0, verdict.message)
            if verdict.state is Binding.PENDING:
                self.pods.waiting.add(key)
                metrics.WAITING_BINDING_CONDITIONS.set(len(self.pods.waiting))
                if verdict.remaining is not None:
                    self.queue.add_after(key, verdict.remaining + 0.5)
                return True
        self.pods.waiting.discard(key)
        metrics.WAITING_BINDING_CONDITIONS.set(len(self.pods.waiting))
        return False

    async def _binding_failed(
        self, pod: Pod, claims: list[ResourceClaim], message: str, node: str | None
    ) -> None:
        """Deallocate (one write per claim) and nominate the node of the attempt: in the
        composable flow the device is there now."""
        log.warning("binding conditions failed; deallocating", pod=pod.key, reason=message)
        await self.post(
            PostEvent(
                obj=pod.dump(),
                type=planning.WARNING,
                reason="BindingConditionsFailed",
                message=message,
            )
        )
        key = planning.pod_key(pod)
        self.pods.unsatisfiable.clear()  # the failed allocation's devices are free again
        if node:
            self.pods.nominated[key] = node
        for claim in claims:
            action = planning.binding_failed(claim, pod.metadata.uid or "")
            if action is None:
                continue
            claim_key = planning.claim_key(claim)
            self.cache.ledger.remove(claim_key)
            written = await self.apply(action)
            assert written is not None
            # The retry follows at once: until the cache shows this write, the ledger does,
            # so the retry neither sees the failed allocation again nor counts its devices.
            self.cache.written(ResourceClaim.load(written))
        if node:
            try:
                await self.apply(planning.nominate(pod, node))
            except NotFoundError:
                return

    async def _unschedulable(self, context: _Context, result: CycleResult) -> None:
        pod, claims = context.pod, context.claims
        key = planning.pod_key(pod)
        self.attempt_ended(key, "unschedulable")
        message = unschedulable_message(len(context.nodes), result)
        # PostFilter, in this order: the pod's own stranded claim; the claims of its victims,
        # once they are gone; and only when neither can help, preemption.
        recovered = await self._post_filter(pod, claims, result)
        if not recovered and await self._release_victims(pod):
            recovered = True
            message += " preemption: the claims of preempted pods are being released."
        # A claim gave up devices since the cycle's snapshot (a victim's claim released by the
        # reservation cleanup): nobody is evicted for room that may be there already; the pod
        # comes back after the initial backoff, as upstream's queue treats an event that came
        # in flight, and a new cycle sees the devices.
        freed = self._freed_since(context)
        preempting = (
            not recovered
            and self.settings.preemption
            and result.pod_error is None
            and not result.timed_out
        )
        if preempting and freed:
            message += " preemption: not attempted, devices were freed meanwhile."
        elif preempting:
            outcome = await self._preempt(context)
            assert outcome is not None  # without ``better_than`` there is always an answer
            message += f" preemption: {outcome}"
        self.pods.unschedulable.add(key)
        shown = pod.condition("PodScheduled")
        said = shown is not None and shown.status == "False" and shown.message == message
        if said:  # by this replica before a restart, or by the previous leader
            self.pods.last_message[key] = message
        if self.pods.last_message.get(key) != message:
            self.pods.last_message[key] = message
            log.info("pod unschedulable", **{fields.POD: str(key), fields.REASON: message})
            try:
                await self.apply(planning.unschedulable(pod, message, self.clock.now()))
            except NotFoundError:
                return
            await self.post(planning.failed_scheduling(pod, message))
        if result.timed_out:
            raise TemporaryError(f"pod {key}: {message}")  # retried with backoff
        if freed:
            raise Requeue(INITIAL_BACKOFF, "devices were freed during the attempt")
        if self.moves != context.moves:
            # Something that may make room changed while the cycle ran; the requeue it caused
            # may have come before the pod was unschedulable, so it would wait the full retry.
            raise Requeue(INITIAL_BACKOFF, "the cluster changed during the attempt")
        raise Requeue(self.settings.unschedulable_retry, "unschedulable")

    def _freed_since(self, context: _Context) -> bool:
        return self.cache.allocated.releases != context.releases

    async def _post_filter(
        self, pod: Pod, claims: list[ResourceClaim], result: CycleResult
    ) -> bool:
        """A claim whose allocation no node can use, held by nobody else, is deallocated so the
        pod can be placed again (upstream's PostFilter). Its event brings the pod back."""
        stranded = planning.stranded_claim(pod, claims, result.unavailable)
        if stranded is None or planning.claim_key(stranded) in self.cache.ledger:
            return False
        try:
            written = await self.apply(planning.deallocation(stranded))
        except (ConflictError, NotFoundError):
            return True  # changed meanwhile: its event brings the pod back
        assert written is not None
        self.cache.written(ResourceClaim.load(written))
        self.pods.unsatisfiable.clear()
        log.info(
            "deallocated a claim no node can use (PostFilter)",
            **{fields.POD: pod.key, fields.CLAIM: stranded.key},
        )
        return True

    # --- preemption ----------------------------------------------------------------------------

    async def _preempt(self, context: _Context, better_than: int | None = None) -> str | None:
        """Find victims for the pod and evict them; the explanation for the pod's message, or
        None when no preemption happened and the pod has a fit to bind (rank-first)."""
        metrics.PREEMPTION_ATTEMPTS.inc()
        pod, priority = context.pod, context.priority
        key = planning.pod_key(pod)
        nominated = self.pods.nominated.get(key) or pod.status.nominated_node_name
        lower = self._lower_priority_pods(priority.value)
        reason = preemption.eligibility(
            priority,
            nominated,
            lower.get(nominated, ()) if nominated else (),
            evicting=key in self.victims.values(),
        )
        if reason == preemption.TERMINATING and nominated and key not in self.nominations:
            await self._renominate(context, nominated, lower.get(nominated, ()))
        if reason is not None:
            return reason if better_than is None else None
        allocator = self.cache.allocator(
            self.settings.allocation_policy,
            lambda: str(uuid.uuid4()),
            self._deadline(),
            allocated=context.state,
        )
        try:
            result = await asyncio.to_thread(
                preemption.preempt,
                pod,
                priority,
                context.claims,
                context.nodes,
                context.usage,
                lower,
                allocator if any(not c.is_allocated for c in context.claims) else None,
                self._budgets(),
                self.clock.now(),
                features=self.features,
                alternatives=self.settings.preemption_alternatives,
                better_than=better_than,
            )
        except OutOfTimeError as e:
            return f"{e.message} while looking for victims"
        candidate = result.candidate
        if candidate is None:
            if better_than is None and nominated:
                await self._clear_nomination(pod)
            return result.message(len(context.nodes)) if better_than is None else None
        await self._evict(pod, priority, candidate)
        return result.message(len(context.nodes))

    def _lower_priority_pods(self, priority: int) -> dict[str, list[RunningPod]]:
        """Pods bound to each node with a priority below ``priority``, with their claims."""
        classes = self.cache.classes_by_name()
        out: dict[str, list[RunningPod]] = {}
        for node in self.cache.nodes_with_pods():
            for pod in self.cache.running_on(node):
                value = preemption.priority_of(pod, classes).value
                if value < priority:
                    running = RunningPod(pod, value, self.cache.held_by(pod))
                    out.setdefault(node, []).append(running)
        return out

    def _budgets(self) -> list[preemption.Budget]:
        return [preemption.Budget.of(b) for b in self.cache.all_of(self.cache.budgets, "pdbs")]

    def _deadline(self) -> Callable[[], bool] | None:
        """The victims' search gets the filter timeout of its own (none without
        DRASchedulerFilterTimeout)."""
        limit = self.filter_timeout
        if not limit:
            return None
        started = self.clock.monotonic()
        return lambda: self.clock.monotonic() - started >= limit

    async def _evict(
        self, pod: Pod, priority: PodPriority, candidate: preemption.Candidate
    ) -> None:
        """The writes, in order, each safe to repeat: nominate the preemptor, then per victim
        the DisruptionTarget condition and the deletion with its grace period; lower-priority
        pods nominated to the node lose their nomination."""
        key = planning.pod_key(pod)
        node = candidate.node
        self.nominations[key] = Nomination.of(pod, priority.value, candidate, self.features)
        self.pods.nominated[key] = node
        description = candidate.describe()
        log.info("preempting", **{fields.POD: str(key), fields.NODE: node}, victims=description)
        try:
            await self.apply(planning.nominate(pod, node))
        except NotFoundError:
            self.nominations.pop(key, None)
            return
        metrics.PREEMPTION_VICTIMS.observe(len(candidate.victims))
        now = self.clock.now()
        for victim in candidate.victims:
            self.victims[victim.uid] = key
            if victim.pod.metadata.is_deleting:
                continue  # its graceful deletion runs already
            try:
                await self.apply(
                    planning.disruption_target(victim.pod, self.settings.scheduler_name, now)
                )
                await self.apply(planning.eviction(victim.pod))
            except (NotFoundError, ConflictError):
                # Gone, or replaced by another pod of that name: not ours to delete, nor to
                # wait for.
                self.victims.pop(victim.uid, None)
                continue
            await self.post(planning.preempted_event(victim.pod, pod, node))
        await self._clear_lower_nominations(node, priority.value, key)
        await self.post(planning.preempting_event(pod, description))

    async def _renominate(
        self, context: _Context, node: str, on_node: Sequence[RunningPod]
    ) -> None:
        """After a restart: the devices a nominated preemptor waits for, from its victims
        still terminating, are protected again."""
        terminating = [p for p in on_node if p.pod.metadata.is_deleting]
        chosen = [n for n in context.nodes if n.metadata.name == node]
        if not terminating or not chosen:
            return
        allocator = self.cache.allocator(
            self.settings.allocation_policy,
            lambda: str(uuid.uuid4()),
            self._deadline(),
            allocated=context.state,
        )
        try:
            result = await asyncio.to_thread(
                preemption.preempt,
                context.pod,
                context.priority,
                context.claims,
                chosen,
                context.usage,
                {node: terminating},
                allocator if any(not c.is_allocated for c in context.claims) else None,
                (),
                self.clock.now(),
                features=self.features,
            )
        except OutOfTimeError:
            return
        if result.candidate is not None:
            key = planning.pod_key(context.pod)
            self.nominations[key] = Nomination.of(
                context.pod, context.priority.value, result.candidate, self.features
            )
            for victim in result.candidate.victims:
                self.victims[victim.uid] = key

    async def _clear_nomination(self, pod: Pod) -> None:
        """Preemption no longer helps: the nomination goes (upstream), unless it is the node of
        a failed binding attempt (KEP-5007), which is not preemption's to take back."""
        key = planning.pod_key(pod)
        if key in self.pods.nominated and key not in self.nominations:
            return
        self._drop_nomination(key)
        try:
            await self.apply(planning.nominate(pod, None))
        except NotFoundError:
            return

    def _drop_nomination(self, key: ObjectKey) -> None:
        self.pods.nominated.pop(key, None)
        if self.nominations.pop(key, None) is not None:
            self.requeue_unschedulable()  # what it was promised is anybody's again

    async def _clear_lower_nominations(
        self, node: str, priority: int, preemptor: ObjectKey
    ) -> None:
        """Pods of lower priority nominated to the node may no longer fit there (upstream)."""
        classes = self.cache.classes_by_name()
        for key in self.cache.pending_keys():
            if key == preemptor:
                continue
            other = self.cache.pending(key)
            if other is None:
                continue
            if (self.pods.nominated.get(key) or other.status.nominated_node_name) != node:
                continue
            if preemption.priority_of(other, classes).value >= priority:
                continue
            self.pods.nominated.pop(key, None)
            self.nominations.pop(key, None)
            try:
                await self.apply(planning.nominate(other, None))
            except NotFoundError:
                continue
            self.queue.add(key)

    async def _release_victims(self, pod: Pod) -> bool:
        """Claims on the pod's nominated node whose consumers are all gone (its victims,
        deleted or finished) are deallocated now, by the reservation cleanup's rules, rather
        than at the cleanup's next pass. True when something is being released, by this
        write or a concurrent one (then no new victims are sought)."""
        key = planning.pod_key(pod)
        node = self.pods.nominated.get(key) or pod.status.nominated_node_name
        if not node:
            return False
        released = False
        for claim_key in self.cache.allocated_keys():
            claim = self.cache.claim(claim_key)
            if (
                claim is None
                or claim_key in self.cache.ledger
                or not claim.status.reserved_for
                or allocated_node(claim) != node
            ):
                continue
            pods = await self._consumers(claim)
            if pods is None:
                continue
            action = planning.victim_claim_release(claim, pods)
            if action is None:
                continue
            # Being released (by this write, or by the reservation cleanup's if it came first):
            # its devices are about to be free, so evicting more pods would be one too many.
            released = True
            try:
                written = await self.apply(action)
            except (ConflictError, NotFoundError):
                continue  # changed meanwhile: its event brings the pod back
            assert written is not None
            self.cache.written(ResourceClaim.load(written))
            self.pods.unsatisfiable.clear()
            log.info(
                "released the claim of a preemption victim",
                **{fields.POD: str(key), fields.CLAIM: claim.key, fields.NODE: node},
            )
        return released

    async def _consumers(self, claim: ResourceClaim) -> dict[str, PodInfo | None] | None:
        """The pods the claim's release depends on, or None while one of its consumers is
        cached as running (no reads then). Pods missing from the cache are read: one created a
        moment ago may hold the claim already (as the reservation cleanup checks)."""
        namespace = claim.metadata.namespace or ""
        for ref in claim.status.reserved_for:
            body = self.indices.one("pod_info", ObjectKey(namespace, ref.name or ""))
            info = None if body is None else PodInfo.from_body(body)
            if info is not None and info.uid == ref.uid and info.phase not in TERMINAL_PHASES:
                return None
        found: dict[str, PodInfo | None] = {}
        for name in sorted(pods_to_look_up(claim)):
            body = self.indices.one("pod_info", ObjectKey(namespace, name))
            if body is None:
                body = await self._read_or_none("Pod", ObjectKey(namespace, name))
            found[name] = None if body is None else PodInfo.from_body(body)
        return found

    def attempt_ended(self, key: ObjectKey, result: str) -> None:
        """kube-scheduler's attempt metrics: ``result`` is scheduled, unschedulable or error;
        the duration runs from the attempt's start to its result (the bind, for scheduled)."""
        profile = self.settings.scheduler_name
        metrics.SCHEDULE_ATTEMPTS.labels(result, profile).inc()
        started = self.pods.attempt_started.get(key)
        if started is not None:
            duration = time.perf_counter() - started
            metrics.ATTEMPT_DURATION.labels(result, profile).observe(duration)
        if result == "scheduled":
            metrics.POD_ATTEMPTS.observe(self.pods.attempts.pop(key, 1))
            self.pods.attempt_started.pop(key, None)

    def pending_pods(self) -> list[tuple[tuple[str, ...], float]]:
        """scheduler_pending_pods by queue, at scrape time: waiting for a worker (active),
        for a retry (backoff), for a change (unschedulable), for their gates (gated)."""
        ready, delayed = self.queue.waiting()
        return [
            (("active",), ready),
            (("backoff",), delayed),
            (("unschedulable",), len(self.pods.unschedulable)),
            (("gated",), self.cache.gated()),
        ]

    def requeue_unschedulable(self) -> None:
        """Something that may make room changed: try the unschedulable pods again soon.

        Coalesced: a burst of changes (a node's heartbeat, a rollout of slices) moves the
        unschedulable pods back once, not once per event.
        """
        # Freed devices, counters or capacity may fit claims that did not fit before.
        self.pods.unsatisfiable.clear()
        self.moves += 1
        if self._flush is None or self._flush.done():
            self._flush = asyncio.get_running_loop().create_task(self._requeue_later())

    async def _requeue_later(self) -> None:
        await asyncio.sleep(REQUEUE_COALESCE)
        for key in list(self.pods.unschedulable):
            self.queue.add(key)

    # --- repair ------------------------------------------------------------------------------

    async def repair(self, key: ObjectKey) -> None:
        """A device is in two allocations (two schedulers, a resumed old leader): deallocate
        the claim whose pods are not bound, from fresh reads, and say so on the claim."""
        for device in self.cache.conflicts(key):
            holders = []
            for holder in sorted(self.cache.allocated.users(device)):
                if holder in self.cache.ledger:
                    raise Requeue(1.0, f"claim {holder} is being written")
                body = await self._read_or_none("ResourceClaim", holder)
                if body is not None:
                    claim = ResourceClaim.load(body)
                    if device in claim.allocated_device_ids():
                        holders.append(claim)
            if len(holders) < 2:
                continue
            bound = {
                uid: await self._holds(claim, uid)
                for claim in holders
                for uid in claim.reserved_for_uids()
            }
            victim = planning.double_allocation_victim(holders, bound)
            others = [c.key for c in holders if victim is None or c.key != victim.key]
            metrics.DOUBLE_ALLOCATIONS.labels(repaired=str(victim is not None).lower()).inc()
            if victim is None:
                log.error(
                    "device allocated to several claims whose pods are all bound; "
                    "not touching them",
                    **{fields.DEVICE: str(device)},
                    claims=others,
                )
                continue
            written = await self.apply(planning.deallocation(victim))
            assert written is not None
            self.cache.written(ResourceClaim.load(written))
            log.warning(
                "deallocated a claim that shared a device with another",
                **{fields.CLAIM: victim.key, fields.DEVICE: str(device)},
                others=others,
            )
            await self.post(planning.double_allocation_event(victim, str(device), others))

    async def _holds(self, claim: ResourceClaim, uid: str) -> bool:
        """Whether the consumer ``uid`` of ``claim`` is a pod bound to a node and running."""
        namespace = claim.metadata.namespace or ""
        for ref in claim.status.reserved_for:
            if ref.uid != uid or ref.resource != "pods" or ref.api_group:
                continue
            body = await self._read_or_none("Pod", ObjectKey(namespace, ref.name or ""))
            if body is None:
                return False
            pod = Pod.load(body)
            return (
                pod.metadata.uid == uid
                and bool(pod.spec.node_name)
                and pod.status.phase not in TERMINAL_PHASES
            )
        return True  # not a pod: in use, as far as we can tell

    async def _read_or_none(self, kind: str, key: ObjectKey) -> dict[str, Any] | None:
        try:
            return await self.api.get(kind, key.name, key.namespace)
        except NotFoundError:
            return None

    # --- leadership ----------------------------------------------------------------------------

    async def prepare(self) -> None:
        # Every kind is listed before any cycle can run, then kept current by informers (whose
        # re-list on an expired watch reports deletions: no periodic resync is needed).
        await self.feeds.start(self.api)

    async def activate(self) -> None:
        self.queue.start()
        self.repairs.start()
        # Every pending pod, including those whose claims an earlier leader allocated and
        # reserved for them but did not bind (stranded or waiting on binding conditions).
        for key in self.cache.pending_keys():
            self.queue.add(key)
        for key in list(self.indices.keys("allocated_claims")):
            if self.cache.conflicts(key):
                self.repairs.add(key)

    async def deactivate(self) -> None:
        self.nominations.clear()
        self.victims.clear()
        await self.queue.stop()
        await self.repairs.stop()
        await self.binder.cancel_all()
        self.cache.forget_in_flight()
        self.pods.unsatisfiable.clear()
        self.pods.bound.clear()

    async def release(self) -> None:
        await self.feeds.stop()

    # --- watch events ------------------------------------------------------------------------

    def on_pod(self, kw: Mapping[str, Any]) -> None:
        """A pod watch event (from the informer): into the cache; what it may unblock, queued."""
        body = kw["body"]
        key = ObjectKey.of(body)
        before = self.cache.indices.one("pending", key)
        if not self.cache.pods.apply(kw["type"], body):
            return
        if self.cache.is_pending(body) and kw["type"] != "DELETED":
            if worth_an_attempt(before, body):
                self.queue.add(key)
            return
        self.pods.bound.discard(key)
        if kw["type"] == "DELETED" or body.get("status", {}).get("phase") in TERMINAL_PHASES:
            self.pods.forget(key)
            self._drop_nomination(key)
            preemptor = self.victims.pop((body.get("metadata") or {}).get("uid") or "", None)
            if preemptor is not None:
                self.queue.add(preemptor)  # its victim is gone: release the claims now
            if body.get("spec", {}).get("nodeName"):
                self.requeue_unschedulable()  # room on a node

    def on_claim(self, kw: Mapping[str, Any]) -> None:
        """A claim watch event (from the informer): into the cache; its pods, queued."""
        body = kw["body"]
        key = ObjectKey.of(body)
        was_allocated = self.cache.was_allocated(key)
        if not self.cache.observe_claim(kw["type"], body):
            return
        for pod in self.cache.pods_naming(key):
            self.queue.add(pod)
        for ref in (body.get("status") or {}).get("reservedFor") or []:
            if ref.get("resource") == "pods":
                self.queue.add(ObjectKey(key.namespace, ref.get("name") or ""))
        allocated = bool((body.get("status") or {}).get("allocation"))
        if was_allocated and (kw["type"] == "DELETED" or not allocated):
            self.requeue_unschedulable()  # its devices are free again
        if allocated and kw["type"] != "DELETED" and self.cache.conflicts(key):
            self.repairs.add(key)

    def _feeds_by_kind(self) -> dict[str, EventFeed]:
        """Pods and claims to their handlers above; the kinds that change rarely into their
        stores, where nodes, slices, classes and taint rules may make room for the
        unschedulable pods. kube-scheduler watches DeviceTaintRules only with
        DRADeviceTaintRules on: off, there are none (the API server may not even serve them)."""
        cache = self.cache

        def listed(
            index: str, models: ModelCache[Any], room: bool, matters: RoomCheck | None = None
        ) -> EventFeed:
            store = cache.listed[index]

            def feed(kw: Mapping[str, Any]) -> None:
                body = kw["body"]
                old = None
                if matters is not None and kw["type"] != "DELETED":
                    old = store.indices[index].last(ObjectKey.of(body).name)
                if store.apply(kw["type"], body):
                    models.changed()
                    if room and (matters is None or matters(old, body)):
                        self.requeue_unschedulable()

            return feed

        feeds = {
            "Pod": self.on_pod,
            "ResourceClaim": self.on_claim,
            "Node": listed("nodes", cache.nodes, True, node_may_make_room),
            "ResourceSlice": listed("slices", cache.slices, True),
            "DeviceClass": listed("classes", cache.classes, True),
            "PriorityClass": listed("priority_classes", cache.priority_classes, False),
            "PodDisruptionBudget": listed("pdbs", cache.budgets, False),
        }
        if self.taint_rules:
            feeds["DeviceTaintRule"] = listed("taint_rules", cache.taint_rules, True)
        return feeds


@dataclasses.dataclass(frozen=True)
class _Context:
    """What one cycle saw, for its PostFilter: the pod, its priority and claims, the nodes,
    their usage and the allocated state (with the nominations it had to leave alone)."""

    pod: Pod
    priority: PodPriority
    claims: list[ResourceClaim]
    nodes: list[Node]
    usage: dict[str, NodeUsage]
    state: AllocatedState | None
    releases: int  # the allocation tracker's count when the cycle took its snapshot
    moves: int  # the scheduler's count of room-making changes then


class TimedAllocator(Allocator):
    """The allocator, summing the time its calls take (the pure one reads no clock)."""

    seconds = 0.0

    def allocate(self, node: Node, claims: Sequence[ResourceClaim]) -> Outcome:
        started = time.perf_counter()
        try:
            return super().allocate(node, claims)
        finally:
            self.seconds += time.perf_counter() - started


class _Budget:
    """The time one allocation attempt may take; asked by the allocator from the cycle's
    thread.

    Two limits: the pod's whole allocation time (``--filter-timeout``, summed over attempts),
    and its slice (``--tenant-slice``) once pods of other namespaces are waiting.
    """

    def __init__(self, scheduler: Scheduler, key: ObjectKey) -> None:
        self.scheduler = scheduler
        self.key = key
        self.clock = scheduler.clock
        self.before = scheduler.pods.spent.get(key, 0.0)
        self.started = self.clock.monotonic()
        self.yielded = False

    def total(self) -> float:
        return self.before + self.clock.monotonic() - self.started

    def spent(self) -> bool:
        settings = self.scheduler.settings
        elapsed = self.clock.monotonic() - self.started
        timeout = self.scheduler.filter_timeout
        if timeout and self.before + elapsed >= timeout:
            return True
        if elapsed >= settings.tenant_slice and self.scheduler.queue.others_waiting(self.key):
            self.yielded = True
            return True
        return False
