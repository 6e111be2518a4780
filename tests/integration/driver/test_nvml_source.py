"""The NVML source (over the H100 fixture's fake NVML) against the local control plane's API
server: it accepts what the driver publishes, and an Xid event taints the GPU there."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from operators.driver import nvidia
from operators.driver.cdi import CDIWriter
from operators.driver.checkpoint import Checkpoint
from operators.driver.health import taint_key
from operators.driver.nvml_fixture import FixtureNvml
from operators.driver.service import DriverService
from operators.driver.sources import NvmlSource
from operators.kube.api import KubeAPI

from .conftest import DRIVER

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "gpu" / "nvidia-h100-80gb-hbm3"
UUID = "GPU-e12c465b-7250-edd3-93a8-8110a161e2c0"

pytestmark = pytest.mark.integration


def _service(kube: KubeAPI, node: dict[str, Any], tmp: Path, source: NvmlSource) -> DriverService:
    return DriverService(
        kube,
        driver=DRIVER,
        node_name=node["metadata"]["name"],
        source=source,
        cdi=CDIWriter(tmp / "cdi", DRIVER),
        checkpoint=Checkpoint(tmp / "checkpoint.json"),
    )


async def _devices(kube: KubeAPI, name: str) -> dict[str, dict[str, Any]]:
    listed = await kube.list("ResourceSlice", field_selector=f"spec.nodeName={name}")
    return {d["name"]: d for s in listed["items"] for d in s["spec"].get("devices", [])}


@pytest.mark.parametrize(("mig", "dynamic", "count"), [(False, False, 1), (True, True, 25)])
async def test_the_api_server_accepts_the_published_gpu(
    kube: KubeAPI, node: dict[str, Any], tmp_path: Path, mig: bool, dynamic: bool, count: int
) -> None:
    source = NvmlSource(FixtureNvml(FIXTURE, mig=mig), dynamic_mig=dynamic)
    service = _service(kube, node, tmp_path, source)
    assert await service.refresh() == 1
    devices = await _devices(kube, node["metadata"]["name"])
    assert len(devices) == count
    some = next(iter(devices.values()))
    assert some["attributes"]["gpu.nvidia.com/productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    assert some["attributes"]["gpu.nvidia.com/driverVersion"] == {"version": "580.159.4"}


async def test_an_xid_event_makes_the_gpu_unhealthy_then_tainted(
    kube: KubeAPI, node: dict[str, Any], tmp_path: Path
) -> None:
    backend = FixtureNvml(FIXTURE)
    source = NvmlSource(backend, event_timeout_ms=10)
    service = _service(kube, node, tmp_path, source)
    await service.refresh()
    assert [h.healthy for h in service.health] == [True]
    stop = asyncio.Event()

    async def report(device: str, why: str) -> None:
        await service.report_unhealthy(device, why)
        stop.set()

    backend.inject(nvidia.HealthEvent(nvidia.EVENT_XID_CRITICAL, UUID, 79))
    await asyncio.wait_for(source.watch(report, stop), 30)
    (health,) = service.health
    assert not health.healthy
    assert "fell off the bus" in health.message
    gpu = (await _devices(kube, node["metadata"]["name"]))["gpu-0"]
    (taint,) = gpu["taints"]
    assert (taint["key"], taint["effect"]) == (taint_key(DRIVER), "NoSchedule")
