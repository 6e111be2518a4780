"""Trees of pod groups (CompositePodGroup) through ``simulate --pod-group``: the leader's and the
workers' PodGroups under one parent constrained to a rack, on rack a (2 nodes x 2 GPUs) and rack b
(4 nodes x 2 GPUs); the scheduler's tree cycle (``scheduling.composite``), written once."""

from __future__ import annotations

from typing import Any

from operators.api.features import KubernetesVersion, parse_feature_gates, resolve
from operators.api.keys import ObjectKey
from operators.scheduling.profile import Policies
from operators.simulate.engine import Options
from operators.simulate.group import GroupAnswer, group_answer
from operators.simulate.output import group_json, group_table
from operators.simulate.snapshot import Document, Snapshot, Source
from operators.simulate.validate import build
from tests.unit.simulate.test_group import device_class, gpu_slice, template
from tests.unit.simulate.test_topology import NOW, NS, RACK, V137, V138, node

J = dict[str, Any]
WORKERS = ObjectKey(NS, "workers")


def options(version: KubernetesVersion = V137, composite: bool = True) -> Options:
    gates = {
        "GenericWorkload": True,
        "DRAWorkloadResourceClaims": True,
        "TopologyAwareWorkloadScheduling": True,
        "CompositePodGroup": composite,
    }
    return Options(
        feature_gates=parse_feature_gates(gates, version), version=version, policies=Policies()
    )


def tree(workers: int, version: KubernetesVersion = V137) -> list[J]:
    api = "scheduling.k8s.io/v1alpha3" if version == V137 else "scheduling.k8s.io/v1beta1"
    parent: J = {
        "apiVersion": api,
        "kind": "CompositePodGroup",
        "metadata": {"name": "training", "namespace": NS},
        "spec": {
            "workloadRef": {"workloadName": "training", "templateName": "training"},
            "schedulingPolicy": {"gang": {"minGroupCount": 2}},
            "schedulingConstraints": {"topology": [{"key": RACK}]},
        },
    }
    groups = [
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "parentCompositePodGroupName": "training",
                "workloadRef": {"workloadName": "training", "templateName": name},
                "schedulingPolicy": {"gang": {"minCount": count}},
            },
        }
        for name, count in (("leader", 1), ("workers", workers))
    ]
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "schedulerName": "kopf-dra",
                "schedulingGroup": {"podGroupName": group},
                "containers": [{"name": "main", "image": "busybox"}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
            },
        }
        for name, group in [("leader-0", "leader")]
        + [(f"worker-{i}", "workers") for i in range(workers)]
    ]
    nodes = [f"{rack}-{i}" for rack, count in (("a", 2), ("b", 4)) for i in range(count)]
    return [
        *(node(n, n.split("-")[0]) for n in nodes),
        device_class("gpu"),
        *(gpu_slice(n) for n in nodes),
        template("gpu"),
        parent,
        *groups,
        *pods,
    ]


def answer_of(bodies: list[J], version: KubernetesVersion = V137, **kw: Any) -> GroupAnswer:
    opts = options(version, **kw)
    docs = [Document(Source("f.yaml", i), b) for i, b in enumerate(bodies)]
    gates = resolve(opts.feature_gates, version)
    snapshot: Snapshot
    snapshot, problems = build(docs, version=version, strict=True, gates=gates)
    assert problems == []
    return group_answer(snapshot, WORKERS, opts, NOW)


def test_the_tree_is_placed_in_the_one_rack_that_holds_leader_and_workers() -> None:
    answer = answer_of(tree(workers=5))  # six GPUs: rack a has four
    assert answer.outcome == "success", answer
    assert {(m.node or "")[0] for m in answer.members.values()} == {"b"}
    shown = {t.ref: (t.outcome, t.domain) for t in answer.tree}
    assert shown == {
        f"compositepodgroup/{NS}/training": ("fits", "b"),
        f"podgroup/{NS}/leader": ("placed", None),
        f"podgroup/{NS}/workers": ("placed", None),
    }
    assert group_json(answer)["tree"][0]["domain"] == "b"
    assert f"compositepodgroup/{NS}/training: fits in b" in group_table(answer)


def test_no_rack_holds_it_the_pods_are_told_as_the_scheduler_tells_them() -> None:
    answer = answer_of(tree(workers=8))  # nine GPUs: rack b has eight
    assert answer.outcome == "unsatisfiable"
    assert not any(m.node for m in answer.members.values())
    root = answer.tree[0]
    assert root.outcome == "unschedulable"
    assert root.message is not None
    assert "0/2 placements are available" in root.message
    assert "No preemption victims found for incoming preemptor" in (answer.message or "")


def test_1_38_hands_the_ancestors_failure_down_by_name() -> None:
    answer = answer_of(tree(workers=8, version=V138), V138)
    leader = next(t for t in answer.tree if t.ref.endswith("/leader"))
    assert leader.message is not None
    assert leader.message.startswith('ancestor composite pod group "training" is unschedulable')


def test_with_the_gate_off_a_parent_is_refused_as_the_scheduler_refuses_it() -> None:
    bodies = tree(workers=2)
    opts = options(composite=False)
    docs = [
        Document(Source("f.yaml", i), b)
        for i, b in enumerate(bodies)
        if b["kind"] != "CompositePodGroup"
    ]
    # The gate off: the API server (and simulate) drop the parent's name: a PodGroup alone.
    snapshot, _ = build(docs, version=V137, strict=True, gates=resolve(opts.feature_gates, V137))
    answer = group_answer(snapshot, WORKERS, opts, NOW)
    assert answer.outcome == "success"
    assert not answer.tree
