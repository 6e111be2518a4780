"""kopf-dra behind Kueue (sigs.k8s.io/kueue, hack/kueue/VERSION): Kueue admits within quota,
kopf-dra places and allocates. Kueue is built from its Go module, its image imported into the
nodes, and installed with its own chart and ``manifests/kueue/values.yaml`` (DRA quota
accounting on, the example GPU class mapped to ``example.kopf-dra.io/gpu``), as the README's
"Queues and quotas" says; on the Helm install's cluster, removed again after this module.

Every pod names kopf-dra and takes one GPU through a ResourceClaimTemplate; a "holder" pod runs
until the test writes /tmp/finish into it (``kubectl exec``), so that a quota frees exactly when
the test says."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import pytest

from e2e.cluster.test_kubectl_dra import kubectl_dra
from operators.demo.bringup import SCHEDULER_NAME
from operators.kube.api import KubeAPI
from operators.localcluster import cluster
from operators.localcluster.files import project_root
from tests.integration.helpers import eventually

J = dict[str, Any]
GPU_CLASS = "gpu.example.kopf-dra.io"
#: The quota resource manifests/kueue/values.yaml maps the GPU class to.
GPU = "example.kopf-dra.io/gpu"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GATE = "kueue.x-k8s.io/admission"
KUEUE = "kueue.x-k8s.io/v1beta2"
#: Runs until the test says it is done (busybox has no touch: echo writes the file).
HOLD = ["sh", "-c", "until test -e /tmp/finish; do sleep 1; done"]
WITHIN = 180.0


@pytest.fixture(scope="module")
def kueue(installed: cluster.Cluster) -> Iterator[cluster.Cluster]:
    """Kueue installed as the README says, and the queues of these tests: ClusterQueues of
    one GPU each (``solo``, ``gate``; ``team-a`` and ``team-b`` in cohort ``gpus``, reclaiming
    what they lend) and of two (``pairs``; ``pinned``: a flavor on kopf-dra-worker2), a
    LocalQueue ``queue`` in each test's namespace. Uninstalled after the module, so that the
    Helm install's other checks see a cluster without it."""
    installed.install_kueue()
    default = {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}}
    worker2 = {
        "apiVersion": KUEUE,
        "kind": "ResourceFlavor",
        "metadata": {"name": "worker2"},
        "spec": {"nodeLabels": {"kubernetes.io/hostname": "kopf-dra-worker2"}},
    }
    queues = [
        cluster_queue("solo", 1),
        cluster_queue("gate", 1),
        cluster_queue("team-a", 1, cohort="gpus"),
        cluster_queue("team-b", 1, cohort="gpus"),
        cluster_queue("pairs", 2),
        cluster_queue("pinned", 2, flavor="worker2"),
    ]
    _apply(installed, default, worker2, *queues)
    yield installed
    # Kueue's own objects first, while it runs to take off their finalizers (resource-in-use);
    # uninstalled after, its CRDs go with nothing left in them.
    installed.run_kubectl("delete", "clusterqueues.kueue.x-k8s.io", "--all", "--wait")
    installed.run_kubectl("delete", "resourceflavors.kueue.x-k8s.io", "--all", "--wait")
    installed.uninstall_kueue()


@pytest.fixture(autouse=True)
async def namespaces_removed(installed: cluster.Cluster) -> AsyncIterator[None]:
    """After each test its namespaces are gone, their pods' claims with them: the cluster
    has four GPUs, and the next test's quota is Kueue's, not what the last one left."""
    yield
    await asyncio.to_thread(
        installed.run_kubectl, "delete", "namespace", *NAMESPACES, "--ignore-not-found",
        "--wait", "--timeout=170s",
    )  # fmt: skip


NAMESPACES = ("kueue-quota", "kueue-gated", "kueue-team-a", "kueue-team-b", "kueue-flavor",
              "kueue-group", "kueue-refused")  # fmt: skip


def cluster_queue(name: str, gpus: int, *, cohort: str | None = None, flavor: str = "default") -> J:
    spec: J = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": [GPU],
                "flavors": [{"name": flavor, "resources": [{"name": GPU, "nominalQuota": gpus}]}],
            }
        ],
    }
    if cohort is not None:
        spec["cohortName"] = cohort
        spec["preemption"] = {"reclaimWithinCohort": "Any"}
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def _apply(c: cluster.Cluster, *objects: Mapping[str, Any]) -> None:
    c.run_kubectl(
        "apply", "--server-side", "-f", "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}),
    )  # fmt: skip


async def apply(c: cluster.Cluster, *objects: Mapping[str, Any]) -> None:
    await asyncio.to_thread(_apply, c, *objects)


async def get_json(c: cluster.Cluster, *args: str) -> J:
    out = await asyncio.to_thread(c.run_kubectl, "get", *args, "-o", "json")
    return dict(json.loads(out))


async def namespace(c: cluster.Cluster, ns: str, queue: str, selector: str | None = None) -> None:
    """The namespace, its LocalQueue ``queue`` on ClusterQueue ``queue`` and the template
    ``gpu`` (one GPU; with ``selector``, a CEL selector too)."""
    exactly: J = {"deviceClassName": GPU_CLASS}
    if selector is not None:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    await apply(
        c,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": {"name": "queue", "namespace": ns},
            "spec": {"clusterQueue": queue},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpu", "namespace": ns},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
        },
    )


def pod_spec(command: list[str]) -> J:
    return {
        "schedulerName": SCHEDULER_NAME,
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
        "containers": [
            {
                "name": "train",
                "image": "docker.io/library/busybox:1.36",
                "imagePullPolicy": "Never",
                "command": command,
                "resources": {"claims": [{"name": "gpu"}]},
            }
        ],
    }


def job(ns: str, name: str, parallelism: int = 1, command: list[str] = HOLD) -> J:
    """A batch Job on the namespace's queue: ``parallelism`` pods of one GPU each."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: "queue"}},
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "backoffLimit": 0,
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec(command)},
        },
    }


def plain_pod(ns: str, name: str, group: tuple[str, int] | None = None) -> J:
    """A pod on the namespace's queue (Kueue's pod integration gates it until admitted);
    ``group``: Kueue's own pod group (name, total count)."""
    meta: J = {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: "queue", "app": name}}
    if group is not None:
        meta["labels"]["kueue.x-k8s.io/pod-group-name"] = group[0]
        meta["annotations"] = {"kueue.x-k8s.io/pod-group-total-count": str(group[1])}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec(HOLD)}


async def pods_of(kube: KubeAPI, ns: str, app: str) -> list[J]:
    listed = await kube.list("Pod", ns, label_selector=f"app={app}")
    return [p for p in listed["items"] if not p["metadata"].get("deletionTimestamp")]


async def running(kube: KubeAPI, ns: str, app: str, count: int = 1) -> list[J]:
    """The app's ``count`` pods, each bound and Running (what kopf-dra placed)."""

    async def probe() -> list[J] | None:
        pods = await pods_of(kube, ns, app)
        up = [
            p for p in pods if p["status"].get("phase") == "Running" and p["spec"].get("nodeName")
        ]
        return up if len(up) == count else None

    return await eventually(probe, within=WITHIN, what=f"{count} running pods of {ns}/{app}")


async def finish(c: cluster.Cluster, pod: J) -> None:
    """The holder pod's work is done: it exits 0 (its Job completes, its quota frees)."""
    meta = pod["metadata"]
    await asyncio.to_thread(
        c.run_kubectl, "exec", "-n", meta["namespace"], meta["name"], "--",
        "sh", "-c", "echo > /tmp/finish",
    )  # fmt: skip


async def workload_of(c: cluster.Cluster, ns: str, owner: str) -> J | None:
    """Kueue's Workload for the Job or pod ``owner`` (owned by it), once Kueue made it."""
    items = (await get_json(c, "workloads.kueue.x-k8s.io", "-n", ns))["items"]
    for w in items:
        if any(o.get("name") == owner for o in w["metadata"].get("ownerReferences") or []):
            return dict(w)
    return None


def condition(obj: Mapping[str, Any], kind: str) -> J | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


async def pending_workload(c: cluster.Cluster, ns: str, owner: str) -> J:
    """The owner's Workload, once Kueue tried to admit it and could not (QuotaReserved False)."""

    async def probe() -> J | None:
        w = await workload_of(c, ns, owner)
        reserved = condition(w, "QuotaReserved") if w else None
        return w if reserved is not None and reserved["status"] == "False" else None

    return await eventually(probe, within=WITHIN, what=f"Kueue's pending Workload of {owner}")


async def claims_in(kube: KubeAPI, ns: str) -> list[J]:
    return list((await kube.list("ResourceClaim", ns))["items"])


async def allocated_claim(kube: KubeAPI, pod: J) -> J:
    """The pod's claim from its template, allocated and reserved for it."""
    (status,) = pod["status"]["resourceClaimStatuses"]
    claim = await kube.get(
        "ResourceClaim", status["resourceClaimName"], pod["metadata"]["namespace"]
    )
    assert claim["status"]["allocation"]["devices"]["results"], claim
    assert [r["name"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["name"]]
    return claim


async def scheduling_events(kube: KubeAPI, pod: J) -> list[J]:
    meta = pod["metadata"]
    events = await kube.list(
        "Event", meta["namespace"], field_selector=f"involvedObject.uid={meta['uid']}"
    )
    return [e for e in events["items"] if e.get("reason") in ("Scheduled", "FailedScheduling")]


def test_the_readme_has_the_kueue_install_the_test_runs() -> None:
    readme = (project_root() / "README.md").read_text()
    for line in cluster.KUEUE_HELM_COMMAND.split("\\\n"):
        assert line.strip() in readme, line


async def test_a_job_within_quota_is_placed_and_one_over_quota_waits_suspended_until_it_frees(
    kueue: cluster.Cluster, kube: KubeAPI
) -> None:
    ns = "kueue-quota"
    await namespace(kueue, ns, "solo")
    await apply(kueue, job(ns, "first"))
    (first,) = await running(kube, ns, "first")
    await allocated_claim(kube, first)
    await apply(kueue, job(ns, "second"))
    waiting = await pending_workload(kueue, ns, "second")
    print(f"\nover quota, Kueue says: {condition(waiting, 'QuotaReserved')}")
    second = await get_json(kueue, "job", "second", "-n", ns)
    assert second["spec"]["suspend"] is True, "the Job waits suspended"
    assert await pods_of(kube, ns, "second") == [], "no pod while suspended"
    claims = await claims_in(kube, ns)
    assert [c["metadata"]["name"] for c in claims] == [
        first["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    ], "no claim was created for the suspended Job"
    await finish(kueue, first)
    (placed,) = await running(kube, ns, "second")
    await allocated_claim(kube, placed)
    print(f"admitted once the first finished, placed by kopf-dra on {placed['spec']['nodeName']}")


async def test_a_gated_pod_is_not_tried_until_kueue_lifts_its_gate(
    kueue: cluster.Cluster, kube: KubeAPI
) -> None:
    ns = "kueue-gated"
    await namespace(kueue, ns, "gate")
    await apply(kueue, job(ns, "holder"))
    (holder,) = await running(kube, ns, "holder")
    await apply(kueue, plain_pod(ns, "gated"))
    await pending_workload(kueue, ns, "gated")
    pod = await kube.get("Pod", "gated", ns)
    assert GATE in [g["name"] for g in pod["spec"]["schedulingGates"]]
    assert not pod["spec"].get("nodeName")
    assert await scheduling_events(kube, pod) == [], "kopf-dra did not try the gated pod"
    for claim in await claims_in(kube, ns):
        if claim["metadata"]["name"] in {
            s["resourceClaimName"] for s in pod["status"].get("resourceClaimStatuses") or []
        }:
            assert not (claim.get("status") or {}).get("allocation"), "nothing allocated for it"
    await finish(kueue, holder)
    (placed,) = await running(kube, ns, "gated")
    assert not placed["spec"].get("schedulingGates")
    await allocated_claim(kube, placed)
    assert placed["spec"]["schedulerName"] == SCHEDULER_NAME
    print(f"\ngate lifted, placed by kopf-dra on {placed['spec']['nodeName']}")


async def test_borrowed_quota_is_reclaimed_the_evicted_pods_devices_released(
    kueue: cluster.Cluster, kube: KubeAPI
) -> None:
    a, b = "kueue-team-a", "kueue-team-b"
    await namespace(kueue, a, "team-a")
    await namespace(kueue, b, "team-b")
    await apply(kueue, job(a, "a1"))
    await running(kube, a, "a1")
    await apply(kueue, job(a, "a2"))
    (borrower,) = await running(kube, a, "a2")
    await allocated_claim(kube, borrower)
    lent = await eventually(
        lambda: _borrowed(kueue, "team-a"), within=WITHIN, what="team-a's borrowing"
    )
    print(f"\nteam-a runs two Jobs, borrowing {lent} of team-b's quota")
    await apply(kueue, job(b, "b1"))
    (reclaimer,) = await running(kube, b, "b1")
    await allocated_claim(kube, reclaimer)

    async def evicted() -> str | None:
        """The team-a Job Kueue suspended again to give team-b its quota back."""
        for name in ("a1", "a2"):
            if (await get_json(kueue, "job", name, "-n", a))["spec"].get("suspend"):
                return name
        return None

    victim = await eventually(evicted, within=WITHIN, what="a team-a Job evicted by Kueue")
    w = await workload_of(kueue, a, victim)
    assert w is not None
    print(f"Kueue evicted {a}/{victim}: {condition(w, 'Evicted')}, {condition(w, 'Preempted')}")

    async def released() -> list[J] | None:
        pods = await pods_of(kube, a, victim)
        claims = await claims_in(kube, a)
        return claims if not pods and len(claims) == 1 else None

    (kept,) = await eventually(released, within=WITHIN, what="the evicted pods' claims gone")
    (survivor,) = await pods_of(kube, a, "a2" if victim == "a1" else "a1")
    assert [r["name"] for r in kept["status"]["reservedFor"]] == [survivor["metadata"]["name"]]
    held = [
        c
        for ns in (a, b)
        for c in await claims_in(kube, ns)
        if (c.get("status") or {}).get("allocation")
    ]
    assert len(held) == 2, "one GPU per team: the evicted Job's device was released"
    shown = kubectl_dra(kueue, "pools", "--held", "-o", "json")
    assert shown.returncode == 0, shown.stderr
    mine = [h for h in json.loads(shown.stdout)["held"] if h["namespace"] in (a, b)]
    assert mine == [
        {"namespace": a, "queue": "team-a", "devices": 1, "claims": 1},
        {"namespace": b, "queue": "team-b", "devices": 1, "claims": 1},
    ], "what kopf-dra allocated, per ClusterQueue, is what Kueue counts"
    print(kubectl_dra(kueue, "pools", "--held").stdout)


async def _borrowed(c: cluster.Cluster, queue: str) -> str | None:
    cq = await get_json(c, "clusterqueue", queue)
    for flavor in (cq.get("status") or {}).get("flavorsUsage") or []:
        for r in flavor.get("resources") or []:
            if r.get("name") == GPU and r.get("borrowed") not in (None, "0", 0):
                return str(r["borrowed"])
    return None


async def test_the_node_labels_of_kueues_flavor_are_honoured_by_kopf_dra(
    kueue: cluster.Cluster, kube: KubeAPI
) -> None:
    ns = "kueue-flavor"
    await namespace(kueue, ns, "pinned")
    await apply(kueue, job(ns, "pinned", parallelism=2))
    pods = await running(kube, ns, "pinned", count=2)
    for pod in pods:
        assert pod["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "kopf-dra-worker2"}
        assert pod["spec"]["nodeName"] == "kopf-dra-worker2"
        claim = await allocated_claim(kube, pod)
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert result["pool"] == "kopf-dra-worker2"
    print(f"\nflavor worker2: both pods on {sorted(p['spec']['nodeName'] for p in pods)}")


async def test_kueues_own_pod_group_is_admitted_whole_and_placed_by_kopf_dra(
    kueue: cluster.Cluster, kube: KubeAPI
) -> None:
    ns = "kueue-group"
    await namespace(kueue, ns, "pairs")
    await apply(kueue, plain_pod(ns, "member-0", ("pair", 2)))
    pod = await kube.get("Pod", "member-0", ns)
    assert GATE in [g["name"] for g in pod["spec"]["schedulingGates"]], "one of two: gated"
    assert await scheduling_events(kube, pod) == [], "kopf-dra did not try it"
    await apply(kueue, plain_pod(ns, "member-1", ("pair", 2)))
    placed = [*(await running(kube, ns, "member-0")), *(await running(kube, ns, "member-1"))]
    for pod in placed:
        await allocated_claim(kube, pod)
        await finish(kueue, pod)

    async def finished() -> bool:
        """Both done, and Kueue let them go (its finalizer off once the group finished)."""
        pods = await pods_of(kube, ns, "member-0") + await pods_of(kube, ns, "member-1")
        return len(pods) == 2 and all(
            p["status"].get("phase") == "Succeeded" and not p["metadata"].get("finalizers")
            for p in pods
        )

    await eventually(finished, within=WITHIN, what="Kueue's pod group finished")
    nodes = [p["spec"]["nodeName"] for p in placed]
    print(f"\nKueue's pod group pair: admitted whole, placed by kopf-dra on {nodes}")


async def test_a_claim_shape_kueue_refuses_is_never_admitted_and_nothing_is_allocated(
    kueue: cluster.Cluster, kube: KubeAPI
) -> None:
    ns = "kueue-refused"
    await namespace(
        kueue, ns, "solo", selector='device.attributes["example.kopf-dra.io"].model == "T4"'
    )
    await apply(kueue, job(ns, "selective"))
    w = await pending_workload(kueue, ns, "selective")
    said = condition(w, "QuotaReserved")
    assert said is not None
    print(f"\nKueue refuses a CEL selector: {said['reason']}: {said['message']}")
    assert "CEL selectors are not supported" in said["message"]
    assert (await get_json(kueue, "job", "selective", "-n", ns))["spec"]["suspend"] is True
    assert await claims_in(kube, ns) == []
