"""Topology-constrained pod groups (TopologyAwareWorkloadScheduling, on in the local control
plane) on the real API server: a gang placed whole in the one rack that holds it, a gang no rack
holds (nothing allocated, every pod told why), and a group whose bound pods are in two racks
(the cycle's error). Each test labels its nodes with a key of its own, so other tests' nodes
are in no rack."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from operators.api.features import Release
from operators.controllers.scheduler.handlers import Scheduler
from operators.kube.api import KubeAPI
from operators.localcluster import controlplane
from tests.integration.helpers import (
    bound_node,
    claim_body,
    create_node,
    device_class_body,
    eventually,
    gpus,
    pod_body,
    pod_condition,
    running_operator,
    slice_body,
    start_scheduler,
    unique,
    upstream,
)
from tests.integration.test_gang_scheduling import as_the_group_says

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        Release.parse(controlplane.kubernetes_version()) < Release(1, 37)
        or os.environ.get("KOPF_DRA_USE_EXISTING_CLUSTER") == "1",
        reason="pod groups with a topology constraint: Kubernetes 1.37's local control plane "
        "(GenericWorkload and TopologyAwareWorkloadScheduling on)",
    ),
]


@pytest.fixture
async def scheduler(kubeconfig: Any) -> AsyncIterator[Scheduler]:
    replica, registry = start_scheduler(kubeconfig, unschedulable_retry=2.0)
    async with running_operator(registry, "scheduler"):
        yield replica


@pytest.fixture
def rack() -> str:
    return f"topology.example.com/{unique('rack')}"


async def _racks(kube: KubeAPI, driver: str, rack: str, sizes: dict[str, int]) -> dict[str, str]:
    """Nodes of one GPU each, ``sizes[r]`` of them labelled ``rack=r``: node -> its rack."""
    racks = {}
    for value, count in sizes.items():
        for _ in range(count):
            name = unique(f"node-{value}")
            await create_node(kube, name, {rack: value})
            await kube.create(slice_body(unique("slice"), driver, name, gpus(1)))
            racks[name] = value
    await kube.create(device_class_body(driver, driver))
    return racks


async def _gang(
    kube: KubeAPI,
    namespace: str,
    rack: str,
    pods: int,
    driver: str,
    min_count: int | None = None,
    *,
    scheduler: str = "kopf-dra",
    group: str = "job",
) -> None:
    """PodGroup ``group`` (a gang constrained to ``rack``) and ``pods`` workers with a GPU
    each, named ``<group>-<i>`` (``worker-<i>`` for ``job``), for ``scheduler``."""
    await kube.create(
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": group, "namespace": namespace},
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": min_count or pods}},
                "schedulingConstraints": {"topology": [{"key": rack}]},
            },
        }
    )
    for i in range(pods):
        name = f"{'worker' if group == 'job' else group}-{i}"
        await kube.create(claim_body(name, namespace, device_class=driver))
        claim = {"name": "gpu", "resourceClaimName": name}
        body = pod_body(name, namespace, claim, scheduler=scheduler)
        body["spec"]["schedulingGroup"] = {"podGroupName": group}
        await kube.create(body)


async def _group_condition(
    kube: KubeAPI, namespace: str, name: str = "job"
) -> dict[str, Any] | None:
    group = await kube.get("PodGroup", name, namespace)
    for condition in (group.get("status") or {}).get("conditions") or []:
        if condition["type"] == "PodGroupInitiallyScheduled":
            return dict(condition)
    return None


async def test_a_gang_constrained_to_a_rack_is_bound_in_the_one_rack_that_holds_it(
    kube: KubeAPI, namespace: str, driver: str, rack: str, scheduler: Scheduler
) -> None:
    racks = await _racks(kube, driver, rack, {"a": 2, "b": 3})
    await _gang(kube, namespace, rack, 3, driver)
    kept = await kube.get("PodGroup", "job", namespace)
    assert kept["spec"]["schedulingConstraints"] == {"topology": [{"key": rack}]}, (
        "the API server keeps the constraint with the gate on"
    )
    nodes = [
        await eventually(functools.partial(bound_node, kube, namespace, f"worker-{i}"))
        for i in range(3)
    ]
    assert {racks[n] for n in nodes} == {"b"}
    assert len(set(nodes)) == 3
    condition = await eventually(lambda: _group_condition(kube, namespace))
    assert (condition["status"], condition["reason"]) == ("True", "Scheduled")


async def test_a_gang_no_rack_holds_holds_no_device_and_each_pod_is_told_why(
    kube: KubeAPI, namespace: str, driver: str, rack: str, scheduler: Scheduler
) -> None:
    await _racks(kube, driver, rack, {"a": 2, "b": 2})
    await _gang(kube, namespace, rack, 3, driver)

    async def told() -> dict[str, Any] | None:
        condition = await pod_condition(kube, namespace, "worker-0")
        return condition if condition and condition.get("reason") == "Unschedulable" else None

    condition = await eventually(told, what="worker-0 unschedulable")
    # kopf-dra counts each rack's free GPUs first: neither holds three, no pod was filtered.
    pods_told, group_says = as_the_group_says(
        "0/2 placements are available, first placement status: the domain's free devices "
        f"cannot hold the pod group's claims: 3 of DeviceClass {driver} needed, 2 free",
        wrapped=False,
    )
    assert condition["message"].startswith(pods_told), condition
    group = await eventually(lambda: _group_condition(kube, namespace))
    assert group["message"].startswith(group_says), group
    for i in range(3):
        claim = await kube.get("ResourceClaim", f"worker-{i}", namespace)
        assert not (claim.get("status") or {}).get("allocation"), "nothing is held"
        assert await bound_node(kube, namespace, f"worker-{i}") is None


async def test_bound_pods_in_two_racks_are_the_groups_scheduler_error(
    kube: KubeAPI, namespace: str, driver: str, rack: str, scheduler: Scheduler
) -> None:
    racks = await _racks(kube, driver, rack, {"a": 1, "b": 1})
    await _gang(kube, namespace, rack, 1, driver, min_count=3)
    for node, value in racks.items():
        body = pod_body(f"running-{value}", namespace)
        body["spec"]["schedulingGroup"] = {"podGroupName": "job"}
        body["spec"]["nodeName"] = node
        await kube.create(body)

    async def errored() -> dict[str, Any] | None:
        condition = await _group_condition(kube, namespace)
        return condition if condition and condition["reason"] == "SchedulerError" else None

    group = await eventually(errored, what="the PodGroup's SchedulerError")
    release = Release.parse(controlplane.kubernetes_version())
    pairs = ("a, b", "b, a") if release < Release(1, 38) else ('"a", "b"', '"b", "a"')
    assert group["message"] in {
        "cannot determine domain for already scheduled pods: more than 1 domain found for pod "
        f"group: {pair}"
        for pair in pairs
    }
    told = (
        group["message"]
        if release < Release(1, 38)
        else ('parent pod group "job" encountered an error')
    )
    pod = await eventually(lambda: pod_condition(kube, namespace, "worker-0"))
    assert (pod["reason"], pod["message"]) == ("SchedulerError", told)


@pytest.fixture
async def upstream_like(kubeconfig: Any) -> AsyncIterator[Scheduler]:
    """kopf-dra with upstream's messages: every domain tried (no device count first)."""
    replica, registry = start_scheduler(
        kubeconfig, unschedulable_retry=2.0, domain_device_count=False
    )
    async with running_operator(registry, "scheduler"):
        yield replica


@pytest.mark.parametrize("racks", [{"a": 2, "b": 3}, {"a": 2, "b": 2}])
async def test_kube_scheduler_and_kopf_dra_side_by_side_place_a_rack_constrained_gang_alike(
    kube: KubeAPI,
    kubeconfig: Path,
    namespace: str,
    racks: dict[str, int],
    upstream_like: Scheduler,
) -> None:
    """The same gang of three (a GPU each, one rack), for kube-scheduler (TAS on) and for
    kopf-dra, each on racks of its own: the same rack, or the same messages."""
    run = unique("tas")
    profile = f"upstream-{run}"
    scenes = {}
    for who in ("up", "kd"):
        driver = f"{run}-{who}.example.com"
        key = f"topology.example.com/{run}-{who}"
        scenes[who] = await _racks(kube, driver, key, racks)
        scheduler = profile if who == "up" else "kopf-dra"
        await _gang(kube, namespace, key, 3, driver, scheduler=scheduler, group=f"{who}-job")
    with upstream(kubeconfig, profile):
        if racks["b"] >= 3:
            for who in ("up", "kd"):
                nodes = [
                    await eventually(
                        functools.partial(bound_node, kube, namespace, f"{who}-job-{i}"),
                        within=60,
                        what=f"{who}-job-{i} bound",
                    )
                    for i in range(3)
                ]
                assert {scenes[who][n] for n in nodes} == {"b"}, who
            return
        told: dict[str, tuple[str, list[str]]] = {}
        for who in ("up", "kd"):

            async def failed(who: str = who) -> dict[str, Any] | None:
                condition = await _group_condition(kube, namespace, f"{who}-job")
                return condition if condition and condition["status"] == "False" else None

            group = await eventually(failed, within=60, what=f"{who}-job unschedulable")

            async def one_cycle(who: str = who) -> list[str] | None:
                """The pods' messages once they are one cycle's: which pod fits nowhere
                depends on the order a cycle tries them in, and each retry writes anew."""
                messages = []
                for i in range(3):
                    condition = await pod_condition(kube, namespace, f"{who}-job-{i}")
                    message = (condition or {}).get("message") or ""
                    messages.append(_upstreams_words(message.replace(f"{who}-job", "job")))
                own = [m for m in messages if m.startswith("0/2 nodes")]
                return sorted(messages) if len(own) == 1 else None

            told[who] = (group["message"], await eventually(one_cycle, what=f"{who}'s pods"))
    assert told["kd"] == told["up"]


def _upstreams_words(message: str) -> str:
    """kopf-dra names the claim and request a node cannot allocate, and why; kube-scheduler
    says "cannot allocate all claims"."""
    return re.sub(
        r"cannot allocate claim [^;.]*(; [^.]*)?\.$", "cannot allocate all claims.", message
    )
