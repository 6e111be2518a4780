"""Who holds a ResourceClaim, and which holders are stale: the reservation cleanup's rules, pure.

Behaviour follows kube-controller-manager's resourceclaim controller: stale pod entries leave
``status.reservedFor``; when that removes the last consumer, or a claim being deleted has no
consumer, the allocation (and with it ``status.devices``) is cleared in the same write; a claim
allocated but reserved by nobody for another reason is the scheduler's business. Generated
claims go when their pod is gone or done; the delete-protection finalizer goes once a claim
being deleted is no longer allocated.

With 1.37's PodGroup claims (DRAWorkloadResourceClaims) a PodGroup entry (``scheduling.k8s.io``
``podgroups``) leaves only when that PodGroup is gone or replaced (another uid): its pods
finishing never removes it. A claim a PodGroup controls is never deleted here (the garbage
collector follows its owner reference). Off, PodGroup entries stay, as any consumer the cleanup
does not know.

Here, not in the reservation cleanup's package, because the scheduler frees a preemption
victim's claims by the same rules (``plan_claim``) and keeps the same pod summary: neither
controller imports the other. The writes a plan makes are ``runtime.claim_writes``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Protocol

from operators.api.groups import SCHEDULING_GROUP
from operators.api.keys import ObjectKey, controller_pod
from operators.api.names import DELETE_PROTECTION_FINALIZER, TERMINAL_PHASES
from operators.api.resource import ResourceClaim


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


def pod_summary(body: Mapping[str, Any]) -> dict[Any, Any]:
    """What the plan needs of a pod, kept small: every pod of the cluster is in such a store
    (an index entry by (namespace, name), read back with ``PodInfo.from_body``)."""
    meta = body.get("metadata") or {}
    return {
        ObjectKey.of(body): {
            "metadata": {
                "uid": meta.get("uid"),
                "deletionTimestamp": meta.get("deletionTimestamp"),
            },
            "spec": {"nodeName": (body.get("spec") or {}).get("nodeName")},
            "status": {"phase": (body.get("status") or {}).get("phase")},
        }
    }


@dataclasses.dataclass(frozen=True)
class GroupInfo:
    """What the cleanup needs to know of a PodGroup (from the cache or a live read)."""

    uid: str

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> GroupInfo:
        return cls(uid=(body.get("metadata") or {}).get("uid") or "")


def group_summary(body: Mapping[str, Any]) -> dict[Any, Any]:
    """What the plan needs of a PodGroup, kept small (read back with ``GroupInfo.from_body``)."""
    return {ObjectKey.of(body): {"metadata": {"uid": (body.get("metadata") or {}).get("uid")}}}


@dataclasses.dataclass(frozen=True)
class Removal:
    consumer: Consumer
    # PodNotFound, PodReplaced, PodDone, PodDeletedUnscheduled, PodGroupNotFound,
    # PodGroupReplaced
    reason: str


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


class ConsumerRef(Protocol):
    """What the plan reads of a ``reservedFor`` entry (the model's, or ``Consumer``)."""

    @property
    def api_group(self) -> str | None: ...
    @property
    def resource(self) -> str | None: ...
    @property
    def name(self) -> str | None: ...
    @property
    def uid(self) -> str | None: ...


@dataclasses.dataclass(frozen=True)
class Consumer:
    """A ``reservedFor`` entry read from the raw claim (the model is parsed only to write)."""

    api_group: str
    resource: str | None
    name: str
    uid: str


@dataclasses.dataclass(frozen=True)
class ClaimFacts:
    """Everything ``plan_claim`` reads of a claim (its pods aside), taken from the raw body:
    the cleanup decides without parsing the whole claim, which it does only to write."""

    uid: str | None
    consumers: tuple[Consumer, ...]
    allocated: bool
    deleting: bool
    protected: bool  # the delete-protection finalizer is on
    owner: tuple[str, str] | None  # (pod name, pod uid) of a claim a pod controls

    @classmethod
    def of(cls, claim: ResourceClaim | Mapping[str, Any]) -> ClaimFacts:
        body = claim.dump() if isinstance(claim, ResourceClaim) else claim
        meta = body.get("metadata") or {}
        status = body.get("status") or {}
        return cls(
            uid=meta.get("uid"),
            consumers=tuple(
                Consumer(
                    r.get("apiGroup") or "",
                    r.get("resource"),
                    r.get("name") or "",
                    r.get("uid") or "",
                )
                for r in status.get("reservedFor") or []
            ),
            allocated=status.get("allocation") is not None,
            deleting=meta.get("deletionTimestamp") is not None,
            protected=DELETE_PROTECTION_FINALIZER in (meta.get("finalizers") or []),
            # kube-controller-manager's owningPod: any claim a pod controls, the claims of its
            # templates and its special claim for extended resources (KEP-5004) alike.
            owner=controller_pod(body),
        )

    def pods_to_look_up(self) -> set[str]:
        names = {r.name for r in self.consumers if is_pod_consumer(r)}
        if self.owner is not None:
            names.add(self.owner[0])
        return names

    def groups_to_look_up(self) -> set[str]:
        """Names of the PodGroups that hold the claim (with PodGroup claims on)."""
        return {r.name for r in self.consumers if is_group_consumer(r)}


def is_pod_consumer(ref: ConsumerRef) -> bool:
    return (ref.api_group or "") == "" and ref.resource == "pods"


def is_group_consumer(ref: ConsumerRef) -> bool:
    return ref.api_group == SCHEDULING_GROUP and ref.resource == "podgroups"


def stale_reason(ref: ConsumerRef, pod: PodInfo | None) -> str | None:
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


def group_stale_reason(ref: ConsumerRef, group: GroupInfo | None) -> str | None:
    """Why a PodGroup entry no longer holds the claim (gone, or replaced by another of the
    same name), or None if it still does: upstream's rule, which ignores pods and phases."""
    if group is None:
        return "PodGroupNotFound"
    if group.uid != ref.uid:
        return "PodGroupReplaced"
    return None


def generated_owner(claim: ResourceClaim) -> tuple[str, str] | None:
    """(pod name, pod uid) when the claim was generated for a pod from a template."""
    return ClaimFacts.of(claim).owner


def pods_to_look_up(claim: ResourceClaim | ClaimFacts) -> set[str]:
    """Names of the pods whose state the plan depends on (consumers and the owner)."""
    facts = claim if isinstance(claim, ClaimFacts) else ClaimFacts.of(claim)
    return facts.pods_to_look_up()


def plan_claim(
    claim: ResourceClaim | ClaimFacts,
    pods: Mapping[str, PodInfo | None],
    groups: Mapping[str, GroupInfo | None] | None = None,
) -> ClaimPlan:
    """Decide the writes for ``claim``; ``pods`` holds every name of ``pods_to_look_up``.

    ``groups``: with PodGroup claims on, every name of ``groups_to_look_up`` (None: gone);
    None when they are off, and PodGroup entries are kept.
    """
    facts = claim if isinstance(claim, ClaimFacts) else ClaimFacts.of(claim)
    removals = tuple(
        Removal(ref, reason)
        for ref in facts.consumers
        if (reason := _stale(ref, pods, groups)) is not None
    )
    remaining = len(facts.consumers) - len(removals)
    deleting = facts.deleting
    deallocate = facts.allocated and remaining == 0 and (bool(removals) or deleting)
    allocated_after = facts.allocated and not deallocate

    delete = False
    owner = facts.owner
    if owner is not None and not deleting and remaining == 0:
        pod = pods.get(owner[0])
        delete = pod is None or pod.uid != owner[1] or pod.phase in TERMINAL_PHASES

    remove_finalizer = deleting and not allocated_after and facts.protected
    return ClaimPlan(removals, deallocate, remove_finalizer, delete)


def _stale(
    ref: Consumer, pods: Mapping[str, PodInfo | None], groups: Mapping[str, GroupInfo | None] | None
) -> str | None:
    if is_pod_consumer(ref):
        return stale_reason(ref, pods.get(ref.name))
    if groups is not None and is_group_consumer(ref):
        return group_stale_reason(ref, groups.get(ref.name))
    return None  # a consumer the cleanup does not know: kept
