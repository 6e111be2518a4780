"""resource.k8s.io/v1 of Kubernetes 1.36 and 1.37 (DeviceTaintRule: v1beta2 in 1.36), every field.

Python names are the kubernetes-asyncio attribute names; JSON names are their camelCase, except
where the API spells them differently (``shareID``, DeviceAttribute's ``int``/``bool``), which
are aliased explicitly. Collections default to empty so consumers never meet None; because
dumps exclude unset fields, round trips stay exact. Enumerations stay strings so that values a
newer server knows survive and are reported by validation or the allocator, not by parsing.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from operators.api.base import KubeModel
from operators.api.core import NodeSelector
from operators.api.features import Release
from operators.api.ids import DeviceID, PoolID
from operators.api.meta import Condition, ObjectMeta
from operators.api.quantity import Quantity

API_GROUP = "resource.k8s.io"
API_VERSION = "resource.k8s.io/v1"
API_VERSION_V1BETA2 = "resource.k8s.io/v1beta2"

# Enumerations as the API defines them (fields stay str; see module docstring).
ALLOCATION_MODE_EXACT_COUNT = "ExactCount"
ALLOCATION_MODE_ALL = "All"
ALLOCATION_MODES = (ALLOCATION_MODE_EXACT_COUNT, ALLOCATION_MODE_ALL)
TAINT_EFFECT_NONE = "None"
TAINT_EFFECT_NO_SCHEDULE = "NoSchedule"
TAINT_EFFECT_NO_EXECUTE = "NoExecute"
DEVICE_TAINT_EFFECTS = (TAINT_EFFECT_NONE, TAINT_EFFECT_NO_SCHEDULE, TAINT_EFFECT_NO_EXECUTE)
TOLERATION_OPERATOR_EXISTS = "Exists"
TOLERATION_OPERATOR_EQUAL = "Equal"
TOLERATION_OPERATORS = (TOLERATION_OPERATOR_EXISTS, TOLERATION_OPERATOR_EQUAL)
ALLOCATION_CONFIG_SOURCE_CLASS = "FromClass"
ALLOCATION_CONFIG_SOURCE_CLAIM = "FromClaim"
ALLOCATION_CONFIG_SOURCES = (ALLOCATION_CONFIG_SOURCE_CLASS, ALLOCATION_CONFIG_SOURCE_CLAIM)
# The finalizer the scheduler puts on claims it allocated.
CLAIM_FINALIZER = "resource.kubernetes.io/delete-protection"
# Annotation on template-generated claims: the pod's spec.resourceClaims[].name.
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
# A namespace label that permits adminAccess requests in it.
ADMIN_ACCESS_NAMESPACE_LABEL = "resource.kubernetes.io/admin-access"

AttributeKind = Literal["int", "bool", "string", "version", "ints", "bools", "strings", "versions"]
AttributeValue = int | bool | str | list[int] | list[bool] | list[str]

# --- shared parts --------------------------------------------------------------------------


class OpaqueDeviceConfiguration(KubeModel):
    """Driver-specific parameters, passed through to the driver untouched."""

    driver: str | None = None
    parameters: Any = None


class CELDeviceSelector(KubeModel):
    expression: str | None = None


class DeviceSelector(KubeModel):
    """One selection criterion; CEL is the only kind today."""

    cel: CELDeviceSelector | None = None


class DeviceTaint(KubeModel):
    """A driver- or rule-defined taint on a device; effect None/NoSchedule/NoExecute."""

    key: str | None = None
    value: str | None = None
    effect: str | None = None
    time_added: str | None = None


class DeviceToleration(KubeModel):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None


# --- DeviceClass ---------------------------------------------------------------------------


class DeviceClassConfiguration(KubeModel):
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClassSpec(KubeModel):
    selectors: list[DeviceSelector] = Field(default_factory=list)
    config: list[DeviceClassConfiguration] = Field(default_factory=list)
    extended_resource_name: str | None = None


class DeviceClass(KubeModel):
    api_version: str | None = API_VERSION
    kind: str | None = "DeviceClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: DeviceClassSpec = Field(default_factory=DeviceClassSpec)


# --- ResourceSlice -------------------------------------------------------------------------


class ResourcePool(KubeModel):
    name: str | None = None
    generation: int | None = None
    resource_slice_count: int | None = None


class Counter(KubeModel):
    value: Quantity | None = None


class CounterSet(KubeModel):
    name: str | None = None
    counters: dict[str, Counter] = Field(default_factory=dict)


class DeviceCounterConsumption(KubeModel):
    counter_set: str | None = None
    counters: dict[str, Counter] = Field(default_factory=dict)
    #: 1.37 alpha (DRADeviceCompatibilityGroups): devices allocated together on this counter
    #: set must share a group.
    compatibility_groups: list[str] = Field(default_factory=list)


class DeviceAttribute(KubeModel):
    """Exactly one value field is set (validation reports violations, parsing does not)."""

    int_: int | None = Field(default=None, alias="int")
    bool_: bool | None = Field(default=None, alias="bool")
    string: str | None = Field(default=None, alias="string")
    version: str | None = Field(default=None, alias="version")
    ints: list[int] | None = Field(default=None, alias="ints")
    bools: list[bool] | None = Field(default=None, alias="bools")
    strings: list[str] | None = Field(default=None, alias="strings")
    versions: list[str] | None = Field(default=None, alias="versions")

    def kinds(self) -> list[AttributeKind]:
        """The names of all value fields that are set (valid attributes have exactly one)."""
        out: list[AttributeKind] = []
        if self.int_ is not None:
            out.append("int")
        if self.bool_ is not None:
            out.append("bool")
        if self.string is not None:
            out.append("string")
        if self.version is not None:
            out.append("version")
        if self.ints is not None:
            out.append("ints")
        if self.bools is not None:
            out.append("bools")
        if self.strings is not None:
            out.append("strings")
        if self.versions is not None:
            out.append("versions")
        return out

    @property
    def kind(self) -> AttributeKind | None:
        """The JSON name of the (first) value field that is set, None when none is."""
        kinds = self.kinds()
        return kinds[0] if kinds else None

    @property
    def element_kind(self) -> Literal["int", "bool", "string", "version"] | None:
        """The scalar type of the value, lists included ("ints" -> "int")."""
        kind = self.kind
        if kind is None:
            return None
        return {"ints": "int", "bools": "bool", "strings": "string", "versions": "version"}.get(
            kind, kind
        )  # type: ignore[return-value]

    @property
    def is_list(self) -> bool:
        return self.kind in ("ints", "bools", "strings", "versions")

    def typed_value(self) -> AttributeValue | None:
        """The value of the set field (a scalar or a list), None when no field is set."""
        kind = self.kind
        if kind is None:
            return None
        value: AttributeValue | None = {
            "int": self.int_,
            "bool": self.bool_,
            "string": self.string,
            "version": self.version,
            "ints": self.ints,
            "bools": self.bools,
            "strings": self.strings,
            "versions": self.versions,
        }[kind]
        return value

    def values(self) -> list[int] | list[bool] | list[str]:
        """All values as a list: a scalar as a one-element list, a list as itself."""
        value = self.typed_value()
        if value is None:
            return []
        if isinstance(value, list):
            return value
        return [value]  # type: ignore[return-value]

    @classmethod
    def of(cls, value: AttributeValue, *, version: bool = False) -> DeviceAttribute:
        """Build from a Python value; strings are versions when ``version=True``."""
        if isinstance(value, bool):
            return cls(bool_=value)
        if isinstance(value, int):
            return cls(int_=value)
        if isinstance(value, str):
            return cls(version=value) if version else cls(string=value)
        if all(isinstance(v, bool) for v in value) and value:
            return cls(bools=[bool(v) for v in value])
        if all(isinstance(v, int) and not isinstance(v, bool) for v in value) and value:
            return cls(ints=[int(v) for v in value])
        if version:
            return cls(versions=[str(v) for v in value])
        return cls(strings=[str(v) for v in value])


class CapacityRequestPolicyRange(KubeModel):
    min: Quantity | None = None
    max: Quantity | None = None
    step: Quantity | None = None


class CapacityRequestPolicy(KubeModel):
    default: Quantity | None = None
    valid_values: list[Quantity] = Field(default_factory=list)
    valid_range: CapacityRequestPolicyRange | None = None


class DeviceCapacity(KubeModel):
    value: Quantity | None = None
    request_policy: CapacityRequestPolicy | None = None


class NodeAllocatableResourceMapping(KubeModel):
    """1.36 alpha (node-allocatable resources backed by DRA); modelled, not implemented.
    1.37 replaced it with ``NodeAllocatableResource``."""

    allocation_multiplier: Quantity | None = None
    capacity_key: str | None = None


class NodeAllocatableMapping(KubeModel):
    """1.37 alpha: how a device's capacity maps to a node resource it takes."""

    capacity_key: str | None = None
    capacity_multiplier: Quantity | None = None
    device_multiplier: Quantity | None = None


class NodeAllocatableOverhead(KubeModel):
    """1.37 alpha: a node resource a device takes per pod and per container using it."""

    per_pod: Quantity | None = None
    per_container: Quantity | None = None


class NodeAllocatableResource(KubeModel):
    """1.37 alpha (DRANodeAllocatableResources): a node resource the device also takes."""

    mapping: NodeAllocatableMapping | None = None
    overhead: NodeAllocatableOverhead | None = None


class Device(KubeModel):
    """One device in a slice (the 1.36 layout: no ``basic`` wrapper)."""

    name: str | None = None
    attributes: dict[str, DeviceAttribute] = Field(default_factory=dict)
    capacity: dict[str, DeviceCapacity] = Field(default_factory=dict)
    consumes_counters: list[DeviceCounterConsumption] = Field(default_factory=list)
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    taints: list[DeviceTaint] = Field(default_factory=list)
    binds_to_node: bool | None = None
    binding_conditions: list[str] = Field(default_factory=list)
    binding_failure_conditions: list[str] = Field(default_factory=list)
    allow_multiple_allocations: bool | None = None
    node_allocatable_resource_mappings: dict[str, NodeAllocatableResourceMapping] = Field(
        default_factory=dict
    )
    node_allocatable_resources: dict[str, NodeAllocatableResource] = Field(default_factory=dict)


class ResourceSliceSpec(KubeModel):
    driver: str | None = None
    pool: ResourcePool = Field(default_factory=ResourcePool)
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    per_device_node_selection: bool | None = None
    devices: list[Device] = Field(default_factory=list)
    shared_counters: list[CounterSet] = Field(default_factory=list)
    #: 1.37 alpha (DRAPartitionableDevicesType): the string attribute naming a partition type.
    partition_type_attribute: str | None = None
    #: 1.37 alpha (DRAOptionalNodeOperations): kubelet calls the pool's devices need not.
    skip_node_operations: list[str] = Field(default_factory=list)


class ResourceSlice(KubeModel):
    api_version: str | None = API_VERSION
    kind: str | None = "ResourceSlice"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceSliceSpec = Field(default_factory=ResourceSliceSpec)

    @property
    def pool_id(self) -> PoolID:
        return PoolID(self.spec.driver or "", self.spec.pool.name or "")

    def device_ids(self) -> list[DeviceID]:
        pool = self.pool_id
        return [pool.device(d.name or "") for d in self.spec.devices]


# --- ResourceClaim -------------------------------------------------------------------------


class CapacityRequirements(KubeModel):
    requests: dict[str, Quantity] = Field(default_factory=dict)


class DeviceDerivedAttribute(KubeModel):
    """1.37 alpha (DRADerivedAttributes): an attribute computed per candidate device."""

    name: str | None = None
    expression: str | None = None


class ExactDeviceRequest(KubeModel):
    device_class_name: str | None = None
    selectors: list[DeviceSelector] = Field(default_factory=list)
    allocation_mode: str | None = None
    count: int | None = None
    admin_access: bool | None = None
    tolerations: list[DeviceToleration] = Field(default_factory=list)
    capacity: CapacityRequirements | None = None
    derived_attributes: list[DeviceDerivedAttribute] = Field(default_factory=list)


class DeviceSubRequest(KubeModel):
    name: str | None = None
    device_class_name: str | None = None
    selectors: list[DeviceSelector] = Field(default_factory=list)
    allocation_mode: str | None = None
    count: int | None = None
    tolerations: list[DeviceToleration] = Field(default_factory=list)
    capacity: CapacityRequirements | None = None
    derived_attributes: list[DeviceDerivedAttribute] = Field(default_factory=list)


class DeviceRequest(KubeModel):
    """Exactly one of ``exactly`` and ``first_available`` is set."""

    name: str | None = None
    exactly: ExactDeviceRequest | None = None
    first_available: list[DeviceSubRequest] = Field(default_factory=list)


class DeviceConstraint(KubeModel):
    requests: list[str] = Field(default_factory=list)
    match_attribute: str | None = None
    distinct_attribute: str | None = None


class DeviceClaimConfiguration(KubeModel):
    requests: list[str] = Field(default_factory=list)
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClaim(KubeModel):
    requests: list[DeviceRequest] = Field(default_factory=list)
    constraints: list[DeviceConstraint] = Field(default_factory=list)
    config: list[DeviceClaimConfiguration] = Field(default_factory=list)


class ResourceClaimSpec(KubeModel):
    devices: DeviceClaim = Field(default_factory=DeviceClaim)


class DeviceRequestAllocationResult(KubeModel):
    """One allocated device; ``request`` is ``<request>`` or ``<request>/<subrequest>``."""

    request: str | None = None
    driver: str | None = None
    pool: str | None = None
    device: str | None = None
    admin_access: bool | None = None
    tolerations: list[DeviceToleration] = Field(default_factory=list)
    binding_conditions: list[str] = Field(default_factory=list)
    binding_failure_conditions: list[str] = Field(default_factory=list)
    share_id: str | None = Field(default=None, alias="shareID")
    consumed_capacity: dict[str, Quantity] = Field(default_factory=dict)
    #: 1.37 alpha (DRAOptionalNodeOperations): copied from the device's slice.
    skip_node_operations: list[str] = Field(default_factory=list)

    @property
    def device_id(self) -> DeviceID:
        return DeviceID(self.driver or "", self.pool or "", self.device or "")

    @property
    def parent_request(self) -> str:
        """The claim's request name (the part before ``/`` of a subrequest result)."""
        return (self.request or "").split("/", 1)[0]


class DeviceAllocationConfiguration(KubeModel):
    source: str | None = None
    requests: list[str] = Field(default_factory=list)
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceAllocationResult(KubeModel):
    results: list[DeviceRequestAllocationResult] = Field(default_factory=list)
    config: list[DeviceAllocationConfiguration] = Field(default_factory=list)


class AllocationResult(KubeModel):
    devices: DeviceAllocationResult = Field(default_factory=DeviceAllocationResult)
    node_selector: NodeSelector | None = None
    allocation_timestamp: str | None = None


class ResourceClaimConsumerReference(KubeModel):
    """Who uses a claim (a Pod, usually): apiGroup "" for core, resource "pods"."""

    api_group: str | None = None
    resource: str | None = None
    name: str | None = None
    uid: str | None = None


class NetworkDeviceData(KubeModel):
    interface_name: str | None = None
    ips: list[str] = Field(default_factory=list)
    hardware_address: str | None = None


class AllocatedDeviceStatus(KubeModel):
    """A driver's report on one allocated device (conditions drive binding conditions)."""

    driver: str | None = None
    pool: str | None = None
    device: str | None = None
    share_id: str | None = Field(default=None, alias="shareID")
    conditions: list[Condition] = Field(default_factory=list)
    data: Any = None
    network_data: NetworkDeviceData | None = None

    @property
    def device_id(self) -> DeviceID:
        return DeviceID(self.driver or "", self.pool or "", self.device or "")

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)


class ResourceClaimStatus(KubeModel):
    allocation: AllocationResult | None = None
    reserved_for: list[ResourceClaimConsumerReference] = Field(default_factory=list)
    devices: list[AllocatedDeviceStatus] = Field(default_factory=list)


class ResourceClaim(KubeModel):
    api_version: str | None = API_VERSION
    kind: str | None = "ResourceClaim"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceClaimSpec = Field(default_factory=ResourceClaimSpec)
    status: ResourceClaimStatus = Field(default_factory=ResourceClaimStatus)

    @property
    def key(self) -> str:
        """ "ns/name", the coordinate used in messages and logs."""
        return self.metadata.key

    @property
    def is_allocated(self) -> bool:
        return self.status.allocation is not None

    @property
    def is_deleting(self) -> bool:
        return self.metadata.deletion_timestamp is not None

    def reserved_for_uids(self) -> set[str]:
        return {ref.uid for ref in self.status.reserved_for if ref.uid}

    def is_reserved_for(self, uid: str) -> bool:
        return uid in self.reserved_for_uids()

    def allocated_results(self) -> list[DeviceRequestAllocationResult]:
        """The allocation's device results, empty when not allocated."""
        if self.status.allocation is None:
            return []
        return self.status.allocation.devices.results

    def allocated_device_ids(self) -> list[DeviceID]:
        return [r.device_id for r in self.allocated_results()]

    def request(self, name: str) -> DeviceRequest | None:
        """The request with this name (the part before ``/`` of a subrequest name)."""
        top = name.split("/", 1)[0]
        return next((r for r in self.spec.devices.requests if r.name == top), None)


# --- ResourceClaimTemplate -----------------------------------------------------------------


class ResourceClaimTemplateSpec(KubeModel):
    """The metadata and spec copied into every claim generated from the template."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceClaimSpec = Field(default_factory=ResourceClaimSpec)


class ResourceClaimTemplate(KubeModel):
    api_version: str | None = API_VERSION
    kind: str | None = "ResourceClaimTemplate"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceClaimTemplateSpec = Field(default_factory=ResourceClaimTemplateSpec)


# --- DeviceTaintRule (resource.k8s.io/v1beta2 in 1.36, v1 from 1.37) -----------------------


class DeviceTaintSelector(KubeModel):
    """Selects devices by driver, pool and/or device name; all set fields must match."""

    driver: str | None = None
    pool: str | None = None
    device: str | None = None

    def matches(self, device: DeviceID) -> bool:
        return (
            (self.driver is None or self.driver == device.driver)
            and (self.pool is None or self.pool == device.pool)
            and (self.device is None or self.device == device.device)
        )


class DeviceTaintRuleSpec(KubeModel):
    device_selector: DeviceTaintSelector | None = None
    taint: DeviceTaint = Field(default_factory=DeviceTaint)


#: The one condition type the API defines (kube-controller-manager's eviction controller
#: sets it): pods of tainted devices are being evicted, or would be for ``effect: None``.
DEVICE_TAINT_CONDITION_EVICTION_IN_PROGRESS = "EvictionInProgress"


class DeviceTaintRuleStatus(KubeModel):
    """The same in 1.36's v1beta2 and 1.37's v1: at most 8 conditions, unique by type."""

    conditions: list[Condition] = Field(default_factory=list)

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)


class DeviceTaintRule(KubeModel):
    api_version: str | None = API_VERSION_V1BETA2
    kind: str | None = "DeviceTaintRule"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: DeviceTaintRuleSpec = Field(default_factory=DeviceTaintRuleSpec)
    status: DeviceTaintRuleStatus = Field(default_factory=DeviceTaintRuleStatus)


#: Kind name -> model, for code that dispatches on ``kind`` (fixtures, the simulate CLI).
KINDS: dict[str, type[KubeModel]] = {
    "DeviceClass": DeviceClass,
    "ResourceSlice": ResourceSlice,
    "ResourceClaim": ResourceClaim,
    "ResourceClaimTemplate": ResourceClaimTemplate,
    "DeviceTaintRule": DeviceTaintRule,
}


#: The apiVersion a kind is served in, by release, where it moved (oldest first): the one place
#: that says which to read and watch (``kube.api.resource_of``, simulate's input). DeviceTaintRule
#: is beta (v1beta2, off unless the cluster enables it) in 1.36 and GA in v1 from 1.37.
SERVED_VERSIONS: dict[str, tuple[tuple[Release, str], ...]] = {
    "DeviceTaintRule": ((Release(1, 36), API_VERSION_V1BETA2), (Release(1, 37), API_VERSION)),
    # Alpha in 1.37 (v1alpha3 only), beta in 1.38 (v1beta1, beside PodGroup).
    "CompositePodGroup": (
        (Release(1, 37), "scheduling.k8s.io/v1alpha3"),
        (Release(1, 38), "scheduling.k8s.io/v1beta1"),
    ),
}


def api_version_of(kind: str, release: Release) -> str | None:
    """The apiVersion to read ``kind`` in from a cluster of ``release``; None where the kind
    never moved (the caller's own default holds)."""
    chosen = None
    for since, api_version in SERVED_VERSIONS.get(kind, ()):
        if release >= since:
            chosen = api_version
    return chosen
