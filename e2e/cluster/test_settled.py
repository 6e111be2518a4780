"""After everything the session did (scenarios, a leader's deletion): the invariants of
``make chaos`` hold, and no component pod restarted."""

from __future__ import annotations

from e2e.chaos.invariants import Snapshot, bound_pods_hold_claims, claims_held, exclusive_devices
from e2e.cluster.conftest import NAMESPACE
from e2e.cluster.test_deployed import restarts
from operators.kube.api import KubeAPI
from operators.localcluster import cluster


async def test_no_device_is_in_two_allocations_and_bound_pods_hold_their_claims(
    installed: cluster.Cluster, kube: KubeAPI
) -> None:
    snapshot = Snapshot.load(
        pods=(await kube.list("Pod"))["items"],
        claims=(await kube.list("ResourceClaim"))["items"],
        slices=(await kube.list("ResourceSlice"))["items"],
        classes=(await kube.list("DeviceClass"))["items"],
        nodes=(await kube.list("Node"))["items"],
    )
    assert snapshot.slices, "the driver's slices"
    violations = [
        *exclusive_devices(snapshot),
        *claims_held(snapshot),
        *bound_pods_hold_claims(snapshot),
    ]
    assert not violations, violations


async def test_no_component_restarted(installed: cluster.Cluster, kube: KubeAPI) -> None:
    pods = (await kube.list("Pod", NAMESPACE))["items"]
    assert pods
    assert {p["metadata"]["name"]: restarts(p) for p in pods if restarts(p)} == {}
