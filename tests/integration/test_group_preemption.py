"""Preemption and pod groups on the real API server (1.37, GenericWorkload on): a gang that
preempts as one (PodGroupPostFilter), and a running gang whose ``disruptionMode`` decides
whether its members are evicted alone.

kube-scheduler 1.37.2 would place none of these: its DynamicResources frees no device when a
victim is removed (no PreFilterExtensions), so no eviction ever makes room for a device there.
Virtual nodes have no kubelet: the tests complete the victims' graceful deletions themselves.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from operators.api.features import Release
from operators.controllers.scheduler.handlers import Scheduler
from operators.kube.api import KubeAPI
from operators.localcluster import controlplane
from operators.localcluster.controlplane import feature_gates
from tests.integration.helpers import (
    bound_node,
    claim_body,
    create_node,
    device_class_body,
    events_with,
    eventually,
    gpus,
    pod_body,
    pod_condition,
    running_operator,
    slice_body,
    start_scheduler,
    unique,
)
from tests.integration.test_preemption import (
    act_as_kubelet,
    deleting,
    pods_removed_afterwards,
    priority_classes,
)

pytestmark = pytest.mark.integration

__all__ = ["pods_removed_afterwards"]  # the autouse fixture, used here too


#: 1.38 tells a pod of a group that is not placed only that its group is unschedulable; what
#: the group's preemption said is in the PodGroup's condition (as in 1.37, where the pods are
#: told it too).
PARENT_ONLY = Release.parse(controlplane.kubernetes_version()) >= Release(1, 38)


def _group_says(kube: KubeAPI, namespace: str) -> Callable[[], Awaitable[str | None]]:
    """The PodGroup ``job``'s message once its cycle failed and its preemption answered."""

    async def says() -> str | None:
        group = await kube.get("PodGroup", "job", namespace)
        for condition in (group.get("status") or {}).get("conditions") or []:
            message = str(condition.get("message") or "")
            if condition["type"] == "PodGroupInitiallyScheduled" and "preemption:" in message:
                return message
        return None

    return says


@pytest.fixture
async def scheduler(kubeconfig: Any) -> AsyncIterator[Scheduler]:
    replica, registry = start_scheduler(kubeconfig, unschedulable_retry=2.0)
    async with running_operator(registry, "scheduler"):
        yield replica


async def _nodes(kube: KubeAPI, driver: str, count: int) -> list[str]:
    """``count`` nodes with one GPU each, and the class of those GPUs (named ``driver``)."""
    names = []
    for _ in range(count):
        name = unique("node")
        await create_node(kube, name)
        await kube.create(slice_body(unique("slice"), driver, name, gpus(1)))
        names.append(name)
    await kube.create(device_class_body(driver, driver))
    return names


async def _pod(
    kube: KubeAPI,
    namespace: str,
    name: str,
    driver: str,
    priority_class: str,
    *,
    group: str | None = None,
    node: str | None = None,
) -> None:
    """A pod with a GPU claim of its own, of ``priority_class``, in PodGroup ``group``."""
    await kube.create(claim_body(name, namespace, device_class=driver))
    body = pod_body(name, namespace, {"name": "gpu", "resourceClaimName": name})
    body["spec"]["priorityClassName"] = priority_class
    body["spec"]["terminationGracePeriodSeconds"] = 30
    if group:
        body["spec"]["schedulingGroup"] = {"podGroupName": group}
    if node:
        body["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    await kube.create(body)


def _bound(kube: KubeAPI, namespace: str, name: str) -> Callable[[], Awaitable[str | None]]:
    return lambda: bound_node(kube, namespace, name)


async def _group(
    kube: KubeAPI, namespace: str, name: str, min_count: int, priority_class: str, mode: str
) -> dict[str, Any]:
    created: dict[str, Any] = await kube.create(
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": min_count}},
                "priorityClassName": priority_class,
                "disruptionMode": {mode: {}},
            },
        }
    )
    return created


async def test_a_gang_preempts_lower_priority_pods_on_two_nodes_and_is_placed_whole(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler
) -> None:
    classes = await priority_classes(kube)
    nodes = await _nodes(kube, driver, 2)
    for i, node in enumerate(nodes):
        await _pod(kube, namespace, f"low-{i}", driver, classes["low"], node=node)
        assert await eventually(_bound(kube, namespace, f"low-{i}")) == node
    group = await _group(kube, namespace, "job", 2, classes["high"], "single")
    assert group["spec"]["priority"] == 1000, "the Priority admission plugin filled it in"
    for i in range(2):
        await _pod(kube, namespace, f"worker-{i}", driver, classes["high"], group="job")

    (preempting,) = await events_with(kube, namespace, "Preempting")
    assert preempting["involvedObject"]["kind"] == "PodGroup"
    found = "pod group preemption: found a placement for podgroup, preempting 2 victims"

    async def told() -> list[str] | None:
        events = await events_with(kube, namespace, "FailedScheduling")
        return [m for e in events if (m := e["message"]).endswith(found)] or None

    if not PARENT_ONLY:  # 1.38 tells the pods only that their group is unschedulable
        assert await eventually(told, what="the gang's pods told it preempts")
    for i in range(2):
        await act_as_kubelet(kube, namespace, f"low-{i}")

    async def placed() -> list[str] | None:
        found = [await bound_node(kube, namespace, f"worker-{i}") for i in range(2)]
        return [n for n in found if n] if all(found) else None

    assert sorted(await eventually(placed, what="the gang bound")) == sorted(nodes)
    preempted = await events_with(kube, namespace, "Preempted")
    assert {e["message"] for e in preempted} == {
        f"Preempted by podgroup {group['metadata']['uid']} on node cluster"
    }


async def test_a_gang_that_would_fit_only_partly_evicts_nobody(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler
) -> None:
    """Two GPUs held by low-priority pods, a gang of three: no placement for the whole gang
    even with every victim gone, so nobody is evicted."""
    classes = await priority_classes(kube)
    nodes = await _nodes(kube, driver, 2)
    for i, node in enumerate(nodes):
        await _pod(kube, namespace, f"low-{i}", driver, classes["low"], node=node)
        assert await eventually(_bound(kube, namespace, f"low-{i}")) == node
    await _group(kube, namespace, "job", 3, classes["high"], "single")
    for i in range(3):
        await _pod(kube, namespace, f"worker-{i}", driver, classes["high"], group="job")

    async def told() -> str | None:
        # worker-0, tried first, fits nowhere: it is told its own reason, as upstream; the
        # others the group's (1.38: only that their group is unschedulable).
        condition = await pod_condition(kube, namespace, "worker-1")
        message = (condition or {}).get("message") or ""
        return message if "pod group preemption:" in message else None

    message = await eventually(_group_says(kube, namespace), what="the PodGroup told")
    # The trial's status, as the release's placement algorithm words it (one placement of
    # every node with TopologyAwareWorkloadScheduling on, the local control plane's).
    trial = (
        "scheduling policy's minimum threshold (3) cannot be satisfied: 2 scheduled, "
        "1 unschedulable, 0 not-evaluated"
        if PARENT_ONLY
        else "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining"
    )
    if feature_gates().get("TopologyAwareWorkloadScheduling"):
        trial = f"0/1 placements are available, first placement status: {trial}"
    if not PARENT_ONLY:
        trial = f"pod group is unschedulable, {trial}"
    assert message.endswith(f"pod group preemption: {trial}"), message
    if not PARENT_ONLY:
        assert (await eventually(told, what="the gang told why")).endswith(message), message
    for i in range(2):
        assert await deleting(kube, namespace, f"low-{i}") is None, "nobody evicted"


@pytest.mark.parametrize(("mode", "evicted"), [("all", 2), ("single", 1)])
async def test_a_running_gang_is_preempted_whole_or_by_member_as_its_disruption_mode_says(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler, mode: str, evicted: int
) -> None:
    """A low-priority gang of two holds both GPUs; a high-priority pod needs one. With
    ``disruptionMode: all`` both members go (the one on the other node too); with ``single``
    one member does."""
    classes = await priority_classes(kube)
    nodes = await _nodes(kube, driver, 2)
    await _group(kube, namespace, "job", 2, classes["low"], mode)
    for i in range(2):
        await _pod(kube, namespace, f"member-{i}", driver, classes["low"], group="job")

    async def placed() -> list[str] | None:
        found = [await bound_node(kube, namespace, f"member-{i}") for i in range(2)]
        return [n for n in found if n] if all(found) else None

    assert sorted(await eventually(placed, what="the low gang bound")) == sorted(nodes)
    await _pod(kube, namespace, "high", driver, classes["high"])

    async def victims() -> list[str] | None:
        going = [
            f"member-{i}"
            for i in range(2)
            if await deleting(kube, namespace, f"member-{i}") is not None
        ]
        return going or None

    # Posted once every eviction of the preemption is written.
    (preempting,) = await events_with(kube, namespace, "Preempting")
    assert preempting["involvedObject"]["name"] == "high"
    going = await eventually(victims, what="members being evicted")
    assert len(going) == evicted, going
    for name in going:
        await act_as_kubelet(kube, namespace, name)
    assert await eventually(lambda: bound_node(kube, namespace, "high"), what="high bound")
