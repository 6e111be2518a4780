"""A pod group's cycle and its preemption, pure (``scheduling.group_cycle``,
``scheduling.group_preemption``), over a host of GPU slots: each node has some, each pod asks
for ``example.com/gpu`` in its container, bound pods hold theirs. The scheduler and simulate are
hosts of the same cycle; their tests and the differential test hold them to it."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pytest

from operators.allocator import AllocatedState, Allocator, Features
from operators.allocator.selectors import CelSelectorEngine
from operators.api.core import Node, Pod
from operators.api.features import Release
from operators.api.groups import PodGroup
from operators.api.keys import ObjectKey
from operators.controllers.scheduler import groups as scheduler_groups
from operators.controllers.scheduler import preemptor
from operators.scheduling import group_preemption
from operators.scheduling.attempt import Attempt, Prepared, Ready, Wait
from operators.scheduling.cycle import CycleResult, NodeFit
from operators.scheduling.group_cycle import (
    GAVE_WAY,
    Cycle,
    condition,
    place,
    run,
    run_in_domains,
)
from operators.scheduling.group_preemption import (
    NO_VICTIMS,
    ONGOING,
    RELEASING,
    Trial,
    preempt,
    select_victims,
)
from operators.scheduling.groups import key_of, ordered
from operators.scheduling.nodes import NodeUsage, pod_requests
from operators.scheduling.preemption import (
    NEVER,
    PodPriority,
    RunningPod,
    lower_priority_pods,
    units_of,
)
from operators.scheduling.score import Score
from operators.scheduling.topology import TopologyRules, domains
from operators.simulate import engine
from operators.simulate import group as simulate_group
from tests.unit.scheduling.builders import node
from tests.unit.scheduling.test_decision import _calls

NOW = datetime.datetime(2026, 12, 4, tzinfo=datetime.UTC)
GPU = "example.com/gpu"


def pod(
    name: str,
    *,
    priority: int = 0,
    on: str | None = None,
    only: str | None = None,
    group: str | None = "job",
    never: bool = False,
    deleting: bool = False,
) -> Pod:
    """A pod asking one GPU; ``only``: the one node it may go to."""
    spec: dict[str, Any] = {
        "schedulerName": "kopf-dra",
        "priority": priority,
        "containers": [{"name": "c", "resources": {"requests": {GPU: "1"}}}],
    }
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    if on:
        spec["nodeName"] = on
    if only:
        spec["nodeSelector"] = {"only": only}
    if never:
        spec["preemptionPolicy"] = "Never"
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"{name}-uid"}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-04T00:00:00Z"
    return Pod.load({"metadata": meta, "spec": spec, "status": {}})


def gang(min_count: int, priority: int = 10, **spec: Any) -> PodGroup:
    return PodGroup.load(
        {
            "metadata": {"name": "job", "namespace": "ns", "uid": "job-uid"},
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": min_count}},
                "priority": priority,
                **spec,
            },
        }
    )


@dataclasses.dataclass(eq=False)
class Taken:
    """A pod assumed on a node's slot (``group_cycle.Assumed``)."""

    key: ObjectKey
    fit: NodeFit
    slots: Slots

    def undo(self) -> None:
        self.slots.used[self.fit.node] -= 1
        self.slots.assumed.remove(self)


class Slots:
    """A host of GPU slots per node; the bound pods hold theirs."""

    features = Features()

    def __init__(
        self,
        capacity: dict[str, int],
        bound: Sequence[Pod] = (),
        labels: dict[str, dict[str, str]] | None = None,
    ) -> None:
        self.capacity = capacity
        self.labels = labels or {}
        self.used = dict.fromkeys(capacity, 0)
        for p in bound:
            self.used[p.spec.node_name or ""] += 1
        self.assumed: list[Taken] = []
        self.started: list[str] = []
        self.waiting: set[str] = set()
        self.gave_way: set[str] = set()
        self.broken: set[str] = set()

    def prepare(self, p: Pod) -> Prepared:
        if p.metadata.name in self.waiting:
            return Wait("its claims are not there yet")
        return Ready(p, ())

    def snapshot(self, ready: Ready) -> Attempt:
        usage = {n: NodeUsage({GPU: Decimal(u)}, u) for n, u in self.used.items()}
        return Attempt(ready, PodPriority(0, True), self.nodes(), usage, AllocatedState())

    def nodes(self) -> list[Node]:
        return [node(n, labels=self.labels.get(n)) for n in sorted(self.capacity)]

    def allocator(self) -> Allocator:
        return Allocator(
            self.features, AllocatedState(), [], [], CelSelectorEngine(), share_ids=lambda: "x"
        )

    def state(self) -> AllocatedState:
        return AllocatedState()

    async def filter(
        self, attempt: Attempt, *, every_fit: bool = False
    ) -> tuple[CycleResult, NodeFit | None] | None:
        name = attempt.pod.metadata.name or ""
        if name in self.broken:
            raise RuntimeError("the API went away")
        if name in self.gave_way:
            return None
        only = attempt.pod.spec.node_selector.get("only")
        need = pod_requests(attempt.pod)[GPU]
        fits, failures = [], {}
        for n in attempt.nodes:
            here = n.metadata.name or ""
            free = self.capacity[here] - attempt.usage[here].requests.get(GPU, Decimal(0))
            if only not in (None, here):
                failures[here] = "node(s) didn't match Pod's node affinity/selector"
            elif free < need:
                failures[here] = f"Insufficient {GPU}"
            else:
                fits.append(NodeFit(here, {}, Score(int(free), 0, 0, here)))
        fits.sort(key=lambda f: f.score.key())  # most free first
        result = CycleResult(tuple(fits), failures, {})
        return result, result.chosen

    def assume(self, attempt: Attempt, fit: NodeFit) -> Taken:
        self.used[fit.node] += 1
        taken = Taken(attempt.key, fit, self)
        self.assumed.append(taken)
        return taken

    def began(self, key: ObjectKey) -> None:
        self.started.append(key.name)

    def monotonic(self) -> float:
        return 0.0


async def cycle_of(
    slots: Slots, group: PodGroup, order: Sequence[Pod], placed_before: int
) -> Cycle[Taken]:
    """The cycle as the scheduler runs it by default (--gang-search on)."""
    return await run(slots, group, order, placed_before, gang_search=True, search_timeout=10.0)


def members(*names: str, **kwargs: Any) -> list[Pod]:
    return ordered([pod(n, **kwargs) for n in names], {})


def nodes_of(taken: Sequence[Taken]) -> dict[str, str]:
    return {t.key.name: t.fit.node for t in taken}


# --- the cycle ---------------------------------------------------------------------------


async def test_a_gang_that_fits_is_assumed_pod_by_pod_each_seeing_the_last() -> None:
    slots = Slots({"n1": 2, "n2": 2})
    cycle = await cycle_of(slots, gang(4), members("a", "b", "c", "d"), 0)
    assert cycle.succeeded
    assert cycle.greedy is None, "the first pass placed it"
    assert nodes_of(cycle.placement.assumed) == {"a": "n1", "b": "n2", "c": "n1", "d": "n2"}
    assert slots.used == {"n1": 2, "n2": 2}, "still assumed: the host binds them"
    assert slots.started == ["a", "b", "c", "d"]


async def test_a_gang_one_slot_short_keeps_nothing_and_each_pod_is_told() -> None:
    slots = Slots({"n1": 2, "n2": 2})
    cycle = await cycle_of(slots, gang(5), members("a", "b", "c", "d", "e"), 0)
    assert not cycle.succeeded
    assert slots.used == {"n1": 0, "n2": 0}, "every assumption undone"
    assert cycle.placement.assumed == []
    message, told = cycle.told([ObjectKey("ns", n) for n in "abcde"])
    assert message == (
        "pod group is unschedulable, minCount (5) cannot be satisfied: 4 scheduled, 0 remaining"
    )
    assert told[ObjectKey("ns", "a")] == message
    assert told[ObjectKey("ns", "e")] == f"0/2 nodes are available: 2 Insufficient {GPU}."
    said = f"{group_preemption.PREFIX}{NO_VICTIMS}"
    with_preemption, _ = cycle.told([ObjectKey("ns", "a")], said)
    assert with_preemption == f"{message}, {said}"
    assert condition(with_preemption).startswith("minCount (5) cannot be satisfied")


async def test_the_pass_stops_once_min_count_is_out_of_reach() -> None:
    slots = Slots({"n1": 1})
    placement = await place(slots, gang(3), members("a", "b", "c"), 0)
    assert placement.evaluated == [ObjectKey("ns", "a"), ObjectKey("ns", "b")]
    assert placement.remaining == 1, "c was not tried"
    placement.undo()
    assert slots.used == {"n1": 0}


async def test_pods_placed_before_count_toward_min_count() -> None:
    slots = Slots({"n1": 1})
    cycle = await cycle_of(slots, gang(3), members("c"), 2)
    assert cycle.succeeded
    assert nodes_of(cycle.placement.assumed) == {"c": "n1"}


async def test_a_pod_not_ready_makes_the_whole_group_wait_with_nothing_assumed() -> None:
    slots = Slots({"n1": 4})
    slots.waiting.add("b")
    cycle = await cycle_of(slots, gang(3), members("a", "b", "c"), 0)
    assert cycle.verdict is None
    assert cycle.placement.waiting is not None
    waiting, prepared = cycle.placement.waiting
    assert (waiting.metadata.name, prepared) == ("b", Wait("its claims are not there yet"))
    assert slots.used == {"n1": 0}


async def test_a_pod_that_gave_its_turn_away_fits_nowhere_this_cycle() -> None:
    slots = Slots({"n1": 4})
    slots.gave_way.add("b")
    cycle = await cycle_of(slots, gang(1), members("a", "b"), 0)
    assert cycle.succeeded
    assert cycle.placement.failed == {ObjectKey("ns", "b"): GAVE_WAY}


async def test_an_error_midway_undoes_what_the_cycle_assumed() -> None:
    slots = Slots({"n1": 4})
    slots.broken.add("c")
    with pytest.raises(RuntimeError):
        await cycle_of(slots, gang(3), members("a", "b", "c"), 0)
    assert slots.used == {"n1": 0}


async def test_the_search_places_a_gang_the_first_pass_does_not() -> None:
    """a may go anywhere and takes the roomier n1 first; b fits on n1 only. The search moves a
    to n2 (the next node that fits it) and places both."""
    slots = Slots({"n1": 2, "n2": 1})
    slots.used["n1"] = 1
    order = [pod("a"), pod("b", only="n1")]
    greedy = await run(slots, gang(2), order, 0, gang_search=False, search_timeout=10.0)
    assert not greedy.succeeded
    cycle = await cycle_of(slots, gang(2), order, 0)
    assert cycle.succeeded
    assert greedy.verdict is not None
    assert cycle.greedy == greedy.verdict, "what the first pass said"
    assert nodes_of(cycle.placement.assumed) == {"a": "n2", "b": "n1"}
    assert cycle.placement.failed == {}


# --- its preemption ----------------------------------------------------------------------


def low(name: str, on: str, priority: int = 1, **kwargs: Any) -> Pod:
    return pod(name, priority=priority, on=on, group=None, **kwargs)


def lower(bound: Sequence[Pod], priority: int = 10) -> dict[str, list[RunningPod]]:
    return lower_priority_pods(bound, priority, {}, None, lambda p: ())


async def test_every_lower_priority_pod_in_the_way_is_a_victim_and_each_pod_nominated() -> None:
    bound = [low("low-1", "n1"), low("low-2", "n2")]
    slots = Slots({"n1": 1, "n2": 1}, bound)
    order = members("a", "b", priority=10)
    decided = await preempt(
        slots,
        gang(2),
        order,
        0,
        classes={},
        policy="pods",
        victims_gone=False,
        lower=lower(bound),
        now=NOW,
    )
    assert decided.message == "found a placement for podgroup, preempting 2 victims"
    assert sorted(v.key for v in decided.evicted) == ["ns/low-1", "ns/low-2"]
    assert {k.name: f.node for k, f in decided.fits.items()} == {"a": "n1", "b": "n2"}
    assert slots.used == {"n1": 1, "n2": 1}, "the trials assumed nothing that stays"
    assert slots.started == [], "a trial is no attempt of the pods"


async def test_units_the_placement_survives_are_put_back_most_important_first() -> None:
    """n1 has two slots, both held; the trial without victims proposes n1 for the gang's one
    pod. mid goes back first (more important) and the pod still fits; low then cannot: one
    victim. far runs on no proposed node: back without a trial."""
    bound = [low("low", "n1"), low("mid", "n1", priority=5), low("far", "n2")]
    slots = Slots({"n1": 2, "n2": 1}, bound)
    units = units_of([r for pods in lower(bound).values() for r in pods])
    chosen = await select_victims(slots, gang(1), members("a", priority=10), 0, units, [], NOW)
    assert not isinstance(chosen, str)
    victims, fits = chosen
    assert [u.key for u in victims] == ["ns/low"]
    assert {k.name: f.node for k, f in fits.items()} == {"a": "n1"}


async def test_a_gang_that_fits_only_partly_even_without_victims_evicts_nobody() -> None:
    bound = [low("low-1", "n1")]
    slots = Slots({"n1": 1}, bound)
    decided = await preempt(
        slots,
        gang(2),
        members("a", "b", priority=10),
        0,
        classes={},
        policy="pods",
        victims_gone=False,
        lower=lower(bound),
        now=NOW,
    )
    assert decided.victims == ()
    assert decided.clear, "the pods' nominations go"
    assert decided.message.startswith("pod group is unschedulable, minCount (2) cannot be")


async def test_preemption_says_why_not_before_looking_for_victims() -> None:
    bound = [low("low-1", "n1", deleting=True)]
    slots = Slots({"n1": 1}, bound)
    order = members("a", priority=10)
    common: dict[str, Any] = {"classes": {}, "lower": lower(bound), "now": NOW}
    never = await preempt(
        slots,
        gang(1),
        members("a", priority=10, never=True),
        0,
        policy="pods",
        victims_gone=False,
        **common,
    )
    assert never.message == NEVER
    policy = await preempt(
        slots,
        gang(1, preemptionPolicy="Never"),
        order,
        0,
        policy="group",
        victims_gone=False,
        **common,
    )
    assert policy.message == NEVER, "the PodGroup's own policy, with the gate on"
    gone = await preempt(slots, gang(1), order, 0, policy="pods", victims_gone=True, **common)
    assert (gone.message, gone.release) == (RELEASING, True)
    evicting = await preempt(
        slots,
        gang(1),
        order,
        0,
        policy="pods",
        victims_gone=False,
        evicting={key_of(order[0])},
        **common,
    )
    assert evicting.message == ONGOING
    nobody = await preempt(
        Slots({"n1": 0}),
        gang(1),
        order,
        0,
        policy="pods",
        victims_gone=False,
        classes={},
        lower={},
        now=NOW,
    )
    assert (nobody.message, nobody.clear) == (NO_VICTIMS, True)


def test_a_trial_frees_the_victims_node_usage_and_counts_what_it_assumed() -> None:
    victim = RunningPod(low("low-1", "n1"), 1)
    trial = Trial.of(units_of([victim]), AllocatedState(), Features())
    slots = Slots({"n1": 1}, [victim.pod])
    attempt = trial.attempt(slots.snapshot(Ready(pod("a"), ())))
    assert attempt.what_if
    assert attempt.usage["n1"] == NodeUsage({GPU: Decimal(0)}, 0)
    trial.took(NodeFit("n1", {}, Score(0, 0, 0, "n1")))
    assert len(trial.assumed) == 1, "the next pod's state holds what this one took"


# --- written once --------------------------------------------------------------------------

#: The steps of the group's cycle and of its preemption: neither host may take one itself.
GROUP_STEPS = {
    "place",
    "outcome",
    "cannot_be_satisfied",
    "stranded_group_claims",
    "pod_message",
    "search",
    "variants",
    "restricted",
    "select_victims",
    "preempts",
    "ongoing",
    "units_of",
    "more_important_units",
    "split_by_budget",
    "touches",
    "found",
    "Trial",
    "Removed",
    "run",
    "run_in_domains",
    "domains",
    "best",
    "short_of",
    "free_devices",
}


def test_the_scheduler_and_simulate_run_one_group_cycle_and_repeat_none_of_it() -> None:
    """Both hosts call the cycle, its preemption and its messages, and none of their steps;
    the lower-priority pods (the victims' candidates) are collected by one function for the
    single pod's preemption and the group's, in the scheduler and in simulate."""
    for module in (scheduler_groups, simulate_group):
        calls = _calls(module)
        assert {"run_group", "preempt", "told"} <= calls, module.__name__
        assert not calls & GROUP_STEPS, (module.__name__, calls & GROUP_STEPS)
    assert vars(scheduler_groups)["group_cycle"] is vars(simulate_group)["group_cycle"]
    for module in (preemptor, engine):
        calls = _calls(module)
        assert "lower_priority_pods" in calls, module.__name__
        assert "running_pod" not in calls, module.__name__


# --- topology-constrained groups (TopologyAwareWorkloadScheduling) ----------------------------

RACK = "rack"
#: Two racks of two nodes, two GPU slots each.
TWO_RACKS = {"n1": {RACK: "a"}, "n2": {RACK: "a"}, "n3": {RACK: "b"}, "n4": {RACK: "b"}}
V137_RULES = TopologyRules.of(Release(1, 37), 0)


def racked(bound: Sequence[Pod] = ()) -> Slots:
    return Slots(dict.fromkeys(TWO_RACKS, 2), bound, TWO_RACKS)


async def in_domains(slots: Slots, group: PodGroup, order: Sequence[Pod]) -> Cycle[Taken]:
    placements = domains(RACK, slots.nodes(), {}, V137_RULES)
    return await run_in_domains(
        slots, group, order, 0, placements, V137_RULES, gang_search=True, search_timeout=10.0
    )


async def test_each_rack_is_tried_undone_and_the_chosen_one_assumed_again() -> None:
    slots = racked([pod("busy", on="n1", group=None)])
    cycle = await in_domains(slots, gang(4), members("a", "b", "c", "d"))
    assert cycle.succeeded
    assert cycle.domain == "b", "rack a has three slots left"
    assert [(t.domain.name, t.pods) for t in cycle.domains] == [("a", None), ("b", 4)]
    assert set(nodes_of(cycle.placement.assumed).values()) == {"n3", "n4"}
    assert slots.used == {"n1": 1, "n2": 0, "n3": 2, "n4": 2}, "rack a's trial left nothing"


async def test_no_rack_holds_the_gang_nothing_stays_and_the_first_racks_reasons_are_told() -> None:
    slots = racked()
    cycle = await in_domains(slots, gang(5), members("a", "b", "c", "d", "e"))
    assert not cycle.succeeded
    assert slots.used == dict.fromkeys(TWO_RACKS, 0)
    message, told = cycle.told([key_of(p) for p in members("a", "b", "c", "d", "e")])
    # 1.37: the group's status says "pod group is unschedulable" (its error) before the
    # placements' reason, and each pod's copy says it once more.
    assert message == (
        "pod group is unschedulable, pod group is unschedulable, 0/2 placements are available, "
        "first placement status: minCount (5) cannot be satisfied: 4 scheduled, 0 remaining"
    )
    assert condition(message).startswith("pod group is unschedulable, 0/2 placements")
    assert told[ObjectKey("ns", "e")] == "0/2 nodes are available: 2 Insufficient example.com/gpu."


async def test_group_preemption_searches_the_racks_for_the_least_important_victims() -> None:
    """Each rack is full but one slot; the gang of three must evict two pods in either. Rack
    a's victims are of priority 5, rack b's of priority 1: rack b's go (upstream's
    DynamicResources refuses to preempt for a topology-constrained group)."""
    bound = [
        low("a-1", "n1", priority=5),
        low("a-2", "n1", priority=5),
        low("a-3", "n2", priority=5),
        low("b-1", "n3", priority=1),
        low("b-2", "n3", priority=1),
        low("b-3", "n4", priority=1),
    ]
    slots = racked(bound)
    order = members("x", "y", "z", priority=10)
    decided = await preempt(
        slots,
        gang(3),
        order,
        0,
        classes={},
        policy="pods",
        victims_gone=False,
        lower=lower(bound),
        now=NOW,
        placements=domains(RACK, slots.nodes(), {}, V137_RULES),
    )
    assert decided.message == "found a placement for podgroup, preempting 2 victims"
    assert {v.key.split("/")[1][0] for v in decided.evicted} == {"b"}
    assert {f.node for f in decided.fits.values()} <= {"n3", "n4"}
    # Without the racks the cheapest victims anywhere go, across both racks.
    anywhere = await preempt(
        slots,
        gang(3),
        order,
        0,
        classes={},
        policy="pods",
        victims_gone=False,
        lower=lower(bound),
        now=NOW,
    )
    assert anywhere.victims


async def test_1_38_tries_the_nominated_rack_first_and_alone_when_the_group_fits_there() -> None:
    """1.38's nominatedPlacement: the one rack holding the pods' nominated node is tried
    first, and when the group fits there no other rack is tried; 1.37 tries every rack."""
    rules = TopologyRules.of(Release(1, 38), 100)
    slots = racked()
    placements = domains(RACK, slots.nodes(), {}, rules)
    cycle = await run_in_domains(
        slots,
        gang(2),
        members("a", "b"),
        0,
        placements,
        rules,
        nominated={"n3"},
        gang_search=True,
        search_timeout=10.0,
    )
    assert cycle.domain == "b"
    assert [t.domain.name for t in cycle.domains] == ["b"], "rack a is never tried"
    everything = await in_domains(racked(), gang(2), members("a", "b"))
    assert [t.domain.name for t in everything.domains] == ["a", "b"]


async def test_the_gang_search_runs_inside_the_rack_it_places_the_gang_in() -> None:
    """Beyond upstream (which has no gang search): in rack b, a takes the roomier n3 first
    and b (n3 only) finds no room; the search inside the rack moves a to n4. Without the
    search no rack holds the gang."""
    labels = {"n1": {RACK: "a"}, "n3": {RACK: "b"}, "n4": {RACK: "b"}}
    order = [pod("a"), pod("b", only="n3")]

    def slots() -> Slots:
        s = Slots({"n1": 0, "n3": 2, "n4": 1}, (), labels)
        s.used["n3"] = 1
        return s

    async def attempt(search: bool) -> Cycle[Taken]:
        s = slots()
        placements = domains(RACK, s.nodes(), {}, V137_RULES)
        return await run_in_domains(
            s, gang(2), order, 0, placements, V137_RULES, gang_search=search, search_timeout=10.0
        )

    assert not (await attempt(search=False)).succeeded
    cycle = await attempt(search=True)
    assert cycle.succeeded
    assert cycle.domain == "b"
    assert nodes_of(cycle.placement.assumed) == {"a": "n4", "b": "n3"}
