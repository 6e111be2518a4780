"""The H100 fixture as the driver publishes it, and the allocator run over its slices."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from operators.allocator import AllocatedState, Allocator, Features, Outcome
from operators.allocator.selectors import CelSelectorEngine
from operators.api.core import Node
from operators.api.resource import DeviceClass, ResourceClaim, ResourceSlice
from operators.driver.nvml_fixture import FixtureNvml
from operators.driver.profiles import Inventory
from operators.driver.slices import NodeRef, plan_slices
from operators.driver.sources import NvmlSource

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "gpu" / "nvidia-h100-80gb-hbm3"
DRIVER = "example.kopf-dra.io"
NODE = "gpu-node"
CLASS = "gpu.nvidia.com"
_ENGINE = CelSelectorEngine()


def source(
    *, mig: bool = False, dynamic: bool = False, instances: tuple[tuple[int, int], ...] = ()
) -> NvmlSource:
    return NvmlSource(FixtureNvml(FIXTURE, mig=mig, instances=instances), dynamic_mig=dynamic)


def slices(inventory: Inventory) -> list[ResourceSlice]:
    return plan_slices(DRIVER, NodeRef(NODE, "uid"), NODE, inventory, 1)


def device_class() -> DeviceClass:
    return DeviceClass.load(
        {
            "metadata": {"name": CLASS},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
        }
    )


def claim(name: str, *selectors: list[str]) -> ResourceClaim:
    """One request per entry, each with its CEL selectors."""
    requests = [
        {
            "name": f"r{i}",
            "exactly": {
                "deviceClassName": CLASS,
                "selectors": [{"cel": {"expression": e}} for e in exprs],
            },
        }
        for i, exprs in enumerate(selectors)
    ]
    return ResourceClaim.load(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": name},
            "spec": {"devices": {"requests": requests}},
        }
    )


def profile_selector(profile: str) -> list[str]:
    return [f"device.attributes['gpu.nvidia.com'].profile == '{profile}'"]


def allocate(
    published: list[ResourceSlice],
    claims: list[ResourceClaim],
    allocated: Sequence[ResourceClaim] = (),
) -> Outcome:
    features = Features.all()
    allocator = Allocator(
        features,
        AllocatedState.from_claims(allocated, features),
        [device_class()],
        published,
        _ENGINE,
        share_ids=lambda: "share",
    )
    node = Node.load({"metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}}})
    return allocator.allocate(node, claims)
