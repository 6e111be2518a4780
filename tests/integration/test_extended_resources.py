"""Extended resources backed by DRA (KEP-5004) on the real API server: a container asks for
``<driver>/gpu: 1`` with no ResourceClaim, and devices of the DeviceClass that names the
resource serve it on nodes that do not advertise it.

Virtual nodes have no kubelet: the tests delete pods with grace period 0, as a kubelet
completes a deletion. The reservation cleanup runs beside the scheduler (``controllers``).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator
from typing import Any

import pytest

from operators.api.names import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from operators.controllers.scheduler.handlers import Scheduler
from operators.kube.api import ApiError, KubeAPI, NotFoundError, resource_of
from operators.localcluster.controlplane import feature_gates
from operators.runtime.actions import Create
from tests.integration.helpers import (
    bound_node,
    create_node,
    device_class_body,
    devices_of,
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
from tests.integration.test_preemption import act_as_kubelet, message_of, priority_classes

pytestmark = pytest.mark.integration

GRACE_0 = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}


@pytest.fixture(autouse=True)
async def pods_removed_afterwards(kube: KubeAPI, namespace: str) -> AsyncIterator[None]:
    """Pending pods left behind would be scheduled by later tests' schedulers: gone, at once."""
    yield
    for pod in (await kube.list("Pod", namespace))["items"]:
        await _delete_now(kube, namespace, pod["metadata"]["name"])


async def _delete_now(kube: KubeAPI, namespace: str, name: str) -> None:
    with contextlib.suppress(NotFoundError):
        await kube.call("DELETE", resource_of("Pod").path(namespace, name), body=GRACE_0)


@pytest.fixture
async def scheduler(kubeconfig: Any, controllers: None) -> AsyncIterator[Scheduler]:
    replica, registry = start_scheduler(kubeconfig, unschedulable_retry=2.0)
    async with running_operator(registry, "scheduler"):
        yield replica


def resource(driver: str) -> str:
    return f"{driver}/gpu"


async def extended_class(kube: KubeAPI, driver: str) -> str:
    """A DeviceClass of the driver's devices that also answers to ``<driver>/gpu``."""
    body = device_class_body(unique("gpu"), driver)
    body["spec"]["extendedResourceName"] = resource(driver)
    created = await kube.create(body)
    return str(created["metadata"]["name"])


async def dra_node(kube: KubeAPI, driver: str, devices: int) -> str:
    node = unique("node")
    await create_node(kube, node)
    await kube.create(slice_body(unique("slice"), driver, node, gpus(devices)))
    return node


def asking(
    name: str, namespace: str, wants: dict[str, str], node: str | None = None
) -> dict[str, Any]:
    """A pod whose container asks for ``wants`` in its limits, with no claim."""
    body = pod_body(name, namespace)
    body["spec"]["containers"][0]["resources"] = {"limits": wants}
    if node is not None:
        body["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return body


async def special_claims(kube: KubeAPI, namespace: str) -> list[dict[str, Any]]:
    claims = (await kube.list("ResourceClaim", namespace))["items"]
    return [
        c
        for c in claims
        if (c["metadata"].get("annotations") or {}).get(EXTENDED_RESOURCE_CLAIM_ANNOTATION)
        == "true"
    ]


async def special_claim_of(kube: KubeAPI, namespace: str, pod: str) -> dict[str, Any]:
    body = await kube.get("Pod", pod, namespace)
    status = body["status"]["extendedResourceClaimStatus"]
    claim: dict[str, Any] = await kube.get("ResourceClaim", status["resourceClaimName"], namespace)
    return claim


async def test_a_pod_asking_for_an_extended_resource_gets_its_special_claim(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler
) -> None:
    device_class = await extended_class(kube, driver)
    node = await dra_node(kube, driver, devices=2)
    await kube.create(asking("explicit", namespace, {resource(driver): "1"}))
    implicit = f"deviceclass.resource.kubernetes.io/{device_class}"
    await kube.create(asking("implicit", namespace, {implicit: "1"}))
    for name in ("explicit", "implicit"):
        bound = await eventually(functools.partial(bound_node, kube, namespace, name), what=name)
        assert bound == node

    pod = await kube.get("Pod", "explicit", namespace)
    status = pod["status"]["extendedResourceClaimStatus"]
    assert status["requestMappings"] == [
        {
            "containerName": "main",
            "resourceName": resource(driver),
            "requestName": "container-0-request-0",
        }
    ]
    claim = await special_claim_of(kube, namespace, "explicit")
    meta = claim["metadata"]
    assert meta["name"].startswith("explicit-extended-resources-")
    assert meta["generateName"] == "explicit-extended-resources-"
    assert meta["annotations"][EXTENDED_RESOURCE_CLAIM_ANNOTATION] == "true"
    (owner,) = meta["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Pod",
        "explicit",
        pod["metadata"]["uid"],
        True,
    )
    assert "resource.kubernetes.io/delete-protection" in meta["finalizers"]
    (request,) = claim["spec"]["devices"]["requests"]
    assert request["name"] == "container-0-request-0"
    exactly = request["exactly"]
    assert (exactly["deviceClassName"], exactly["allocationMode"], exactly["count"]) == (
        device_class,
        "ExactCount",
        1,
    )
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]
    other = await special_claim_of(kube, namespace, "implicit")
    assert sorted([*devices_of(claim), *devices_of(other)]) == [
        f"{node}/gpu-0",
        f"{node}/gpu-1",
    ]

    # The pod goes: the reservation cleanup releases its claim and deletes it.
    await _delete_now(kube, namespace, "explicit")

    async def gone() -> bool:
        try:
            await kube.get("ResourceClaim", meta["name"], namespace)
        except NotFoundError:
            return True
        return False

    await eventually(gone, what="the special claim deleted with its pod")


async def test_a_node_with_a_device_plugin_serves_the_resource_from_its_allocatable(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler
) -> None:
    await extended_class(kube, driver)
    await dra_node(kube, driver, devices=1)
    plugin_node = unique("node")
    node = await create_node(kube, plugin_node)
    for field in ("capacity", "allocatable"):
        node["status"][field][resource(driver)] = "2"
    await kube.replace_status(node)  # as a device plugin's resource shows up
    await kube.create(asking("plugged", namespace, {resource(driver): "2"}, node=plugin_node))
    assert await eventually(lambda: bound_node(kube, namespace, "plugged")) == plugin_node
    pod = await kube.get("Pod", "plugged", namespace)
    assert "extendedResourceClaimStatus" not in pod["status"]
    assert await special_claims(kube, namespace) == []

    # The node's allocatable is used up: a third one does not fit there (NodeResourcesFit).
    await kube.create(asking("more", namespace, {resource(driver): "1"}, node=plugin_node))

    insufficient = functools.partial(
        message_of, kube, namespace, "more", f"Insufficient {resource(driver)}"
    )
    await eventually(insufficient, what="more unschedulable for want of the resource")
    assert await special_claims(kube, namespace) == []


async def test_with_the_gate_off_the_resource_is_only_what_nodes_advertise(
    kube: KubeAPI, namespace: str, driver: str, kubeconfig: Any, controllers: None
) -> None:
    await extended_class(kube, driver)
    await dra_node(kube, driver, devices=1)
    # 1.36's scheduler: 1.37 locks the gate on (tests/unit/test_feature_gates.py).
    gates = {**feature_gates("v1.36.3"), "DRAExtendedResource": False}
    _, registry = start_scheduler(
        kubeconfig, feature_gates=gates, kubernetes_version="1.36", unschedulable_retry=2.0
    )
    async with running_operator(registry, "scheduler"):
        await kube.create(asking("plain", namespace, {resource(driver): "1"}))

        insufficient = functools.partial(
            message_of, kube, namespace, "plain", f"Insufficient {resource(driver)}"
        )
        await eventually(insufficient, what="plain unschedulable: the gate is off")
    assert await special_claims(kube, namespace) == []
    assert not await bound_node(kube, namespace, "plain")


async def test_a_high_priority_pod_preempts_for_the_only_device_and_gets_its_claim(
    kube: KubeAPI, namespace: str, driver: str, scheduler: Scheduler
) -> None:
    classes = await priority_classes(kube)
    await extended_class(kube, driver)
    node = await dra_node(kube, driver, devices=1)
    low = asking("low", namespace, {resource(driver): "1"})
    low["spec"]["priorityClassName"] = classes["low"]
    await kube.create(low)
    assert await eventually(lambda: bound_node(kube, namespace, "low")) == node
    low_claim = await special_claim_of(kube, namespace, "low")

    high = asking("high", namespace, {resource(driver): "1"})
    high["spec"]["priorityClassName"] = classes["high"]
    await kube.create(high)
    await act_as_kubelet(kube, namespace, "low")
    assert await eventually(lambda: bound_node(kube, namespace, "high")) == node
    claim = await special_claim_of(kube, namespace, "high")
    assert devices_of(claim) == [f"{node}/gpu-0"]
    assert claim["metadata"]["name"] != low_claim["metadata"]["name"]


# --- failures between the writes -------------------------------------------------------------


class FailsPodStatusOnce(Scheduler):
    """The scheduler, whose first write of a pod's extendedResourceClaimStatus fails (the
    special claim is created and allocated by then)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.failed: list[str] = []

    async def apply(self, action: Any) -> Any:
        patch = getattr(action, "patch", None)
        if (
            not self.failed
            and isinstance(patch, dict)
            and "extendedResourceClaimStatus" in (patch.get("status") or {})
        ):
            self.failed.append(patch["status"]["extendedResourceClaimStatus"]["resourceClaimName"])
            raise ApiError(500, "InternalError", "injected", {})
        return await super().apply(action)


async def test_a_failed_pod_status_write_leaves_no_claim_behind(
    kube: KubeAPI, namespace: str, driver: str, kubeconfig: Any, controllers: None
) -> None:
    await extended_class(kube, driver)
    node = await dra_node(kube, driver, devices=1)
    replica, registry = start_scheduler(kubeconfig, FailsPodStatusOnce, unschedulable_retry=2.0)
    assert isinstance(replica, FailsPodStatusOnce)
    async with running_operator(registry, "scheduler"):
        await kube.create(asking("retried", namespace, {resource(driver): "1"}))
        assert await eventually(lambda: bound_node(kube, namespace, "retried")) == node
    (first,) = replica.failed
    (claim,) = await special_claims(kube, namespace)
    assert claim["metadata"]["name"] != first, "the first attempt's claim was deleted"
    named = await special_claim_of(kube, namespace, "retried")
    assert claim["metadata"]["uid"] == named["metadata"]["uid"]
    assert devices_of(claim) == [f"{node}/gpu-0"]


async def _crash_left(
    kube: KubeAPI, namespace: str, driver: str, pod: dict[str, Any], *, allocated: bool
) -> str:
    """A special claim as a scheduler that crashed mid-binding left it: created, and (with
    ``allocated``) allocated and reserved for the pod, the pod status not written."""
    name = f"{pod['metadata']['name']}-extended-resources-crash"
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "generateName": f"{pod['metadata']['name']}-extended-resources-",
            "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
            "finalizers": ["resource.kubernetes.io/delete-protection"],
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod["metadata"]["name"],
                    "uid": pod["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "container-0-request-0",
                        "exactly": {"deviceClassName": driver, "count": 1},
                    }
                ]
            }
        },
    }
    created = await kube.create(body)
    if allocated:
        pool = pod["spec"]["nodeSelector"]["kubernetes.io/hostname"]
        created["status"] = {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "container-0-request-0",
                            "driver": driver,
                            "pool": pool,
                            "device": "gpu-0",
                        }
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [pool]}
                            ]
                        }
                    ]
                },
            },
            "reservedFor": [
                {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
            ],
        }
        await kube.replace_status(created)
    return name


@pytest.mark.parametrize("allocated", [False, True], ids=["stale-deleted", "reserved-reused"])
async def test_a_special_claim_a_crash_left_is_deleted_or_reused(
    kube: KubeAPI,
    namespace: str,
    driver: str,
    kubeconfig: Any,
    controllers: None,
    allocated: bool,
) -> None:
    await kube.create(device_class_body(driver, driver))
    ext = device_class_body(unique("gpu"), driver)
    ext["spec"]["extendedResourceName"] = resource(driver)
    await kube.create(ext)
    node = await dra_node(kube, driver, devices=1)
    pod = await kube.create(asking("resumed", namespace, {resource(driver): "1"}, node=node))
    left = await _crash_left(kube, namespace, driver, pod, allocated=allocated)
    _, registry = start_scheduler(kubeconfig, unschedulable_retry=2.0)
    async with running_operator(registry, "scheduler"):
        assert await eventually(lambda: bound_node(kube, namespace, "resumed")) == node
    (claim,) = await special_claims(kube, namespace)
    named = await special_claim_of(kube, namespace, "resumed")
    assert claim["metadata"]["uid"] == named["metadata"]["uid"]
    assert (claim["metadata"]["name"] == left) is allocated
    assert devices_of(claim) == [f"{node}/gpu-0"]


class RefusedCreates(Scheduler):
    """The scheduler under a role without ``create`` on resourceclaims (the API's 403)."""

    async def apply(self, action: Any) -> Any:
        if isinstance(action, Create) and action.body.get("kind") == "ResourceClaim":
            raise ApiError(403, "Forbidden", "cannot create resource resourceclaims", {})
        return await super().apply(action)


async def test_a_refused_claim_create_is_told_on_the_pod_and_retried_with_backoff(
    kube: KubeAPI, namespace: str, driver: str, kubeconfig: Any, controllers: None
) -> None:
    await extended_class(kube, driver)
    await dra_node(kube, driver, devices=1)
    _, registry = start_scheduler(kubeconfig, RefusedCreates, unschedulable_retry=2.0)
    async with running_operator(registry, "scheduler"):
        await kube.create(asking("refused", namespace, {resource(driver): "1"}))

        async def told() -> dict[str, Any] | None:
            condition = await pod_condition(kube, namespace, "refused")
            return condition if condition and condition.get("reason") == "SchedulerError" else None

        condition = await eventually(told, what="PodScheduled=False, SchedulerError")
        assert condition["status"] == "False"
        assert "403 Forbidden: cannot create resource resourceclaims" in condition["message"]
        (event, *_) = await events_with(kube, namespace, "FailedScheduling")
        assert "403 Forbidden" in event["message"]
    assert not await bound_node(kube, namespace, "refused")
    assert await special_claims(kube, namespace) == []
