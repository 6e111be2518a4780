"""The pure parts of a pod group's preemption: eligibility, victims taken out of the state."""

from __future__ import annotations

from decimal import Decimal

from operators.allocator import AllocatedState, Features
from operators.api.core import Pod
from operators.api.groups import PodGroup
from operators.scheduling.group_preemption import Removed, found, preempts, touches
from operators.scheduling.nodes import NodeUsage
from operators.scheduling.preemption import RunningPod, terminating_by_preemption, units_of
from tests.unit.scheduling.builders import NS
from tests.unit.scheduling.test_preemption import claim, pod, request


def group(policy: str | None = None) -> PodGroup:
    spec = {"preemptionPolicy": policy} if policy else {}
    return PodGroup.load({"metadata": {"name": "job", "namespace": NS}, "spec": spec})


def never(name: str) -> Pod:
    p = pod(name)
    p.spec.preemption_policy = "Never"
    return p


def test_the_policy_is_the_podgroups_with_the_gate_on_else_any_pods_never() -> None:
    assert preempts(group(), [pod("a"), pod("b")], {}, policy="pods")
    assert not preempts(group(), [pod("a"), never("b")], {}, policy="pods")
    assert preempts(group(), [never("b")], {}, policy="group"), "the PodGroup's, unset"
    assert not preempts(group("Never"), [pod("a")], {}, policy="group")


def test_1_38_takes_the_podgroups_policy_where_set_else_its_pods() -> None:
    assert not preempts(group("Never"), [pod("a")], {}, policy="group-else-pods")
    assert preempts(group("PreemptLowerPriority"), [never("b")], {}, policy="group-else-pods")
    assert not preempts(group(), [never("b")], {}, policy="group-else-pods"), "unset: the pods'"
    assert preempts(group(), [pod("a")], {}, policy="group-else-pods")


def test_removed_victims_free_their_node_usage_and_only_their_claims() -> None:
    mine = claim("mine", request("whole"), on="node-1", devices=["gpu-0"], reserved=["v"])
    shared = claim("shared", request("whole"), on="node-1", devices=["gpu-1"], reserved=["v", "w"])
    victim = RunningPod(pod("v", 1, on="node-1", cpu="2"), 1, (mine, shared))
    removed = Removed.of(units_of([victim]))
    features = Features.all()
    released = removed.released(features)
    assert [sorted(str(d) for d in h.devices) for h in released] == [["drv/node-1/gpu-0"]]
    state = AllocatedState.from_claims([mine, shared], features)
    assert {str(d) for d in removed.state(state, features).devices} == {"drv/node-1/gpu-1"}
    usage = removed.usage({"node-1": NodeUsage({"cpu": Decimal(3)}, 2)})
    assert usage["node-1"] == NodeUsage({"cpu": Decimal(1)}, 1)


def test_a_unit_touches_a_node_where_one_of_its_pods_runs() -> None:
    (unit,) = units_of([RunningPod(pod("v", 1, on="node-1"), 1)])
    assert touches(unit, frozenset({"node-1", "node-2"}))
    assert not touches(unit, frozenset({"node-2"}))


def test_upstreams_words() -> None:
    assert found(3) == "found a placement for podgroup, preempting 3 victims"


def test_a_victim_is_terminating_by_preemption_only_with_the_schedulers_condition() -> None:
    victim = pod("v", 1, on="node-1", deleting=True)
    assert not terminating_by_preemption(victim), "deleted for another reason"
    victim.status.conditions = Pod.load(
        {
            "spec": {"containers": []},
            "status": {
                "conditions": [
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": "PreemptionByScheduler",
                    }
                ]
            },
        }
    ).status.conditions
    assert terminating_by_preemption(victim)
    assert not terminating_by_preemption(pod("w", 1, on="node-1")), "not being deleted"
