"""Builders for devices and slices as the CEL layer sees them (real API models)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from operators.api.quantity import Quantity
from operators.api.resource import Device, DeviceAttribute, DeviceCapacity
from operators.cel import CELEnvironment, SliceKey

AttrValue = int | bool | str | list[int] | list[bool] | list[str]


def attribute(value: AttrValue, *, version: bool = False) -> DeviceAttribute:
    return DeviceAttribute.of(value, version=version)


def device(
    name: str,
    attributes: Mapping[str, DeviceAttribute] | None = None,
    capacity: Mapping[str, str] | None = None,
    *,
    allow_multiple_allocations: bool | None = None,
) -> Device:
    return Device(
        name=name,
        attributes=dict(attributes or {}),
        capacity={k: DeviceCapacity(value=Quantity(v)) for k, v in (capacity or {}).items()},
        allow_multiple_allocations=allow_multiple_allocations,
    )


GPU_DRIVER = "gpu.example.com"

# A realistic GPU: unqualified names land in the driver's domain, qualified ones in theirs.
GPU = device(
    "gpu-0",
    {
        "model": attribute("a100"),
        "memoryGB": attribute(80),
        "mig": attribute(True),
        "profile": attribute("1g.5gb"),
        "driverVersion": attribute("12.4.0", version=True),
        "gpu.example.com/tags": attribute(["fast", "nvlink"]),
        "ports": attribute([8080, 9090]),
        "flags": attribute([True]),
        "compat": attribute(["1.0.0", "2.1.0"], version=True),
        "numa.example.com/node": attribute(1),
        "net.example.com/ip": attribute("10.1.2.3"),
        "net.example.com/cidr": attribute("10.1.0.0/16"),
    },
    {"memory": "80Gi", "cores": "108", "gpu.example.com/slices": "7"},
    allow_multiple_allocations=True,
)
GPU_KEY = SliceKey(uid="slice-gpu", generation=1, driver=GPU_DRIVER)

TPU = device("tpu-0", {"topology": attribute("4x4")}, {"tpus": "8"})
TPU_KEY = SliceKey(uid="slice-tpu", generation=3, driver="tpu.google.com")

PLAIN = device("plain-0")
PLAIN_KEY = SliceKey(uid="slice-plain", generation=1, driver="plain.example.com")


@pytest.fixture
def env() -> CELEnvironment:
    return CELEnvironment()
