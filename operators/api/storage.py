"""The storage kinds kube-scheduler's volume plugins read: PVCs, PVs, StorageClasses, CSINodes
and CSIStorageCapacities (core/v1 and storage.k8s.io/v1).

Only what the scheduler reads (and, for VolumeBinding's PreBind, writes) is modelled; the
rest survives round trips as extra fields.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from operators.api.base import KubeModel
from operators.api.core import LabelSelector, NodeSelector, ObjectReference
from operators.api.meta import ObjectMeta
from operators.api.quantity import Quantity

#: The PVC annotation VolumeBinding's PreBind writes for a provisioner (and reads back).
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
#: StorageClass.volumeBindingMode values.
IMMEDIATE = "Immediate"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
#: The in-tree "provisioner" of classes whose volumes are all created by hand (local PVs).
NO_PROVISIONER = "kubernetes.io/no-provisioner"


class VolumeResourceRequirements(KubeModel):
    requests: dict[str, Quantity] = Field(default_factory=dict)
    limits: dict[str, Quantity] = Field(default_factory=dict)


class PersistentVolumeClaimSpec(KubeModel):
    access_modes: list[str] = Field(default_factory=list)
    selector: LabelSelector | None = None
    resources: VolumeResourceRequirements = Field(default_factory=VolumeResourceRequirements)
    volume_name: str | None = None
    storage_class_name: str | None = None
    volume_mode: str | None = None  # Filesystem (default), Block
    volume_attributes_class_name: str | None = None


class PersistentVolumeClaimStatus(KubeModel):
    phase: str | None = None  # Pending, Bound, Lost
    access_modes: list[str] = Field(default_factory=list)
    capacity: dict[str, Quantity] = Field(default_factory=dict)


class PersistentVolumeClaim(KubeModel):
    api_version: str | None = "v1"
    kind: str | None = "PersistentVolumeClaim"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PersistentVolumeClaimSpec = Field(default_factory=PersistentVolumeClaimSpec)
    status: PersistentVolumeClaimStatus = Field(default_factory=PersistentVolumeClaimStatus)

    @property
    def key(self) -> str:
        return self.metadata.key

    @property
    def class_name(self) -> str:
        """spec.storageClassName, else the beta annotation ("" : no class)."""
        if self.spec.storage_class_name is not None:
            return self.spec.storage_class_name
        return self.metadata.annotations.get("volume.beta.kubernetes.io/storage-class", "")


class VolumeNodeAffinity(KubeModel):
    required: NodeSelector | None = None


class PersistentVolumeSpec(KubeModel):
    capacity: dict[str, Quantity] = Field(default_factory=dict)
    access_modes: list[str] = Field(default_factory=list)
    claim_ref: ObjectReference | None = None
    persistent_volume_reclaim_policy: str | None = None
    storage_class_name: str | None = None
    volume_mode: str | None = None
    node_affinity: VolumeNodeAffinity | None = None
    mount_options: list[str] = Field(default_factory=list)
    volume_attributes_class_name: str | None = None

    def source(self, name: str) -> dict[str, Any] | None:
        """A volume source by its wire name (``"csi"``, ``"local"``, ``"awsElasticBlockStore"``)."""
        value = (self.model_extra or {}).get(name)
        return value if isinstance(value, dict) else None


class PersistentVolumeStatus(KubeModel):
    phase: str | None = None  # Pending, Available, Bound, Released, Failed


class PersistentVolume(KubeModel):
    api_version: str | None = "v1"
    kind: str | None = "PersistentVolume"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PersistentVolumeSpec = Field(default_factory=PersistentVolumeSpec)
    status: PersistentVolumeStatus = Field(default_factory=PersistentVolumeStatus)

    @property
    def class_name(self) -> str:
        if self.spec.storage_class_name is not None:
            return self.spec.storage_class_name
        return self.metadata.annotations.get("volume.beta.kubernetes.io/storage-class", "")


class TopologySelectorLabelRequirement(KubeModel):
    key: str | None = None
    values: list[str] = Field(default_factory=list)


class TopologySelectorTerm(KubeModel):
    match_label_expressions: list[TopologySelectorLabelRequirement] = Field(default_factory=list)


class StorageClass(KubeModel):
    api_version: str | None = "storage.k8s.io/v1"
    kind: str | None = "StorageClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    provisioner: str | None = None
    parameters: dict[str, str] = Field(default_factory=dict)
    reclaim_policy: str | None = None
    volume_binding_mode: str | None = None  # Immediate (default), WaitForFirstConsumer
    allowed_topologies: list[TopologySelectorTerm] = Field(default_factory=list)
    allow_volume_expansion: bool | None = None

    @property
    def delayed(self) -> bool:
        """Volumes are bound (or provisioned) once a pod using the claim is scheduled."""
        return self.volume_binding_mode == WAIT_FOR_FIRST_CONSUMER


class VolumeNodeResources(KubeModel):
    count: int | None = None


class CSINodeDriver(KubeModel):
    name: str | None = None
    node_id: str | None = Field(default=None, alias="nodeID")
    topology_keys: list[str] = Field(default_factory=list)
    allocatable: VolumeNodeResources | None = None


class CSINodeSpec(KubeModel):
    drivers: list[CSINodeDriver] = Field(default_factory=list)


class CSINode(KubeModel):
    api_version: str | None = "storage.k8s.io/v1"
    kind: str | None = "CSINode"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: CSINodeSpec = Field(default_factory=CSINodeSpec)


class CSIStorageCapacity(KubeModel):
    """What a CSI driver can still provision for a class in a topology segment."""

    api_version: str | None = "storage.k8s.io/v1"
    kind: str | None = "CSIStorageCapacity"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    node_topology: LabelSelector | None = None
    storage_class_name: str | None = None
    capacity: Quantity | None = None
    maximum_volume_size: Quantity | None = None


class Namespace(KubeModel):
    """core/v1 Namespace: its labels, for pod affinity's namespaceSelector."""

    api_version: str | None = "v1"
    kind: str | None = "Namespace"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)


class CSIDriverSpec(KubeModel):
    attach_required: bool | None = None
    storage_capacity: bool | None = None
    #: 1.37's VolumeLimitScaling: a pod whose volumes need the driver goes only to a node
    #: whose CSINode lists it.
    prevent_pod_scheduling_if_missing: bool | None = None


class CSIDriver(KubeModel):
    """storage.k8s.io/v1 CSIDriver: whether the driver publishes CSIStorageCapacity."""

    api_version: str | None = "storage.k8s.io/v1"
    kind: str | None = "CSIDriver"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: CSIDriverSpec = Field(default_factory=CSIDriverSpec)
