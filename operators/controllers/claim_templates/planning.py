"""What the claim-template controller does for one pod or PodGroup: pure decisions, no I/O.

Conventions are kube-controller-manager's (pkg/controller/resourceclaim), so that whichever
controller creates a pod's claim, the other one adopts it: generateName ``<pod>-<entry>-``
truncated proportionally to 57 characters, annotation ``resource.kubernetes.io/pod-claim-name``,
a controlling owner reference to the pod, and an entry in ``pod.status.resourceClaimStatuses``.

With 1.37's PodGroup claims (GenericWorkload + DRAWorkloadResourceClaims) a PodGroup's template
entries get one claim each, the same way (``<podgroup>-<entry>-``, owned by the PodGroup,
recorded in its ``status.resourceClaimStatuses``); a pod entry equal to one of its group's
(``groups.is_group_claim``) is never created for the pod: the pod records the group's claim.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final

from operators.api.core import Pod
from operators.api.groups import API_VERSION as GROUP_API_VERSION
from operators.api.groups import (
    PodGroup,
    generated_for_group,
    group_name,
    is_for_pod,
    is_group_claim,
)
from operators.api.keys import ObjectKey, controller_group, controller_pod
from operators.api.names import POD_CLAIM_NAME_ANNOTATION
from operators.api.resource import ResourceClaim, ResourceClaimTemplate
from operators.api.templates import claim_from_template
from operators.runtime.actions import Delete, Patch, PostEvent


@dataclasses.dataclass(frozen=True)
class CreateClaim:
    """Create ``claim`` (a JSON body with generateName) for pod entry ``entry``."""

    entry: str
    claim: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class RecordStatus:
    """Record ``{name: entry, resourceClaimName: claim}`` in the pod's status."""

    entry: str
    claim_name: str


@dataclasses.dataclass(frozen=True)
class DeleteDuplicate:
    """Delete a second claim generated for the same entry (a race between controllers)."""

    entry: str
    name: str
    uid: str


@dataclasses.dataclass(frozen=True)
class Warn:
    """A Warning Event on the pod: something a user must fix or know."""

    reason: str
    message: str


Action = CreateClaim | RecordStatus | DeleteDuplicate | Warn


@dataclasses.dataclass(frozen=True)
class CreateGroupClaim:
    """Create ``claim`` (a JSON body with generateName) for PodGroup entry ``entry``."""

    entry: str
    claim: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class RecordGroupStatus:
    """Record ``{name: entry, resourceClaimName: claim}`` in the PodGroup's status."""

    entry: str
    claim_name: str


GroupAction = CreateGroupClaim | RecordGroupStatus | Warn


def is_generated_for(claim: ResourceClaim, pod_uid: str, entry: str | None = None) -> bool:
    """The claim was generated for this pod (and entry): controller owner + annotation."""
    owner = claim.metadata.controller_ref()
    if owner is None or owner.kind != "Pod" or owner.uid != pod_uid:
        return False
    annotation = claim.metadata.annotations.get(POD_CLAIM_NAME_ANNOTATION)
    if annotation is None:
        return False
    return entry is None or annotation == entry


def in_scope(pod: Pod, scheduler_names: Collection[str], all_pods: bool) -> bool:
    """Pods this controller acts on: ours by scheduler name, or all when kcm's is off."""
    return all_pods or (pod.spec.scheduler_name or "default-scheduler") in scheduler_names


def pod_signature(body: Mapping[str, Any] | None) -> tuple[Any, ...] | None:
    """What ``plan_pod`` reads of a pod: an update that leaves it alone (the scheduler's
    conditions, the binding, the kubelet's container states) brings no reconcile."""
    if body is None:
        return None
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    return (
        meta.get("uid"),
        bool(meta.get("deletionTimestamp")),
        spec.get("schedulerName"),
        spec.get("resourceClaims"),
        spec.get("schedulingGroup"),
        status.get("phase"),
        status.get("resourceClaimStatuses"),
    )


def claim_signature(body: Mapping[str, Any] | None) -> tuple[Any, ...] | None:
    """What ``plan_pod`` reads of a claim (who it was generated for, its age, whether it is
    allocated or going): its reservations and devices bring no reconcile of the pod."""
    if body is None:
        return None
    meta = body.get("metadata") or {}
    return (
        meta.get("uid"),
        meta.get("creationTimestamp"),
        bool(meta.get("deletionTimestamp")),
        meta.get("ownerReferences"),
        (meta.get("annotations") or {}).get(POD_CLAIM_NAME_ANNOTATION),
        bool((body.get("status") or {}).get("allocation")),
    )


def records(pod: Mapping[str, Any] | None, claim: Mapping[str, Any]) -> bool:
    """The pod it was generated for (or a member of the PodGroup it was generated for) names
    this claim in its status for its entry: the claim is settled, and its changes matter to no
    plan (a duplicate is another claim)."""
    if pod is None:
        return False
    meta = claim.get("metadata") or {}
    entry = (meta.get("annotations") or {}).get(POD_CLAIM_NAME_ANNOTATION)
    owner = controller_pod(claim)
    group = controller_group(claim)
    pod_meta = pod.get("metadata") or {}
    mine = owner is not None and owner[1] == pod_meta.get("uid")
    ours = group is not None and group[0] == _group_of(pod)
    if entry is None or not (mine or ours):
        return False
    return _names(pod.get("status"), entry, meta.get("name"))


def group_records(group: Mapping[str, Any] | None, claim: Mapping[str, Any]) -> bool:
    """The PodGroup the claim was generated for names it in its status for its entry."""
    if group is None:
        return False
    meta = claim.get("metadata") or {}
    entry = (meta.get("annotations") or {}).get(POD_CLAIM_NAME_ANNOTATION)
    owner = controller_group(claim)
    if entry is None or owner is None or owner[1] != (group.get("metadata") or {}).get("uid"):
        return False
    return _names(group.get("status"), entry, meta.get("name"))


def _group_of(pod: Mapping[str, Any]) -> str | None:
    group = (pod.get("spec") or {}).get("schedulingGroup") or {}
    name: str | None = group.get("podGroupName")
    return name


def _names(status: Mapping[str, Any] | None, entry: str, claim: str | None) -> bool:
    statuses = (status or {}).get("resourceClaimStatuses") or []
    return any(s.get("name") == entry and s.get("resourceClaimName") == claim for s in statuses)


def group_signature(body: Mapping[str, Any] | None) -> tuple[Any, ...] | None:
    """What ``plan_group`` and the member pods' plans read of a PodGroup: the scheduler's
    conditions bring no reconcile."""
    if body is None:
        return None
    meta = body.get("metadata") or {}
    return (
        meta.get("uid"),
        bool(meta.get("deletionTimestamp")),
        (body.get("spec") or {}).get("resourceClaims"),
        (body.get("status") or {}).get("resourceClaimStatuses"),
    )


def _oldest_first(claims: Sequence[ResourceClaim]) -> list[ResourceClaim]:
    return sorted(
        claims, key=lambda c: (c.metadata.creation_timestamp or "", c.metadata.name or "")
    )


def waits_for_group(pod: Pod, group: PodGroup | None, group_claims: bool) -> bool:
    """With PodGroup claims on, a pod naming a PodGroup that does not exist (yet) gets
    nothing, not even its own claims: kube-controller-manager's syncPod fails on the missing
    group before it looks at any claim. The group's arrival brings the pod back."""
    return group_claims and group is None and group_name(pod) is not None


def plan_pod(
    pod: Pod,
    templates: Mapping[str, ResourceClaimTemplate],
    claims: Mapping[str, ResourceClaim],
    group: PodGroup | None = None,
    *,
    group_claims: bool = False,
    terminal_untouched: bool = False,
) -> list[Action]:
    """Decide what to create, record, delete and report for one pod.

    ``templates`` and ``claims`` are the pod namespace's objects by name (``claims``: those
    generated for the pod or its ``group``, and those named in either's status). The claim
    recorded in the pod status wins over any other generated for the same entry; a recorded
    claim owned by someone else is a conflict to report, never to overwrite. With
    ``group_claims`` (1.37's gates), an entry equal to one of its group's is the group's.
    With ``terminal_untouched`` (1.38's syncPod), a pod that has terminated gets nothing, not
    even the record of a claim generated for it before.
    """
    if waits_for_group(pod, group, group_claims) or (terminal_untouched and pod.is_terminated):
        return []
    shared = group if group_claims else None
    actions: list[Action] = []
    pod_uid = pod.metadata.uid or ""
    recorded = {s.name: s.resource_claim_name for s in pod.status.resource_claim_statuses}
    finished = pod.is_terminated or pod.metadata.is_deleting
    generated = [c for c in claims.values() if is_generated_for(c, pod_uid)]

    for entry in pod.spec.resource_claims:
        if not entry.resource_claim_template_name or not entry.name:
            continue
        name = entry.name
        if shared is not None and is_group_claim(entry, shared):
            action = _group_entry(pod, shared, name, recorded, claims)
            if action is not None:
                actions.append(action)
            continue
        mine = _oldest_first(
            [c for c in generated if c.metadata.annotations.get(POD_CLAIM_NAME_ANNOTATION) == name]
        )
        keep: ResourceClaim | None = None
        if name in recorded:
            claim_name = recorded[name]
            if claim_name is None:
                continue  # kube-controller-manager's "no claim needed" marker
            existing = claims.get(claim_name)
            if existing is not None and not is_generated_for(existing, pod_uid, name):
                actions.append(
                    Warn(
                        "ResourceClaimConflict",
                        f"pod {pod.metadata.key}: status names claim {claim_name} for "
                        f"{name}, but that claim was not generated for this pod; "
                        "leaving both unchanged",
                    )
                )
                continue
            keep = existing
        elif mine:
            keep = mine[0]
            actions.append(RecordStatus(name, keep.metadata.name or ""))
        elif not finished:
            template = templates.get(entry.resource_claim_template_name)
            if template is None:
                actions.append(
                    Warn(
                        "FailedResourceClaimCreation",
                        f"pod {pod.metadata.key}, resource claim {name}: "
                        f"ResourceClaimTemplate {entry.resource_claim_template_name} not found "
                        f"in namespace {pod.metadata.namespace}",
                    )
                )
            else:
                actions.append(CreateClaim(name, claim_from_template(pod, name, template)))
            continue
        for duplicate in mine:
            if duplicate is keep or duplicate.is_allocated or duplicate.metadata.is_deleting:
                continue
            actions.append(
                DeleteDuplicate(name, duplicate.metadata.name or "", duplicate.metadata.uid or "")
            )
    return actions


def _group_entry(
    pod: Pod,
    group: PodGroup,
    entry: str,
    recorded: Mapping[str | None, str | None],
    claims: Mapping[str, ResourceClaim],
) -> RecordStatus | None:
    """A pod entry that is its group's: record the group's claim, never create one (upstream's
    handleClaim with BindTo naming the PodGroup). A recorded claim that still exists and was
    made for the pod or its group stays; one that is gone or someone else's gives way to the
    group's, as upstream re-resolves it."""
    if entry in recorded:
        current = recorded[entry]
        if current is None:
            return None  # kube-controller-manager's "no claim needed" marker
        existing = claims.get(current)
        if existing is not None and is_for_pod(existing, pod, True):
            return None
    else:
        current = None
    target = group_claim(group, entry, claims)
    if target is None or target == current:
        return None  # not created yet: the group's status write brings the pod back
    return RecordStatus(entry, target)


def is_generated_for_group(claim: ResourceClaim, group_uid: str, entry: str | None = None) -> bool:
    """The claim was generated for this PodGroup (and entry): controller owner + annotation."""
    owner = generated_for_group(claim)
    if owner is None or owner[1] != group_uid:
        return False
    annotation = claim.metadata.annotations.get(POD_CLAIM_NAME_ANNOTATION)
    if annotation is None:
        return False
    return entry is None or annotation == entry


def group_claim(group: PodGroup, entry: str, claims: Mapping[str, ResourceClaim]) -> str | None:
    """The name of the claim generated for the group's ``entry``: the one its status names
    (the group's own choice, even before the store shows it), else (a crash before the group's
    status write) the oldest it owns with the entry's annotation, as upstream's
    findPodGroupResourceClaim finds it."""
    named = next(
        (s.resource_claim_name for s in group.status.resource_claim_statuses if s.name == entry),
        None,
    )
    if named:
        return named
    uid = group.metadata.uid or ""
    mine = _oldest_first([c for c in claims.values() if is_generated_for_group(c, uid, entry)])
    return mine[0].metadata.name if mine else None


def plan_group(
    group: PodGroup,
    templates: Mapping[str, ResourceClaimTemplate],
    claims: Mapping[str, ResourceClaim],
) -> list[GroupAction]:
    """Decide what to create, record and report for one PodGroup (upstream's syncPodGroup).

    ``templates`` and ``claims`` are the group namespace's objects by name (``claims``: those
    the group owns and those its status names). Per template entry: a recorded claim the group
    still owns is done; otherwise a claim the group owns with the entry's annotation is adopted
    (created before a crash, the status not yet written), else one is created from the
    template. Entries naming a claim directly are the user's. A group being deleted gets
    nothing; duplicates are left to the garbage collector, as upstream leaves them.
    """
    if group.metadata.is_deleting:
        return []
    actions: list[GroupAction] = []
    uid = group.metadata.uid or ""
    recorded = {s.name: s.resource_claim_name for s in group.status.resource_claim_statuses}
    for entry in group.spec.resource_claims:
        template_name = entry.resource_claim_template_name
        if not template_name or not entry.name:
            continue
        name = entry.name
        if name in recorded:
            claim_name = recorded[name]
            if claim_name is None:
                continue  # "no claim needed"
            existing = claims.get(claim_name)
            if existing is not None and is_generated_for_group(existing, uid):
                continue
            # Gone, or no longer the group's: adopt or create another, as upstream does.
        mine = _oldest_first([c for c in claims.values() if is_generated_for_group(c, uid, name)])
        if mine:
            actions.append(RecordGroupStatus(name, mine[0].metadata.name or ""))
            continue
        template = templates.get(template_name)
        if template is None:
            actions.append(
                Warn(
                    "FailedResourceClaimCreation",
                    f"PodGroupResourceClaim {name}: resource claim template "
                    f'"{template_name}": resourceclaimtemplate.resource.k8s.io '
                    f'"{template_name}" not found',
                )
            )
            continue
        actions.append(CreateGroupClaim(name, claim_from_template(group, name, template)))
    return actions


# --- the writes of the actions ---------------------------------------------------------------


def recording(pod: Pod, records: Sequence[RecordStatus]) -> Patch:
    """The claims' names in the pod status, at the pod's resourceVersion: a 409 means the
    pod changed since we read it, and the retry adopts the claim we just created."""
    return Patch(
        kind="Pod",
        key=ObjectKey(pod.metadata.namespace or "", pod.metadata.name or ""),
        patch={
            "status": {
                "resourceClaimStatuses": [
                    {"name": r.entry, "resourceClaimName": r.claim_name} for r in records
                ]
            }
        },
        resource_version=pod.metadata.resource_version or "",
        patch_type="strategic",
        subresource="status",
    )


def group_recording(group: PodGroup, records: Sequence[RecordGroupStatus]) -> Patch:
    """The claims' names in the PodGroup status (a strategic merge by entry name: entries of
    other claims stay), at the group's resourceVersion: a 409 means it changed since we read
    it, and the retry adopts the claim we just created."""
    return Patch(
        kind="PodGroup",
        key=ObjectKey(group.metadata.namespace or "", group.metadata.name or ""),
        patch={
            "status": {
                "resourceClaimStatuses": [
                    {"name": r.entry, "resourceClaimName": r.claim_name} for r in records
                ]
            }
        },
        resource_version=group.metadata.resource_version or "",
        patch_type="strategic",
        subresource="status",
    )


def group_warning(group: PodGroup, action: Warn) -> PostEvent:
    obj = {**group.dump(), "apiVersion": GROUP_API_VERSION, "kind": "PodGroup"}
    return PostEvent(obj=obj, type="Warning", reason=action.reason, message=action.message)


def deletion(pod: Pod, action: DeleteDuplicate) -> Delete:
    return Delete(
        kind="ResourceClaim",
        key=ObjectKey(pod.metadata.namespace or "", action.name),
        uid=action.uid,
    )


def warning(pod: Pod, action: Warn) -> PostEvent:
    return PostEvent(obj=pod.dump(), type="Warning", reason=action.reason, message=action.message)


#: What the ResourceQuota admission plugin says when a create would exceed a quota.
EXCEEDED_QUOTA: Final = "exceeded quota: "


def over_quota(message: str) -> bool:
    """The API server refused a create for a ResourceQuota of its namespace."""
    return EXCEEDED_QUOTA in message


def refused(action: CreateClaim | CreateGroupClaim, message: str) -> Warn:
    """The Event on a pod (or PodGroup) whose claim the API server refused, as
    kube-controller-manager's resourceclaim controller words it ("PodResourceClaim E: create
    ResourceClaim N: ...", "PodGroupResourceClaim E: ..." for a group's; N the body's name:
    empty, as the claim is created with a generateName)."""
    name = (action.claim.get("metadata") or {}).get("name") or ""
    owner = "PodGroupResourceClaim" if isinstance(action, CreateGroupClaim) else "PodResourceClaim"
    return Warn(
        "FailedResourceClaimCreation",
        f"{owner} {action.entry}: create ResourceClaim {name}: {message}",
    )
