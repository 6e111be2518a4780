"""A pod is more than its devices: kopf-dra and kube-scheduler side by side on the same objects.

kube-scheduler and kube-controller-manager of the control plane's release (built by
hack/controlplane/build-upstream.sh, as the complete local cluster's) run against the test
control plane: kube-scheduler under a profile name of this module's own (no other test's pod
is its), kube-controller-manager with only its PV controller (which binds the volumes
VolumeBinding's PreBind chose). The nodes carry a label of this module's run, and every pod
selects it, so the other tests' nodes are refused alike by both schedulers.

Each pod of a generated set (host ports, volumes bound and unbound, pod affinity and
anti-affinity, topology spread, node preferences) is given once to kube-scheduler and once to
kopf-dra, one at a time against the same background pods, and must get the same verdict:
bound, or unschedulable for the same reasons on the same number of nodes. Where both bind, the
node kopf-dra chose is given to kube-scheduler (a third copy pinned there): kube-scheduler must
take it too; and kopf-dra's node must be among those kube-scheduler's scores put first (its log
of every node's final score, at V(10) of schedule_one.go), ties aside.
"""

from __future__ import annotations

import functools
import random
import re
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from operators.controllers.scheduler.handlers import Scheduler
from operators.kube.api import KubeAPI
from tests.integration.helpers import (
    bound_node,
    create_node,
    eventually,
    running_operator,
    start_scheduler,
    unique,
    upstream,
)

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
SEED = 20261205
PODS = 48  # generated at random (two plain ones follow)
#: Each pod is given to kube-scheduler, to kopf-dra, and to kube-scheduler pinned to
#: kopf-dra's node when the two chose differently.
COPIES = ("up", "kd", "pin")
J = dict[str, Any]


@pytest.fixture
async def kopf_dra(kubeconfig: Path, controllers: None) -> AsyncIterator[Scheduler]:
    scheduler, registry = start_scheduler(kubeconfig)
    async with running_operator(registry, "scheduler"):
        yield scheduler


# --- the generated cluster and pods -------------------------------------------------------


class Scene:
    """The run's nodes, storage and background pods, and the pods to place."""

    def __init__(self, namespace: str) -> None:
        self.run = unique("sbs")
        self.namespace = namespace
        self.nodes = [f"{self.run}-n{i}" for i in range(5)]
        self.zones = {n: f"z{i % 3}" for i, n in enumerate(self.nodes)}
        self.local = f"{self.run}-local"  # WaitForFirstConsumer, no provisioner
        self.immediate = f"{self.run}-immediate"  # Immediate, a provisioner that never comes

    def selector(self) -> J:
        return {"sbs": self.run}

    async def create(self, kube: KubeAPI) -> None:
        taints = {
            self.nodes[3]: [{"key": "busy", "effect": "PreferNoSchedule"}],
            self.nodes[4]: [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
        }
        for i, name in enumerate(self.nodes):
            await create_node(
                kube,
                name,
                {"sbs": self.run, ZONE: self.zones[name]},
                cpu=str(4 + 2 * i),
                taints=taints.get(name),
            )
        for name, mode, provisioner in (
            (self.local, "WaitForFirstConsumer", "kubernetes.io/no-provisioner"),
            (self.immediate, "Immediate", "example.com/never"),
        ):
            await kube.create(
                {
                    "apiVersion": "storage.k8s.io/v1",
                    "kind": "StorageClass",
                    "metadata": {"name": name},
                    "provisioner": provisioner,
                    "volumeBindingMode": mode,
                }
            )
        # A volume bound to its claim, on node 1 only.
        await kube.create(self.local_pv("pinned", self.nodes[1], claim="pinned"))
        await kube.create(self.claim("pinned", self.local, volume=f"{self.run}-pinned"))
        await kube.create(self.claim("never", self.immediate))
        # A ReadWriteOncePod claim, bound, that a background pod uses.
        await kube.create(self.local_pv("solo", self.nodes[2], "ReadWriteOncePod", claim="solo"))
        await kube.create(
            self.claim("solo", self.local, volume=f"{self.run}-solo", mode="ReadWriteOncePod")
        )
        # A Service selecting the web pods: those without constraints of their own spread by
        # PodTopologySpread's system defaults (hostname and zone, ScheduleAnyway).
        await kube.create(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "web", "namespace": self.namespace},
                "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]},
            }
        )
        # Each copy of a pod with a delayed claim gets a claim and a volume of its own, made
        # now, so that both schedulers' informers hold them before the pods come.
        for late, node in self.late_claims():
            await kube.create(self.local_pv(late, node, claim=late))
            await kube.create(self.claim(late, self.local))
        for i, (node, labels, extra) in enumerate(self.background()):
            body = self.pod(f"bg-{i}", labels, extra)
            body["spec"]["nodeName"] = node
            body["spec"].pop("nodeSelector")
            await kube.create(body)

    def late_claims(self) -> list[tuple[str, str]]:
        """(claim, node of its volume) of every copy of a pod with a delayed claim. The volume
        names the claim (claimRef): the PV controller binds the two at once, whatever the
        StorageClass's binding mode, so the pods meet them bound."""
        return [
            (f"p{i}-{copy}-late", extra["late"])
            for i, (_, extra) in enumerate(self.generated())
            if "late" in extra
            for copy in COPIES
        ]

    def local_pv(
        self, name: str, node: str, mode: str = "ReadWriteOnce", claim: str | None = None
    ) -> J:
        """A local volume on ``node``; ``claim``: kept for that claim (its claimRef), as an
        administrator pre-binds a volume (no other claim may take it)."""
        claim_ref = {"claimRef": {"namespace": self.namespace, "name": claim}} if claim else {}
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"{self.run}-{name}"},
            "spec": {
                **claim_ref,
                "capacity": {"storage": "1Gi"},
                "accessModes": [mode],
                "storageClassName": self.local,
                "local": {"path": "/tmp"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": HOSTNAME, "operator": "In", "values": [node]}
                                ]
                            }
                        ]
                    }
                },
            },
        }

    def claim(
        self,
        name: str,
        storage_class: str,
        volume: str | None = None,
        mode: str = "ReadWriteOnce",
    ) -> J:
        spec: J = {
            "accessModes": [mode],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": "1Gi"}},
        }
        if volume:
            spec["volumeName"] = volume
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": spec,
        }

    def background(self) -> list[tuple[str, dict[str, str], J]]:
        """Pods already bound: apps of each kind, host ports, an anti-affinity of their own."""
        out: list[tuple[str, dict[str, str], J]] = [
            (self.nodes[0], {"app": "web"}, {"ports": [8080]}),
            (self.nodes[0], {"app": "db"}, {}),
            (self.nodes[2], {"app": "web"}, {}),
            (self.nodes[3], {"app": "cache"}, {"ports": [9090]}),
            (self.nodes[4], {"app": "lonely"}, {"anti": ("app", "web", HOSTNAME)}),
            (self.nodes[2], {"app": "solo"}, {"claim": "solo"}),
            # A placed pod's preferred terms score for others (InterPodAffinity's PreScore).
            (self.nodes[1], {"app": "cache"}, {"likes": ("batch", ZONE, 50, False)}),
            # Small web pods where Fit alone would send another: the Service's spreading
            # (system defaults) must send it elsewhere.
            (self.nodes[1], {"app": "web"}, {"cpu": "100m"}),
            (self.nodes[1], {"app": "web"}, {"cpu": "100m"}),
        ]
        return out

    def pod(self, name: str, labels: dict[str, str], extra: J) -> J:
        container: J = {
            "name": "main",
            "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": extra.get("cpu", "500m")}},
        }
        if extra.get("ports"):
            container["ports"] = [
                {"containerPort": 80 + i, "hostPort": p} for i, p in enumerate(extra["ports"])
            ]
        spec: J = {"containers": [container], "nodeSelector": self.selector()}
        affinity: J = {}
        if "anti" in extra:
            key, value, topology = extra["anti"]
            selector: J = (
                {"matchExpressions": [{"key": key, "operator": "In", "values": value}]}
                if isinstance(value, list)
                else {"matchLabels": {key: value}}
            )
            affinity["podAntiAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": selector, "topologyKey": topology}
                ]
            }
        if "affinity" in extra:
            key, value, topology = extra["affinity"]
            affinity["podAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {key: value}}, "topologyKey": topology}
                ]
            }
        if "likes" in extra:
            app, topology, weight, anti = extra["likes"]
            term = {
                "weight": weight,
                "podAffinityTerm": {
                    "labelSelector": {"matchLabels": {"app": app}},
                    "topologyKey": topology,
                },
            }
            kind = "podAntiAffinity" if anti else "podAffinity"
            affinity.setdefault(kind, {})["preferredDuringSchedulingIgnoredDuringExecution"] = [
                term
            ]
        if "prefer" in extra:
            affinity["nodeAffinity"] = {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "preference": {
                            "matchExpressions": [
                                {"key": HOSTNAME, "operator": "In", "values": [extra["prefer"]]}
                            ]
                        },
                    }
                ]
            }
        if affinity:
            spec["affinity"] = affinity
        if "spread" in extra:
            topology, skew, min_domains = extra["spread"]
            constraint: J = {
                "maxSkew": skew,
                "topologyKey": topology,
                "whenUnsatisfiable": "ScheduleAnyway" if extra.get("soft") else "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": labels.get("app", "")}},
            }
            if min_domains:
                constraint["minDomains"] = min_domains
            spec["topologySpreadConstraints"] = [constraint]
        if extra.get("tolerate"):
            spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
        if "claim" in extra:
            spec["volumes"] = [
                {"name": "data", "persistentVolumeClaim": {"claimName": extra["claim"]}}
            ]
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": self.namespace, "labels": labels},
            "spec": spec,
        }

    def copy(self, i: int, copy: str, labels: dict[str, str], extra: J) -> J:
        """Pod ``i`` as given to one scheduler (``copy``: up, kd or pin), with its own delayed
        claim where it has one."""
        if "late" in extra:
            extra = {**extra, "claim": f"p{i}-{copy}-late"}
        return self.pod(f"p{i}-{copy}", labels, extra)

    def generated(self) -> list[tuple[dict[str, str], J]]:
        """The pods to place: each feature with its own odds, several at once."""
        rng = random.Random(SEED)  # the same pods every time it is asked
        apps = ["web", "db", "cache", "batch"]
        out = []
        for _ in range(PODS):
            labels = {"app": rng.choice(apps)}
            extra: J = {"cpu": rng.choice(["500m", "1", "2", "3"])}
            if rng.random() < 0.3:
                extra["ports"] = [rng.choice([8080, 9090])]
            if rng.random() < 0.3:
                extra["anti"] = ("app", rng.choice(apps), rng.choice([HOSTNAME, ZONE]))
            if rng.random() < 0.25:
                extra["affinity"] = ("app", rng.choice(apps), rng.choice([HOSTNAME, ZONE]))
            if rng.random() < 0.3:
                extra["spread"] = (rng.choice([HOSTNAME, ZONE]), 1, None)
            if rng.random() < 0.2:
                extra["claim"] = rng.choice(["pinned", "pinned", "never"])
            if rng.random() < 0.3:
                extra["prefer"] = rng.choice(self.nodes)
            if rng.random() < 0.2 and "claim" not in extra:
                extra["late"] = rng.choice(self.nodes)  # a delayed claim, its volume there
            elif rng.random() < 0.08 and "claim" not in extra:
                extra["claim"] = "solo"  # ReadWriteOncePod, in use
            if rng.random() < 0.15:
                extra["anti"] = ("app", rng.sample(apps, 2), rng.choice([HOSTNAME, ZONE]))
            if "spread" in extra and rng.random() < 0.4:
                extra["spread"] = (*extra["spread"][:2], 4)  # more domains than zones
            if rng.random() < 0.3:
                extra["tolerate"] = True
            # The score plugins' inputs: preferred pod (anti-)affinity, a soft spread.
            if rng.random() < 0.3:
                anti = rng.random() < 0.5
                topology = rng.choice([HOSTNAME, ZONE])
                extra["likes"] = (rng.choice(apps), topology, rng.choice([10, 80]), anti)
            if "spread" in extra and not extra["spread"][2] and rng.random() < 0.5:
                extra["soft"] = True  # (minDomains is for DoNotSchedule only)
            out.append((labels, extra))
        # Plain web pods: only the Service's system-default spreading tells the nodes apart.
        out += [({"app": "web"}, {"cpu": "100m"}), ({"app": "web"}, {"cpu": "250m"})]
        return out


# --- verdicts ------------------------------------------------------------------------------

REASON = re.compile(r"(\d+) (.+?)(?=, \d+ |; \d+ |$)")


def reasons(message: str) -> Counter[str]:
    """The node reasons of an unschedulable message, counted ("0/N nodes are available: 2 x,
    1 y." with kube-scheduler's commas or kopf-dra's semicolons), and preemption's after it
    (keys "preemption: <reason>")."""
    found = re.match(r"0/(\d+) nodes are available: (.*)", message, re.S)
    assert found is not None, message
    filtered, _, preempted = found[2].partition(" preemption: ")
    # What kube-scheduler's DynamicResources PostFilter says before preemption's part: after a
    # PreFilter rejection, that it cannot read the state its PreFilter never wrote (". not
    # found", 1.37); for a pod without claims, on 1.36, "no new claims to deallocate, ".
    filtered = filtered.removesuffix(". not found").removesuffix(" no new claims to deallocate,")
    filtered = filtered.rstrip(".")
    out: Counter[str] = Counter({"nodes": int(found[1])})
    if not REASON.match(filtered):
        out[filtered] += 1  # a PreFilter rejection: no per-node counts
        return out
    for count, reason in REASON.findall(filtered):
        for part in reason.split(", "):  # kopf-dra joins a node's several reasons
            out[part] += int(count)
    preempted = re.sub(r"^0/\d+ nodes are available: ", "", preempted).rstrip(".")
    for count, reason in REASON.findall(preempted):
        out[f"preemption: {reason}"] += int(count)
    return out


async def verdict(kube: KubeAPI, namespace: str, name: str) -> tuple[str, str]:
    """("bound", node) or ("unschedulable", message), whichever the pod gets first."""

    async def decided() -> tuple[str, str] | None:
        pod = await kube.get("Pod", name, namespace)
        node = pod["spec"].get("nodeName")
        if node:
            return ("bound", node)
        for c in pod.get("status", {}).get("conditions") or []:
            if c["type"] == "PodScheduled" and c["status"] == "False" and c.get("message"):
                return ("unschedulable", c["message"])
        return None

    return await eventually(decided, within=60, what=f"a verdict on pod {name}")


async def gone(kube: KubeAPI, namespace: str, name: str) -> None:
    """Deleted at once (no kubelet runs these pods to end them gracefully)."""
    path = kube.resource("Pod").path(namespace, name)
    await kube.call(
        "DELETE", path, body={"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
    )

    async def absent() -> bool:
        return await kube.get_or_none("Pod", name, namespace) is None

    await eventually(absent, what=f"pod {name} gone")


async def placed(kube: KubeAPI, body: J, scheduler: str) -> tuple[str, str]:
    body = {**body, "spec": {**body["spec"], "schedulerName": scheduler}}
    await kube.create(body)
    name = body["metadata"]["name"]
    try:
        return await verdict(kube, body["metadata"]["namespace"], name)
    finally:
        await gone(kube, body["metadata"]["namespace"], name)


FINAL_SCORE = re.compile(
    r'"Calculated node\'s final score for pod" pod="([^"]+)" node="([^"]+)" score=(\d+)'
)


def top_scored(log: str) -> dict[str, set[str]]:
    """By pod ("namespace/name"): the nodes kube-scheduler's final scores put first (a pod with
    one feasible node is not scored: absent)."""
    scores: dict[str, dict[str, int]] = {}
    for pod, node, score in FINAL_SCORE.findall(log):
        scores.setdefault(pod, {})[node] = int(score)
    return {
        pod: {n for n, s in by_node.items() if s == max(by_node.values())}
        for pod, by_node in scores.items()
    }


async def test_kopf_dra_and_kube_scheduler_agree_on_whole_pods(
    kube: KubeAPI, kubeconfig: Path, namespace: str, kopf_dra: Scheduler, tmp_path: Path
) -> None:
    scene = Scene(namespace)
    await scene.create(kube)
    profile = f"upstream-{scene.run}"
    differences: list[str] = []
    tally: Counter[str] = Counter()
    both_bound: dict[str, tuple[str, str, str]] = {}  # their pod: case, their node, ours
    with upstream(kubeconfig, profile, logs=tmp_path):
        # The PV controller binds the claims their volumes name before anything counts (a
        # scheduler that met one unbound would say so: not the same verdict).
        for claim in ["pinned", *(late for late, _ in scene.late_claims())]:
            await eventually(
                functools.partial(claim_phase, kube, namespace, claim, "Bound"),
                within=60,
                what=f"the PV controller binding claim {claim}",
            )
        for i, (labels, extra) in enumerate(scene.generated()):
            theirs = await placed(kube, scene.copy(i, "up", labels, extra), profile)
            ours = await placed(kube, scene.copy(i, "kd", labels, extra), "kopf-dra")
            case = f"p{i} {labels} {extra}"
            if theirs[0] != ours[0]:
                differences.append(f"{case}: kube-scheduler {theirs}, kopf-dra {ours}")
                continue
            tally[theirs[0]] += 1
            if theirs[0] == "bound":
                copy = scene.copy(i, "up", labels, extra)["metadata"]["name"]
                both_bound[f"{namespace}/{copy}"] = (case, theirs[1], ours[1])
            if theirs[0] == "unschedulable":
                if reasons(theirs[1]) != reasons(ours[1]):
                    differences.append(
                        f"{case}: kube-scheduler {theirs[1]!r}, kopf-dra {ours[1]!r}"
                    )
                continue
            if theirs[1] == ours[1]:
                tally["same node"] += 1
                continue
            pinned = scene.copy(i, "pin", labels, extra)
            pinned["spec"]["nodeSelector"] = {**scene.selector(), HOSTNAME: ours[1]}
            check = await placed(kube, pinned, profile)
            if check != ("bound", ours[1]):
                differences.append(
                    f"{case}: kopf-dra chose {ours[1]}, kube-scheduler refuses it: {check}"
                )
    top = top_scored((tmp_path / "kube-scheduler.log").read_text())
    for pod, (case, their_node, our_node) in both_bound.items():
        first = top.get(pod, {their_node})
        tally["among upstream's top-scored"] += our_node in first
        if our_node not in first:
            differences.append(
                f"{case}: kopf-dra chose {our_node}, kube-scheduler's top scores: {sorted(first)}"
            )
    tally["scored by kube-scheduler"] = len(both_bound.keys() & top.keys())
    pods = len(scene.generated())
    print(f"\nside by side: {pods} pods on {len(scene.nodes)} nodes: {dict(tally)}")
    assert not differences, "\n".join(differences)
    # The set exercises both verdicts.
    assert tally["bound"], tally
    assert tally["unschedulable"], tally
    assert tally["scored by kube-scheduler"], tally  # its log was read: the check compared


async def claim_phase(kube: KubeAPI, namespace: str, name: str, phase: str) -> bool:
    pvc = await kube.get("PersistentVolumeClaim", name, namespace)
    return bool((pvc.get("status") or {}).get("phase") == phase)


async def test_a_delayed_binding_volume_is_bound_where_the_pod_goes(
    kube: KubeAPI, kubeconfig: Path, namespace: str, kopf_dra: Scheduler
) -> None:
    """WaitForFirstConsumer: the claim waits for a scheduler to choose; the local volume that
    can serve it is on one node only. Each scheduler (the same objects, a claim and a volume of
    its own) places its pod there, writes the volume's claimRef at PreBind, and the PV
    controller binds the claim before the pod is bound."""
    scene = Scene(namespace)
    await scene.create(kube)
    profile = f"upstream-{scene.run}"
    with upstream(kubeconfig, profile):
        for who, scheduler in (("up", profile), ("kd", "kopf-dra")):
            await kube.create(scene.local_pv(f"late-{who}", scene.nodes[3]))
            await kube.create(scene.claim(f"late-{who}", scene.local))
            body = scene.pod(f"late-{who}", {"app": "late"}, {"claim": f"late-{who}"})
            body["spec"]["schedulerName"] = scheduler
            await kube.create(body)
            # Bound once the scheduler's informers show the volume (a first attempt may come
            # before they do, and be retried on the volume's event).
            got = await eventually(
                functools.partial(bound_node, kube, namespace, f"late-{who}"),
                within=60,
                what=f"{scheduler} binding pod late-{who}",
            )
            assert got == scene.nodes[3], scheduler
            pvc = await kube.get("PersistentVolumeClaim", f"late-{who}", namespace)
            assert pvc["spec"]["volumeName"] == f"{scene.run}-late-{who}", scheduler
            # The PV controller writes the claim's phase after its volume name (a second write).
            await eventually(
                functools.partial(claim_phase, kube, namespace, f"late-{who}", "Bound"),
                what=f"claim late-{who} Bound",
            )
