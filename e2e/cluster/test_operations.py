"""Day-two work on the installed cluster: rolling restarts, a node drain, a kubelet restart.

A sampler lists the components' pods every second while each runs and keeps the timeline of
ready replicas per component, which the tests check and write beside the cluster's logs
(``<state dir>/timelines/``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from e2e.cluster.conftest import NAMESPACE, shell
from e2e.cluster.test_deployed import LEASES, component_pods, ready
from operators.demo.bringup import SCHEDULER_NAME
from operators.kube.api import ConflictError, KubeAPI, NotFoundError
from operators.localcluster import cluster
from tests.integration.helpers import eventually, in_background

COMPONENTS = (*LEASES, "kopf-dra-fabric-manager-sim")
#: A workload with a device, as users run one: a Deployment whose pods claim a GPU from a
#: template (the claim-templates controller makes each pod's claim).
WORKLOAD_NS = "kopf-dra-ops"


class Timeline:
    """Ready replicas per component, one sample a second."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, dict[str, int]]] = []

    def min_ready(self, component: str) -> int:
        return min(s[component] for _, s in self.samples)

    def downtime(self, component: str) -> float:
        """Seconds sampled with no ready replica (one sample a second)."""
        return float(sum(1 for _, s in self.samples if s[component] == 0))

    def render(self) -> str:
        head = "t(s)  " + "  ".join(c.removeprefix("kopf-dra-") for c in COMPONENTS)
        rows = [
            f"{t:5.0f}  " + "  ".join(f"{s[c]:>{len(c) - 9}}" for c in COMPONENTS)
            for t, s in self.samples
        ]
        return "\n".join([head, *rows])


@contextlib.asynccontextmanager
async def sampled(kube: KubeAPI, c: cluster.Cluster, name: str) -> AsyncIterator[Timeline]:
    timeline = Timeline()
    start = time.monotonic()

    async def sample() -> None:
        while True:
            counts = dict.fromkeys(COMPONENTS, 0)
            for pod in await component_pods(kube):
                component = pod["metadata"]["labels"].get("app.kubernetes.io/name", "")
                if (
                    component in counts
                    and ready(pod)
                    and not pod["metadata"].get("deletionTimestamp")
                ):
                    counts[component] += 1
            timeline.samples.append((time.monotonic() - start, counts))
            await asyncio.sleep(1.0)

    try:
        async with in_background(sample()):
            yield timeline
    finally:
        out = c.state_dir / "timelines"
        out.mkdir(exist_ok=True)
        (out / f"{name}.txt").write_text(timeline.render() + "\n")
        print(f"\n{name}:\n{timeline.render()}")


async def leaders_held(kube: KubeAPI) -> dict[str, str]:
    """One running, ready replica holds each Lease (waits for a takeover to finish)."""

    async def held() -> dict[str, str] | None:
        running = {p["metadata"]["name"] for p in await component_pods(kube) if ready(p)}
        holders = {
            name: (await kube.get("Lease", name, NAMESPACE))["spec"].get("holderIdentity") or ""
            for name in LEASES
        }
        return holders if all(h in running for h in holders.values()) else None

    result: dict[str, str] = await eventually(held, within=60, what="one ready leader per Lease")
    return result


async def test_rollout_restart_keeps_a_ready_replica_of_each_component(
    installed: cluster.Cluster, kube: KubeAPI
) -> None:
    async with sampled(kube, installed, "rollout-restart") as timeline:
        for deployment in COMPONENTS:
            await asyncio.to_thread(
                shell, installed, f"kubectl -n {NAMESPACE} rollout restart deployment {deployment}"
            )
            await asyncio.to_thread(
                shell,
                installed,
                f"kubectl -n {NAMESPACE} rollout status deployment {deployment} --timeout=180s",
            )
        await leaders_held(kube)
        # One replica by design: it was down while its successor started, and comes back.
        await eventually(
            lambda: _sampled_ready(timeline, "kopf-dra-fabric-manager-sim"),
            within=60,
            what="a sample with the fabric manager simulator ready again",
        )
    for component in LEASES:
        assert timeline.min_ready(component) >= 1, (component, timeline.render())
    print(f"fabric-manager-sim down {timeline.downtime('kopf-dra-fabric-manager-sim'):.0f} s")


async def _sampled_ready(timeline: Timeline, component: str) -> bool:
    return bool(timeline.samples) and timeline.samples[-1][1][component] >= 1


def workload(
    name: str, replicas: int, device_class: str = "gpu.example.kopf-dra.io"
) -> list[dict[str, Any]]:
    """A Deployment whose pods each claim one device of ``device_class`` from a template."""
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": WORKLOAD_NS},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]
                }
            }
        },
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": WORKLOAD_NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "schedulerName": SCHEDULER_NAME,
                    "terminationGracePeriodSeconds": 1,
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": name}],
                    "containers": [
                        {
                            "name": "train",
                            "image": "docker.io/library/busybox:1.36",
                            "imagePullPolicy": "Never",
                            "command": ["sleep", "3600"],
                            "resources": {"claims": [{"name": "gpu"}]},
                        }
                    ],
                },
            },
        },
    }
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": WORKLOAD_NS}}
    return [namespace, template, deployment]


async def workload_pods(kube: KubeAPI, name: str) -> list[dict[str, Any]]:
    pods = (await kube.list("Pod", WORKLOAD_NS, label_selector=f"app={name}"))["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


async def running_pods(kube: KubeAPI, name: str, count: int) -> list[dict[str, Any]] | None:
    pods = await workload_pods(kube, name)
    running = [p for p in pods if p["status"].get("phase") == "Running" and ready(p)]
    return running if len(running) == count else None


async def _running_trainers(kube: KubeAPI, count: int) -> list[dict[str, Any]] | None:
    return await running_pods(kube, "trainer", count)


async def remove_workload(kube: KubeAPI, name: str) -> None:
    """Delete the Deployment; wait until its pods and their claims are gone."""
    with contextlib.suppress(NotFoundError):
        await kube.delete("Deployment", name, WORKLOAD_NS)

    async def gone() -> bool:
        claims = (await kube.list("ResourceClaim", WORKLOAD_NS))["items"]
        mine = [c for c in claims if c["metadata"]["name"].startswith(f"{name}-")]
        return not await workload_pods(kube, name) and not mine

    await eventually(gone, within=90, what=f"the {name} pods and their claims to be gone")


async def _claim_pool(kube: KubeAPI, pod: dict[str, Any]) -> str:
    (status,) = pod["status"]["resourceClaimStatuses"]
    claim = await kube.get("ResourceClaim", status["resourceClaimName"], WORKLOAD_NS)
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    pool: str = result["pool"]
    return pool


@pytest.fixture
async def trainers(installed: cluster.Cluster, kube: KubeAPI) -> AsyncIterator[None]:
    for obj in workload("trainer", replicas=1):
        with contextlib.suppress(ConflictError):  # the namespace, made by an earlier test
            await kube.create(obj)
    yield
    await remove_workload(kube, "trainer")


async def test_a_drain_honours_the_budgets_and_a_pod_with_a_device_moves_with_its_claim(
    installed: cluster.Cluster, kube: KubeAPI, trainers: None
) -> None:
    (pod,) = await eventually(
        lambda: _running_trainers(kube, 1), within=120, what="the trainer Running"
    )
    node = pod["spec"]["nodeName"]
    old_claim = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    assert await _claim_pool(kube, pod) == node
    async with sampled(kube, installed, "drain") as timeline:
        await asyncio.to_thread(
            shell,
            installed,
            f"kubectl drain {node} --ignore-daemonsets --delete-emptydir-data --timeout=300s",
        )
        try:
            (moved,) = await eventually(
                lambda: _running_trainers(kube, 1), within=120, what="the trainer back"
            )
            for component in COMPONENTS:
                await asyncio.to_thread(
                    shell,
                    installed,
                    f"kubectl -n {NAMESPACE} rollout status deployment {component} --timeout=180s",
                )
            await leaders_held(kube)
        finally:
            await asyncio.to_thread(shell, installed, f"kubectl uncordon {node}")
    for component in LEASES:
        assert timeline.min_ready(component) >= 1, (component, timeline.render())
    others = [n.name for n in installed.nodes.nodes if n.name != node] if installed.nodes else []
    for p in await component_pods(kube):
        if not p["metadata"]["name"].startswith("kopf-dra-driver-"):
            assert p["spec"]["nodeName"] in others, p["metadata"]["name"]
    # The evicted pod's claim went with it (the pod owned it); its replacement got a claim and
    # a device of its own, on the node that is left.
    assert moved["spec"]["nodeName"] in others
    assert await _claim_pool(kube, moved) == moved["spec"]["nodeName"]
    with pytest.raises(NotFoundError):
        await kube.get("ResourceClaim", old_claim, WORKLOAD_NS)


async def test_a_kubelet_restart_keeps_the_pods_devices_and_the_driver_re_registers(
    installed: cluster.Cluster, kube: KubeAPI, trainers: None
) -> None:
    (pod,) = await eventually(
        lambda: _running_trainers(kube, 1), within=120, what="the trainer Running"
    )
    assert installed.nodes is not None
    node = installed.nodes.by_name(pod["spec"]["nodeName"])
    (driver,) = [
        p
        for p in await component_pods(kube)
        if p["metadata"]["name"].startswith("kopf-dra-driver-")
        and p["spec"]["nodeName"] == node.name
    ]
    logs = f"kubectl -n {NAMESPACE} logs {driver['metadata']['name']}"
    registrations = shell(installed, logs).count("registered with the kubelet")
    assert registrations >= 1
    uid, claim = pod["metadata"]["uid"], pod["status"]["resourceClaimStatuses"][0]
    await asyncio.to_thread(node.restart_kubelet)

    async def re_registered() -> bool:
        # The API server reads logs through the kubelet: none while it restarts.
        try:
            text = await asyncio.to_thread(
                installed.run_kubectl, "-n", NAMESPACE, "logs", driver["metadata"]["name"]
            )
        except cluster.ClusterError:
            return False
        return text.count("registered with the kubelet") > registrations

    await eventually(re_registered, within=90, what="the driver registered again")
    # The same pod, its container never restarted, its claim still allocated and reserved.
    (after,) = await eventually(
        lambda: _running_trainers(kube, 1), within=60, what="the trainer Running"
    )
    assert after["metadata"]["uid"] == uid
    assert after["status"]["containerStatuses"][0]["restartCount"] == 0
    assert after["status"]["resourceClaimStatuses"][0] == claim
    allocated = await kube.get("ResourceClaim", claim["resourceClaimName"], WORKLOAD_NS)
    assert {r["uid"] for r in allocated["status"]["reservedFor"]} == {uid}
    # The driver serves the restarted kubelet: a second pod gets its device prepared there.
    await kube.patch(
        "Deployment",
        "trainer",
        {"spec": {"replicas": 2}},
        WORKLOAD_NS,
    )
    running = await eventually(
        lambda: _running_trainers(kube, 2), within=120, what="a second trainer Running"
    )
    assert all(p["status"].get("resourceClaimStatuses") for p in running)
