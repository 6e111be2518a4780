"""Pod groups placed by the scheduler against the real API server (1.37: GenericWorkload and
DRAWorkloadResourceClaims on, scheduling.k8s.io/v1beta1 served by the local control plane).

Each pod has a claim of its own and shares the group's claim (both named directly, so that
the claim controllers play no part): the group's claim is reserved for the PodGroup, once.
"""

from __future__ import annotations

import functools
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from operators.api.features import Release
from operators.controllers.scheduler.handlers import Scheduler
from operators.kube.api import KubeAPI
from operators.localcluster import controlplane
from operators.localcluster.controlplane import feature_gates
from tests.integration.helpers import (
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
)


def as_the_group_says(
    reason: str, *, preemption: str = "", wrapped: bool = True, group: str = "job"
) -> tuple[str, str]:
    """What a pod that fits and the PodGroup are told when a gang's cycle ends with ``reason``
    (1.37's wording) and its preemption says ``preemption``, as the control plane's release and
    gates say it. With TopologyAwareWorkloadScheduling on, every group goes through upstream's
    placement algorithm, one placement of every node for a group without a constraint
    (``wrapped``: say so; a constrained group's ``reason`` says it). 1.37's group status carries
    "pod group is unschedulable" as its error (the pods' copy repeats it); 1.38 tells a pod
    that fits only that its group is unschedulable, in the words of its minimum threshold."""
    release = Release.parse(controlplane.kubernetes_version())
    if release >= Release(1, 38):
        reason = _threshold(reason)
    if feature_gates().get("TopologyAwareWorkloadScheduling") and wrapped:
        reason = f"0/1 placements are available, first placement status: {reason}"
    if release >= Release(1, 38):
        return f'parent pod group "{group}" is unschedulable', reason + preemption
    if feature_gates().get("TopologyAwareWorkloadScheduling"):
        reason = f"pod group is unschedulable, {reason}"
    return f"pod group is unschedulable, {reason}{preemption}", reason + preemption


def _threshold(reason: str) -> str:
    """1.37's "minCount (N) cannot be satisfied: S scheduled, R remaining" in 1.38's words,
    every pod not evaluated having failed (the gangs here: one pod fits nowhere)."""
    found = re.fullmatch(
        r"minCount \((\d+)\) cannot be satisfied: (\d+) scheduled, (\d+) remaining", reason
    )
    if found is None:
        return reason
    wanted, scheduled, remaining = found.groups()
    return (
        f"scheduling policy's minimum threshold ({wanted}) cannot be satisfied: {scheduled} "
        f"scheduled, 1 unschedulable, {remaining} not-evaluated"
    )


@pytest.fixture
async def scheduler(kubeconfig: Any) -> AsyncIterator[Scheduler]:
    scheduler, registry = start_scheduler(kubeconfig)
    async with running_operator(registry, "scheduler"):
        yield scheduler


async def _cluster(kube: KubeAPI, driver: str, nodes: int) -> str:
    """``nodes`` nodes with one GPU each, and a link all of them reach: its class's name."""
    # The link reaches this test's nodes only: the control plane is shared, and a device
    # every node reached would show in other tests' explanations.
    label = {"gang-test.kopf-dra.io/driver": driver}
    for _ in range(nodes):
        name = unique("node")
        await create_node(kube, name, label)
        await kube.create(slice_body(unique("slice"), driver, name, gpus(1)))
    await kube.create(device_class_body(driver, driver))
    link = f"link-{driver}"
    await kube.create(
        slice_body(
            unique("slice"),
            link,
            "",
            [{"name": "link-0"}],
            pool="fabric",
            nodeSelector={
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "gang-test.kopf-dra.io/driver",
                                "operator": "In",
                                "values": [driver],
                            }
                        ]
                    }
                ]
            },
        )
    )
    await kube.create(device_class_body(link, link))
    return link


async def _gang(
    kube: KubeAPI, namespace: str, driver: str, link: str, pods: int, min_count: int
) -> list[str]:
    await kube.create(claim_body("link", namespace, device_class=link))
    await kube.create(
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "job", "namespace": namespace},
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": min_count}},
                "resourceClaims": [{"name": "link", "resourceClaimName": "link"}],
            },
        }
    )
    return await _members(kube, namespace, driver, pods)


async def _members(kube: KubeAPI, namespace: str, driver: str, pods: int) -> list[str]:
    """``pods`` pods of PodGroup ``job``: each a GPU claim of its own and the group's link."""
    names = [f"worker-{i}" for i in range(pods)]
    for name in names:
        await kube.create(claim_body(f"{name}-gpu", namespace, device_class=driver))
        body = pod_body(
            name,
            namespace,
            {"name": "link", "resourceClaimName": "link"},
            {"name": "gpu", "resourceClaimName": f"{name}-gpu"},
        )
        body["spec"]["schedulingGroup"] = {"podGroupName": "job"}
        await kube.create(body)
    return names


async def _condition(kube: KubeAPI, namespace: str) -> dict[str, Any] | None:
    group = await kube.get("PodGroup", "job", namespace)
    for condition in (group.get("status") or {}).get("conditions") or []:
        if condition["type"] == "PodGroupInitiallyScheduled":
            return dict(condition)
    return None


async def test_a_gang_is_placed_together_with_its_shared_claim_reserved_for_the_group(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler
) -> None:
    link = await _cluster(kube, driver, nodes=3)
    names = await _gang(kube, namespace, driver, link, pods=3, min_count=3)

    async def all_bound() -> list[str] | None:
        nodes = [(await kube.get("Pod", n, namespace))["spec"].get("nodeName") for n in names]
        return nodes if all(nodes) else None

    nodes = await eventually(all_bound, what="the three workers bound")
    assert len(set(nodes)) == 3, "one GPU per node: three nodes"
    group = await kube.get("PodGroup", "job", namespace)
    shared = await kube.get("ResourceClaim", "link", namespace)
    assert shared["status"]["reservedFor"] == [
        {
            "apiGroup": "scheduling.k8s.io",
            "resource": "podgroups",
            "name": "job",
            "uid": group["metadata"]["uid"],
        }
    ]
    for name in names:
        own = await kube.get("ResourceClaim", f"{name}-gpu", namespace)
        assert [r["name"] for r in own["status"]["reservedFor"]] == [name]
    said = await eventually(lambda: _condition(kube, namespace), what="the group's condition")
    assert (said["status"], said["reason"]) == ("True", "Scheduled")


async def test_a_gang_one_gpu_short_holds_nothing_and_every_pod_says_why(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler
) -> None:
    link = await _cluster(kube, driver, nodes=2)
    names = await _gang(kube, namespace, driver, link, pods=3, min_count=3)

    async def all_told() -> dict[str, str] | None:
        told = {}
        for name in names:
            condition = await pod_condition(kube, namespace, name)
            if condition is None or condition["status"] != "False":
                return None
            told[name] = condition["message"]
        return told

    told = await eventually(all_told, what="every worker told why it waits")
    # Upstream appends the answer of the group's preemption (nobody of lower priority here).
    group_says, condition_says = as_the_group_says(
        "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining",
        preemption=", pod group preemption: No preemption victims found for incoming preemptor",
    )
    assert sorted(told.values()).count(group_says) == 2, told
    (own,) = [m for m in told.values() if m != group_says]
    assert own.startswith("0/"), own
    for name in names:
        assert not (await kube.get("Pod", name, namespace))["spec"].get("nodeName")
        own_claim = await kube.get("ResourceClaim", f"{name}-gpu", namespace)
        assert not (own_claim.get("status") or {}).get("allocation"), name
    assert not ((await kube.get("ResourceClaim", "link", namespace)).get("status") or {}).get(
        "allocation"
    )
    said = await eventually(lambda: _condition(kube, namespace), what="the group's condition")
    assert (said["status"], said["reason"], said["message"]) == (
        "False",
        "Unschedulable",
        condition_says,
    )


async def test_a_groups_claim_allocated_where_no_pod_can_go_is_deallocated_then_placed(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler
) -> None:
    """Upstream's DynamicResources PodGroupPostFilter: with no pod of the group placed, the
    group's claim allocated for nodes none of its pods can use is deallocated, and the group is
    placed with a fresh allocation."""
    link = await _cluster(kube, driver, nodes=2)
    await kube.create(claim_body("link", namespace, device_class=link))
    group = await kube.create(
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "job", "namespace": namespace},
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": 2}},
                "resourceClaims": [{"name": "link", "resourceClaimName": "link"}],
            },
        }
    )
    stale = await kube.get("ResourceClaim", "link", namespace)
    stale["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "gpu", "driver": link, "pool": "fabric", "device": "link-0"}
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["gone-node"]}
                        ]
                    }
                ]
            },
        },
        "reservedFor": [
            {
                "apiGroup": "scheduling.k8s.io",
                "resource": "podgroups",
                "name": "job",
                "uid": group["metadata"]["uid"],
            }
        ],
    }
    await kube.replace_status(stale)
    names = await _members(kube, namespace, driver, 2)

    async def all_bound() -> list[str] | None:
        nodes = [(await kube.get("Pod", n, namespace))["spec"].get("nodeName") for n in names]
        return nodes if all(nodes) else None

    await eventually(all_bound, what="both workers bound after the stale allocation went")
    shared = await kube.get("ResourceClaim", "link", namespace)
    terms = shared["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == [driver], "allocated afresh: its nodes"
    assert [r["resource"] for r in shared["status"]["reservedFor"]] == ["podgroups"]


async def test_a_gang_that_cannot_be_completed_holds_no_device_a_plain_pod_could_use(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler
) -> None:
    """No partial holds: the first two pods of a gang of three wait for the third without
    holding a GPU (nothing is allocated before minCount pods are placed together), so a plain
    pod gets a GPU at once; then one GPU is left for a gang that needs three, and its three pods
    hold nothing either, while the plain pod keeps its own."""
    link = await _cluster(kube, driver, nodes=2)
    names = await _gang(kube, namespace, driver, link, pods=2, min_count=3)
    await kube.create(claim_body("plain-gpu", namespace, device_class=driver))
    await kube.create(
        pod_body("plain", namespace, {"name": "gpu", "resourceClaimName": "plain-gpu"})
    )

    async def plain_bound() -> bool:
        return bool((await kube.get("Pod", "plain", namespace))["spec"].get("nodeName"))

    await eventually(plain_bound, what="the plain pod bound while the gang waits")
    for name in names:
        assert not (await kube.get("Pod", name, namespace))["spec"].get("nodeName")
        claim = await kube.get("ResourceClaim", f"{name}-gpu", namespace)
        assert not (claim.get("status") or {}).get("allocation"), f"{name} holds its GPU"
    # The third pod: the gang can be tried now, and one GPU is left for three pods.
    await kube.create(claim_body("worker-2-gpu", namespace, device_class=driver))
    third = pod_body(
        "worker-2",
        namespace,
        {"name": "link", "resourceClaimName": "link"},
        {"name": "gpu", "resourceClaimName": "worker-2-gpu"},
    )
    third["spec"]["schedulingGroup"] = {"podGroupName": "job"}
    await kube.create(third)

    async def all_told() -> list[str] | None:
        told = [await pod_condition(kube, namespace, n) for n in [*names, "worker-2"]]
        if any(c is None or c["status"] != "False" for c in told):
            return None
        return [str(c["message"]) for c in told if c is not None]

    told = await eventually(all_told, what="every worker of the gang told why it waits")
    group_says, _ = as_the_group_says("minCount (3) cannot be satisfied")
    assert any(group_says.split(" cannot be satisfied")[0] in m for m in told), told
    for name in [*names, "worker-2"]:
        claim = await kube.get("ResourceClaim", f"{name}-gpu", namespace)
        assert not (claim.get("status") or {}).get("allocation"), f"{name} holds its GPU"
    plain = await kube.get("ResourceClaim", "plain-gpu", namespace)
    assert plain["status"]["allocation"], "the plain pod keeps its GPU"


def _halves(driver: str, node: str) -> list[dict[str, Any]]:
    """One 40Gi GPU offered whole or as two 20Gi halves: its counter set and its devices, two
    slices of the node's pool."""

    def device(name: str, size: str, memory: str) -> dict[str, Any]:
        counters = {"memory": {"value": memory}}
        return {
            "name": name,
            "attributes": {"size": {"string": size}},
            "consumesCounters": [{"counterSet": "gpu-0", "counters": counters}],
        }

    devices = [
        device("whole", "whole", "40Gi"),
        device("half-1", "half", "20Gi"),
        device("half-2", "half", "20Gi"),
    ]
    counters = [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]
    counter_slice = slice_body(unique("slice"), driver, node, [], count=2, sharedCounters=counters)
    del counter_slice["spec"]["devices"]  # a slice has counters or devices, not both
    return [counter_slice, slice_body(unique("slice"), driver, node, devices, count=2)]


async def test_a_gang_upstream_fails_is_placed_on_its_pods_later_alternatives(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler
) -> None:
    """kubernetes#138765: two pods of a gang of two, each asking firstAvailable [whole GPU,
    half GPU] of the one GPU there is. kube-scheduler 1.37.2 gives the first pod the whole GPU
    and fails the gang; kopf-dra's search gives each pod a half."""
    node = unique("node")
    await create_node(kube, node, {"gang-test.kopf-dra.io/driver": driver})
    for body in _halves(driver, node):
        await kube.create(body)
    for size in ("whole", "half"):
        expression = f'device.attributes["{driver}"].size == "{size}"'
        await kube.create(device_class_body(f"{size}-{driver}", driver, expression))
    await kube.create(
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "job", "namespace": namespace},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
        }
    )
    names = ["worker-0", "worker-1"]
    for name in names:
        claim = claim_body(f"{name}-gpu", namespace)
        claim["spec"]["devices"]["requests"] = [
            {
                "name": "gpu",
                "firstAvailable": [
                    {"name": size, "deviceClassName": f"{size}-{driver}"}
                    for size in ("whole", "half")
                ],
            }
        ]
        await kube.create(claim)
        body = pod_body(name, namespace, {"name": "gpu", "resourceClaimName": f"{name}-gpu"})
        body["spec"]["schedulingGroup"] = {"podGroupName": "job"}
        await kube.create(body)

    async def all_bound() -> list[str] | None:
        nodes = [(await kube.get("Pod", n, namespace))["spec"].get("nodeName") for n in names]
        return nodes if all(nodes) else None

    assert await eventually(all_bound, what="both workers bound") == [node, node]
    chosen = []
    for name in names:
        claim = await kube.get("ResourceClaim", f"{name}-gpu", namespace)
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        chosen.append((result["request"], result["device"]))
    assert sorted(chosen) == [("gpu/half", "half-1"), ("gpu/half", "half-2")], chosen


async def test_a_group_whose_pods_disagree_is_refused_with_its_releases_reason(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler
) -> None:
    """Two pods of a group, one of them Never preempting: kube-scheduler refuses the group
    before its cycle; 1.37.2 says SchedulerError, 1.38 PodGroupError and names the pods."""
    link = await _cluster(kube, driver, nodes=2)
    await kube.create(claim_body("link", namespace, device_class=link))
    await kube.create(
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "job", "namespace": namespace},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
        }
    )
    # The pod's policy comes from its class (the Priority admission refuses one set by hand);
    # value 0, the group's priority.
    polite = unique("polite")
    await kube.create(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": polite},
            "value": 0,
            "preemptionPolicy": "Never",
        }
    )
    for name, priority_class in (("worker-0", polite), ("worker-1", None)):
        body = pod_body(name, namespace)
        body["spec"]["schedulingGroup"] = {"podGroupName": "job"}
        if priority_class:
            body["spec"]["priorityClassName"] = priority_class
        await kube.create(body)
    said = await eventually(lambda: _condition(kube, namespace), what="the group's condition")
    hierarchy = Release.parse((await kube.version_info())["gitVersion"]) >= Release(1, 38)
    assert said["status"] == "False"
    assert said["reason"] == ("PodGroupError" if hierarchy else "SchedulerError")
    if hierarchy:
        pattern = (
            r"all pods in a pod group hierarchy should have the same preemption policy, "
            r'got (Never \("worker-0"\) and PreemptLowerPriority|'
            r'PreemptLowerPriority \("worker-1"\) and Never)'
        )
    else:
        pattern = (
            r"all pods in a single pod group should have the same preemption policy, "
            r"got (Never and PreemptLowerPriority|PreemptLowerPriority and Never)"
        )
    assert re.fullmatch(pattern, said["message"]), said["message"]
    for name in ("worker-0", "worker-1"):
        condition = await eventually(
            functools.partial(pod_condition, kube, namespace, name), what=f"{name} told why"
        )
        assert (condition["reason"], condition["message"]) == (said["reason"], said["message"])
