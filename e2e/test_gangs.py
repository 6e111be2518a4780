"""The gang-training example: a PodGroup placed all or nothing, with its shared claim
(Kubernetes 1.37 with GenericWorkload and DRAWorkloadResourceClaims on)."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from e2e.conftest import IN_CLUSTER, Scenario, VariantApply
from e2e.test_scenarios import bound, by_name
from operators.api.features import Release, format_feature_gates
from operators.demo.bringup import DRIVER, EXAMPLES, RACK_LABEL, gang_one_gpu_short
from operators.demo.view import allocated_devices, scheduled_condition
from operators.kube.api import KubeAPI
from operators.localcluster import controlplane
from tests.integration.helpers import create_node, eventually

# Not collected where the cluster serves no PodGroups (e2e/conftest.py).
pytestmark = pytest.mark.pod_groups
NAMESPACE = "kopf-dra-gang"
GROUP_CONDITION = "PodGroupInitiallyScheduled"
#: What a trainer that fits is told, and what the PodGroup says: 1.38 tells the pod only that
#: its group is unschedulable, and words the gang's minimum as the scheduling policy's.
if Release.parse(controlplane.kubernetes_version()) >= Release(1, 38):
    POD_SAYS = 'parent pod group "training-short" is unschedulable'
    GROUP_SAYS = (
        "scheduling policy's minimum threshold (5) cannot be satisfied: 4 scheduled, "
        "1 unschedulable, 0 not-evaluated"
    )
else:
    POD_SAYS = GROUP_SAYS = "minCount (5) cannot be satisfied: 4 scheduled, 0 remaining"


async def group_condition(
    kube: KubeAPI, name: str, namespace: str = NAMESPACE
) -> dict[str, Any] | None:
    group = await kube.get("PodGroup", name, namespace)
    for condition in (group.get("status") or {}).get("conditions") or []:
        if condition.get("type") == GROUP_CONDITION:
            return dict(condition)
    return None


async def test_gang_training_all_four_bound_together(scenario: VariantApply, kube: KubeAPI) -> None:
    s = await scenario("gang-training")
    pods = by_name(await s.settled(expected_pods=4, bound=4))
    assert len(bound(list(pods.values()))) == 4
    gpus = set()
    for pod in pods.values():
        node = await kube.get("Node", pod["spec"]["nodeName"])
        assert node["metadata"]["labels"][RACK_LABEL] == "rack-a"
        gpu = await kube.get("ResourceClaim", claim_name(pod, "gpu"), NAMESPACE)
        (result,) = allocated_devices(gpu)
        assert result["pool"] == pod["spec"]["nodeName"]
        gpus.add((result["pool"], result["device"]))
    assert len(gpus) == 4, "four GPUs, none handed out twice"
    group = await kube.get("PodGroup", "training", NAMESPACE)
    (status,) = group["status"]["resourceClaimStatuses"]
    shared = await kube.get("ResourceClaim", status["resourceClaimName"], NAMESPACE)
    (link,) = allocated_devices(shared)
    assert link["device"] == "rack-a-nvlink"
    reserved = [(r["resource"], r["name"]) for r in shared["status"]["reservedFor"]]
    assert reserved == [("podgroups", "training")], "reserved for the PodGroup, once"
    assert {claim_name(p, "interconnect") for p in pods.values()} == {
        status["resourceClaimName"]
    }, "every trainer uses the group's claim"
    condition = await eventually(
        lambda: group_condition(kube, "training"), what="the PodGroup's condition"
    )
    assert condition["status"] == "True", condition


async def test_gang_training_one_gpu_short_binds_none(
    scenario: VariantApply, kube: KubeAPI
) -> None:
    s = await scenario("gang-training", gang_one_gpu_short("training-short"))
    await s.settled(expected_pods=5)

    async def told() -> list[dict[str, Any]] | None:
        """Four trainers told the group's reason: a cycle that ran while an earlier test's
        claims were still being freed tells the pods a different count, and is tried again."""
        pods = await s.pods()
        messages = [(scheduled_condition(p) or {}).get("message") or "" for p in pods]
        return pods if sum(POD_SAYS in m for m in messages) == 4 else None

    pods = await eventually(told, within=60, what="four trainers told the group's reason")
    await assert_nothing_held(s, kube, pods)


async def assert_nothing_held(s: Scenario, kube: KubeAPI, pods: list[dict[str, Any]]) -> None:
    """No pod bound, no claim allocated or reserved, every pod and the PodGroup say why."""
    claims = await s.claims()
    held = {name: allocated_devices(c) for name, c in claims.items() if allocated_devices(c)}
    assert not bound(pods), ([p["spec"].get("nodeName") for p in pods], held)
    assert not held, held
    reserved = [name for name, c in claims.items() if (c.get("status") or {}).get("reservedFor")]
    assert not reserved, reserved
    messages = {p["metadata"]["name"]: (scheduled_condition(p) or {})["message"] for p in pods}
    (fifth,) = [m for m in messages.values() if POD_SAYS not in m]
    assert "cannot allocate" in fifth, fifth
    # The PodGroup's condition is written after the pods are told.
    condition = await eventually(
        lambda: group_condition(kube, "training-short"), what="the PodGroup's condition"
    )
    assert condition["status"] == "False", condition
    assert GROUP_SAYS in condition["message"], condition


def claim_name(pod: dict[str, Any], entry: str) -> str:
    for status in pod["status"].get("resourceClaimStatuses") or []:
        if status["name"] == entry:
            return str(status["resourceClaimName"])
    raise AssertionError(f"{pod['metadata']['name']}: no claim for {entry!r} in its status")


RACK_B = [f"kopf-dra-rack-b-{i}" for i in range(4)]


async def _second_rack(kube: KubeAPI) -> None:
    """Rack-b: four virtual nodes with two whole GPUs each, their slices published here as
    the example driver would (the e2e nodes' rack-a holds four GPUs)."""
    for name in RACK_B:
        await create_node(kube, name, {RACK_LABEL: "rack-b"})
        await kube.create(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{name}-gpus"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": [
                        {"name": f"gpu-{i}", "attributes": {"type": {"string": "gpu"}}}
                        for i in range(2)
                    ],
                },
            }
        )


@pytest.mark.skipif(IN_CLUSTER, reason="adds virtual nodes: kind's nodes are kind's own")
async def test_rack_training_eight_trainers_bound_in_the_one_rack_that_holds_them(
    scenario: VariantApply, kube: KubeAPI, kubeconfig: Path
) -> None:
    try:
        await _second_rack(kube)
        # Before it is applied: simulate names the rack the scheduler will choose, and why not
        # the other (the README's command, with the cluster's gates).
        gates = format_feature_gates(controlplane.feature_gates())
        done = await asyncio.to_thread(
            subprocess.run,
            [
                str(Path(sys.executable).parent / "kopf-dra"),
                "simulate",
                "--kubeconfig",
                str(kubeconfig),
                "-f",
                str(EXAMPLES / "rack-training"),
                "--pod-group",
                "kopf-dra-rack/training",
                "--feature-gates",
                gates,
                "-o",
                "json",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        predicted = json.loads(done.stdout)["topology"]
        assert predicted["domain"] == "rack-b", done.stdout
        outcomes = {d["name"]: d["outcome"] for d in predicted["domains"]}
        assert outcomes == {"rack-a": "ruled-out", "rack-b": "chosen"}, done.stdout
        s = await scenario("rack-training")
        pods = await s.settled(expected_pods=8, bound=8)
        racks = set()
        for pod in pods:
            node = await kube.get("Node", pod["spec"]["nodeName"])
            racks.add(node["metadata"]["labels"][RACK_LABEL])
            (gpu,) = await s.devices(pod)
            assert gpu["pool"] == pod["spec"]["nodeName"]
        assert racks == {"rack-b"}
        condition = await eventually(
            lambda: group_condition(kube, "training", "kopf-dra-rack"),
            what="the PodGroup's condition",
        )
        assert condition["status"] == "True", condition
        # The README's view of it: rack-b's eight GPUs taken, rack-a's left.
        done = await asyncio.to_thread(
            subprocess.run,
            [str(Path(sys.executable).parent / "kubectl-dra"), "pools", "--by", RACK_LABEL],
            env={**os.environ, "KUBECONFIG": str(kubeconfig)},
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        shown = done.stdout
        rows = {line.split()[0]: line.split()[1:] for line in shown.splitlines()[1:] if line}
        assert rows["rack-b"][:3] == ["4", "8", "8"], shown  # nodes, devices, allocated
        await s.cleanup()
    finally:
        for name in RACK_B:
            await kube.delete("ResourceSlice", f"{name}-gpus")
            await kube.delete("Node", name)


@pytest.mark.skipif(IN_CLUSTER, reason="adds virtual nodes: kind's nodes are kind's own")
async def test_composite_training_leader_and_workers_bound_in_the_one_rack_that_holds_them(
    scenario: VariantApply, kube: KubeAPI
) -> None:
    """The tree of the README: the leader's group and the workers' under one parent, six GPUs
    in one rack; rack-a has four, so all six go to rack-b."""
    try:
        await _second_rack(kube)
        s = await scenario("composite-training")
        pods = await s.settled(expected_pods=6, bound=6)
        racks = set()
        for pod in pods:
            node = await kube.get("Node", pod["spec"]["nodeName"])
            racks.add(node["metadata"]["labels"][RACK_LABEL])
        assert racks == {"rack-b"}
        assert len({p["spec"]["nodeName"] for p in pods}) <= 4
        for group in ("leader", "workers"):
            condition = await eventually(
                functools.partial(group_condition, kube, group, "kopf-dra-composite"),
                what=f"PodGroup {group}'s condition",
            )
            assert condition["status"] == "True", condition
        await s.cleanup()
    finally:
        for name in RACK_B:
            await kube.delete("ResourceSlice", f"{name}-gpus")
            await kube.delete("Node", name)
