"""Preemption for pods with DRA devices, on the real API server.

Virtual nodes have no kubelet and there is no disruption controller: the tests complete the
victims' graceful deletions themselves (what a kubelet does once the containers stopped) and
write the PodDisruptionBudgets' status.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from operators.api.keys import ObjectKey
from operators.controllers.scheduler.handlers import Scheduler
from operators.controllers.scheduler.metrics import REGISTRY
from operators.kube.api import KubeAPI, NotFoundError, resource_of
from tests.integration.helpers import (
    bound_node,
    create_node,
    device_class_body,
    events_with,
    eventually,
    pod_body,
    pod_condition,
    running_operator,
    slice_body,
    start_scheduler,
    unique,
)

pytestmark = pytest.mark.integration


# --- building blocks -------------------------------------------------------------------------


async def priority_classes(kube: KubeAPI) -> dict[str, str]:
    """low (10), high (1000) and polite (1000, preemptionPolicy Never), named for this test."""
    names = {}
    for role, value, policy in (
        ("low", 10, None),
        ("high", 1000, None),
        ("polite", 1000, "Never"),
    ):
        name = unique(role)
        body: dict[str, Any] = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        if policy:
            body["preemptionPolicy"] = policy
        await kube.create(body)
        names[role] = name
    return names


def claim(name: str, namespace: str, device_class: str, **fields: Any) -> dict[str, Any]:
    request = {"name": "dev", "exactly": {"deviceClassName": device_class, **fields}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [request]}},
    }


async def workload(
    kube: KubeAPI,
    namespace: str,
    name: str,
    priority_class: str,
    device_class: str,
    *,
    labels: dict[str, str] | None = None,
    node: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A claim and its pod, of ``priority_class`` (pinned to ``node`` by hostname)."""
    await kube.create(claim(name, namespace, device_class, **fields))
    body = pod_body(name, namespace, {"name": "dev", "resourceClaimName": name})
    body["spec"]["priorityClassName"] = priority_class
    body["spec"]["terminationGracePeriodSeconds"] = 30
    if labels:
        body["metadata"]["labels"] = labels
    if node:
        body["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    created: dict[str, Any] = await kube.create(body)
    return created


async def deleting(kube: KubeAPI, namespace: str, name: str) -> dict[str, Any] | None:
    with contextlib.suppress(NotFoundError):
        pod = await kube.get("Pod", name, namespace)
        return pod if pod["metadata"].get("deletionTimestamp") else None
    return None


async def act_as_kubelet(kube: KubeAPI, namespace: str, name: str) -> dict[str, Any]:
    """Wait for the graceful deletion the scheduler started, then complete it (grace 0), as
    the kubelet does once the containers have stopped. Returns the pod as it was deleted."""
    pod = await eventually(lambda: deleting(kube, namespace, name), what=f"{name} being deleted")
    options = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
    with contextlib.suppress(NotFoundError):
        await kube.call("DELETE", resource_of("Pod").path(namespace, name), body=options)
    return pod


def bound(kube: KubeAPI, namespace: str, name: str) -> Callable[[], Awaitable[str | None]]:
    return lambda: bound_node(kube, namespace, name)


async def untouched(kube: KubeAPI, namespace: str, name: str) -> bool:
    pod = await kube.get("Pod", name, namespace)
    conditions = [c["type"] for c in pod.get("status", {}).get("conditions") or []]
    return not pod["metadata"].get("deletionTimestamp") and "DisruptionTarget" not in conditions


async def message_of(kube: KubeAPI, namespace: str, name: str, part: str) -> str | None:
    condition = await pod_condition(kube, namespace, name)
    message = (condition or {}).get("message") or ""
    return message if part in message else None


def results(claim_body: dict[str, Any]) -> list[dict[str, Any]]:
    allocation = (claim_body.get("status") or {}).get("allocation") or {}
    return list((allocation.get("devices") or {}).get("results") or [])


@pytest.fixture(autouse=True)
async def pods_removed_afterwards(kube: KubeAPI, namespace: str) -> AsyncIterator[None]:
    """Pending pods left behind would be scheduled by every later test's scheduler (the
    control plane is shared by the session): they go, at once (no kubelet)."""
    yield
    options = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
    for pod in (await kube.list("Pod", namespace))["items"]:
        with contextlib.suppress(NotFoundError):
            path = resource_of("Pod").path(namespace, pod["metadata"]["name"])
            await kube.call("DELETE", path, body=options)


@pytest.fixture
async def scheduler(kubeconfig: Any) -> AsyncIterator[Scheduler]:
    replica, registry = start_scheduler(kubeconfig, unschedulable_retry=2.0)
    async with running_operator(registry, "scheduler"):
        yield replica


def kind_class(driver: str, kind: str) -> dict[str, Any]:
    return device_class_body(
        f"{kind}.{driver}", driver, f'device.attributes["{driver}"].kind == "{kind}"'
    )


async def mig_node(kube: KubeAPI, driver: str) -> str:
    """One A100-like GPU: the whole GPU or two 20Gi MIG partitions, on one counter set."""
    node = unique("node")
    await create_node(kube, node)
    counters = {"name": "gpu-0-counters", "counters": {"memory": {"value": "40Gi"}}}
    counter_slice = slice_body(
        unique("counters"), driver, node, [], count=2, sharedCounters=[counters]
    )
    del counter_slice["spec"]["devices"]
    await kube.create(counter_slice)

    def device(name: str, kind: str, memory: str) -> dict[str, Any]:
        return {
            "name": name,
            "attributes": {"kind": {"string": kind}},
            "consumesCounters": [
                {"counterSet": "gpu-0-counters", "counters": {"memory": {"value": memory}}}
            ],
        }

    devices = [
        device("gpu-0", "whole", "40Gi"),
        device("gpu-0-mig-0", "mig", "20Gi"),
        device("gpu-0-mig-1", "mig", "20Gi"),
    ]
    await kube.create(slice_body(unique("gpus"), driver, node, devices, count=2))
    for kind in ("whole", "mig"):
        await kube.create(kind_class(driver, kind))
    return node


# --- preemption ------------------------------------------------------------------------------


async def test_a_whole_gpu_holder_is_preempted_for_a_mig_partition_of_that_gpu(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler
) -> None:
    classes = await priority_classes(kube)
    node = await mig_node(kube, driver)
    victims_before = REGISTRY.get_sample_value("scheduler_preemption_victims_sum") or 0.0
    low = await workload(kube, namespace, "low", classes["low"], f"whole.{driver}")
    assert await eventually(lambda: bound_node(kube, namespace, "low"), what="low bound") == node
    high = await workload(kube, namespace, "high", classes["high"], f"mig.{driver}")
    # spec.priority as the Priority admission plugin of the local control plane filled it in.
    assert (high["spec"].get("priority"), low["spec"].get("priority")) == (1000, 10)

    victim = await act_as_kubelet(kube, namespace, "low")
    (condition,) = [c for c in victim["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert (condition["status"], condition["reason"]) == ("True", "PreemptionByScheduler")
    assert condition["message"] == "kopf-dra: preempting to accommodate a higher priority pod"
    assert victim["spec"]["terminationGracePeriodSeconds"] == 30
    assert victim["metadata"]["deletionGracePeriodSeconds"] == 30, "its own grace period"

    assert await eventually(lambda: bound_node(kube, namespace, "high"), what="high bound") == node
    (result,) = results(await kube.get("ResourceClaim", "high", namespace))
    assert result["device"].startswith("gpu-0-mig-")
    released = await kube.get("ResourceClaim", "low", namespace)
    assert not results(released), "the victim's claim was deallocated"
    assert not (released.get("status") or {}).get("reservedFor")

    preempted = await events_with(kube, namespace, "Preempted")
    assert preempted[0]["involvedObject"]["name"] == "low"
    assert preempted[0]["message"] == f"Preempted by pod {high['metadata']['uid']} on node {node}"
    (preempting,) = await events_with(kube, namespace, "Preempting")
    assert preempting["involvedObject"]["name"] == "high"
    assert preempting["message"] == (
        f"node {node}: preempting {namespace}/low (frees {driver}/{node}/gpu-0)"
    )
    victims = REGISTRY.get_sample_value("scheduler_preemption_victims_sum") or 0.0
    assert victims - victims_before >= 1
    assert REGISTRY.get_sample_value("scheduler_preemption_attempts_total")
    failed = await events_with(kube, namespace, "FailedScheduling")
    assert any(
        f"preemption: node {node}: preempting {namespace}/low" in e["message"] for e in failed
    ), [e["message"] for e in failed]


async def test_two_small_nic_shares_are_preempted_for_one_large_share(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler
) -> None:
    classes = await priority_classes(kube)
    node = unique("node")
    await create_node(kube, node)
    nic = {
        "name": "nic-0",
        "attributes": {"kind": {"string": "nic"}},
        "allowMultipleAllocations": True,
        "capacity": {"bandwidth": {"value": "100G"}},
    }
    await kube.create(slice_body(unique("nics"), driver, node, [nic]))
    await kube.create(kind_class(driver, "nic"))
    nic_class = f"nic.{driver}"
    for name, role, bandwidth in (
        ("small-1", "low", "40G"),
        ("small-2", "low", "40G"),
        ("vip", "high", "20G"),
    ):
        await workload(
            kube,
            namespace,
            name,
            classes[role],
            nic_class,
            capacity={"requests": {"bandwidth": bandwidth}},
        )
        assert await eventually(bound(kube, namespace, name), what=name) == node
    await workload(
        kube,
        namespace,
        "large",
        classes["high"],
        nic_class,
        capacity={"requests": {"bandwidth": "80G"}},
    )
    for victim in ("small-1", "small-2"):
        await act_as_kubelet(kube, namespace, victim)
    assert await eventually(lambda: bound_node(kube, namespace, "large"), what="large") == node
    assert await untouched(kube, namespace, "vip"), "the higher-priority share stays"
    (large,) = results(await kube.get("ResourceClaim", "large", namespace))
    assert large["consumedCapacity"]["bandwidth"] == "80G"


async def test_no_preemption_when_it_would_not_help(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler
) -> None:
    """Holders of equal priority, a pod that may not preempt, and a device no eviction frees:
    each explained, nobody evicted."""
    classes = await priority_classes(kube)
    node = await mig_node(kube, driver)
    await workload(kube, namespace, "peer", classes["high"], f"whole.{driver}")
    assert await eventually(lambda: bound_node(kube, namespace, "peer"), what="peer") == node
    await workload(kube, namespace, "equal", classes["high"], f"mig.{driver}")
    message = await eventually(
        lambda: message_of(kube, namespace, "equal", "preemption:"), what="equal explained"
    )
    # Nodes of earlier tests share the control plane: they are counted too, with reasons of
    # their own (their pods' claims are out of preemption's scope, or theirs are not ready).
    assert re.search(
        r"preemption: 0/\d+ nodes are available: (.*, )?\d+ No preemption victims found for "
        r"incoming pod[,.]",
        message,
    ), message
    await workload(kube, namespace, "polite", classes["polite"], f"mig.{driver}")
    message = await eventually(
        lambda: message_of(kube, namespace, "polite", "preemption:"), what="polite explained"
    )
    assert message.endswith("preemption: not eligible due to preemptionPolicy=Never."), message
    assert await untouched(kube, namespace, "peer")
    assert not await bound_node(kube, namespace, "equal")


async def test_a_budget_steers_preemption_to_the_unprotected_pod(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler
) -> None:
    """Two nodes, one low-priority holder each; a PodDisruptionBudget (status written here:
    no disruption controller runs) allows no disruption of the first."""
    classes = await priority_classes(kube)
    first, second = await mig_node(kube, driver), unique("node")
    await create_node(kube, second)
    await kube.create(
        slice_body(
            unique("gpus"),
            driver,
            second,
            [{"name": "gpu-0", "attributes": {"kind": {"string": "whole"}}}],
        )
    )
    pdb = await kube.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "protected", "namespace": namespace},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "protected"}}},
        }
    )
    pdb["status"] = {
        "disruptionsAllowed": 0,
        "currentHealthy": 1,
        "desiredHealthy": 1,
        "expectedPods": 1,
        "observedGeneration": pdb["metadata"]["generation"],
    }
    await kube.replace_status(pdb)
    for name, on, labels in (("protected", first, {"app": "protected"}), ("free", second, None)):
        await workload(
            kube, namespace, name, classes["low"], f"whole.{driver}", labels=labels, node=on
        )
        assert await eventually(bound(kube, namespace, name), what=name) == on
    await workload(kube, namespace, "high", classes["high"], f"whole.{driver}")
    await act_as_kubelet(kube, namespace, "free")
    assert await eventually(lambda: bound_node(kube, namespace, "high"), what="high") == second
    assert await untouched(kube, namespace, "protected")


async def test_the_pods_own_stranded_claim_is_recovered_before_anybody_is_preempted(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler
) -> None:
    """Its claim allocated on a cordoned node: PostFilter deallocates it and the pod goes to a
    free device; the low-priority holder elsewhere is never touched."""
    classes = await priority_classes(kube)
    cordoned, free, held = (unique("node") for _ in range(3))
    for name in (cordoned, free, held):
        await create_node(kube, name)
        await kube.create(
            slice_body(
                unique("gpus"),
                driver,
                name,
                [{"name": "gpu-0", "attributes": {"kind": {"string": "whole"}}}],
            )
        )
    await kube.create(kind_class(driver, "whole"))
    await workload(kube, namespace, "holder", classes["low"], f"whole.{driver}", node=held)
    assert await eventually(lambda: bound_node(kube, namespace, "holder"), what="holder") == held
    # The pod's own claim, allocated and reserved on the node that is then cordoned.
    mine = await kube.create(claim("mine", namespace, f"whole.{driver}"))
    pod = pod_body("mine", namespace, {"name": "dev", "resourceClaimName": "mine"})
    pod["spec"]["priorityClassName"] = classes["high"]
    pod["spec"]["schedulingGates"] = [{"name": "test/hold"}]
    pod = await kube.create(pod)
    mine["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "dev", "driver": driver, "pool": cordoned, "device": "gpu-0"}
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [cordoned]}
                        ]
                    }
                ]
            },
        },
        "reservedFor": [{"resource": "pods", "name": "mine", "uid": pod["metadata"]["uid"]}],
    }
    await kube.replace_status(mine)
    node = await kube.get("Node", cordoned)
    node["spec"]["unschedulable"] = True
    await kube.replace(node)

    async def cordon_seen() -> bool:
        # Nodes and pods come on separate watches: the pod's release must not overtake the
        # cordon on its way to the scheduler (no scheduler orders events of two kinds).
        seen = scheduler.indices.one("nodes", cordoned) or {}
        return bool((seen.get("spec") or {}).get("unschedulable"))

    await eventually(cordon_seen, what="the scheduler seeing the cordon")
    await kube.patch("Pod", "mine", {"spec": {"schedulingGates": None}}, namespace)
    assert await eventually(lambda: bound_node(kube, namespace, "mine"), what="mine") == free
    assert await untouched(kube, namespace, "holder")


# --- a scheduler killed between the victims' deletion and the preemptor's binding -----------


@pytest.mark.parametrize("after", ["bound", "nomination-cleared"])
async def test_a_restart_between_eviction_and_binding_leaves_nothing_stranded(
    kube: KubeAPI, kubeconfig: Any, namespace: str, driver: str, after: str
) -> None:
    """The first scheduler evicts and is stopped while the victim terminates (its memory of
    the nomination and the victim gone with it); the deletion completes while no scheduler
    runs. A new one releases the victim's claim from what the API server shows and binds the
    preemptor, or, when the node can no longer take it, clears the nomination; either way no
    claim stays allocated for a pod that is gone."""
    classes = await priority_classes(kube)
    node = await mig_node(kube, driver)
    _, registry = start_scheduler(kubeconfig, unschedulable_retry=2.0)
    async with running_operator(registry, "scheduler"):
        await workload(kube, namespace, "low", classes["low"], f"whole.{driver}")
        assert await eventually(lambda: bound_node(kube, namespace, "low"), what="low") == node
        await workload(kube, namespace, "high", classes["high"], f"mig.{driver}")
        await eventually(lambda: deleting(kube, namespace, "low"), what="low being deleted")

        async def nominated() -> str | None:
            pod = await kube.get("Pod", "high", namespace)
            node: str | None = pod["status"].get("nominatedNodeName")
            return node

        assert await eventually(nominated, what="high nominated") == node
    await act_as_kubelet(kube, namespace, "low")
    if after == "nomination-cleared":
        body = await kube.get("Node", node)
        body["spec"]["taints"] = [{"key": "maintenance", "effect": "NoSchedule"}]
        await kube.replace(body)
    _, registry = start_scheduler(kubeconfig, unschedulable_retry=2.0)
    async with running_operator(registry, "scheduler"):

        async def released() -> bool:
            return not results(await kube.get("ResourceClaim", "low", namespace))

        await eventually(released, what="the victim's claim released by the new scheduler")
        if after == "bound":
            assert (
                await eventually(lambda: bound_node(kube, namespace, "high"), what="high") == node
            )
        else:

            async def cleared() -> bool:
                pod = await kube.get("Pod", "high", namespace)
                return not pod["status"].get("nominatedNodeName")

            await eventually(cleared, what="the nomination cleared")
            assert not await bound_node(kube, namespace, "high")
            assert not results(await kube.get("ResourceClaim", "high", namespace))


class HoldingScheduler(Scheduler):
    """The scheduler, with the cycles of chosen pods held back once they are nominated: the
    window between a victim's disappearance and the preemptor's next cycle, made long."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.held: set[ObjectKey] = set()

    async def schedule(self, key: ObjectKey) -> None:
        if key in self.held and key in self.preemptor.nominations:
            return
        await super().schedule(key)


async def test_nominated_devices_are_not_given_to_a_lower_priority_pod(
    kube: KubeAPI, kubeconfig: Any, namespace: str, driver: str, controllers: None
) -> None:
    """The preemptor was promised a MIG partition; its victim is gone and the reservation
    cleanup has released the whole GPU. A lower-priority pod asking for the whole GPU must
    not get it while the preemptor waits; the preemptor then gets its partition."""
    classes = await priority_classes(kube)
    node = await mig_node(kube, driver)
    scheduler, registry = start_scheduler(kubeconfig, HoldingScheduler, unschedulable_retry=2.0)
    assert isinstance(scheduler, HoldingScheduler)
    scheduler.held.add(ObjectKey(namespace, "high"))
    async with running_operator(registry, "scheduler"):
        await workload(kube, namespace, "low", classes["low"], f"whole.{driver}")
        assert await eventually(bound(kube, namespace, "low"), what="low") == node
        await workload(kube, namespace, "high", classes["high"], f"mig.{driver}")
        await act_as_kubelet(kube, namespace, "low")

        async def released() -> bool:
            return not results(await kube.get("ResourceClaim", "low", namespace))

        await eventually(released, what="the victim's claim released by the cleanup")
        await workload(kube, namespace, "late", classes["low"], f"whole.{driver}")
        message = await eventually(
            lambda: message_of(kube, namespace, "late", "cannot allocate claim"),
            what="late explained",
        )
        assert "preemption: 0/" in message, message
        assert not await bound_node(kube, namespace, "late")
        scheduler.held.clear()
        scheduler.queue.add(ObjectKey(namespace, "high"))
        assert await eventually(bound(kube, namespace, "high"), what="high") == node
        assert not await bound_node(kube, namespace, "late")
