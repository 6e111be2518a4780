"""The slice publisher against the real API server: split, generations, stale slices, owner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from operators.api.quantity import Quantity
from operators.api.resource import ResourceSlice
from operators.driver.cdi import CDIWriter
from operators.driver.checkpoint import Checkpoint
from operators.driver.profiles import (
    A100_40GB,
    DriverConfig,
    GpuGroup,
    NicGroup,
    build_inventory,
    default_config,
)
from operators.driver.service import HOTPLUG_ANNOTATION, DriverService
from operators.driver.slices import NodeRef, SlicePublisher, plan_slices
from operators.kube.api import KubeAPI
from tests.integration.driver.conftest import DRIVER


async def _slices(kube: KubeAPI, node: str) -> dict[str, dict[str, Any]]:
    listed = await kube.list("ResourceSlice", field_selector=f"spec.nodeName={node}")
    return {item["metadata"]["name"]: item for item in listed["items"]}


def _big_config() -> DriverConfig:
    """9 A100s: 234 partition devices (4 slices of <=64) and 9 counter sets (2 slices of <=8)."""
    return DriverConfig(gpus=[GpuGroup(count=9, partitions=A100_40GB.name)], nics=[NicGroup()])


async def test_publishes_one_pool_owned_by_the_node_and_accepted_unchanged(
    kube: KubeAPI, node: dict[str, Any]
) -> None:
    name, uid = node["metadata"]["name"], node["metadata"]["uid"]
    publisher = SlicePublisher(kube, DRIVER, NodeRef(name, uid))
    inventory = build_inventory(default_config(), name)
    assert await publisher.sync(inventory) == 1
    stored = await _slices(kube, name)
    assert len(stored) == 2
    for item in stored.values():
        assert item["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid, "controller": True}
        ]
        assert item["spec"]["pool"] == {"name": name, "generation": 1, "resourceSliceCount": 2}
        # The server kept every field we sent (no feature gate silently dropped one).
        parsed = ResourceSlice.load(item)
        planned = next(
            s
            for s in plan_slices(DRIVER, publisher.node, name, inventory, 1)
            if s.metadata.name == parsed.metadata.name
        )
        assert parsed.spec == planned.spec
    devices = [d for s in stored.values() for d in s["spec"].get("devices", [])]
    nic = next(d for d in devices if d["name"] == "nic-0")
    assert nic["allowMultipleAllocations"] is True
    assert nic["capacity"]["bandwidth"]["requestPolicy"]["validRange"]["max"] == "100G"


async def test_unchanged_inventory_writes_nothing(kube: KubeAPI, node: dict[str, Any]) -> None:
    name = node["metadata"]["name"]
    publisher = SlicePublisher(kube, DRIVER, NodeRef(name, node["metadata"]["uid"]))
    inventory = build_inventory(default_config(), name)
    await publisher.sync(inventory)
    before = {n: s["metadata"]["resourceVersion"] for n, s in (await _slices(kube, name)).items()}
    assert await publisher.sync(inventory) is None
    after = {n: s["metadata"]["resourceVersion"] for n, s in (await _slices(kube, name)).items()}
    assert after == before


async def test_growth_splits_and_bumps_every_slice_then_shrink_removes_stale_ones(
    kube: KubeAPI, node: dict[str, Any]
) -> None:
    name = node["metadata"]["name"]
    publisher = SlicePublisher(kube, DRIVER, NodeRef(name, node["metadata"]["uid"]))
    assert await publisher.sync(build_inventory(default_config(), name)) == 1

    assert await publisher.sync(build_inventory(_big_config(), name)) == 2
    big = await _slices(kube, name)
    counters = [s for s in big.values() if s["spec"].get("sharedCounters")]
    devices = [s for s in big.values() if s["spec"].get("devices")]
    assert [len(s["spec"]["sharedCounters"]) for s in counters] == [8, 1]
    assert sorted(len(s["spec"]["devices"]) for s in devices) == [43, 64, 64, 64]
    assert {s["spec"]["pool"]["generation"] for s in big.values()} == {2}
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in big.values()} == {6}

    assert await publisher.sync(build_inventory(default_config(), name)) == 3
    small = await _slices(kube, name)
    assert len(small) == 2
    assert set(small) < set(big)
    assert {s["spec"]["pool"]["generation"] for s in small.values()} == {3}


async def test_foreign_and_stale_slices(kube: KubeAPI, node: dict[str, Any]) -> None:
    """A slice of ours under an old pool name goes; another driver's slice on the node stays."""
    name = node["metadata"]["name"]
    base: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "spec": {
            "pool": {"name": "old-pool", "generation": 7, "resourceSliceCount": 1},
            "nodeName": name,
            "devices": [{"name": "dev"}],
        },
    }
    await kube.create(
        dict(base, metadata={"name": f"{name}-stale"}, spec=dict(base["spec"], driver=DRIVER))
    )
    await kube.create(
        dict(
            base,
            metadata={"name": f"{name}-foreign"},
            spec=dict(base["spec"], driver="other.example.com"),
        )
    )
    publisher = SlicePublisher(kube, DRIVER, NodeRef(name, node["metadata"]["uid"]))
    # The next generation is above every generation of ours seen for the node.
    assert await publisher.sync(build_inventory(default_config(), name)) == 8
    stored = await _slices(kube, name)
    assert f"{name}-stale" not in stored
    assert f"{name}-foreign" in stored


async def test_hot_plugged_device_joins_the_node_pool(
    kube: KubeAPI, node: dict[str, Any], tmp_path: Path
) -> None:
    name = node["metadata"]["name"]
    service = DriverService(
        kube,
        driver=DRIVER,
        node_name=name,
        config=default_config(),
        cdi=CDIWriter(tmp_path / "cdi", DRIVER),
        checkpoint=Checkpoint(tmp_path / "checkpoint.json"),
    )
    assert await service.refresh() == 1
    assert await service.refresh() is None
    attached = [{"name": "fabric-gpu-7", "model": "H100", "memory": "80Gi", "uuid": "GPU-fab-7"}]
    await kube.patch(
        "Node", name, {"metadata": {"annotations": {HOTPLUG_ANNOTATION: json.dumps(attached)}}}
    )
    assert await service.refresh() == 2
    devices = {
        d["name"]: d
        for s in (await _slices(kube, name)).values()
        for d in s["spec"].get("devices", [])
    }
    plugged = devices["fabric-gpu-7"]
    assert plugged["attributes"]["hotplugged"] == {"bool": True}
    assert plugged["attributes"]["uuid"] == {"string": "GPU-fab-7"}
    assert Quantity(plugged["capacity"]["memory"]["value"]) == Quantity("80Gi")
    assert "fabric-gpu-7" in service.inventory.info

    await kube.patch("Node", name, {"metadata": {"annotations": {HOTPLUG_ANNOTATION: None}}})
    assert await service.refresh() == 3
    names = {
        d["name"]
        for s in (await _slices(kube, name)).values()
        for d in s["spec"].get("devices", [])
    }
    assert "fabric-gpu-7" not in names
