"""Preemption, pure: victims per node, their reprieve, the choice of node, eligibility."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from operators.allocator import AllocatedState, Allocator, Features
from operators.api.core import Node, Pod, PodDisruptionBudget, PriorityClass
from operators.api.groups import PodGroup
from operators.api.resource import DeviceClass, ResourceClaim, ResourceSlice
from operators.scheduling.cycle import prefer_nominated, run_cycle
from operators.scheduling.nodes import NodeUsage
from operators.scheduling.preemption import (
    BINDING_CONDITIONS,
    MULTI_NODE,
    NEVER,
    NO_VICTIMS,
    NOT_HELPFUL,
    SHARED,
    TERMINATING,
    Budget,
    Candidate,
    PodPriority,
    Preemption,
    RunningPod,
    candidates_wanted,
    eligibility,
    group_priority,
    members,
    more_important_units,
    pick,
    preempt,
    priority_of,
    release_blocker,
    running_pod,
    split_by_budget,
    units_of,
    wanted,
)
from tests.unit.allocator.engine import engine

from .builders import NS, node

J = dict[str, Any]
DRIVER = "drv"
NOW = datetime.datetime(2026, 6, 1, 12, 0, tzinfo=datetime.UTC)
SHARE_IDS = iter(f"00000000-0000-0000-0000-{i:012d}" for i in range(10**6))


def klass(name: str, kind: str) -> DeviceClass:
    expression = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].kind == "{kind}"'
    return DeviceClass.load(
        {"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": expression}}]}}
    )


CLASSES = [klass("whole", "whole"), klass("mig", "mig"), klass("nic", "nic")]


def kind(value: str) -> J:
    return {"kind": {"string": value}}


def gpu_node_slices(name: str, gpus: int = 1, nic: bool = False) -> list[ResourceSlice]:
    """Per GPU: the whole GPU (40 memory) and two 20-memory MIG partitions on one counter
    set (in a slice of its own, as KEP-4815 publishes them); optionally a 100G NIC that
    allows multiple allocations."""
    devices: list[J] = []
    counter_sets: list[J] = []
    for g in range(gpus):
        cs = f"gpu-{g}-counters"
        counter_sets.append({"name": cs, "counters": {"memory": {"value": "40"}}})
        for suffix, memory, what in (
            ("", 40, "whole"),
            ("-mig-a", 20, "mig"),
            ("-mig-b", 20, "mig"),
        ):
            devices.append(
                {
                    "name": f"gpu-{g}{suffix}",
                    "attributes": kind(what),
                    "consumesCounters": [
                        {"counterSet": cs, "counters": {"memory": {"value": str(memory)}}}
                    ],
                }
            )
    if nic:
        devices.append(
            {
                "name": "nic-0",
                "attributes": kind("nic"),
                "allowMultipleAllocations": True,
                "capacity": {"bandwidth": {"value": "100G"}},
            }
        )
    count = 2 if counter_sets else 1
    pool = {"name": name, "generation": 1, "resourceSliceCount": count}
    spec: J = {"driver": DRIVER, "pool": pool, "nodeName": name, "devices": devices}
    slices = [ResourceSlice.load({"metadata": {"name": f"{name}-slice"}, "spec": spec})]
    if counter_sets:
        counters: J = {"driver": DRIVER, "pool": pool, "sharedCounters": counter_sets}
        slices.append(
            ResourceSlice.load({"metadata": {"name": f"{name}-counters"}, "spec": counters})
        )
    return slices


def plain_slice(name: str, count: int) -> ResourceSlice:
    devices = [{"name": f"gpu-{i}", "attributes": kind("whole")} for i in range(count)]
    spec = {
        "driver": DRIVER,
        "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
        "nodeName": name,
        "devices": devices,
    }
    return ResourceSlice.load({"metadata": {"name": f"{name}-slice"}, "spec": spec})


def request(
    device_class: str, *, count: int = 1, mode: str = "ExactCount", bandwidth: str = ""
) -> J:
    exactly: J = {"deviceClassName": device_class, "allocationMode": mode}
    if mode == "ExactCount":
        exactly["count"] = count
    if bandwidth:
        exactly["capacity"] = {"requests": {"bandwidth": bandwidth}}
    return {"name": "r", "exactly": exactly}


def first_available(*classes: str) -> J:
    return {
        "name": "r",
        "firstAvailable": [{"name": c, "deviceClassName": c, "count": 1} for c in classes],
    }


def pinned(on: str) -> J:
    return {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [on]}]}
        ]
    }


def claim(
    name: str,
    req: J,
    *,
    on: str | None = None,
    devices: Sequence[str] = (),
    reserved: Sequence[str] = (),
    bandwidth: str = "",
    selector: J | None = None,
    binding: bool = False,
) -> ResourceClaim:
    body: J = {
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": [req]}},
    }
    if on is not None:
        results = []
        for d in devices:
            r: J = {"request": "r", "driver": DRIVER, "pool": on, "device": d}
            if bandwidth:
                r["shareID"] = next(SHARE_IDS)
                r["consumedCapacity"] = {"bandwidth": bandwidth}
            if binding:
                r["bindingConditions"] = ["attached"]
            results.append(r)
        body["status"] = {
            "allocation": {
                "devices": {"results": results},
                "nodeSelector": selector if selector is not None else pinned(on),
            },
            "reservedFor": [{"resource": "pods", "name": f"pod-{u}", "uid": u} for u in reserved],
        }
    return ResourceClaim.load(body)


def pod(
    name: str,
    priority: int = 0,
    *,
    on: str | None = None,
    claims: Sequence[str] = (),
    labels: Mapping[str, str] | None = None,
    started: str | None = None,
    deleting: bool = False,
    cpu: str | None = None,
) -> Pod:
    container: J = {"name": "c", "image": "busybox"}
    if cpu:
        container["resources"] = {"requests": {"cpu": cpu}}
    spec: J = {"schedulerName": "kopf-dra", "containers": [container], "priority": priority}
    if on:
        spec["nodeName"] = on
    if claims:
        spec["resourceClaims"] = [{"name": c, "resourceClaimName": c} for c in claims]
    meta: J = {"name": name, "namespace": NS, "uid": name, "labels": dict(labels or {})}
    if deleting:
        meta["deletionTimestamp"] = "2026-06-01T11:00:00Z"
    status: J = {"phase": "Running" if on else "Pending"}
    if started:
        status["startTime"] = started
    return Pod.load({"metadata": meta, "spec": spec, "status": status})


class World:
    """Nodes, slices and the pods bound to them with their allocated claims."""

    def __init__(self, slices: Sequence[ResourceSlice], nodes: Sequence[str]) -> None:
        self.slices = list(slices)
        self.nodes: list[Node] = [node(n) for n in nodes]
        self.running: dict[str, list[RunningPod]] = {}
        self.claims: list[ResourceClaim] = []

    def run(
        self, name: str, priority: int, on: str, *claims: ResourceClaim, **kw: Any
    ) -> RunningPod:
        p = RunningPod(
            pod(name, priority, on=on, claims=[c.metadata.name or "" for c in claims], **kw),
            priority,
            tuple(claims),
        )
        self.running.setdefault(on, []).append(p)
        self.claims.extend(c for c in claims if c not in self.claims)
        return p

    def allocator(self, features: Features | None = None) -> Allocator:
        features = features or Features.all()
        return Allocator(
            features,
            AllocatedState.from_claims(self.claims, features),
            CLASSES,
            self.slices,
            engine(),
            share_ids=lambda: "ffffffff-ffff-ffff-ffff-ffffffffffff",
        )

    def usage(self) -> dict[str, NodeUsage]:
        from operators.scheduling.nodes import UsageTracker, pod_requests
        from operators.scheduling.plugins.scores import counted_placement

        tracker = UsageTracker()
        for on, pods in self.running.items():
            for p in pods:
                tracker.observe(p.key, counted_placement(p.pod, on, pod_requests(p.pod)))
        return dict(tracker.usage)

    def preempt(
        self,
        preemptor: Pod,
        claims: Sequence[ResourceClaim],
        *,
        priority: int | None = None,
        budgets: Sequence[Budget] = (),
        alternatives: Any = "no-preemption-first",
        better_than: int | None = None,
    ) -> Preemption:
        value = preemptor.spec.priority if priority is None else priority
        return preempt(
            preemptor,
            priority=PodPriority(value or 0, True),
            claims=claims,
            nodes=self.nodes,
            usage=self.usage(),
            on_node=self.running,
            allocator=self.allocator(),
            budgets=budgets,
            now=NOW,
            features=Features.all(),
            alternatives=alternatives,
            better_than=better_than,
        )

    def fits_without(
        self, preemptor: Pod, claims: Sequence[ResourceClaim], victims: Sequence[RunningPod]
    ) -> bool:
        """Whether the pod fits somewhere once ``victims`` are gone and their claims released
        (a check written independently of the search)."""
        gone = {v.uid for v in victims}
        kept = [c for c in self.claims if not all(r.uid in gone for r in c.status.reserved_for)]
        features = Features.all()
        alloc = Allocator(
            features,
            AllocatedState.from_claims(kept, features),
            CLASSES,
            self.slices,
            engine(),
            share_ids=lambda: "ffffffff-ffff-ffff-ffff-ffffffffffff",
        )
        usage = {on: NodeUsage(u.requests, u.pods) for on, u in self.usage().items()}
        result = run_cycle(preemptor, claims, self.nodes, usage, alloc)
        return bool(result.fits)


def victims_of(p: Preemption) -> list[str]:
    assert p.candidate is not None, p.failures
    return [v.pod.metadata.name or "" for v in p.candidate.victims]


# --- devices released by victims ------------------------------------------------------------


def test_a_whole_gpu_holder_is_preempted_for_a_mig_partition_of_that_gpu() -> None:
    w = World(gpu_node_slices("node-1"), ["node-1"])
    held = claim("low-gpu", request("whole"), on="node-1", devices=["gpu-0"], reserved=["low"])
    w.run("low", 10, "node-1", held)
    mine = claim("mig", request("mig"))
    result = w.preempt(pod("high", 1000), [mine])
    assert victims_of(result) == ["low"]
    c = result.candidate
    assert c is not None
    assert c.node == "node-1"
    assert c.freed == {f"{NS}/low": ("drv/node-1/gpu-0",)}
    (allocation,) = c.results.values()
    assert allocation.devices.results[0].device == "gpu-0-mig-a"
    assert "preempting ns/low (frees drv/node-1/gpu-0)" in result.message(1)


def test_the_higher_priority_partition_holder_is_reprieved() -> None:
    """Two partitions held; one is enough: the more important holder stays."""
    w = World(gpu_node_slices("node-1"), ["node-1"])
    a = claim("a", request("mig"), on="node-1", devices=["gpu-0-mig-a"], reserved=["low-a"])
    b = claim("b", request("mig"), on="node-1", devices=["gpu-0-mig-b"], reserved=["low-b"])
    w.run("low-a", 5, "node-1", a)
    w.run("low-b", 1, "node-1", b)
    result = w.preempt(pod("high", 100), [claim("mine", request("mig"))])
    assert victims_of(result) == ["low-b"]


def test_two_small_nic_shares_are_preempted_for_one_large_share() -> None:
    w = World(gpu_node_slices("node-1", gpus=0, nic=True), ["node-1"])
    for name, priority, bandwidth in (("s1", 1, "40G"), ("s2", 2, "40G"), ("keep", 500, "20G")):
        shared = claim(
            f"{name}-nic",
            request("nic", bandwidth=bandwidth),
            on="node-1",
            devices=["nic-0"],
            reserved=[name],
            bandwidth=bandwidth,
        )
        w.run(name, priority, "node-1", shared)
    result = w.preempt(pod("big", 100), [claim("mine", request("nic", bandwidth="80G"))])
    assert sorted(victims_of(result)) == ["s1", "s2"]
    (allocation,) = result.candidate.results.values()  # type: ignore[union-attr]
    assert allocation.devices.results[0].consumed_capacity["bandwidth"].value == 80 * 10**9


def test_exact_count_evicts_the_fewest_least_important_holders() -> None:
    w = World([plain_slice("node-1", 3)], ["node-1"])
    for i, priority in enumerate((7, 1, 3)):
        held = claim(
            f"c{i}", request("whole"), on="node-1", devices=[f"gpu-{i}"], reserved=[f"p{i}"]
        )
        w.run(f"p{i}", priority, "node-1", held)
    result = w.preempt(pod("high", 100), [claim("mine", request("whole", count=2))])
    assert victims_of(result) == ["p2", "p1"], "highest priority first among victims"


def test_all_mode_needs_every_device_of_the_node_free() -> None:
    w = World([plain_slice("node-1", 2)], ["node-1"])
    for i in range(2):
        held = claim(
            f"c{i}", request("whole"), on="node-1", devices=[f"gpu-{i}"], reserved=[f"p{i}"]
        )
        w.run(f"p{i}", i, "node-1", held)
    result = w.preempt(pod("high", 100), [claim("mine", request("whole", mode="All"))])
    assert sorted(victims_of(result)) == ["p0", "p1"]


def test_a_claim_shared_by_several_victims_is_released_once_all_of_them_go() -> None:
    w = World([plain_slice("node-1", 1)], ["node-1"])
    shared = claim("shared", request("whole"), on="node-1", devices=["gpu-0"], reserved=["a", "b"])
    w.run("a", 1, "node-1", shared)
    w.run("b", 2, "node-1", shared)
    result = w.preempt(pod("high", 100), [claim("mine", request("whole"))])
    assert sorted(victims_of(result)) == ["a", "b"]


# --- what preemption does not release (KEP-5690's scope) -----------------------------------


def test_a_claim_shared_with_a_pod_that_stays_is_not_released() -> None:
    w = World([plain_slice("node-1", 1)], ["node-1"])
    shared = claim(
        "shared", request("whole"), on="node-1", devices=["gpu-0"], reserved=["low", "vip"]
    )
    w.run("low", 1, "node-1", shared)
    w.run("vip", 1000, "node-1", shared)
    result = w.preempt(pod("high", 100), [claim("mine", request("whole"))])
    assert result.candidate is None
    assert result.failures == {"node-1": f"{NO_VICTIMS}: the devices are held by {SHARED}"}
    assert SHARED in result.message(1)


def test_multi_node_devices_and_binding_conditions_are_out_of_scope() -> None:
    w = World([plain_slice("node-1", 2)], ["node-1"])
    rack = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["a"]}]}
        ]
    }
    multi = claim(
        "multi", request("whole"), on="node-1", devices=["gpu-0"], reserved=["m"], selector=rack
    )
    fabric = claim(
        "fabric", request("whole"), on="node-1", devices=["gpu-1"], reserved=["f"], binding=True
    )
    w.run("m", 1, "node-1", multi)
    w.run("f", 1, "node-1", fabric)
    assert release_blocker(multi, "node-1", {"m"}) == MULTI_NODE
    assert release_blocker(fabric, "node-1", {"f"}) == BINDING_CONDITIONS
    result = w.preempt(pod("high", 100), [claim("mine", request("whole"))])
    assert result.candidate is None
    assert result.failures["node-1"].startswith(NO_VICTIMS + ": the devices are held by ")


def test_no_preemption_when_it_would_not_help() -> None:
    """Only equal or higher priority pods, or a node no eviction can make usable."""
    w = World([plain_slice("node-1", 1), plain_slice("node-2", 1)], ["node-1", "node-2"])
    w.nodes[1] = node("node-2", taints=[{"key": "dedicated", "effect": "NoSchedule"}])
    for i, on in enumerate(("node-1", "node-2")):
        held = claim(f"c{i}", request("whole"), on=on, devices=["gpu-0"], reserved=[f"p{i}"])
        w.run(f"p{i}", 100 if on == "node-1" else 1, on, held)
    result = w.preempt(pod("high", 100), [claim("mine", request("whole"))])
    assert result.candidate is None
    assert result.failures == {"node-1": NO_VICTIMS, "node-2": NOT_HELPFUL}
    assert result.message(2) == (f"0/2 nodes are available: 1 {NO_VICTIMS}, 1 {NOT_HELPFUL}.")


def test_cpu_is_released_with_the_victims() -> None:
    w = World([], ["node-1"])
    w.nodes[0] = node("node-1", allocatable={"cpu": "4", "memory": "1Gi", "pods": "10"})
    w.run("hog", 1, "node-1", cpu="3")
    result = w.preempt(pod("high", 100, cpu="2"), [])
    assert victims_of(result) == ["hog"]


# --- prioritized alternatives ------------------------------------------------------------------


def test_alternatives_no_preemption_first_reprieves_for_a_lower_ranked_alternative() -> None:
    w = World(gpu_node_slices("node-1"), ["node-1"])
    a = claim("a", request("mig"), on="node-1", devices=["gpu-0-mig-a"], reserved=["a"])
    b = claim("b", request("mig"), on="node-1", devices=["gpu-0-mig-b"], reserved=["b"])
    w.run("a", 5, "node-1", a)
    w.run("b", 1, "node-1", b)
    mine = claim("mine", first_available("whole", "mig"))
    default = w.preempt(pod("high", 100), [mine])
    assert victims_of(default) == ["b"]
    assert default.candidate is not None
    assert default.candidate.rank == 1
    ranked = w.preempt(pod("high", 100), [mine], alternatives="rank-first")
    assert victims_of(ranked) == ["a", "b"]
    assert ranked.candidate is not None
    assert ranked.candidate.rank == 0


def test_rank_first_preempts_only_for_a_better_alternative_than_what_fits() -> None:
    w = World(gpu_node_slices("node-1"), ["node-1"])
    a = claim("a", request("mig"), on="node-1", devices=["gpu-0-mig-a"], reserved=["a"])
    w.run("a", 1, "node-1", a)
    mine = claim("mine", first_available("whole", "mig"))
    assert not wanted(1, "no-preemption-first"), "it fits with mig-b: nobody is evicted"
    assert wanted(1, "rank-first")
    assert not wanted(0, "rank-first")
    assert wanted(None, "rank-first")
    result = w.preempt(pod("high", 100), [mine], alternatives="rank-first", better_than=1)
    assert victims_of(result) == ["a"]
    assert result.candidate is not None
    assert result.candidate.rank == 0


# --- PodDisruptionBudgets and the choice of node ------------------------------------------


def budget(allowed: int, **labels: str) -> Budget:
    return Budget.of(
        PodDisruptionBudget.load(
            {
                "metadata": {"name": "pdb", "namespace": NS},
                "spec": {"selector": {"matchLabels": labels}},
                "status": {"disruptionsAllowed": allowed},
            }
        )
    )


def two_nodes_one_holder_each(priorities: tuple[int, int] = (1, 1), **kw: Any) -> World:
    w = World([plain_slice("node-1", 1), plain_slice("node-2", 1)], ["node-1", "node-2"])
    for i, on in enumerate(("node-1", "node-2")):
        held = claim(f"c{i}", request("whole"), on=on, devices=["gpu-0"], reserved=[f"p{i}"])
        w.run(f"p{i}", priorities[i], on, held, labels={"app": f"app{i}"}, **kw)
    return w


def test_a_node_whose_victim_is_protected_by_a_budget_is_avoided() -> None:
    w = two_nodes_one_holder_each()
    result = w.preempt(
        pod("high", 100), [claim("mine", request("whole"))], budgets=[budget(0, app="app0")]
    )
    assert victims_of(result) == ["p1"]
    assert result.candidate is not None
    assert result.candidate.pdb_violations == 0
    allowed = w.preempt(
        pod("high", 100), [claim("mine", request("whole"))], budgets=[budget(1, app="app0")]
    )
    assert victims_of(allowed) == ["p0"]


def test_a_budget_violation_is_accepted_when_there_is_no_other_way() -> None:
    w = World([plain_slice("node-1", 1)], ["node-1"])
    held = claim("c0", request("whole"), on="node-1", devices=["gpu-0"], reserved=["p0"])
    w.run("p0", 1, "node-1", held, labels={"app": "app0"})
    result = w.preempt(
        pod("high", 100), [claim("mine", request("whole"))], budgets=[budget(0, app="app0")]
    )
    assert victims_of(result) == ["p0"]
    assert result.candidate is not None
    assert result.candidate.pdb_violations == 1


def test_an_empty_budget_selector_covers_nothing() -> None:
    empty = Budget(NS, None, 0)
    assert not empty.covers(pod("x", on="n"))


def test_lower_highest_victim_priority_wins() -> None:
    w = two_nodes_one_holder_each((5, 3))
    assert victims_of(w.preempt(pod("high", 100), [claim("mine", request("whole"))])) == ["p1"]


def test_latest_start_time_wins_on_a_tie() -> None:
    w = World([plain_slice("node-1", 1), plain_slice("node-2", 1)], ["node-1", "node-2"])
    for i, (on, started) in enumerate(
        (("node-1", "2026-01-01T00:00:00Z"), ("node-2", "2026-03-01T00:00:00Z"))
    ):
        held = claim(f"c{i}", request("whole"), on=on, devices=["gpu-0"], reserved=[f"p{i}"])
        w.run(f"p{i}", 1, on, held, started=started)
    assert victims_of(w.preempt(pod("high", 100), [claim("mine", request("whole"))])) == ["p1"]


def test_pick_orders_by_upstreams_criteria() -> None:
    def cand(n: str, priorities: Sequence[int], violations: int = 0) -> Candidate:
        victims = tuple(RunningPod(pod(f"{n}-{i}", p, on=n), p) for i, p in enumerate(priorities))
        return Candidate(n, victims, violations, {}, {})

    assert pick([cand("a", [1], 1), cand("b", [9])], NOW, "no-preemption-first").node == "b"  # type: ignore[union-attr]
    assert pick([cand("a", [5, 1]), cand("b", [5, 2])], NOW, "no-preemption-first").node == "a"  # type: ignore[union-attr]
    assert pick([cand("a", [5, 1, 1]), cand("b", [5, 3])], NOW, "no-preemption-first").node == "b"  # type: ignore[union-attr]
    assert pick([cand("a", [2, 2]), cand("b", [4])], NOW, "no-preemption-first").node == "a"  # type: ignore[union-attr]
    assert pick([cand("a", [1]), cand("b", [])], NOW, "no-preemption-first").node == "b"  # type: ignore[union-attr]
    assert pick([], NOW, "no-preemption-first") is None


def test_candidates_wanted_as_upstream() -> None:
    assert candidates_wanted(5) == 5
    assert candidates_wanted(500) == 100
    assert candidates_wanted(5000) == 500


# --- priorities and eligibility -------------------------------------------------------------


def priority_class(
    name: str, value: int, *, default: bool = False, never: bool = False
) -> PriorityClass:
    body: J = {"metadata": {"name": name}, "value": value}
    if default:
        body["globalDefault"] = True
    if never:
        body["preemptionPolicy"] = "Never"
    return PriorityClass.load(body)


def test_priority_from_admission_or_from_the_class() -> None:
    classes = {
        "high": priority_class("high", 1000),
        "polite": priority_class("polite", 1000, never=True),
        "base": priority_class("base", 7, default=True),
    }
    admitted = pod("a", 5)
    assert priority_of(admitted, classes) == PodPriority(5, True)
    named = Pod.load({"metadata": {"name": "b"}, "spec": {"priorityClassName": "high"}})
    assert priority_of(named, classes) == PodPriority(1000, True)
    polite = Pod.load({"metadata": {"name": "c"}, "spec": {"priorityClassName": "polite"}})
    assert priority_of(polite, classes) == PodPriority(1000, False)
    unnamed = Pod.load({"metadata": {"name": "d"}, "spec": {}})
    assert priority_of(unnamed, classes) == PodPriority(7, True)
    assert priority_of(unnamed, {}) == PodPriority(0, True)
    own = Pod.load(
        {"metadata": {"name": "e"}, "spec": {"priority": 3, "preemptionPolicy": "Never"}}
    )
    assert priority_of(own, {}) == PodPriority(3, False)


def test_eligibility() -> None:
    assert eligibility(PodPriority(100, False), None, []) == NEVER
    terminating = RunningPod(pod("t", 1, on="n", deleting=True), 1)
    assert eligibility(PodPriority(100, True), "n", [terminating]) == TERMINATING
    assert eligibility(PodPriority(100, True), None, [terminating]) is None
    important = RunningPod(pod("t", 500, on="n", deleting=True), 500)
    assert eligibility(PodPriority(100, True), "n", [important]) is None


def test_a_preemptor_whose_victims_are_not_gone_yet_preempts_nobody_else() -> None:
    """Its own eviction may not be in the cache yet: the victim still looks running there,
    and a second preemption would evict one pod too many."""
    stale = RunningPod(pod("v", 1, on="n"), 1)
    assert eligibility(PodPriority(100, True), "n", [stale]) is None
    assert eligibility(PodPriority(100, True), "n", [stale], evicting=True) == TERMINATING
    assert eligibility(PodPriority(100, True), "n", [], evicting=True) == TERMINATING
    assert eligibility(PodPriority(100, False), "n", [], evicting=True) == NEVER


# --- properties -----------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    holders=st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(-5, 20)), min_size=0, max_size=8
    ),
    preemptor=st.integers(-5, 20),
    want=st.integers(1, 3),
)
def test_preemption_evicts_only_lower_priority_pods_and_only_when_needed(
    holders: list[tuple[int, int, int]], preemptor: int, want: int
) -> None:
    """Victims are always of lower priority; nobody is evicted when the pod fits; the
    victims make room; putting any one of them back takes the room away again."""
    nodes = ["node-0", "node-1", "node-2"]
    w = World([plain_slice(n, 4) for n in nodes], nodes)
    taken: set[tuple[int, int]] = set()
    for i, (n, d, priority) in enumerate(holders):
        if (n, d) in taken:
            continue
        taken.add((n, d))
        on = nodes[n]
        held = claim(f"h{i}", request("whole"), on=on, devices=[f"gpu-{d}"], reserved=[f"h{i}"])
        w.run(f"h{i}", priority, on, held)
    high = pod("high", preemptor)
    mine = [claim("mine", request("whole", count=want))]
    cycle = run_cycle(high, mine, w.nodes, w.usage(), w.allocator())
    fit = prefer_nominated(cycle, None)
    if not wanted(fit.score.rank if fit else None, "no-preemption-first"):
        assert fit is not None
        return
    result = w.preempt(high, mine)
    if result.candidate is None:
        return
    victims = result.candidate.victims
    assert victims, "a pod that does not fit needs victims"
    assert all(v.priority < preemptor for v in victims)
    assert w.fits_without(high, mine, victims)
    for v in victims:
        assert not w.fits_without(high, mine, [x for x in victims if x is not v])


# --- pod groups as victims (1.37) -------------------------------------------------------------


def member(w: World, name: str, on: str, unit: str | None, priority: int = 1) -> RunningPod:
    """A pod of a PodGroup holding its node's one GPU; ``unit``: its group's key when the
    group's disruptionMode is all."""
    held = claim(f"{name}-gpu", request("whole"), on=on, devices=["gpu-0"], reserved=[name])
    p = w.run(name, priority, on, held)
    grouped = dataclasses.replace(p, grouped=True, unit=unit)
    w.running[on][-1] = grouped
    return grouped


def test_a_whole_groups_members_on_other_nodes_go_with_the_one_evicted() -> None:
    w = World([plain_slice(f"node-{i}", 1) for i in (1, 2)], ["node-1", "node-2"])
    member(w, "m1", "node-1", "podgroup:ns/job")
    member(w, "m2", "node-2", "podgroup:ns/job")
    result = preempt(
        pod("high", 100),
        priority=PodPriority(100, True),
        claims=[claim("mine", request("whole"))],
        nodes=w.nodes,
        usage=w.usage(),
        on_node=w.running,
        allocator=w.allocator(),
        budgets=(),
        now=NOW,
        features=Features.all(),
        members=members(w.running),
    )
    assert sorted(victims_of(result)) == ["m1", "m2"], "never one member alone"


def test_single_mode_members_may_go_alone() -> None:
    w = World([plain_slice(f"node-{i}", 1) for i in (1, 2)], ["node-1", "node-2"])
    member(w, "m1", "node-1", None)
    member(w, "m2", "node-2", None)
    assert len(victims_of(w.preempt(pod("high", 100), [claim("mine", request("whole"))]))) == 1


def test_units_order_priority_then_groups_then_size_then_start() -> None:
    plain = RunningPod(pod("plain", 1, on="n", started="2026-06-01T10:00:00Z"), 1)
    single = RunningPod(pod("single", 1, on="n"), 1, grouped=True)
    a = RunningPod(pod("a", 1, on="n"), 1, grouped=True, unit="podgroup:ns/g")
    b = RunningPod(pod("b", 1, on="m"), 1, grouped=True, unit="podgroup:ns/g")
    high = RunningPod(pod("high", 5, on="n"), 5)
    units = units_of([plain, single, a, high], {"podgroup:ns/g": [a, b]})
    ordered = [u.key for u in more_important_units(units, NOW)]
    assert ordered == [high.key, "podgroup:ns/g", single.key, plain.key]


def test_a_unit_violates_a_budget_as_a_whole() -> None:
    a = RunningPod(pod("a", 1, on="n", labels={"app": "x"}), 1, unit="podgroup:ns/g")
    b = RunningPod(pod("b", 1, on="m", labels={"app": "y"}), 1, unit="podgroup:ns/g")
    c = RunningPod(pod("c", 1, on="m", labels={"app": "y"}), 1)
    (unit,) = units_of([a, b])
    violating, other = split_by_budget([unit, *units_of([c])], [budget(0, app="x")])
    assert [(u.key, n) for u, n in violating] == [("podgroup:ns/g", 1)]
    assert [u.key for u in other] == [c.key]


def test_a_members_priority_is_its_groups() -> None:
    group = PodGroup.load(
        {
            "metadata": {"name": "job", "namespace": NS},
            "spec": {"priority": 7, "disruptionMode": {"all": {}}},
        }
    )
    p = pod("m", 100, on="n")
    p.spec.scheduling_group = Pod.load(
        {"spec": {"containers": [], "schedulingGroup": {"podGroupName": "job"}}}
    ).spec.scheduling_group
    found = running_pod(p, (), {}, lambda _: group)
    assert (found.priority, found.grouped, found.unit) == (7, True, f"podgroup:{NS}/job")
    assert running_pod(p, (), {}, None).priority == 100, "GenericWorkload off: its own"
    assert running_pod(p, (), {}, lambda _: None).priority == 100, "its group gone: its own"
    assert group_priority(PodGroup.load({"spec": {}})) == 0
