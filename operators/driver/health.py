"""Simulated device health (KEP-4680): what the kubelet hears and what the slices say.

The hardware is simulated, so health is a setting: a device named in ``--unhealthy-devices``
(or a partition of a GPU named there) is unhealthy, every other published device healthy. The
kubelet opens the DRA health service's ``NodeWatchResources`` stream on every registered driver
and shows the answer in ``status.containerStatuses[].allocatedResourcesStatus`` of the pods using
the device; the driver also publishes the device with a ``NoSchedule`` DeviceTaint so that no
scheduler picks it again (the upstream pattern). Planning here is pure; the stream lives in the
service and the plugin.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

from operators.api.resource import DeviceTaint
from operators.driver.profiles import Inventory

TAINT_EFFECT = "NoSchedule"
#: How long the kubelet trusts one report (it turns silent devices Unknown after that); the
#: stream repeats the report well within it.
HEALTH_TIMEOUT_SECONDS = 30
UNHEALTHY_MESSAGE = "marked unhealthy by the driver's --unhealthy-devices setting"


def taint_key(driver: str) -> str:
    return f"{driver}/unhealthy"


@dataclass(frozen=True, slots=True)
class DeviceHealth:
    """One device's health as the driver reports it to the kubelet."""

    pool: str
    device: str
    healthy: bool
    message: str = ""


def unhealthy_devices(inventory: Inventory, marked: Collection[str]) -> frozenset[str]:
    """Devices named in ``marked``, and the partitions of a GPU named there."""
    return frozenset(
        name
        for name, info in inventory.info.items()
        if name in marked or (info.parent is not None and info.parent in marked)
    )


def health_report(
    inventory: Inventory,
    pool: str,
    unhealthy: Collection[str],
    reasons: Mapping[str, str] | None = None,
) -> list[DeviceHealth]:
    """Every published device, in publishing order; ``reasons`` says why a device (or its
    GPU) is unhealthy when the hardware said so (NVML events), else the setting did."""
    reasons = reasons or {}

    def why(name: str) -> str:
        if name not in unhealthy:
            return ""
        info = inventory.info.get(name)
        parent = info.parent if info is not None else None
        return reasons.get(name) or reasons.get(parent or "") or UNHEALTHY_MESSAGE

    names = [d.name or "" for d in inventory.devices]
    return [DeviceHealth(pool, n, n not in unhealthy, why(n)) for n in names]


def with_taints(inventory: Inventory, driver: str, since: Mapping[str, str]) -> Inventory:
    """The inventory with a NoSchedule taint on each device of ``since`` (device -> when it
    turned unhealthy, so that the published slices stay equal from one resync to the next)."""
    if not since:
        return inventory
    key = taint_key(driver)
    devices = []
    for device in inventory.devices:
        added = since.get(device.name or "")
        if added is not None and not any(t.key == key for t in device.taints):
            device = device.model_copy(deep=True)
            device.taints.append(DeviceTaint(key=key, effect=TAINT_EFFECT, time_added=added))
        devices.append(device)
    return replace(inventory, devices=tuple(devices))
