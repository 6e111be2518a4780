"""numa-alignment: a GPU and a NIC share on one NUMA node (``matchAttribute`` on the standard
``resource.kubernetes.io/numaNode``, which the example driver publishes from its profile's
``numaNode``). No gate: it runs on the session's cluster like test_scenarios' examples."""

from __future__ import annotations

from typing import Any

from e2e.conftest import VariantApply
from e2e.test_scenarios import all_but_one_placed
from operators.demo.bringup import DRIVER
from operators.demo.view import scheduled_condition
from operators.kube.api import KubeAPI

NUMA = "resource.kubernetes.io/numaNode"


async def numa_nodes(kube: KubeAPI) -> dict[tuple[str, str], int | None]:
    """(pool, device) of the example driver's devices: their NUMA node, as published."""
    found: dict[tuple[str, str], int | None] = {}
    for s in (await kube.list("ResourceSlice"))["items"]:
        if s["spec"]["driver"] != DRIVER:
            continue
        for device in s["spec"].get("devices") or []:
            attribute: dict[str, Any] = (device.get("attributes") or {}).get(NUMA) or {}
            found[(s["spec"]["pool"]["name"], device["name"])] = attribute.get("int")
    return found


async def test_numa_alignment_pairs_a_gpu_and_a_nic_on_one_numa_node(
    scenario: VariantApply, kube: KubeAPI
) -> None:
    s = await scenario("numa-alignment")
    pods = await s.settled(expected_pods=3, bound=2)
    placed = all_but_one_placed(pods, "one aligned GPU and NIC per worker: one pod must wait")
    assert len({p["spec"]["nodeName"] for p in placed}) == 2, "one pod on each worker"
    numa = await numa_nodes(kube)
    for pod in placed:
        results = {r["request"]: r for r in await s.devices(pod)}
        assert sorted(results) == ["gpu", "nic"]
        gpu, nic = results["gpu"], results["nic"]
        assert gpu["pool"] == nic["pool"] == pod["spec"]["nodeName"]
        # The A100 (whole) and the NIC: the T4 (gpu-1) sits on NUMA node 1.
        assert (gpu["device"], nic["device"]) == ("gpu-0", "nic-0"), (gpu, nic)
        assert numa[(gpu["pool"], gpu["device"])] == numa[(nic["pool"], nic["device"])] == 0
    for node in {p["spec"]["nodeName"] for p in placed}:
        assert numa[(node, "gpu-1")] == 1, "the T4 is free but on the other NUMA node"
    (waiting,) = [p for p in pods if not p["spec"].get("nodeName")]
    assert not await s.devices(waiting)
    condition = scheduled_condition(waiting)
    assert condition is not None
    assert "cannot allocate claim kopf-dra-numa/numa-" in condition["message"], condition
