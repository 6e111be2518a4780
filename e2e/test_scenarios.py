"""Each example of manifests/examples/ does what its README promises."""

from __future__ import annotations

import contextlib
import re
from collections import defaultdict
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any

from e2e.conftest import IN_CLUSTER, Scenario
from operators.api.features import KubernetesVersion, Release
from operators.api.quantity import Quantity
from operators.demo.bringup import EXAMPLES, FABRIC_LABEL, RACK_LABEL
from operators.demo.view import allocated_devices, scheduled_condition
from operators.kube.api import KubeAPI, NotFoundError, resource_of
from operators.localcluster import manifests
from tests.integration.helpers import eventually

Apply = Callable[[str], Awaitable[Scenario]]


def by_name(pods: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in pods}


def bound(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if p["spec"].get("nodeName")]


def all_but_one_placed(pods: list[dict[str, Any]], why: str) -> list[dict[str, Any]]:
    """The bound pods, once the one left over is known to wait as unschedulable."""
    placed = bound(pods)
    assert len(placed) == len(pods) - 1, why
    (waiting,) = [p for p in pods if not p["spec"].get("nodeName")]
    condition = scheduled_condition(waiting)
    assert condition is not None
    assert condition["reason"] == "Unschedulable"
    return placed


async def assert_counters_within_totals(kube: KubeAPI) -> None:
    """The pool validator's view: no counter consumed beyond its total, no pool problem."""
    for status in (await kube.list("ResourcePoolStatus"))["items"]:
        st = status.get("status") or {}
        assert not st.get("problems"), (status["spec"], st.get("problems"))
        for counter_set in st.get("counterSets") or []:
            for counter in counter_set.get("counters") or []:
                consumed, total = Quantity(counter["consumed"]), Quantity(counter["total"])
                assert not total < consumed, (counter_set["name"], counter)


async def test_mig_partitions(scenario: Apply, kube: KubeAPI) -> None:
    s = await scenario("mig-partitions")
    pods = by_name(await s.settled(expected_pods=4, bound=4))
    assert all(p["spec"].get("nodeName") for p in pods.values()), "every MIG workload fits"
    expected = {"train": "mig-3g-20gb", "infer": "mig-2g-10gb", "notebook": "mig-1g-5gb-"}
    taken: set[str] = set()
    for name, profile in expected.items():
        (result,) = await s.devices(pods[name])
        assert profile in result["device"], (name, result["device"])
        assert result["pool"] == pods[name]["spec"]["nodeName"]
        taken.add(f"{result['pool']}/{result['device']}")
    pair = await s.devices(pods["pair"])
    assert sorted(r["request"] for r in pair) == ["first", "second"]
    assert all("mig-1g-5gb-" in r["device"] for r in pair)
    assert len({r["device"].split("-mig-")[0] for r in pair}) == 1, "one parent GPU"
    taken |= {f"{r['pool']}/{r['device']}" for r in pair}
    assert len(taken) == 5, "no partition handed out twice"
    await assert_counters_within_totals(kube)


async def test_multi_host_shared_claim(scenario: Apply, kube: KubeAPI) -> None:
    s = await scenario("multi-host-shared-claim")
    pods = await s.settled(expected_pods=2, bound=2)
    nodes = {p["spec"].get("nodeName") for p in pods}
    assert None not in nodes, "both workers bound"
    assert len(nodes) == 2, "two workers on two hosts"
    for node in nodes:
        labels = (await kube.get("Node", str(node)))["metadata"]["labels"]
        assert labels[RACK_LABEL] == "rack-a"
    claim = await kube.get("ResourceClaim", "rack-a-link", "kopf-dra-multihost")
    (result,) = allocated_devices(claim)
    assert (result["driver"], result["device"]) == (
        "interconnect.example.kopf-dra.io",
        "rack-a-link",
    )
    reserved = {r["name"] for r in claim["status"]["reservedFor"]}
    assert reserved == {"worker-0", "worker-1"}
    terms = claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["key"] == RACK_LABEL, "the device's selector"


async def test_extended_resources(scenario: Apply) -> None:
    s = await scenario("extended-resources")
    (pod,) = await s.settled(expected_pods=1, bound=1)
    status = pod["status"]["extendedResourceClaimStatus"]
    (mapping,) = status["requestMappings"]
    assert (mapping["containerName"], mapping["resourceName"]) == (
        "main",
        "example.kopf-dra.io/gpu",
    )
    (claim,) = [
        c
        for c in (await s.claims()).values()
        if c["metadata"]["name"] == status["resourceClaimName"]
    ]
    assert (
        claim["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"] == "true"
    )
    (result,) = await s.devices(pod)
    assert result["request"] == mapping["requestName"]
    assert result["pool"] == pod["spec"]["nodeName"]
    assert re.fullmatch(r"gpu-\d+", result["device"]), result  # a whole GPU, as the class says


async def test_prioritized_alternatives(scenario: Apply) -> None:
    s = await scenario("prioritized-alternatives")
    pods = await s.settled(expected_pods=4, bound=4)
    assert len(bound(pods)) == 4
    requests = sorted([r["request"] for p in pods for r in await s.devices(p)])
    assert requests == ["gpu/a100", "gpu/a100", "gpu/t4", "gpu/t4"]


async def test_shared_nic_bandwidth_across_namespaces(scenario: Apply) -> None:
    s = await scenario("shared-nic-bandwidth")
    placed = all_but_one_placed(
        await s.settled(expected_pods=5, bound=4),
        "240G asked of two 100G NICs: exactly one pod must wait",
    )
    used: dict[str, Decimal] = defaultdict(Decimal)
    teams: dict[str, set[str]] = defaultdict(set)
    for pod in placed:
        (result,) = await s.devices(pod)
        key = f"{result['pool']}/{result['device']}"
        used[key] += Quantity(result["consumedCapacity"]["bandwidth"]).value
        teams[key].add(pod["metadata"]["namespace"])
    assert all(v <= Quantity("100G").value for v in used.values()), used
    assert any(len(t) == 2 for t in teams.values()), "one NIC serves both namespaces"


async def test_fractional_capacity_shares_a_device_in_quarters(
    scenario: Apply, kube: KubeAPI
) -> None:
    """In quarters on 1.37 (the local control plane turns DRAFractionalCapacityRange on); 1.36
    counts the step in whole units, so a quarter rounds up to the whole device."""
    version = KubernetesVersion.from_version_info(await kube.version_info())
    quarters = version.release >= Release(1, 37)
    s = await scenario("fractional-capacity")
    pods = await s.settled(expected_pods=5, bound=4 if quarters else 1)
    if not quarters:
        (placed,) = bound(pods)
        (result,) = await s.devices(placed)
        assert (result["device"], Quantity(result["consumedCapacity"]["compute"])) == (
            "accel-0",
            Quantity("1"),
        )
        return
    placed_pods = all_but_one_placed(
        pods, "five quarters asked of one device of 1: exactly one pod must wait"
    )
    shares = set()
    for pod in placed_pods:
        (result,) = await s.devices(pod)
        assert result["device"] == "accel-0"
        assert Quantity(result["consumedCapacity"]["compute"]) == Quantity("250m")
        shares.add(result["shareID"])
    assert len(shares) == 4


async def test_admin_access_sees_devices_in_use(scenario: Apply) -> None:
    s = await scenario("admin-access")
    pods = by_name(await s.settled(expected_pods=3, bound=3))
    assert len(bound(list(pods.values()))) == 3
    in_use = {
        (r["pool"], r["device"])
        for name in ("trainer-1", "trainer-2")
        for r in await s.devices(pods[name])
    }
    assert len(in_use) == 2
    monitored = await s.devices(pods["gpu-monitor"])
    assert monitored
    assert all(r.get("adminAccess") is True for r in monitored)
    assert {(r["pool"], r["device"]) for r in monitored} <= in_use


async def test_fabric_gpu_with_binding_conditions(scenario: Apply, kube: KubeAPI) -> None:
    s = await scenario("fabric-gpu")
    (pod,) = await s.settled(expected_pods=1)
    assert pod["spec"].get("nodeName"), scheduled_condition(pod)
    node = await kube.get("Node", pod["spec"]["nodeName"])
    assert node["metadata"]["labels"][FABRIC_LABEL] == "fabric1"
    (result,) = await s.devices(pod)
    assert result["bindingConditions"] == ["fabric.kopf-dra.io/attached"]
    claims = await s.claims()
    (claim,) = claims.values()
    (device,) = claim["status"]["devices"]
    attached = {c["type"]: c["status"] for c in device["conditions"]}
    assert attached["fabric.kopf-dra.io/attached"] == "True"


async def test_priority_preemption(scenario: Apply, kube: KubeAPI) -> None:
    s = await scenario("priority-preemption")
    batch = by_name(await s.settled(expected_pods=2))
    assert all(p["spec"].get("nodeName") for p in batch.values()), "both A100s taken"
    assert len({p["spec"]["nodeName"] for p in batch.values()}) == 2
    assert [p["spec"].get("priority") for p in batch.values()] == [0, 0]
    await manifests.apply(kube, manifests.load_directory(EXAMPLES / s.name / "preemptor"))

    async def victim() -> dict[str, Any] | None:
        for p in await s.pods():
            if p["metadata"]["name"].startswith("batch-") and p["metadata"].get(
                "deletionTimestamp"
            ):
                return p
        return None

    evicted = await eventually(victim, within=60, what="a batch job being evicted")
    conditions = {c["type"]: c for c in evicted["status"].get("conditions") or []}
    assert conditions["DisruptionTarget"]["reason"] == "PreemptionByScheduler"
    assert evicted["metadata"]["deletionGracePeriodSeconds"] == 5
    if not IN_CLUSTER:  # no kubelet on virtual nodes: finish the graceful deletion for it
        meta = evicted["metadata"]
        path = resource_of("Pod").path(meta["namespace"], meta["name"])
        options = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
        with contextlib.suppress(NotFoundError):
            await kube.call("DELETE", path, body=options)

    async def trained() -> dict[str, Any] | None:
        pods = by_name(await s.pods())
        train = pods.get("train")
        return train if train is not None and train["spec"].get("nodeName") else None

    train = await eventually(trained, within=60, what="train bound on the freed GPU")
    assert train["spec"]["nodeName"] == evicted["spec"]["nodeName"]
    (result,) = await s.devices(train)
    assert "mig-3g-20gb" in result["device"]
    assert result["pool"] == train["spec"]["nodeName"]
    (other,) = (n for n in batch if n != evicted["metadata"]["name"])
    survivor = by_name(await s.pods())[other]
    assert not survivor["metadata"].get("deletionTimestamp"), "one victim is enough"
    events = (await kube.list("Event", "kopf-dra-preemption"))["items"]
    reasons = {(e["reason"], e["involvedObject"]["name"]) for e in events}
    assert ("Preempted", evicted["metadata"]["name"]) in reasons
    assert ("Preempting", "train") in reasons
    await assert_counters_within_totals(kube)
