"""The core/v1 subset the DRA control plane reads and writes: Pod, Node, Event and their parts.

Only the fields our components use are modelled; everything else (probes, env, ...)
survives round trips as extra fields. Field names follow the kubernetes-asyncio models; JSON
names that are not plain camelCase (``podCIDR``, ``hostIP``) are left to the extras.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import Field

from operators.api.base import KubeModel
from operators.api.meta import ObjectMeta
from operators.api.names import TERMINAL_PHASES
from operators.api.quantity import Quantity

# --- node selection ------------------------------------------------------------------------


class NodeSelectorRequirement(KubeModel):
    """key/operator/values: operator is In, NotIn, Exists, DoesNotExist, Gt or Lt."""

    key: str | None = None
    operator: str | None = None
    values: list[str] = Field(default_factory=list)


class NodeSelectorTerm(KubeModel):
    """All expressions and fields of one term must match (AND)."""

    match_expressions: list[NodeSelectorRequirement] = Field(default_factory=list)
    match_fields: list[NodeSelectorRequirement] = Field(default_factory=list)


class NodeSelector(KubeModel):
    """Any one of the terms must match (OR); used by pods, slices, devices and allocations."""

    node_selector_terms: list[NodeSelectorTerm] = Field(default_factory=list)


class PreferredSchedulingTerm(KubeModel):
    weight: int | None = None
    preference: NodeSelectorTerm = Field(default_factory=NodeSelectorTerm)


class NodeAffinity(KubeModel):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = Field(
        default_factory=list
    )


class LabelSelectorRequirement(KubeModel):
    key: str | None = None
    operator: str | None = None  # In, NotIn, Exists, DoesNotExist
    values: list[str] = Field(default_factory=list)


class LabelSelector(KubeModel):
    """metav1.LabelSelector: matchLabels and matchExpressions, ANDed."""

    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: dict[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        for r in self.match_expressions:
            key = r.key or ""
            if r.operator == "In" and labels.get(key) not in r.values:
                return False
            if r.operator == "NotIn" and key in labels and labels[key] in r.values:
                return False
            if r.operator == "Exists" and key not in labels:
                return False
            if r.operator == "DoesNotExist" and key in labels:
                return False
            if r.operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
                return False  # invalid: upstream's conversion fails, and the budget is skipped
        return True


class PodAffinityTerm(KubeModel):
    """Pods matching ``label_selector`` in the namespaces named or selected (the pod's own
    when neither is set), counted per value of ``topology_key``; match/mismatchLabelKeys add
    the incoming pod's values of those labels to the selector (In / NotIn)."""

    label_selector: LabelSelector | None = None
    namespaces: list[str] = Field(default_factory=list)
    topology_key: str | None = None
    namespace_selector: LabelSelector | None = None
    match_label_keys: list[str] = Field(default_factory=list)
    mismatch_label_keys: list[str] = Field(default_factory=list)


class WeightedPodAffinityTerm(KubeModel):
    weight: int = 0
    pod_affinity_term: PodAffinityTerm = Field(default_factory=PodAffinityTerm)


class PodAffinity(KubeModel):
    """podAffinity or podAntiAffinity (the same shape)."""

    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = Field(
        default_factory=list
    )
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = Field(
        default_factory=list
    )


class Affinity(KubeModel):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class TopologySpreadConstraint(KubeModel):
    """One of spec.topologySpreadConstraints (PodTopologySpread)."""

    max_skew: int = 0
    topology_key: str | None = None
    when_unsatisfiable: str | None = None  # DoNotSchedule, ScheduleAnyway
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str | None = None  # Honor (default), Ignore
    node_taints_policy: str | None = None  # Ignore (default), Honor
    match_label_keys: list[str] = Field(default_factory=list)


class Taint(KubeModel):
    """A node taint; effect is NoSchedule, PreferNoSchedule or NoExecute (kept as str)."""

    key: str | None = None
    value: str | None = None
    effect: str | None = None
    time_added: str | None = None


class Toleration(KubeModel):
    """A pod toleration; operator is Exists or Equal (default), kept as str."""

    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None


# --- pods ----------------------------------------------------------------------------------


class ContainerResourceClaim(KubeModel):
    """core/v1 ResourceClaim: a container's reference to a pod claim (and one of its requests)."""

    name: str | None = None
    request: str | None = None


class ResourceRequirements(KubeModel):
    requests: dict[str, Quantity] = Field(default_factory=dict)
    limits: dict[str, Quantity] = Field(default_factory=dict)
    claims: list[ContainerResourceClaim] = Field(default_factory=list)


class ContainerPort(KubeModel):
    """A container's port; only those with a hostPort take a port of the node (NodePorts)."""

    container_port: int | None = None
    host_port: int | None = None
    protocol: str | None = None  # TCP (default), UDP, SCTP
    host_ip: str | None = Field(default=None, alias="hostIP")
    name: str | None = None


class Container(KubeModel):
    """A (init) container: its name, image, ports, resources and, for sidecars,
    restartPolicy: Always."""

    name: str | None = None
    image: str | None = None
    ports: list[ContainerPort] = Field(default_factory=list)
    resources: ResourceRequirements | None = None
    restart_policy: str | None = None


class PodResourceClaim(KubeModel):
    """A pod's claim: exactly one of resourceClaimName and resourceClaimTemplateName is set."""

    name: str | None = None
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PersistentVolumeClaimVolumeSource(KubeModel):
    claim_name: str | None = None
    read_only: bool | None = None


class PersistentVolumeClaimTemplate(KubeModel):
    """A generic ephemeral volume's claim: created as ``<pod>-<volume>`` by the ephemeral
    volume controller, owned by the pod."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: dict[str, Any] = Field(default_factory=dict)


class EphemeralVolumeSource(KubeModel):
    volume_claim_template: PersistentVolumeClaimTemplate | None = None


class Volume(KubeModel):
    """A pod volume: the claim-backed sources are modelled; the in-tree and inline sources
    (gcePersistentDisk, csi, ...) stay extra fields, read by name where a plugin needs one."""

    name: str | None = None
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None
    ephemeral: EphemeralVolumeSource | None = None

    def source(self, name: str) -> dict[str, Any] | None:
        """An unmodelled source by its wire name (``"gcePersistentDisk"``), if set."""
        value = (self.model_extra or {}).get(name)
        return value if isinstance(value, dict) else None

    def claim_name(self, pod_name: str) -> str | None:
        """The PVC behind the volume: named, or the generic ephemeral volume's."""
        if self.persistent_volume_claim is not None:
            return self.persistent_volume_claim.claim_name
        if self.ephemeral is not None:
            return f"{pod_name}-{self.name}"
        return None


class PodSchedulingGate(KubeModel):
    name: str | None = None


class PodSchedulingGroup(KubeModel):
    """The PodGroup a pod belongs to (1.37's GenericWorkload), in the pod's namespace."""

    pod_group_name: str | None = None


class PodSpec(KubeModel):
    node_name: str | None = None
    scheduler_name: str | None = None
    node_selector: dict[str, str] = Field(default_factory=dict)
    affinity: Affinity | None = None
    tolerations: list[Toleration] = Field(default_factory=list)
    resource_claims: list[PodResourceClaim] = Field(default_factory=list)
    scheduling_gates: list[PodSchedulingGate] = Field(default_factory=list)
    scheduling_group: PodSchedulingGroup | None = None
    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] = Field(default_factory=list)
    resources: ResourceRequirements | None = None
    overhead: dict[str, Quantity] = Field(default_factory=dict)
    priority: int | None = None
    priority_class_name: str | None = None
    preemption_policy: str | None = None
    restart_policy: str | None = None
    service_account_name: str | None = None
    volumes: list[Volume] = Field(default_factory=list)
    topology_spread_constraints: list[TopologySpreadConstraint] = Field(default_factory=list)


class PodCondition(KubeModel):
    type: str | None = None
    status: str | None = None
    observed_generation: int | None = None
    last_probe_time: str | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class PodResourceClaimStatus(KubeModel):
    """Which ResourceClaim was generated for a pod claim (None: none needed)."""

    name: str | None = None
    resource_claim_name: str | None = None


class ContainerExtendedResourceRequest(KubeModel):
    """Which request of the extended-resource claim serves a container's extended resource."""

    container_name: str | None = None
    resource_name: str | None = None
    request_name: str | None = None


class PodExtendedResourceClaimStatus(KubeModel):
    """The claim the scheduler made for a pod's extended resources backed by DRA (KEP-5004)."""

    request_mappings: list[ContainerExtendedResourceRequest] = Field(default_factory=list)
    resource_claim_name: str | None = None


class NodeAllocatableMappedResources(KubeModel):
    """1.37 alpha (DRANodeAllocatableResources): a node resource a claim's mapped devices
    take, once for the claim."""

    name: str | None = None
    quantity: Quantity | None = None


class NodeAllocatableOverheadResources(KubeModel):
    """1.37 alpha (DRANodeAllocatableResources): a node resource a claim's devices cost on
    top, per pod and per referencing container."""

    name: str | None = None
    per_pod: Quantity | None = None
    per_container: Quantity | None = None


class NodeAllocatableResourceClaimStatus(KubeModel):
    """1.37 alpha (DRANodeAllocatableResources): what one claim of the pod takes of the node's
    allocatable resources, as the scheduler computed it at binding (the kubelet sizes cgroups
    from it, and the scheduler counts it for the pod's node)."""

    resource_claim_name: str | None = None
    containers: list[str] = Field(default_factory=list)
    mapping: list[NodeAllocatableMappedResources] = Field(default_factory=list)
    overhead: list[NodeAllocatableOverheadResources] = Field(default_factory=list)


class PodStatus(KubeModel):
    phase: str | None = None
    conditions: list[PodCondition] = Field(default_factory=list)
    message: str | None = None
    reason: str | None = None
    nominated_node_name: str | None = None
    resource_claim_statuses: list[PodResourceClaimStatus] = Field(default_factory=list)
    extended_resource_claim_status: PodExtendedResourceClaimStatus | None = None
    node_allocatable_resource_claim_statuses: list[NodeAllocatableResourceClaimStatus] = Field(
        default_factory=list
    )
    start_time: str | None = None


class Pod(KubeModel):
    api_version: str | None = "v1"
    kind: str | None = "Pod"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus = Field(default_factory=PodStatus)

    @property
    def key(self) -> str:
        return self.metadata.key

    @property
    def is_terminated(self) -> bool:
        """Succeeded or Failed: the pod will never run again and releases its claims."""
        return self.status.phase in TERMINAL_PHASES

    def claim_status(self, pod_claim: PodResourceClaim) -> tuple[bool, str | None]:
        """(known, name) of the ResourceClaim behind a pod claim: direct, or recorded in the
        status for a template entry. ``known`` is False while no claim has been recorded for a
        template entry; a known None name means that none is needed."""
        if pod_claim.resource_claim_name:
            return True, pod_claim.resource_claim_name
        if not pod_claim.resource_claim_template_name:
            return True, None
        for status in self.status.resource_claim_statuses:
            if status.name == pod_claim.name:
                return True, status.resource_claim_name
        return False, None

    def claim_name(self, pod_claim: PodResourceClaim) -> str | None:
        """The ResourceClaim name behind a pod claim, if there is one yet."""
        return self.claim_status(pod_claim)[1]

    def claim_names(self) -> set[str]:
        """Every ResourceClaim the pod refers to (its spec, or its status for templates and
        for its extended resources backed by DRA)."""
        names = {self.claim_name(c) for c in self.spec.resource_claims}
        names.update(s.resource_claim_name for s in self.status.resource_claim_statuses)
        if self.status.extended_resource_claim_status is not None:
            names.add(self.status.extended_resource_claim_status.resource_claim_name)
        names.discard(None)
        return names  # type: ignore[return-value]

    def condition(self, type_: str) -> PodCondition | None:
        return next((c for c in self.status.conditions if c.type == type_), None)


# --- priority and disruption budgets -------------------------------------------------------

PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
PREEMPT_NEVER = "Never"


class PriorityClass(KubeModel):
    """scheduling.k8s.io/v1 PriorityClass: a pod's priority when admission did not fill it in."""

    api_version: str | None = "scheduling.k8s.io/v1"
    kind: str | None = "PriorityClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    value: int = 0
    global_default: bool | None = None
    preemption_policy: str | None = None


class PodDisruptionBudgetSpec(KubeModel):
    selector: LabelSelector | None = None


class PodDisruptionBudgetStatus(KubeModel):
    disruptions_allowed: int = 0
    disrupted_pods: dict[str, str] = Field(default_factory=dict)


class PodDisruptionBudget(KubeModel):
    """policy/v1 PodDisruptionBudget: what preemption reads of it (selector, status)."""

    api_version: str | None = "policy/v1"
    kind: str | None = "PodDisruptionBudget"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodDisruptionBudgetSpec = Field(default_factory=PodDisruptionBudgetSpec)
    status: PodDisruptionBudgetStatus = Field(default_factory=PodDisruptionBudgetStatus)


# --- nodes ---------------------------------------------------------------------------------


class NodeSpec(KubeModel):
    unschedulable: bool | None = None
    taints: list[Taint] = Field(default_factory=list)


class NodeCondition(KubeModel):
    type: str | None = None
    status: str | None = None
    last_heartbeat_time: str | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


#: The declared feature a node needs for devices whose slice skips node operations (1.37).
OPTIONAL_NODE_OPERATIONS: Final = "DRAOptionalNodeOperations"


class ContainerImage(KubeModel):
    """An image the kubelet reports on its node (ImageLocality scores nodes by them)."""

    names: list[str] = Field(default_factory=list)
    size_bytes: int | None = None


class NodeStatus(KubeModel):
    conditions: list[NodeCondition] = Field(default_factory=list)
    allocatable: dict[str, Quantity] = Field(default_factory=dict)
    capacity: dict[str, Quantity] = Field(default_factory=dict)
    images: list[ContainerImage] = Field(default_factory=list)
    #: 1.37 (NodeDeclaredFeatures): features the kubelet declares it has, e.g.
    #: ``DRAOptionalNodeOperations``, which a device whose slice skips node operations needs.
    declared_features: list[str] = Field(default_factory=list)


class Node(KubeModel):
    api_version: str | None = "v1"
    kind: str | None = "Node"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodeSpec = Field(default_factory=NodeSpec)
    status: NodeStatus = Field(default_factory=NodeStatus)

    @property
    def is_ready(self) -> bool:
        return any(c.type == "Ready" and c.status == "True" for c in self.status.conditions)


# --- events --------------------------------------------------------------------------------


class ObjectReference(KubeModel):
    api_version: str | None = None
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    field_path: str | None = None


class EventSource(KubeModel):
    component: str | None = None
    host: str | None = None


class EventSeries(KubeModel):
    count: int | None = None
    last_observed_time: str | None = None


class Event(KubeModel):
    """core/v1 Event (what ``kubectl describe`` shows)."""

    api_version: str | None = "v1"
    kind: str | None = "Event"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    involved_object: ObjectReference = Field(default_factory=ObjectReference)
    related: ObjectReference | None = None
    reason: str | None = None
    message: str | None = None
    type: str | None = None
    action: str | None = None
    count: int | None = None
    source: EventSource | None = None
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    event_time: str | None = None
    series: EventSeries | None = None
    reporting_component: str | None = None
    reporting_instance: str | None = None
