"""Feature gates the allocator honours: one bool per Kubernetes DRA feature gate name.

The allocator must behave like upstream with the same gates, so a disabled gate makes the
same inputs fail (or be skipped) the way kube-scheduler would with that gate off. Where two
releases' allocators differ with the same gates, ``kubernetes`` says which one to be.

1.37's alpha DRADeviceCompatibilityGroups, DRADerivedAttributes and DRAOptionalNodeOperations
are off by default, as upstream has them: off, slices with compatibility groups are ignored,
claims with derived attributes refused and devices whose slice skips node operations left alone,
as 1.37's allocator does; on, they behave as its experimental channel does. 1.36 knows none of
them (its allocator has no such fields), so they count only where ``kubernetes`` is 1.37 or later.

1.38's allocator parts from 1.37's with the same gates (``since_1_38``): capacity names resolve
by their fully qualified name, versions compare without build metadata, attribute values it
cannot hold end the allocation, and a device holding a share is not handed out exclusively.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Final

from operators.api.features import (
    DEFAULT_RELEASE,
    KubernetesVersion,
    Release,
    parse_feature_gates,
    resolve,
)

#: The first release whose allocator this project tells apart from 1.36's.
V1_37: Final = Release(1, 37)
#: The first release whose allocator this project tells apart from 1.37's.
V1_38: Final = Release(1, 38)


@dataclass(frozen=True, slots=True)
class Features:
    """Switched-on DRA feature gates (field name = gate name in snake case, without DRA), and
    the Kubernetes release whose allocator to behave as where releases differ beyond gates."""

    prioritized_list: bool = False
    partitionable_devices: bool = False
    consumable_capacity: bool = False
    device_binding_conditions: bool = False
    resource_claim_device_status: bool = False
    admin_access: bool = False
    device_taints: bool = False
    list_type_attributes: bool = False
    #: 1.37 beta, on where the cluster's minimum compatibility version is 1.37: capacity
    #: ranges in milli-units (``fractional``).
    fractional_capacity_range: bool = False
    #: 1.37 alpha: devices drawing on one counter set must share a compatibility group.
    device_compatibility_groups: bool = False
    #: 1.37 alpha: requests compute attributes per device for their constraints.
    derived_attributes: bool = False
    #: 1.37 alpha: devices whose slice skips kubelet calls, on nodes that declare they can.
    optional_node_operations: bool = False
    #: The release whose allocator to behave as (where releases differ beyond gates).
    kubernetes: Release = DEFAULT_RELEASE

    @property
    def binding_and_status(self) -> bool:
        """Upstream couples these two gates: binding conditions need device status."""
        return self.device_binding_conditions and self.resource_claim_device_status

    @property
    def since_1_37(self) -> bool:
        """Behave as 1.37's allocator (or a later one's) where it parts from 1.36's."""
        return self.kubernetes >= V1_37

    @property
    def since_1_38(self) -> bool:
        """Behave as 1.38's allocator (or a later one's) where it parts from 1.37's."""
        return self.kubernetes >= V1_38

    @property
    def fractional(self) -> bool:
        """DRAFractionalCapacityRange, which only 1.37 and later have."""
        return self.fractional_capacity_range and self.since_1_37

    @property
    def compatibility_groups(self) -> bool:
        """DRADeviceCompatibilityGroups, which only 1.37 and later have."""
        return self.device_compatibility_groups and self.since_1_37

    @property
    def derived(self) -> bool:
        """DRADerivedAttributes, which only 1.37 and later have."""
        return self.derived_attributes and self.since_1_37

    @property
    def node_operations(self) -> bool:
        """DRAOptionalNodeOperations, which only 1.37 and later have."""
        return self.optional_node_operations and self.since_1_37

    @classmethod
    def all(cls) -> Features:
        """Every gate this design implements, as the local control plane runs them."""
        return cls(
            prioritized_list=True,
            partitionable_devices=True,
            consumable_capacity=True,
            device_binding_conditions=True,
            resource_claim_device_status=True,
            admin_access=True,
            device_taints=True,
            list_type_attributes=True,
        )

    @classmethod
    def release(
        cls,
        overrides: Mapping[str, bool] | None = None,
        version: KubernetesVersion | None = None,
    ) -> Features:
        """Kubernetes' defaults at ``version`` (default: the project's default release) with
        ``overrides`` (checked as that version checks them) applied."""
        if version is None:
            return cls.from_gates(resolve(parse_feature_gates(overrides or {})))
        gates = resolve(parse_feature_gates(overrides or {}, version), version)
        return cls.of(gates, version)

    @classmethod
    def from_gates(cls, gates: Mapping[str, bool], release: Release | None = None) -> Features:
        """From a ``{"DRAPrioritizedList": True, ...}`` map (unknown names are ignored), as
        ``release``'s allocator (default: the project's default release)."""
        on: dict[str, bool] = {GATES[k]: v for k, v in gates.items() if k in GATES}
        features = cls(**on)  # type: ignore[arg-type]  # bools only: GATES names bool fields
        return features if release is None else replace(features, kubernetes=release)

    @classmethod
    def of(cls, gates: Mapping[str, bool], version: KubernetesVersion) -> Features:
        """The allocator of a cluster at ``version`` with these gate values."""
        return cls.from_gates(gates, version.release)

    def gates(self) -> dict[str, bool]:
        """The ``{"DRAPrioritizedList": True, ...}`` map (what the Go allocator oracle reads)."""
        return {gate: getattr(self, name) for gate, name in GATES.items()}


#: Kubernetes feature gate name -> Features field.
GATES = {
    "DRAPrioritizedList": "prioritized_list",
    "DRAPartitionableDevices": "partitionable_devices",
    "DRAConsumableCapacity": "consumable_capacity",
    "DRADeviceBindingConditions": "device_binding_conditions",
    "DRAResourceClaimDeviceStatus": "resource_claim_device_status",
    "DRAAdminAccess": "admin_access",
    "DRADeviceTaints": "device_taints",
    "DRAListTypeAttributes": "list_type_attributes",
    "DRAFractionalCapacityRange": "fractional_capacity_range",
    "DRADeviceCompatibilityGroups": "device_compatibility_groups",
    "DRADerivedAttributes": "derived_attributes",
    "DRAOptionalNodeOperations": "optional_node_operations",
}
