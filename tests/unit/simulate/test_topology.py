"""Topology-aware placement of a pod group (TopologyAwareWorkloadScheduling), through ``simulate
--pod-group`` (the scheduler's cycle, written once): a gang of eight with a GPU each and the
group's interconnect, constrained to one rack, on two racks of which only one holds it; as
kube-scheduler 1.37.2 and 1.38 place it, and what kopf-dra does beyond them (a rack ruled out
by its free devices, a shared claim that pins the group where it cannot go released)."""

from __future__ import annotations

import copy
import datetime
from typing import Any

import pytest

from operators.api.features import KubernetesVersion, parse_feature_gates, resolve
from operators.api.fields import drop_disabled
from operators.api.groups import PodGroup
from operators.api.keys import ObjectKey
from operators.kubectl import why
from operators.scheduling.profile import Policies
from operators.simulate.engine import Options
from operators.simulate.group import GroupAnswer, group_answer
from operators.simulate.output import domain_lines, group_json
from operators.simulate.snapshot import Document, Snapshot, Source
from operators.simulate.validate import build
from tests.unit.simulate.test_group import device_class, gpu_slice, template

J = dict[str, Any]

NOW = datetime.datetime(2026, 12, 5, tzinfo=datetime.UTC)
NS = "team-a"
GROUP = ObjectKey(NS, "training")
RACK = "topology.example.com/rack"
V137, V138 = KubernetesVersion.of("1.37"), KubernetesVersion.of("1.38")
#: Rack a: 2 nodes x 2 GPUs; rack b: 4 nodes x 2 GPUs; each rack its own interconnect.
RACKS = {"a": 2, "b": 4}


def node(name: str, rack: str | None) -> J:
    labels = {"kubernetes.io/hostname": name}
    if rack is not None:
        labels[RACK] = rack
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {
            "allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def link_slice(rack: str) -> J:
    """The rack's interconnect: one device every node of the rack reaches."""
    term = {"matchExpressions": [{"key": RACK, "operator": "In", "values": [rack]}]}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"rack-{rack}-link"},
        "spec": {
            "driver": "link.example.com",
            "nodeSelector": {"nodeSelectorTerms": [term]},
            "pool": {"name": f"fabric-{rack}", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "link-0"}],
        },
    }


LINK = {"name": "link", "resourceClaimTemplateName": "link"}


def pod_group(min_count: int, key: str | None = RACK) -> J:
    spec: J = {"schedulingPolicy": {"gang": {"minCount": min_count}}, "resourceClaims": [LINK]}
    if key is not None:
        spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "training", "namespace": NS},
        "spec": spec,
    }


def worker(i: int, on: str | None = None) -> J:
    """A pod of the group: the group's link and a GPU of its own (a bound one: neither)."""
    spec: J = {
        "schedulerName": "kopf-dra",
        "schedulingGroup": {"podGroupName": "training"},
        "containers": [{"name": "main", "image": "busybox"}],
    }
    if on is None:
        spec["resourceClaims"] = [LINK, {"name": "gpu", "resourceClaimTemplateName": "gpu"}]
    else:
        spec["nodeName"] = on
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"worker-{i}", "namespace": NS},
        "spec": spec,
    }


def cluster(
    pods: int,
    min_count: int | None = None,
    *,
    key: str | None = RACK,
    racks: dict[str, int] = RACKS,
    unlabelled: int = 0,
    bound: dict[int, str] | None = None,
) -> list[J]:
    labelled = {
        f"{rack or 'empty'}-{i}": rack for rack, count in racks.items() for i in range(1, count + 1)
    }
    nodes = list(labelled)
    extra = [f"plain-{i}" for i in range(1, unlabelled + 1)]
    return [
        *(node(n, rack) for n, rack in labelled.items()),
        *(node(n, None) for n in extra),
        device_class("gpu"),
        device_class("link"),
        *(gpu_slice(n) for n in [*nodes, *extra]),
        *(link_slice(rack) for rack in racks if rack),
        template("gpu"),
        template("link"),
        pod_group(pods if min_count is None else min_count, key),
        *(worker(i) for i in range(pods)),
        *(worker(i, on) for i, on in (bound or {}).items()),
    ]


def snapshot_of(
    bodies: list[J], version: KubernetesVersion = V137, *, topology: bool = True
) -> Snapshot:
    """The snapshot as simulate builds it from files, with the gates of ``options``."""
    docs = [Document(Source("f.yaml", i), copy.deepcopy(b)) for i, b in enumerate(bodies)]
    gates = resolve(options(version, topology=topology).feature_gates, version)
    snapshot, problems = build(docs, version=version, strict=True, gates=gates)
    assert problems == []
    return snapshot


def options(
    version: KubernetesVersion = V137, *, topology: bool = True, **policies: Any
) -> Options:
    gates = {
        "GenericWorkload": True,
        "DRAWorkloadResourceClaims": True,
        "TopologyAwareWorkloadScheduling": topology,
    }
    return Options(
        feature_gates=parse_feature_gates(gates, version),
        version=version,
        policies=Policies(**policies),
    )


def answer_of(
    bodies: list[J], version: KubernetesVersion = V137, *, topology: bool = True, **policies: Any
) -> GroupAnswer:
    snapshot = snapshot_of(bodies, version, topology=topology)
    return group_answer(snapshot, GROUP, options(version, topology=topology, **policies), NOW)


def racks_of(answer: GroupAnswer) -> set[str]:
    return {(m.node or "").split("-")[0] for m in answer.members.values() if m.node}


def outcomes(answer: GroupAnswer) -> dict[str, str]:
    return {d.name: d.outcome for d in answer.domains}


# --- as upstream ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", [V137, V138])
def test_a_gang_constrained_to_a_rack_goes_to_the_one_rack_that_holds_it(
    version: KubernetesVersion,
) -> None:
    answer = answer_of(cluster(pods=8), version, domain_device_count=False)
    assert answer.outcome == "success"
    assert racks_of(answer) == {"b"}
    assert answer.domain == "b"
    assert outcomes(answer) == {"a": "unschedulable", "b": "chosen"}
    (a, b) = answer.domains
    assert b.pods == 8
    # In rack a the cycle placed four, then minCount was out of reach: upstream's message.
    assert a.message == "pod group is unschedulable, " + (
        "minCount (8) cannot be satisfied: 4 scheduled, 3 remaining"
        if version == V137
        else "scheduling policy's minimum threshold (8) cannot be satisfied: 4 scheduled, "
        "1 unschedulable, 3 not-evaluated"
    )
    (link,) = answer.shared.values()
    assert [r.pool for r in link.devices.results] == ["fabric-b"], "rack b's interconnect"


def test_with_the_gate_off_the_constraint_is_not_read_and_the_gang_spreads() -> None:
    # One node of two GPUs per rack, one interconnect every node reaches: four pods need both.
    bodies = [
        b
        for b in cluster(pods=4, racks={"a": 1, "b": 1})
        if b["metadata"]["name"] not in ("rack-a-link", "rack-b-link")
    ]
    bodies.append(link_slice_everywhere())
    off = answer_of(bodies, topology=False)
    assert off.outcome == "success"
    assert racks_of(off) == {"a", "b"}
    assert (off.topology_key, off.domains) == (None, [])
    on = answer_of(bodies, domain_device_count=False, preemption=False)
    assert on.outcome == "unsatisfiable", "no rack holds four"
    assert outcomes(on) == {"a": "unschedulable", "b": "unschedulable"}


def link_slice_everywhere() -> J:
    body = link_slice("all")
    del body["spec"]["nodeSelector"]
    body["spec"]["allNodes"] = True
    return body


def test_the_best_rack_is_the_one_with_the_most_pods_then_the_first_by_name() -> None:
    # A basic group (minCount 1) of six: rack a holds four, rack b six, rack c six.
    answer = answer_of(
        cluster(pods=6, min_count=1, racks={"a": 2, "b": 3, "c": 3}), domain_device_count=False
    )
    assert answer.outcome == "success"
    assert {d.name: d.pods for d in answer.domains} == {"a": 4, "b": 6, "c": 6}
    assert answer.domain == "b", "most pods; b before c on a tie (upstream: at random)"
    assert outcomes(answer) == {"a": "fits", "b": "chosen", "c": "fits"}


@pytest.mark.parametrize("version", [V137, V138])
def test_no_rack_holds_the_gang_the_first_placements_status_is_quoted(
    version: KubernetesVersion,
) -> None:
    answer = answer_of(cluster(pods=10), version, domain_device_count=False, preemption=False)
    assert answer.outcome == "unsatisfiable"
    # 1.37 and 1.38 alike: the gang gave up in rack a with its minCount out of reach.
    first = (
        "minCount (10) cannot be satisfied: 4 scheduled, 5 remaining"
        if version == V137
        else "scheduling policy's minimum threshold (10) cannot be satisfied: 4 scheduled, "
        "1 unschedulable, 5 not-evaluated"
    )
    # 1.37's group status has "pod group is unschedulable" as its error: the pods' copy says
    # it twice (the PodGroup's condition once). 1.38 tells a pod that fits only that its
    # group is unschedulable.
    twice = "pod group is unschedulable, " if version == V137 else ""
    expected = (
        f"pod group is unschedulable, {twice}0/2 placements are available, first placement "
        f"status: {first}"
    )
    assert answer.message == expected
    told = {str(k): m for k, m in answer.members.items()}
    # Rack a's cycle: four placed, the fifth fit nowhere in it (its own "0/2 nodes"), the
    # rest not tried there.
    fifth = told[f"{NS}/worker-4"]
    assert fifth.outcome == "unschedulable"
    assert (fifth.message or "").startswith("0/2 nodes are available")
    fits = expected if version == V137 else 'parent pod group "training" is unschedulable'
    assert told[f"{NS}/worker-0"].message == fits
    assert told[f"{NS}/worker-9"].outcome == "not-tried"


def test_pods_already_scheduled_fix_the_rack() -> None:
    answer = answer_of(cluster(pods=2, min_count=3, bound={5: "a-1"}), domain_device_count=False)
    assert answer.outcome == "success"
    assert [d.name for d in answer.domains] == ["a"], "only the scheduled pod's rack"
    assert racks_of(answer) == {"a"}


def test_pods_scheduled_in_two_racks_are_the_cycles_error() -> None:
    answer = answer_of(cluster(pods=2, min_count=4, bound={5: "a-1", 6: "b-1"}))
    assert answer.outcome == "error"
    assert answer.message == (
        "cannot determine domain for already scheduled pods: more than 1 domain found for pod "
        "group: a, b"
    )
    assert {m.message for k, m in answer.members.items() if m.outcome == "error"} == {
        answer.message
    }
    answer = answer_of(cluster(pods=2, min_count=4, bound={5: "a-1", 6: "b-1"}), V138)
    assert answer.message == (
        "cannot determine domain for already scheduled pods: more than 1 domain found for pod "
        'group: "a", "b"'
    )
    pods = {m.message for m in answer.members.values() if m.outcome == "error"}
    assert pods == {'parent pod group "training" encountered an error'}


def test_no_node_carries_the_key() -> None:
    answer = answer_of(cluster(pods=2, key="topology.example.com/block"), preemption=False)
    assert answer.outcome == "unsatisfiable"
    assert answer.message == "no feasible placements found"
    assert answer.domains == []
    assert "no node carries the key" in "\n".join(domain_lines(answer))


@pytest.mark.parametrize(("version", "racks"), [(V137, {"": 4}), (V138, {})])
def test_an_empty_value_is_a_domain_in_1_37_and_a_labelling_mistake_in_1_38(
    version: KubernetesVersion, racks: object
) -> None:
    answer = answer_of(cluster(pods=2, racks={"": 4}), version)
    assert {d.name: d.nodes for d in answer.domains} == racks


def test_1_38_stops_once_the_share_of_placements_to_score_fit() -> None:
    # 100%: every rack is evaluated; 1%: the first that fits ends the search.
    bodies = cluster(pods=2, racks={"a": 2, "b": 2, "c": 2})
    every = answer_of(bodies, V138, percentage_of_placements_to_score=100)
    assert outcomes(every) == {"a": "chosen", "b": "fits", "c": "fits"}
    first = answer_of(bodies, V138, percentage_of_placements_to_score=1)
    assert outcomes(first) == {"a": "chosen", "b": "not-tried", "c": "not-tried"}
    # 1.37 evaluates every placement, whatever the flag.
    assert outcomes(answer_of(bodies, V137, percentage_of_placements_to_score=1)) == outcomes(every)


# --- beyond upstream -------------------------------------------------------------------------


def test_a_rack_whose_free_gpus_cannot_hold_the_gang_is_ruled_out_before_any_pod_is_filtered() -> (
    None
):
    answer = answer_of(cluster(pods=8))
    assert answer.outcome == "success"
    assert racks_of(answer) == {"b"}
    (a, _) = answer.domains
    assert a.outcome == "ruled-out"
    assert a.message == (
        "the domain's free devices cannot hold the pod group's claims: 8 of DeviceClass gpu "
        "needed, 4 free"
    )
    assert (a.failed, a.filtered) == ({}, 0), "no pod was filtered there"
    assert answer.domains[1].filtered == 8
    lines = domain_lines(answer)
    assert lines[2:4] == [
        "  DOMAIN a (2 nodes): ruled-out",
        "    the domain's free devices cannot hold the pod group's claims: 8 of DeviceClass "
        "gpu needed, 4 free",
    ]
    topology = group_json(answer)["topology"]
    assert topology["domain"] == "b"
    assert [d["outcome"] for d in topology["domains"]] == ["ruled-out", "chosen"]


def test_the_groups_claim_pinned_to_a_rack_that_cannot_hold_it_is_released_and_the_gang_moves() -> (
    None
):
    """Upstream's DynamicResources refuses topology-constrained groups at PodGroupPostFilter:
    the group's claim stays on rack a's interconnect and the gang never fits."""
    bodies = cluster(pods=8)
    link = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": "training-link",
            "namespace": NS,
            "ownerReferences": [
                {
                    "apiVersion": "scheduling.k8s.io/v1beta1",
                    "kind": "PodGroup",
                    "name": "training",
                    "uid": "simulated-team-a-training",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "devices": {"requests": [{"name": "link", "exactly": {"deviceClassName": "link"}}]}
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "link",
                            "driver": "link.example.com",
                            "pool": "fabric-a",
                            "device": "link-0",
                        }
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": RACK, "operator": "In", "values": ["a"]}]}
                    ]
                },
            }
        },
    }
    group = next(b for b in bodies if b["kind"] == "PodGroup")
    group["status"] = {
        "resourceClaimStatuses": [{"name": "link", "resourceClaimName": "training-link"}]
    }
    answer = answer_of([*bodies, link])
    assert answer.outcome == "success"
    assert racks_of(answer) == {"b"}
    assert any("training-link" in n and "deallocates it" in n for n in answer.notes)
    (allocation,) = answer.shared.values()
    assert [r.pool for r in allocation.devices.results] == ["fabric-b"]


def test_a_file_with_the_gate_off_loses_the_constraint_as_the_api_server_drops_it() -> None:
    body = pod_group(8)
    gates = {"GenericWorkload": True, "TopologyAwareWorkloadScheduling": False}
    assert drop_disabled(PodGroup, body, gates, V137.release) == ["spec.schedulingConstraints"]
    assert "schedulingConstraints" not in body["spec"]
    kept = pod_group(8)
    on = {**gates, "TopologyAwareWorkloadScheduling": True}
    assert drop_disabled(PodGroup, kept, on, V138.release) == []
    assert kept["spec"]["schedulingConstraints"] == {"topology": [{"key": RACK}]}


def test_the_device_count_reads_the_requests_own_selectors_not_only_the_class() -> None:
    """Each node's second GPU is a T4; the trainers ask for an A100 (their template's
    selector): rack a's four GPUs are only two A100s, short of four."""
    bodies = cluster(pods=4, racks={"a": 2, "b": 4})
    for body in bodies:
        if body["kind"] == "ResourceSlice" and body["spec"]["driver"] == "gpu.example.com":
            for device, model in zip(body["spec"]["devices"], ["a100", "t4"], strict=True):
                device["attributes"] = {"model": {"string": model}}
        if body["kind"] == "ResourceClaimTemplate" and body["metadata"]["name"] == "gpu":
            (request,) = body["spec"]["spec"]["devices"]["requests"]
            expression = 'device.attributes["gpu.example.com"].model == "a100"'
            request["exactly"]["selectors"] = [{"cel": {"expression": expression}}]
    answer = answer_of(bodies)
    assert answer.outcome == "success"
    assert racks_of(answer) == {"b"}
    (a, _) = answer.domains
    assert (a.outcome, a.message) == (
        "ruled-out",
        "the domain's free devices cannot hold the pod group's claims: 4 of DeviceClass gpu "
        "matching the request's selectors needed, 2 free",
    )


def _why(bodies: list[J], name: str) -> why.Why:
    """``kubectl dra why`` for one of the group's pods, the cluster as read."""
    documents = [Document(Source("cluster"), copy.deepcopy(b)) for b in bodies]
    (pod,) = [b for b in bodies if b["kind"] == "Pod" and b["metadata"]["name"] == name]
    return why.answer(pod, documents, [], V137, options(V137), NOW)


def test_kubectl_dra_why_names_the_groups_domain_and_why_not_each_other() -> None:
    answer = _why(cluster(pods=8), "worker-0")
    assert answer.fits
    assert answer.group is not None
    assert answer.group.domain == "b"
    text = why.render(answer, NOW)
    assert "POD GROUP  team-a/training: success" in text
    assert "THIS POD   placed on b-" in text
    assert "ANSWER     fits: its PodGroup's cycle would place it on b-" in text
    assert f"TOPOLOGY {RACK}: b" in text
    assert "  DOMAIN a (2 nodes): ruled-out" in text
    assert "  DOMAIN b (4 nodes): chosen, 8 of the group's pods" in text
    assert why.as_json(answer)["podGroup"]["topology"]["domain"] == "b"


def test_kubectl_dra_why_says_a_pod_waits_with_its_group_that_no_rack_holds() -> None:
    answer = _why(cluster(pods=8, racks={"a": 2, "b": 2}), "worker-0")
    assert not answer.fits, "the pod alone fits; its gang does not"
    assert answer.answer is not None
    assert answer.answer.outcome == "success"
    text = why.render(answer, NOW)
    assert "ANSWER     its PodGroup team-a/training is not placed (unsatisfiable: " in text
    assert "fits (chosen)" not in text, "no node table for the pod alone"
    assert "  DOMAIN a (2 nodes): ruled-out" in text
    assert "  DOMAIN b (2 nodes): ruled-out" in text
