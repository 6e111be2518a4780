"""What is already taken: devices held exclusively, shares of shareable devices, their capacity.

Read from claims' ``status.allocation`` (allocated and in-flight alike), as kube-scheduler's
claim tracker does: adminAccess results never count; results with a ``shareID`` share their
device and add up ``consumedCapacity``; everything else holds its device exclusively.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from operators.allocator.features import Features
from operators.api.ids import DeviceID
from operators.api.resource import ResourceClaim


@dataclass(frozen=True, slots=True)
class AllocatedState:
    """Devices and capacity in use before this cycle allocates anything."""

    devices: frozenset[DeviceID] = frozenset()
    shared: frozenset[tuple[DeviceID, str]] = frozenset()
    capacity: Mapping[DeviceID, Mapping[str, Decimal]] = field(default_factory=dict)

    def is_allocated(self, device: DeviceID) -> bool:
        """Upstream's IsDeviceAllocated: held, shared, or with consumed capacity."""
        return (
            device in self.devices
            or device in self.capacity
            or any(d == device for d, _ in self.shared)
        )

    @classmethod
    def from_claims(cls, claims: Iterable[ResourceClaim], features: Features) -> AllocatedState:
        """Collect the state from allocated (and in-flight) claims."""
        devices: set[DeviceID] = set()
        shared: set[tuple[DeviceID, str]] = set()
        capacity: dict[DeviceID, dict[str, Decimal]] = {}
        for claim in claims:
            for result in claim.allocated_results():
                if result.admin_access:
                    continue
                device = result.device_id
                if features.consumable_capacity and result.share_id is not None:
                    shared.add((device, result.share_id))
                    if result.consumed_capacity:
                        have = capacity.setdefault(device, {})
                        for name, q in result.consumed_capacity.items():
                            have[name] = have.get(name, Decimal(0)) + q.value
                    continue
                devices.add(device)
        return cls(frozenset(devices), frozenset(shared), capacity)
