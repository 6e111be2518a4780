"""DRANodeAllocatableResources (KEP-5517, 1.37 alpha) against a real 1.37 API server: a device
that maps to the node's cpu counts there, in the pod's status and in the node's room.

The gate is alpha: the control plane here is started with 1.37's alpha gates on (as
``test_api_137``'s); kopf-dra's scheduler runs in process and kube-scheduler 1.37.2 beside it,
both with the same gates, and each places one copy of the scene.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from operators.api.features import Release, format_feature_gates
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
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.ControlPlane]:
    """A 1.37 control plane with its alpha DRA gates on (DRANodeAllocatableResources among
    them)."""
    if RELEASE < R137 or os.environ.get("KOPF_DRA_USE_EXISTING_CLUSTER") == "1":
        pytest.skip(f"DRANodeAllocatableResources is 1.37's: the local control plane is {VERSION}")
    with controlplane.running(
        tmp_path_factory.mktemp("node-allocatable-control-plane"),
        extra_gates=GATES_137,
        # The local control plane's scheduling.k8s.io versions (1.37: CompositePodGroup in
        # v1alpha3, which kube-scheduler watches with the gate on), DeviceTaintRule in v1 only.
        runtime_config=",".join(
            item
            for item in controlplane.runtime_config(VERSION).split(",")
            if item != "resource.k8s.io/v1beta2=true"
        ),
    ) as cp:
        yield cp


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


@pytest.fixture(scope="module")
def kube_scheduler(gated: controlplane.ControlPlane) -> Iterator[None]:
    """kube-scheduler of the release under test (built once into the cache), with the same
    gates, beside kopf-dra's: each places the pods that name it."""
    built = subprocess.run(
        ["bash", str(ROOT / "hack" / "controlplane" / "build-upstream.sh")],
        capture_output=True,
        text=True,
        check=True,
    )
    binary = Path(built.stdout.strip().splitlines()[-1]) / "kube-scheduler"
    with open(gated.state_dir / "kube-scheduler.log", "ab") as log:
        process = subprocess.Popen(
            [
                str(binary),
                f"--kubeconfig={gated.kubeconfig}",
                f"--feature-gates={format_feature_gates(gated.gates)}",
                "--leader-elect=false",
                "--secure-port=0",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        yield
    finally:
        process.terminate()
        process.wait(30)


def _pod(
    name: str, namespace: str, claim: str, node: str, cpu: str, scheduler: str
) -> dict[str, Any]:
    body = pod_body(
        name, namespace, {"name": "cpus", "resourceClaimName": claim}, scheduler=scheduler
    )
    body["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    body["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": cpu},
        "claims": [{"name": "cpus"}],
    }
    return body


async def _scene(kube: KubeAPI, scheduler: str) -> tuple[Any, str]:
    """A claim of one device that maps to 2 cpus: the first pod (1 cpu of its own) binds
    with its claim's share in its status; the second (500m of its own, so it passes
    NodeResourcesFit) does not find the 2.5 cpus it takes in what is left of 4. Returns the
    first pod's statuses and the second's Unschedulable message."""
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

    await kube.create(_pod("first", namespace, "first", node_name, "1", scheduler))

    async def first_bound() -> str | None:
        return await bound_node(kube, namespace, "first")

    assert await eventually(first_bound, what="the first pod bound") == node_name
    pod = await kube.get("Pod", "first", namespace)
    statuses = pod["status"].get("nodeAllocatableResourceClaimStatuses")

    await kube.create(_pod("second", namespace, "second", node_name, "500m", scheduler))

    async def second_refused() -> dict[str, Any] | None:
        condition = await pod_condition(kube, namespace, "second")
        if condition is None or condition.get("reason") != "Unschedulable":
            return None
        return condition

    condition = await eventually(second_refused, what="the second pod unschedulable")
    assert await bound_node(kube, namespace, "second") is None
    return statuses, str(condition["message"])


async def test_mapped_cpu_counts_on_the_node_as_kube_scheduler_counts_it(
    kube: KubeAPI, scheduler: None, kube_scheduler: None
) -> None:
    """The same scene for kopf-dra's scheduler and for kube-scheduler 1.37.2: the same
    statuses on the first pod, the same reason for the second."""
    ours, our_message = await _scene(kube, "kopf-dra")
    theirs, their_message = await _scene(kube, "default-scheduler")
    assert ours == [
        {
            "resourceClaimName": "first",
            "containers": ["main"],
            "mapping": [{"name": "cpu", "quantity": "2"}],
        }
    ]
    assert ours == theirs
    assert "1 Insufficient cpu" in their_message
    assert "1 Insufficient cpu" in our_message
