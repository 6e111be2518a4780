"""Trees of pod groups (CompositePodGroup, on in the local control plane from 1.37) on the real
API server: a leader group and a worker group under one parent constrained to a rack are bound in
the one rack that holds them all; and side by side with kube-scheduler (the same gates), the same
rack, or the same messages when no rack holds them. Each test labels its nodes with a key of its
own, so other tests' nodes are in no rack."""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from operators.api.features import Release
from operators.api.resource import api_version_of
from operators.controllers.scheduler.handlers import Scheduler
from operators.kube.api import KubeAPI
from operators.localcluster import controlplane
from tests.integration.helpers import (
    bound_node,
    claim_body,
    events_with,
    eventually,
    pod_body,
    pod_condition,
    running_operator,
    start_scheduler,
    unique,
    upstream,
)
from tests.integration.test_preemption import (
    act_as_kubelet,
    pods_removed_afterwards,
    priority_classes,
)
from tests.integration.test_topology_groups import _group_condition, _racks, _upstreams_words

__all__ = ["pods_removed_afterwards"]  # the autouse fixture, used here too


def _release() -> Release:
    return Release.parse(controlplane.kubernetes_version())


pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        _release() < Release(1, 37) or os.environ.get("KOPF_DRA_USE_EXISTING_CLUSTER") == "1",
        reason="composite pod groups: Kubernetes 1.37's local control plane (GenericWorkload, "
        "TopologyAwareWorkloadScheduling and CompositePodGroup on)",
    ),
]


@pytest.fixture
async def scheduler(kubeconfig: Any) -> AsyncIterator[Scheduler]:
    replica, registry = start_scheduler(
        kubeconfig, unschedulable_retry=2.0, domain_device_count=False
    )
    async with running_operator(registry, "scheduler"):
        yield replica


async def _tree(
    kube: KubeAPI,
    namespace: str,
    rack: str,
    driver: str,
    *,
    prefix: str,
    scheduler: str = "kopf-dra",
    workers: int = 3,
    priority: str | None = None,
) -> list[str]:
    """CompositePodGroup ``<prefix>`` (a gang of its two groups, constrained to ``rack``) with
    PodGroups ``<prefix>-leader`` (one pod) and ``<prefix>-workers`` (a gang of ``workers``),
    each pod with a GPU: the pods' names."""
    await kube.create(
        {
            "apiVersion": api_version_of("CompositePodGroup", _release()),
            "kind": "CompositePodGroup",
            "metadata": {"name": prefix, "namespace": namespace},
            "spec": {
                "workloadRef": {"workloadName": prefix, "templateName": "train"},
                "schedulingPolicy": {"gang": {"minGroupCount": 2}},
                "schedulingConstraints": {"topology": [{"key": rack}]},
                **({"priorityClassName": priority} if priority else {}),
            },
        }
    )
    pods = []
    for role, count in (("leader", 1), ("workers", workers)):
        group = f"{prefix}-{role}"
        await kube.create(
            {
                "apiVersion": "scheduling.k8s.io/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": group, "namespace": namespace},
                "spec": {
                    "parentCompositePodGroupName": prefix,
                    "workloadRef": {"workloadName": prefix, "templateName": role},
                    "schedulingPolicy": {"gang": {"minCount": count}},
                    **({"priorityClassName": priority} if priority else {}),
                },
            }
        )
        for i in range(count):
            name = f"{group}-{i}"
            await kube.create(claim_body(name, namespace, device_class=driver))
            body = pod_body(
                name, namespace, {"name": "gpu", "resourceClaimName": name}, scheduler=scheduler
            )
            body["spec"]["schedulingGroup"] = {"podGroupName": group}
            if priority:
                body["spec"]["priorityClassName"] = priority
            await kube.create(body)
            pods.append(name)
    return pods


async def _composite_condition(kube: KubeAPI, namespace: str, name: str) -> dict[str, Any] | None:
    # Served where its release serves it (1.38: v1beta1; the fixture's client reads 1.37's).
    kube = KubeAPI(kube.api_client, release=_release())
    group = await kube.get("CompositePodGroup", name, namespace)
    for condition in (group.get("status") or {}).get("conditions") or []:
        if condition["type"] == "CompositePodGroupInitiallyScheduled":
            return dict(condition)
    return None


async def test_a_leader_and_its_workers_are_bound_in_the_one_rack_that_holds_them_all(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler
) -> None:
    rack = f"topology.example.com/{unique('rack')}"
    racks = await _racks(kube, driver, rack, {"a": 3, "b": 4})
    pods = await _tree(kube, namespace, rack, driver, prefix="train")
    kept = await kube.get("PodGroup", "train-leader", namespace)
    assert kept["spec"]["parentCompositePodGroupName"] == "train", "kept with the gate on"
    nodes = [await eventually(functools.partial(bound_node, kube, namespace, p)) for p in pods]
    assert {racks[n] for n in nodes} == {"b"}, "rack a has three GPUs, the tree needs four"
    assert len(set(nodes)) == 4
    for group in ("train-leader", "train-workers"):
        condition = await eventually(functools.partial(_group_condition, kube, namespace, group))
        assert (condition["status"], condition["reason"]) == ("True", "Scheduled")
    if _release() >= Release(1, 38):
        condition = await eventually(
            functools.partial(_composite_condition, kube, namespace, "train")
        )
        assert (condition["status"], condition["reason"]) == ("True", "Scheduled")


@pytest.mark.parametrize("racks", [{"a": 3, "b": 4}, {"a": 3, "b": 3}])
async def test_kube_scheduler_and_kopf_dra_side_by_side_place_a_tree_alike(
    kube: KubeAPI,
    kubeconfig: Path,
    namespace: str,
    racks: dict[str, int],
    scheduler: Scheduler,
) -> None:
    """The same tree for kube-scheduler (CompositePodGroup on) and for kopf-dra, each on racks
    of its own: the same rack, or the same messages on every pod and PodGroup."""
    run = unique("cpg")
    profile = f"upstream-{run}"
    scenes, trees = {}, {}
    for who in ("up", "kd"):
        driver = f"{run}-{who}.example.com"
        key = f"topology.example.com/{run}-{who}"
        scenes[who] = await _racks(kube, driver, key, racks)
        trees[who] = await _tree(
            kube,
            namespace,
            key,
            driver,
            prefix=f"{who}-train",
            scheduler=profile if who == "up" else "kopf-dra",
        )
    with upstream(kubeconfig, profile):
        if racks["b"] >= 4:
            for who in ("up", "kd"):
                nodes = [
                    await eventually(
                        functools.partial(bound_node, kube, namespace, p),
                        within=60,
                        what=f"{p} bound",
                    )
                    for p in trees[who]
                ]
                assert {scenes[who][n] for n in nodes} == {"b"}, who
            return
        said: dict[str, dict[str, Any]] = {}
        for who in ("up", "kd"):

            async def told(who: str = who) -> dict[str, Any] | None:
                """Each group's condition, and its pods' messages sorted (which worker fits
                nowhere depends on the order a cycle tries them in)."""
                out: dict[str, Any] = {}
                for group in ("leader", "workers"):
                    messages = []
                    for p in trees[who]:
                        if not p.startswith(f"{who}-train-{group}"):
                            continue
                        condition = await pod_condition(kube, namespace, p)
                        if not condition or condition.get("status") != "False":
                            return None
                        message = condition.get("message") or ""
                        messages.append(_upstreams_words(message.replace(f"{who}-", "")))
                    condition = await _group_condition(kube, namespace, f"{who}-train-{group}")
                    if condition is None:
                        return None
                    out[group] = sorted(messages)
                    out[f"{group} condition"] = (condition.get("message") or "").replace(
                        f"{who}-", ""
                    )
                return out

            said[who] = await eventually(told, within=60, what=f"{who}'s tree told")
    assert said["kd"] == said["up"]


async def test_a_tree_preempts_lower_priority_pods_of_one_rack_and_is_placed_there(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler
) -> None:
    """Both racks (three GPUs each) full of low-priority pods; the tree (the leader and two
    workers, high priority) evicts rack a's three (the first by name: both cost the same),
    nominated there, and is bound there once they are gone."""
    classes = await priority_classes(kube)
    rack = f"topology.example.com/{unique('rack')}"
    racks = await _racks(kube, driver, rack, {"a": 3, "b": 3})
    for i, node in enumerate(sorted(racks)):
        name = f"low-{racks[node]}-{i}"
        await kube.create(claim_body(name, namespace, device_class=driver))
        body = pod_body(name, namespace, {"name": "gpu", "resourceClaimName": name})
        body["spec"]["priorityClassName"] = classes["low"]
        body["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
        await kube.create(body)
        assert await eventually(functools.partial(bound_node, kube, namespace, name)) == node
    pods = await _tree(
        kube, namespace, rack, driver, prefix="train", workers=2, priority=classes["high"]
    )
    (preempting,) = await events_with(kube, namespace, "Preempting")
    assert preempting["involvedObject"]["kind"] == "CompositePodGroup"
    victims = [
        p["metadata"]["name"]
        for p in (await kube.list("Pod", namespace))["items"]
        if p["metadata"]["name"].startswith("low-") and p["metadata"].get("deletionTimestamp")
    ]
    assert sorted(v.split("-")[1] for v in victims) == ["a", "a", "a"]
    for victim in victims:
        await act_as_kubelet(kube, namespace, victim)
    nodes = [await eventually(functools.partial(bound_node, kube, namespace, p)) for p in pods]
    assert {racks[n] for n in nodes} == {"a"}
