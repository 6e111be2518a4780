"""``kopf-dra simulate --pod-group``: the scheduler's group cycle on a snapshot (1.37's
PodGroups), with nothing written: a gang placed together with the claim it shares, a gang one
GPU short, a gang still waiting for pods, and the releases and gates that place no groups."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import datetime
import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.allocator.nodes import selector_matches
from operators.api.features import KubernetesVersion, parse_feature_gates
from operators.api.keys import ObjectKey
from operators.kube.api import NotFoundError
from operators.scheduling.profile import Policies
from operators.simulate import main
from operators.simulate.engine import Options
from operators.simulate.group import group_answer
from operators.simulate.snapshot import Document, InputError, Snapshot, Source
from operators.simulate.validate import build
from tests.unit.test_simulate import run

J = dict[str, Any]

NOW = datetime.datetime(2026, 11, 28, tzinfo=datetime.UTC)
NS = "team-a"
GROUP = ObjectKey(NS, "training")
GATES = {"GenericWorkload": True, "DRAWorkloadResourceClaims": True}
V137, V136 = KubernetesVersion.of("1.37"), KubernetesVersion.of("1.36")
UNSATISFIED_5 = (
    "pod group is unschedulable, minCount (5) cannot be satisfied: 4 scheduled, 0 remaining, "
    "pod group preemption: No preemption victims found for incoming preemptor"
)


# --- the cluster: 2 nodes x 2 GPUs, one interconnect both reach -------------------------------


def node(name: str) -> J:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"rack": "a"}},
        "status": {
            "allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def device_class(name: str) -> J:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{name}.example.com"'}}]},
    }


def gpu_slice(node_name: str) -> J:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-gpus"},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}],
        },
    }


def link_slice() -> J:
    """One interconnect device, reachable from every node of rack a."""
    rack = {"key": "rack", "operator": "In", "values": ["a"]}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "rack-a-link"},
        "spec": {
            "driver": "link.example.com",
            "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [rack]}]},
            "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "link-0"}],
        },
    }


def template(name: str) -> J:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": name, "exactly": {"deviceClassName": name}}]}
            }
        },
    }


LINK = {"name": "link", "resourceClaimTemplateName": "link"}


def pod_group(min_count: int) -> J:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "training", "namespace": NS},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}, "resourceClaims": [LINK]},
    }


def worker(i: int) -> J:
    """A pod of the group: the group's link and a GPU of its own, both from templates."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"worker-{i}", "namespace": NS},
        "spec": {
            "schedulerName": "kopf-dra",
            "schedulingGroup": {"podGroupName": "training"},
            "resourceClaims": [LINK, {"name": "gpu", "resourceClaimTemplateName": "gpu"}],
            "containers": [{"name": "main", "image": "busybox"}],
        },
    }


def cluster(pods: int, min_count: int) -> list[J]:
    return [
        node("node-1"),
        node("node-2"),
        device_class("gpu"),
        device_class("link"),
        gpu_slice("node-1"),
        gpu_slice("node-2"),
        link_slice(),
        template("gpu"),
        template("link"),
        pod_group(min_count),
        *(worker(i) for i in range(pods)),
    ]


def snapshot_of(bodies: list[J], version: KubernetesVersion = V137) -> Snapshot:
    """The snapshot as simulate builds it from files (validated, at ``version``)."""
    docs = [Document(Source("f.yaml", i), copy.deepcopy(b)) for i, b in enumerate(bodies)]
    snapshot, problems = build(docs, version=version, strict=version == V137)
    assert problems == []
    return snapshot


def options(version: KubernetesVersion = V137, **gates: bool) -> Options:
    wanted = {**GATES, **gates} if version == V137 else gates
    return Options(feature_gates=parse_feature_gates(wanted, version), version=version)


def write(tmp_path: Path, bodies: list[J]) -> Path:
    path = tmp_path / "gang.yaml"
    path.write_text(yaml.safe_dump_all(bodies))
    return path


def devices(allocation: Any) -> list[str]:
    return [f"{r.pool}/{r.device}" for r in allocation.devices.results]


# --- the group's cycle -------------------------------------------------------------------------


def test_a_gang_of_four_is_placed_with_its_shared_claim_allocated_once() -> None:
    snapshot = snapshot_of(cluster(pods=4, min_count=4))
    answer = group_answer(snapshot, GROUP, options(), NOW)

    assert (answer.outcome, answer.message) == ("success", None)
    assert (answer.policy, answer.min_count, answer.placed_before) == ("gang", 4, 0)
    assert list(answer.members) == [ObjectKey(NS, f"worker-{i}") for i in range(4)]
    assert {m.outcome for m in answer.members.values()} == {"placed"}
    gpus = [d for m in answer.members.values() for a in m.allocations.values() for d in devices(a)]
    assert sorted(gpus) == [
        "node-1/gpu-0",
        "node-1/gpu-1",
        "node-2/gpu-0",
        "node-2/gpu-1",
    ], "one GPU each, none twice"
    # The group's claim: generated once for the PodGroup, allocated once, in no pod's list.
    (shared,) = answer.shared
    assert shared == f"{NS}/training-link-simulated"
    assert devices(answer.shared[shared]) == ["fabric/link-0"]
    assert all(shared not in m.allocations for m in answer.members.values())
    chosen = {m.node or "" for m in answer.members.values()}
    assert chosen == {"node-1", "node-2"}
    selector = answer.shared[shared].node_selector
    assert selector is not None
    assert all(selector_matches(selector, snapshot.nodes[n]) for n in chosen)
    assert any("generated in memory for PodGroup team-a/training" in n for n in answer.notes)
    assert answer.preemption is None, "placed: no preemption"


def test_a_gang_one_gpu_short_places_nothing_and_every_pod_is_told_why() -> None:
    snapshot = snapshot_of(cluster(pods=5, min_count=5))
    before = {k: p.dump() for k, p in snapshot.pods.items()}
    claims_before = {k: c.dump() for k, c in snapshot.claims.items()}

    answer = group_answer(snapshot, GROUP, options(), NOW)

    assert (answer.outcome, answer.message) == ("unsatisfiable", UNSATISFIED_5)
    told = {str(k): (m.outcome, m.message) for k, m in answer.members.items()}
    for i in range(4):
        assert told[f"{NS}/worker-{i}"] == ("fits", UNSATISFIED_5)
    outcome, own = told[f"{NS}/worker-4"]
    assert outcome == "unschedulable"
    assert own == (
        "0/2 nodes are available: 2 cannot allocate claim team-a/worker-4-gpu-simulated, "
        "request gpu: 3 devices on node-1; 2 allocated; 1 fail class gpu selectors; 0 usable, "
        "1 needed."
    )
    # Nothing the cycle assumed leaks: no node, no device in the answer, the input untouched.
    assert all((m.node, m.allocations) == (None, {}) for m in answer.members.values())
    assert answer.shared == {}
    assert {k: p.dump() for k, p in snapshot.pods.items()} == before
    assert {k: c.dump() for k, c in snapshot.claims.items()} == claims_before
    # As the scheduler: PodGroupPostFilter's preemption, which finds no pod to evict.
    assert answer.preemption is not None
    assert (answer.preemption.outcome, answer.preemption.victims) == ("none", [])


def test_a_basic_group_places_the_pods_that_fit() -> None:
    """``basic`` is a gang of one: four placed, the fifth told its own reason."""
    bodies = cluster(pods=5, min_count=5)
    bodies[9]["spec"]["schedulingPolicy"] = {"basic": {}}
    answer = group_answer(snapshot_of(bodies), GROUP, options(), NOW)
    assert (answer.outcome, answer.policy, answer.min_count) == ("success", "basic", 1)
    outcomes = [m.outcome for m in answer.members.values()]
    assert outcomes == ["placed", "placed", "placed", "placed", "unschedulable"]
    assert (answer.members[ObjectKey(NS, "worker-4")].message or "").startswith("0/2 nodes")


def test_a_group_claim_allocated_where_no_pod_can_go_is_deallocated_and_the_group_placed() -> None:
    """PodGroupPostFilter: the group's claim holds a link of rack b, where no GPU is; the first
    cycle places nothing, the claim is deallocated, and the next cycle places the gang."""
    bodies = cluster(pods=4, min_count=4)
    rack_b = link_slice()
    rack_b["metadata"]["name"] = "rack-b-link"
    rack_b["spec"]["pool"]["name"] = "fabric-b"
    rack_b["spec"]["nodeSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] = ["b"]
    direct = {"name": "link", "resourceClaimName": "link"}
    bodies[9]["spec"]["resourceClaims"] = [direct]
    for pod in bodies[10:]:
        pod["spec"]["resourceClaims"][0] = direct
    allocation = {
        "devices": {
            "results": [
                {
                    "request": "link",
                    "driver": "link.example.com",
                    "pool": "fabric-b",
                    "device": "link-0",
                }
            ]
        },
        "nodeSelector": rack_b["spec"]["nodeSelector"],
    }
    link = template("link") | {"kind": "ResourceClaim"}
    link["spec"] = link["spec"]["spec"]
    link["status"] = {"allocation": allocation}
    answer = group_answer(snapshot_of([*bodies, rack_b, link]), GROUP, options(), NOW)
    assert answer.outcome == "success"
    assert devices(answer.shared[f"{NS}/link"]) == ["fabric/link-0"]
    assert (
        f"claim {NS}/link of PodGroup {NS}/training is allocated where none of its pods can go: "
        "the scheduler deallocates it (PodGroupPostFilter) and tries the group again"
    ) in answer.notes


def test_without_group_claims_each_pod_asks_for_a_link_of_its_own() -> None:
    """DRAWorkloadResourceClaims off: a pod's entry is its own (the claim controller makes one
    per pod), and one link cannot serve four pods."""
    snapshot = snapshot_of(cluster(pods=4, min_count=4))
    answer = group_answer(snapshot, GROUP, options(DRAWorkloadResourceClaims=False), NOW)
    assert answer.outcome == "unsatisfiable"
    assert answer.shared == {}
    outcomes = [m.outcome for m in answer.members.values()]
    assert outcomes == ["fits", "unschedulable", "not-tried", "not-tried"]


def test_the_search_places_a_gang_the_greedy_cycle_does_not(tmp_path: Path) -> None:
    """One GPU per node, racks a and b; link-0 reaches rack a only, link-1 both. The cycle puts
    worker-0 on node-1 with link-0 (first fit), which worker-1 on node-2 cannot reach; the
    search (--gang-search) tries worker-0 on node-2 next, with link-1, and places both."""
    bodies: list[J] = [
        b for b in cluster(pods=2, min_count=2) if b["kind"] not in ("ResourceSlice", "Node")
    ]
    for name, rack in (("node-1", "a"), ("node-2", "b")):
        body = node(name)
        body["metadata"]["labels"]["rack"] = rack
        one = gpu_slice(name)
        one["spec"]["devices"] = one["spec"]["devices"][:1]
        bodies += [body, one]
    for name, racks in (("fabric-a", ["a"]), ("fabric-b", ["a", "b"])):
        link = link_slice()
        link["metadata"]["name"] = name
        link["spec"]["pool"]["name"] = name
        link["spec"]["nodeSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] = (
            racks
        )
        bodies.append(link)
    snapshot = snapshot_of(bodies)

    greedy = group_answer(
        snapshot, GROUP, dataclasses.replace(options(), policies=Policies(gang_search=False)), NOW
    )
    assert greedy.outcome == "unsatisfiable"
    assert [m.outcome for m in greedy.members.values()] == ["fits", "unschedulable"]

    answer = group_answer(snapshot, GROUP, options(), NOW)
    assert answer.outcome == "success"
    nodes = {str(k): m.node for k, m in answer.members.items()}
    assert nodes == {f"{NS}/worker-0": "node-2", f"{NS}/worker-1": "node-1"}
    assert devices(answer.shared[f"{NS}/training-link-simulated"]) == ["fabric-b/link-0"]
    assert any(n.startswith("placed by searching the pods' prioritized") for n in answer.notes)
    path = write(tmp_path, bodies)
    argv = ["-f", str(path), "--pod-group", "team-a/training", "--feature-gates", GATES_FLAG]
    assert (run(*argv)[0], run(*argv, "--no-gang-search")[0]) == (0, 1)


def test_a_gang_with_fewer_pods_than_min_count_waits() -> None:
    answer = group_answer(snapshot_of(cluster(pods=3, min_count=4)), GROUP, options(), NOW)
    assert (answer.outcome, answer.message) == (
        "waiting",
        "waiting for minCount pods from a gang to appear in scheduling queue",
    )
    assert {m.outcome for m in answer.members.values()} == {"waiting"}


def test_pods_bound_before_count_towards_min_count() -> None:
    bodies = cluster(pods=4, min_count=4)
    bodies[-1]["spec"]["nodeName"] = "node-2"  # worker-3 runs already (its GPU not modelled)
    answer = group_answer(snapshot_of(bodies), GROUP, options(), NOW)
    assert (answer.outcome, answer.placed_before) == ("success", 1)
    assert answer.members[ObjectKey(NS, "worker-3")].outcome == "bound"
    assert list(answer.members)[-1] == ObjectKey(NS, "worker-3"), "bound ones last"


def test_a_pod_whose_priority_differs_from_the_groups_is_refused() -> None:
    bodies = cluster(pods=4, min_count=4)
    bodies[-1]["spec"]["priority"] = 7
    answer = group_answer(snapshot_of(bodies), GROUP, options(), NOW)
    assert answer.outcome == "error"
    assert answer.message == (
        "all pods in a single pod group should have the same priority as the pod group's "
        "priority, got 7 and 0"
    )


def test_a_missing_pod_group_is_bad_input() -> None:
    bodies = [b for b in cluster(pods=4, min_count=4) if b["kind"] != "PodGroup"]
    with pytest.raises(InputError, match=r"PodGroup team-a/training is not in the input \(4 pods"):
        group_answer(snapshot_of(bodies), GROUP, options(), NOW)
    with pytest.raises(InputError, match=r"^PodGroup team-a/nope is not in the input$"):
        group_answer(snapshot_of(bodies), ObjectKey(NS, "nope"), options(), NOW)


def test_a_missing_template_of_the_group_names_it() -> None:
    bodies = [b for b in cluster(pods=4, min_count=4) if b["metadata"]["name"] != "link"]
    with pytest.raises(InputError, match="ResourceClaimTemplate team-a/link of entry link"):
        group_answer(snapshot_of(bodies), GROUP, options(), NOW)


def test_136_places_no_groups_and_says_why() -> None:
    """A 1.36 cluster serves no PodGroup (files are refused, below); from a snapshot that has
    one anyway (as the cluster's, unvalidated), every pod gets the scheduler's reason."""
    answer = group_answer(
        snapshot_of(cluster(pods=4, min_count=4), V136), GROUP, options(V136), NOW
    )
    assert answer.outcome == "unsatisfiable"
    assert answer.message == (
        "PodGroup team-a/training: gang scheduling (GenericWorkload) needs Kubernetes 1.37, "
        "and this cluster runs 1.36"
    )
    assert answer.members[ObjectKey(NS, "worker-0")].message == (
        "pod team-a/worker-0 names PodGroup 'training': gang scheduling (GenericWorkload) "
        "needs Kubernetes 1.37, and this cluster runs 1.36"
    )


def test_generic_workload_off_places_no_groups() -> None:
    snapshot = snapshot_of(cluster(pods=4, min_count=4))
    answer = group_answer(snapshot, GROUP, Options(version=V137), NOW)  # 1.37's defaults: off
    assert answer.outcome == "unsatisfiable"
    assert "--feature-gates GenericWorkload=true" in (answer.message or "")
    assert {m.outcome for m in answer.members.values()} == {"unschedulable"}


# --- the command line ---------------------------------------------------------------------------


GATES_FLAG = "GenericWorkload=true,DRAWorkloadResourceClaims=true"


def test_cli_gang_placed_exit_0_and_json_shape(tmp_path: Path) -> None:
    path = write(tmp_path, cluster(pods=4, min_count=4))
    code, result = run(
        "-f", str(path), "--pod-group", "team-a/training", "--feature-gates", GATES_FLAG
    )
    assert code == 0
    assert list(result) == [
        "podGroup",
        "outcome",
        "message",
        "policy",
        "minCount",
        "placedBefore",
        "pods",
        "sharedClaims",
        "preemption",
        "notes",
        "topology",
        "tree",
    ]
    assert result["preemption"] is None
    assert (result["podGroup"], result["outcome"], result["minCount"]) == (
        "team-a/training",
        "success",
        4,
    )
    assert list(result["pods"]) == [f"{NS}/worker-{i}" for i in range(4)]
    first = result["pods"][f"{NS}/worker-0"]
    assert set(first) == {"outcome", "node", "allocations", "message"}
    assert list(first["allocations"]) == [f"{NS}/worker-0-gpu-simulated"]
    assert list(result["sharedClaims"]) == [f"{NS}/training-link-simulated"]


def test_cli_gang_short_exit_1_and_table(tmp_path: Path) -> None:
    path = write(tmp_path, cluster(pods=5, min_count=5))
    argv = ["-f", str(path), "--pod-group", "team-a/training", "--feature-gates", GATES_FLAG]
    code, result = run(*argv)
    assert (code, result["outcome"], result["message"]) == (1, "unsatisfiable", UNSATISFIED_5)
    out = io.StringIO()
    assert main([*argv, "-o", "table"], out=out) == 1
    table = out.getvalue()
    assert "OUTCOME  unsatisfiable: PodGroup team-a/training (gang, minCount 5)" in table
    assert f"MESSAGE  {UNSATISFIED_5}" in table
    rows = [line.split(maxsplit=3) for line in table.splitlines() if line.startswith("  team-a/")]
    assert [r[:3] for r in rows] == [
        *([f"{NS}/worker-{i}", "fits", "-"] for i in range(4)),
        [f"{NS}/worker-4", "unschedulable", "-"],
    ]
    assert rows[-1][3].startswith("0/2 nodes are available: 2 cannot allocate claim")


def test_cli_waiting_exits_1_and_bad_input_exits_2(tmp_path: Path) -> None:
    path = write(tmp_path, cluster(pods=3, min_count=4))
    code, result = run(
        "-f", str(path), "--pod-group", "team-a/training", "--feature-gates", GATES_FLAG
    )
    assert (code, result["outcome"]) == (1, "waiting")
    code, result = run("-f", str(path), "--pod-group", "team-a/nope", "--feature-gates", GATES_FLAG)
    assert (code, result["outcome"]) == (2, "error")
    assert "PodGroup team-a/nope is not in the input" in result["error"]
    code, result = run("-f", str(path), "--pod-group", "training")
    assert code == 2
    assert "--pod-group 'training': expected NAMESPACE/NAME" in result["error"]


def test_cli_136_refuses_a_pod_group_file(tmp_path: Path) -> None:
    path = write(tmp_path, cluster(pods=4, min_count=4))
    code, result = run(
        "-f", str(path), "--pod-group", "team-a/training", "--kubernetes-version", "1.36"
    )
    assert code == 2
    assert (
        "PodGroup team-a/training: field apiVersion: 'scheduling.k8s.io/v1beta1' is not served "
        "for PodGroup by Kubernetes 1.36 (no version is; scheduling.k8s.io/v1beta1 from 1.37 on)"
    ) in result["error"]


def test_cli_pod_of_a_group_says_the_group_places_it(tmp_path: Path) -> None:
    path = write(tmp_path, cluster(pods=4, min_count=4))
    code, result = run("-f", str(path), "--pod", "team-a/worker-0", "--feature-gates", GATES_FLAG)
    assert code == 0
    assert any("--pod-group team-a/training" in n for n in result["notes"])


def test_cli_pod_and_pod_group_are_exclusive(tmp_path: Path) -> None:
    path = write(tmp_path, cluster(pods=4, min_count=4))
    with pytest.raises(SystemExit):
        main(["-f", str(path), "--pod-group", "team-a/training", "--pod", "team-a/worker-0"])


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        (
            {"schedulingPolicy": {"basic": {}, "gang": {"minCount": 2}}},
            "field spec.schedulingPolicy: Invalid value: exactly one of basic and gang",
        ),
        (
            {"schedulingPolicy": {"gang": {"minCount": 0}}},
            "field spec.schedulingPolicy.gang.minCount: Invalid value: 0: must be greater than "
            "zero",
        ),
        (
            {"schedulingPolicy": {"basic": {}}, "resourceClaims": [LINK, LINK]},
            "field spec.resourceClaims[1].name: Duplicate value: 'link'",
        ),
        (
            {
                "schedulingPolicy": {"basic": {}},
                "resourceClaims": [{**LINK, "resourceClaimName": "link"}],
            },
            "field spec.resourceClaims[0]: Invalid value: exactly one of resourceClaimName and "
            "resourceClaimTemplateName is required",
        ),
    ],
)
def test_a_pod_group_file_is_checked_naming_the_field(spec: J, problem: str) -> None:
    body = pod_group(2)
    body["spec"] = spec
    _, problems = build([Document(Source("f.yaml", 0), body)], version=V137)
    assert [p for p in problems if problem in p], problems
    assert problems[0].startswith("f.yaml: document #0: PodGroup team-a/training: field spec.")


class FakeCluster:
    """What ``cluster_documents`` reads (``KubeAPI``'s ``version_info`` and ``list``): the
    bodies by kind; a kind of none is not served (404), as PodGroup on 1.36."""

    def __init__(self, minor: str, bodies: list[J]) -> None:
        self.minor, self.bodies = minor, bodies
        self.release: Any = None  # set by cluster_documents

    async def version_info(self) -> J:
        return {"major": "1", "minor": self.minor}

    async def list(self, kind: str) -> J:
        items = [copy.deepcopy(b) for b in self.bodies if b["kind"] == kind]
        if kind == "PodGroup" and not items:
            raise NotFoundError(404, "NotFound", "the server could not find the resource", {})
        return {"apiVersion": items[0]["apiVersion"] if items else "v1", "items": items}


def live(monkeypatch: pytest.MonkeyPatch, cluster_: FakeCluster) -> None:
    @contextlib.asynccontextmanager
    async def client() -> AsyncIterator[None]:
        yield None

    async def make_api_client(_kubeconfig: str | None) -> Any:
        return client()

    monkeypatch.setattr("operators.simulate.make_api_client", make_api_client)
    monkeypatch.setattr("operators.simulate.KubeAPI", lambda _client: cluster_)


def test_cli_from_a_live_cluster_reads_its_pod_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    live(monkeypatch, FakeCluster("37", cluster(pods=4, min_count=4)))
    code, result = run(
        "--kubeconfig", "k", "--pod-group", "team-a/training", "--feature-gates", GATES_FLAG
    )
    assert (code, result["outcome"]) == (0, "success")


def test_cli_from_a_136_cluster_that_serves_no_pod_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """No PodGroup is listed (404: skipped, as any kind the server does not serve); the pods
    that name it are told what the scheduler tells them."""
    bodies = [b for b in cluster(pods=4, min_count=4) if b["kind"] != "PodGroup"]
    live(monkeypatch, FakeCluster("36", bodies))
    code, result = run("--kubeconfig", "k", "--pod-group", "team-a/training")
    assert (code, result["outcome"], result["policy"]) == (1, "unsatisfiable", None)
    assert "needs Kubernetes 1.37, and this cluster runs 1.36" in result["message"]
    assert len(result["pods"]) == 4


def held(name: str, node_name: str, device: str) -> list[J]:
    """A running pod of low priority on ``node_name``, holding ``device`` through its claim."""
    on_node = {"key": "metadata.name", "operator": "In", "values": [node_name]}
    result = {"request": "gpu", "driver": "gpu.example.com", "pool": node_name, "device": device}
    claim = template("gpu") | {"kind": "ResourceClaim"}
    claim["metadata"] = {"name": f"{name}-gpu", "namespace": NS}
    claim["spec"] = claim["spec"]["spec"]
    claim["status"] = {
        "allocation": {
            "devices": {"results": [result]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [on_node]}]},
        },
        "reservedFor": [{"resource": "pods", "name": name, "uid": f"{name}-uid"}],
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "uid": f"{name}-uid"},
        "spec": {
            "nodeName": node_name,
            "priority": 1,
            "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}],
            "containers": [{"name": "c", "image": "busybox"}],
        },
        "status": {"phase": "Running"},
    }
    return [claim, pod]


def test_a_gang_that_fits_only_with_victims_names_them_and_where_its_pods_would_go() -> None:
    """Three of the four GPUs held by pods of priority 1; a gang of four of priority 100
    fits once all three are gone (each put back breaks it): the scheduler's group preemption,
    answered with nobody evicted."""
    bodies = cluster(pods=4, min_count=4)
    bodies[9]["spec"]["priority"] = 100
    for worker in bodies[10:]:
        worker["spec"]["priority"] = 100
    for name, where, device in (
        ("low-0", "node-1", "gpu-0"),
        ("low-1", "node-1", "gpu-1"),
        ("low-2", "node-2", "gpu-0"),
    ):
        bodies += held(name, where, device)
    snapshot = snapshot_of(bodies)
    answer = group_answer(snapshot, GROUP, options(), NOW)
    found = "pod group preemption: found a placement for podgroup, preempting 3 victims"
    assert answer.outcome == "unsatisfiable"
    assert (answer.message or "").endswith(found), answer.message
    assert answer.preemption is not None
    assert answer.preemption.outcome == "victims"
    assert sorted(answer.preemption.victims) == [
        (f"{NS}/low-0", "node-1", 1),
        (f"{NS}/low-1", "node-1", 1),
        (f"{NS}/low-2", "node-2", 1),
    ]
    nominated = answer.preemption.nominations
    assert sorted(nominated) == [f"{NS}/worker-{i}" for i in range(4)]
    assert sorted(nominated.values()) == ["node-1", "node-1", "node-2", "node-2"]
    # The pods that fit are told the group's message, the one that fits nowhere its own.
    told = {m.outcome: m.message for m in answer.members.values()}
    assert (told["fits"] or "").endswith(found)
    assert snapshot.pods[ObjectKey(NS, "low-0")].spec.node_name == "node-1", "nobody evicted"


def test_cli_group_preemption_table_and_json(tmp_path: Path) -> None:
    bodies = cluster(pods=2, min_count=2)
    bodies[9]["spec"]["priority"] = 100
    for worker in bodies[10:]:
        worker["spec"]["priority"] = 100
    bodies += held("low-0", "node-1", "gpu-0") + held("low-1", "node-1", "gpu-1")
    bodies += held("low-2", "node-2", "gpu-0") + held("low-3", "node-2", "gpu-1")
    path = write(tmp_path, bodies)
    args = ("-f", str(path), "--pod-group", "team-a/training", "--feature-gates", GATES_FLAG)
    code, result = run(*args)
    assert code == 1
    preemption = result["preemption"]
    assert preemption["outcome"] == "victims"
    assert len(preemption["victims"]) == 2, "one GPU a pod: two of the four go"
    assert set(preemption["nominated"]) == {f"{NS}/worker-0", f"{NS}/worker-1"}
    out = io.StringIO()
    assert main([*args, "-o", "table"], out=out) == 1
    table = out.getvalue()
    assert "PREEMPT  victims (priority 100): found a placement for podgroup" in table
    assert "NOTE     preemption is simulated: nobody is evicted" in table
