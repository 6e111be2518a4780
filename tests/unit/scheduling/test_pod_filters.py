"""The default profile's other plugins in the cycle: each at its place in upstream's filter
order, a PreFilter rejection as the pod's message, and preemption's trials without victims."""

from __future__ import annotations

import datetime
from decimal import Decimal

from operators.allocator import Features
from operators.allocator.features import V1_37
from operators.api.core import Affinity, Pod
from operators.scheduling import preemption
from operators.scheduling.cycle import run_cycle, unschedulable_message
from operators.scheduling.nodes import NodeUsage
from operators.scheduling.plugins import Unresolvable
from operators.scheduling.pod_filters import Check, PluginSwitches, PodFilters, pre_filter
from operators.scheduling.snapshot import Snapshot, snapshot_of, without_pods
from tests.unit.scheduling.builders import container, node, pod

SWITCHES = PluginSwitches(release=V1_37)
NOW = datetime.datetime(2026, 12, 5, tzinfo=datetime.UTC)


def _refuse(name: str, reason: str, *, resolvable: bool = True) -> Check:
    return Check(
        "Test", lambda n: reason if n.metadata.name == name else None, lambda _: resolvable
    )


def _filters(
    *,
    before: tuple[Check, ...] = (),
    after: tuple[Check, ...] = (),
    devices: tuple[Check, ...] = (),
) -> PodFilters:
    return PodFilters(pod(), Snapshot(), SWITCHES, before, after, devices)


def test_nothing_to_check_costs_nothing() -> None:
    got = pre_filter(pod(), snapshot_of([node("a")], []), SWITCHES)
    assert isinstance(got, PodFilters)
    assert got.empty


def test_each_plugin_refuses_at_its_place_in_upstreams_order() -> None:
    """NodePorts before NodeResourcesFit, the volume and affinity plugins after it, and
    NodeDeclaredFeatures after DynamicResources: a node's reason is the first that refuses."""
    nodes = [node("a", allocatable={"cpu": "1", "pods": "10"}), node("b"), node("c")]
    filters = _filters(
        before=(_refuse("a", "ports"),),
        after=(_refuse("a", "volumes"), _refuse("b", "volumes")),
        devices=(_refuse("b", "features"), _refuse("c", "features")),
    )
    big = pod(containers=[container({"cpu": "2"})])
    got = run_cycle(big, [], nodes, {}, None, filters=filters)
    assert got.failures == {"a": "ports", "b": "volumes", "c": "features"}
    without_ports = _filters(after=(_refuse("a", "volumes"),))
    got = run_cycle(big, [], nodes[:1], {}, None, filters=without_ports)
    assert got.failures == {"a": "Insufficient cpu"}


def test_a_prefilter_rejection_is_the_pods_message_and_no_node_is_tried() -> None:
    got = run_cycle(pod(), [], [node("a"), node("b")], {}, None, filters=Unresolvable("no way"))
    assert got.fits == ()
    assert got.failures == {}
    assert unschedulable_message(2, got) == "0/2 nodes are available: no way."


def test_a_node_lacking_a_declared_feature_is_refused_after_the_devices() -> None:
    wants = Pod.load(
        {
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {
                "containers": [
                    {"name": "c", "restartPolicyRules": [{"action": "RestartAllContainers"}]}
                ]
            },
        }
    )
    nodes = [node("a"), node("b", declared_features=["RestartAllContainersOnContainerExits"])]
    filters = pre_filter(wants, snapshot_of(nodes, []), SWITCHES)
    got = run_cycle(wants, [], nodes, {}, None, filters=filters)
    assert got.failures == {"a": "node(s) didn't match Pod's required features"}
    assert [f.node for f in got.fits] == ["b"]


def _running(name: str, uid: str, node_name: str, priority: int) -> preemption.RunningPod:
    p = pod(name, uid=uid, containers=[container({"cpu": "1"})])
    p.spec.node_name = node_name
    return preemption.RunningPod(p, priority)


def test_without_takes_the_victims_out_of_the_snapshot() -> None:
    a, b = node("a"), node("b")
    x, y = _running("x", "ux", "a", 0).pod, _running("y", "uy", "a", 0).pod
    snapshot = snapshot_of([a, b], [("a", x), ("a", y)])
    gone = without_pods(snapshot, ["ux"])
    assert [p.metadata.name for p in gone.pods_on("a")] == ["y"]
    assert [p.metadata.name for p in snapshot.pods_on("a")] == ["x", "y"]


def _preempt(
    filters: PodFilters | Unresolvable,
    wants: Pod | None = None,
    victim: preemption.RunningPod | None = None,
) -> preemption.Preemption:
    """A pod of priority 100 against node "a", where a pod of priority 0 runs."""
    a = node("a", allocatable={"cpu": "8", "pods": "10"})
    return preemption.preempt(
        wants or pod("high"),
        priority=preemption.PodPriority(100, True),
        claims=[],
        nodes=[a],
        usage={"a": NodeUsage({"cpu": Decimal(1)}, 1)},
        on_node={"a": [victim or _running("v", "uv", "a", 0)]},
        allocator=None,
        budgets=[],
        now=NOW,
        features=Features(),
        filters=filters,
    )


def test_preemption_is_not_helpful_where_a_refusal_is_for_good() -> None:
    """A node refused for good (a volume's node affinity, say) or a pod its PreFilter
    rejected is not helped by evicting anybody."""
    for_good = _filters(before=(_refuse("a", "volume node affinity", resolvable=False),))
    found = _preempt(for_good)
    assert found.candidate is None
    assert found.failures == {"a": preemption.NOT_HELPFUL}
    assert _preempt(Unresolvable("no")).failures == {"a": preemption.NOT_HELPFUL}


def _with_port(name: str, uid: str, port: int) -> Pod:
    return Pod.load(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": uid},
            "spec": {
                "containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": port}]}]
            },
        }
    )


def test_evicting_the_pod_holding_a_host_port_frees_it() -> None:
    """NodePorts through preemption: the victim's port is free in the trial without it."""
    a = node("a", allocatable={"cpu": "8", "pods": "10"})
    holder = _with_port("holder", "uh", 8080)
    holder.spec.node_name = "a"
    wants = _with_port("high", "u-high", 8080)
    filters = pre_filter(wants, snapshot_of([a], [("a", holder)]), SWITCHES)
    assert isinstance(filters, PodFilters)
    got = run_cycle(wants, [], [a], {"a": NodeUsage({}, 1)}, None, filters=filters)
    assert got.failures == {"a": "node(s) didn't have free ports for the requested pod ports"}
    found = _preempt(filters, wants, preemption.RunningPod(holder, 0))
    assert found.candidate is not None
    assert [v.key for v in found.candidate.victims] == ["ns/holder"]


def test_a_node_is_judged_by_its_first_refusal_as_upstream() -> None:
    """Refused for its port first (which eviction may lift), the node is a preemption
    candidate even though pod affinity, after, refuses it too (upstream's node status is the
    first plugin's): no victims found there, rather than not helpful."""
    a, b = node("a", labels={"h": "a"}), node("b", labels={"h": "b"})
    holder = _with_port("holder", "uh", 8080)
    holder.spec.node_name = "a"
    friend = Pod.load(
        {"metadata": {"name": "x", "namespace": "ns", "uid": "ux", "labels": {"app": "x"}}}
    )
    friend.spec.node_name = "b"
    wants = _with_port("high", "u-high", 8080)
    wants.metadata.labels = {"app": "y"}
    wants.spec.affinity = Affinity.load(
        {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "h"}
                ]
            }
        }
    )
    filters = pre_filter(wants, snapshot_of([a, b], [("a", holder), ("b", friend)]), SWITCHES)
    assert isinstance(filters, PodFilters)
    found = _preempt(filters, wants, preemption.RunningPod(holder, 0))
    assert found.candidate is None
    assert found.failures["a"] != preemption.NOT_HELPFUL
