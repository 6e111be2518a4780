"""What the reservation cleanup does for one claim: pure decisions, no I/O.

Behaviour follows kube-controller-manager's resourceclaim controller: stale pod entries leave
``status.reservedFor``; when that removes the last consumer, or a claim being deleted has no
consumer, the allocation (and with it ``status.devices``) is cleared in the same write; a claim
allocated but reserved by nobody for another reason is the scheduler's business. Generated
claims go when their pod is gone or done; the delete-protection finalizer goes once a claim
being deleted is no longer allocated.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from operators.api.resource import ResourceClaim, ResourceClaimConsumerReference
from operators.controllers.claim_templates.planning import (
    POD_CLAIM_NAME_ANNOTATION,
    TERMINAL_PHASES,
)

DELETE_PROTECTION_FINALIZER = "resource.kubernetes.io/delete-protection"


@dataclasses.dataclass(frozen=True)
class PodInfo:
    """What the cleanup needs to know of a pod (from the cache or a live read)."""

    uid: str
    phase: str | None = None
    deleting: bool = False
    node_name: str | None = None

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> PodInfo:
        meta = body.get("metadata") or {}
        return cls(
            uid=meta.get("uid") or "",
            phase=(body.get("status") or {}).get("phase"),
            deleting=bool(meta.get("deletionTimestamp")),
            node_name=(body.get("spec") or {}).get("nodeName"),
        )


@dataclasses.dataclass(frozen=True)
class Removal:
    consumer: ResourceClaimConsumerReference
    reason: str  # PodNotFound, PodReplaced, PodDone, PodDeletedUnscheduled


@dataclasses.dataclass(frozen=True)
class ClaimPlan:
    """The writes for one claim, in the order they must happen."""

    removals: tuple[Removal, ...] = ()
    deallocate: bool = False
    remove_finalizer: bool = False
    delete: bool = False

    @property
    def status_write(self) -> bool:
        return bool(self.removals) or self.deallocate

    @property
    def idle(self) -> bool:
        return not (self.status_write or self.remove_finalizer or self.delete)


def is_pod_consumer(ref: ResourceClaimConsumerReference) -> bool:
    return (ref.api_group or "") == "" and ref.resource == "pods"


def stale_reason(ref: ResourceClaimConsumerReference, pod: PodInfo | None) -> str | None:
    """Why a pod consumer entry no longer holds the claim, or None if it still does."""
    if pod is None:
        return "PodNotFound"
    if pod.uid != ref.uid:
        return "PodReplaced"
    if pod.phase in TERMINAL_PHASES:
        return "PodDone"
    if pod.deleting and not pod.node_name:
        return "PodDeletedUnscheduled"
    return None


def generated_owner(claim: ResourceClaim) -> tuple[str, str] | None:
    """(pod name, pod uid) when the claim was generated for a pod from a template."""
    owner = claim.metadata.controller_ref()
    if owner is None or owner.kind != "Pod" or owner.api_version != "v1":
        return None
    if POD_CLAIM_NAME_ANNOTATION not in claim.metadata.annotations:
        return None
    return owner.name or "", owner.uid or ""


def pods_to_look_up(claim: ResourceClaim) -> set[str]:
    """Names of the pods whose state the plan depends on (consumers and the owner)."""
    names = {r.name or "" for r in claim.status.reserved_for if is_pod_consumer(r)}
    owner = generated_owner(claim)
    if owner is not None:
        names.add(owner[0])
    return names


def plan_claim(claim: ResourceClaim, pods: Mapping[str, PodInfo | None]) -> ClaimPlan:
    """Decide the writes for ``claim``; ``pods`` holds every name of ``pods_to_look_up``."""
    removals = tuple(
        Removal(ref, reason)
        for ref in claim.status.reserved_for
        if is_pod_consumer(ref)
        and (reason := stale_reason(ref, pods.get(ref.name or ""))) is not None
    )
    remaining = len(claim.status.reserved_for) - len(removals)
    deleting = claim.metadata.is_deleting
    deallocate = claim.is_allocated and remaining == 0 and (bool(removals) or deleting)
    allocated_after = claim.is_allocated and not deallocate

    delete = False
    owner = generated_owner(claim)
    if owner is not None and not deleting and remaining == 0:
        pod = pods.get(owner[0])
        delete = pod is None or pod.uid != owner[1] or pod.phase in TERMINAL_PHASES

    remove_finalizer = (
        deleting
        and not allocated_after
        and DELETE_PROTECTION_FINALIZER in claim.metadata.finalizers
    )
    return ClaimPlan(removals, deallocate, remove_finalizer, delete)


def status_after(claim: ResourceClaim, plan: ClaimPlan) -> dict[str, Any]:
    """The claim's JSON with the plan's status applied (for a PUT with its resourceVersion).

    Clearing the allocation clears ``status.devices`` too: the API rejects device statuses of
    devices that are no longer allocated.
    """
    body = claim.dump()
    status = dict(body.get("status") or {})
    removed = {id(r.consumer) for r in plan.removals}
    kept = [r.dump() for r in claim.status.reserved_for if id(r) not in removed]
    if kept:
        status["reservedFor"] = kept
    else:
        status.pop("reservedFor", None)
    if plan.deallocate:
        status.pop("allocation", None)
        status.pop("devices", None)
    body["status"] = status
    return body
