"""The reservation cleanup: stores feed the queue; a reconcile reads one claim, plans, writes.

Pods missing from the store are looked up live before an entry is dropped: a pod created a
moment ago may be reserved already but not yet seen by our watch (kube-controller-manager does
the same check), and dropping its reservation would hand its devices to someone else.

With 1.37's PodGroup claims on (``Settings.group_claims``) PodGroups are watched too, and a
PodGroup missing from the store is looked up live the same way before its entry is dropped;
off, or on 1.36, PodGroups are never listed and their entries stay.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import kopf
import structlog

from operators.api import consumers
from operators.api.groups import SCHEDULING_GROUP
from operators.api.keys import ObjectKey, controller_pod
from operators.api.resource import ResourceClaim
from operators.controllers.reservations import metrics, planning
from operators.controllers.reservations.settings import ReservationSettings
from operators.kube.api import NotFoundError
from operators.observability import fields
from operators.observability.metrics import claim_labels
from operators.runtime import claim_writes
from operators.runtime.controller import Controller
from operators.runtime.indices import SupersededVersions
from operators.runtime.informer import EventFeed, Feeds
from operators.runtime.queue import WorkQueue
from operators.runtime.stores import IndexFn, LocalStore, Stores, by_key

log = structlog.get_logger(__name__)

COMPONENT = "reservations"


class ReservationController(Controller[ReservationSettings]):
    component = COMPONENT
    metrics_registry = metrics.REGISTRY

    def __init__(self, settings: ReservationSettings, **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        #: 1.37's PodGroup claims: PodGroup entries of reservedFor checked, PodGroups watched.
        self.group_claims = settings.group_claims()
        self.pods = LocalStore("Pod", {"pods": consumers.pod_summary})
        claim_indices: dict[str, IndexFn] = {"claims": by_key, "claims_by_pod": _claims_by_pod}
        if self.group_claims:
            claim_indices["claims_by_group"] = _claims_by_group
        self.claims = LocalStore("ResourceClaim", claim_indices)
        stores = [self.pods, self.claims]
        self.groups: LocalStore | None = None
        if self.group_claims:
            self.groups = LocalStore("PodGroup", {"podgroups": consumers.group_summary})
            stores.append(self.groups)
        self.stores = Stores(self.indices, *stores, on_resync=self._requeue_all)
        self.queue: WorkQueue[ObjectKey] = WorkQueue(
            self.reconcile, name="reservations", workers=settings.workers, clock=self.clock
        )
        self._superseded = SupersededVersions()
        #: Pod and claim events, when this controller runs alone (``claims`` feeds it itself).
        self.feeds: Feeds | None = None

    async def _pods(self, namespace: str, names: set[str]) -> dict[str, consumers.PodInfo | None]:
        found: dict[str, consumers.PodInfo | None] = {}
        for name in names:
            body = self.indices.one("pods", (namespace, name))
            if body is None:
                try:
                    body = await self.api.get("Pod", name, namespace)
                except NotFoundError:
                    body = None
            found[name] = None if body is None else consumers.PodInfo.from_body(body)
        return found

    async def _groups(
        self, namespace: str, names: set[str]
    ) -> dict[str, consumers.GroupInfo | None] | None:
        """The PodGroups holding the claim, None when PodGroup claims are off."""
        if not self.group_claims:
            return None
        found: dict[str, consumers.GroupInfo | None] = {}
        for name in names:
            body = self.indices.one("podgroups", (namespace, name))
            if body is None:
                try:
                    body = await self.api.get("PodGroup", name, namespace)
                except NotFoundError:
                    body = None
            found[name] = None if body is None else consumers.GroupInfo.from_body(body)
        return found

    async def reconcile(self, key: ObjectKey) -> None:
        body = self.indices.one("claims", key)
        if body is None:
            return
        if self._superseded.is_stale(key, (body.get("metadata") or {}).get("resourceVersion")):
            return
        facts = consumers.ClaimFacts.of(body)  # most claims need nothing: decide unparsed
        pods = await self._pods(key.namespace, facts.pods_to_look_up())
        groups = await self._groups(key.namespace, facts.groups_to_look_up())
        plan = consumers.plan_claim(facts, pods, groups)
        if plan.idle:
            return
        claim = ResourceClaim.load(body)
        context = {fields.CLAIM: claim.key}
        resource_version = claim.metadata.resource_version or ""
        if plan.status_write:
            # 409 (a stale cached claim) propagates: the queue retries from a fresh cache.
            updated = await self.apply(claim_writes.status_write(claim, plan))
            assert updated is not None
            resource_version = updated["metadata"]["resourceVersion"]
            for removal in plan.removals:
                metrics.RESERVATIONS_REMOVED.labels(reason=removal.reason).inc()
                consumer = removal.consumer
                kind = "podgroup" if consumers.is_group_consumer(consumer) else "pod"
                log.info(
                    "reservation removed", reason=removal.reason, **{kind: consumer.name}, **context
                )
            if plan.deallocate:
                metrics.DEALLOCATIONS.inc()
                log.info("claim deallocated", **context)
        self._superseded.wrote(key, claim.metadata.resource_version)
        if plan.remove_finalizer:
            await self.apply(claim_writes.finalizer_removal(claim, resource_version))
            self._superseded.wrote(key, resource_version)
            log.info("delete-protection finalizer removed", **context)
        if plan.delete:
            await self.apply(claim_writes.deletion(claim))
            # The status write's version shows no deletion yet: deleting again from it would
            # be a no-op write, and a second count.
            self._superseded.wrote(key, resource_version)
            metrics.CLAIMS_DELETED.inc()
            log.info("generated claim deleted after its pod", **context)

    def _claim_counts(self) -> list[tuple[tuple[str, str, str], float]]:
        counts: Counter[tuple[str, str, str]] = Counter()
        for key in self.indices.keys("claims") if self.indices.has("claims") else ():
            body = self.indices.one("claims", key)
            if body is not None:
                counts[claim_labels(body)] += 1
        return list(counts.items())

    def _requeue_all(self) -> None:
        """Every claim again: after a resync, or when this replica starts leading."""
        for key in self.indices.keys("claims"):
            self.queue.add(key)

    # --- lifecycle ------------------------------------------------------------------------

    async def prepare(self) -> None:
        # Separate, the informers list; in the claims process, its shared feeds start after
        # both controllers, which must be filled before they lead.
        await self.stores.start(self.api, prefill=self.feeds is None)
        if self.feeds is not None:
            await self.feeds.start(self.api)
        metrics.CLAIMS.samples = self._claim_counts

    async def activate(self) -> None:
        self.queue.start()
        self._requeue_all()  # claims changed while we were down or not leading

    async def deactivate(self) -> None:
        await self.queue.stop()

    async def release(self) -> None:
        if self.feeds is not None:
            await self.feeds.stop()
        await self.stores.stop()

    def register_handlers(self, registry: kopf.OperatorRegistry) -> None:
        """Pods and claims live in local stores (``runtime.stores``), fed by informers of our
        own (``runtime.informer``) rather than kopf handlers: the feeds store and enqueue."""
        feeds: dict[str, EventFeed] = {"Pod": self.on_pod, "ResourceClaim": self.on_claim}
        if self.group_claims:
            feeds["PodGroup"] = self.on_podgroup
        self.feeds = Feeds(feeds)

    def on_podgroup(self, kw: Mapping[str, Any]) -> None:
        """A PodGroup watch event: into the store; the claims reserved for that name, when
        it went or its uid changed."""
        assert self.groups is not None
        key = ObjectKey.of(kw["body"])
        before = self.indices.one("podgroups", key)
        if not self.groups.apply(kw["type"], kw["body"]):
            return
        if kw["type"] != "DELETED" and before == self.indices.one("podgroups", key):
            return
        for claim_name in self.indices.values("claims_by_group", key):
            self.queue.add(ObjectKey(key.namespace, claim_name))

    def on_pod(self, kw: Mapping[str, Any]) -> None:
        """A pod watch event: into the store; its claims to reconcile, unless what the plans
        decide from (uid, phase, deletion, and only while deleting whether it has a node)
        stayed the same: a pod's binding, its claims' commonest change, decides nothing."""
        key = ObjectKey.of(kw["body"])
        before = _pod_signature(self.indices.one("pods", key))
        if not self.pods.apply(kw["type"], kw["body"]):
            return
        if kw["type"] != "DELETED" and before == _pod_signature(kw["body"]):
            return
        namespace, name = key
        for claim_name in self.indices.values("claims_by_pod", (namespace, name)):
            self.queue.add(ObjectKey(namespace, claim_name))

    def on_claim(self, kw: Mapping[str, Any]) -> None:
        """A claim watch event: into the store; to reconcile unless what the plan reads of it
        stayed the same (a deletion always: the queue forgets the key)."""
        key = ObjectKey.of(kw["body"])
        before = planning.claim_signature(self.indices.one("claims", key))
        if not self.claims.apply(kw["type"], kw["body"]):
            return
        if kw["type"] == "DELETED" or before != planning.claim_signature(kw["body"]):
            self.queue.add(key)


def _pod_signature(body: Mapping[str, Any] | None) -> tuple[Any, ...] | None:
    """What ``consumers.stale_reason`` reads of a pod (its node only while it is deleted)."""
    if body is None:
        return None
    pod = consumers.PodInfo.from_body(body)
    return (pod.uid, pod.phase, pod.deleting, pod.deleting and not pod.node_name)


def _claims_by_pod(body: Mapping[str, Any]) -> dict[Any, Any]:
    """Claims a pod reserves or owns, by (namespace, pod name)."""
    namespace, name = ObjectKey.of(body)
    pod_names = {
        r.get("name")
        for r in (body.get("status") or {}).get("reservedFor") or []
        if r.get("resource") == "pods" and not r.get("apiGroup")
    }
    owner = controller_pod(body)
    if owner is not None:
        pod_names.add(owner[0])
    return {ObjectKey(namespace, pod): name for pod in pod_names if pod}


def _claims_by_group(body: Mapping[str, Any]) -> dict[Any, Any]:
    """Claims reserved for a PodGroup, by (namespace, PodGroup name)."""
    namespace, name = ObjectKey.of(body)
    return {
        ObjectKey(namespace, r["name"]): name
        for r in (body.get("status") or {}).get("reservedFor") or []
        if r.get("apiGroup") == SCHEDULING_GROUP and r.get("resource") == "podgroups"
        if r.get("name")
    }
