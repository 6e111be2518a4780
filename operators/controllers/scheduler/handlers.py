"""The scheduler's kopf side: caches (kopf indices), the queue, the cycle, the binding tasks.

One scheduling cycle runs at a time (a single-worker queue), so the device ledger needs no
lock: a cycle reads the caches plus the in-flight ledger, chooses a node, records the chosen
allocations in the ledger (Reserve) and hands the writes to a binding task, which runs
concurrently with the next cycles (PreBind: finalizer, then allocation + reservedFor in one
status write; then binding, unless binding conditions must be met first). Every failure after
Reserve undoes what this attempt wrote. The ledger and the claims' statuses are the whole
state: after a restart, claims allocated and reserved for an unbound pod simply continue.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

import kopf
import structlog

from operators.allocator import Allocator, Features, NodeViewCache
from operators.allocator.selectors import CelSelectorEngine
from operators.allocator.state import AllocatedTracker
from operators.api.core import Node, Pod
from operators.api.resource import (
    DeviceClass,
    DeviceTaintRule,
    ResourceClaim,
    ResourceSlice,
)
from operators.cel import CELEnvironment
from operators.controllers.common.indices import (
    CLAIMS,
    CLASSES,
    SLICES,
    IndexView,
    object_key,
)
from operators.controllers.common.runner import Deps, close_deps, make_deps
from operators.controllers.common.stores import LocalStore, Stores
from operators.controllers.common.workqueue import Requeue, WorkQueue
from operators.controllers.reservations.planning import DELETE_PROTECTION_FINALIZER
from operators.controllers.scheduler.settings import SchedulerSettings
from operators.controllers.scheduler.snapshot import ModelCache
from operators.kube.api import ApiError, ConflictError, NotFoundError
from operators.kube.events import NORMAL, WARNING, EventRecorder
from operators.kube.leader import LeaderElector, elector
from operators.observability import fields, metrics
from operators.scheduling.binding import Binding, allocated_node, binding_verdict
from operators.scheduling.cycle import (
    ClaimsNotReady,
    CycleResult,
    NodeFit,
    prefer_nominated,
    resolve_claims,
    run_cycle,
    unschedulable_message,
)
from operators.scheduling.ledger import InFlightLedger
from operators.scheduling.nodes import UsageTracker, pod_requests

log = structlog.get_logger(__name__)

COMPONENT = "scheduler"
TAINT_RULES = ("resource.k8s.io", "v1beta2", "devicetaintrules")
PodKey = tuple[str, str]
TERMINAL = ("Succeeded", "Failed")
REQUEUE_COALESCE = 0.2  # seconds


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _timestamp(t: datetime.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _age(timestamp: str | None) -> float | None:
    if not timestamp:
        return None
    then = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    return (_now() - then).total_seconds()


class Scheduler:
    """State of one scheduler replica."""

    def __init__(self, settings: SchedulerSettings) -> None:
        self.settings = settings
        self.features = Features.all()
        self.indices = IndexView()
        self.pod_store = LocalStore(
            "Pod",
            {
                "pending": self._pending_index,
                "pods_by_claim": self._pods_by_claim_index,
            },
            on_change=self._pod_placement,
        )
        self.claim_store = LocalStore(
            "ResourceClaim",
            {
                "claims": _claims_index,
                "allocated_claims": _allocated_index,
            },
            on_change=lambda key, _body: self._track(f"{key[0]}/{key[1]}"),
        )
        self.stores = Stores(self.indices, self.pod_store, self.claim_store)
        self.queue: WorkQueue[PodKey] = WorkQueue(self.reconcile, name="scheduler", workers=1)
        self.ledger = InFlightLedger(on_change=self._track)
        self.allocated = AllocatedTracker(self.features)
        self.nodes: ModelCache[Node] = ModelCache(Node)
        self.slices: ModelCache[ResourceSlice] = ModelCache(ResourceSlice)
        self.classes: ModelCache[DeviceClass] = ModelCache(DeviceClass)
        self.taint_rules: ModelCache[DeviceTaintRule] = ModelCache(DeviceTaintRule)
        self.claims: ModelCache[ResourceClaim] = ModelCache(ResourceClaim)
        self.views = NodeViewCache()
        self.selectors = CelSelectorEngine(CELEnvironment())
        self.binding: dict[PodKey, asyncio.Task[None]] = {}
        self.usage = UsageTracker()
        self.unschedulable: set[PodKey] = set()
        self.bound: set[PodKey] = set()  # bound, but the cache has not shown it yet
        self.waiting: set[PodKey] = set()
        self.last_message: dict[PodKey, str] = {}
        # Node of a failed binding attempt (KEP-5007): the retry prefers it. Kept here as well
        # as in pod.status.nominatedNodeName, because the retry runs before the cache shows it.
        self.nominated: dict[PodKey, str] = {}
        self._deps: Deps | None = None
        self._events: EventRecorder | None = None
        self._flush: asyncio.Task[None] | None = None
        # claim specs -> nodes where they did not fit since the last time anything was freed
        self.unsatisfiable: dict[str, set[str]] = {}
        self.elector: LeaderElector | None = None
        self.active = False

    @property
    def deps(self) -> Deps:
        assert self._deps is not None, "the scheduler has not started"
        return self._deps

    @property
    def events(self) -> EventRecorder:
        assert self._events is not None, "the scheduler has not started"
        return self._events

    # --- snapshot ------------------------------------------------------------------------

    def _all(self, cache: ModelCache[Any], index: str) -> list[Any]:
        return cache.all(
            (k, b) for k in self.indices.keys(index) if (b := self.indices.one(index, k))
        )

    def _claims_of(self, pod: Pod) -> dict[str, ResourceClaim]:
        """The claims a pod names (directly or through its status), with in-flight versions."""
        namespace = pod.metadata.namespace or ""
        names = {c.resource_claim_name for c in pod.spec.resource_claims}
        names.update(s.resource_claim_name for s in pod.status.resource_claim_statuses)
        found: dict[str, ResourceClaim] = {}
        for name in names:
            if not name:
                continue
            in_flight = self.ledger.get(f"{namespace}/{name}")
            body = self.indices.one("claims", (namespace, name))
            if in_flight is not None:
                found[name] = in_flight
            elif body is not None:
                found[name] = self.claims.parse((namespace, name), body)
        return found

    def _pending_index(self, body: Mapping[str, Any]) -> dict[Any, Any]:
        return {object_key(body): dict(body)} if self.is_pending(body) else {}

    def _pods_by_claim_index(self, body: Mapping[str, Any]) -> dict[Any, Any]:
        """Pending pods by the claims they name: a claim event requeues them."""
        if not self.is_pending(body):
            return {}
        namespace, name = object_key(body)
        names = {
            c.get("resourceClaimName") for c in (body.get("spec") or {}).get("resourceClaims") or []
        }
        names.update(
            c.get("resourceClaimName")
            for c in (body.get("status") or {}).get("resourceClaimStatuses") or []
        )
        return {(namespace, c): name for c in names if c}

    def _track(self, claim_key: str) -> None:
        """Hand the allocation tracker what the claim holds now: in flight, else cached."""
        claim = self.ledger.get(claim_key)
        if claim is None:
            namespace, _, name = claim_key.partition("/")
            body = self.claim_store.indices["claims"].last((namespace, name))
            if body and (body.get("status") or {}).get("allocation"):
                claim = self.claims.parse((namespace, name), body)
        self.allocated.track(claim_key, claim)

    def _pod_placement(self, key: PodKey, body: Mapping[str, Any] | None) -> None:
        """Keep node usage current with the pod cache (bound pods count on their node)."""
        if body is None or (body.get("status") or {}).get("phase") in TERMINAL:
            self.usage.forget(key)
            return
        node = (body.get("spec") or {}).get("nodeName")
        self.usage.observe(key, (node, pod_requests(Pod.load(body))) if node else None)

    def _allocator(self) -> Allocator:
        return Allocator(
            self.features,
            self.allocated.state(),
            self._all(self.classes, "classes"),
            self._all(self.slices, "slices"),
            self.selectors,
            share_ids=lambda: str(uuid.uuid4()),
            taint_rules=self._all(self.taint_rules, "taint_rules"),
            policy=self.settings.allocation_policy,
            view_cache=self.views,
        )

    # --- the cycle -----------------------------------------------------------------------

    async def reconcile(self, key: PodKey) -> None:
        metrics.QUEUE_DEPTH.set(len(self.queue))
        if not self.indices.has("nodes"):
            raise Requeue(0.5, "kopf's caches of nodes and slices are not listed yet")
        if not self.active or key in self.binding or key in self.bound:
            return
        body = self.indices.one("pending", key)
        if body is None:
            self._forget(key)
            return
        pod = Pod.load(body)
        if pod.spec.node_name or pod.spec.scheduling_gates or pod.metadata.is_deleting:
            self._forget(key)
            return
        resolved = resolve_claims(pod, self._claims_of(pod))
        if isinstance(resolved, ClaimsNotReady):
            # PreEnqueue: claim events bring the pod back; nothing to write yet.
            log.debug("pod waits for its claims", pod=pod.metadata.key, reason=resolved.reason)
            return
        claims = resolved
        # Binding conditions of claims already allocated and reserved for this pod.
        for claim in claims:
            if not (claim.is_allocated and claim.is_reserved_for(pod.metadata.uid or "")):
                continue
            verdict = binding_verdict(
                claim,
                _age(
                    claim.status.allocation.allocation_timestamp
                    if claim.status.allocation
                    else None
                ),
                self.settings.binding_timeout,
            )
            if verdict.state in (Binding.FAILED, Binding.TIMED_OUT):
                self.waiting.discard(key)
                metrics.WAITING_BINDING_CONDITIONS.set(len(self.waiting))
                await self._binding_failed(pod, claims, verdict.message, allocated_node(claim))
                raise Requeue(1.0, verdict.message)
            if verdict.state is Binding.PENDING:
                self.waiting.add(key)
                metrics.WAITING_BINDING_CONDITIONS.set(len(self.waiting))
                metrics.SCHEDULING_ATTEMPTS.labels(result="waiting").inc()
                if verdict.remaining is not None:
                    self.queue.add_after(key, verdict.remaining + 0.5)
                return
        self.waiting.discard(key)
        metrics.WAITING_BINDING_CONDITIONS.set(len(self.waiting))

        started = time.perf_counter()
        nodes = self._all(self.nodes, "nodes")
        allocator = self._allocator() if any(not c.is_allocated for c in claims) else None
        specs = "|".join(
            json.dumps(c.spec.dump(), sort_keys=True) for c in claims if not c.is_allocated
        )
        if len(self.unsatisfiable) > 1000:
            self.unsatisfiable.clear()
        result = run_cycle(
            pod,
            claims,
            nodes,
            self.usage.usage,
            allocator,
            policy=self.settings.score_policy,
            known_unsatisfiable=self.unsatisfiable.setdefault(specs, set()),
            best_only=True,
            nominated=self.nominated.get(key) or pod.status.nominated_node_name,
        )
        metrics.CYCLE_DURATION.observe(time.perf_counter() - started)
        fit = prefer_nominated(result, self.nominated.get(key) or pod.status.nominated_node_name)
        if fit is None:
            await self._unschedulable(pod, claims, len(nodes), result)
            return
        self.unschedulable.discard(key)
        # Reserve: devices of this attempt are taken for every later cycle.
        reserved = self._reserve(pod, claims, fit)
        self.usage.assume(key, (fit.node, pod_requests(pod)))
        task = asyncio.create_task(self._bind(pod, reserved, fit), name=f"bind-{key[0]}-{key[1]}")
        self.binding[key] = task

    def _reserve(
        self, pod: Pod, claims: list[ResourceClaim], fit: NodeFit
    ) -> list[tuple[ResourceClaim, ResourceClaim, bool]]:
        """(claim as cached, claim as it will be written, newly allocated) for the writes."""
        plan = []
        consumer = {"resource": "pods", "name": pod.metadata.name, "uid": pod.metadata.uid}
        stamp = _timestamp(_now())
        for claim in claims:
            allocation = fit.results.get(claim.key)
            reserved = claim.is_reserved_for(pod.metadata.uid or "")
            if allocation is None and reserved:
                continue
            body = claim.dump()
            status = dict(body.get("status") or {})
            if allocation is not None:
                status["allocation"] = {**allocation.dump(), "allocationTimestamp": stamp}
            if not reserved:
                status["reservedFor"] = [*status.get("reservedFor", []), consumer]
            body["status"] = status
            target = ResourceClaim.load(body)
            self.ledger.reserve(target)
            plan.append((claim, target, allocation is not None))
        return plan

    async def _bind(
        self, pod: Pod, plan: list[tuple[ResourceClaim, ResourceClaim, bool]], fit: NodeFit
    ) -> None:
        key = (pod.metadata.namespace or "", pod.metadata.name or "")
        written: list[tuple[ResourceClaim, bool]] = []
        try:
            needs_conditions = False
            for cached, target, fresh in plan:
                if fresh:
                    self._check_still_free(target)
                written_claim = await self._prebind(cached, target)
                written.append((written_claim, fresh))
                self._written(written_claim)
                needs_conditions |= any(r.binding_conditions for r in target.allocated_results())
            if needs_conditions:
                # Wait (without blocking other pods) until the devices are attached. Claim
                # events that came while this task ran were skipped (the pod was in
                # self.binding): a cycle right after it looks at the conditions as they are.
                metrics.SCHEDULING_ATTEMPTS.labels(result="waiting").inc()
                self.queue.add(key)
                self.queue.add_after(key, self.settings.binding_timeout + 0.5)
                return
            await self.deps.api.post_subresource(
                "Pod",
                pod.metadata.name or "",
                pod.metadata.namespace,
                "binding",
                {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {
                        "name": pod.metadata.name,
                        "namespace": pod.metadata.namespace,
                        "uid": pod.metadata.uid,
                    },
                    "target": {"apiVersion": "v1", "kind": "Node", "name": fit.node},
                },
            )
            self.bound.add(key)
            self.nominated.pop(key, None)
            metrics.SCHEDULING_ATTEMPTS.labels(result="scheduled").inc()
            age = _age(pod.metadata.creation_timestamp)
            if age is not None:
                metrics.SCHEDULING_LATENCY.observe(max(age, 0.0))
            log.info("pod bound", **{fields.POD: pod.metadata.key, fields.NODE: fit.node})
            if self.settings.scheduled_events:
                await self.events.post(
                    pod.dump(),
                    NORMAL,
                    "Scheduled",
                    f"Successfully assigned {pod.metadata.key} to {fit.node}",
                )
        except (ApiError, OSError, ConflictingAllocationError) as e:
            metrics.SCHEDULING_ATTEMPTS.labels(result="error").inc()
            log.warning(
                "binding cycle failed; undoing", pod=pod.metadata.key, node=fit.node, error=str(e)
            )
            self.usage.assume(key, None)
            for cached, _target, _fresh in plan:
                self.ledger.remove(cached.key)
            self.unsatisfiable.clear()  # the attempt's devices are free again
            await self._undo(pod, written)
            self.queue.add_after(key, self.queue.backoff(key))
        finally:
            self.binding.pop(key, None)

    def _written(self, claim: ResourceClaim) -> None:
        """Our status write succeeded: keep ``claim`` in the ledger until the cache shows it.

        The watch event may have beaten the write's response; then no later event would drop
        the entry, so compare with the cache right away.
        """
        self.ledger.written(claim)
        key = (claim.metadata.namespace or "", claim.metadata.name or "")
        body = self.indices.one("claims", key) if self.indices.ready else None
        if body is not None:
            self.ledger.observe(claim.key, self.claims.parse(key, body))

    def _check_still_free(self, target: ResourceClaim) -> None:
        """Re-check against the freshest claim cache right before writing (multi-scheduler).

        Another scheduler may have given a chosen device to another claim since the cycle;
        the allocation tracker, current with every claim event and every in-flight write,
        answers per device, without a pass over claims.
        """
        for result in target.allocated_results():
            if result.admin_access or result.share_id is not None:
                continue
            device = result.device_id
            holders = self.allocated.users(device) - {target.key}
            if holders:
                raise ConflictingAllocationError(
                    f"claim {target.key}: device {result.device_id} was allocated elsewhere "
                    "meanwhile"
                )

    async def _prebind(self, cached: ResourceClaim, target: ResourceClaim) -> ResourceClaim:
        """Finalizer first, then allocation and reservedFor in one status write."""
        api = self.deps.api
        body = cached.dump()
        if DELETE_PROTECTION_FINALIZER not in cached.metadata.finalizers:
            body = await api.patch(
                "ResourceClaim",
                cached.metadata.name or "",
                {
                    "metadata": {
                        "resourceVersion": cached.metadata.resource_version,
                        "finalizers": [*cached.metadata.finalizers, DELETE_PROTECTION_FINALIZER],
                    }
                },
                cached.metadata.namespace,
            )
        body["status"] = target.dump().get("status", {})
        return ResourceClaim.load(await api.replace_status(body))

    async def _undo(self, pod: Pod, written: list[tuple[ResourceClaim, bool]]) -> None:
        """Take back what one attempt wrote: its reservation, and its allocation if it made it."""
        for claim, fresh in written:
            try:
                current = ResourceClaim.load(
                    await self.deps.api.get(
                        "ResourceClaim", claim.metadata.name or "", claim.metadata.namespace
                    )
                )
                body = current.dump()
                status = dict(body.get("status") or {})
                kept = [
                    r for r in status.get("reservedFor", []) if r.get("uid") != pod.metadata.uid
                ]
                if kept:
                    status["reservedFor"] = kept
                else:
                    status.pop("reservedFor", None)
                if fresh and not kept:
                    status.pop("allocation", None)
                    status.pop("devices", None)
                body["status"] = status
                await self.deps.api.replace_status(body)
            except (ApiError, OSError) as e:
                log.warning(
                    "undo failed; the reservation cleanup will finish it",
                    claim=claim.key,
                    error=str(e),
                )

    async def _binding_failed(
        self, pod: Pod, claims: list[ResourceClaim], message: str, node: str | None
    ) -> None:
        """Clear allocation, device statuses and reservation in one write per claim, and
        nominate the node of the attempt (in the composable flow the device is there now)."""
        log.warning("binding conditions failed; deallocating", pod=pod.metadata.key, reason=message)
        await self.events.post(pod.dump(), WARNING, "BindingConditionsFailed", message)
        api = self.deps.api
        key = (pod.metadata.namespace or "", pod.metadata.name or "")
        self.unsatisfiable.clear()  # the failed allocation's devices are free again
        if node:
            self.nominated[key] = node
        for claim in claims:
            if not claim.is_reserved_for(pod.metadata.uid or ""):
                continue
            body = claim.dump()
            status = dict(body.get("status") or {})
            kept = [r for r in status.get("reservedFor", []) if r.get("uid") != pod.metadata.uid]
            if kept:
                status["reservedFor"] = kept
            else:
                status.pop("reservedFor", None)
                status.pop("allocation", None)
                status.pop("devices", None)
            body["status"] = status
            self.ledger.remove(claim.key)
            # The retry follows at once: until the cache shows this write, the ledger does,
            # so the retry neither sees the failed allocation again nor counts its devices.
            self._written(ResourceClaim.load(await api.replace_status(body)))
        if node:
            try:
                await api.patch(
                    "Pod",
                    pod.metadata.name or "",
                    {"status": {"nominatedNodeName": node}},
                    pod.metadata.namespace,
                    subresource="status",
                )
            except NotFoundError:
                return

    async def _unschedulable(
        self, pod: Pod, claims: list[ResourceClaim], total: int, result: CycleResult
    ) -> None:
        key = (pod.metadata.namespace or "", pod.metadata.name or "")
        metrics.SCHEDULING_ATTEMPTS.labels(result="unschedulable").inc()
        # PostFilter: a claim allocated for nobody blocks every node; let the next try place it.
        api = self.deps.api
        for claim in claims:
            if (
                claim.is_allocated
                and not claim.status.reserved_for
                and claim.key not in self.ledger
            ):
                body = claim.dump()
                body["status"] = {
                    k: v
                    for k, v in (body.get("status") or {}).items()
                    if k not in ("allocation", "devices")
                }
                try:
                    await api.replace_status(body)
                    log.info("deallocated unreserved claim (PostFilter)", claim=claim.key)
                except ConflictError:
                    pass
        message = unschedulable_message(total, result)
        self.unschedulable.add(key)
        if self.last_message.get(key) != message:
            self.last_message[key] = message
            log.info("pod unschedulable", **{fields.POD: pod.metadata.key, fields.REASON: message})
            try:
                await api.patch(
                    "Pod",
                    pod.metadata.name or "",
                    {
                        "status": {
                            "conditions": [
                                {
                                    "type": "PodScheduled",
                                    "status": "False",
                                    "reason": "Unschedulable",
                                    "message": message,
                                    "lastTransitionTime": _timestamp(_now()),
                                    "lastProbeTime": None,
                                }
                            ]
                        }
                    },
                    pod.metadata.namespace,
                    patch_type="strategic",
                    subresource="status",
                )
            except NotFoundError:
                return
            await self.events.post(pod.dump(), WARNING, "FailedScheduling", message)
        raise Requeue(self.settings.unschedulable_retry, "unschedulable")

    def _forget(self, key: PodKey) -> None:
        self.unschedulable.discard(key)
        self.waiting.discard(key)
        self.last_message.pop(key, None)
        self.nominated.pop(key, None)

    def requeue_unschedulable(self) -> None:
        """Something that may make room changed: try the unschedulable pods again soon.

        Coalesced: a burst of changes (a node's heartbeat, a rollout of slices) moves the
        unschedulable pods back once, not once per event.
        """
        # Freed devices, counters or capacity may fit claims that did not fit before.
        self.unsatisfiable.clear()
        if self._flush is None or self._flush.done():
            self._flush = asyncio.get_running_loop().create_task(self._requeue_later())

    async def _requeue_later(self) -> None:
        await asyncio.sleep(REQUEUE_COALESCE)
        for key in list(self.unschedulable):
            self.queue.add(key)

    # --- leadership --------------------------------------------------------------------------

    async def _activate(self) -> None:
        self.active = True
        self.queue.start()
        for key in self.indices.keys("pending"):  # stores are filled before activation
            self.queue.add(key)

    async def _deactivate(self) -> None:
        self.active = False
        await self.queue.stop()
        for task in list(self.binding.values()):
            task.cancel()
        self.ledger.clear()  # the allocation tracker falls back to the cached claims
        self.usage.forget_assumed()
        self.unsatisfiable.clear()

    # --- kopf side ---------------------------------------------------------------------------

    def is_pending(self, body: Mapping[str, Any]) -> bool:
        spec = body.get("spec") or {}
        return spec.get("schedulerName") == self.settings.scheduler_name and not spec.get(
            "nodeName"
        )

    def register(self, registry: kopf.OperatorRegistry) -> None:
        """Pods and claims live in local stores (common/stores.py); nodes, slices, classes and
        taint rules, which change rarely, in kopf indices, which gate every handler until
        their initial lists are complete."""
        s = self
        ours = self.settings.scheduler_name

        @kopf.index("nodes", id="nodes", registry=registry)
        async def nodes(**kw: Any) -> dict[Any, Any]:
            return {object_key(kw["body"])[1]: dict(kw["body"])}

        @kopf.index(*SLICES, id="slices", registry=registry)
        async def slices(**kw: Any) -> dict[Any, Any]:
            return {object_key(kw["body"])[1]: dict(kw["body"])}

        @kopf.index(*CLASSES, id="classes", registry=registry)
        async def classes(**kw: Any) -> dict[Any, Any]:
            return {object_key(kw["body"])[1]: dict(kw["body"])}

        @kopf.index(*TAINT_RULES, id="taint_rules", registry=registry)
        async def taint_rules(**kw: Any) -> dict[Any, Any]:
            return {object_key(kw["body"])[1]: dict(kw["body"])}

        # Event handlers are coroutines: kopf runs plain functions in a thread pool, and the
        # queue (asyncio) and the ledger must only be touched from the operator's event loop.
        @kopf.on.event("pods", registry=registry)
        async def pod_changed(**kw: Any) -> None:
            s.indices.attach(kw)
            body = kw["body"]
            if not s.pod_store.apply(kw["type"], body):
                return
            key = object_key(body)
            if s.is_pending(body) and kw["type"] != "DELETED":
                s.queue.add(key)
                return
            s.bound.discard(key)
            if kw["type"] == "DELETED" or body.get("status", {}).get("phase") in TERMINAL:
                s._forget(key)
                if body.get("spec", {}).get("nodeName"):
                    s.requeue_unschedulable()  # room on a node

        @kopf.on.event(*CLAIMS, registry=registry)
        async def claim_changed(**kw: Any) -> None:
            s.indices.attach(kw)
            body = kw["body"]
            namespace, name = object_key(body)
            was_allocated = s.indices.has_key("allocated_claims", (namespace, name))
            if not s.claim_store.apply(kw["type"], body):
                return
            if kw["type"] == "DELETED":
                s.claims.forget((namespace, name))
                cached = None
            else:
                cached = s.claims.parse((namespace, name), body)
            s.ledger.observe(f"{namespace}/{name}", cached)
            for pod_name in s.indices.values("pods_by_claim", (namespace, name)):
                s.queue.add((namespace, pod_name))
            for ref in (body.get("status") or {}).get("reservedFor") or []:
                if ref.get("resource") == "pods":
                    s.queue.add((namespace, ref.get("name")))
            freed = kw["type"] == "DELETED" or not (body.get("status") or {}).get("allocation")
            if was_allocated and freed:
                s.requeue_unschedulable()  # its devices are free again

        def cluster_changed(cache: ModelCache[Any]) -> Any:
            async def handler(**kw: Any) -> None:
                s.indices.attach(kw)
                cache.changed()
                s.requeue_unschedulable()

            return handler

        kopf.on.event("nodes", registry=registry)(cluster_changed(self.nodes))
        kopf.on.event(*SLICES, registry=registry)(cluster_changed(self.slices))
        kopf.on.event(*CLASSES, registry=registry)(cluster_changed(self.classes))
        kopf.on.event(*TAINT_RULES, registry=registry)(cluster_changed(self.taint_rules))

        @kopf.on.startup(registry=registry)
        async def start(**_: Any) -> None:
            s._deps = await make_deps(s.settings, COMPONENT)
            # Pods and claims are listed before any cycle can run (informer-style).
            await s.stores.start(s._deps.api)
            s._events = EventRecorder(s._deps.api, f"{COMPONENT}-{ours}")
            if s.settings.leader_elect:
                s.elector = elector(
                    s._deps.api,
                    name=s.settings.lease_name,
                    namespace=s.settings.lease_namespace,
                    identity=s.settings.identity,
                    lease_duration=s.settings.lease_duration,
                    on_started=s._activate,
                    on_stopped=s._deactivate,
                )
                s.elector.start()
            else:
                await s._activate()

        @kopf.on.cleanup(registry=registry)
        async def stop(**_: Any) -> None:
            # Never raise here: kopf would retry the cleanup a minute later.
            try:
                if s.elector is not None:
                    await s.elector.stop()
                else:
                    await s._deactivate()
            except Exception as e:
                log.error("scheduler stop failed", error=repr(e))
            await s.stores.stop()
            await close_deps(s._deps)

        del nodes, slices, classes, taint_rules, pod_changed, claim_changed, start, stop


def _claims_index(body: Mapping[str, Any]) -> dict[Any, Any]:
    return {object_key(body): dict(body)}


def _allocated_index(body: Mapping[str, Any]) -> dict[Any, Any]:
    return {object_key(body): True} if (body.get("status") or {}).get("allocation") else {}


class ConflictingAllocationError(Exception):
    """Another scheduler allocated a chosen device between our cycle and our write."""
