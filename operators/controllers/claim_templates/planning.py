"""What the claim-template controller does for one pod: pure decisions, no I/O.

Conventions are kube-controller-manager's (pkg/controller/resourceclaim), so that whichever
controller creates a pod's claim, the other one adopts it: generateName ``<pod>-<entry>-``
truncated proportionally to 57 characters, annotation ``resource.kubernetes.io/pod-claim-name``,
a controlling owner reference to the pod, and an entry in ``pod.status.resourceClaimStatuses``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from operators.api.core import Pod
from operators.api.keys import ObjectKey, controller_pod
from operators.api.names import POD_CLAIM_NAME_ANNOTATION
from operators.api.resource import ResourceClaim, ResourceClaimTemplate
from operators.api.templates import claim_from_template
from operators.runtime.actions import Create, Delete, Patch, PostEvent


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
    """The pod it was generated for names this claim in its status for its entry: the claim
    is settled, and its changes matter to no plan (a duplicate is another claim)."""
    if pod is None:
        return False
    meta = claim.get("metadata") or {}
    entry = (meta.get("annotations") or {}).get(POD_CLAIM_NAME_ANNOTATION)
    owner = controller_pod(claim)
    if entry is None or owner is None or owner[1] != (pod.get("metadata") or {}).get("uid"):
        return False
    statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or []
    return any(
        s.get("name") == entry and s.get("resourceClaimName") == meta.get("name") for s in statuses
    )


def _oldest_first(claims: Sequence[ResourceClaim]) -> list[ResourceClaim]:
    return sorted(
        claims, key=lambda c: (c.metadata.creation_timestamp or "", c.metadata.name or "")
    )


def plan_pod(
    pod: Pod,
    templates: Mapping[str, ResourceClaimTemplate],
    claims: Mapping[str, ResourceClaim],
) -> list[Action]:
    """Decide what to create, record, delete and report for one pod.

    ``templates`` and ``claims`` are the pod namespace's objects by name. The claim recorded in
    the pod status wins over any other generated for the same entry; a recorded claim owned by
    someone else is a conflict to report, never to overwrite.
    """
    actions: list[Action] = []
    pod_uid = pod.metadata.uid or ""
    recorded = {s.name: s.resource_claim_name for s in pod.status.resource_claim_statuses}
    finished = pod.is_terminated or pod.metadata.is_deleting
    generated = [c for c in claims.values() if is_generated_for(c, pod_uid)]

    for entry in pod.spec.resource_claims:
        if not entry.resource_claim_template_name or not entry.name:
            continue
        name = entry.name
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


# --- the writes of the actions ---------------------------------------------------------------


def creation(action: CreateClaim) -> Create:
    return Create(body=action.claim)


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


def deletion(pod: Pod, action: DeleteDuplicate) -> Delete:
    return Delete(
        kind="ResourceClaim",
        key=ObjectKey(pod.metadata.namespace or "", action.name),
        uid=action.uid,
    )


def warning(pod: Pod, action: Warn) -> PostEvent:
    return PostEvent(obj=pod.dump(), type="Warning", reason=action.reason, message=action.message)
