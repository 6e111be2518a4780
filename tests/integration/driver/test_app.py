"""The whole driver process in-process: start, publish, serve, pick up hot-plugs, stop."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from operators.driver.app import Driver
from operators.driver.identity import IdentityError
from operators.driver.service import HOTPLUG_ANNOTATION
from operators.driver.settings import DriverSettings
from operators.kube.api import KubeAPI
from tests.integration.driver.conftest import DRIVER
from tests.integration.driver.fake_kubelet import FakeKubelet
from tests.integration.helpers import eventually, metric_names, sample, scrape
from tests.integration.test_metrics import DRIVER as DRIVER_METRICS


async def _device_names(kube: KubeAPI, node: str) -> set[str]:
    listed = await kube.list("ResourceSlice", field_selector=f"spec.nodeName={node}")
    return {d["name"] for s in listed["items"] for d in s["spec"].get("devices", [])}


async def test_driver_runs_publishes_serves_and_follows_hot_plug(
    api: client.ApiClient, kube: KubeAPI, node: dict[str, Any], short_dir: Path, kubeconfig: Path
) -> None:
    name = node["metadata"]["name"]
    profiles = short_dir / "profiles.yaml"
    profiles.write_text("gpus:\n- count: 2\n  model: T4\n  memory: 16Gi\nnics: []\n")
    settings = DriverSettings(
        kubeconfig=str(kubeconfig),
        node_name=name,
        profiles=str(profiles),
        kubelet_dir=str(short_dir / "kubelet"),
        cdi_dir=str(short_dir / "cdi"),
        resync_seconds=0.2,
        allow_arbitrary_node_status=True,  # the test's admin identity may write any claim
        metrics_bind_address="127.0.0.1:0",
    )
    driver = Driver(settings, kube)
    stop = asyncio.Event()
    task = asyncio.create_task(driver.run(stop))
    try:
        await asyncio.wait_for(driver.started.wait(), timeout=20)
        assert await _device_names(kube, name) == {"gpu-0", "gpu-1"}
        assert driver.server.port
        status, text = await scrape(driver.server.port)
        assert status == 200
        assert metric_names(text) == DRIVER_METRICS
        assert sample(text, "kopf_dra_driver_published_devices") == 2
        assert await scrape(driver.server.port, "/readyz") == (200, "ok")
        async with FakeKubelet() as kubelet:
            info, _ = await kubelet.register(driver.plugin.registration_socket)
        assert info.name == DRIVER

        attached = [{"name": "fabric-gpu-1", "memory": "40Gi"}]
        await kube.patch(
            "Node", name, {"metadata": {"annotations": {HOTPLUG_ANNOTATION: json.dumps(attached)}}}
        )

        async def plugged() -> bool:
            return "fabric-gpu-1" in await _device_names(kube, name)

        await eventually(plugged, within=20, what="the hot-plugged fabric-gpu-1 published")
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=20)
    assert not driver.plugin.registration_socket.exists()
    assert not driver.plugin.dra_socket.exists()


async def test_driver_waits_for_its_node(kube: KubeAPI, short_dir: Path, kubeconfig: Path) -> None:
    """Started before its Node exists (a fresh node), it publishes once the Node appears."""
    name = f"late-{uuid.uuid4().hex[:8]}"
    settings = DriverSettings(
        node_name=name,
        kubelet_dir=str(short_dir / "kubelet"),
        cdi_dir=str(short_dir / "cdi"),
        resync_seconds=0.2,
        allow_arbitrary_node_status=True,  # the test's admin identity may write any claim
    )
    driver = Driver(settings, kube)
    stop = asyncio.Event()
    task = asyncio.create_task(driver.run(stop))
    try:

        async def failed_once() -> bool:
            return driver.refresh_failures >= 1

        await eventually(failed_once, within=20, what="a refresh failed for the missing Node")
        assert not driver.started.is_set()
        assert not driver.plugin.registration_socket.exists()
        await kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
        await asyncio.wait_for(driver.started.wait(), timeout=20)
        assert "gpu-0-mig-7g-40gb-0" in await _device_names(kube, name)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=20)
        listed = await kube.list("ResourceSlice", field_selector=f"spec.nodeName={name}")
        for item in listed["items"]:
            await kube.delete("ResourceSlice", item["metadata"]["name"])
        await kube.delete("Node", name)


async def test_driver_refuses_an_identity_that_may_write_any_nodes_claims(
    kube: KubeAPI, node: dict[str, Any], short_dir: Path
) -> None:
    """The test's admin identity holds resourceclaims/driver arbitrary-node:*: a node's driver
    with it could rewrite every node's device status. It says so and does not start."""
    settings = DriverSettings(
        node_name=node["metadata"]["name"],
        kubelet_dir=str(short_dir / "kubelet"),
        cdi_dir=str(short_dir / "cdi"),
        resync_seconds=0.2,
    )
    driver = Driver(settings, kube)
    with pytest.raises(IdentityError) as refused:
        await asyncio.wait_for(driver.run(asyncio.Event()), timeout=20)
    message = str(refused.value)
    assert "arbitrary-node:patch" in message
    assert "--allow-arbitrary-node-status" in message
    assert not driver.started.is_set()
    assert not driver.plugin.registration_socket.exists()
    assert await _device_names(kube, node["metadata"]["name"]) == set()
