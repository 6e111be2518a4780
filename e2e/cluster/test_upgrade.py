"""A live upgrade of the control plane under a running kopf-dra (``make e2e-cluster``'s upgrade
session): the complete local cluster starts on the minor before (``KOPF_DRA_KUBERNETES_VERSION``,
1.36.3), kopf-dra is installed with Helm and pods hold devices; then kube-apiserver, then
kube-controller-manager and kube-scheduler, then each kubelet in place, then kube-proxy move to
``KOPF_DRA_E2E_UPGRADE_TO`` (the default release, 1.37.2), as Kubernetes orders an upgrade.
The second upgrade session starts on the default release and moves the control plane to the next
minor's pre-release (1.38.0-beta.0) while the kubelets and kube-proxy stay where they are
(``KOPF_DRA_E2E_UPGRADE_NODES_TO`` = the release it started on), as the version skew policy
allows: 1.38.0-beta.0's kubelet and kube-proxy need ``sigs.k8s.io/iptables-wrappers``, which the
Go module proxy here does not serve, so they cannot be built here.

A sampler reads the claims every second throughout: the pods that ran before keep the same
claims, allocated to the same devices and reserved for them, and no device is in two
allocations. A new pod gets a device before, between and after the steps (on the node just
upgraded, after a kubelet's). kopf-dra's components switch to the new release's defaults in
place (logged), and no pod restarts. The timeline is printed and kept beside the cluster's logs
(``<state dir>/timelines/upgrade-<TO>.txt``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import aiohttp

from e2e.chaos.invariants import Snapshot, exclusive_devices
from e2e.cluster.conftest import NAMESPACE, shell
from e2e.cluster.test_deployed import LEASES, component_pods, restarts
from e2e.cluster.test_operations import WORKLOAD_NS, running_pods, workload
from operators.api.features import Release
from operators.demo.bringup import SCHEDULER_NAME
from operators.kube.api import ApiError, KubeAPI, NotFoundError
from operators.localcluster import cluster, controlplane
from tests.integration.helpers import eventually, in_background

T = TypeVar("T")
FROM = controlplane.kubernetes_version()
TO = os.environ.get("KOPF_DRA_E2E_UPGRADE_TO") or controlplane.default_version()
#: Where the kubelets and kube-proxy go (FROM: they stay).
NODES_TO = os.environ.get("KOPF_DRA_E2E_UPGRADE_NODES_TO") or TO
TO_MINOR = str(Release.parse(TO))  # "1.37", as the components log the version they follow
STEADY = 2  # pods holding a GPU from before the upgrade to after it
#: What a request meets while kube-apiserver is replaced.
UNREACHABLE = (ApiError, aiohttp.ClientError, ConnectionError, OSError, TimeoutError)


class Timeline:
    """What happened when, seconds from the start."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.rows: list[str] = []

    def mark(self, text: str) -> None:
        self.rows.append(f"{time.monotonic() - self.start:6.1f}s  {text}")

    def render(self) -> str:
        return "\n".join(self.rows)


def _reachable(probe: Callable[[], Awaitable[T | None]]) -> Callable[[], Awaitable[T | None]]:
    """``probe``, None while the API server (or a kubelet, for logs) does not answer."""

    async def run() -> T | None:
        try:
            return await probe()
        except (*UNREACHABLE, cluster.ClusterError):
            return None

    return run


def _held(claim: dict[str, Any]) -> tuple[list[str], list[tuple[str, str, str]]]:
    status = claim.get("status") or {}
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
    return (
        sorted(r["uid"] for r in status.get("reservedFor") or []),
        sorted((r["driver"], r["pool"], r["device"]) for r in results),
    )


@contextlib.asynccontextmanager
async def watched(
    kube: KubeAPI, held: dict[str, tuple[list[str], list[tuple[str, str, str]]]], tl: Timeline
) -> AsyncIterator[list[str]]:
    """Every second: each claim in ``held`` still exists with the same reservation and devices,
    and no device is in two allocations. Yields the violations seen (distinct, with when)."""
    seen: list[str] = []
    unreachable_since: float | None = None

    def violation(text: str) -> None:
        if all(not v.endswith(text) for v in seen):
            seen.append(f"{time.monotonic() - tl.start:6.1f}s {text}")

    async def sample() -> None:
        nonlocal unreachable_since
        while True:
            try:
                claims = (await kube.list("ResourceClaim"))["items"]
                slices = (await kube.list("ResourceSlice"))["items"]
            except UNREACHABLE:
                if unreachable_since is None:
                    unreachable_since = time.monotonic()
                    tl.mark("(the API server stops answering)")
                await asyncio.sleep(0.2)
                continue
            if unreachable_since is not None:
                tl.mark(
                    f"(the API server answers again, {time.monotonic() - unreachable_since:.1f} s)"
                )
                unreachable_since = None
            by_name = {f"{c['metadata']['namespace']}/{c['metadata']['name']}": c for c in claims}
            for key, before in held.items():
                claim = by_name.get(key)
                if claim is None:
                    violation(f"claim {key} is gone while its pod runs")
                elif _held(claim) != before:
                    violation(f"claim {key} changed while its pod runs: {_held(claim)} != {before}")
            snapshot = Snapshot.load(claims=claims, slices=slices)
            for v in exclusive_devices(snapshot):
                violation(str(v))
            await asyncio.sleep(1.0)

    async with in_background(sample()):
        yield seen


async def _arrival(
    kube: KubeAPI, installed: cluster.Cluster, name: str, tl: Timeline, node: str | None = None
) -> None:
    """A new pod with a GPU claim, Running (on ``node`` when given), then deleted with its
    claim: kopf-dra schedules, the claim controllers create and clean up, the kubelet runs."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": WORKLOAD_NS},
        "spec": {
            "schedulerName": SCHEDULER_NAME,
            "terminationGracePeriodSeconds": 1,
            **({"nodeSelector": {"kubernetes.io/hostname": node}} if node else {}),
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "arrival"}],
            "containers": [
                {
                    "name": "job",
                    "image": "docker.io/library/busybox:1.36",
                    "imagePullPolicy": "Never",
                    "command": ["sleep", "3600"],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }
    await eventually(_reachable(lambda: kube.create(pod)), within=60, what=f"{name} created")
    created, bound = time.monotonic(), 0.0

    async def running() -> dict[str, Any] | None:
        nonlocal bound
        got = await kube.get("Pod", name, WORKLOAD_NS)
        if got["spec"].get("nodeName") and not bound:
            bound = time.monotonic() - created
        return got if got["status"].get("phase") == "Running" else None

    got = await eventually(_reachable(running), within=120, what=f"{name} Running")
    claim = got["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    tl.mark(
        f"new pod {name} Running on {got['spec']['nodeName']} with claim {claim} "
        f"(bound in {bound:.1f} s, Running in {time.monotonic() - created:.1f} s)"
    )
    await kube.delete("Pod", name, WORKLOAD_NS)

    async def gone() -> bool:
        for kind, obj in (("Pod", name), ("ResourceClaim", claim)):
            try:
                await kube.get(kind, obj, WORKLOAD_NS)
                return False
            except NotFoundError:
                pass
        return True

    await eventually(_reachable(gone), within=90, what=f"{name} and its claim gone")


def _logs(installed: cluster.Cluster, pod: str) -> list[dict[str, Any]]:
    records = []
    for line in shell(installed, f"kubectl -n {NAMESPACE} logs {pod}").splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict):
                records.append(record)
    return records


def _followed(installed: cluster.Cluster, pod: str) -> bool:
    """The component noticed the new version and started again with its defaults."""
    records = _logs(installed, pod)
    noticed = [
        i
        for i, r in enumerate(records)
        if "another Kubernetes version" in str(r.get("event"))
        and str(r.get("now", "")).startswith(TO_MINOR)
    ]
    return bool(noticed) and any(
        r.get("event") == "following Kubernetes" and str(r.get("version", "")).startswith(TO_MINOR)
        for r in records[noticed[0] :]
    )


async def _every_component_followed(kube: KubeAPI, installed: cluster.Cluster) -> list[str]:
    pods = [
        p["metadata"]["name"]
        for p in await component_pods(kube)
        if p["metadata"]["labels"]["app.kubernetes.io/name"] in LEASES
    ]

    async def all_followed() -> list[str] | None:
        done = [p for p in pods if await asyncio.to_thread(_followed, installed, p)]
        return pods if len(done) == len(pods) else None

    return await eventually(
        _reachable(all_followed),
        within=180,
        what=f"every component following {TO_MINOR}",
    )


def _pods_state(pods: list[dict[str, Any]]) -> dict[str, tuple[str, int]]:
    return {p["metadata"]["name"]: (p["metadata"]["uid"], restarts(p)) for p in pods}


async def _node_at(kube: KubeAPI, node: str, version: str) -> bool:
    got = await kube.get("Node", node)
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in got["status"]["conditions"])
    return ready and got["status"]["nodeInfo"]["kubeletVersion"] == version


async def test_a_live_control_plane_upgrade_loses_no_claim_and_restarts_nothing(
    installed: cluster.Cluster, kube: KubeAPI
) -> None:
    assert installed.nodes is not None
    assert Release.parse(FROM) < Release.parse(TO), f"an upgrade from {FROM} to {TO}"
    tl = Timeline()
    tl.mark(f"cluster on {FROM}, kopf-dra installed with Helm")
    for obj in workload("steady", replicas=STEADY):
        await kube.create(obj)
    arrival = workload("arrival", replicas=0)[1]  # the template only
    await kube.create(arrival)
    steady = await eventually(
        lambda: running_pods(kube, "steady", STEADY), within=180, what="the steady pods Running"
    )
    claims = {
        f"{WORKLOAD_NS}/{p['status']['resourceClaimStatuses'][0]['resourceClaimName']}": p
        for p in steady
    }
    held = {
        key: _held(await kube.get("ResourceClaim", key.split("/")[1], WORKLOAD_NS))
        for key in claims
    }
    tl.mark(f"{STEADY} pods hold devices: {sorted(d for _, ds in held.values() for d in ds)}")
    components = _pods_state(await component_pods(kube))
    await _arrival(kube, installed, "before", tl)

    async with watched(kube, held, tl) as violations:
        tl.mark(f"kube-apiserver {FROM} -> {TO}")
        await asyncio.to_thread(installed.upgrade_apiserver, TO)
        tl.mark("kube-apiserver ready")
        await _arrival(kube, installed, "after-apiserver", tl)
        followed = await _every_component_followed(kube, installed)
        tl.mark(f"every kopf-dra component follows {TO_MINOR} ({len(followed)} pods, logged)")
        tl.mark(f"kube-controller-manager, kube-scheduler {FROM} -> {TO}")
        await asyncio.to_thread(installed.upgrade_components, TO)
        await _arrival(kube, installed, "after-components", tl)
        if NODES_TO == FROM:
            tl.mark(f"kubelets and kube-proxy stay on {FROM} (version skew policy)")
        for node in installed.nodes.nodes if NODES_TO != FROM else ():
            tl.mark(f"kubelet of {node.name} {FROM} -> {NODES_TO}, in place")
            await asyncio.to_thread(installed.upgrade_kubelet, node.name, NODES_TO)
            await eventually(
                _reachable(functools.partial(_node_at, kube, node.name, NODES_TO)),
                within=120,
                what=f"{node.name} Ready with kubelet {NODES_TO}",
            )
            tl.mark(f"{node.name} Ready, kubelet {NODES_TO}")
            await _arrival(kube, installed, f"after-kubelet-{node.name}", tl, node=node.name)
        if NODES_TO != FROM:
            tl.mark(f"kube-proxy {FROM} -> {NODES_TO}")
            await asyncio.to_thread(installed.upgrade_proxy, NODES_TO)
        await _arrival(kube, installed, "after", tl)
    tl.mark("upgrade done")
    out = installed.state_dir / "timelines"
    out.mkdir(exist_ok=True)
    (out / f"upgrade-{TO}.txt").write_text(tl.render() + "\n")
    print(f"\nthe upgrade, {FROM} -> {TO}:\n{tl.render()}")
    assert not violations, violations

    version = await kube.version_info()
    assert version["gitVersion"] == TO
    for node in installed.nodes.nodes:
        assert await _node_at(kube, node.name, NODES_TO)
    # Nothing restarted: the same pods (no replacement), no container restarted.
    assert _pods_state(await component_pods(kube)) == components
    after = {p["metadata"]["name"]: p for p in await running_pods(kube, "steady", STEADY) or []}
    assert _pods_state(list(after.values())) == _pods_state(steady)
    for key, before in held.items():
        assert _held(await kube.get("ResourceClaim", key.split("/")[1], WORKLOAD_NS)) == before
