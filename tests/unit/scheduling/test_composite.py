"""A tree of pod groups placed in one cycle (``scheduling.composite``), pure, over the GPU slots
host of ``test_group_cycle``: a CompositePodGroup constrained to one rack with a leader group and
a worker group under it, as upstream's recursive algorithm places them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from operators.allocator import AllocatedState
from operators.api.features import Release
from operators.api.groups import CompositePodGroup, PodGroup
from operators.api.keys import ObjectKey
from operators.scheduling import composite, tree_preemption
from operators.scheduling.attempt import Ready
from operators.scheduling.composite import Composite, Leaf, Settings, TreeCycle
from operators.scheduling.group_preemption import Trial
from operators.scheduling.groups import ordered
from operators.scheduling.topology import TopologyRules
from tests.unit.scheduling.test_group_cycle import (
    NOW,
    RACK,
    TWO_RACKS,
    Slots,
    Taken,
    low,
    lower,
    pod,
)

V137 = TopologyRules.of(Release(1, 37), 0)
V138 = TopologyRules.of(Release(1, 38), 0)


def settings(rules: TopologyRules = V137) -> Settings:
    return Settings(rules, count_devices=True, gang_search=True, search_timeout=10.0)


def composite_group(
    name: str = "train",
    *,
    min_groups: int | None = 2,
    key: str | None = RACK,
    parent: str | None = None,
    **spec: Any,
) -> CompositePodGroup:
    policy = {"gang": {"minGroupCount": min_groups}} if min_groups else {"basic": {}}
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns", "uid": f"{name}-uid"},
        "spec": {
            "schedulingPolicy": policy,
            "workloadRef": {"workloadName": "w"},
            "priority": 10,
            **spec,
        },
    }
    if key:
        body["spec"]["schedulingConstraints"] = {"topology": [{"key": key}]}
    if parent:
        body["spec"]["parentCompositePodGroupName"] = parent
    return CompositePodGroup.load(body)


def group(name: str, min_count: int | None, parent: str = "train", **spec: Any) -> PodGroup:
    policy = {"gang": {"minCount": min_count}} if min_count else {"basic": {}}
    return PodGroup.load(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": f"{name}-uid"},
            "spec": {
                "schedulingPolicy": policy,
                "parentCompositePodGroupName": parent,
                "workloadRef": {"workloadName": "w"},
                "priority": 10,
                **spec,
            },
        }
    )


def leaf(pg: PodGroup, *names: str, placed_on: dict[str, str] | None = None) -> Leaf:
    pods = ordered([pod(n, group=pg.metadata.name, priority=10) for n in names], {})
    on = {ObjectKey("ns", k): v for k, v in (placed_on or {}).items()}
    return Leaf(pg, tuple(pods), on, len(pods) + len(on))


def leader_and_workers(workers: int = 3, **kwargs: Any) -> Composite:
    """A leader (one pod) and ``workers`` workers (a gang of all) under one parent."""
    names = [f"w{i}" for i in range(workers)]
    return Composite(
        composite_group(**kwargs),
        (leaf(group("leader", 1), "l0"), leaf(group("workers", workers), *names)),
    )


async def run(slots: Slots, tree: Composite, rules: TopologyRules = V137) -> TreeCycle[Taken]:
    return await composite.run_tree(slots, tree, settings(rules))


def placed(cycle: TreeCycle[Taken]) -> dict[str, str]:
    return {t.key.name: t.fit.node for _, c in cycle.placed() for t in c.placement.assumed}


def racks(capacity: dict[str, int], bound: Sequence[Any] = ()) -> Slots:
    return Slots(capacity, bound, TWO_RACKS)


async def test_the_tree_goes_to_the_one_rack_that_holds_leader_and_workers() -> None:
    # Rack a has three slots, rack b four: the leader and three workers need four.
    slots = racks({"n1": 2, "n2": 1, "n3": 2, "n4": 2})
    cycle = await run(slots, leader_and_workers())
    assert cycle.succeeded
    assert set(placed(cycle).values()) <= {"n3", "n4"}
    assert len(placed(cycle)) == 4
    root = cycle.outcomes["compositepodgroup/ns/train"]
    assert root.domain == "b"
    assert [name for name, _ in root.domains] == ["a", "b"]
    assert slots.used == {"n1": 0, "n2": 0, "n3": 2, "n4": 2}, "rack a's try left nothing"


async def test_no_rack_holds_the_tree_nothing_stays_and_each_pod_is_told() -> None:
    slots = racks({"n1": 2, "n2": 1, "n3": 1, "n4": 1})
    tree = leader_and_workers()
    cycle = await run(slots, tree)
    assert not cycle.succeeded
    assert slots.used == dict.fromkeys(TWO_RACKS, 0)
    root = cycle.outcomes["compositepodgroup/ns/train"]
    assert root.message == (
        "pod group is unschedulable, pod group is unschedulable, 0/2 placements are "
        "available, first placement status: minCount (2) cannot be satisfied: 1 scheduled, "
        "0 remaining"
    )
    told = composite.told(cycle, V137)
    # The leader fits in rack a: it is given its parent's status; the workers fail on their own.
    assert told[ObjectKey("ns", "l0")].startswith("pod group is unschedulable, 0/2 placements")
    assert "placements are available" in told[ObjectKey("ns", "w0")]
    assert not cycle.placed()


async def test_1_38_names_the_failed_ancestor_and_the_pods_their_own_group() -> None:
    slots = racks({"n1": 2, "n2": 1, "n3": 1, "n4": 1})
    cycle = await run(slots, leader_and_workers(), V138)
    assert not cycle.succeeded
    leader = cycle.outcomes["podgroup/ns/leader"]
    assert leader.inherited == 'ancestor composite pod group "train" is unschedulable'
    told = composite.told(cycle, V138)
    assert told[ObjectKey("ns", "l0")] == 'parent pod group "leader" is unschedulable'
    assert cycle.outcomes["compositepodgroup/ns/train"].message == (
        "pod group is unschedulable, 0/2 placements are available, first placement status: "
        "scheduling policy's minimum threshold (2) cannot be satisfied: 1 scheduled, "
        "1 unschedulable, 0 not-evaluated"
    )


async def test_a_basic_parent_places_the_children_that_fit() -> None:
    slots = racks({"n1": 2, "n2": 1, "n3": 0, "n4": 0})
    tree = leader_and_workers(workers=4, min_groups=None, key=None)
    cycle = await run(slots, tree)
    assert cycle.succeeded
    assert list(placed(cycle)) == ["l0"], "the workers do not fit; the leader is placed"
    told = composite.told(cycle, V137)
    assert "cannot be satisfied" in told[ObjectKey("ns", "w0")]


async def test_the_workers_constraint_is_a_domain_inside_the_parents() -> None:
    """The parent wants one zone, the workers one rack within it."""
    labels = {
        "n1": {"zone": "z1", RACK: "a"},
        "n2": {"zone": "z1", RACK: "b"},
        "n3": {"zone": "z2", RACK: "c"},
        "n4": {"zone": "z2", RACK: "c"},
    }
    slots = Slots({"n1": 2, "n2": 2, "n3": 2, "n4": 2}, (), labels)
    workers = group("workers", 3, schedulingConstraints={"topology": [{"key": RACK}]})
    tree = Composite(
        composite_group(key="zone"),
        (leaf(group("leader", 1), "l0"), leaf(workers, "w0", "w1", "w2")),
    )
    cycle = await run(slots, tree)
    assert cycle.succeeded
    where = placed(cycle)
    assert {where["w0"], where["w1"], where["w2"]} <= {"n3", "n4"}, "rack c, in zone z2"
    assert cycle.outcomes["podgroup/ns/workers"].domain == "c"


async def test_scheduled_pods_fix_the_trees_domain() -> None:
    slots = racks({"n1": 2, "n2": 2, "n3": 2, "n4": 2}, [pod("w0", on="n3", group="workers")])
    names = ["w1", "w2"]
    tree = Composite(
        composite_group(),
        (
            leaf(group("leader", 1), "l0"),
            leaf(group("workers", 3), *names, placed_on={"w0": "n3"}),
        ),
    )
    cycle = await run(slots, tree)
    assert cycle.succeeded
    assert set(placed(cycle).values()) <= {"n3", "n4"}
    assert [n for n, _ in cycle.outcomes["compositepodgroup/ns/train"].domains] == ["b"]


async def test_a_pod_not_ready_makes_the_tree_wait_with_nothing_assumed() -> None:
    slots = racks(dict.fromkeys(TWO_RACKS, 2))
    slots.waiting.add("w1")
    cycle = await run(slots, leader_and_workers())
    assert cycle.waiting is not None
    assert not cycle.succeeded
    assert slots.used == dict.fromkeys(TWO_RACKS, 0)


def test_the_tree_waits_until_enough_children_have_their_pods() -> None:
    workers = group("workers", 3)
    short = Composite(composite_group(), (leaf(group("leader", 1), "l0"), Leaf(workers, (), {}, 2)))
    assert composite.waits(short) == 'waiting for composite pod group "train" tree to meet quorum'
    assert composite.waits(leader_and_workers()) is None


def test_build_orders_children_by_name_and_walks_nested_groups() -> None:
    root = composite_group("root", key=None)
    mid = composite_group("mid", parent="root")
    leaves = {
        ObjectKey("ns", n): leaf(group(n, 1, parent=p), f"{n}-0")
        for n, p in (("b", "root"), ("a", "root"), ("c", "mid"))
    }
    tree = composite.build(root, [root, mid], leaves)
    assert [c.key.name for c in tree.children] == ["a", "b", "mid"]
    assert [c.key.name for c in composite.nodes_of(tree)] == ["root", "a", "b", "mid", "c"]
    groups = {"root": root, "mid": mid}
    assert composite.root_name("mid", groups) == ("root", ["mid", "root"])
    assert composite.root_name("gone", groups) == (None, ["gone"])


@pytest.mark.parametrize(
    ("tree", "said"),
    [
        (
            Composite(composite_group(), (leaf(group("leader", None), "l0"),)),
            'gang parent "compositepodgroup/ns/train" cannot have basic child "podgroup/ns/leader"',
        ),
        (
            Composite(composite_group(), (leaf(group("leader", 1, priority=3), "l0"),)),
            "all pod groups in a hierarchy should have the same priority as the root pod "
            'group\'s priority, got 3 ("podgroup/ns/leader") and 10 '
            '("compositepodgroup/ns/train")',
        ),
    ],
)
def test_1_38_validates_the_hierarchy_group_by_group(tree: Composite, said: str) -> None:
    assert composite.refused(tree, {}, hierarchy=True, gated=False) == said


def test_1_37_validates_every_pod_against_the_roots_priority() -> None:
    tree = Composite(composite_group(priority=5), (leaf(group("leader", 1), "l0"),))
    assert composite.refused(tree, {}, hierarchy=False, gated=False) == (
        "all pods in a single pod group should have the same priority as the pod group's "
        "priority, got 10 and 5"
    )


# --- its preemption (tree_preemption) ------------------------------------------------------------


async def test_a_tree_preempts_the_victims_of_one_rack_and_nominates_its_pods() -> None:
    """Both racks full of pods of priority 1 but one slot in rack a: the tree (priority 10)
    needs four slots in one rack. Every victim taken out, it is placed in rack a; the rack-b
    pods run on no proposed node and stay: rack a's three are evicted."""
    bound = [
        low("a1", "n1"),
        low("a2", "n1"),
        low("a3", "n2"),
        *(low(f"b{i}", n) for i, n in enumerate(("n3", "n3", "n4", "n4"))),
    ]
    slots = racks(dict.fromkeys(TWO_RACKS, 2), bound)
    tree = leader_and_workers()
    cycle = await run(slots, tree)
    assert not cycle.succeeded
    decided = await tree_preemption.preempt(
        slots,
        tree,
        settings(),
        classes={},
        policy="pods",
        victims_gone=False,
        lower=lower(bound),
        now=NOW,
    )
    assert decided.message == "found a placement for podgroup, preempting 3 victims"
    assert sorted(v.key for v in decided.evicted) == ["ns/a1", "ns/a2", "ns/a3"]
    assert {f.node for f in decided.fits.values()} <= {"n1", "n2"}
    assert len(decided.fits) == 4
    assert slots.used == {"n1": 2, "n2": 1, "n3": 2, "n4": 2}, "the trials left nothing"


async def test_a_tree_with_nobody_below_it_finds_no_victims() -> None:
    slots = racks({"n1": 2, "n2": 1, "n3": 1, "n4": 1})
    decided = await tree_preemption.preempt(
        slots,
        leader_and_workers(),
        settings(),
        classes={},
        policy="pods",
        victims_gone=False,
        lower={},
        now=NOW,
    )
    assert decided.message == "No preemption victims found for incoming preemptor"
    assert decided.clear
    assert not decided.victims


async def test_a_trial_placement_undone_leaves_the_trial_too() -> None:
    """A tree tries rack after rack within one trial: what a rack's try assumed and undid must
    not hold devices for the next rack's."""
    slots = racks(dict.fromkeys(TWO_RACKS, 2))
    trial = Trial.of([], AllocatedState(), slots.features)
    host = tree_preemption._TrialHost(slots, trial, None)
    ready = slots.prepare(pod("x", priority=10))
    assert isinstance(ready, Ready)
    attempt = host.snapshot(ready)
    filtered = await slots.filter(attempt)
    assert filtered is not None
    assert filtered[1] is not None
    taken = host.assume(attempt, filtered[1])
    assert len(trial.assumed) == 1
    taken.undo()
    assert trial.assumed == []
    assert slots.used == dict.fromkeys(TWO_RACKS, 0)
