"""The scheduler against the real API server, with the claim controllers running beside it.

Nodes and slices are API objects made by the tests (the tests play the driver and kubelet).
Each test uses its own driver name and device classes, so devices of other tests (the control
plane is shared) never match; nodes of other tests exist and must simply not fit.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from operators.controllers.scheduler.handlers import Scheduler
from operators.kube.api import KubeAPI, NotFoundError
from tests.integration.helpers import (
    bound_node,
    claim_body,
    claim_of,
    create_node,
    device_class_body,
    devices_of,
    events_with,
    eventually,
    gpu_cluster,
    gpus,
    pod_body,
    pod_condition,
    running_operator,
    slice_body,
    start_scheduler,
    template_body,
    unique,
)

# Fixtures kube, driver and controllers live in conftest.py.


@pytest.fixture
async def scheduler(kubeconfig: Any, controllers: None) -> AsyncIterator[Scheduler]:
    scheduler, registry = start_scheduler(kubeconfig)
    async with running_operator(registry, "scheduler"):
        yield scheduler


async def test_template_claim_end_to_end(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler
) -> None:
    nodes = await gpu_cluster(kube, driver, nodes=2, per_node=2)
    await kube.create(template_body("gpu-template", namespace, device_class=driver))
    await kube.create(
        pod_body("trainer", namespace, {"name": "gpu", "resourceClaimTemplateName": "gpu-template"})
    )
    node = await eventually(lambda: bound_node(kube, namespace, "trainer"), what="pod bound")
    assert node in nodes
    claim = await claim_of(kube, namespace, "trainer")
    allocation = claim["status"]["allocation"]
    assert allocation["allocationTimestamp"]
    assert devices_of(claim)[0].startswith(f"{node}/gpu-")
    assert allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [node]
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["trainer"]
    assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]
    pod = await kube.get("Pod", "trainer", namespace)
    assert not pod["metadata"].get("finalizers")
    assert not any("kopf" in k for k in pod["metadata"].get("annotations") or {})


async def test_persistent_claim_shared_by_two_pods(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler
) -> None:
    nodes = await gpu_cluster(kube, driver, nodes=3, per_node=1)
    await kube.create(claim_body("shared", namespace, device_class=driver))
    entry = {"name": "gpu", "resourceClaimName": "shared"}
    await kube.create(pod_body("a", namespace, entry))
    await kube.create(pod_body("b", namespace, entry))
    node_a = await eventually(lambda: bound_node(kube, namespace, "a"), what="a bound")
    node_b = await eventually(lambda: bound_node(kube, namespace, "b"), what="b bound")
    assert node_a == node_b
    assert node_a in nodes
    claim = await kube.get("ResourceClaim", "shared", namespace)
    assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == ["a", "b"]
    assert len(devices_of(claim)) == 1


async def test_unschedulable_pod_is_explained_and_retried_when_devices_appear(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler
) -> None:
    await create_node(kube, unique("node"))  # a node without devices: the claim is the reason
    await kube.create(device_class_body(driver, driver))
    await kube.create(template_body("gpu-template", namespace, device_class=driver))
    await kube.create(
        pod_body("patient", namespace, {"name": "gpu", "resourceClaimTemplateName": "gpu-template"})
    )

    async def unschedulable() -> dict[str, Any] | None:
        condition = await pod_condition(kube, namespace, "patient")
        return condition if condition and condition.get("reason") == "Unschedulable" else None

    condition = await eventually(unschedulable, what="PodScheduled=False")
    assert condition["status"] == "False"
    assert "nodes are available" in condition["message"]
    assert "cannot allocate claim" in condition["message"]
    events = await events_with(kube, namespace, "FailedScheduling")
    assert events[0]["type"] == "Warning"
    node = unique("node")
    await create_node(kube, node)
    await kube.create(slice_body(unique("slice"), driver, node, gpus(1)))
    # Retried on the slice event, well before the periodic retry (30 s).
    assert (
        await eventually(
            lambda: bound_node(kube, namespace, "patient"),
            within=15,
            what="bound after the slice appeared",
        )
        == node
    )


async def test_all_devices_wait_for_a_pool_being_updated(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler
) -> None:
    """A driver between slice updates (one of its pool's two slices published): a claim for
    all devices cannot be answered there; the pod says why, and binds once the slice is in."""
    node = unique("node")
    await create_node(kube, node)
    await kube.create(device_class_body(driver, driver))
    await kube.create(slice_body(unique("slice"), driver, node, gpus(2), count=2))
    claim = claim_body("every", namespace, device_class=driver)
    claim["spec"]["devices"]["requests"][0]["exactly"]["allocationMode"] = "All"
    await kube.create(claim)
    pod = pod_body("whole", namespace, {"name": "gpu", "resourceClaimName": "every"})
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}  # other tests' nodes: one reason
    await kube.create(pod)

    async def unschedulable() -> dict[str, Any] | None:
        condition = await pod_condition(kube, namespace, "whole")
        return condition if condition and condition.get("reason") == "Unschedulable" else None

    condition = await eventually(unschedulable, what="PodScheduled=False")
    assert (
        f"1 node(s) had errors in their resource pools: claim {namespace}/every, request gpu: "
        f"asks for all devices, but resource pool {driver}/{node} is currently being updated"
    ) in condition["message"]
    second = [{**d, "name": f"gpu-{i + 2}"} for i, d in enumerate(gpus(2))]
    await kube.create(slice_body(unique("slice"), driver, node, second, count=2))
    bound = await eventually(
        lambda: bound_node(kube, namespace, "whole"), within=15, what="bound after the slice"
    )
    assert bound == node
    claimed = await kube.get("ResourceClaim", "every", namespace)
    assert sorted(devices_of(claimed)) == [f"{node}/gpu-{i}" for i in range(4)]


async def test_two_pods_racing_for_the_last_device(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler
) -> None:
    await gpu_cluster(kube, driver, nodes=1, per_node=1)
    await kube.create(template_body("gpu-template", namespace, device_class=driver))
    entry = {"name": "gpu", "resourceClaimTemplateName": "gpu-template"}
    await asyncio.gather(
        kube.create(pod_body("r1", namespace, entry)), kube.create(pod_body("r2", namespace, entry))
    )

    async def one_bound_one_explained() -> bool:
        bound = [await bound_node(kube, namespace, n) for n in ("r1", "r2")]
        conditions = [await pod_condition(kube, namespace, n) for n in ("r1", "r2")]
        explained = [c for c in conditions if c and c.get("reason") == "Unschedulable"]
        return sum(1 for b in bound if b) == 1 and len(explained) == 1

    await eventually(one_bound_one_explained, what="one pod bound, the other explained")
    # Free the device: the waiting pod gets it.
    winner = "r1" if await bound_node(kube, namespace, "r1") else "r2"
    loser = "r2" if winner == "r1" else "r1"
    await kube.call(
        "DELETE", f"/api/v1/namespaces/{namespace}/pods/{winner}", body={"gracePeriodSeconds": 0}
    )
    await eventually(lambda: bound_node(kube, namespace, loser), what="the other pod bound")


async def test_many_pods_no_device_double_allocated(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler
) -> None:
    await gpu_cluster(kube, driver, nodes=5, per_node=4)
    await kube.create(template_body("gpu-template", namespace, device_class=driver))
    entry = {"name": "gpu", "resourceClaimTemplateName": "gpu-template"}
    names = [f"w{i}" for i in range(20)]
    await asyncio.gather(*(kube.create(pod_body(n, namespace, entry)) for n in names))

    async def all_bound() -> bool:
        pods = (await kube.list("Pod", namespace))["items"]
        return sum(1 for p in pods if p["spec"].get("nodeName")) == len(names)

    await eventually(all_bound, within=60, what="20 pods bound")
    claims = (await kube.list("ResourceClaim", namespace))["items"]
    devices = [d for c in claims for d in devices_of(c)]
    assert len(devices) == 20
    assert len(set(devices)) == 20
    # Each pod sits on the node of its device.
    for name in names:
        claim = await claim_of(kube, namespace, name)
        node = await bound_node(kube, namespace, name)
        assert devices_of(claim)[0].split("/")[0] == node


async def _gone(kube: KubeAPI, kind: str, name: str, namespace: str) -> bool:
    try:
        await kube.get(kind, name, namespace)
    except NotFoundError:
        return True
    return False
