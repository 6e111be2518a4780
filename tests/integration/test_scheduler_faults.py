"""The scheduler under faults, on the real API server: states that a crash, a second
scheduler or a paused leader leave behind, and what the scheduler makes of them.

The process-level faults themselves (SIGKILL, SIGSTOP, API server restarts) are in the chaos
suite (``make chaos``); here each resulting state is built directly and checked exactly.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from operators.api.keys import ObjectKey
from operators.api.names import DELETE_PROTECTION_FINALIZER
from operators.controllers.scheduler.handlers import Scheduler
from operators.kube.api import KubeAPI
from operators.runtime.actions import Bind
from tests.integration.helpers import (
    bound_node,
    claim_body,
    create_namespace,
    events_with,
    eventually,
    gpu_cluster,
    pod_body,
    running_operator,
    start_scheduler,
    unique,
)

pytestmark = pytest.mark.integration


def allocation(driver: str, node: str, device: str = "gpu-0") -> dict[str, Any]:
    return {
        "devices": {
            "results": [{"request": "gpu", "driver": driver, "pool": node, "device": device}]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        },
        "allocationTimestamp": "2026-11-26T10:00:00Z",
    }


async def written_by_a_dead_scheduler(
    kube: KubeAPI,
    namespace: str,
    claim: str,
    driver: str,
    node: str,
    pod: dict[str, Any] | None,
    device: str = "gpu-0",
) -> dict[str, Any]:
    """A claim as a scheduler leaves it that died after its status write, before the bind."""
    body = await kube.create(claim_body(claim, namespace, driver))
    body["metadata"]["finalizers"] = [DELETE_PROTECTION_FINALIZER]
    body = await kube.replace(body)
    body["status"] = {"allocation": allocation(driver, node, device)}
    if pod is not None:
        body["status"]["reservedFor"] = [
            {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
        ]
    written: dict[str, Any] = await kube.replace_status(body)
    return written


def claimed_pod(
    name: str, namespace: str, claim: str, scheduler: str = "kopf-dra"
) -> dict[str, Any]:
    return pod_body(
        name, namespace, {"name": "gpu", "resourceClaimName": claim}, scheduler=scheduler
    )


async def allocated_node(kube: KubeAPI, namespace: str, claim: str) -> str | None:
    body = await kube.get("ResourceClaim", claim, namespace)
    allocation = (body.get("status") or {}).get("allocation")
    if not allocation:
        return None
    node: str = allocation["devices"]["results"][0]["pool"]
    return node


@pytest.mark.parametrize("fault", ["cordoned", "not-ready", "deleted"])
async def test_a_stranded_claim_is_deallocated_and_the_pod_placed_elsewhere(
    kube: KubeAPI, kubeconfig: Any, namespace: str, driver: str, fault: str
) -> None:
    """Upstream's PostFilter: the pod's own claim, allocated on a node that can no longer
    take it, must not keep the pod pending (and the device held) forever."""
    gone, spare = await gpu_cluster(kube, driver, nodes=2, per_node=1)
    pod = await kube.create(claimed_pod("p", namespace, "c"))
    await written_by_a_dead_scheduler(kube, namespace, "c", driver, gone, pod)
    node = await kube.get("Node", gone)
    if fault == "cordoned":
        node["spec"]["unschedulable"] = True
        await kube.replace(node)
    elif fault == "not-ready":
        # What the node lifecycle controller does to a node whose kubelet stops reporting:
        # the condition, and the taints the scheduler reads (it checks no condition itself).
        node["spec"]["taints"] = [
            {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
        ]
        node = await kube.replace(node)
        node["status"]["conditions"][0]["status"] = "False"
        await kube.replace_status(node)
    else:
        await kube.delete("Node", gone)
    _, registry = start_scheduler(kubeconfig, unschedulable_retry=1.0)
    async with running_operator(registry, "scheduler"):
        assert await eventually(lambda: bound_node(kube, namespace, "p"), what="p bound") == spare
        assert await allocated_node(kube, namespace, "c") == spare


async def test_a_claim_reserved_by_another_pod_is_never_deallocated_for_this_one(
    kube: KubeAPI, kubeconfig: Any, namespace: str, driver: str
) -> None:
    """Shared by a running pod on the cordoned node: the new pod waits, the claim stays."""
    gone, _spare = await gpu_cluster(kube, driver, nodes=2, per_node=1)
    runner = claimed_pod("runner", namespace, "c")
    runner["spec"]["nodeName"] = gone
    runner = await kube.create(runner)
    written = await written_by_a_dead_scheduler(kube, namespace, "c", driver, gone, runner)
    node = await kube.get("Node", gone)
    node["spec"]["unschedulable"] = True
    await kube.replace(node)
    await kube.create(claimed_pod("p", namespace, "c"))
    _, registry = start_scheduler(kubeconfig, unschedulable_retry=1.0)
    async with running_operator(registry, "scheduler"):
        event = await events_with(kube, namespace, "FailedScheduling")
        assert "node selector" in event[0]["message"] or "unschedulable" in event[0]["message"]
        body = await kube.get("ResourceClaim", "c", namespace)
        assert body["status"]["allocation"] == written["status"]["allocation"]
        assert [r["name"] for r in body["status"]["reservedFor"]] == ["runner"]


async def test_a_device_in_two_allocations_is_given_back_by_the_unbound_pods_claim(
    kube: KubeAPI, kubeconfig: Any, namespace: str, driver: str
) -> None:
    """What two schedulers without a lease used to leave: one device, two claims."""
    (node,) = await gpu_cluster(kube, driver, nodes=1, per_node=2)
    running = claimed_pod("running", namespace, "first")
    running["spec"]["nodeName"] = node
    running = await kube.create(running)
    waiting = await kube.create(claimed_pod("waiting", namespace, "second"))
    await written_by_a_dead_scheduler(kube, namespace, "first", driver, node, running)
    await written_by_a_dead_scheduler(kube, namespace, "second", driver, node, waiting)
    _, registry = start_scheduler(kubeconfig)
    async with running_operator(registry, "scheduler"):
        events = await events_with(kube, namespace, "DeviceAllocatedTwice")
        assert {e["involvedObject"]["name"] for e in events} == {"second"}
        assert f"{namespace}/first" in events[0]["message"]
        # The waiting pod is scheduled again: it gets the other device.
        assert await eventually(lambda: bound_node(kube, namespace, "waiting"), what="bound")
        first = await kube.get("ResourceClaim", "first", namespace)
        second = await kube.get("ResourceClaim", "second", namespace)
        devices = {
            c["status"]["allocation"]["devices"]["results"][0]["device"] for c in (first, second)
        }
        assert devices == {"gpu-0", "gpu-1"}
        assert [r["name"] for r in first["status"]["reservedFor"]] == ["running"]


async def test_two_single_replicas_do_not_both_write(
    kube: KubeAPI, kubeconfig: Any, namespace: str, driver: str
) -> None:
    """--no-leader-elect means 'the single replica': a second one started by mistake waits."""
    await gpu_cluster(kube, driver, nodes=1, per_node=4)
    lease = unique("single")
    settings: dict[str, Any] = {
        "leader_elect": False,
        "lease_name": lease,
        "lease_namespace": namespace,
    }
    replicas = [start_scheduler(kubeconfig, identity=i, **settings) for i in ("one", "two")]
    async with contextlib.AsyncExitStack() as stack:
        for i, (_, registry) in enumerate(replicas):
            await stack.enter_async_context(running_operator(registry, f"scheduler-{i}"))

        async def one_active() -> str | None:
            active = [s.settings.identity for s, _ in replicas if s.active]
            return active[0] if len(active) == 1 else None

        leader = await eventually(one_active, what="exactly one active replica")
        holder = (await kube.get("Lease", lease, namespace))["spec"]["holderIdentity"]
        assert holder == leader
        for i in range(3):
            await kube.create(claim_body(f"c{i}", namespace, driver))
            await kube.create(claimed_pod(f"p{i}", namespace, f"c{i}"))
        for i in range(3):
            await eventually(lambda i=i: bound_node(kube, namespace, f"p{i}"), what=f"p{i}")  # type: ignore[misc]
        assert sum(s.active for s, _ in replicas) == 1


def hostile_selector(constant: int) -> str:
    """Passes the API server's cost estimate (985,261 of 1,000,000), takes long to evaluate per
    device (0.2 s and more); a constant of its own defeats every cache (the tenant-abuse case)."""
    numbers = ", ".join(str(i) for i in range(350))
    return f"[{numbers}].exists(x, [{numbers}].exists(y, x * y == -{constant}))"


async def test_a_tenants_expensive_selectors_do_not_stall_another_tenants_pod(
    kube: KubeAPI, kubeconfig: Any, namespace: str, driver: str, api: Any
) -> None:
    """Allocation runs off the event loop, yields to other namespaces' pods after a slice, and
    stops at CEL's cost limit or the filter timeout: the plain pod of another tenant is bound
    first, the scheduler never loses its lease, and every expensive pod gets an answer."""
    await gpu_cluster(kube, driver, nodes=2, per_node=8)
    other = await create_namespace(api)
    lease = unique("tenants")
    # A profile of its own: pods earlier tests left pending take no turns here.
    profile = unique("tenants-scheduler")
    scheduler, registry = start_scheduler(
        # 16 devices at 0.2 s and more each: several times the budget, on a fast machine too.
        kubeconfig,
        DecisionOrder,
        lease_name=lease,
        lease_namespace=namespace,
        filter_timeout=1.5,
        scheduler_name=profile,
    )
    assert isinstance(scheduler, DecisionOrder)
    async with running_operator(registry, "scheduler"):
        await eventually(lambda: _active(scheduler), what="the scheduler leads")
        before = (await kube.get("Lease", lease, namespace))["spec"]
        lost: list[float] = []
        watcher = asyncio.create_task(_watch_leadership(scheduler, lost))
        try:
            for i in range(3):
                body = claim_body(f"hostile-{i}", namespace, driver)
                request = body["spec"]["devices"]["requests"][0]["exactly"]
                request["selectors"] = [{"cel": {"expression": hostile_selector(i + 1)}}]
                await kube.create(body)
                await kube.create(
                    claimed_pod(f"hostile-{i}", namespace, f"hostile-{i}", scheduler=profile)
                )
            await kube.create(claim_body("plain", other, driver))
            await kube.create(claimed_pod("plain", other, "plain", scheduler=profile))
            assert await eventually(lambda: bound_node(kube, other, "plain"), what="plain pod")
            for i in range(3):
                message = await eventually(
                    lambda i=i: _explained(kube, namespace, f"hostile-{i}"),  # type: ignore[misc]
                    within=90,
                    what=f"hostile-{i} answered",
                )
                # Answered: refused at CEL's per-evaluation cost limit where a device is tried,
                # or at the filter timeout, whichever comes first on this machine.
                assert "nodes are available" in message
            # The plain pod did not wait for them, whatever the machine's speed: the attempt
            # that placed it came next after it was last queued, or after one attempt of
            # theirs (which may have been finishing its slice).
            events = scheduler.timeline
            placed = events.index(("placed", "plain"))
            # Queueing goes on beside an attempt (the cycle runs off the event loop): the
            # attempt that placed it is its last start before, and no other attempt ran since.
            started = max(i for i, e in enumerate(events[:placed]) if e == ("start", "plain"))
            assert not [e for e in events[started + 1 : placed] if e[0] == "start"], events
            queued = max(i for i, e in enumerate(events[:started]) if e == ("queued", "plain"))
            # (Other tests' pods may be looked at and left alone meanwhile: not tenant work.)
            between = [e for e in events[queued:started] if e[0] == "start" and "hostile" in e[1]]
            assert len(between) <= 1, events
        finally:
            watcher.cancel()
        assert lost == []
        after = (await kube.get("Lease", lease, namespace))["spec"]
        assert after["holderIdentity"] == before["holderIdentity"]
        assert after["leaseTransitions"] == before["leaseTransitions"]
    # Pending forever otherwise: every later test's scheduler would spend its filter timeouts
    # on them (the control plane is shared by the session).
    for i in range(3):
        await kube.delete("Pod", f"hostile-{i}", namespace)


class DecisionOrder(Scheduler):
    """The scheduler, recording every time a pod is queued, every attempt's start, and the
    first placement or answer of each pod, in the order they happen."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timeline: list[tuple[str, str]] = []
        add = self.queue.add

        def recording_add(key: ObjectKey) -> None:
            self.timeline.append(("queued", key.name))
            add(key)

        self.queue.add = recording_add  # type: ignore[method-assign]

    async def schedule(self, key: ObjectKey) -> None:
        self.timeline.append(("start", key.name))
        try:
            await super().schedule(key)
        finally:
            decided = {name for what, name in self.timeline if what in ("placed", "answered")}
            if key.name not in decided:
                if self.cache.usage.node_of(key) is not None:
                    self.timeline.append(("placed", key.name))
                elif (record := self.queue.records.get(key)) and record.last_message:
                    self.timeline.append(("answered", key.name))


async def _active(scheduler: Any) -> bool:
    return bool(scheduler.active)


async def _watch_leadership(scheduler: Any, lost: list[float]) -> None:
    """Record every moment the scheduler cannot write (a missed renewal)."""
    while True:
        if scheduler.elector is None or not scheduler.elector.holds_lease():
            lost.append(asyncio.get_running_loop().time())
        await asyncio.sleep(0.1)


async def _explained(kube: KubeAPI, namespace: str, pod: str) -> str | None:
    body = await kube.get("Pod", pod, namespace)
    for condition in body.get("status", {}).get("conditions") or []:
        if condition["type"] == "PodScheduled" and condition["status"] == "False":
            message: str = condition["message"]
            return message
    return None


class BugInFirstBind(Scheduler):
    """The scheduler with a bug that strikes its first bind (an exception no API raises)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.struck = 0

    async def apply(self, action: Any) -> Any:
        if isinstance(action, Bind) and not self.struck:
            self.struck += 1
            raise RuntimeError("a bug in the binding cycle")
        return await super().apply(action)


async def test_a_bug_in_the_binding_cycle_releases_what_it_wrote_and_the_pod_is_retried(
    kube: KubeAPI, kubeconfig: Any, namespace: str, driver: str
) -> None:
    """Not only API failures: whatever ends a binding cycle, the claim it allocated is
    released (it would hold its device for nobody until a change of leader) and the pod is
    scheduled again."""
    (node,) = await gpu_cluster(kube, driver, nodes=1, per_node=1)
    await kube.create(claim_body("c", namespace, device_class=driver))
    await kube.create(pod_body("p", namespace, {"name": "gpu", "resourceClaimName": "c"}))
    replica, registry = start_scheduler(kubeconfig, BugInFirstBind, unschedulable_retry=1.0)
    assert isinstance(replica, BugInFirstBind)
    async with running_operator(registry, "scheduler"):
        assert await eventually(lambda: bound_node(kube, namespace, "p"), what="p bound") == node
    assert replica.struck == 1
    claim = await kube.get("ResourceClaim", "c", namespace)
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["p"]
