"""Workload and PodGroup (``scheduling.k8s.io/v1beta1``, 1.37's GenericWorkload) and the rules
that tie a pod's claims to its PodGroup's (DRAWorkloadResourceClaims).

Upstream's helpers in ``k8s.io/dynamic-resource-allocation/resourceclaim`` (v0.37.2) decide, for
the scheduler, kube-controller-manager and the kubelet alike, which claims a pod may use and in
whose name a claim is reserved; the same three rules live here once, for kopf-dra's scheduler,
claim controllers and ``simulate``:

- ``bind_to``: a pod claim whose ``name``, ``resourceClaimName`` and ``resourceClaimTemplateName``
  all equal one of its PodGroup's ``spec.resourceClaims`` is the group's: reserved for the
  PodGroup (one ``reservedFor`` entry for every member), else for the pod;
- ``is_for_pod``: a template claim was made for the pod, or (group claims on) for its PodGroup;
- ``is_reserved_for_pod``: reserved for the pod's uid, or (group claims on) for its PodGroup by
  name (a pod does not know its group's uid).
"""

from __future__ import annotations

from typing import Final

from pydantic import Field

from operators.api.base import KubeModel
from operators.api.core import Pod, PodResourceClaim
from operators.api.meta import Condition, ObjectMeta
from operators.api.resource import ResourceClaim

SCHEDULING_GROUP: Final = "scheduling.k8s.io"
API_VERSION: Final = "scheduling.k8s.io/v1beta1"
#: Set by the scheduler once (never back to False once True).
INITIALLY_SCHEDULED: Final = "PodGroupInitiallyScheduled"
#: The reason upstream's scheduler writes with INITIALLY_SCHEDULED=True.
SCHEDULED_REASON: Final = "Scheduled"
#: 1.38's condition on a CompositePodGroup (1.37 writes none there).
COMPOSITE_INITIALLY_SCHEDULED: Final = "CompositePodGroupInitiallyScheduled"
#: kube-scheduler 1.37's GangScheduling Permit timeout (a constant there, a flag here).
DEFAULT_PERMIT_TIMEOUT: Final = 300.0


class BasicSchedulingPolicy(KubeModel):
    pass


class GangSchedulingPolicy(KubeModel):
    min_count: int | None = None


class PodGroupSchedulingPolicy(KubeModel):
    """A union: exactly one of ``basic`` and ``gang``."""

    basic: BasicSchedulingPolicy | None = None
    gang: GangSchedulingPolicy | None = None


class PodGroupResourceClaim(KubeModel):
    """A claim shared by the group's pods: exactly one of the two names."""

    name: str | None = None
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodGroupResourceClaimStatus(KubeModel):
    name: str | None = None
    resource_claim_name: str | None = None


class TopologyConstraint(KubeModel):
    """The node label whose value is the group's domain (a rack, a block)."""

    key: str | None = None


class PodGroupSchedulingConstraints(KubeModel):
    """TopologyAwareWorkloadScheduling (alpha in 1.37, beta in 1.38, off by default): at most
    one topology constraint."""

    topology: list[TopologyConstraint] = Field(default_factory=list)

    @property
    def topology_key(self) -> str | None:
        """The label all the group's pods share a value of (upstream reads the first
        constraint only: the API allows one)."""
        return (self.topology[0].key or None) if self.topology else None


class WorkloadReference(KubeModel):
    workload_name: str | None = None
    template_name: str | None = None


class PodGroupSpec(KubeModel):
    workload_ref: WorkloadReference | None = None
    scheduling_policy: PodGroupSchedulingPolicy = Field(default_factory=PodGroupSchedulingPolicy)
    scheduling_constraints: PodGroupSchedulingConstraints | None = None
    resource_claims: list[PodGroupResourceClaim] = Field(default_factory=list)
    disruption_mode: dict[str, object] | None = None
    priority_class_name: str | None = None
    priority: int | None = None
    preemption_policy: str | None = None
    parent_composite_pod_group_name: str | None = None


class PodGroupStatus(KubeModel):
    conditions: list[Condition] = Field(default_factory=list)
    resource_claim_statuses: list[PodGroupResourceClaimStatus] = Field(default_factory=list)

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)


class PodGroup(KubeModel):
    api_version: str | None = API_VERSION
    kind: str | None = "PodGroup"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodGroupSpec = Field(default_factory=PodGroupSpec)
    status: PodGroupStatus = Field(default_factory=PodGroupStatus)

    @property
    def min_count(self) -> int:
        """How many members must be placed together: ``gang.minCount``, 1 for ``basic``
        (upstream's PlacementFeasible treats basic as a gang of one)."""
        gang = self.spec.scheduling_policy.gang
        return max(gang.min_count or 1, 1) if gang is not None else 1

    @property
    def topology_key(self) -> str | None:
        constraints = self.spec.scheduling_constraints
        return constraints.topology_key if constraints is not None else None

    @property
    def is_gang(self) -> bool:
        return self.spec.scheduling_policy.gang is not None

    def claim_name(self, entry: PodGroupResourceClaim) -> tuple[bool, str | None]:
        """(known, name) of the ResourceClaim behind a group claim, as ``Pod.claim_status``:
        direct, or recorded in the status for a template entry."""
        if entry.resource_claim_name:
            return True, entry.resource_claim_name
        for status in self.status.resource_claim_statuses:
            if status.name == entry.name:
                return True, status.resource_claim_name
        return False, None

    def condition(self, type_: str) -> Condition | None:
        return self.status.condition(type_)


class CompositeGangSchedulingPolicy(KubeModel):
    min_group_count: int | None = None


class CompositePodGroupSchedulingPolicy(KubeModel):
    """A union: exactly one of ``basic`` (its children placed independently) and ``gang``
    (at least ``minGroupCount`` of them placed together)."""

    basic: BasicSchedulingPolicy | None = None
    gang: CompositeGangSchedulingPolicy | None = None


class CompositePodGroupSpec(KubeModel):
    parent_composite_pod_group_name: str | None = None
    workload_ref: WorkloadReference | None = None
    scheduling_policy: CompositePodGroupSchedulingPolicy = Field(
        default_factory=CompositePodGroupSchedulingPolicy
    )
    scheduling_constraints: PodGroupSchedulingConstraints | None = None
    disruption_mode: dict[str, object] | None = None
    priority_class_name: str | None = None
    priority: int | None = None
    preemption_policy: str | None = None


class CompositePodGroup(KubeModel):
    """A node of a workload's group tree (CompositePodGroup: alpha in 1.37, served in
    ``scheduling.k8s.io/v1alpha3``; beta in 1.38, ``v1beta1``; off by default in both): its
    children are the PodGroups and CompositePodGroups that name it as their parent. It owns
    no pods and no claims."""

    api_version: str | None = API_VERSION
    kind: str | None = "CompositePodGroup"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: CompositePodGroupSpec = Field(default_factory=CompositePodGroupSpec)
    status: PodGroupStatus = Field(default_factory=PodGroupStatus)

    @property
    def min_count(self) -> int:
        """How many children must be placed: ``gang.minGroupCount``, 1 for ``basic``
        (GangScheduling's ``getMinCount``)."""
        gang = self.spec.scheduling_policy.gang
        return max(gang.min_group_count or 1, 1) if gang is not None else 1

    @property
    def topology_key(self) -> str | None:
        constraints = self.spec.scheduling_constraints
        return constraints.topology_key if constraints is not None else None

    @property
    def is_gang(self) -> bool:
        return self.spec.scheduling_policy.gang is not None

    def condition(self, type_: str) -> Condition | None:
        return self.status.condition(type_)


class PodGroupTemplate(KubeModel):
    name: str | None = None
    scheduling_policy: PodGroupSchedulingPolicy = Field(default_factory=PodGroupSchedulingPolicy)
    resource_claims: list[PodGroupResourceClaim] = Field(default_factory=list)
    priority_class_name: str | None = None
    priority: int | None = None


class WorkloadSpec(KubeModel):
    controller_ref: dict[str, object] | None = None
    pod_group_templates: list[PodGroupTemplate] = Field(default_factory=list)


class Workload(KubeModel):
    """Read by nobody in kube-scheduler 1.37 (PodGroups carry what scheduling needs): modelled
    so that kopf-dra's tools can show and validate it."""

    api_version: str | None = API_VERSION
    kind: str | None = "Workload"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: WorkloadSpec = Field(default_factory=WorkloadSpec)


def group_name(pod: Pod) -> str | None:
    """The PodGroup the pod names (``spec.schedulingGroup.podGroupName``), in its namespace."""
    group = pod.spec.scheduling_group
    return group.pod_group_name if group is not None else None


def group_consumer(group: PodGroup) -> dict[str, str]:
    """The ``reservedFor`` entry of a PodGroup."""
    return {
        "apiGroup": SCHEDULING_GROUP,
        "resource": "podgroups",
        "name": group.metadata.name or "",
        "uid": group.metadata.uid or "",
    }


def is_group_claim(entry: PodResourceClaim, group: PodGroup | None) -> bool:
    """``bind_to``'s rule: the pod claim equals one of the group's claims in every field."""
    if group is None:
        return False
    return any(
        g.name == entry.name
        and g.resource_claim_name == entry.resource_claim_name
        and g.resource_claim_template_name == entry.resource_claim_template_name
        for g in group.spec.resource_claims
    )


def is_for_pod(claim: ResourceClaim, pod: Pod, group_claims: bool) -> bool:
    """A claim from a template entry was made for this pod, or (group claims on) for the
    PodGroup the pod names (by name, kind and API group, as upstream's ``IsForPod``)."""
    owner = claim.metadata.controller_ref()
    if owner is None:
        return False
    if owner.uid == pod.metadata.uid:
        return True
    name = group_name(pod)
    return (
        group_claims
        and name is not None
        and owner.kind == "PodGroup"
        and owner.name == name
        and (owner.api_version or "").startswith(SCHEDULING_GROUP + "/")
    )


def is_reserved_for_group(claim: ResourceClaim, name: str) -> bool:
    return any(
        ref.api_group == SCHEDULING_GROUP and ref.resource == "podgroups" and ref.name == name
        for ref in claim.status.reserved_for
    )


def is_reserved_for_pod(claim: ResourceClaim, pod: Pod, group_claims: bool) -> bool:
    """Reserved for the pod's uid, or (group claims on) for the PodGroup it names."""
    if claim.is_reserved_for(pod.metadata.uid or ""):
        return True
    name = group_name(pod)
    return group_claims and name is not None and is_reserved_for_group(claim, name)


def generated_for_group(claim: ResourceClaim) -> tuple[str, str] | None:
    """(name, uid) of the PodGroup that controls the claim (one generated for its template)."""
    owner = claim.metadata.controller_ref()
    if (
        owner is None
        or owner.kind != "PodGroup"
        or not (owner.api_version or "").startswith(SCHEDULING_GROUP + "/")
    ):
        return None
    return owner.name or "", owner.uid or ""
