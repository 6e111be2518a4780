"""The scheduler, in kube-scheduler's extension points; one scheduling cycle at a time.

Where each step lives, in the order a pod meets them:

- queueing (``queueing``): which watch events bring a pod back, with a hint and its reason;
- PreEnqueue (``pre_enqueue``): a pod waits, without a cycle, until its claims exist;
- PreBind, continued (``Binder.binding_conditions``): a pod whose claims are reserved for it
  waits for their binding conditions (KEP-5007);
- PreFilter/Filter (``filter``): the pure cycle (``scheduling.cycle``) off the event loop;
- then ``scheduling.decision`` says what the pod gets, for the scheduler and for ``simulate``:
  Reserve (``reserve``) and the binding cycle (``binder``: PreBind, Bind, Unreserve), or
  PostFilter (``post_filter``): the pod's stranded claim, its victims' claims, preemption
  (``preemptor``), or unschedulable;
- beside the cycles: the double-allocation repair (``repair``).

The ledger and the claims' statuses are the whole state: after a restart or a change of
leader, claims allocated and reserved for an unbound pod simply continue (every pending pod is
queued when this replica starts leading). Writes are fenced by the Lease (``runtime.leader``).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from operators.allocator import AllocatedState, Features
from operators.allocator.allocator import Allocator
from operators.api.core import Pod
from operators.api.keys import ObjectKey
from operators.api.names import TERMINAL_PHASES
from operators.api.resource import ResourceClaim
from operators.controllers.scheduler import metrics, planning, queueing
from operators.controllers.scheduler.binder import Binder
from operators.controllers.scheduler.budget import AttemptBudget, TimedAllocator
from operators.controllers.scheduler.cache import SchedulerCache
from operators.controllers.scheduler.preemptor import Attempt, Preemptor
from operators.controllers.scheduler.queueing import INITIAL_BACKOFF, Hint, PendingPods
from operators.controllers.scheduler.repair import Repair
from operators.controllers.scheduler.settings import SchedulerSettings
from operators.kube.api import ConflictError, NotFoundError
from operators.observability import fields
from operators.runtime.actions import ReplaceStatus, Write
from operators.runtime.controller import Controller
from operators.runtime.errors import Requeue, TemporaryError
from operators.runtime.informer import EventFeed, Feeds
from operators.runtime.queue import WorkQueue
from operators.runtime.tasks import TaskOwner
from operators.scheduling import preemption
from operators.scheduling.cycle import (
    ClaimsNotReady,
    CycleResult,
    NodeFit,
    prefer_nominated,
    resolve_claims,
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
from operators.scheduling.extended import (
    ExtendedResources,
    extended_resources,
    final_name,
    makes_claim,
)
from operators.scheduling.nodes import pod_requests

log = structlog.get_logger(__name__)

COMPONENT = "scheduler"
REQUEUE_COALESCE = 0.2  # seconds
MAX_UNSATISFIABLE_SPECS = 1000


def _namespace(key: ObjectKey) -> str:
    return key.namespace


class Scheduler(Controller[SchedulerSettings]):
    """One scheduler replica."""

    component = COMPONENT
    metrics_registry = metrics.REGISTRY

    def __init__(self, settings: SchedulerSettings, **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        self.features = Features.from_gates(settings.gates())
        #: KEP-5004: container requests of extended resources that DeviceClasses back.
        self.extended_enabled = settings.gate("DRAExtendedResource")
        self.cache = SchedulerCache(settings.scheduler_name, self.features)
        self.indices = self.cache.indices
        # kube-scheduler watches DeviceTaintRules only with DRADeviceTaintRules on: off, there
        # are none (the API server may not even serve them).
        self.taint_rules = settings.gate("DRADeviceTaintRules")
        #: kube-scheduler's filter timeout, as DRASchedulerFilterTimeout has it (off: none).
        self.filter_timeout = (
            settings.filter_timeout if settings.gate("DRASchedulerFilterTimeout") else 0.0
        )
        # One lane per namespace: every tenant's pods get their turn (see ``AttemptBudget``).
        self.queue: WorkQueue[ObjectKey] = WorkQueue(
            self.schedule, name="scheduler", workers=1, clock=self.clock, lane_of=_namespace
        )
        #: Every task this replica starts while it leads (binding cycles, the requeue flush).
        self.tasks = TaskOwner("scheduler")
        self.pending = PendingPods()
        self.binder = Binder(self)
        self.preemptor = Preemptor(self)
        self.repairs = Repair(self)
        self.feeds = Feeds(self.events_to_register())
        self._flush: asyncio.Task[None] | None = None
        self.moves = 0  # calls of make_room: a cycle that saw one came in flight
        metrics.PENDING_PODS.samples = self.pending_pods

    # --- the scheduling cycle ----------------------------------------------------------------

    async def schedule(self, key: ObjectKey) -> None:
        """One cycle for one pod: PreEnqueue, Filter, then what ``decide`` says."""
        ready = self.pre_enqueue(key)
        if ready is None:
            return
        pod, claims = ready
        extended = self.extended_of(pod)
        if extended is not None and extended.existing is not None:
            if not extended.reusable:
                await self._delete_special_claim(pod, extended.existing)
                raise Requeue(INITIAL_BACKOFF, "a stale claim for extended resources was deleted")
            claims = [*claims, extended.existing]
        if await self.binder.binding_conditions(pod, claims):
            return
        filtered = await self.filter(pod, claims, extended)
        if filtered is None:
            return  # it gave way to other tenants
        attempt, result, fit = filtered
        # The reads the decision needs come first: the claims of victims that are gone.
        victims = await self.preemptor.victim_claims(pod) if fit is None else []
        decision = decide(
            pod,
            claims,
            result,
            fit,
            preemption=self.settings.preemption_alternatives if self.settings.preemption else None,
            freed=self._freed_since(attempt),
            in_flight={c.key for c in claims if planning.claim_key(c) in self.cache.ledger},
            victim_claims=[claim for claim, _ in victims],
        )
        if isinstance(decision, Reserve):
            self.reserve(attempt, decision.fit)
        elif isinstance(decision, Preempt) and decision.fallback is not None:
            # rank-first: victims make room for a better alternative than the one that fits.
            if await self.preemptor.preempt(attempt, better_than=decision.better_than) is None:
                self.reserve(attempt, decision.fallback)
                return
            self.attempt_ended(key, "unschedulable")
            raise Requeue(self.settings.unschedulable_retry, "waiting for preemption victims")
        else:
            await self.post_filter(attempt, result, decision, victims)

    def pre_enqueue(self, key: ObjectKey) -> tuple[Pod, list[ResourceClaim]] | None:
        """PreEnqueue, first in every cycle: the pod and its claims, or None while it waits
        (bound, gated, deleting, or its claims not there yet: their events bring it back)."""
        if not self.active or key in self.binder or key in self.pending.bound_unseen:
            return None
        pod = self.cache.pending(key)
        if (
            pod is None
            or pod.spec.node_name
            or pod.spec.scheduling_gates
            or pod.metadata.is_deleting
        ):
            self.pending.forget(key)
            return None
        resolved = resolve_claims(pod, self.cache.claims_of(pod))
        if isinstance(resolved, ClaimsNotReady):
            log.debug("pod waits for its claims", pod=str(key), reason=resolved.reason)
            return None
        shared = [
            c for c in resolved if c.is_allocated and self.cache.conflicts(planning.claim_key(c))
        ]
        if shared:
            # A device of its claim is in another claim's allocation too (two schedulers, a
            # resumed old leader): the repair decides who gives it back. Binding first would
            # leave two bound pods on one device, which nothing can repair.
            for claim in shared:
                self.repairs.add(planning.claim_key(claim))
            raise Requeue(1.0, f"resourceclaim {shared[0].key} shares a device with another claim")
        return pod, resolved

    def extended_of(self, pod: Pod) -> ExtendedResources | None:
        """PreFilter, for extended resources backed by DRA (KEP-5004): what the pod asks of
        them, and its special claim from an earlier attempt. None: the gate is off, or the
        pod asks for none that a DeviceClass backs."""
        if not self.extended_enabled:
            return None
        mapping = self.cache.extended_resource_classes()
        requests = pod_requests(pod)
        if not any(name in mapping for name in requests):
            return None
        return extended_resources(pod, mapping, requests, self.cache.extended_claim(pod))

    async def filter(
        self, pod: Pod, claims: list[ResourceClaim], extended: ExtendedResources | None = None
    ) -> tuple[Attempt, CycleResult, NodeFit | None] | None:
        """PreFilter and Filter, after PreEnqueue: every node filtered, the pod's claims
        allocated on each, the fits scored, off the event loop. None: the attempt gave way to
        other tenants (its turn comes again after theirs; what it evaluated stays cached)."""
        key = planning.pod_key(pod)
        started = time.perf_counter()
        if key not in self.pending.spent:  # not the continuation of an attempt that yielded
            self.pending.attempts[key] = self.pending.attempts.get(key, 0) + 1
            self.pending.attempt_started[key] = started
        nodes = self.cache.all_nodes()
        priority = preemption.priority_of(pod, self.cache.classes_by_name())
        # Devices nominated for preemptors of higher or equal priority are not ours to take.
        promised = self.preemptor.promised(key, priority.value)
        nominations = list(promised.values())
        state = (
            self.cache.allocated.state().plus(n.holding for n in nominations) if promised else None
        )
        usage = preemption.with_nominated(self.cache.usage.usage, nominations)
        budget = AttemptBudget(
            self.clock,
            spent_before=self.pending.spent.get(key, 0.0),
            filter_timeout=self.filter_timeout,
            tenant_slice=self.settings.tenant_slice,
            others_waiting=lambda: self.queue.others_waiting(key),
        )
        allocating = makes_claim(extended) or any(not c.is_allocated for c in claims)
        allocator = self.allocator(state, budget.spent, timed=True) if allocating else None
        specs = (
            "|".join(
                json.dumps(c.spec.dump(), sort_keys=True) for c in claims if not c.is_allocated
            )
            + "|nominated:"
            + ",".join(map(str, promised))
        )
        if len(self.pending.unsatisfiable) > MAX_UNSATISFIABLE_SPECS:
            self.pending.unsatisfiable.clear()
        nominated = self.pending.nominated_node(pod)
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
            known_unsatisfiable=self.pending.unsatisfiable.setdefault(specs, {}),
            best_only=True,
            nominated=nominated,
            node_order=self.cache.order,
            extended=extended,
        )
        if isinstance(allocator, TimedAllocator):
            metrics.ALLOCATOR_DURATION.observe(allocator.seconds)
        fit = prefer_nominated(result, nominated)
        if fit is None and result.timed_out and budget.yielded:
            self.pending.spent[key] = budget.total()
            self.queue.yield_turn(key)
            return None
        self.pending.spent.pop(key, None)
        attempt = Attempt(pod, priority, claims, nodes, usage, state, releases, moves, extended)
        return attempt, result, fit

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
        pod, key = attempt.pod, attempt.key
        self.pending.unschedulable.discard(key)
        self.preemptor.nominations.pop(key, None)  # its devices are in the ledger from here on
        claims, results, created = attempt.claims, fit.results, None
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
            pod, claims, results, self.clock.now(), creating=created.key if created else None
        )
        for reservation in plan:
            self.cache.ledger.reserve(planning.claim_key(reservation.target), reservation.target)
        self.cache.usage.assume(key, (fit.node, pod_requests(pod)))
        status = None
        special = created or (attempt.extended.existing if attempt.extended else None)
        if node_claim is not None and special is not None:
            status = planning.extended_status(pod, node_claim.status_patch(special))
        self.binder.start(pod, plan, fit.node, status)

    async def post_filter(
        self,
        attempt: Attempt,
        result: CycleResult,
        decision: Decision,
        victims: list[tuple[ResourceClaim, ReplaceStatus]],
    ) -> None:
        """PostFilter, when no node fits: the decision's step (the pod's stranded claim, its
        victims' claims, or preemption), then PodScheduled=False with the reason, once."""
        pod, key = attempt.pod, attempt.key
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
        self.pending.unschedulable.add(key)
        shown = pod.condition("PodScheduled")
        if shown is not None and shown.status == "False" and shown.message == message:
            self.pending.last_message[key] = message  # said before a restart, or by a leader
        if self.pending.last_message.get(key) != message:
            self.pending.last_message[key] = message
            log.info("pod unschedulable", **{fields.POD: str(key), fields.REASON: message})
            try:
                await self.apply(planning.unschedulable(pod, message, self.clock.now()))
            except NotFoundError:
                return
            await self.post(planning.failed_scheduling(pod, message))
        if result.timed_out:
            raise TemporaryError(f"pod {key}: {message}")  # retried with backoff
        if self._freed_since(attempt):
            # A claim gave up devices since the cycle's snapshot: the pod comes back after the
            # initial backoff, as upstream's queue treats an event that came in flight.
            raise Requeue(INITIAL_BACKOFF, "devices were freed during the attempt")
        if self.moves != attempt.moves:
            # Something that may make room changed while the cycle ran; the requeue it caused
            # may have come before the pod was unschedulable, so it would wait the full retry.
            raise Requeue(INITIAL_BACKOFF, "the cluster changed during the attempt")
        raise Requeue(self.settings.unschedulable_retry, "unschedulable")

    async def _delete_special_claim(self, pod: Pod, claim: ResourceClaim) -> None:
        """A special claim of an earlier attempt that cannot be used as it is (not allocated
        for the pod): deleted, as upstream's PostFilter does; its event brings the pod back."""
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
        self.pending.unsatisfiable.clear()
        log.info(
            "deallocated a claim no node can use (PostFilter)",
            **{fields.POD: pod.key, fields.CLAIM: claim.key},
        )

    # --- metrics -------------------------------------------------------------------------------

    def attempt_ended(self, key: ObjectKey, result: str) -> None:
        """kube-scheduler's attempt metrics: ``result`` is scheduled, unschedulable or error;
        the duration runs from the attempt's start to its result (the bind, for scheduled)."""
        profile = self.settings.scheduler_name
        metrics.SCHEDULE_ATTEMPTS.labels(result, profile).inc()
        started = self.pending.attempt_started.get(key)
        if started is not None:
            duration = time.perf_counter() - started
            metrics.ATTEMPT_DURATION.labels(result, profile).observe(duration)
        if result == "scheduled":
            metrics.POD_ATTEMPTS.observe(self.pending.attempts.pop(key, 1))
            self.pending.attempt_started.pop(key, None)

    def pending_pods(self) -> list[tuple[tuple[str, ...], float]]:
        """scheduler_pending_pods by queue, at scrape time: waiting for a worker (active),
        for a retry (backoff), for a change (unschedulable), for their gates (gated)."""
        ready, delayed = self.queue.waiting()
        return [
            (("active",), ready),
            (("backoff",), delayed),
            (("unschedulable",), len(self.pending.unschedulable)),
            (("gated",), self.cache.gated()),
        ]

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
        self.pending.unsatisfiable.clear()
        self.pending.bound_unseen.clear()

    async def release(self) -> None:
        await self.feeds.stop()

    # --- queueing: watch events ------------------------------------------------------------------

    def events_to_register(self) -> dict[str, EventFeed]:
        """Every watched kind to its feed (kube-scheduler's EventsToRegister): pods and claims
        to the handlers below, the rest into their stores with a queueing hint each."""
        feeds = queueing.listed_feeds(self.cache, self._room_hint, taint_rules=self.taint_rules)
        return {"Pod": self.on_pod, "ResourceClaim": self.on_claim, **feeds}

    def on_pod(self, kw: Mapping[str, Any]) -> None:
        """A pod watch event (from the informer): into the cache; what it may unblock, queued."""
        body = kw["body"]
        key = ObjectKey.of(body)
        event = queueing.event_name("Pod", kw["type"])
        before = self.cache.indices.one("pending", key)
        if not self.cache.pods.apply(kw["type"], body):
            return
        if self.cache.is_pending(body) and kw["type"] != "DELETED":
            hint = queueing.record(event, queueing.pending_pod_update(before, body), pod=str(key))
            if hint.queue:
                self.queue.add(key)
            return
        self.pending.bound_unseen.discard(key)
        if kw["type"] == "DELETED" or body.get("status", {}).get("phase") in TERMINAL_PHASES:
            self.pending.forget(key)
            self.preemptor.drop_nomination(key)
            preemptor = self.preemptor.victim_gone((body.get("metadata") or {}).get("uid") or "")
            if preemptor is not None:
                # Its victim is gone: release the claims now.
                queueing.record(event, Hint(True, f"a victim of {preemptor} is gone"))
                self.queue.add(preemptor)
            node = body.get("spec", {}).get("nodeName")
            if node:
                self.make_room(event, f"pod {key} left node {node}")

    def on_claim(self, kw: Mapping[str, Any]) -> None:
        """A claim watch event (from the informer): into the cache; its pods, queued."""
        body = kw["body"]
        key = ObjectKey.of(body)
        event = queueing.event_name("ResourceClaim", kw["type"])
        was_allocated = self.cache.was_allocated(key)
        if not self.cache.observe_claim(kw["type"], body):
            return
        pods = self.cache.pods_naming(key)
        pods.extend(
            ObjectKey(key.namespace, ref.get("name") or "")
            for ref in (body.get("status") or {}).get("reservedFor") or []
            if ref.get("resource") == "pods"
        )
        for pod in pods:
            self.queue.add(pod)
        allocated = bool((body.get("status") or {}).get("allocation"))
        if was_allocated and (kw["type"] == "DELETED" or not allocated):
            self.make_room(event, f"claim {key} freed its devices")
        elif pods:
            queueing.record(event, Hint(True, f"claim {key} changed: the pods it names"))
        else:
            queueing.record(event, Hint(False, f"claim {key} freed nothing and names no pod"))
        if allocated and kw["type"] != "DELETED" and self.cache.conflicts(key):
            self.repairs.add(key)

    def _room_hint(self, event: str, hint: Hint) -> None:
        if hint.queue:
            self.make_room(event, hint.reason)
        else:
            queueing.record(event, hint)

    def make_room(self, event: str, reason: str) -> None:
        """Something that may make room changed (``reason``): try the unschedulable pods again
        soon. Coalesced: a burst of changes (a node's heartbeat, a rollout of slices) moves
        the unschedulable pods back once, not once per event."""
        queueing.record(event, Hint(True, reason))
        # Freed devices, counters or capacity may fit claims that did not fit before.
        self.pending.unsatisfiable.clear()
        self.moves += 1
        if self.active and (self._flush is None or self._flush.done()):
            self._flush = self.tasks.spawn(self._requeue_later(), name="requeue-unschedulable")

    async def _requeue_later(self) -> None:
        await asyncio.sleep(REQUEUE_COALESCE)
        for key in list(self.pending.unschedulable):
            self.queue.add(key)
