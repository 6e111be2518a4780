"""The examples of Kubernetes 1.37's alpha DRA features, applied unchanged: compatibility-groups
(DRADeviceCompatibilityGroups), derived-attributes (DRADerivedAttributes) and node-allocatable
(DRANodeAllocatableResources).

The gates are alpha, off in the session's control plane (its API server drops the fields), so
this module starts a control plane of its own with them on, two virtual nodes like the session's
(declaring DRANodeAllocatableResources, as a kubelet with the gate on does), their drivers and
the operators with the same gates. ``kube`` and ``system`` are this module's: conftest's
``scenario`` applies the examples here. Skipped on 1.36 (it has none of these fields) and on an
existing cluster (whose gates this suite does not set).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.conftest import Scenario, VariantApply
from e2e.test_scenarios import all_but_one_placed, bound, by_name
from operators.api.quantity import Quantity
from operators.demo.bringup import E2E_NODES, EXAMPLES, System, start_system
from operators.demo.view import scheduled_condition
from operators.kube.api import KubeAPI, NotFoundError, resource_of
from operators.kube.client import make_api_client
from operators.localcluster import controlplane, manifests
from tests.integration.helpers import eventually

#: The alpha gates the three examples need, on top of the release's (NodeDeclaredFeatures,
#: which DRANodeAllocatableResources' admission relies on, is GA in 1.37).
GATES = {
    "DRADeviceCompatibilityGroups": True,
    "DRADerivedAttributes": True,
    "DRANodeAllocatableResources": True,
}
#: The node the examples' hand-published slices name.
WORKER = "kopf-dra-worker"

pytestmark = pytest.mark.alpha_137  # not collected on 1.36 nor on an existing cluster


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.ControlPlane]:
    with controlplane.running(
        tmp_path_factory.mktemp("gated-control-plane"), extra_gates=GATES
    ) as cp:
        yield cp


@pytest.fixture(scope="module")
async def kube(gated: controlplane.ControlPlane) -> AsyncIterator[KubeAPI]:
    async with await make_api_client(gated.kubeconfig) as api_client:
        yield KubeAPI(api_client)


@pytest.fixture(scope="module")
async def system(
    kube: KubeAPI, gated: controlplane.ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[System]:
    nodes = tuple(
        dataclasses.replace(n, declared_features=("DRANodeAllocatableResources",))
        for n in E2E_NODES
    )
    started = await start_system(
        kube,
        Path(gated.kubeconfig),
        nodes=nodes,
        log_dir=tmp_path_factory.mktemp("gated-logs"),
        fabric=False,
        feature_gates=gated.gates,
    )
    try:
        yield started
    finally:
        started.stop()


def unschedulable_message(pod: dict[str, Any]) -> str:
    condition = scheduled_condition(pod)
    assert condition is not None, pod["metadata"]["name"]
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable"), condition
    return str(condition["message"])


async def delete_now(kube: KubeAPI, pod: dict[str, Any]) -> None:
    """No kubelet confirms a graceful deletion on virtual nodes: delete at once."""
    meta = pod["metadata"]
    path = resource_of("Pod").path(meta["namespace"], meta["name"])
    options = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
    with contextlib.suppress(NotFoundError):
        await kube.call("DELETE", path, body=options)


async def memory_counter(kube: KubeAPI, driver: str) -> tuple[Quantity, Quantity] | None:
    """(consumed, total) of counter set gpu-0's memory, as the pool validator reports it."""
    for status in (await kube.list("ResourcePoolStatus"))["items"]:
        if status["spec"]["driver"] != driver:
            continue
        for counter_set in (status.get("status") or {}).get("counterSets") or []:
            for counter in counter_set.get("counters") or []:
                if (counter_set["name"], counter["name"]) == ("gpu-0", "memory"):
                    return Quantity(counter["consumed"]), Quantity(counter["total"])
    return None


async def test_compatibility_groups_keep_one_split_of_the_gpu(
    scenario: VariantApply, kube: KubeAPI
) -> None:
    s = await scenario("compatibility-groups")
    (first,) = await s.settled(expected_pods=1, bound=1)
    assert first["spec"]["nodeName"] == WORKER
    (taken,) = await s.devices(first)
    assert (taken["driver"], taken["pool"]) == ("splitgpu.example.kopf-dra.io", WORKER)
    assert taken["device"].startswith("gpu-0-mig-1g-5gb-"), taken

    await manifests.apply(kube, manifests.load_directory(EXAMPLES / s.name / "next"))
    pods = by_name(await s.settled(expected_pods=3, bound=2))
    assert sorted(p["metadata"]["name"] for p in bound(list(pods.values()))) == ["mig-1", "mig-2"]
    assert pods["mig-2"]["spec"]["nodeName"] == WORKER
    (second,) = await s.devices(pods["mig-2"])
    assert second["device"].startswith("gpu-0-mig-1g-5gb-"), second
    assert second["device"] != taken["device"]
    assert not pods["mps-1"]["spec"].get("nodeName"), "an MPS share does not go with MIG slices"
    message = unschedulable_message(pods["mps-1"])
    assert "cannot allocate claim kopf-dra-compat/mps-1-gpu-" in message, message
    assert "incompatible groups: counter set gpu-0: its groups (mps) share none" in message, message
    assert not await s.devices(pods["mps-1"])

    async def counted() -> tuple[Quantity, Quantity] | None:
        found = await memory_counter(kube, "splitgpu.example.kopf-dra.io")
        return found if found is not None and found[0] == Quantity("10Gi") else None

    # The counter has room for a 10Gi share: the group alone keeps mps-1 out.
    _, total = await eventually(counted, what="two MIG slices counted by the validator")
    assert total == Quantity("40Gi")

    for name in ("mig-1", "mig-2"):
        await delete_now(kube, pods[name])

    async def mps_bound() -> dict[str, Any] | None:
        pod = by_name(await s.pods()).get("mps-1")
        return pod if pod is not None and pod["spec"].get("nodeName") else None

    mps = await eventually(mps_bound, within=60, what="mps-1 bound once the MIG slices are gone")
    (share,) = await s.devices(mps)
    assert share["device"].startswith("gpu-0-mps-10gb-"), share


async def test_derived_attributes_pair_gpus_under_one_pcie_root(scenario: VariantApply) -> None:
    s = await scenario("derived-attributes")
    pods = await s.settled(expected_pods=2, bound=1)
    (placed,) = all_but_one_placed(pods, "one GPU pair shares a root: exactly one pod must wait")
    assert placed["spec"]["nodeName"] == WORKER
    results = await s.devices(placed)
    assert {(r["driver"], r["pool"]) for r in results} == {("pcigpu.example.kopf-dra.io", WORKER)}
    assert sorted(r["device"] for r in results) == ["gpu-1", "gpu-3"], "both under pci0000:3a"
    (waiting,) = [p for p in pods if p is not placed]
    message = unschedulable_message(waiting)
    assert "cannot allocate claim kopf-dra-derived/pair-" in message, message
    assert f"enough devices on {WORKER} for each request alone, but not together" in message
    assert not await s.devices(waiting), "gpu-0 and gpu-2 are free but under different roots"
    # The API server kept the request's derived attribute (the gate is on there).
    (claim,) = [c for c in (await s.claims()).values() if c.get("status", {}).get("allocation")]
    (request,) = claim["spec"]["devices"]["requests"]
    (derived,) = request["exactly"]["derivedAttributes"]
    assert derived["name"] == "example.kopf-dra.io/pcieRoot"


async def test_node_allocatable_resources_count_against_the_node(
    scenario: VariantApply, kube: KubeAPI
) -> None:
    node = await kube.get("Node", WORKER)
    assert Quantity(node["status"]["allocatable"]["cpu"]) == Quantity("32")
    assert "DRANodeAllocatableResources" in node["status"]["declaredFeatures"]
    s: Scenario = await scenario("node-allocatable")
    pods = await s.settled(expected_pods=4, bound=3)
    placed = all_but_one_placed(pods, "9 cpus a pod on a node of 32: exactly one pod must wait")
    devices = set()
    for pod in placed:
        assert pod["spec"]["nodeName"] == WORKER
        (result,) = await s.devices(pod)
        assert result["driver"] == "transcoder.example.kopf-dra.io"
        devices.add(result["device"])
        (claim_name,) = [
            name
            for name in (pod["status"].get("resourceClaimStatuses") or [])
            if name["name"] == "vpu"
        ]
        assert pod["status"]["nodeAllocatableResourceClaimStatuses"] == [
            {
                "resourceClaimName": claim_name["resourceClaimName"],
                "containers": ["main"],
                "mapping": [{"name": "cpu", "quantity": "8"}],
                "overhead": [{"name": "memory", "perPod": "2Gi"}],
            }
        ]
    assert len(devices) == 3, devices
    (waiting,) = [p for p in pods if not p["spec"].get("nodeName")]
    message = unschedulable_message(waiting)
    assert "1 Insufficient cpu" in message, message
    assert not await s.devices(waiting), "a transcoder is left, but not the cpus it takes"
