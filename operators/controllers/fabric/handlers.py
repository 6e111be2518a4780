"""The fabric controller's kopf side: caches, one work queue, the manager, the writes.

Two keys in the queue: ``reconcile`` (the whole fabric: attach, report, hand over, detach) and
``publish`` (the free-device pools). Any claim, fabric node or node-pool event enqueues the
reconcile; manager-side changes are seen by long-polling running operations and by the periodic
tick. Decisions are ``planning.plan``, from one snapshot of the manager per reconcile (never a
newer-than-seen revision followed by an older one), and the writes ``planning`` builds from it;
this module only reads inputs and applies them.

Caches lag behind our own writes: a claim or Node we just wrote is read from the write's
answer until the watch shows a newer version, so a reconcile never repeats a write (or, worse,
detaches a device it just handed over). Before any detach of a device that sits on a node, the
Node is read live: a device listed in its hot-plug annotation belongs to the node's pool.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Hashable, Mapping
from typing import Any

import kopf
import structlog

from operators.api.keys import ObjectKey
from operators.api.resource import ResourceClaim, ResourceSlice
from operators.api.timestamps import epoch
from operators.controllers.fabric import metrics, planning
from operators.controllers.fabric.settings import FabricSettings
from operators.fabric.auth import TokenFile
from operators.fabric.client import HTTPFabricManager
from operators.fabric.manager import FabricManager
from operators.fabric.model import (
    ATTACHED,
    ATTACHING,
    FabricError,
    FabricSnapshot,
    FabricUnavailableError,
)
from operators.kube.api import ConflictError, InvalidError, NotFoundError
from operators.observability import fields
from operators.runtime.actions import PostEvent
from operators.runtime.controller import Controller
from operators.runtime.errors import Requeue, TemporaryError
from operators.runtime.indices import CLAIMS, SLICES
from operators.runtime.queue import WorkQueue
from operators.runtime.stores import LocalStore, Stores
from operators.runtime.tasks import TaskOwner

NORMAL = "Normal"
WARNING = "Warning"

log = structlog.get_logger(__name__)

COMPONENT = "fabric"
RECONCILE = "reconcile"
PUBLISH = "publish"
LONG_POLL = 30.0


class _AfterWrite:
    """The object our last write returned, used instead of a cache entry that still shows the
    version the write replaced."""

    def __init__(self) -> None:
        self._written: dict[Hashable, tuple[str | None, dict[str, Any]]] = {}

    def wrote(self, key: Hashable, previous: str | None, body: dict[str, Any]) -> None:
        self._written[key] = (previous, body)

    def view(self, key: Hashable, cached: dict[str, Any]) -> dict[str, Any]:
        entry = self._written.get(key)
        if entry is None:
            return cached
        if (cached.get("metadata") or {}).get("resourceVersion") == entry[0]:
            return entry[1]
        del self._written[key]
        return cached


def _fabric_claim(config: planning.FabricConfig, body: Mapping[str, Any]) -> dict[Any, Any]:
    """Claims whose allocation holds a device of our fabric pools."""
    results = ((body.get("status") or {}).get("allocation") or {}).get("devices") or {}
    for r in results.get("results") or []:
        if r.get("driver") == config.driver and str(r.get("pool", "")).startswith(
            planning.POOL_PREFIX
        ):
            return {ObjectKey.of(body): dict(body)}
    return {}


def settings_config(settings: FabricSettings) -> planning.FabricConfig:
    return planning.FabricConfig(
        driver=settings.driver_name,
        domain=settings.condition_domain,
        after_attach=settings.after_attach,
        binding_timeout=settings.binding_timeout,
        handover_timeout=settings.handover_timeout,
        handover_grace=settings.handover_grace,
        node_label=settings.node_label,
        fabric_name=settings.fabric_name,
    )


class FabricController(Controller[FabricSettings]):
    component = COMPONENT
    metrics_registry = metrics.REGISTRY
    kopf_indices = ("fabric_nodes", "node_slices")

    def __init__(
        self,
        settings: FabricSettings,
        *,
        manager: FabricManager | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(settings, **kwargs)
        self.config = settings_config(settings)
        # Claims churn: a local store, not a kopf index (see runtime/stores.py).
        self.claims = LocalStore(
            "ResourceClaim", {"fabric_claims": functools.partial(_fabric_claim, self.config)}
        )
        self.stores = Stores(self.indices, self.claims)
        self.queue: WorkQueue[str] = WorkQueue(
            self._work, name="fabric", workers=2, clock=self.clock
        )
        self._manager = manager
        self._owns_manager = manager is None
        self._claims_written = _AfterWrite()
        self._nodes_written = _AfterWrite()
        self._counted: set[str] = set()
        self._seen_local: dict[tuple[str, str], float] = {}
        #: Every task this replica starts while it leads (the ticker, operation waiters).
        self.tasks = TaskOwner("fabric")
        self._waiters: dict[str, asyncio.Task[None]] = {}
        self._ticker: asyncio.Task[None] | None = None
        self._seen: tuple[str, int] | None = None  # (epoch, revision) of the newest snapshot
        self.reconciles = 0

    @property
    def manager(self) -> FabricManager:
        assert self._manager is not None, "the operator has not started"
        return self._manager

    def _epoch(self) -> float:
        """Wall-clock seconds: planning compares them with allocationTimestamps."""
        return self.clock.now().timestamp()

    async def _work(self, key: str) -> None:
        self.require_indices()
        try:
            if key == PUBLISH:
                await self.publish()
            else:
                await self.reconcile()
        except FabricUnavailableError as e:
            # A peer gone away (a restart, the demo's shutdown): retried, no traceback.
            metrics.MANAGER_ERRORS.labels(reason="Unavailable").inc()
            raise TemporaryError(f"fabric manager unavailable: {e}") from None
        except FabricError as e:
            if e.status != 401:
                raise
            # Retried with backoff: a Secret mounted late or being rotated heals by itself.
            metrics.MANAGER_ERRORS.labels(reason="Unauthorized").inc()
            log.error(
                "the fabric manager refused our credential (see --manager-token-file)",
                reason=e.reason,
                error=e.message,
            )
            raise TemporaryError(f"fabric manager: {e.reason}: {e.message}") from None

    # --- inputs --------------------------------------------------------------------------------

    def _claims(self) -> list[ResourceClaim]:
        claims = []
        for key in list(self.indices.keys("fabric_claims")):
            body = self.indices.one("fabric_claims", key)
            if body is not None:
                claims.append(ResourceClaim.load(self._claims_written.view(key, body)))
        return claims

    def _annotations(self) -> dict[str, str | None]:
        found: dict[str, str | None] = {}
        for name in list(self.indices.keys("fabric_nodes")):
            body = self.indices.one("fabric_nodes", name)
            if body is not None:
                found[name] = planning.hotplug_annotation(self._nodes_written.view(name, body))
        return found

    def _node_local(self, now: float) -> dict[tuple[str, str], float]:
        """(node, device) published in node pools -> when we first saw it there."""
        published: set[tuple[str, str]] = set()
        for name in list(self.indices.keys("node_slices")):
            for node, devices in self.indices.values("node_slices", name):
                published.update((node, d) for d in devices)
        self._seen_local = {p: self._seen_local.get(p, now) for p in published}
        return self._seen_local

    # --- the reconcile -------------------------------------------------------------------------

    async def _snapshot(self) -> FabricSnapshot:
        """One consistent view of the manager, never older than one planned from before (a
        restarted manager with the same state continues its revisions; one that lost its state
        starts a new epoch)."""
        fabric = await self.manager.snapshot()
        seen = self._seen
        if seen is not None and seen[0] == fabric.epoch and fabric.revision < seen[1]:
            raise Requeue(
                self.settings.poll_seconds,
                f"fabric manager answered revision {fabric.revision}, older than {seen[1]}",
            )
        self._seen = (fabric.epoch, fabric.revision)
        return fabric

    async def reconcile(self) -> None:
        if not self.active:
            return
        self.reconciles += 1
        fabric = await self._snapshot()
        now = self._epoch()
        plan = planning.plan(
            self.config,
            self._claims(),
            fabric,
            self._annotations(),
            self._node_local(now),
            now,
        )
        metrics.ATTACHED_DEVICES.set(
            sum(
                1
                for d in fabric.devices
                if d.cluster == fabric.cluster and d.state in (ATTACHING, ATTACHED)
            )
        )
        fabric_changed = await self._attach(plan)
        await self._annotate(plan)
        await self._report(plan, now)
        fabric_changed |= await self._detach(plan)
        self._count(plan)
        if fabric_changed or plan.finished:
            self.queue.add(PUBLISH)
        if plan.attach or plan.detach:
            self.queue.add(RECONCILE)  # pick up operations that failed or finished at once
        self._watch_running(fabric)
        if plan.waiting:
            delay = self.settings.poll_seconds
            if plan.hand_over:  # a handover waits out its grace, not a whole poll
                delay = min(delay, max(0.1, self.settings.handover_grace))
            raise Requeue(delay, "operations in flight")

    async def _attach(self, plan: planning.Plan) -> bool:
        started = False
        for action in plan.attach:
            claim = action.wanted.claim
            op = await self.manager.attach(
                action.wanted.op_id,
                action.device,
                action.node,
                labels={"claim": claim.key, "claimUID": claim.metadata.uid or ""},
            )
            started = True
            log.info(
                "attach requested",
                **{fields.CLAIM: claim.key, fields.NODE: action.node},
                fabric_device=action.device,
                operation=op.id,
                state=op.state,
            )
            if not op.done:
                self._spawn_waiter(op.id)
        return started

    async def _annotate(self, plan: planning.Plan) -> None:
        """Hand devices to nodes' pools (and take back stale entries) before any condition
        says so: once the binding fails, only the annotation keeps the device attached."""
        for node in sorted(set(plan.hand_over) | set(plan.take_back)):
            cached = self.indices.one("fabric_nodes", node)
            if cached is None:
                continue
            body = self._nodes_written.view(node, cached)
            read = (body.get("metadata") or {}).get("resourceVersion")
            action = planning.annotation_write(
                node, body, plan.hand_over.get(node, []), plan.take_back.get(node, set())
            )
            if action is None:
                continue
            written = await self.apply(action)
            assert written is not None
            self._nodes_written.wrote(node, read, written)
            log.info(
                "node hot-plug annotation updated",
                **{fields.NODE: node},
                devices=planning.hotplug_annotation(action.patch),
            )

    async def _report(self, plan: planning.Plan, now: float) -> None:
        by_claim: dict[str, list[planning.Report]] = {}
        for report in plan.reports:
            by_claim.setdefault(report.wanted.claim.key, []).append(report)
        retry = False
        rejected: InvalidError | None = None
        for reports in by_claim.values():
            claim = reports[0].wanted.claim
            action = planning.status_write(claim, reports, self.config, now)
            if action is None:
                continue
            try:
                written = await self.apply(action)
            except (ConflictError, NotFoundError) as e:
                # Changed (reallocated, deallocated, gone) since we read it: plan again.
                log.info("claim status not written", **{fields.CLAIM: claim.key}, error=str(e))
                retry = True
                continue
            except InvalidError as e:
                # Rejected as written (RBAC of resourceclaims/driver, validation): back off.
                log.warning("claim status rejected", **{fields.CLAIM: claim.key}, error=str(e))
                rejected = rejected or e
                continue
            assert written is not None
            self._claims_written.wrote(action.key, claim.metadata.resource_version, written)
            for report in reports:
                await self._announce(report, now)
        if rejected is not None:
            raise rejected
        if retry:
            raise Requeue(0.2, "claim changed under us")

    async def _announce(self, report: planning.Report, now: float) -> None:
        claim = report.wanted.claim
        context = {fields.CLAIM: claim.key, fields.REASON: report.reason}
        if not report.status:
            log.info("attaching", **context, message=report.message)
            await self.post(
                PostEvent(obj=claim.dump(), type=NORMAL, reason="Attaching", message=report.message)
            )
            return
        allocation = claim.status.allocation
        allocated_at = epoch(allocation.allocation_timestamp if allocation else None)
        if allocated_at is not None:
            metrics.ALLOCATION_TO_READY.observe(max(0.0, now - allocated_at))
        good = report.type == self.config.attached
        # FabricDeviceAttached, FabricDeviceTaken, FabricDeviceAttachFailed, FabricDeviceLost...
        reason = "FabricDevice" + ("Attached" if good else report.reason.removeprefix("Device"))
        kind = NORMAL if good or report.reason == planning.HANDED_OVER_REASON else WARNING
        log.info("binding condition reported", **context, condition=report.type)
        await self.post(
            PostEvent(obj=claim.dump(), type=kind, reason=reason, message=report.message)
        )
        for ref in claim.status.reserved_for:
            if ref.resource == "pods" and not ref.api_group:
                pod = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": ref.name,
                        "namespace": claim.metadata.namespace,
                        "uid": ref.uid,
                    },
                }
                await self.post(
                    PostEvent(obj=pod, type=kind, reason=reason, message=report.message)
                )

    async def _detach(self, plan: planning.Plan) -> bool:
        started = False
        for action in plan.detach:
            if action.node and await self._handed_over_live(action.node, action.device):
                continue
            try:
                op = await self.manager.detach(action.op_id, action.device)
            except FabricError as e:
                log.warning("detach refused", fabric_device=action.device, error=str(e))
                continue
            if op.state == "failed":
                # Still attaching (we retry once it is attached) or no longer ours.
                log.info(
                    "detach not possible yet",
                    fabric_device=action.device,
                    reason=op.reason,
                    message=op.message,
                )
                continue
            started = True
            if not op.done:
                self._spawn_waiter(op.id)
            if op.id not in self._counted:
                self._counted.add(op.id)
                metrics.DETACHES.labels(reason=action.reason).inc()
                log.info(
                    "detach requested",
                    **{fields.NODE: action.node or "", fields.REASON: action.reason},
                    fabric_device=action.device,
                    operation=op.id,
                )
        return started

    async def _handed_over_live(self, node: str, device: str) -> bool:
        try:
            body = await self.api.get("Node", node)
        except NotFoundError:
            return False
        return device in planning.annotation_names(planning.hotplug_annotation(body))

    def _count(self, plan: planning.Plan) -> None:
        for op in plan.finished:
            if op.id in self._counted:
                continue
            self._counted.add(op.id)
            metrics.ATTACH_RESULTS.labels(
                result="Attached" if op.state == "succeeded" else op.reason or "Failed"
            ).inc()
            if op.duration is not None:
                metrics.ATTACH_DURATION.observe(op.duration)
        if len(self._counted) > 100_000:
            self._counted.clear()

    def _spawn_waiter(self, op_id: str) -> None:
        """Long-poll one running operation and reconcile the moment it finishes."""
        if op_id in self._waiters:
            return

        async def wait() -> None:
            try:
                await self.manager.operation(op_id, wait=LONG_POLL)
            except (FabricUnavailableError, FabricError):
                pass  # the periodic poll covers it
            finally:
                self._waiters.pop(op_id, None)
            self.queue.add(RECONCILE)

        self._waiters[op_id] = self.tasks.spawn(wait(), name=f"wait-{op_id}")

    def _watch_running(self, fabric: FabricSnapshot) -> None:
        for op in fabric.operations:
            if not op.done:
                self._spawn_waiter(op.id)

    # --- the free-device pools -----------------------------------------------------------------

    async def publish(self) -> None:
        if not self.active:
            return
        devices = await self.manager.devices()
        api = self.api
        for device in devices:
            if (problem := planning.publishable(device)) is not None:
                log.warning("fabric device not published", reason=problem)
        pools = planning.free_pools(devices, self.config)
        listed = await api.list(
            "ResourceSlice", label_selector=f"{planning.MANAGED_BY_LABEL}={planning.MANAGED_BY}"
        )
        existing = {
            s["metadata"]["name"]: ResourceSlice.load(s)
            for s in listed["items"]
            if (s.get("spec") or {}).get("driver") == self.config.driver
        }
        for pool, free in sorted(pools.items()):
            name = planning.slice_name(self.config, pool)
            action = planning.slice_write(self.config, pool, free, existing.pop(name, None))
            metrics.FREE_DEVICES.labels(pool=pool).set(len(free))
            if action is None:
                continue
            await self.apply(action)
            log.info(
                "fabric pool published",
                **{fields.POOL: f"{self.config.driver}/{pool}"},
                generation=action.body["spec"]["pool"]["generation"],
                free=len(free),
            )
        for name, stale in existing.items():
            if (removal := planning.slice_removal(self.config, name, stale)) is not None:
                await self.apply(removal)
                log.info("fabric pool removed", **{fields.POOL: stale.spec.pool.name or ""})

    async def _tick(self) -> None:
        while True:
            self.queue.add(PUBLISH)
            self.queue.add(RECONCILE)
            await asyncio.sleep(self.settings.publish_seconds)

    # --- lifecycle -----------------------------------------------------------------------------

    async def prepare(self) -> None:
        await self.stores.start(self.api)
        if self._manager is None:
            token_file = self.settings.manager_token_file
            self._manager = HTTPFabricManager(
                self.settings.manager_url, TokenFile(token_file) if token_file else None
            )

    async def activate(self) -> None:
        self.queue.start()
        if self._ticker is None:
            self._ticker = self.tasks.spawn(self._tick(), name="tick")

    async def deactivate(self) -> None:
        """Nothing this replica started outlives its leadership."""
        await self.tasks.cancel_all()
        self._ticker = None
        self._waiters.clear()
        await self.queue.stop()

    async def release(self) -> None:
        await self.stores.stop()
        if self._owns_manager and isinstance(self._manager, HTTPFabricManager):
            await self._manager.close()
            self._manager = None

    def register_handlers(self, registry: kopf.OperatorRegistry) -> None:
        c = self
        config = self.config

        @kopf.index("nodes", id="fabric_nodes", registry=registry)
        async def fabric_nodes(**kw: Any) -> dict[Any, Any]:
            body = kw["body"]
            labels = (body.get("metadata") or {}).get("labels") or {}
            if labels.get(config.node_label) != config.fabric_name:
                return {}
            meta = body.get("metadata") or {}
            return {
                ObjectKey.of(body).name: {
                    "metadata": {
                        "name": meta.get("name"),
                        "resourceVersion": meta.get("resourceVersion"),
                        "annotations": {
                            k: v
                            for k, v in (meta.get("annotations") or {}).items()
                            if k == planning.HOTPLUG_ANNOTATION
                        },
                    }
                }
            }

        @kopf.index(*SLICES, id="node_slices", registry=registry)
        async def node_slices(**kw: Any) -> dict[Any, Any]:
            """Devices of our driver published in node-local pools: (node, device names)."""
            spec = kw["body"].get("spec") or {}
            if spec.get("driver") != config.driver or not spec.get("nodeName"):
                return {}
            names = tuple(d.get("name") for d in spec.get("devices") or [])
            return {ObjectKey.of(kw["body"]).name: (spec["nodeName"], names)}

        @kopf.on.event(*CLAIMS, registry=registry)
        async def claim_changed(**kw: Any) -> None:
            c.indices.attach(kw)
            if c.claims.apply(kw["type"], kw["body"]):
                c.queue.add(RECONCILE)

        @kopf.on.event("nodes", registry=registry)
        async def node_changed(**kw: Any) -> None:
            c.indices.attach(kw)
            labels = (kw["body"].get("metadata") or {}).get("labels") or {}
            if labels.get(config.node_label) == config.fabric_name:
                c.queue.add(RECONCILE)

        @kopf.on.event(*SLICES, registry=registry)
        async def slice_changed(**kw: Any) -> None:
            c.indices.attach(kw)
            spec = kw["body"].get("spec") or {}
            if spec.get("driver") == config.driver and spec.get("nodeName"):
                c.queue.add(RECONCILE)

        del fabric_nodes, node_slices, claim_changed, node_changed, slice_changed
