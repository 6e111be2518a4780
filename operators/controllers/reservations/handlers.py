"""kopf handlers of the reservation cleanup: index, enqueue claim keys, reconcile one claim.

Pods missing from the cache are looked up live before an entry is dropped: a pod created a
moment ago may be reserved already but not yet seen by our watch (kube-controller-manager does
the same check), and dropping its reservation would hand its devices to someone else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf
import structlog

from operators.api.resource import ResourceClaim
from operators.controllers.common.indices import (
    CLAIMS,
    IndexView,
    SupersededVersions,
    object_key,
    pod_owner,
)
from operators.controllers.common.runner import Deps, close_deps, make_deps
from operators.controllers.common.stores import LocalStore, Stores
from operators.controllers.common.workqueue import WorkQueue
from operators.controllers.reservations import planning
from operators.controllers.reservations.settings import ReservationSettings
from operators.kube.api import NotFoundError
from operators.observability import fields, metrics

log = structlog.get_logger(__name__)

COMPONENT = "reservations"
ClaimKey = tuple[str, str]


class ReservationController:
    def __init__(self, settings: ReservationSettings) -> None:
        self.settings = settings
        self.indices = IndexView()
        self.pods = LocalStore("Pod", {"pods": _pod_summary})
        self.claims = LocalStore(
            "ResourceClaim", {"claims": _itself, "claims_by_pod": _claims_by_pod}
        )
        self.stores = Stores(self.indices, self.pods, self.claims)
        self.queue: WorkQueue[ClaimKey] = WorkQueue(
            self.reconcile, name="reservations", workers=settings.workers
        )
        self._deps: Deps | None = None
        self._superseded = SupersededVersions()

    @property
    def deps(self) -> Deps:
        assert self._deps is not None, "the operator has not started"
        return self._deps

    async def _pods(self, namespace: str, names: set[str]) -> dict[str, planning.PodInfo | None]:
        found: dict[str, planning.PodInfo | None] = {}
        for name in names:
            body = self.indices.one("pods", (namespace, name))
            if body is None:
                try:
                    body = await self.deps.api.get("Pod", name, namespace)
                except NotFoundError:
                    body = None
            found[name] = None if body is None else planning.PodInfo.from_body(body)
        return found

    async def reconcile(self, key: ClaimKey) -> None:
        body = self.indices.one("claims", key)
        if body is None:
            return
        claim = ResourceClaim.load(body)
        if self._superseded.is_stale(key, claim.metadata.resource_version):
            return
        namespace = claim.metadata.namespace or ""
        pods = await self._pods(namespace, planning.pods_to_look_up(claim))
        plan = planning.plan_claim(claim, pods)
        if plan.idle:
            return
        api = self.deps.api
        context = {fields.CLAIM: claim.key}
        resource_version = claim.metadata.resource_version
        if plan.status_write:
            # 409 (a stale cached claim) propagates: the queue retries from a fresh cache.
            updated = await api.replace_status(planning.status_after(claim, plan))
            resource_version = updated["metadata"]["resourceVersion"]
            for removal in plan.removals:
                metrics.RESERVATIONS_REMOVED.labels(reason=removal.reason).inc()
                log.info(
                    "reservation removed",
                    pod=removal.consumer.name,
                    reason=removal.reason,
                    **context,
                )
            if plan.deallocate:
                metrics.DEALLOCATIONS.inc()
                log.info("claim deallocated", **context)
        self._superseded.wrote(key, claim.metadata.resource_version)
        if plan.remove_finalizer:
            finalizers = [
                f for f in claim.metadata.finalizers if f != planning.DELETE_PROTECTION_FINALIZER
            ]
            await api.patch(
                "ResourceClaim",
                claim.metadata.name or "",
                {"metadata": {"resourceVersion": resource_version, "finalizers": finalizers}},
                namespace,
            )
            log.info("delete-protection finalizer removed", **context)
        if plan.delete:
            await api.delete(
                "ResourceClaim", claim.metadata.name or "", namespace, uid=claim.metadata.uid
            )
            metrics.CLAIMS_DELETED.inc()
            log.info("generated claim deleted after its pod", **context)

    def _count_claims(self) -> tuple[int, int]:
        total = allocated = 0
        if not self.indices.ready:
            return 0, 0
        for key in self.indices.keys("claims"):
            body = self.indices.one("claims", key)
            if body is not None:
                total += 1
                allocated += bool((body.get("status") or {}).get("allocation"))
        return total, allocated

    # --- kopf side ------------------------------------------------------------------------

    def register(self, registry: kopf.OperatorRegistry) -> None:
        """Pods and claims live in local stores (see stores.py); handlers feed and enqueue."""
        controller = self

        @kopf.on.event("pods", registry=registry)
        async def pod_changed(**kw: Any) -> None:
            if not controller.pods.apply(kw["type"], kw["body"]):
                return
            namespace, name = object_key(kw["body"])
            for claim_name in controller.indices.values("claims_by_pod", (namespace, name)):
                controller.queue.add((namespace, claim_name))

        @kopf.on.event(*CLAIMS, registry=registry)
        async def claim_changed(**kw: Any) -> None:
            if controller.claims.apply(kw["type"], kw["body"]):
                controller.queue.add(object_key(kw["body"]))

        @kopf.on.startup(registry=registry)
        async def start(**_: Any) -> None:
            controller._deps = await make_deps(controller.settings, COMPONENT)
            await controller.stores.start(controller.deps.api)
            metrics.RESOURCE_CLAIMS.set_function(lambda: controller._count_claims()[0])
            metrics.ALLOCATED_RESOURCE_CLAIMS.set_function(lambda: controller._count_claims()[1])
            controller.queue.start()
            for key in controller.indices.keys("claims"):  # claims changed while we were down
                controller.queue.add(key)

        @kopf.on.cleanup(registry=registry)
        async def stop(**_: Any) -> None:
            await controller.queue.stop()
            await controller.stores.stop()
            await close_deps(controller._deps)

        del pod_changed, claim_changed, start, stop


def _pod_summary(body: Mapping[str, Any]) -> dict[Any, Any]:
    """What the plan needs of a pod, kept small: every pod of the cluster is in this store."""
    meta = body.get("metadata") or {}
    return {
        object_key(body): {
            "metadata": {
                "uid": meta.get("uid"),
                "deletionTimestamp": meta.get("deletionTimestamp"),
            },
            "spec": {"nodeName": (body.get("spec") or {}).get("nodeName")},
            "status": {"phase": (body.get("status") or {}).get("phase")},
        }
    }


def _itself(body: Mapping[str, Any]) -> dict[Any, Any]:
    return {object_key(body): dict(body)}


def _claims_by_pod(body: Mapping[str, Any]) -> dict[Any, Any]:
    """Claims a pod reserves or owns, by (namespace, pod name)."""
    namespace, name = object_key(body)
    pod_names = {
        r.get("name")
        for r in (body.get("status") or {}).get("reservedFor") or []
        if r.get("resource") == "pods" and not r.get("apiGroup")
    }
    owner = pod_owner(body)
    if owner is not None:
        pod_names.add(owner[0])
    return {(namespace, pod): name for pod in pod_names if pod}
