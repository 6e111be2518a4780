"""The scheduler's DRA scenarios against the real API server (issue 6, "Tests against the real
control plane"): partitions, multi-host devices, prioritized alternatives, consumable capacity,
adminAccess, binding conditions, a scheduler killed mid-cycle, leader failover and scale.

The tests play kubelet, the DRA driver and (for binding conditions) the fabric controller. Each
test has its own driver name (fixture ``driver``) and device classes, so devices of other tests
sharing the control plane never match; their nodes exist and must simply not fit.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from collections.abc import AsyncIterator, Callable
from decimal import Decimal
from typing import Any

import kopf
import pytest
from kubernetes_asyncio import client

from operators.api.keys import ObjectKey
from operators.api.quantity import parse_quantity
from operators.api.timestamps import parse_time
from operators.controllers.scheduler.handlers import Scheduler
from operators.controllers.scheduler.metrics import REGISTRY as SCHEDULER_REGISTRY
from operators.controllers.scheduler.queueing import PodState
from operators.kube.api import ConflictError, KubeAPI, NotFoundError
from operators.runtime.clock import SystemClock
from tests.integration.helpers import (
    bound_node,
    create_namespace,
    create_node,
    device_class_body,
    devices_of,
    events_with,
    eventually,
    gpu_cluster,
    pod_body,
    pod_condition,
    running_operator,
    slice_body,
    start_scheduler,
    template_body,
    unique,
    while_progressing,
)

ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
ATTACHED, ATTACH_FAILED = "FabricDeviceAttached", "FabricDeviceAttachFailed"


class ObservedScheduler(Scheduler):
    """The scheduler, recording which claim versions each finished cycle started from, so a
    test can tell that the scheduler has looked at a change and decided (not to bind)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cycles: list[tuple[tuple[str, str], dict[str, int]]] = []

    async def schedule(self, key: ObjectKey) -> None:
        seen = {}
        if self.indices.ready:
            for namespace, name in self.indices.keys("claims"):
                if namespace != key[0]:
                    continue
                body = self.indices.one("claims", (namespace, name)) or {}
                seen[name] = int(body.get("metadata", {}).get("resourceVersion") or 0)
        try:
            await super().schedule(key)
        finally:
            self.cycles.append((key, seen))

    def decided(self, key: tuple[str, str], claim_name: str, version: str) -> bool:
        """A cycle of ``key`` that saw claim ``claim_name`` at ``version`` or later has run."""
        return any(k == key and v.get(claim_name, 0) >= int(version) for k, v in self.cycles)


class StoppingClock(SystemClock):
    """Wall time that stops at an instant the test picks (monotonic time goes on)."""

    def __init__(self) -> None:
        self.stop: datetime.datetime | None = None

    def stop_at(self, instant: datetime.datetime) -> None:
        self.stop = instant

    def now(self) -> datetime.datetime:
        real = super().now()
        return real if self.stop is None else min(real, self.stop)


def observed(kubeconfig: Any, **overrides: Any) -> tuple[ObservedScheduler, kopf.OperatorRegistry]:
    scheduler, registry = start_scheduler(kubeconfig, ObservedScheduler, **overrides)
    assert isinstance(scheduler, ObservedScheduler)
    return scheduler, registry


@pytest.fixture
async def scheduler(kubeconfig: Any) -> AsyncIterator[ObservedScheduler]:
    """A scheduler alone: these tests use persistent claims unless they say otherwise."""
    scheduler, registry = observed(kubeconfig)
    async with running_operator(registry, "scheduler"):
        yield scheduler


# --- building blocks -------------------------------------------------------------------------


def request(name: str, device_class: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": device_class, **fields}}


def claim(name: str, namespace: str, *requests: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": list(requests)}},
    }


def pod_with_claim(
    name: str, namespace: str, claim_name: str, *, node: str | None = None
) -> dict[str, Any]:
    """A pod of our scheduler using persistent claim ``claim_name``, pinned by hostname."""
    body = pod_body(name, namespace, {"name": "gpu", "resourceClaimName": claim_name})
    if node:
        body["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return body


async def allocated(kube: KubeAPI, namespace: str, name: str) -> dict[str, Any] | None:
    body = await kube.get("ResourceClaim", name, namespace)
    return body if (body.get("status") or {}).get("allocation") else None


async def unschedulable(kube: KubeAPI, namespace: str, pod: str) -> str | None:
    """The PodScheduled=False message once the scheduler explained why ``pod`` cannot run."""
    condition = await pod_condition(kube, namespace, pod)
    if condition and condition["status"] == "False" and condition["reason"] == "Unschedulable":
        message: str = condition["message"]
        return message
    return None


async def explained(kube: KubeAPI, namespace: str, pod: str) -> str:
    return await eventually(
        lambda: unschedulable(kube, namespace, pod), what=f"pod {pod} explained as unschedulable"
    )


async def left_waiting(
    scheduler: ObservedScheduler, namespace: str, pod: str, claim: dict[str, Any]
) -> bool:
    """A cycle of ``pod`` saw ``claim`` (this version or later) and left the pod waiting on
    binding conditions, neither binding it nor starting to."""
    key = ObjectKey(namespace, pod)
    version = claim["metadata"]["resourceVersion"]
    return (
        scheduler.decided(key, claim["metadata"]["name"], version)
        and key in scheduler.queue.in_state(PodState.WAITING)
        and key not in scheduler.binder
    )


def _quantity(value: Any) -> Decimal:
    return parse_quantity(value).value


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def report_conditions(
    kube: KubeAPI, namespace: str, name: str, states: dict[str, bool], *, only: int | None = None
) -> dict[str, Any]:
    """Play the fabric controller: write ``states`` for the allocated devices (all, or the
    ``only``-th) into ``status.devices``, retrying on write conflicts with the scheduler."""

    async def write() -> dict[str, Any] | None:
        body = await kube.get("ResourceClaim", name, namespace)
        results = body["status"]["allocation"]["devices"]["results"]
        devices = []
        for i, r in enumerate(results):
            if only is not None and i != only:
                continue
            conditions = [
                {
                    "type": t,
                    "status": "True" if v else "False",
                    "reason": "Attached" if v else "Pending",
                    "message": "reported by the test",
                    "lastTransitionTime": _now(),
                }
                for t, v in states.items()
            ]
            devices.append(
                {
                    "driver": r["driver"],
                    "pool": r["pool"],
                    "device": r["device"],
                    "conditions": conditions,
                }
            )
        body["status"]["devices"] = devices
        try:
            written: dict[str, Any] = await kube.replace_status(body)
        except ConflictError:
            return None
        return written

    return await eventually(write, what=f"device conditions written to claim {name}")


async def claim_event(
    kube: KubeAPI,
    namespace: str,
    name: str,
    since: str,
    predicate: Callable[[dict[str, Any]], bool],
    within: float = 30.0,
) -> dict[str, Any]:
    """The first version of the claim after resourceVersion ``since`` that matches: a watch
    replays every write, so a state the scheduler passes through quickly is not missed."""

    async def scan() -> dict[str, Any]:
        async for event in kube.watch("ResourceClaim", namespace, resource_version=since):
            obj: dict[str, Any] = event.get("object") or {}
            name_matches = obj.get("metadata", {}).get("name") == name
            if event.get("type") in ("ADDED", "MODIFIED") and name_matches and predicate(obj):
                return obj
        raise AssertionError(f"watch of claim {name} ended")

    return await asyncio.wait_for(scan(), within)


def counter_slice(
    driver: str, node: str, counter_set: dict[str, Any], **spec: Any
) -> dict[str, Any]:
    """A slice of shared counters only (the API allows counters or devices in one slice)."""
    body = slice_body(unique("counters"), driver, node, [], sharedCounters=[counter_set], **spec)
    del body["spec"]["devices"]
    return body


def cleared(body: dict[str, Any]) -> bool:
    status = body.get("status") or {}
    return not any(status.get(k) for k in ("allocation", "devices", "reservedFor"))


# --- 1. partitions with shared counters (KEP-4815) -----------------------------------------

# One GPU of 8Gi in four memory slices: 1g partitions take one slice, 2g two, 4g all four.
PROFILES = {
    **{f"gpu-0-1g-{i}": ("1g", [i]) for i in range(4)},
    "gpu-0-2g-0": ("2g", [0, 1]),
    "gpu-0-2g-1": ("2g", [2, 3]),
    "gpu-0-4g-0": ("4g", [0, 1, 2, 3]),
}
COUNTERS = {"memory": "8Gi", **{f"memory-slice-{i}": "1" for i in range(4)}}


def partition(name: str, profile: str, memory_slices: list[int]) -> dict[str, Any]:
    consumes = {f"memory-slice-{i}": {"value": "1"} for i in memory_slices}
    consumes["memory"] = {"value": f"{2 * len(memory_slices)}Gi"}
    return {
        "name": name,
        "attributes": {"profile": {"string": profile}},
        "capacity": {"memory": {"value": f"{2 * len(memory_slices)}Gi"}},
        "consumesCounters": [{"counterSet": "gpu-0-counters", "counters": consumes}],
    }


async def test_partitions_fill_a_node_exactly_without_counter_overrun(
    kube: KubeAPI, namespace: str, driver: str, scheduler: ObservedScheduler
) -> None:
    node = unique("node")
    await create_node(kube, node)
    counter_set = {
        "name": "gpu-0-counters",
        "counters": {k: {"value": v} for k, v in COUNTERS.items()},
    }
    await kube.create(counter_slice(driver, node, counter_set, count=2))
    devices = [partition(n, p, s) for n, (p, s) in PROFILES.items()]
    await kube.create(slice_body(unique("partitions"), driver, node, devices, count=2))
    for profile in ("1g", "2g", "4g"):
        expression = f'device.attributes["{driver}"].profile == "{profile}"'
        await kube.create(device_class_body(f"{profile}.{driver}", driver, expression))

    async def place(pod: str, profile: str) -> None:
        await kube.create(claim(pod, namespace, request("gpu", f"{profile}.{driver}")))
        await kube.create(pod_with_claim(pod, namespace, pod))

    # The 2g partition first, then three 1g pods at once: two fit beside it, the third not.
    await place("two-g", "2g")
    await eventually(lambda: bound_node(kube, namespace, "two-g"), what="2g pod bound")
    await asyncio.gather(*(place(f"one-g-{i}", "1g") for i in range(3)))

    async def two_bound_one_explained() -> tuple[list[str], list[str]] | None:
        names = [f"one-g-{i}" for i in range(3)]
        bound = [n for n in names if await bound_node(kube, namespace, n)]
        waiting = [n for n in names if await unschedulable(kube, namespace, n)]
        return (bound, waiting) if len(bound) == 2 and len(waiting) == 1 else None

    bound, (left_out,) = await eventually(two_bound_one_explained, what="2 of 3 1g pods bound")
    message = await explained(kube, namespace, left_out)
    assert f"cannot allocate claim {namespace}/{left_out}" in message, message
    # The whole GPU does not fit either, and says so.
    await place("four-g", "4g")
    message = await explained(kube, namespace, "four-g")
    assert f"cannot allocate claim {namespace}/four-g" in message, message

    # What is allocated fills the counter set exactly, never beyond.
    taken: list[str] = []
    for pod in ["two-g", *bound]:
        body = await kube.get("ResourceClaim", pod, namespace)
        assert await bound_node(kube, namespace, pod) == node
        taken += [d.split("/", 1)[1] for d in devices_of(body)]
    assert len(taken) == len(set(taken)) == 3
    consumed: dict[str, Decimal] = {}
    by_name = {d["name"]: d for d in devices}
    for name in taken:
        for counter, value in by_name[name]["consumesCounters"][0]["counters"].items():
            consumed[counter] = consumed.get(counter, Decimal(0)) + _quantity(value["value"])
    for counter, value in COUNTERS.items():
        assert consumed.get(counter, Decimal(0)) == _quantity(value), (counter, taken)
    assert sorted(PROFILES[n][0] for n in taken) == ["1g", "1g", "2g"]


# --- 2. a multi-host device (KEP-4815) -------------------------------------------------------


async def test_multi_host_device_shared_by_two_pods_lands_on_its_nodes(
    kube: KubeAPI, namespace: str, driver: str, scheduler: ObservedScheduler
) -> None:
    island = f"{driver}/island"
    a, b, outside = unique("node"), unique("node"), unique("node")
    for name in (a, b):
        await create_node(kube, name, {island: "i1"})
    await create_node(kube, outside)
    selector = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": island, "operator": "In", "values": ["i1"]}]}
        ]
    }
    pool = unique("tpus")
    counter_set = {
        "name": "tpu-counters",
        "counters": {f"tpus-{n}": {"value": "4"} for n in ("a", "b")},
    }
    await kube.create(counter_slice(driver, "", counter_set, pool=pool, count=2, allNodes=True))
    tpu = {
        "name": "tpu-2x4-0",
        "nodeSelector": selector,
        "capacity": {"tpus": {"value": "8"}},
        "consumesCounters": [
            {
                "counterSet": "tpu-counters",
                "counters": {f"tpus-{n}": {"value": "4"} for n in ("a", "b")},
            }
        ],
    }
    await kube.create(
        slice_body(
            unique("tpus"), driver, "", [tpu], pool=pool, count=2, perDeviceNodeSelection=True
        )
    )
    await kube.create(device_class_body(driver, driver))
    await kube.create(claim("tpu", namespace, request("gpu", driver)))

    # One pod per host of the device, each pinned there; both share the one allocation.
    await kube.create(pod_with_claim("host-a", namespace, "tpu", node=a))
    assert await eventually(lambda: bound_node(kube, namespace, "host-a"), what="a") == a
    await kube.create(pod_with_claim("host-b", namespace, "tpu", node=b))
    assert await eventually(lambda: bound_node(kube, namespace, "host-b"), what="b") == b
    body = await kube.get("ResourceClaim", "tpu", namespace)
    assert body["status"]["allocation"]["nodeSelector"] == selector
    assert devices_of(body) == [f"{pool}/tpu-2x4-0"]
    assert sorted(r["name"] for r in body["status"]["reservedFor"]) == ["host-a", "host-b"]
    # A pod free to go anywhere still lands on one of the device's nodes ...
    await kube.create(pod_with_claim("anywhere", namespace, "tpu"))
    assert await eventually(lambda: bound_node(kube, namespace, "anywhere"), what="any") in (a, b)
    # ... and one pinned elsewhere is explained, not placed.
    await kube.create(pod_with_claim("elsewhere", namespace, "tpu", node=outside))
    message = await explained(kube, namespace, "elsewhere")
    assert f"didn't match allocated claim {namespace}/tpu's node selector" in message, message
    assert (await kube.get("ResourceClaim", "tpu", namespace))["status"]["allocation"] == body[
        "status"
    ]["allocation"]


# --- 3. prioritized alternatives (KEP-4816) --------------------------------------------------


async def test_prioritized_alternatives_fall_back_and_name_the_subrequest(
    kube: KubeAPI, namespace: str, driver: str, scheduler: ObservedScheduler
) -> None:
    small_node, big_node = unique("node"), unique("node")
    for node, model in ((small_node, "small"), (big_node, "big")):
        await create_node(kube, node)
        device = {"name": f"{model}-0", "attributes": {"model": {"string": model}}}
        await kube.create(slice_body(unique("slice"), driver, node, [device]))
    for model in ("big", "small"):
        expression = f'device.attributes["{driver}"].model == "{model}"'
        await kube.create(device_class_body(f"{model}.{driver}", driver, expression))

    def prioritized(name: str) -> dict[str, Any]:
        alternatives = [{"name": m, "deviceClassName": f"{m}.{driver}"} for m in ("big", "small")]
        return claim(name, namespace, {"name": "gpu", "firstAvailable": alternatives})

    # The first pod gets its first choice, wherever the nodes sort; the second falls back.
    await kube.create(prioritized("first"))
    await kube.create(pod_with_claim("first", namespace, "first"))
    assert await eventually(lambda: bound_node(kube, namespace, "first"), what="1st") == big_node
    await kube.create(prioritized("second"))
    await kube.create(pod_with_claim("second", namespace, "second"))
    assert await eventually(lambda: bound_node(kube, namespace, "second"), what="2nd") == small_node

    first = (await kube.get("ResourceClaim", "first", namespace))["status"]["allocation"]
    second = (await kube.get("ResourceClaim", "second", namespace))["status"]["allocation"]
    assert [(r["request"], r["device"]) for r in first["devices"]["results"]] == [
        ("gpu/big", "big-0")
    ]
    assert [(r["request"], r["device"]) for r in second["devices"]["results"]] == [
        ("gpu/small", "small-0")
    ]
    # Neither alternative is left for a third pod.
    await kube.create(prioritized("third"))
    await kube.create(pod_with_claim("third", namespace, "third"))
    message = await explained(kube, namespace, "third")
    assert f"cannot allocate claim {namespace}/third" in message, message


# --- 4. consumable capacity (KEP-5075) ------------------------------------------------------


async def test_consumable_capacity_shared_across_namespaces_until_full(
    kube: KubeAPI, api: client.ApiClient, namespace: str, driver: str, scheduler: ObservedScheduler
) -> None:
    other = await create_namespace(api)
    node = unique("node")
    await create_node(kube, node)
    nic = {
        "name": "eth1",
        "allowMultipleAllocations": True,
        "capacity": {
            "bandwidth": {
                "value": "10Gi",
                "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}},
            }
        },
    }
    await kube.create(slice_body(unique("nics"), driver, node, [nic]))
    await kube.create(device_class_body(driver, driver))

    def nic_claim(name: str, ns: str, bandwidth: str) -> dict[str, Any]:
        capacity = {"requests": {"bandwidth": bandwidth}}
        return claim(name, ns, request("gpu", driver, capacity=capacity))

    # Two unrelated claims in two namespaces share the NIC: 4Gi + 5Gi of 10Gi.
    for ns, name, bandwidth in ((namespace, "nic-a", "4Gi"), (other, "nic-b", "5Gi")):
        await kube.create(nic_claim(name, ns, bandwidth))
        await kube.create(pod_with_claim(name, ns, name))
    assert await eventually(lambda: bound_node(kube, namespace, "nic-a"), what="a") == node
    assert await eventually(lambda: bound_node(kube, other, "nic-b"), what="b") == node
    results = [
        (await kube.get("ResourceClaim", name, ns))["status"]["allocation"]["devices"]["results"]
        for ns, name in ((namespace, "nic-a"), (other, "nic-b"))
    ]
    assert [len(r) for r in results] == [1, 1]
    (a,), (b,) = results
    assert (a["pool"], a["device"]) == (b["pool"], b["device"]) == (node, "eth1")
    assert a["shareID"]
    assert b["shareID"]
    assert a["shareID"] != b["shareID"]
    used = [_quantity(r["consumedCapacity"]["bandwidth"]) for r in (a, b)]
    assert used == [_quantity("4Gi"), _quantity("5Gi")]
    assert sum(used) <= _quantity("10Gi")

    # 2Gi more does not fit into the 1Gi left: rejected and explained, the rest unchanged.
    await kube.create(nic_claim("nic-c", namespace, "2Gi"))
    await kube.create(pod_with_claim("nic-c", namespace, "nic-c"))
    message = await explained(kube, namespace, "nic-c")
    assert f"cannot allocate claim {namespace}/nic-c" in message, message
    assert not await allocated(kube, namespace, "nic-c")
    # 1Gi still fits.
    await kube.create(nic_claim("nic-d", other, "1Gi"))
    await kube.create(pod_with_claim("nic-d", other, "nic-d"))
    assert await eventually(lambda: bound_node(kube, other, "nic-d"), what="nic-d") == node


# --- 5. adminAccess --------------------------------------------------------------------------


async def test_admin_access_gets_a_device_already_allocated(
    kube: KubeAPI, api: client.ApiClient, namespace: str, driver: str, scheduler: ObservedScheduler
) -> None:
    admin_ns = await create_namespace(api, {ADMIN_ACCESS_LABEL: "true"})
    (node,) = await gpu_cluster(kube, driver, nodes=1, per_node=1)
    await kube.create(claim("user", namespace, request("gpu", driver)))
    await kube.create(pod_with_claim("user", namespace, "user"))
    assert await eventually(lambda: bound_node(kube, namespace, "user"), what="user") == node

    await kube.create(claim("monitor", admin_ns, request("gpu", driver, adminAccess=True)))
    await kube.create(pod_with_claim("monitor", admin_ns, "monitor"))
    assert await eventually(lambda: bound_node(kube, admin_ns, "monitor"), what="admin") == node
    user = await kube.get("ResourceClaim", "user", namespace)
    monitor = await kube.get("ResourceClaim", "monitor", admin_ns)
    assert devices_of(monitor) == devices_of(user) == [f"{node}/gpu-0"]
    assert monitor["status"]["allocation"]["devices"]["results"][0]["adminAccess"] is True
    assert not user["status"]["allocation"]["devices"]["results"][0].get("adminAccess")
    # Admin access does not free the device for ordinary claims.
    await kube.create(claim("late", namespace, request("gpu", driver)))
    await kube.create(pod_with_claim("late", namespace, "late"))
    message = await explained(kube, namespace, "late")
    assert f"cannot allocate claim {namespace}/late" in message, message


# --- 6. binding conditions (KEP-5007) -------------------------------------------------------


async def fabric_cluster(kube: KubeAPI, driver: str, devices: int = 1) -> list[str]:
    """Two nodes on one fabric, whose devices must be attached before a pod may bind."""
    fabric = f"{driver}/fabric"
    prefix = unique("fabric")
    nodes = [f"{prefix}-a", f"{prefix}-b"]
    for name in nodes:
        await create_node(kube, name, {fabric: "f1"})
    selector = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": fabric, "operator": "In", "values": ["f1"]}]}
        ]
    }
    fabric_devices = [
        {
            "name": f"dev-{i}",
            "bindsToNode": True,
            "bindingConditions": [ATTACHED],
            "bindingFailureConditions": [ATTACH_FAILED],
        }
        for i in range(devices)
    ]
    await kube.create(
        slice_body(unique("fabric"), driver, "", fabric_devices, pool=prefix, nodeSelector=selector)
    )
    await kube.create(device_class_body(driver, driver))
    return nodes


async def waiting_for_conditions(
    kube: KubeAPI, scheduler: ObservedScheduler, namespace: str, pod: str, claim_name: str
) -> dict[str, Any]:
    """The claim once allocated and reserved for ``pod``, with the scheduler waiting and the
    pod not bound."""

    async def reserved() -> dict[str, Any] | None:
        body = await allocated(kube, namespace, claim_name)
        names = [r["name"] for r in (body or {}).get("status", {}).get("reservedFor") or []]
        return body if body and names == [pod] else None

    body = await eventually(reserved, what=f"claim {claim_name} allocated for {pod}")
    await eventually(
        lambda: left_waiting(scheduler, namespace, pod, body), what=f"{pod} left waiting"
    )
    assert await bound_node(kube, namespace, pod) is None
    assert DELETE_PROTECTION in body["metadata"]["finalizers"]
    return body


def node_of(body: dict[str, Any]) -> str:
    (term,) = body["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
    (field,) = term["matchFields"]
    assert (field["key"], field["operator"]) == ("metadata.name", "In")
    (node,) = field["values"]
    assert isinstance(node, str)
    return node


async def test_binding_conditions_hold_the_pod_until_all_devices_are_attached(
    kube: KubeAPI, namespace: str, driver: str, scheduler: ObservedScheduler
) -> None:
    nodes = await fabric_cluster(kube, driver, devices=2)
    await kube.create(claim("fabric", namespace, request("gpu", driver, count=2)))
    await kube.create(pod_with_claim("p", namespace, "fabric"))
    body = await waiting_for_conditions(kube, scheduler, namespace, "p", "fabric")
    node = node_of(body)  # bindsToNode: pinned to the chosen node of the fabric
    assert node in nodes
    assert len(devices_of(body)) == 2

    # One device attached is not enough.
    written = await report_conditions(kube, namespace, "fabric", {ATTACHED: True}, only=0)
    await eventually(
        lambda: left_waiting(scheduler, namespace, "p", written), what="left waiting at 1 of 2"
    )
    assert await bound_node(kube, namespace, "p") is None
    # Both attached: bound, to the node the allocation is pinned to.
    await report_conditions(kube, namespace, "fabric", {ATTACHED: True})
    assert await eventually(lambda: bound_node(kube, namespace, "p"), what="bound") == node
    after = await kube.get("ResourceClaim", "fabric", namespace)
    assert after["status"]["allocation"] == body["status"]["allocation"]


async def test_binding_failure_condition_clears_and_retries_on_the_same_node(
    kube: KubeAPI, namespace: str, driver: str, scheduler: ObservedScheduler
) -> None:
    a, b = await fabric_cluster(kube, driver)
    # Load node a, so that the first attempt (least-allocated) goes to b.
    await kube.create(filler_pod("filler-a", namespace, a, cpu="8"))
    await eventually(lambda: _knows_bound(scheduler, a, namespace, "filler-a"), what="filler a")
    await kube.create(claim("fabric", namespace, request("gpu", driver)))
    await kube.create(pod_with_claim("p", namespace, "fabric"))
    body = await waiting_for_conditions(kube, scheduler, namespace, "p", "fabric")
    assert node_of(body) == b
    # Now b is the busier node: only the nomination brings the retry back to b.
    await kube.create(filler_pod("filler-b", namespace, b, cpu="16"))
    await eventually(lambda: _knows_bound(scheduler, b, namespace, "filler-b"), what="filler b")

    await report_conditions(kube, namespace, "fabric", {ATTACHED: False, ATTACH_FAILED: True})
    # Allocation, device statuses and reservation go in one write ...
    await claim_event(kube, namespace, "fabric", body["metadata"]["resourceVersion"], cleared)

    # ... the pod is nominated for the node of the attempt, and placed there again.
    async def nominated() -> str | None:
        pod = await kube.get("Pod", "p", namespace)
        node: str | None = pod.get("status", {}).get("nominatedNodeName")
        return node

    assert await eventually(nominated, what="nominatedNodeName") == b
    again = await waiting_for_conditions(kube, scheduler, namespace, "p", "fabric")
    assert node_of(again) == b
    assert not again["status"].get("devices")
    assert await events_with(kube, namespace, "BindingConditionsFailed")
    await report_conditions(kube, namespace, "fabric", {ATTACHED: True, ATTACH_FAILED: False})
    assert await eventually(lambda: bound_node(kube, namespace, "p"), what="bound") == b


def filler_pod(name: str, namespace: str, node: str, cpu: str) -> dict[str, Any]:
    """A pod already bound to ``node`` (by someone else), requesting ``cpu``."""
    body = pod_body(name, namespace, scheduler="default-scheduler")
    body["spec"]["nodeName"] = node
    body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    return body


async def _knows_bound(scheduler: ObservedScheduler, node: str, namespace: str, name: str) -> bool:
    return (
        scheduler.indices.ready
        and scheduler.cache.usage.node_of(ObjectKey(namespace, name)) == node
    )


async def test_binding_timeout_clears_and_retries(
    kubeconfig: Any, kube: KubeAPI, namespace: str, driver: str
) -> None:
    await fabric_cluster(kube, driver)
    timeouts = "kopf_dra_scheduler_binding_conditions_timeouts_total"
    timed_out_before = SCHEDULER_REGISTRY.get_sample_value(timeouts) or 0.0
    clock = StoppingClock()
    scheduler, registry = observed(kubeconfig, binding_timeout=4.0, clock=clock)
    async with running_operator(registry, "scheduler-short-timeout"):
        await kube.create(claim("fabric", namespace, request("gpu", driver)))
        await kube.create(pod_with_claim("p", namespace, "fabric"))
        body = await waiting_for_conditions(kube, scheduler, namespace, "p", "fabric")
        # The scheduler's wall clock stops just past this allocation's timeout: the timeout
        # fires once, and the retry's allocation, stamped at that instant, never times out,
        # however long a busy machine takes to report its conditions.
        allocated = parse_time(body["status"]["allocation"]["allocationTimestamp"])
        assert allocated is not None
        clock.stop_at(allocated + datetime.timedelta(seconds=4.5))
        # Nobody attaches the device: the allocation is undone after the timeout ...
        gone = await claim_event(
            kube, namespace, "fabric", body["metadata"]["resourceVersion"], cleared
        )
        # ... and tried again; this time the device gets attached in time.
        await claim_event(
            kube, namespace, "fabric", gone["metadata"]["resourceVersion"],
            lambda c: bool((c.get("status") or {}).get("allocation")),
        )  # fmt: skip
        await report_conditions(kube, namespace, "fabric", {ATTACHED: True})
        node = await eventually(lambda: bound_node(kube, namespace, "p"), what="bound")
        assert node == node_of(await kube.get("ResourceClaim", "fabric", namespace))
        # Counted once, for the alert on binding-condition timeouts (the registry is the
        # process's: earlier tests' timeouts are in the count it started from).
        assert SCHEDULER_REGISTRY.get_sample_value(timeouts) == timed_out_before + 1


async def test_scheduler_restart_while_waiting_for_binding_conditions(
    kubeconfig: Any, kube: KubeAPI, namespace: str, driver: str
) -> None:
    await fabric_cluster(kube, driver)
    first, registry = observed(kubeconfig)
    async with running_operator(registry, "scheduler-before-restart"):
        await kube.create(claim("fabric", namespace, request("gpu", driver)))
        await kube.create(pod_with_claim("p", namespace, "fabric"))
        body = await waiting_for_conditions(kube, first, namespace, "p", "fabric")
    second, registry = observed(kubeconfig)
    async with running_operator(registry, "scheduler-after-restart"):
        # The new replica resumes the wait (it does not allocate anew) ...
        again = await waiting_for_conditions(kube, second, namespace, "p", "fabric")
        assert again["status"]["allocation"] == body["status"]["allocation"]
        # ... and binds once the fabric controller reports the device attached.
        await report_conditions(kube, namespace, "fabric", {ATTACHED: True})
        node = await eventually(lambda: bound_node(kube, namespace, "p"), what="bound")
        assert node == node_of(body)
        final = await kube.get("ResourceClaim", "fabric", namespace)
        assert final["status"]["allocation"] == body["status"]["allocation"]


# --- 7. a scheduler killed between the status write and the binding ----------------------------


async def test_scheduler_killed_between_status_write_and_bind(
    kubeconfig: Any, kube: KubeAPI, namespace: str, driver: str, controllers: None
) -> None:
    nodes = await gpu_cluster(kube, driver, nodes=2, per_node=1)
    target = sorted(nodes)[-1]  # not the node a fresh cycle would prefer on a tie
    await kube.create(template_body("gpu-template", namespace, device_class=driver))
    pod = await kube.create(
        pod_body("orphan", namespace, {"name": "gpu", "resourceClaimTemplateName": "gpu-template"})
    )

    async def generated() -> str | None:
        body = await kube.get("Pod", "orphan", namespace)
        statuses = body.get("status", {}).get("resourceClaimStatuses") or []
        return statuses[0].get("resourceClaimName") if statuses else None

    name = await eventually(generated, what="claim generated for the pod")
    # What the dead scheduler wrote: the finalizer, then allocation + reservedFor.
    body = await kube.get("ResourceClaim", name, namespace)
    body["metadata"]["finalizers"] = [DELETE_PROTECTION]
    body = await kube.replace(body)
    body["status"] = {
        "allocation": {
            "devices": {
                "results": [{"request": "gpu", "driver": driver, "pool": target, "device": "gpu-0"}]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [target]}
                        ]
                    }
                ]
            },
            "allocationTimestamp": _now(),
        },
        "reservedFor": [{"resource": "pods", "name": "orphan", "uid": pod["metadata"]["uid"]}],
    }
    written = await kube.replace_status(body)

    scheduler, registry = observed(kubeconfig)
    async with running_operator(registry, "scheduler-restarted"):
        assert await eventually(lambda: bound_node(kube, namespace, "orphan"), what="bound") == (
            target
        )
        claims = (await kube.list("ResourceClaim", namespace))["items"]
        assert [c["metadata"]["name"] for c in claims] == [name]
        (after,) = claims
        assert after["status"]["allocation"] == written["status"]["allocation"]
        assert after["status"]["reservedFor"] == written["status"]["reservedFor"]
        # The restarted scheduler counts that allocation: the next pod gets the other device.
        await kube.create(
            pod_body(
                "next", namespace, {"name": "gpu", "resourceClaimTemplateName": "gpu-template"}
            )
        )
        other = await eventually(lambda: bound_node(kube, namespace, "next"), what="next bound")
        assert other != target
        everywhere = (await kube.list("ResourceClaim"))["items"]
        ours = [
            d
            for c in everywhere
            if (c.get("status") or {}).get("allocation")
            for r in c["status"]["allocation"]["devices"]["results"]
            if r["driver"] == driver
            for d in [f"{r['pool']}/{r['device']}"]
        ]
        assert sorted(ours) == sorted([f"{target}/gpu-0", f"{other}/gpu-0"])
        await eventually(lambda: _ledger_empty(scheduler), what="in-flight ledger drained")


async def _ledger_empty(scheduler: ObservedScheduler) -> bool:
    return len(scheduler.cache.ledger) == 0


# --- 8. leader failover -----------------------------------------------------------------------


async def test_leader_failover(kubeconfig: Any, kube: KubeAPI, namespace: str, driver: str) -> None:
    await gpu_cluster(kube, driver, nodes=1, per_node=2)
    lease = unique("scheduler-lease")
    settings: dict[str, Any] = {
        "leader_elect": True,
        "lease_name": lease,
        "lease_namespace": namespace,
        "lease_duration": 3.0,
        "renew_deadline": 2.0,
        "retry_period": 0.5,
    }
    replicas = {
        ident: start_scheduler(kubeconfig, identity=ident, **settings) for ident in ("one", "two")
    }
    running = {ident: contextlib.AsyncExitStack() for ident in replicas}
    try:
        for ident, (_, registry) in replicas.items():
            await running[ident].enter_async_context(
                running_operator(registry, f"scheduler-{ident}")
            )

        async def leader() -> str | None:
            leaders = [i for i, (r, _) in replicas.items() if r.active]
            try:
                body = await kube.get("Lease", lease, namespace)
            except NotFoundError:
                return None  # no round of the election has run yet
            holder = body["spec"].get("holderIdentity")
            return leaders[0] if len(leaders) == 1 and holder == leaders[0] else None

        first = await eventually(leader, what="one leader")
        standby = "two" if first == "one" else "one"
        await kube.create(claim("c1", namespace, request("gpu", driver)))
        await kube.create(pod_with_claim("p1", namespace, "c1"))
        await eventually(lambda: bound_node(kube, namespace, "p1"), what="p1 bound by the leader")
        # Only the leader schedules: the standby has not run a single cycle.
        assert not replicas[standby][0].active
        assert replicas[standby][0].queue.processed == 0

        await running[first].aclose()  # the leader stops (and gives up its lease)
        await kube.create(claim("c2", namespace, request("gpu", driver)))
        await kube.create(pod_with_claim("p2", namespace, "c2"))
        await eventually(
            lambda: bound_node(kube, namespace, "p2"), within=15, what="p2 bound after failover"
        )
        assert await leader() == standby
        c1 = await kube.get("ResourceClaim", "c1", namespace)
        c2 = await kube.get("ResourceClaim", "c2", namespace)
        assert set(devices_of(c1)).isdisjoint(devices_of(c2))
    finally:
        for stack in running.values():
            await stack.aclose()


async def test_leader_that_died_holding_the_lease_is_replaced_once_it_expires(
    kubeconfig: Any, kube: KubeAPI, namespace: str, driver: str
) -> None:
    await gpu_cluster(kube, driver, nodes=1, per_node=1)
    lease = unique("scheduler-lease")
    renewed = datetime.datetime.now(datetime.UTC)
    # A leader that crashed without giving the lease up: it renewed it just now.
    await kube.create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": lease, "namespace": namespace},
            "spec": {
                "holderIdentity": "crashed",
                "leaseDurationSeconds": 3,
                "acquireTime": _micro(renewed),
                "renewTime": _micro(renewed),
                "leaseTransitions": 0,
            },
        }
    )
    replica, registry = start_scheduler(
        kubeconfig,
        identity="survivor",
        leader_elect=True,
        lease_name=lease,
        lease_namespace=namespace,
        lease_duration=3.0,
        renew_deadline=2.0,
        retry_period=0.5,
    )
    async with running_operator(registry, "scheduler-survivor"):
        await kube.create(claim("c", namespace, request("gpu", driver)))
        await kube.create(pod_with_claim("p", namespace, "c"))
        await eventually(lambda: bound_node(kube, namespace, "p"), within=15, what="p bound")
        assert replica.active
    spec = (await kube.get("Lease", lease, namespace))["spec"]
    assert spec["leaseTransitions"] == 1
    acquired = datetime.datetime.fromisoformat(spec["acquireTime"].replace("Z", "+00:00"))
    assert (acquired - renewed).total_seconds() >= 3  # taken over only once expired


def _micro(t: datetime.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# --- 9. scale ---------------------------------------------------------------------------------


async def test_hundred_pods_on_twenty_nodes(
    kube: KubeAPI, namespace: str, driver: str, controllers: None, scheduler: ObservedScheduler
) -> None:
    await gpu_cluster(kube, driver, nodes=20, per_node=5)
    await kube.create(template_body("gpu-template", namespace, device_class=driver))
    entry = {"name": "gpu", "resourceClaimTemplateName": "gpu-template"}
    names = [f"w{i}" for i in range(100)]
    await asyncio.gather(*(kube.create(pod_body(n, namespace, entry)) for n in names))

    async def bound() -> tuple[int, dict[str, str] | None]:
        pods = (await kube.list("Pod", namespace))["items"]
        nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods}
        placed = {n: nodes[n] for n in names if nodes.get(n)}
        return len(placed), placed if len(placed) == len(names) else None

    # 100 pods take what the machine's throughput allows: only a standstill fails.
    placed = await while_progressing(bound, stall=30, what="100 pods bound")
    claims = (await kube.list("ResourceClaim", namespace))["items"]
    assert len(claims) == 100
    owner = {c["metadata"]["ownerReferences"][0]["name"]: c for c in claims}
    devices = []
    for pod, node in placed.items():
        (device,) = devices_of(owner[pod])
        assert device.split("/")[0] == node, (pod, device, node)
        devices.append(device)
    assert len(set(devices)) == 100
    assert max(list(placed.values()).count(n) for n in set(placed.values())) <= 5
