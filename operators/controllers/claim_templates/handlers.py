"""The claim-template controller: stores feed the queue; a reconcile reads one pod, plans,
writes.

Claims it created are remembered until its claim store shows them (kube-controller-manager
keeps the same "mutation cache"): a retry after a 409 on the pod status then adopts the claim
it created instead of creating a second one. Where kube-controller-manager's controller may
run too (without ``all_pods``), it reads the pod live right before creating a claim, so a claim
that one recorded a moment ago is adopted, not duplicated.

With 1.37's PodGroup claims on (GenericWorkload + DRAWorkloadResourceClaims, ``Settings.
group_claims``) it watches PodGroups too, and reconciles them on a queue of their own: one
claim per template entry, recorded in the group's status; a PodGroup event brings back its
member pods (indexed by the group they name), which record the group's claims. Off, or on
1.36, PodGroups are never listed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf
import structlog

from operators.allocator.features import V1_38
from operators.api.core import Pod
from operators.api.groups import PodGroup, group_name
from operators.api.keys import ObjectKey, controller_group, controller_pod
from operators.api.resource import ResourceClaim, ResourceClaimTemplate
from operators.controllers.claim_templates import metrics, planning
from operators.controllers.claim_templates.settings import ClaimTemplateSettings
from operators.kube.api import ApiError, ConflictError, NotFoundError
from operators.observability import fields
from operators.observability.metrics import admin_access_label
from operators.runtime.actions import Create
from operators.runtime.controller import Controller
from operators.runtime.errors import UnknownOutcomeError
from operators.runtime.indices import SupersededVersions
from operators.runtime.informer import EventFeed, Feeds
from operators.runtime.queue import WorkQueue
from operators.runtime.stores import IndexFn, LocalStore, ModelCache, Stores, by_key

log = structlog.get_logger(__name__)

COMPONENT = "claim-templates"


def _has_template_claims(body: Mapping[str, Any], **_: Any) -> bool:
    claims = body.get("spec", {}).get("resourceClaims") or []
    return any(c.get("resourceClaimTemplateName") for c in claims)


class ClaimTemplateController(Controller[ClaimTemplateSettings]):
    component = COMPONENT
    metrics_registry = metrics.REGISTRY

    def __init__(self, settings: ClaimTemplateSettings, **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        #: 1.37's PodGroup claims: PodGroups watched, their template entries served.
        self.group_claims = settings.group_claims()
        pod_indices: dict[str, IndexFn] = {
            "pods": by_key,
            "pods_by_template": _pods_by_template,
            "pods_by_recorded_claim": _pods_by_recorded_claim,
        }
        claim_indices: dict[str, IndexFn] = {"claims": by_key, "claims_by_owner": _claims_by_owner}
        if self.group_claims:
            pod_indices["pods_by_group"] = _pods_by_group
            claim_indices["claims_by_group"] = _claims_by_group
        self.pods = LocalStore("Pod", pod_indices, when=_has_template_claims)
        self.claims = LocalStore("ResourceClaim", claim_indices, on_change=self._seen)
        self.templates = LocalStore("ResourceClaimTemplate", {"templates": by_key})
        #: Templates parsed once per version: every pod of a workload names the same one.
        self.template_models = ModelCache(ResourceClaimTemplate)
        #: 1.38: claims of terminal pods stay as they are (read once: the release is fixed).
        self.terminal_untouched = settings.version().release >= V1_38
        self.groups: LocalStore | None = None
        #: PodGroups to reconcile (their own keys: a group and a pod may share a name).
        self.group_queue: WorkQueue[ObjectKey] | None = None
        stores = [self.pods, self.claims, self.templates]
        if self.group_claims:
            self.groups = LocalStore(
                "PodGroup",
                {"podgroups": by_key, "podgroups_by_template": _pods_by_template},
            )
            stores.append(self.groups)
            self.group_queue = WorkQueue(
                self.reconcile_group,
                name="claim-templates-podgroups",
                workers=settings.workers,
                clock=self.clock,
            )
        self.stores = Stores(self.indices, *stores)
        self.queue: WorkQueue[ObjectKey] = WorkQueue(
            self.reconcile, name="claim-templates", workers=settings.workers, clock=self.clock
        )
        self._group_superseded = SupersededVersions()
        self._superseded = SupersededVersions()
        # The pod version our own status write produced, per pod: its plan is the one just
        # carried out, so its watch event brings no reconcile (unless one was skipped
        # meanwhile, waiting for it: ``reconcile`` then drops the entry).
        self._written: dict[ObjectKey, str] = {}
        # Claims we created that the store has not shown yet: (namespace, pod or PodGroup
        # uid) -> bodies.
        self._created: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        #: Namespace -> its pods (and PodGroups) whose claim a ResourceQuota refused
        #: (``on_quota``).
        self._over_quota: dict[str, set[ObjectKey]] = {}
        self._over_quota_groups: dict[str, set[ObjectKey]] = {}
        #: Pod, claim and template events, when this controller runs alone (``claims`` feeds
        #: it itself).
        self.feeds: Feeds | None = None

    def _seen(self, key: ObjectKey, body: Mapping[str, Any] | None) -> None:
        owner = None if body is None else controller_pod(body) or controller_group(body)
        if owner is None:
            return
        created = self._created.get((key.namespace, owner[1]))
        if created is not None:
            created.pop(key.name, None)
            if not created:
                del self._created[(key.namespace, owner[1])]

    def _claims_for(self, pod: Pod, group: PodGroup | None = None) -> dict[str, ResourceClaim]:
        """Claims the plan needs: generated for this pod or its PodGroup (the store's and
        those we created that it does not show yet), and those named in either's status."""
        namespace = pod.metadata.namespace or ""
        owners = [pod.metadata.uid or ""]
        names = {s.resource_claim_name for s in pod.status.resource_claim_statuses}
        if group is not None:
            owners.append(group.metadata.uid or "")
            names.update(s.resource_claim_name for s in group.status.resource_claim_statuses)
        return self._claims(namespace, owners, {n for n in names if n})

    def _claims(
        self, namespace: str, owners: list[str], names: set[str]
    ) -> dict[str, ResourceClaim]:
        for uid in owners:
            names.update(self.indices.values("claims_by_owner", (namespace, uid)))
            if self.group_claims:
                names.update(self.indices.values("claims_by_group", (namespace, uid)))
        claims: dict[str, ResourceClaim] = {}
        for name in names:
            body = self.indices.one("claims", (namespace, name))
            if body is not None:
                claims[name] = ResourceClaim.load(body)
        for uid in owners:
            for name, body in self._created.get((namespace, uid), {}).items():
                claims.setdefault(name, ResourceClaim.load(body))
        return claims

    def _group_of(self, pod: Pod) -> PodGroup | None:
        """The PodGroup the pod names, from the store (PodGroup claims on)."""
        name = group_name(pod)
        if not self.group_claims or name is None:
            return None
        body = self.indices.one("podgroups", (pod.metadata.namespace or "", name))
        return None if body is None else PodGroup.load(body)

    def _templates_for(self, owner: Pod | PodGroup) -> dict[str, ResourceClaimTemplate]:
        namespace = owner.metadata.namespace or ""
        templates: dict[str, ResourceClaimTemplate] = {}
        for entry in owner.spec.resource_claims:
            name = entry.resource_claim_template_name
            if name:
                key = ObjectKey(namespace, name)
                body = self.indices.one("templates", key)
                if body is not None:
                    templates[name] = self.template_models.parse(key, body)
        return templates

    async def reconcile(self, key: ObjectKey) -> None:
        self.require_indices()
        body = self.indices.one("pods", key)
        if body is None:
            return
        # Before parsing: a pod whose version our own write superseded (its claim's event
        # came first) is most reconciles after the first.
        if self._superseded.is_stale(key, (body.get("metadata") or {}).get("resourceVersion")):
            self._written.pop(key, None)  # our write's event must bring the pod back
            return
        pod = Pod.load(body)
        if not planning.in_scope(pod, self.settings.scheduler_names, self.settings.all_pods):
            return
        group = self._group_of(pod)
        actions = planning.plan_pod(
            pod,
            self._templates_for(pod),
            self._claims_for(pod, group),
            group,
            group_claims=self.group_claims,
            terminal_untouched=self.terminal_untouched,
        )
        records: list[planning.RecordStatus] = []
        for action in actions:
            if isinstance(action, planning.CreateClaim):
                record = await self._create_or_report(pod, action)
                if record is not None:
                    records.append(record)
            elif isinstance(action, planning.RecordStatus):
                records.append(action)
            elif isinstance(action, planning.DeleteDuplicate):
                await self._delete_duplicate(pod, action)
            else:
                await self.post(planning.warning(pod, action))
        if records:
            # A 409 (stale cached pod) propagates: the queue retries and adopts the claim.
            try:
                written = await self.apply(planning.recording(pod, records))
            except NotFoundError:
                return
            self._superseded.wrote(key, pod.metadata.resource_version)
            version = ((written or {}).get("metadata") or {}).get("resourceVersion")
            if version:
                self._written[key] = version

    async def _create_or_report(
        self, pod: Pod, action: planning.CreateClaim
    ) -> planning.RecordStatus | None:
        """``_create``; refused by the API server (a ResourceQuota on devices, an admission
        policy), the refusal is an Event on the pod as kube-controller-manager words it, and
        the pod is retried with backoff, or at once when a quota of its namespace changes."""
        key = ObjectKey(pod.metadata.namespace or "", pod.metadata.name or "")
        try:
            record = await self._create(pod, action)
        except ApiError as e:
            if e.status in (403, 422):
                if planning.over_quota(e.message):
                    self._over_quota.setdefault(key.namespace, set()).add(key)
                await self.post(planning.warning(pod, planning.refused(action, e.message)))
            raise
        self._over_quota.get(key.namespace, set()).discard(key)
        return record

    async def _create(self, pod: Pod, action: planning.CreateClaim) -> planning.RecordStatus | None:
        """Create the claim, unless the live pod shows one recorded since our cache saw it.

        Claims generated for the pod are already known from the store and our own record of
        what we created (the plan adopts them); the live read closes the window in which
        kube-controller-manager created a claim and recorded it while our pod cache lagged. A
        narrower window (its claim created, not yet recorded) can still give two claims; the
        plan then keeps the recorded one and deletes the other while it is unallocated. With
        ``all_pods`` nobody else creates claims, and the read (a third of the controller's
        requests per pod) is left out, as kube-controller-manager has none.
        """
        namespace = pod.metadata.namespace or ""
        if not self.settings.all_pods and await self._recorded_meanwhile(pod, action):
            return None
        name = await self._apply_claim(action.claim, namespace, pod.metadata.uid)
        log.info(
            "created claim", **{fields.POD: pod.metadata.key, fields.CLAIM: f"{namespace}/{name}"}
        )
        return planning.RecordStatus(action.entry, name)

    async def _apply_claim(
        self, claim: dict[str, Any], namespace: str, owner_uid: str | None
    ) -> str:
        """Create a claim for a pod or a PodGroup, counted, and remembered as its owner's
        (until the store shows it): its name."""
        admin_access = admin_access_label(claim)
        try:
            created = await self.apply(Create(body=claim))
        except (ApiError, OSError, TimeoutError, UnknownOutcomeError):
            metrics.CREATES.labels("failure", admin_access).inc()
            raise
        assert created is not None
        metrics.CREATES.labels("success", admin_access).inc()
        name: str = created["metadata"]["name"]
        self._created.setdefault((namespace, owner_uid or ""), {})[name] = created
        return name

    async def _recorded_meanwhile(self, pod: Pod, action: planning.CreateClaim) -> bool:
        """The live pod is gone, replaced, or records a claim for the entry already (created
        by kube-controller-manager while our pod cache lagged). Not asked with ``all_pods``:
        then no other controller creates claims for pods (kube-controller-manager's is off)."""
        namespace = pod.metadata.namespace or ""
        try:
            live = Pod.load(await self.api.get("Pod", pod.metadata.name or "", namespace))
        except NotFoundError:
            return True
        if live.metadata.uid != pod.metadata.uid:
            return True
        for status in live.status.resource_claim_statuses:
            if status.name == action.entry and status.resource_claim_name:
                log.info(
                    "claim recorded meanwhile",
                    **{
                        fields.POD: pod.metadata.key,
                        fields.CLAIM: f"{namespace}/{status.resource_claim_name}",
                    },
                )
                return True
        return False

    async def _delete_duplicate(self, pod: Pod, action: planning.DeleteDuplicate) -> None:
        log.info(
            "deleting duplicate claim",
            **{
                fields.POD: pod.metadata.key,
                fields.CLAIM: f"{pod.metadata.namespace}/{action.name}",
            },
        )
        try:
            await self.apply(planning.deletion(pod, action))
        except ConflictError:
            return  # replaced meanwhile: the next reconcile decides again

    # --- PodGroups (1.37's PodGroup claims) -------------------------------------------------

    async def reconcile_group(self, key: ObjectKey) -> None:
        """One PodGroup: create its template entries' claims, record them in its status."""
        body = self.indices.one("podgroups", key)
        if body is None:
            return
        group = PodGroup.load(body)
        if self._group_superseded.is_stale(key, group.metadata.resource_version):
            return
        claims = await self._claims_of_group(group)
        actions = planning.plan_group(group, self._templates_for(group), claims)
        records: list[planning.RecordGroupStatus] = []
        for action in actions:
            if isinstance(action, planning.CreateGroupClaim):
                try:
                    record = await self._create_for_group(group, action)
                except ApiError as e:
                    if e.status in (403, 422):  # a quota on devices, an admission policy
                        if planning.over_quota(e.message):
                            self._over_quota_groups.setdefault(key.namespace, set()).add(key)
                        refusal = planning.refused(action, e.message)
                        await self.post(planning.group_warning(group, refusal))
                    raise
                if record is not None:
                    records.append(record)
            elif isinstance(action, planning.RecordGroupStatus):
                records.append(action)
            else:
                await self.post(planning.group_warning(group, action))
        if records:
            # A 409 (stale cached PodGroup) propagates: the retry adopts the claim.
            try:
                await self.apply(planning.group_recording(group, records))
            except NotFoundError:
                return
            self._group_superseded.wrote(key, group.metadata.resource_version)

    async def _claims_of_group(self, group: PodGroup) -> dict[str, ResourceClaim]:
        """The claims the group owns and those its status names: one the store does not show
        is read live (upstream's claimExists), so that a claim someone else made a moment ago
        is not taken for gone and made again."""
        namespace = group.metadata.namespace or ""
        named = {
            s.resource_claim_name
            for s in group.status.resource_claim_statuses
            if s.resource_claim_name
        }
        claims = self._claims(namespace, [group.metadata.uid or ""], set(named))
        for name in named - set(claims):
            try:
                claims[name] = ResourceClaim.load(
                    await self.api.get("ResourceClaim", name, namespace)
                )
            except NotFoundError:
                continue
        return claims

    async def _create_for_group(
        self, group: PodGroup, action: planning.CreateGroupClaim
    ) -> planning.RecordGroupStatus | None:
        """Create the group's claim, unless (kube-controller-manager's controller may run
        too) the live PodGroup is gone, replaced, or records another claim for the entry."""
        namespace = group.metadata.namespace or ""
        if not self.settings.all_pods and await self._group_recorded_meanwhile(group, action):
            return None
        name = await self._apply_claim(action.claim, namespace, group.metadata.uid)
        log.info(
            "created claim for PodGroup",
            podgroup=group.metadata.key,
            **{fields.CLAIM: f"{namespace}/{name}"},
        )
        return planning.RecordGroupStatus(action.entry, name)

    async def _group_recorded_meanwhile(
        self, group: PodGroup, action: planning.CreateGroupClaim
    ) -> bool:
        namespace = group.metadata.namespace or ""
        try:
            live = PodGroup.load(
                await self.api.get("PodGroup", group.metadata.name or "", namespace)
            )
        except NotFoundError:
            return True
        if live.metadata.uid != group.metadata.uid:
            return True

        def recorded(g: PodGroup) -> str | None:
            return next(
                (
                    s.resource_claim_name
                    for s in g.status.resource_claim_statuses
                    if s.name == action.entry
                ),
                None,
            )

        return recorded(live) != recorded(group)

    # --- lifecycle ------------------------------------------------------------------------

    async def prepare(self) -> None:
        # Separate, the informers list; in the claims process, its shared feeds start after
        # both controllers, which must be filled before they lead.
        await self.stores.start(self.api, prefill=self.feeds is None)
        if self.feeds is not None:
            await self.feeds.start(self.api)

    async def activate(self) -> None:
        self.queue.start()
        for key in self.indices.keys("pods"):  # pods created while we were not leading
            self.queue.add(key)
        if self.group_queue is not None:
            self.group_queue.start()
            for key in self.indices.keys("podgroups"):
                self.group_queue.add(key)

    async def deactivate(self) -> None:
        await self.queue.stop()
        if self.group_queue is not None:
            await self.group_queue.stop()
        self._created.clear()
        self._written.clear()

    async def release(self) -> None:
        if self.feeds is not None:
            await self.feeds.stop()
        await self.stores.stop()

    def register_handlers(self, registry: kopf.OperatorRegistry) -> None:
        """Pods, claims and templates live in local stores (``runtime.stores``), fed by
        informers of our own (``runtime.informer``) rather than kopf handlers."""
        self.feeds = Feeds(self.feeds_by_kind())

    def feeds_by_kind(self) -> dict[str, EventFeed]:
        feeds: dict[str, EventFeed] = {
            "Pod": self.on_pod,
            "ResourceClaim": self.on_claim,
            "ResourceClaimTemplate": self.on_template,
        }
        if self.group_claims:
            feeds["PodGroup"] = self.on_podgroup
        feeds["ResourceQuota"] = self.on_quota
        return feeds

    def on_quota(self, kw: Mapping[str, Any]) -> None:
        """A ResourceQuota changed (its usage recounted, its limits raised): the pods of its
        namespace whose claim it refused are tried again at once, not after their backoff."""
        namespace = ObjectKey.of(kw["body"]).namespace
        for key in sorted(self._over_quota.pop(namespace, set())):
            self.queue.add(key)
        for key in sorted(self._over_quota_groups.pop(namespace, set())):
            if self.group_queue is not None:
                self.group_queue.add(key)

    def on_template(self, kw: Mapping[str, Any]) -> None:
        """A template event: into the store; the pods and PodGroups that name it."""
        if not self.templates.apply(kw["type"], kw["body"]):
            return
        key = ObjectKey.of(kw["body"])
        if kw["type"] == "DELETED":
            self.template_models.forget(key)
        for pod_name in self.indices.values("pods_by_template", key):
            self.queue.add(ObjectKey(key.namespace, pod_name))
        if self.group_queue is not None:
            for group in self.indices.values("podgroups_by_template", key):
                self.group_queue.add(ObjectKey(key.namespace, group))

    def on_podgroup(self, kw: Mapping[str, Any]) -> None:
        """A PodGroup event: into the store; the group (when it has template entries) and its
        member pods, which may record its claims now (or, it gone, wait for it again)."""
        assert self.groups is not None
        assert self.group_queue is not None
        body = kw["body"]
        key = ObjectKey.of(body)
        before = planning.group_signature(self.indices.one("podgroups", key))
        if not self.groups.apply(kw["type"], body):
            return
        if kw["type"] == "DELETED":
            uid = (body.get("metadata") or {}).get("uid") or ""
            self._created.pop((key.namespace, uid), None)
            self._group_superseded.forget(key)
        elif planning.group_signature(body) == before:
            return  # the scheduler's conditions: nothing a plan reads
        elif _has_template_claims(body):
            self.group_queue.add(key)
        for pod_name in self.indices.values("pods_by_group", key):
            self.queue.add(ObjectKey(key.namespace, pod_name))

    def on_pod(self, kw: Mapping[str, Any]) -> None:
        """A pod watch event: into the store; pods to reconcile."""
        body = kw["body"]
        key = ObjectKey.of(body)
        version = (body.get("metadata") or {}).get("resourceVersion")
        if kw["type"] == "DELETED":
            uid = (body.get("metadata") or {}).get("uid") or ""
            self._created.pop((key.namespace, uid), None)
            self._written.pop(key, None)
        elif version and self._written.get(key) == version:
            # Our own status write: the store takes it, the plan has nothing left to do.
            del self._written[key]
            self.pods.apply(kw["type"], body)
            self._superseded.forget(key)
            return
        before = planning.pod_signature(self.indices.one("pods", key))
        if (
            self.pods.apply(kw["type"], body)
            and _has_template_claims(body)
            and planning.pod_signature(body) != before
        ):
            self.queue.add(key)

    def on_claim(self, kw: Mapping[str, Any]) -> None:
        """A claim watch event: into the store; its owner and the pods that record it."""
        body = kw["body"]
        key = ObjectKey.of(body)
        before = planning.claim_signature(self.indices.one("claims", key))
        if not self.claims.apply(kw["type"], body):
            return
        if kw["type"] != "DELETED" and planning.claim_signature(body) == before:
            return  # its reservations or devices moved: nothing a pod's plan reads
        owner = controller_pod(body)
        pods = [owner[0]] if owner is not None else []
        # Pods whose status names this claim (it may be someone else's: a conflict).
        pods += self.indices.values("pods_by_recorded_claim", key)
        group = controller_group(body)
        if group is not None and self.group_queue is not None:
            group_key = ObjectKey(key.namespace, group[0])
            stored = self.indices.one("podgroups", group_key)
            if kw["type"] == "DELETED" or not planning.group_records(stored, body):
                self.group_queue.add(group_key)
        for name in dict.fromkeys(pods):
            pod_key = ObjectKey(key.namespace, name)
            pod = self.indices.one("pods", pod_key)
            if kw["type"] == "DELETED" or not planning.records(pod, body):
                self.queue.add(pod_key)


def _pods_by_template(body: Mapping[str, Any]) -> dict[Any, Any]:
    namespace, name = ObjectKey.of(body)
    return {
        ObjectKey(namespace, c["resourceClaimTemplateName"]): name
        for c in (body.get("spec") or {}).get("resourceClaims") or []
        if c.get("resourceClaimTemplateName")
    }


def _pods_by_recorded_claim(body: Mapping[str, Any]) -> dict[Any, Any]:
    namespace, name = ObjectKey.of(body)
    return {
        ObjectKey(namespace, s["resourceClaimName"]): name
        for s in (body.get("status") or {}).get("resourceClaimStatuses") or []
        if s.get("resourceClaimName")
    }


def _claims_by_owner(body: Mapping[str, Any]) -> dict[Any, Any]:
    namespace, name = ObjectKey.of(body)
    owner = controller_pod(body)
    return {} if owner is None else {(namespace, owner[1]): name}


def _claims_by_group(body: Mapping[str, Any]) -> dict[Any, Any]:
    """Claims a PodGroup controls, by (namespace, PodGroup uid)."""
    namespace, name = ObjectKey.of(body)
    owner = controller_group(body)
    return {} if owner is None else {(namespace, owner[1]): name}


def _pods_by_group(body: Mapping[str, Any]) -> dict[Any, Any]:
    """Pods by the PodGroup they name, (namespace, PodGroup name)."""
    namespace, name = ObjectKey.of(body)
    group = ((body.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    return {ObjectKey(namespace, group): name} if group else {}
