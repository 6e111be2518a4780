"""The scheduler's writes, decided without I/O: what each claim's status and each pod become.

Every function takes objects as the scheduler knows them (its cache, its in-flight ledger, or
a fresh read) and returns typed writes (``operators.runtime.actions``) that carry their
preconditions: a claim status is written with the resourceVersion it was computed from, so a
decision made on a stale view fails with a 409 instead of overwriting someone else's write.

The rules that keep devices from being given twice or held for nobody live here:

- ``reservations``: Reserve, the allocation (if new) and the pod's ``reservedFor`` entry in
  one status write per claim (PreBind); the delete-protection finalizer goes on first.
- ``release``: after a failed attempt, take back exactly what it wrote, on the claim as it is
  *now*, and only while no bound pod holds the claim (``after_bind_error`` decides that).
- ``binding_failed``: KEP-5007's failure or timeout of binding conditions.
- ``double_allocation_victim``: which of two claims holding one device gives it back.
- preemption (``disruption_target``, ``eviction``, ``victim_claim_release``): the victim's
  condition, its deletion with its grace period, and its claims released once it is gone,
  by the reservation cleanup's own rules.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from operators.api import consumers
from operators.api.claim_status import edited_status
from operators.api.core import Pod
from operators.api.groups import CompositePodGroup, PodGroup
from operators.api.keys import ObjectKey
from operators.api.names import DELETE_PROTECTION_FINALIZER
from operators.api.resource import AllocationResult, ResourceClaim
from operators.api.timestamps import format_time
from operators.runtime import claim_writes
from operators.runtime.actions import (
    NO_PRECONDITION,
    Bind,
    Create,
    Delete,
    Patch,
    PostEvent,
    ReplaceStatus,
)
from operators.scheduling.node_allocatable import (
    NODE_ALLOCATABLE_FIELD,
    Statuses,
    dump_statuses,
)
from operators.scheduling.plugins import volumebinding
from operators.scheduling.preemption import DISRUPTION_TARGET, PREEMPTION_BY_SCHEDULER
from operators.scheduling.reserve import reserved_claims

WARNING = "Warning"
NORMAL = "Normal"


def pod_key(pod: Pod) -> ObjectKey:
    return ObjectKey(pod.metadata.namespace or "", pod.metadata.name or "")


def claim_key(claim: ResourceClaim) -> ObjectKey:
    return ObjectKey(claim.metadata.namespace or "", claim.metadata.name or "")


# --- Reserve and PreBind ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Reservation:
    """One claim of a binding attempt: as the cache showed it, and as it will be written."""

    cached: ResourceClaim
    target: ResourceClaim
    allocation: AllocationResult | None  # the allocation this attempt makes, if it makes one
    create: bool = False  # the pod's special claim for extended resources, not created yet

    @property
    def needs_conditions(self) -> bool:
        return any(r.binding_conditions for r in self.target.allocated_results())


def reservations(
    pod: Pod,
    claims: Sequence[ResourceClaim],
    allocations: Mapping[str, AllocationResult],
    now: datetime.datetime,
    *,
    creating: str | None = None,
    group: PodGroup | None = None,
    shared: Collection[str] = (),
) -> list[Reservation]:
    """The claims this attempt writes (``scheduling.reserve``), in order.
    ``creating``: the key of the claim to create first (extended resources, KEP-5004)."""
    return [
        Reservation(claim, target, written, create=claim.key == creating)
        for claim, target, written in reserved_claims(
            pod, claims, allocations, now, group=group, shared=shared
        )
    ]


def creation(claim: ResourceClaim) -> Create:
    """PreBind for the special claim: created with the delete-protection finalizer (its
    allocation follows in the status write)."""
    body = claim.dump()
    body.pop("status", None)
    body["metadata"]["finalizers"] = [DELETE_PROTECTION_FINALIZER]
    return Create(body=body)


def extended_status(pod: Pod, status: Mapping[str, Any]) -> Patch | None:
    """PreBind, after the claims: ``pod.status.extendedResourceClaimStatus``, which the
    kubelet prepares the devices from (None: the pod says so already)."""
    shown = pod.status.extended_resource_claim_status
    if shown is not None and shown.dump() == status:
        return None
    return Patch(
        kind="Pod",
        key=pod_key(pod),
        # The uid pins the write to this pod (a replacement of the same name is refused).
        patch={
            "metadata": {"uid": pod.metadata.uid},
            "status": {"extendedResourceClaimStatus": status},
        },
        # Only the scheduler writes this field: a version would refuse it for each status
        # update of the kubelet's, and the uid already pins the pod.
        resource_version=NO_PRECONDITION,
        subresource="status",
    )


def node_allocatable_status(pod: Pod, statuses: Statuses, extended: Patch | None) -> Patch:
    """PreBind, after the claims (upstream's patchNodeAllocatableResourceClaimStatus):
    ``pod.status.nodeAllocatableResourceClaimStatuses``, which the kubelet sizes cgroups from
    and the scheduler counts on the node; in one write with the pod's extended-resource
    status (``extended``) when there is one. Written even when the pod shows it already, as
    upstream (its assumed pod always differs from the base it patches against)."""
    body = dict(extended.patch["status"]) if extended is not None else {}
    body[NODE_ALLOCATABLE_FIELD] = dump_statuses(statuses)
    return Patch(
        kind="Pod",
        key=pod_key(pod),
        patch={"metadata": {"uid": pod.metadata.uid}, "status": body},
        resource_version=NO_PRECONDITION,
        subresource="status",
    )


def writes_node_allocatable(status: Patch | None) -> bool:
    """The binding cycle's pod status write carries node-allocatable statuses (Unreserve
    clears them)."""
    return status is not None and NODE_ALLOCATABLE_FIELD in (status.patch.get("status") or {})


def clear_node_allocatable(pod: Pod) -> Patch:
    """Unreserve (upstream's clearNodeAllocatableResourceClaimStatus): an explicit empty
    list, so that a client that does not know the field is not mistaken for a clear; the uid
    pins the pod."""
    return Patch(
        kind="Pod",
        key=pod_key(pod),
        patch={"metadata": {"uid": pod.metadata.uid}, "status": {NODE_ALLOCATABLE_FIELD: []}},
        resource_version=NO_PRECONDITION,
        subresource="status",
    )


def finalizer(claim: ResourceClaim) -> Patch | None:
    """PreBind, first step: the delete-protection finalizer, unless the claim has it."""
    if DELETE_PROTECTION_FINALIZER in claim.metadata.finalizers:
        return None
    return Patch(
        kind="ResourceClaim",
        key=claim_key(claim),
        patch={
            "metadata": {"finalizers": [*claim.metadata.finalizers, DELETE_PROTECTION_FINALIZER]}
        },
        resource_version=claim.metadata.resource_version or "",
    )


def status_write(reservation: Reservation, resource_version: str | None) -> ReplaceStatus:
    """PreBind, second step: allocation and reservation in one write, at ``resource_version``
    (the claim's version after the finalizer patch, or as cached)."""
    body = reservation.target.dump()
    body["metadata"] = {**body["metadata"], "resourceVersion": resource_version}
    return ReplaceStatus(body=body)


def volume_binding(binding: volumebinding.Binding) -> Patch:
    """VolumeBinding's PreBind for a PV the cycle matched: its claimRef on the claim, on the
    PV's version the cycle saw (another binding meanwhile fails with a 409)."""
    pv = binding.pv
    return Patch(
        kind="PersistentVolume",
        key=ObjectKey("", pv.metadata.name or ""),
        patch=volumebinding.static_binding_patch(pv, binding.pvc),
        resource_version=pv.metadata.resource_version or "",
    )


def volume_provisioning(provision: volumebinding.Provision, node: str) -> Patch:
    """VolumeBinding's PreBind for a claim to provision: the node it is for, which the
    provisioner reads, on the claim's version the cycle saw."""
    pvc = provision.pvc
    return Patch(
        kind="PersistentVolumeClaim",
        key=ObjectKey(pvc.metadata.namespace or "", pvc.metadata.name or ""),
        patch=volumebinding.provisioning_patch(pvc, node),
        resource_version=pvc.metadata.resource_version or "",
    )


def bind(pod: Pod, node: str) -> Bind:
    return Bind(pod=pod_key(pod), uid=pod.metadata.uid or "", node=node)


# --- after a failed attempt ------------------------------------------------------------------


class PodState(enum.Enum):
    """Where a pod is after our bind failed, read from the API server (the truth)."""

    BOUND_HERE = "bound to the node of the attempt"
    BOUND_ELSEWHERE = "bound to another node"
    GONE = "deleted or replaced"
    UNBOUND = "not bound"


def after_bind_error(pod_now: Pod | None, uid: str, node: str) -> PodState:
    """Decide from the pod as it is, never from the error: a 409 "already assigned" or a
    lost answer may well mean the bind (ours or another scheduler's) happened."""
    if pod_now is None or pod_now.metadata.uid != uid:
        return PodState.GONE
    bound = pod_now.spec.node_name
    if not bound:
        return PodState.UNBOUND
    return PodState.BOUND_HERE if bound == node else PodState.BOUND_ELSEWHERE


def release(
    current: ResourceClaim, pod_uid: str, allocation: AllocationResult | None
) -> ReplaceStatus | None:
    """Take back what one attempt wrote on ``current`` (the claim as it is now).

    The pod's reservation goes; the allocation goes too if it is the one the attempt wrote
    (``allocation``) and nobody else is reserved. A claim changed since (reallocated,
    reserved by others) keeps what is not ours. None: nothing of ours is left.
    The caller must not release at all while a bound, non-terminal pod holds the claim.
    """
    ours = current.is_reserved_for(pod_uid)
    others = current.reserved_for_uids() - {pod_uid}
    same_allocation = (
        allocation is not None
        and current.status.allocation is not None
        and current.status.allocation.dump() == allocation.dump()
    )
    deallocate = same_allocation and not others
    if not ours and not deallocate:
        return None
    return ReplaceStatus(body=edited_status(current, unreserve=(pod_uid,), deallocate=deallocate))


def binding_failed(released: ResourceClaim) -> ReplaceStatus:
    """KEP-5007: binding conditions failed or timed out. The claim as the attempt's
    preparation left it (``attempt.undo_reservation``: the pod's reservation gone and, when
    nobody else holds the claim, the allocation and device statuses with it), in one write
    at the version it was read."""
    return ReplaceStatus(body=released.dump())


def nominate(pod: Pod, node: str | None) -> Patch:
    """The node of a failed binding attempt (the device is there now), or of a preemption:
    the retry prefers it. None clears it (preemption no longer helps, as upstream)."""
    return Patch(
        kind="Pod",
        key=pod_key(pod),
        patch={"status": {"nominatedNodeName": node}},
        resource_version=NO_PRECONDITION,  # a hint in our own field: last writer wins, as upstream
        subresource="status",
    )


# --- unschedulable ---------------------------------------------------------------------------


def deallocation(claim: ResourceClaim) -> ReplaceStatus:
    """Reservation, allocation and device statuses cleared in one write."""
    uids = claim.reserved_for_uids()
    return ReplaceStatus(body=edited_status(claim, unreserve=uids, deallocate=True))


def unschedulable(
    pod: Pod, message: str, now: datetime.datetime, reason: str = "Unschedulable"
) -> Patch:
    """PodScheduled=False with kube-scheduler's reason, as ``kubectl describe`` shows it:
    Unschedulable when no node fits, SchedulerError when an attempt failed (a write refused)."""
    return Patch(
        kind="Pod",
        key=pod_key(pod),
        patch={
            "status": {
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": reason,
                        "message": message,
                        "lastTransitionTime": format_time(now),
                        "lastProbeTime": None,
                    }
                ]
            }
        },
        # A condition of our own: the last writer wins, as kube-scheduler's.
        resource_version=NO_PRECONDITION,
        patch_type="strategic",
        subresource="status",
    )


def group_condition(
    group: PodGroup | CompositePodGroup,
    type_: str,
    status: str,
    reason: str,
    message: str,
    now: datetime.datetime,
) -> Patch | None:
    """A PodGroup condition as kube-scheduler 1.37 writes it (a strategic patch of the status):
    None when it says so already, or when it is True and would go back (never, upstream)."""
    shown = group.condition(type_)
    if shown is not None and shown.status == "True" and status != "True":
        return None
    if (
        shown is not None
        and (shown.status, shown.reason, shown.message or "") == (status, reason, message)
        and shown.observed_generation == group.metadata.generation
    ):
        return None
    changed = shown is None or shown.status != status
    return Patch(
        kind=group.kind or "PodGroup",
        key=ObjectKey(group.metadata.namespace or "", group.metadata.name or ""),
        patch={
            "status": {
                "conditions": [
                    {
                        "type": type_,
                        "status": status,
                        "reason": reason,
                        "message": message,
                        "observedGeneration": group.metadata.generation,
                        "lastTransitionTime": (
                            format_time(now)
                            if changed or shown is None
                            else shown.last_transition_time
                        ),
                    }
                ]
            }
        },
        resource_version=NO_PRECONDITION,  # a condition of our own, keyed by its type
        patch_type="strategic",
        subresource="status",
    )


def failed_scheduling(pod: Pod, message: str) -> PostEvent:
    return PostEvent(obj=pod.dump(), type=WARNING, reason="FailedScheduling", message=message)


# --- preemption ------------------------------------------------------------------------------

# Reasons of the reservation cleanup that mean the pod is gone or done. Its other rule (a pod
# being deleted before it was ever bound) is not the scheduler's: a victim is bound, and a
# deletionTimestamp alone never frees devices here.
GONE = frozenset({"PodNotFound", "PodReplaced", "PodDone"})


def disruption_target(victim: Pod, scheduler_name: str, now: datetime.datetime) -> Patch:
    """kube-scheduler's condition on a victim before it is deleted (keyed by type: writing it
    again changes nothing)."""
    return Patch(
        kind="Pod",
        key=pod_key(victim),
        patch={
            "status": {
                "conditions": [
                    {
                        "type": DISRUPTION_TARGET,
                        "status": "True",
                        "reason": PREEMPTION_BY_SCHEDULER,
                        "message": f"{scheduler_name}: preempting to accommodate a higher "
                        "priority pod",
                        "lastTransitionTime": format_time(now),
                    }
                ]
            }
        },
        # A condition of our own, keyed by its type: writing it again changes nothing.
        resource_version=NO_PRECONDITION,
        patch_type="strategic",
        subresource="status",
    )


def eviction(victim: Pod) -> Delete:
    """The victim (this uid only) deleted with its own grace period: never forced."""
    return Delete(kind="Pod", key=pod_key(victim), uid=victim.metadata.uid or "")


def preempted_event(victim: Pod, by: str, node: str) -> PostEvent:
    """Upstream's Event on a victim: "Preempted by pod UID on node N", or for a pod group
    "Preempted by podgroup UID on node cluster" (its domain)."""
    return PostEvent(
        obj=victim.dump(),
        type=NORMAL,
        reason="Preempted",
        message=f"Preempted by {by} on node {node}",
    )


def preempting_event(preemptor: Mapping[str, Any], description: str) -> PostEvent:
    return PostEvent(obj=dict(preemptor), type=NORMAL, reason="Preempting", message=description)


def victim_claim_release(
    claim: ResourceClaim, pods: Mapping[str, consumers.PodInfo | None]
) -> ReplaceStatus | None:
    """A claim whose consumers are all gone (deleted, replaced, or Succeeded/Failed): the
    reservation cleanup's write (remove the reservations, then deallocate, in one status
    write), done by the scheduler at once so the preemptor need not wait for the cleanup's
    pass. ``pods`` holds every name the cleanup's ``pods_to_look_up`` gives. None: not (yet)
    free."""
    plan = consumers.plan_claim(claim, pods)
    if not plan.deallocate or any(r.reason not in GONE for r in plan.removals):
        return None
    return claim_writes.status_write(claim, plan)


# --- repair ----------------------------------------------------------------------------------


def double_allocation_victim(
    holders: Sequence[ResourceClaim], bound: Mapping[str, bool]
) -> ResourceClaim | None:
    """Of claims holding one device exclusively, the one to deallocate: reserved only by pods
    that are not bound (``bound`` maps pod uid -> bound and running), newest allocation first.
    None when every holder is in use by a bound pod: no write can fix that safely."""
    candidates = [
        c for c in holders if not any(bound.get(uid, False) for uid in c.reserved_for_uids())
    ]
    if not candidates:
        return None
    return max(candidates, key=_allocated_at)


def _allocated_at(claim: ResourceClaim) -> tuple[str, int]:
    allocation = claim.status.allocation
    stamp = (allocation.allocation_timestamp if allocation is not None else None) or ""
    version = claim.metadata.resource_version or ""
    return stamp, int(version) if version.isdigit() else 0


def double_allocation_event(claim: ResourceClaim, device: str, others: Sequence[str]) -> PostEvent:
    return PostEvent(
        obj=claim.dump(),
        type=WARNING,
        reason="DeviceAllocatedTwice",
        message=(
            f"device {device} was also allocated to {', '.join(others)}; this claim's pods "
            "were not bound yet, so its allocation was cleared and they will be scheduled again"
        ),
    )
