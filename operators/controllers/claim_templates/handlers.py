"""kopf handlers of the claim-template controller: index, enqueue, reconcile one pod.

kopf's indices are the informer cache (kopf runs no handler before every index has finished its
initial list); event handlers only enqueue pod keys; the reconcile reads the indices, calls
``planning.plan_pod`` and applies its actions. Right before creating a claim it re-lists the
namespace's claims from the API server, so a claim kube-controller-manager created a moment ago
is adopted rather than duplicated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf
import structlog

from operators.api.core import Pod
from operators.api.resource import ResourceClaim, ResourceClaimTemplate
from operators.controllers.claim_templates import planning
from operators.controllers.claim_templates.settings import ClaimTemplateSettings
from operators.controllers.common.indices import (
    CLAIMS,
    TEMPLATES,
    IndexView,
    SupersededVersions,
    object_key,
    pod_owner,
)
from operators.controllers.common.runner import BoundDeps, close_deps, make_deps
from operators.controllers.common.stores import LocalStore, Stores
from operators.controllers.common.workqueue import WorkQueue
from operators.kube.api import ConflictError, NotFoundError
from operators.kube.events import WARNING
from operators.observability import fields, metrics

log = structlog.get_logger(__name__)

COMPONENT = "claim-templates"

PodKey = tuple[str, str]


def _has_template_claims(body: Mapping[str, Any], **_: Any) -> bool:
    claims = body.get("spec", {}).get("resourceClaims") or []
    return any(c.get("resourceClaimTemplateName") for c in claims)


class ClaimTemplateController(BoundDeps):
    """The reconcile side; kopf handlers registered in ``register`` feed it."""

    def __init__(self, settings: ClaimTemplateSettings) -> None:
        self.settings = settings
        self.indices = IndexView()
        self.pods = LocalStore(
            "Pod",
            {
                "pods": _itself,
                "pods_by_template": _pods_by_template,
                "pods_by_recorded_claim": _pods_by_recorded_claim,
            },
            when=_has_template_claims,
        )
        self.claims = LocalStore(
            "ResourceClaim", {"claims": _itself, "claims_by_owner": _claims_by_owner}
        )
        self.stores = Stores(self.indices, self.pods, self.claims)
        self.queue: WorkQueue[PodKey] = WorkQueue(
            self.reconcile, name="claim-templates", workers=settings.workers
        )
        self._superseded = SupersededVersions()

    def _claims_for(self, pod: Pod) -> dict[str, ResourceClaim]:
        """Claims the plan needs: generated for this pod, and those named in its status."""
        namespace = pod.metadata.namespace or ""
        names = set(self.indices.values("claims_by_owner", (namespace, pod.metadata.uid)))
        names.update(
            s.resource_claim_name
            for s in pod.status.resource_claim_statuses
            if s.resource_claim_name
        )
        claims: dict[str, ResourceClaim] = {}
        for name in names:
            body = self.indices.one("claims", (namespace, name))
            if body is not None:
                claims[name] = ResourceClaim.load(body)
        return claims

    def _templates_for(self, pod: Pod) -> dict[str, ResourceClaimTemplate]:
        namespace = pod.metadata.namespace or ""
        templates: dict[str, ResourceClaimTemplate] = {}
        for entry in pod.spec.resource_claims:
            name = entry.resource_claim_template_name
            if name:
                body = self.indices.one("templates", (namespace, name))
                if body is not None:
                    templates[name] = ResourceClaimTemplate.load(body)
        return templates

    async def reconcile(self, key: PodKey) -> None:
        body = self.indices.one("pods", key)
        if body is None:
            return
        pod = Pod.load(body)
        if not planning.in_scope(pod, self.settings.scheduler_names, self.settings.all_pods):
            return
        if self._superseded.is_stale(key, pod.metadata.resource_version):
            return
        actions = planning.plan_pod(pod, self._templates_for(pod), self._claims_for(pod))
        records: list[planning.RecordStatus] = []
        for action in actions:
            if isinstance(action, planning.CreateClaim):
                record = await self._create(pod, action)
                if record is not None:
                    records.append(record)
            elif isinstance(action, planning.RecordStatus):
                records.append(action)
            elif isinstance(action, planning.DeleteDuplicate):
                await self._delete_duplicate(pod, action)
            else:
                await self.events.post(body, WARNING, action.reason, action.message)
        if records:
            await self._record(pod, records)
            self._superseded.wrote(key, pod.metadata.resource_version)

    async def _create(self, pod: Pod, action: planning.CreateClaim) -> planning.RecordStatus | None:
        """Create the claim, unless the live pod shows one recorded since our cache saw it.

        Claims generated for the pod are already known from the cache (the plan adopts them);
        the live read closes the window in which kube-controller-manager created a claim and
        recorded it while our pod cache lagged. A narrower window (its claim created, not yet
        recorded) can still give two claims; the plan then keeps the recorded one and deletes
        the other while it is unallocated. A LIST of the namespace's claims would close that
        window too, at O(claims) per pod.
        """
        namespace = pod.metadata.namespace or ""
        try:
            live = Pod.load(await self.deps.api.get("Pod", pod.metadata.name or "", namespace))
        except NotFoundError:
            return None
        if live.metadata.uid != pod.metadata.uid:
            return None
        for status in live.status.resource_claim_statuses:
            if status.name == action.entry and status.resource_claim_name:
                log.info(
                    "claim recorded meanwhile",
                    **{
                        fields.POD: pod.metadata.key,
                        fields.CLAIM: f"{namespace}/{status.resource_claim_name}",
                    },
                )
                return None
        created = await self.deps.api.create(action.claim)
        name = created["metadata"]["name"]
        metrics.CLAIMS_CREATED.inc()
        log.info(
            "created claim", **{fields.POD: pod.metadata.key, fields.CLAIM: f"{namespace}/{name}"}
        )
        return planning.RecordStatus(action.entry, name)

    async def _record(self, pod: Pod, records: list[planning.RecordStatus]) -> None:
        patch = {
            "metadata": {"resourceVersion": pod.metadata.resource_version},
            "status": {
                "resourceClaimStatuses": [
                    {"name": r.entry, "resourceClaimName": r.claim_name} for r in records
                ]
            },
        }
        # A 409 (stale cached pod) propagates: the queue retries and the claim is adopted then.
        try:
            await self.deps.api.patch(
                "Pod",
                pod.metadata.name or "",
                patch,
                pod.metadata.namespace,
                patch_type="strategic",
                subresource="status",
            )
        except NotFoundError:
            return

    async def _delete_duplicate(self, pod: Pod, action: planning.DeleteDuplicate) -> None:
        log.info(
            "deleting duplicate claim",
            **{
                fields.POD: pod.metadata.key,
                fields.CLAIM: f"{pod.metadata.namespace}/{action.name}",
            },
        )
        try:
            await self.deps.api.delete(
                "ResourceClaim", action.name, pod.metadata.namespace, uid=action.uid
            )
        except ConflictError:
            return  # replaced meanwhile: the next reconcile decides again

    # --- kopf side ------------------------------------------------------------------------

    def register(self, registry: kopf.OperatorRegistry) -> None:
        """Stores (the cache), event handlers (feed stores, enqueue), startup and cleanup.

        Pods and claims churn: they live in local stores, not kopf indices (see stores.py).
        """
        controller = self

        @kopf.index(*TEMPLATES, id="templates", registry=registry)
        async def templates(**kw: Any) -> dict[Any, Any]:
            return {object_key(kw["body"]): dict(kw["body"])}

        @kopf.on.event("pods", registry=registry)
        async def pod_changed(**kw: Any) -> None:
            controller.indices.attach(kw)
            if controller.pods.apply(kw["type"], kw["body"]) and _has_template_claims(kw["body"]):
                controller.queue.add(object_key(kw["body"]))

        @kopf.on.event(*TEMPLATES, registry=registry)
        async def template_changed(**kw: Any) -> None:
            controller.indices.attach(kw)
            for pod_name in controller.indices.values("pods_by_template", object_key(kw["body"])):
                controller.queue.add((kw["body"]["metadata"]["namespace"], pod_name))

        @kopf.on.event(*CLAIMS, registry=registry)
        async def claim_changed(**kw: Any) -> None:
            controller.indices.attach(kw)
            controller.claims.apply(kw["type"], kw["body"])
            namespace, name = object_key(kw["body"])
            owner = pod_owner(kw["body"])
            if owner is not None:
                controller.queue.add((namespace, owner[0]))
            # Pods whose status names this claim (it may be someone else's: a conflict).
            for pod_name in controller.indices.values("pods_by_recorded_claim", (namespace, name)):
                controller.queue.add((namespace, pod_name))

        @kopf.on.startup(registry=registry)
        async def start(**_: Any) -> None:
            controller.bind(await make_deps(controller.settings, COMPONENT))
            await controller.stores.start(controller.deps.api)
            controller.queue.start()

        @kopf.on.cleanup(registry=registry)
        async def stop(**_: Any) -> None:
            await controller.queue.stop()
            await controller.stores.stop()
            await close_deps(controller._deps)

        del templates, pod_changed, template_changed, claim_changed, start, stop


def _pods_by_template(body: Mapping[str, Any]) -> dict[Any, Any]:
    namespace, name = object_key(body)
    return {
        (namespace, c["resourceClaimTemplateName"]): name
        for c in (body.get("spec") or {}).get("resourceClaims") or []
        if c.get("resourceClaimTemplateName")
    }


def _pods_by_recorded_claim(body: Mapping[str, Any]) -> dict[Any, Any]:
    namespace, name = object_key(body)
    return {
        (namespace, s["resourceClaimName"]): name
        for s in (body.get("status") or {}).get("resourceClaimStatuses") or []
        if s.get("resourceClaimName")
    }


def _claims_by_owner(body: Mapping[str, Any]) -> dict[Any, Any]:
    namespace, name = object_key(body)
    owner = pod_owner(body)
    return {} if owner is None else {(namespace, owner[1]): name}


def _itself(body: Mapping[str, Any]) -> dict[Any, Any]:
    return {object_key(body): dict(body)}
