"""DRANodeAllocatableResources (KEP-5517, 1.37 alpha) against a real 1.37 API server: a device
that maps to the node's cpu counts there, in the pod's status and in the node's room.

The gate is alpha: the control plane here is started with 1.37's alpha gates on (as
``test_api_137``'s), and the scheduler runs in process with the same gates.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from operators.api.features import Release
from operators.kube.api import KubeAPI
from operators.kube.client import make_api_client
from operators.localcluster import controlplane
from tests.integration.helpers import (
    bound_node,
    claim_body,
    create_namespace,
    create_node,
    device_class_body,
    eventually,
    pod_body,
    pod_condition,
    running_operator,
    slice_body,
    start_scheduler,
    unique,
)
from tests.unit.api.release_cases import GATES_137

pytestmark = pytest.mark.integration

VERSION = controlplane.kubernetes_version()
RELEASE = Release.parse(VERSION)
R137 = Release(1, 37)


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.ControlPlane]:
    """A 1.37 control plane with its alpha DRA gates on (DRANodeAllocatableResources among
    them)."""
    if RELEASE < R137 or os.environ.get("KOPF_DRA_USE_EXISTING_CLUSTER") == "1":
        pytest.skip(f"DRANodeAllocatableResources is 1.37's: the local control plane is {VERSION}")
    cp = controlplane.ControlPlane(
        state_dir=tmp_path_factory.mktemp("node-allocatable-control-plane"),
        bin_dir=controlplane.ensure_binaries(),
        extra_gates=GATES_137,
        runtime_config="resource.k8s.io/v1alpha3=true,scheduling.k8s.io/v1beta1=true",
    )
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="module")
async def kube(gated: controlplane.ControlPlane) -> AsyncIterator[KubeAPI]:
    async with await make_api_client(gated.kubeconfig) as api_client:
        yield KubeAPI(api_client, release=R137)


@pytest.fixture(scope="module")
async def scheduler(gated: controlplane.ControlPlane) -> AsyncIterator[None]:
    _, registry = start_scheduler(
        gated.kubeconfig,
        feature_gates=gated.gates,
        kubernetes_version=str(RELEASE),
        lease_name=unique("scheduler"),
    )
    async with running_operator(registry, "scheduler"):
        yield


def _pod(name: str, namespace: str, claim: str, node: str, cpu: str) -> dict[str, Any]:
    body = pod_body(name, namespace, {"name": "cpus", "resourceClaimName": claim})
    body["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    body["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": cpu},
        "claims": [{"name": "cpus"}],
    }
    return body


async def test_mapped_cpu_counts_on_the_node(kube: KubeAPI, scheduler: None) -> None:
    """A claim of one device that maps to 2 cpus: the first pod (1 cpu of its own) binds
    with its claim's share in its status; the second (500m of its own, so it passes
    NodeResourcesFit) does not find the 2.5 cpus it takes in what is left of 4."""
    node_name = unique("cpu-node")
    node = await create_node(kube, node_name, cpu="4")
    # 1.37's NodeDeclaredFeatures admission: a slice whose devices take node resources
    # must name a node that declares the feature.
    node["status"]["declaredFeatures"] = ["DRANodeAllocatableResources"]
    await kube.replace_status(node)
    namespace = await create_namespace(kube.api_client)
    driver = f"{unique('cpu')}.example.com"
    klass = unique("cpus")
    await kube.create(device_class_body(klass, driver))
    cores = [
        {
            "name": f"ccx-{i}",
            "nodeAllocatableResources": {"cpu": {"mapping": {"deviceMultiplier": "2"}}},
        }
        for i in range(2)
    ]
    await kube.create(slice_body(unique("slice"), driver, node_name, cores))
    for claim in ("first", "second"):
        await kube.create(claim_body(claim, namespace, klass))

    await kube.create(_pod("first", namespace, "first", node_name, "1"))

    async def first_bound() -> str | None:
        return await bound_node(kube, namespace, "first")

    assert await eventually(first_bound, what="the first pod bound") == node_name
    pod = await kube.get("Pod", "first", namespace)
    assert pod["status"]["nodeAllocatableResourceClaimStatuses"] == [
        {
            "resourceClaimName": "first",
            "containers": ["main"],
            "mapping": [{"name": "cpu", "quantity": "2"}],
        }
    ]

    await kube.create(_pod("second", namespace, "second", node_name, "500m"))

    async def second_refused() -> dict[str, Any] | None:
        condition = await pod_condition(kube, namespace, "second")
        if condition is None or condition.get("reason") != "Unschedulable":
            return None
        return condition

    condition = await eventually(second_refused, what="the second pod unschedulable")
    assert "1 Insufficient cpu" in condition["message"]
    assert await bound_node(kube, namespace, "second") is None
