"""``helm upgrade`` with a changed value and a new image tag rolls every component while a burst
of pods with devices is scheduled; afterwards the invariants of ``make chaos`` hold."""

from __future__ import annotations

import asyncio
from typing import Any

from e2e.chaos.invariants import Snapshot, bound_pods_hold_claims, claims_held, exclusive_devices
from e2e.cluster.conftest import HELM_VALUES, NAMESPACE, ROOT, shell
from e2e.cluster.test_deployed import LEASES, component_pods
from e2e.cluster.test_operations import (
    COMPONENTS,
    leaders_held,
    remove_workload,
    running_pods,
    sampled,
    workload,
)
from operators import __version__
from operators.kube.api import ConflictError, KubeAPI
from operators.localcluster import cluster
from tests.integration.helpers import eventually

#: The same image under a new tag, as a rebuild of the same commit would be pushed.
NEW_TAG = f"{__version__}-e2e-upgrade"
BURST = 6  # one 1g.5gb MIG partition each: 7 per A100, one A100 per node


async def _snapshot(kube: KubeAPI) -> Snapshot:
    return Snapshot.load(
        pods=(await kube.list("Pod"))["items"],
        claims=(await kube.list("ResourceClaim"))["items"],
        slices=(await kube.list("ResourceSlice"))["items"],
        classes=(await kube.list("DeviceClass"))["items"],
        nodes=(await kube.list("Node"))["items"],
    )


async def _every_allocation_reserved(kube: KubeAPI) -> list[str] | None:
    claims = (await kube.list("ResourceClaim"))["items"]
    unreserved = [
        f"{c['metadata']['namespace']}/{c['metadata']['name']}"
        for c in claims
        if (c.get("status") or {}).get("allocation") and not c["status"].get("reservedFor")
    ]
    return None if unreserved else ["ok"]


def _images(pods: list[dict[str, Any]]) -> set[str]:
    return {c["image"] for p in pods for c in p["spec"]["containers"]}


async def test_helm_upgrade_rolls_every_component_under_a_burst_and_the_invariants_hold(
    installed: cluster.Cluster, kube: KubeAPI
) -> None:
    assert installed.nodes is not None
    for node in installed.nodes.nodes:
        node.ctr("images", "tag", f"docker.io/library/kopf-dra:{__version__}",
                 f"docker.io/library/kopf-dra:{NEW_TAG}")  # fmt: skip
    upgrade = (
        f"helm upgrade kopf-dra charts/kopf-dra --namespace kopf-dra "
        f"-f {HELM_VALUES.relative_to(ROOT)} --set image.tag={NEW_TAG} "
        "--set scheduler.resources.requests.cpu=150m"
    )
    try:
        await _upgrade_under_a_burst(installed, kube, upgrade)
    finally:  # the burst's devices are the next tests' (a failure here must not hold them)
        await remove_workload(kube, "burst")


async def _upgraded(kube: KubeAPI) -> list[dict[str, Any]] | None:
    """The component pods, once every one not being deleted runs the new image (a rollout is
    done when the new pods are ready; the old ones may still be terminating)."""
    pods = [p for p in await component_pods(kube) if not p["metadata"].get("deletionTimestamp")]
    return pods if _images(pods) == {f"kopf-dra:{NEW_TAG}"} else None


async def _upgrade_under_a_burst(installed: cluster.Cluster, kube: KubeAPI, upgrade: str) -> None:
    async with sampled(kube, installed, "helm-upgrade") as timeline:
        upgrading = asyncio.create_task(asyncio.to_thread(shell, installed, upgrade))
        for obj in workload("burst", replicas=BURST, device_class="mig-1g-5gb.example.kopf-dra.io"):
            try:
                await kube.create(obj)
            except ConflictError:  # the namespace, made by an earlier test
                assert obj["kind"] == "Namespace"
        await upgrading
        for kind in ("deployment", "daemonset"):
            await asyncio.to_thread(
                shell, installed, f"kubectl -n {NAMESPACE} rollout status {kind} --timeout=300s"
            )
        burst = await eventually(
            lambda: running_pods(kube, "burst", BURST), within=180, what="the burst Running"
        )
        await leaders_held(kube)
    pods = await eventually(
        lambda: _upgraded(kube), within=60, what="every component pod on the new image"
    )
    (scheduler,) = {
        p["spec"]["containers"][0]["resources"]["requests"]["cpu"]
        for p in pods
        if p["metadata"]["labels"]["app.kubernetes.io/name"] == "kopf-dra-scheduler"
    }
    assert scheduler == "150m"
    for component in LEASES:
        assert timeline.min_ready(component) >= 1, (component, timeline.render())
    print(f"fabric-manager-sim down {timeline.downtime(COMPONENTS[-1]):.0f} s")
    assert all(p["status"].get("resourceClaimStatuses") for p in burst)
    snapshot = await _snapshot(kube)
    violations = [
        *exclusive_devices(snapshot),
        *claims_held(snapshot),
        *bound_pods_hold_claims(snapshot),
    ]
    assert not violations, violations
    await eventually(
        lambda: _every_allocation_reserved(kube), within=30, what="no allocation unreserved"
    )
