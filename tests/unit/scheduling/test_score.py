"""Scores: NodeOrder's ranking kept across cycles is the one a fresh sort gives; the default
profile's totals on the cases of issue 57 (kube-scheduler's choices)."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.allocator.state import Holding
from operators.api.core import Affinity, ContainerImage, Node, Pod, Volume
from operators.api.features import Release
from operators.api.meta import OwnerReference
from operators.api.storage import PersistentVolumeClaim
from operators.scheduling.cycle import run_cycle
from operators.scheduling.nodes import NodeUsage, UsageTracker
from operators.scheduling.pod_filters import PluginSwitches, PodFilters, pre_filter
from operators.scheduling.preemption import Nomination, with_nominated
from operators.scheduling.score import (
    POLICIES,
    CycleScorer,
    NodeIndex,
    NodeOrder,
    ResourceScorer,
    ScoreKey,
    ScorePolicy,
    Scoring,
    resource_key,
)
from operators.scheduling.snapshot import Storage, peers_from, snapshot_of

from .builders import NS, container, node, pod

HOSTNAME = "kubernetes.io/hostname"

# One step of a cluster's life between two cycles, on node i (of at most six):
# ("usage", i, cpu): a pod lands on node i with cpu (cpu 0: node i's pods leave);
# ("resize", i, cpu): the node is updated (a new object, another allocatable cpu);
# ("remove", i, _) / ("add", i, cpu): it leaves, or joins; ("cycle", i, view): a pod asks
# for i % 3 cpu (another request shape) and is ranked on the tracker's usage seen as ``VIEWS``
# says.
STEPS = st.lists(
    st.tuples(
        st.sampled_from(["usage", "resize", "remove", "add", "cycle"]),
        st.integers(min_value=0, max_value=5),
        st.integers(min_value=0, max_value=4),
    ),
    max_size=40,
)
# How a cycle sees the usage: the tracker's snapshot, with a pod nominated on node-0 or on
# node-1 (an overlaid entry), or a plain copy (no journal: every node compared).
VIEWS = ("snapshot", "nominated-0", "nominated-1", "copy", "snapshot")


def _node(i: int, cpu: int) -> Node:
    return node(f"node-{i}", allocatable={"cpu": str(cpu + 1), "memory": "8Gi", "pods": "10"})


def _scorer(cpu: int, policy: ScorePolicy) -> ResourceScorer:
    containers = [container({"cpu": str(cpu)})] if cpu else []
    return ResourceScorer.of(pod(containers=containers), Scoring(policy=policy))


def _fresh(
    nodes: list[Node], usage: Mapping[str, NodeUsage], scorer: ResourceScorer
) -> list[ScoreKey]:
    return sorted(resource_key(n, usage.get(n.metadata.name or ""), scorer) for n in nodes)


def _view(tracker: UsageTracker, view: str) -> Mapping[str, NodeUsage]:
    snapshot = tracker.snapshot()
    if view.startswith("nominated"):
        nominated = Nomination(f"node-{view[-1]}", 0, Holding(), {"cpu": Decimal(1)})
        return with_nominated(snapshot, [nominated])
    return dict(snapshot) if view == "copy" else snapshot


@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=150, deadline=None)
@given(steps=STEPS)
def test_the_kept_ranking_is_a_fresh_sort(
    policy: ScorePolicy, steps: list[tuple[str, int, int]]
) -> None:
    """Whatever changed between cycles, and however a cycle sees the usage (only the nodes
    the tracker's journal names compared, or every node), the ranking is a fresh sort's."""
    order = NodeOrder(shapes=2)  # fewer shapes than requests: evicted rankings come back
    by_name = {f"node-{i}": _node(i, 3) for i in range(4)}
    tracker = UsageTracker()
    nodes = list(by_name.values())
    for n, (step, i, cpu) in enumerate(steps):
        name = f"node-{i}"
        if step == "usage":
            if cpu:
                tracker.assume(f"pod-{n}", (name, {"cpu": Decimal(cpu)}, (cpu * 1000, 0)))
            else:
                for key in [f"pod-{m}" for m in range(n) if tracker.node_of(f"pod-{m}") == name]:
                    tracker.forget(key)
        elif step == "resize" and name in by_name:
            by_name[name] = _node(i, cpu)
            nodes = list(by_name.values())  # a node's change lists the kind anew
        elif step == "remove":
            by_name.pop(name, None)
            nodes = list(by_name.values())
        elif step == "add" and name not in by_name:
            by_name[name] = _node(i, cpu)
            nodes = list(by_name.values())
        scorer = _scorer(i % 3 if step == "cycle" else 0, policy)
        usage = _view(tracker, VIEWS[cpu] if step == "cycle" else "snapshot")
        keys, ranked = order.ranked(nodes, usage, scorer)
        assert keys == _fresh(nodes, usage, scorer)
        assert [n.metadata.name for n in ranked] == [k[1] for k in keys]
        assert all(by_name[n.metadata.name or ""] is n for n in ranked)


def test_a_journal_trimmed_past_a_ranking_is_a_full_comparison() -> None:
    """A ranking older than what the journal keeps compares every node, and misses nothing."""
    tracker = UsageTracker()
    tracker.journal.KEEP = 2
    nodes = [_node(i, 3) for i in range(3)]
    order = NodeOrder()
    scorer = _scorer(0, "least-allocated")
    order.ranked(nodes, tracker.snapshot(), scorer)
    for n in range(6):  # node-2 changes first, then more than the journal keeps
        tracker.assume(f"pod-{n}", (f"node-{2 - n // 3}", {"cpu": Decimal(1)}, (1000, 0)))
    snapshot = tracker.snapshot()
    assert tracker.journal.since(0, snapshot.version) is None
    keys, _ = order.ranked(nodes, snapshot, scorer)
    assert keys == _fresh(nodes, snapshot, scorer)
    assert keys[-1][1] == "node-2"  # three pods on node-2 and node-1: node-2 sorts last


def test_a_usage_snapshot_is_read_only() -> None:
    """The ranking trusts a snapshot's journal: writing into one would go unseen."""
    snapshot = UsageTracker().snapshot()
    with pytest.raises(TypeError, match="read-only"):
        snapshot["node-0"] = NodeUsage()
    with pytest.raises(TypeError, match="read-only"):
        snapshot.update({"node-0": NodeUsage()})
    assert dict(snapshot) == {}


def test_an_unchanged_cluster_is_not_ranked_again() -> None:
    nodes = [_node(i, 3) for i in range(3)]
    order = NodeOrder()
    scorer = _scorer(0, "least-allocated")
    first = order.ranked(nodes, {}, scorer)
    assert order.ranked(nodes, {}, scorer) == first
    basis = dict(order._rankings[scorer].basis)
    order.ranked(nodes, {"node-1": NodeUsage({"cpu": Decimal(1)}, 1)}, scorer)
    after = order._rankings[scorer].basis
    # Only node-1's key was computed again: the others keep the very same entries.
    assert [after[n] is basis[n] for n in ("node-0", "node-1", "node-2")] == [True, False, True]


def _prefers_a(weight: int) -> Affinity:
    return Affinity.model_validate(
        {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": weight,
                        "preference": {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/hostname",
                                    "operator": "In",
                                    "values": ["wp-a"],
                                }
                            ]
                        },
                    }
                ]
            }
        }
    )


def test_a_preferred_node_beats_two_small_pods_as_with_kube_scheduler() -> None:
    """Issue 57's case: equal nodes, two small pods running on wp-a, a pod preferring wp-a
    (weight 100): kube-scheduler 1.37.2 binds it to wp-a (NodeAffinity 100 x 2 against Fit's
    few points), and so does kopf-dra."""
    nodes = [
        node(
            name,
            allocatable={"cpu": "8", "memory": "32Gi", "pods": "110"},
            labels={"kubernetes.io/hostname": name},
        )
        for name in ("wp-a", "wp-b")
    ]
    usage = {"wp-a": NodeUsage({"cpu": Decimal("0.5"), "memory": Decimal(2**30)}, 2)}
    p = pod(containers=[container({"cpu": "100m", "memory": "128Mi"})])
    p.spec.affinity = _prefers_a(100)
    got = run_cycle(p, [], nodes, usage, None)
    assert got.chosen is not None
    assert got.chosen.node == "wp-a"
    by_node = {f.node: f.score.plugins for f in got.fits}
    assert (by_node["wp-a"]["NodeAffinity"], by_node["wp-b"]["NodeAffinity"]) == (100, 0)
    assert by_node["wp-a"]["NodeResourcesFit"] < by_node["wp-b"]["NodeResourcesFit"]
    p.spec.affinity = None
    got = run_cycle(p, [], nodes, usage, None)
    assert got.chosen is not None
    assert got.chosen.node == "wp-b"  # without the preference, the emptier node


@pytest.mark.parametrize(
    ("release", "weights"),
    [(36, 3 + 2 + 1 + 1 + 2 + 2 + 2 + 1 + 1), (37, 15), (38, 15)],
)
def test_the_default_profiles_weights(release: int, weights: int) -> None:
    """TaintToleration 3; NodeAffinity, PodTopologySpread, InterPodAffinity, DynamicResources
    2; NodeResourcesFit, VolumeBinding, BalancedAllocation, ImageLocality 1."""
    scoring = Scoring(ready_devices=0, plugins=PluginSwitches(release=Release(1, release)))
    assert sum(scoring.weights.values()) == weights


def _replica(name: str, owner: str | None) -> Pod:
    p = pod(name, uid=name, containers=[container({"cpu": "100m"})])
    p.metadata.labels = {"app": "web"}
    if owner is not None:
        p.metadata.owner_references = [
            OwnerReference(
                api_version="apps/v1", kind="ReplicaSet", name=owner, uid="rs", controller=True
            )
        ]
    return p


@pytest.mark.parametrize(("owner", "chosen"), [("web-1", "node-b"), (None, "node-a")])
def test_a_replica_sets_pods_spread_by_the_system_defaults(owner: str | None, chosen: str) -> None:
    """PodTopologySpread's system-default constraints (ScheduleAnyway, hostname and zone) for
    a pod without its own: two of its ReplicaSet's pods run on node-a, so node-b scores
    higher; a pod that no controller owns (and no Service selects) is not spread, and the tie
    goes to node-a by name."""
    nodes = [
        node(n, allocatable={"cpu": "8", "memory": "32Gi", "pods": "110"}, labels={HOSTNAME: n})
        for n in ("node-a", "node-b")
    ]
    placed = [("node-a", _replica(f"web-{i}", "web-1")) for i in range(2)]
    replica_set = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web-1", "namespace": NS},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
    }
    snapshot = snapshot_of(nodes, placed, peers_of=peers_from(replica_sets=[replica_set]))
    incoming = _replica("web-new", owner)
    filters = pre_filter(incoming, snapshot, PluginSwitches(release=Release(1, 37)))
    assert isinstance(filters, PodFilters)
    # the two placed pods' requests, as the scheduler's usage counts them
    usage = {"node-a": NodeUsage({"cpu": Decimal("0.2")}, 2)}
    got = run_cycle(incoming, [], nodes, usage, None, filters=filters, best_only=True)
    assert got.chosen is not None
    assert got.chosen.node == chosen
    spread = {f.node: f.score.plugins.get("PodTopologySpread") for f in got.fits}
    if owner is not None:
        # raw: each node's matching pods x log(2 nodes + 2) plus maxSkew - 1, per constraint
        # (the zone one ignored: no node has a zone); the fewest matching pods score 100
        assert spread == {"node-a": 40, "node-b": 100}
    else:
        assert set(spread.values()) == {None}  # no constraints: the plugin skips


@pytest.mark.parametrize(("volume_name", "headroom"), [("pv-1", 100), (None, 200)])
def test_only_a_claim_still_to_bind_leaves_volume_binding_room_to_score(
    volume_name: str | None, headroom: int
) -> None:
    """A pod whose claims are bound scores 0 on VolumeBinding everywhere: best-first search
    must not wait for a node to score more (it visited every node for each such pod)."""
    claim = PersistentVolumeClaim.model_validate(
        {"metadata": {"name": "data", "namespace": NS}, "spec": {"volumeName": volume_name}}
    )
    snapshot = snapshot_of([], [], storage=Storage(claims={f"{NS}/data": claim}))
    p = pod()
    p.spec.volumes = [
        Volume.model_validate({"name": "d", "persistentVolumeClaim": {"claimName": "data"}})
    ]
    scoring = Scoring()
    scorer = CycleScorer(p, [], scoring, snapshot, NodeIndex.of([]), ResourceScorer.of(p, scoring))
    assert scorer.headroom == headroom  # ReadyDevices' 100, and VolumeBinding's when unbound


def test_the_node_with_the_pods_image_wins_and_best_first_finds_it() -> None:
    """ImageLocality: a 500MB image on node-b only (the pod's), beside node-a's smaller copy
    of another image: node-b scores more, and best-first search, bounded by the largest copy
    of each image, still finds it although node-a comes first by name."""
    nodes = []
    for name, image in (("node-a", "other:1"), ("node-b", "trainer:1"), ("node-c", "other:1")):
        n = node(name, allocatable={"cpu": "8", "memory": "32Gi", "pods": "110"})
        n.status.images = [ContainerImage(names=[image], size_bytes=500 * 2**20)]
        nodes.append(n)
    p = pod(containers=[container({"cpu": "100m"}) | {"image": "trainer:1"}])
    order = NodeOrder()
    best = run_cycle(p, [], nodes, {}, None, best_only=True, node_order=order)
    full = run_cycle(p, [], nodes, {}, None)
    assert best.chosen is not None
    assert full.chosen is not None
    assert best.chosen.node == full.chosen.node == "node-b"
    assert best.chosen.score == full.chosen.score
    assert full.chosen.score.plugins["ImageLocality"] > 0
