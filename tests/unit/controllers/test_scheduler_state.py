"""The scheduler's derived state (allocated devices, node usage) follows its caches and ledger,
without a cluster: stores are fed events the way the kopf handlers feed them."""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Callable
from decimal import Decimal
from typing import Any, cast

import pytest

from operators.allocator.errors import OutOfTimeError
from operators.api.core import Pod
from operators.api.ids import DeviceID, PoolID
from operators.api.keys import ObjectKey
from operators.api.meta import OwnerReference
from operators.api.resource import AllocationResult, ResourceClaim, ResourceSlice
from operators.controllers.scheduler import handlers, planning, preemptor, queueing
from operators.controllers.scheduler.budget import AttemptBudget
from operators.controllers.scheduler.handlers import Scheduler
from operators.controllers.scheduler.metrics import REGISTRY
from operators.controllers.scheduler.queueing import (
    INITIAL_BACKOFF,
    Hint,
    PodRecord,
    PodState,
    pending_pod_update,
)
from operators.controllers.scheduler.reserve import Reserved
from operators.controllers.scheduler.settings import SchedulerSettings
from operators.runtime.errors import NotLeaderError, Requeue, TemporaryError
from operators.scheduling.attempt import Attempt, BindingFailed, Ready
from operators.scheduling.cycle import CycleResult, NodeFit, run_cycle
from operators.scheduling.nodes import pool_nodes
from operators.scheduling.preemption import PodPriority
from operators.scheduling.score import Score
from tests.unit.runtime.test_leader import FakeClock

DEVICE = DeviceID("gpu.example.com", "node-1", "gpu-0")
KEY = ObjectKey("ns", "c")


def _claim(version: str, *, allocated: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns", "uid": "u", "resourceVersion": version},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "x"}}]}},
    }
    if allocated:
        result = {"request": "gpu", "driver": DEVICE.driver, "pool": DEVICE.pool}
        results = [{**result, "device": DEVICE.device}]
        body["status"] = {"allocation": {"devices": {"results": results}}}
    return body


def _pod(name: str, node: str | None, cpu: str = "1") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": name, "resourceVersion": "1"},
        "spec": spec,
    }


async def test_the_plugins_see_each_nodes_bound_and_assumed_pods() -> None:
    """The snapshot's pods per node (ports, volumes, pod affinity): bound pods from the store,
    this scheduler's assumed ones until the store shows them bound; each node's pods a tuple
    replaced whole, which the cycle's thread may read while events change the cache."""
    s = Scheduler(SchedulerSettings())
    s.cache.pods.apply("ADDED", _pod("a", "node-1"))
    b = Pod.load(_pod("b", None))
    s.cache.assume(ObjectKey("ns", "b"), b, ("node-1", {"cpu": Decimal(1)}))
    seen = s.cache.pods_on("node-1")
    assert isinstance(seen, tuple)
    assert [p.metadata.name for p in seen] == ["a", "b"]
    bound = _pod("b", "node-1")
    bound["metadata"]["resourceVersion"] = "2"
    s.cache.pods.apply("MODIFIED", bound)  # bound now: once, no longer assumed
    assert [p.metadata.name for p in s.cache.pods_on("node-1")] == ["a", "b"]
    assert s.cache.assumed == {}
    s.cache.pods.apply("DELETED", _pod("a", "node-1"))
    assert [p.metadata.name for p in s.cache.pods_on("node-1")] == ["b"]
    assert seen != s.cache.pods_on("node-1")  # the tuple read before is left as it was
    await s.deactivate()
    assert [p.metadata.name for p in s.cache.pods_on("node-1")] == ["b"]


def test_assumed_pods_with_pod_affinity_are_in_the_snapshot_until_unassumed() -> None:
    """The snapshot's pods with (anti-)affinity terms include the assumed ones, each once;
    undoing one placement leaves the node's other assumed pods where they are."""
    s = Scheduler(SchedulerSettings())
    term = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "zone"}
    with_terms = _pod("near", None)
    with_terms["spec"]["affinity"] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    }
    near, plain = Pod.load(with_terms), Pod.load(_pod("plain", None))
    for key, pod in ((ObjectKey("ns", "near"), near), (ObjectKey("ns", "plain"), plain)):
        s.cache.assume(key, pod, ("node-1", {"cpu": Decimal(1)}))
    snapshot = s.cache.cluster()
    assert snapshot.with_affinity == [("node-1", near)]
    assert snapshot.with_required_anti_affinity == [("node-1", near)]
    assert snapshot.with_scoring_affinity == []
    s.cache.assume(ObjectKey("ns", "near"), near, None)
    assert s.cache.cluster().with_affinity == []
    assert [p.metadata.name for p in s.cache.pods_on("node-1")] == ["plain"]


async def test_the_system_default_spreading_reads_the_watched_services_and_controllers() -> None:
    """Services, ReplicaSets, ... go from their watch into the store the snapshot's peers come
    from: the pod's namespace's Services, the controller that owns it; a deletion removes."""
    s = Scheduler(SchedulerSettings())
    feeds = s.events_to_register()

    def obj(kind: str, name: str, namespace: str, version: str = "1") -> dict[str, Any]:
        meta = {"name": name, "namespace": namespace, "resourceVersion": version}
        return {"kind": kind, "metadata": meta, "spec": {"selector": {"app": name}}}

    feeds["Service"]({"type": "ADDED", "body": obj("Service", "web", "ns")})
    feeds["Service"]({"type": "ADDED", "body": obj("Service", "other", "elsewhere")})
    feeds["ReplicaSet"]({"type": "ADDED", "body": obj("ReplicaSet", "web-1", "ns")})
    owned = Pod.load(_pod("a", None))
    owned.metadata.owner_references = [
        OwnerReference(api_version="apps/v1", kind="ReplicaSet", name="web-1", controller=True)
    ]
    peers = s.cache.cluster().peers_of(owned)
    assert [o["metadata"]["name"] for o in peers.services] == ["web"]
    assert [o["metadata"]["name"] for o in peers.replica_sets] == ["web-1"]
    assert peers.replication_controllers == peers.stateful_sets == ()
    feeds["Service"]({"type": "DELETED", "body": obj("Service", "web", "ns", "2")})
    assert s.cache.cluster().peers_of(owned).services == ()
    await s.deactivate()


async def test_allocations_come_from_cache_and_ledger_and_survive_losing_leadership() -> None:
    s = Scheduler(SchedulerSettings())
    s.cache.claims.apply("ADDED", _claim("5", allocated=True))
    assert s.cache.allocated.state().is_allocated(DEVICE)
    # An in-flight deallocation (written by us, not yet seen) frees the device at once ...
    s.cache.ledger.reserve(KEY, ResourceClaim.load(_claim("5", allocated=False)))
    assert not s.cache.allocated.state().is_allocated(DEVICE)
    # ... and losing leadership drops the ledger: the cache is the truth again.
    await s.deactivate()
    assert s.cache.allocated.state().is_allocated(DEVICE)
    s.cache.claims.apply("DELETED", _claim("6", allocated=True))
    assert not s.cache.allocated.state().is_allocated(DEVICE)


async def test_the_event_of_our_own_claim_write_is_not_parsed_again() -> None:
    """The write's answer is the object at its version: the watch event of that version hands
    the ledger the same model; another version is parsed."""
    s = Scheduler(SchedulerSettings())
    s.cache.observe_claim("ADDED", _claim("5", allocated=False))
    written = ResourceClaim.load(_claim("6", allocated=True))
    s.cache.ledger.reserve(KEY, written)
    s.cache.written(written)
    assert s.cache.claim_models.parse(KEY, _claim("6", allocated=True)) is written
    s.cache.observe_claim("MODIFIED", _claim("6", allocated=True))
    assert s.cache.ledger.get(KEY) is None  # the store shows it: the ledger let it go
    assert s.cache.allocated.state().is_allocated(DEVICE)
    later = _claim("7", allocated=True)
    assert s.cache.claim_models.parse(KEY, later) is not written


async def test_node_usage_counts_bound_and_assumed_pods() -> None:
    s = Scheduler(SchedulerSettings())
    s.cache.pods.apply("ADDED", _pod("a", "node-1"))
    s.cache.pods.apply("ADDED", _pod("b", None))
    s.cache.usage.assume(ObjectKey("ns", "b"), ("node-1", {"cpu": Decimal(2)}, (2000, 0)))
    assert s.cache.usage.usage["node-1"].nonzero == (3000, 200 * 1024 * 1024)
    usage = s.cache.usage.usage["node-1"]
    assert (usage.pods, usage.requests["cpu"]) == (2, Decimal(3))
    await s.deactivate()  # our assumption goes, the cache's bound pod stays
    usage = s.cache.usage.usage["node-1"]
    assert (usage.pods, usage.requests["cpu"]) == (1, Decimal(1))
    s.cache.pods.apply("DELETED", _pod("a", "node-1"))
    assert "node-1" not in s.cache.usage.usage


def test_only_a_pending_pods_own_changes_bring_it_back_for_another_attempt() -> None:
    """The scheduler's own status writes (PodScheduled, nominatedNodeName) come back as
    events; an attempt for them would only repeat the last one."""
    pending: dict[str, Any] = {
        "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "1", "labels": {"a": "1"}},
        "spec": {"schedulerName": "kopf-dra"},
        "status": {"phase": "Pending"},
    }
    written = copy.deepcopy(pending)
    written["metadata"]["resourceVersion"] = "2"
    written["metadata"]["managedFields"] = [{"manager": "kopf-dra-scheduler"}]
    written["status"]["nominatedNodeName"] = "node-a"
    written["status"]["conditions"] = [{"type": "PodScheduled", "status": "False"}]
    skipped = pending_pod_update(pending, written)
    assert (skipped.queue, skipped.label) == (False, "QueueSkip")
    assert "only its status" in skipped.reason
    assert pending_pod_update(None, written) == Hint(True, "new pending pod")
    relabelled = copy.deepcopy(written)
    relabelled["metadata"]["labels"] = {"a": "2"}
    assert pending_pod_update(written, relabelled) == Hint(True, "its metadata changed")
    ungated = copy.deepcopy(written)
    ungated["spec"]["schedulingGates"] = []
    assert pending_pod_update(written, ungated) == Hint(True, "its spec changed")
    claims = copy.deepcopy(written)
    claims["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "p-gpu"}]
    assert pending_pod_update(written, claims) == Hint(True, "its claim statuses changed")
    deleting = copy.deepcopy(written)
    deleting["metadata"]["deletionTimestamp"] = "2026-11-26T00:00:00Z"
    assert pending_pod_update(written, deleting).queue


async def test_a_pod_whose_claim_shares_a_device_waits_for_the_repair(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its claim was allocated and reserved for it by another scheduler, on a device another
    claim holds: binding it now would leave two bound pods on one device."""
    s = Scheduler(SchedulerSettings())
    s.active = True
    repairs: list[ObjectKey] = []
    monkeypatch.setattr(s.repairs, "add", repairs.append)
    first = _claim("5", allocated=True)
    second = copy.deepcopy(first)
    second["metadata"].update(name="second", uid="u2")
    second["status"]["reservedFor"] = [{"resource": "pods", "name": "waiting", "uid": "waiting"}]
    s.cache.claims.apply("ADDED", first)
    s.cache.claims.apply("ADDED", second)
    pod = _pod("waiting", None)
    pod["spec"]["schedulerName"] = s.settings.scheduler_name
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "second"}]
    s.cache.pods.apply("ADDED", pod)
    with pytest.raises(Requeue, match="resourceclaim ns/second shares a device"):
        await s.schedule(ObjectKey("ns", "waiting"))
    assert repairs == [ObjectKey("ns", "second")]


def _offline(s: Scheduler, monkeypatch: pytest.MonkeyPatch, cycle: Callable[..., Any]) -> list[Any]:
    """The scheduler with ``cycle`` for its cycles and no API server: writes are recorded (and
    answered with an empty body), Events accepted. Returns the record."""
    writes: list[Any] = []

    async def apply(action: Any) -> dict[str, Any]:
        writes.append(action)
        return {}

    async def post(event: Any) -> bool:
        return True

    monkeypatch.setattr(handlers, "run_cycle", cycle)
    monkeypatch.setattr(s, "apply", apply)
    monkeypatch.setattr(s, "post", post)
    return writes


def _preemption_scene(s: Scheduler) -> dict[str, Any]:
    """Two nodes with a device each: on node-1 the claim of a pod gone already (not yet
    released), on node-2 a running batch pod's; a pending preemptor of priority 100 wanting a
    device. Returns the gone pod's claim."""
    s.active = True
    feeds = s.events_to_register()

    def feed(body: dict[str, Any]) -> None:
        feeds[body["kind"]]({"type": "ADDED", "body": body})

    def held_on(node: str, pod: str) -> dict[str, Any]:
        claim = _claim("5", allocated=True)
        claim["metadata"].update(name=pod, uid=pod)
        allocation = claim["status"]["allocation"]
        allocation["devices"]["results"][0]["pool"] = node
        field = {"key": "metadata.name", "operator": "In", "values": [node]}
        allocation["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [field]}]}
        claim["status"]["reservedFor"] = [{"resource": "pods", "name": pod, "uid": pod}]
        return claim

    meta = {"resourceVersion": "1"}
    feed(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "x", **meta},
            "spec": {},
        }
    )
    for node in ("node-1", "node-2"):
        status = {
            "allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        }
        feed(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": node, **meta},
                "status": status,
            }
        )
        pool = {"name": node, "generation": 1, "resourceSliceCount": 1}
        spec = {
            "driver": DEVICE.driver,
            "nodeName": node,
            "pool": pool,
            "devices": [{"name": DEVICE.device}],
        }
        feed(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": node, **meta},
                "spec": spec,
            }
        )
    # node-1: the earlier victim is gone, its claim not yet released; node-2: a running batch pod.
    gone = held_on("node-1", "gone")
    feed(gone)
    feed(held_on("node-2", "batch"))
    batch = _pod("batch", "node-2")
    batch["spec"].update(priority=0, resourceClaims=[{"name": "gpu", "resourceClaimName": "batch"}])
    feed(batch)
    wanted = _claim("1", allocated=False)
    wanted["metadata"].update(name="wanted", uid="w")
    feed(wanted)
    preemptor = _pod("preemptor", None)
    preemptor["spec"].update(
        schedulerName=s.settings.scheduler_name,
        priority=100,
        resourceClaims=[{"name": "gpu", "resourceClaimName": "wanted"}],
    )
    feed(preemptor)
    return gone


@pytest.mark.parametrize("preemption", [True, False])
async def test_nobody_is_evicted_for_devices_freed_while_the_cycle_ran(
    monkeypatch: pytest.MonkeyPatch, preemption: bool
) -> None:
    """An earlier victim is gone and its claim is released (by the reservation cleanup) while
    the preemptor's cycle runs on a snapshot that still shows the claim allocated: evicting
    the pod on the other node then would be one victim too many. The pod comes back instead,
    for a cycle that sees the device (after the initial backoff, with preemption off too:
    upstream's queue treats any event that came in flight so)."""
    s = Scheduler(SchedulerSettings(preemption=preemption))
    gone = _preemption_scene(s)

    released = copy.deepcopy(gone)
    released["metadata"]["resourceVersion"] = "6"
    released["status"] = {}
    real_cycle = run_cycle

    def cycle(*args: Any, **kwargs: Any) -> Any:
        result = real_cycle(*args, **kwargs)
        s.cache.observe_claim("MODIFIED", released)  # the cleanup's write, seen meanwhile
        return result

    writes = _offline(s, monkeypatch, cycle)
    with pytest.raises(Requeue, match="devices were freed during the attempt") as raised:
        await s.schedule(ObjectKey("ns", "preemptor"))
    assert raised.value.delay == INITIAL_BACKOFF
    assert not s.preemptor.victims, "nobody evicted"
    (condition,) = writes
    assert ("devices were freed meanwhile" in str(condition)) is preemption


def _small_node() -> dict[str, Any]:
    """A ready node of 8 CPUs: too small for the 100-CPU pod of these tests."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-1", "resourceVersion": "1"},
        "status": {
            "allocatable": {"cpu": "8"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


@pytest.mark.parametrize("node_joins", [True, False])
async def test_a_change_that_came_in_flight_brings_an_unschedulable_pod_back_soon(
    monkeypatch: pytest.MonkeyPatch, node_joins: bool
) -> None:
    """A node joined while the pod's cycle ran: the requeue that event caused came before the
    pod was unschedulable, so without a shorter retry it would wait the full 30 s."""
    s = Scheduler(SchedulerSettings())
    s.active = True
    feeds = s.events_to_register()
    loop = asyncio.get_running_loop()
    pod = _pod("waiting", None, cpu="100")  # fits no node
    pod["spec"]["schedulerName"] = s.settings.scheduler_name
    feeds["Pod"]({"type": "ADDED", "body": pod})
    joined = _small_node()

    def cycle(*args: Any, **kwargs: Any) -> Any:
        if node_joins:  # the node's watch event, handled on the loop while the cycle runs
            loop.call_soon_threadsafe(feeds["Node"], {"type": "ADDED", "body": joined})
        return run_cycle(*args, **kwargs)

    _offline(s, monkeypatch, cycle)
    with pytest.raises(Requeue) as raised:
        await s.schedule(ObjectKey("ns", "waiting"))
    if node_joins:
        assert raised.value.delay == INITIAL_BACKOFF
        assert raised.value.reason == "the cluster changed during the attempt"
    else:
        assert raised.value.delay == s.settings.unschedulable_retry


async def test_only_node_updates_that_may_make_room_bring_unschedulable_pods_back() -> None:
    """A kubelet's status report that renews heartbeats only changes nothing a cycle reads;
    labels, taints, unschedulable, allocatable and condition statuses may."""
    s = Scheduler(SchedulerSettings())
    feed = s.events_to_register()["Node"]
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-1", "resourceVersion": "1", "labels": {"zone": "a"}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "8"},
            "conditions": [
                {"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-11-27T00:00:00Z"}
            ],
            "images": [],
        },
    }
    version = 1

    def update(change: Any) -> int:
        nonlocal node, version
        node = copy.deepcopy(node)
        version += 1
        node["metadata"]["resourceVersion"] = str(version)
        change(node)
        before = s.queue.moves
        feed({"type": "MODIFIED", "body": node})
        return s.queue.moves - before

    feed({"type": "ADDED", "body": node})
    assert s.queue.moves == 1, "a new node may make room"

    def heartbeat(n: Any) -> None:
        n["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-11-27T00:05:00Z"
        n["status"]["images"] = [{"names": ["pause"], "sizeBytes": 1}]

    skips = _hints("Node/Update", "QueueSkip")
    assert update(heartbeat) == 0
    assert _hints("Node/Update", "QueueSkip") == skips + 1, "counted, with its reason"
    assert queueing.node_update(None, node).queue
    assert queueing.node_update(node, node).reason.startswith("a status report")
    (stored,) = s.cache.all_nodes()
    assert stored.metadata.resource_version == str(version), "stored all the same"
    assert update(lambda n: n["status"]["conditions"][0].update(status="False")) == 1
    assert update(lambda n: n["status"]["conditions"][0].update(status="True")) == 1
    assert update(lambda n: n["metadata"]["labels"].update(zone="b")) == 1
    assert update(lambda n: n["spec"].update(taints=[{"key": "k", "effect": "NoSchedule"}])) == 1
    assert update(lambda n: n["spec"].update(unschedulable=True)) == 1
    queued = _hints("Node/Update", "Queue")
    assert update(lambda n: n["status"]["allocatable"].update(cpu="16")) == 1
    assert _hints("Node/Update", "Queue") == queued + 1
    relabelled = copy.deepcopy(node)
    relabelled["metadata"]["labels"] = {"zone": "c"}
    assert queueing.node_update(node, relabelled) == queueing.Hint(True, "its labels changed")
    before = s.queue.moves
    feed({"type": "DELETED", "body": node})
    assert s.queue.moves == before + 1


def _hints(event: str, hint: str) -> float:
    value = REGISTRY.get_sample_value(
        "kopf_dra_scheduler_queueing_hints_total", {"event": event, "hint": hint}
    )
    return value or 0.0


async def test_nothing_the_scheduler_started_outlives_deactivate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A binding cycle blocked in a write and the coalesced requeue, both running when the
    replica stops leading: deactivate cancels them and waits for them to end."""
    s = Scheduler(SchedulerSettings())
    s.active = True
    blocked = asyncio.Event()

    async def apply(action: Any) -> dict[str, Any]:
        blocked.set()
        await asyncio.Event().wait()  # a write that never answers
        raise AssertionError("unreachable")

    monkeypatch.setattr(s, "apply", apply)
    pod = Pod.load(_pod("p", None))
    claim = ResourceClaim.load(_claim("5", allocated=False))
    plan = planning.reservations(pod, [claim], {}, s.clock.now())
    fit = NodeFit("node-1", {}, Score(0, 0, 0, "node-1"))
    s.binder.start(Reserved(pod, plan, fit, None, s))
    s.queue.make_room("Node/Add", "a node joined")
    await asyncio.wait_for(blocked.wait(), timeout=10)
    started = s.tasks.running()
    assert sorted(t.get_name() for t in started) == [
        "scheduler-bind-ns-p",
        "scheduler-requeue-unschedulable",
    ]
    await s.deactivate()
    assert all(t.done() for t in started)
    assert len(s.tasks) == 0
    assert ObjectKey("ns", "p") not in s.binder


@pytest.mark.parametrize("refused", ["status", "bind"])
async def test_a_write_refused_by_the_fence_leaves_no_allocation_that_was_not_written(
    monkeypatch: pytest.MonkeyPatch, refused: str
) -> None:
    """The fence refuses a write when the lease's renewal is late, although the renewal in
    flight may still succeed: no deactivate follows then. What the attempt did not write must
    not stay in the ledger (a later cycle would take the claim as allocated and bind the pod
    with no allocation), and the pod must come back."""
    s = Scheduler(SchedulerSettings())
    s.active = True
    s.cache.claims.apply("ADDED", _claim("5", allocated=False))
    body = _pod("p", None)
    body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "c"}]
    pod = Pod.load(body)
    written: list[str] = []

    async def apply(action: Any) -> dict[str, Any]:
        kind = type(action).__name__
        if (kind, refused) in (("ReplaceStatus", "status"), ("Bind", "bind")):
            raise NotLeaderError("renewal late")
        written.append(kind)
        if kind == "ReplaceStatus":
            answer: dict[str, Any] = copy.deepcopy(action.body)
            answer["metadata"]["resourceVersion"] = "7"
            return answer
        return {"metadata": {"resourceVersion": "6"}}

    requeued: list[ObjectKey] = []
    monkeypatch.setattr(s, "apply", apply)
    monkeypatch.setattr(s.queue, "add_after", lambda key, _delay: requeued.append(key))
    claim = s.cache.claim(KEY)
    assert claim is not None
    allocation = AllocationResult.load(_claim("5", allocated=True)["status"]["allocation"])
    attempt = Attempt(Ready(pod, (claim,)), PodPriority(0, True), [], {})
    s.reserve(attempt, NodeFit("node-1", {claim.key: allocation}, Score(0, 0, 0, "n")))
    assert s.cache.allocated.state().is_allocated(DEVICE)
    await asyncio.wait_for(asyncio.gather(*s.tasks.running()), timeout=10)
    assert requeued == [ObjectKey("ns", "p")]
    assert s.cache.usage.node_of(ObjectKey("ns", "p")) is None
    seen = s.cache.claim(KEY)
    assert seen is not None
    if refused == "status":
        assert written == ["Patch"]
        assert not seen.is_allocated, "the ledger still shows the allocation never written"
        assert not s.cache.allocated.state().is_allocated(DEVICE)
    else:
        assert written == ["Patch", "ReplaceStatus"]
        assert seen.is_allocated, "what was written stays until the watch shows it"
        assert seen.is_reserved_for("p")


async def test_a_victim_the_fence_kept_from_evicting_is_not_waited_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The eviction's write is refused (the lease's renewal is late): the preemptor's retry
    must not wait for a victim that was never deleted."""
    s = Scheduler(SchedulerSettings())
    _preemption_scene(s)
    writes = _offline(s, monkeypatch, run_cycle)
    recorded = s.apply

    async def apply(action: Any) -> dict[str, Any] | None:
        if type(action).__name__ == "Delete":
            raise NotLeaderError("renewal late")
        return await recorded(action)

    monkeypatch.setattr(s, "apply", apply)
    with pytest.raises(NotLeaderError):
        await s.schedule(ObjectKey("ns", "preemptor"))
    assert [type(w).__name__ for w in writes] == ["Patch", "Patch"]  # nomination, DisruptionTarget
    assert not s.preemptor.victims


def test_a_pods_backoff_doubles_per_attempt_up_to_ten_seconds() -> None:
    record = PodRecord()
    assert record.backoff() == 1.0
    delays = []
    for attempts in range(1, 7):
        record.attempts = attempts
        delays.append(record.backoff())
    assert delays == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


async def test_pods_of_no_lower_priority_are_not_parsed_for_preemption() -> None:
    """A pod that fits nowhere looks for lower-priority pods on every node with pods: those
    whose own priority rules them out are skipped from their raw object, unparsed."""
    s = Scheduler(SchedulerSettings(preemption=True))
    _preemption_scene(s)
    parsed = s.cache.pod_models._items
    parsed.clear()

    assert s.preemptor.lower_priority_pods(0) == {}
    assert ObjectKey("ns", "batch") not in parsed, "priority 0 is not below 0: never parsed"

    found = s.preemptor.lower_priority_pods(100)
    assert [p.pod.metadata.name for p in found["node-2"]] == ["batch"]
    assert ObjectKey("ns", "batch") in parsed


def test_a_pod_groups_member_is_ranked_by_its_group_not_its_own_priority() -> None:
    """Only a pod's own ``spec.priority`` is read raw: a PodGroup's member may take its
    group's lower priority (GetPodPriority), so it is parsed and ranked while groups are on."""
    member = _pod("member", "node-1")
    member["spec"].update(priority=1000, schedulingGroup={"podGroupName": "pg"})
    plain = _pod("plain", "node-1")
    plain["spec"].update(priority=1000)
    unset = _pod("unset", "node-1")

    def no_group(pod: Pod) -> None:
        return None

    assert preemptor._not_below(plain, 100, no_group)
    assert not preemptor._not_below(member, 100, no_group)
    assert preemptor._not_below(member, 100, None), "groups off: its own priority"
    assert not preemptor._not_below(plain, 1001, None)
    assert not preemptor._not_below(unset, 0, None), "no priority: its class decides"


def _created(name: str, created: str, **spec: Any) -> dict[str, Any]:
    """A pending pod of the default scheduler, created at ``created``."""
    body = _pod(name, None)
    body["metadata"]["creationTimestamp"] = created
    body["spec"].update(schedulerName="kopf-dra", **spec)
    return body


def test_the_oldest_pending_pods_age_leaves_out_pods_that_wait_for_nothing_of_ours() -> None:
    """The alert on pods pending too long reads this gauge: a gated pod waits for its gates,
    a deleting one for nothing, a bound one no longer; none of them may raise it."""
    clock = FakeClock()  # 2026-11-26T00:16:40Z
    s = Scheduler(SchedulerSettings(), clock=clock)
    metric = "kopf_dra_scheduler_oldest_pending_pod_age_seconds"
    assert REGISTRY.get_sample_value(metric) == 0.0, "no pod pending"
    s.cache.pods.apply("ADDED", _created("new", "2026-11-26T00:15:00Z"))
    s.cache.pods.apply(
        "ADDED", _created("gated", "2026-11-25T00:00:00Z", schedulingGates=[{"name": "wait"}])
    )
    deleting = _created("deleting", "2026-11-25T00:00:00Z")
    deleting["metadata"]["deletionTimestamp"] = "2026-11-26T00:10:00Z"
    s.cache.pods.apply("ADDED", deleting)
    bound = _created("bound", "2026-11-25T00:00:00Z", nodeName="node-1")
    s.cache.pods.apply("ADDED", bound)
    assert REGISTRY.get_sample_value(metric) == 100.0
    s.cache.pods.apply("ADDED", _created("old", "2026-11-26T00:06:40Z"))
    clock.advance(60)
    assert REGISTRY.get_sample_value(metric) == 660.0
    s.cache.pods.apply("DELETED", _created("old", "2026-11-26T00:06:40Z"))
    assert REGISTRY.get_sample_value(metric) == 160.0


def test_only_the_filter_timeout_stops_an_attempt_as_timed_out_not_a_turn_given_away() -> None:
    clock = FakeClock()
    others = [False]
    budget = AttemptBudget(
        clock,
        spent_before=0.0,
        filter_timeout=10.0,
        tenant_slice=0.5,
        others_waiting=lambda: others[0],
    )
    assert not budget.spent()
    clock.advance(1.0)
    others[0] = True
    assert budget.spent()
    assert (budget.yielded, budget.timed_out) == (True, False)
    # The next turn continues the pod's allocation time, until the filter timeout ends it.
    turn = AttemptBudget(
        clock,
        spent_before=budget.total(),
        filter_timeout=10.0,
        tenant_slice=0.5,
        others_waiting=lambda: False,
    )
    clock.advance(8.9)
    assert not turn.spent()
    clock.advance(0.1)
    assert turn.spent()
    assert (turn.yielded, turn.timed_out) == (False, True)


async def test_an_explanation_kept_from_a_turn_given_away_answers_to_the_next_attempt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A node found unsatisfiable in an attempt that gave its turn away is kept, and explained
    lazily, by that attempt's search, in a later attempt: the time it may take is the later
    attempt's. With the earlier attempt's budget it ran out at once (its slice long spent,
    other tenants waiting) and the node was reported as "cannot allocate all claims"."""
    clock = FakeClock()
    s = Scheduler(SchedulerSettings(filter_timeout=0.0), clock=clock)
    s.active = True
    s.cache.claims.apply("ADDED", _claim("5", allocated=False))
    pod = _created(
        "p", "2026-11-26T00:00:00Z", resourceClaims=[{"name": "gpu", "resourceClaimName": "c"}]
    )
    s.cache.pods.apply("ADDED", pod)
    monkeypatch.setattr(s.queue, "others_waiting", lambda key: True)
    kept: list[Any] = []
    failures: list[str] = []

    def cycle(*args: Any, **kwargs: Any) -> CycleResult:
        allocator = args[4]
        if not kept:  # the first attempt: its slice runs out while others wait
            kept.append(allocator)
            clock.advance(1.0)
            with pytest.raises(OutOfTimeError):
                allocator.check_time()
            return CycleResult((), {"node-1": "cannot allocate all claims"}, {}, timed_out=True)
        try:  # the next attempt, at its start, explains what the first one kept
            kept[0].check_time()
        except OutOfTimeError as e:
            failures.append(e.message)
        return CycleResult((), {"node-1": "explained"}, {})

    _offline(s, monkeypatch, cycle)
    await s.schedule(ObjectKey("ns", "p"))  # the turn given away
    assert len(kept) == 1
    assert s.budget.running is None
    with pytest.raises(Requeue):
        await s.schedule(ObjectKey("ns", "p"))
    assert failures == []


@pytest.mark.parametrize("past_timeout", [True, False])
async def test_an_allocation_past_the_filter_timeout_is_counted_once(
    monkeypatch: pytest.MonkeyPatch, past_timeout: bool
) -> None:
    clock = FakeClock()
    s = Scheduler(SchedulerSettings(filter_timeout=5.0), clock=clock)
    s.active = True
    s.cache.claims.apply("ADDED", _claim("5", allocated=False))
    pod = _created(
        "p", "2026-11-26T00:00:00Z", resourceClaims=[{"name": "gpu", "resourceClaimName": "c"}]
    )
    s.cache.pods.apply("ADDED", pod)

    def cycle(*args: Any, **kwargs: Any) -> CycleResult:
        """The allocator asks for the time, as between its steps, after as long as
        ``past_timeout`` says."""
        allocator = args[4]
        clock.advance(5.0 if past_timeout else 4.9)
        try:
            allocator.check_time()
        except OutOfTimeError as e:
            return CycleResult((), {"node-1": e.message}, {}, timed_out=True)
        return CycleResult((), {"node-1": "cannot allocate all claims"}, {})

    _offline(s, monkeypatch, cycle)
    metric = "kopf_dra_scheduler_filter_timeouts_total"
    counted = REGISTRY.get_sample_value(metric) or 0.0
    with pytest.raises(TemporaryError if past_timeout else Requeue):
        await s.schedule(ObjectKey("ns", "p"))
    assert REGISTRY.get_sample_value(metric) == counted + (1 if past_timeout else 0)


@pytest.mark.parametrize("timed_out", [True, False])
async def test_binding_conditions_that_time_out_are_counted_apart_from_failed_ones(
    monkeypatch: pytest.MonkeyPatch, timed_out: bool
) -> None:
    s = Scheduler(SchedulerSettings())
    _offline(s, monkeypatch, run_cycle)
    metric = "kopf_dra_scheduler_binding_conditions_timeouts_total"
    counted = REGISTRY.get_sample_value(metric) or 0.0
    failed = BindingFailed("binding conditions not met", None, (), timed_out=timed_out)
    await s.binder.binding_failed(Pod.load(_created("p", "2026-11-26T00:00:00Z")), failed)
    assert REGISTRY.get_sample_value(metric) == counted + (1 if timed_out else 0)


async def test_unschedulable_pods_still_backing_off_come_back_behind_ready_pods() -> None:
    """upstream's movePodsToActiveOrBackoffQueue: an event that may make room brings the
    unschedulable pods back, those whose backoff has not ended into the backoff queue."""
    clock = FakeClock()
    s = Scheduler(SchedulerSettings(), clock=clock)
    s.active = True
    fresh, old = ObjectKey("ns", "fresh"), ObjectKey("ns", "old")
    for key in (fresh, old):
        s.queue.record(key).attempts = 3  # a 4 s backoff
        s.queue.set_state(key, PodState.UNSCHEDULABLE)
    s.queue.records[old].unschedulable_at = clock.monotonic() - 5
    assert s.queue.records[fresh].backoff_left(clock.monotonic()) == 4.0
    s.queue.make_room("ResourceClaim/Update", "a claim was deallocated")
    flush = s.queue._flush
    assert flush is not None
    await flush
    assert s.queue.work.waiting() == (1, 1)  # old is ready, fresh backs off for 4 s more


def _taken(s: Scheduler) -> list[ObjectKey]:
    """The keys ready in the scheduling queue, in the order its worker takes them (taken)."""
    work = s.queue.work
    taken = [work._ready.pop() for _ in range(len(work._ready))]
    work._queued.difference_update(taken)
    return taken


@pytest.mark.parametrize("starving_after", [10.0, 0.0])
async def test_a_freed_device_is_offered_first_to_the_pod_that_waited_longest(
    starving_after: float,
) -> None:
    """Past ``starving_after`` seconds of waiting, a pod backing off goes ahead of the pods
    ready now when a claim frees devices, one pod per device freed, oldest first, each pod
    once until its attempt; 0 leaves the queue as kube-scheduler's (the pods come back by the
    coalesced flush, after their backoff)."""
    clock = FakeClock()
    s = Scheduler(SchedulerSettings(starving_after=starving_after), clock=clock)
    s.active = True
    feeds = s.events_to_register()
    feeds["ResourceClaim"]({"type": "ADDED", "body": _claim("1", allocated=True)})
    oldest, older, young = ObjectKey("ns", "oldest"), ObjectKey("ns", "older"), ObjectKey("ns", "y")
    for key, then in ((oldest, 30), (older, 25), (young, 5)):
        s.queue.record(key).attempts = 5  # a 10 s backoff
        s.queue.set_state(key, PodState.UNSCHEDULABLE)
        clock.advance(then)
    s.queue.set_state(oldest, PodState.UNSCHEDULABLE)  # failed again: still the oldest
    fresh = ObjectKey("ns", "fresh")
    s.queue.add(fresh)
    offers = "kopf_dra_scheduler_starving_offers_total"
    before = REGISTRY.get_sample_value(offers)
    feeds["ResourceClaim"]({"type": "MODIFIED", "body": _claim("2", allocated=False)})
    # Another device freed before oldest's attempt: the next pod gets it.
    s.queue.make_room("ResourceClaim/Delete", "another claim freed its device", offer=1)
    assert _taken(s) == ([older, oldest, fresh] if starving_after else [fresh])
    assert REGISTRY.get_sample_value(offers) == (before or 0.0) + (2 if starving_after else 0)
    flush = s.queue._flush
    assert flush is not None
    await flush


async def test_a_pod_waits_from_its_arrival_not_from_its_first_failed_attempt() -> None:
    """A queue backed up with retries may hold a new pod's first attempt for seconds: it has
    waited since it came."""
    clock = FakeClock()
    s = Scheduler(SchedulerSettings(starving_after=10.0), clock=clock)
    s.active = True
    feeds = s.events_to_register()
    feeds["ResourceClaim"]({"type": "ADDED", "body": _claim("1", allocated=True)})
    pod = _pod("came-first", None)
    pod["spec"]["schedulerName"] = s.settings.scheduler_name
    feeds["Pod"]({"type": "ADDED", "body": pod})
    first, other = ObjectKey("ns", "came-first"), ObjectKey("ns", "failed-first")
    assert _taken(s) == [first]  # by the worker: its attempt is much later
    clock.advance(2)
    s.queue.set_state(other, PodState.UNSCHEDULABLE)  # another pod's attempt came first
    clock.advance(9)
    s.queue.set_state(first, PodState.UNSCHEDULABLE)  # 11 s after it came
    s.queue.make_room("ResourceClaim/Delete", "a claim freed its device", offer=1)
    assert _taken(s) == [first]
    flush = s.queue._flush
    assert flush is not None
    await flush


@pytest.mark.parametrize("seconds_per_node", [0.0, 1.0])
async def test_a_cycle_predicted_short_runs_on_the_event_loop_a_long_one_in_a_thread(
    monkeypatch: pytest.MonkeyPatch, seconds_per_node: float
) -> None:
    s = Scheduler(SchedulerSettings())
    s.active = True
    feeds = s.events_to_register()
    node = _small_node()
    feeds["Node"]({"type": "ADDED", "body": node})
    pod = _pod("waiting", None, cpu="100")  # fits no node
    pod["spec"]["schedulerName"] = s.settings.scheduler_name
    feeds["Pod"]({"type": "ADDED", "body": pod})
    threads: list[int] = []

    def cycle(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.get_ident())
        return run_cycle(*args, **kwargs)

    _offline(s, monkeypatch, cycle)
    s._cycle_per_node = seconds_per_node
    with pytest.raises(Requeue):
        await s.schedule(ObjectKey("ns", "waiting"))
    assert (threads == [threading.get_ident()]) is (seconds_per_node == 0.0)
    assert s._cycle_per_node < 1.0  # the smoothed prediction follows what the cycle took


def _slice(name: str, node: str | None, pool: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": DEVICE.driver,
        "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0"}],
    }
    spec.update({"nodeName": node} if node else {"allNodes": True})
    meta = {"name": name, "resourceVersion": "1"}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": meta,
        "spec": spec,
    }


def _allocated_on(name: str, pool: str) -> dict[str, Any]:
    body = _claim("1", allocated=True)
    body["metadata"].update(name=name, uid=name)
    body["status"]["allocation"]["devices"]["results"][0]["pool"] = pool
    return body


async def test_a_claim_frees_what_was_learnt_on_its_devices_nodes_only() -> None:
    """Nodes where claims did not fit are skipped until something is freed there: a claim
    whose devices were one node's forgets that node's outcomes, and keeps the others' (at
    5,000 nodes, forgetting them all cost a thousand full nodes tried again per pod); a
    network-attached device may fit anywhere, and forgets them all."""
    s = Scheduler(SchedulerSettings())
    feeds = s.events_to_register()
    for body in (_slice("s1", "node-1", "node-1"), _slice("s2", "node-2", "node-2")):
        feeds["ResourceSlice"]({"type": "ADDED", "body": body})
    feeds["ResourceSlice"]({"type": "ADDED", "body": _slice("net", None, "fabric")})
    for name, pool in (("on-1", "node-1"), ("on-net", "fabric")):
        feeds["ResourceClaim"]({"type": "ADDED", "body": _allocated_on(name, pool)})
    pending = [ResourceClaim.load(_claim("1", allocated=False))]

    def learnt() -> list[str]:
        return sorted(s.queue.unsatisfiable.known(pending, ()))

    for node in ("node-1", "node-2", "node-3"):
        s.queue.unsatisfiable.known(pending, ())[node] = cast(Any, None)
    held_by_a_cycle = s.queue.unsatisfiable.known(pending, ())
    feeds["ResourceClaim"]({"type": "DELETED", "body": _allocated_on("on-1", "node-1")})
    assert sorted(held_by_a_cycle) == ["node-2", "node-3"]
    held_by_a_cycle["node-1"] = cast(Any, None)  # learnt before the free, written after it
    assert learnt() == ["node-2", "node-3"]  # the next cycle does not see it
    feeds["ResourceClaim"]({"type": "DELETED", "body": _allocated_on("on-net", "fabric")})
    assert learnt() == []


def test_a_pool_is_a_nodes_while_every_slice_of_it_is_published_for_that_node() -> None:
    slices = [
        ResourceSlice.load(_slice("a-1", "node-1", "a")),
        ResourceSlice.load(_slice("a-2", "node-1", "a")),
        ResourceSlice.load(_slice("b-1", "node-1", "b")),
        ResourceSlice.load(_slice("b-2", "node-2", "b")),
        ResourceSlice.load(_slice("net", None, "fabric")),
    ]
    found = pool_nodes(slices)
    assert found == {
        PoolID(DEVICE.driver, "a"): "node-1",
        PoolID(DEVICE.driver, "b"): None,
        PoolID(DEVICE.driver, "fabric"): None,
    }
