"""DRAOptionalNodeOperations (KEP-5945, 1.37 alpha) on real kubelets: a device whose slice says
``skipNodeOperations`` runs in a pod without the kubelet ever calling the driver for it.

The gate is off in the session's control plane (as upstream has it), so this module starts its
own: a 1.37 API server with DRAOptionalNodeOperations on (NodeDeclaredFeatures, which it needs,
is locked on in 1.37), the operators and the example drivers with the same gates, and two real
kubelets: ``kopf-dra-worker`` with the gate on, which declares the feature on its Node, and
``kopf-dra-worker2`` without it, which does not. Each driver publishes one plain T4 and one L4
whose profile group says ``skipNodeOperations: true``, so the L4 sits in a slice of its own
that skips NodePrepareResources and NodeUnprepareResources.

What shows the driver was not called, each observed where it happens: the kubelet's own count
of the gRPC calls it made to the driver (``dra_grpc_operations_duration_seconds``, by method)
and of the calls it skipped (``dra_node_prepare_skips_total``, ``dra_node_unprepare_skips_total``),
its log at ``--v=4`` (each call, with the claims it names), its DRA checkpoint (the claim with
``skipNodeOperations`` and no devices), and on the driver's side its log, its checkpoint and
the CDI spec it writes for each claim it prepares. A claim for the T4 on the same kubelet is the
control: the same observations see its calls.

Its nodes hold the host lock from the first test of the module to the last (a module fixture):
``conftest.py`` runs this module before any test of the session's real nodes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from operators.api.core import OPTIONAL_NODE_OPERATIONS, Node
from operators.api.features import Release
from operators.api.validation import SKIP_NODE_PREPARE, SKIP_NODE_UNPREPARE
from operators.demo.bringup import (
    DRIVER,
    E2E_NODES,
    SCHEDULER_NAME,
    System,
    VirtualNode,
    ensure_default_service_account,
    start_system,
)
from operators.demo.view import allocated_devices, scheduled_condition
from operators.driver import cdi
from operators.kube.api import KubeAPI, NotFoundError, resource_of
from operators.kube.client import make_api_client
from operators.localcluster import controlplane, realnode
from tests.integration.helpers import eventually
from tests.requires import unavailable

VERSION = controlplane.kubernetes_version()
RELEASE = Release.parse(VERSION)

pytestmark = pytest.mark.alpha_137  # not collected on 1.36 nor on an existing cluster

GATES = {OPTIONAL_NODE_OPERATIONS: True}
#: The kubelet with the gate (declares the feature) and the one without.
DECLARING, PLAIN = (n.name for n in E2E_NODES)
SKIPPED = [SKIP_NODE_PREPARE, SKIP_NODE_UNPREPARE]
SKIPPING_MODEL, PLAIN_MODEL = "L4", "T4"
PROFILES = {
    "gpus": [
        {"count": 1, "model": PLAIN_MODEL, "memory": "16Gi"},
        {"count": 1, "model": SKIPPING_MODEL, "memory": "24Gi", "skipNodeOperations": True},
    ],
    "nics": [],
    "deviceNodeHostPath": "/dev/null",
}
NAMESPACE = "kopf-dra-skip-node-ops"
RUNNING_WITHIN = 180.0
STARTED = "devices listed"


@dataclasses.dataclass
class Gated:
    """The gated control plane, its real nodes, a client and the operators."""

    cp: controlplane.ControlPlane
    nodes: realnode.RealNodes
    kube: KubeAPI
    system: System

    def driver_log(self, node: str) -> str:
        return (self.system.supervisor.log_dir / f"driver-{node}.log").read_text(errors="replace")

    def driver_checkpoint(self, node: str) -> dict[str, Any]:
        path = self.system.workdir / node / "state" / "checkpoint.json"
        claims: dict[str, Any] = json.loads(path.read_text())["claims"] if path.exists() else {}
        return claims

    def kubelet_log(self, node: str) -> str:
        return self.nodes.by_name(node).log("kubelet").read_text(errors="replace")

    def kubelet_claims(self, node: str) -> dict[str, dict[str, Any]]:
        """The kubelet's DRA checkpoint: the claims it has prepared or is preparing, by UID."""
        path = self.nodes.by_name(node).kubelet_dir / "dra_manager_state"
        if not path.exists():
            return {}
        data = json.loads(json.loads(path.read_text())["Data"])
        return {c["ClaimUID"]: c for c in data.get("ClaimInfoStateList") or []}

    def cdi_specs(self, node: str) -> set[str]:
        return {p.name for p in self.nodes.by_name(node).cdi_dir.glob("*.json")}

    async def kubelet_metrics(self, node: str) -> dict[str, float]:
        """The kubelet's DRA call counts, through the API server's node proxy."""
        raw = await self.kube.request_bytes(
            "GET", f"/api/v1/nodes/{node}/proxy/metrics", accept="text/plain"
        )
        counts = {"NodePrepareResources": 0.0, "NodeUnprepareResources": 0.0}
        counts |= {"prepare_skips": 0.0, "unprepare_skips": 0.0}
        for family in text_string_to_metric_families(raw.decode()):
            for sample in family.samples:
                if sample.labels.get("driver_name") != DRIVER:
                    continue
                if sample.name == "dra_grpc_operations_duration_seconds_count":
                    method = sample.labels["method_name"].rsplit("/", 1)[-1]
                    counts[method] = counts.get(method, 0.0) + sample.value
                elif sample.name == "dra_node_prepare_skips_total":
                    counts["prepare_skips"] += sample.value
                elif sample.name == "dra_node_unprepare_skips_total":
                    counts["unprepare_skips"] += sample.value
        return counts


@pytest.fixture(scope="module")
def gated_nodes(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[controlplane.ControlPlane, realnode.RealNodes]]:
    missing = realnode.missing_prerequisites()
    if missing:
        unavailable("real nodes need: " + "; ".join(missing))
    with contextlib.ExitStack() as stack:
        waited = time.monotonic()
        stack.enter_context(realnode.host_lock())
        waited = time.monotonic() - waited
        cp = stack.enter_context(
            controlplane.running(tmp_path_factory.mktemp("gated-control-plane"), extra_gates=GATES)
        )
        host = realnode.HostState.record()
        base = Path(tempfile.mkdtemp(prefix="kdo-"))  # short: unix socket paths live below
        nodes = realnode.start(
            [(n.name, dict(n.labels)) for n in E2E_NODES],
            cp.kubeconfig,
            base,
            host,
            # The scenario needs 1.37 kubelets, whatever KOPF_DRA_NODE_KUBERNETES_VERSION says.
            versions=[VERSION] * len(E2E_NODES),
            extra_gates=[GATES if n.name == DECLARING else {} for n in E2E_NODES],
            kubelet_verbosity=4,  # each NodePrepareResources/NodeUnprepareResources call
        )
        nodes.timings["lock wait"] = waited
        try:
            yield cp, nodes
        finally:
            problems = nodes.stop()
            print(f"\ngated real nodes: {nodes.timings}; host restored: {problems or 'yes'}")
            assert not problems, problems


@pytest.fixture(scope="module")
async def gated(
    gated_nodes: tuple[controlplane.ControlPlane, realnode.RealNodes],
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Gated]:
    cp, real_nodes = gated_nodes
    async with await make_api_client(cp.kubeconfig) as api_client:
        kube = KubeAPI(api_client, release=RELEASE)

        async def all_ready() -> bool:
            real_nodes.check()
            nodes = (await kube.list("Node"))["items"]
            return {n["metadata"]["name"] for n in nodes if Node.load(n).is_ready} >= {
                n.name for n in real_nodes.nodes
            }

        await eventually(all_ready, within=120, what="the gated real nodes to be Ready")
        nodes = tuple(
            VirtualNode(
                n.name,
                n.labels,
                profiles=PROFILES,
                kubelet_dir=str(real.kubelet_dir),
                cdi_dir=str(real.cdi_dir),
            )
            for n in E2E_NODES
            for real in [real_nodes.by_name(n.name)]
        )
        system = await start_system(
            kube,
            cp.kubeconfig,
            nodes=nodes,
            log_dir=tmp_path_factory.mktemp("gated-logs"),
            fabric=False,
            # The cluster's gates: the scheduler offers skipping devices, the drivers publish them.
            feature_gates=cp.gates,
        )
        try:
            yield Gated(cp, real_nodes, kube, system)
        finally:
            system.stop()


# --- objects ---------------------------------------------------------------------------------


def claim_body(name: str, model: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": f"gpu.{DRIVER}",
                            "selectors": [
                                {
                                    "cel": {
                                        "expression": f'device.attributes["{DRIVER}"].model'
                                        f' == "{model}"'
                                    }
                                }
                            ],
                        },
                    }
                ]
            }
        },
    }


def pod_body(name: str, claim: str, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER_NAME,
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {
                "name": "main",
                "image": "busybox:1.36",
                "command": [
                    "sh",
                    "-c",
                    f"env | grep ^KOPF_DRA_DEVICE | sort; echo {STARTED}; exec sleep 86400",
                ],
                "resources": {"claims": [{"name": "gpu"}]},
            }
        ],
        "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
    }
    if node is not None:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


def running(pod: dict[str, Any]) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return bool(statuses) and all("running" in (s.get("state") or {}) for s in statuses)


async def running_pod(kube: KubeAPI, name: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        pod = await kube.get("Pod", name, NAMESPACE)
        return pod if pod["spec"].get("nodeName") and running(pod) else None

    try:
        return await eventually(probe, within=RUNNING_WITHIN, what=f"pod {name} running")
    except AssertionError as e:
        pod = await kube.get("Pod", name, NAMESPACE)
        raise AssertionError(f"{e}; status: {pod.get('status')}") from None


async def started_log(kube: KubeAPI, name: str) -> str:
    async def probe() -> str | None:
        text = await kube.pod_log(NAMESPACE, name)
        return text if STARTED in text else None

    return await eventually(probe, within=60, what=f"the log of {name}")


async def delete_pod(kube: KubeAPI, name: str, *, now: bool = False) -> None:
    options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
    if now:  # never bound: no kubelet confirms a graceful deletion
        options["gracePeriodSeconds"] = 0
    with contextlib.suppress(NotFoundError):
        await kube.call("DELETE", resource_of("Pod").path(NAMESPACE, name), body=options)


async def pod_gone(kube: KubeAPI, name: str) -> None:
    async def gone() -> bool:
        return await kube.get_or_none("Pod", name, NAMESPACE) is None

    await eventually(gone, within=60, what=f"pod {name} gone")


def rpc_lines(log: str, method: str) -> list[str]:
    """The kubelet's ``--v=4`` lines of the calls of ``method`` it made to a driver."""
    call = "NodeUnprepareResource rpc" if method == "unprepare" else "NodePrepareResources rpc"
    return [line for line in log.splitlines() if f"Calling {call}" in line]


# --- the tests -------------------------------------------------------------------------------


async def test_only_the_gated_kubelet_declares_the_feature_and_both_pools_skip(
    gated: Gated,
) -> None:
    """The kubelet declares DRAOptionalNodeOperations exactly where its gate is on; each
    driver publishes the L4 in a slice of its own that skips both calls, the T4 in another."""
    for name, declares in ((DECLARING, True), (PLAIN, False)):
        node = Node.load(await gated.kube.get("Node", name))
        assert (OPTIONAL_NODE_OPERATIONS in node.status.declared_features) is declares, (
            name,
            node.status.declared_features,
        )

    async def pools() -> dict[tuple[str, str], list[str] | None] | None:
        slices = (await gated.kube.list("ResourceSlice"))["items"]
        found = {
            (s["spec"]["nodeName"], d["attributes"]["model"]["string"]): s["spec"].get(
                "skipNodeOperations"
            )
            for s in slices
            if s["spec"]["driver"] == DRIVER
            for d in s["spec"].get("devices") or []
        }
        return found if len(found) == 4 else None

    assert await eventually(pools, within=60, what="both pools published") == {
        (DECLARING, PLAIN_MODEL): None,
        (DECLARING, SKIPPING_MODEL): SKIPPED,
        (PLAIN, PLAIN_MODEL): None,
        (PLAIN, SKIPPING_MODEL): SKIPPED,
    }


async def test_a_device_that_skips_node_operations_runs_without_the_driver(
    gated: Gated,
) -> None:
    kube = gated.kube
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    await ensure_default_service_account(kube, NAMESPACE)
    for name, model in (("prepared", PLAIN_MODEL), ("skips", SKIPPING_MODEL)):
        await kube.create(claim_body(name, model))
    await kube.create(claim_body("stranded", SKIPPING_MODEL))
    try:
        await _scenario(gated)
    finally:
        for pod in ("skips", "prepared"):
            await delete_pod(kube, pod)
        await delete_pod(kube, "stranded", now=True)
        for pod in ("skips", "prepared", "stranded"):
            await pod_gone(kube, pod)
        for claim in ("skips", "prepared", "stranded"):
            with contextlib.suppress(NotFoundError):
                await kube.delete("ResourceClaim", claim, NAMESPACE)


async def _scenario(gated: Gated) -> None:
    kube = gated.kube

    # The L4 of the kubelet that does not declare the feature is not offered.
    await kube.create(pod_body("stranded", "stranded", PLAIN))

    async def refused() -> dict[str, Any] | None:
        pod = await kube.get("Pod", "stranded", NAMESPACE)
        condition = scheduled_condition(pod)
        if condition and condition.get("status") == "False" and condition.get("message"):
            return pod
        return None

    stranded = await eventually(refused, within=60, what="pod stranded found unschedulable")
    assert not stranded["spec"].get("nodeName"), stranded["spec"]
    reason = (scheduled_condition(stranded) or {}).get("reason")
    assert reason == "Unschedulable", stranded["status"]

    # The control: a T4 on the declaring kubelet, which the kubelet asks the driver to prepare.
    await kube.create(pod_body("prepared", "prepared", DECLARING))
    prepared_pod = await running_pod(kube, "prepared")
    prepared_claim = await kube.get("ResourceClaim", "prepared", NAMESPACE)
    prepared_uid = prepared_claim["metadata"]["uid"]
    (prepared_result,) = allocated_devices(prepared_claim)
    assert "skipNodeOperations" not in prepared_result, prepared_result
    assert "KOPF_DRA_DEVICE_" in await started_log(kube, "prepared")
    assert cdi.spec_file_name(DRIVER, prepared_uid) in gated.cdi_specs(DECLARING)
    assert prepared_uid in gated.driver_checkpoint(DECLARING)
    before = await gated.kubelet_metrics(DECLARING)
    assert before["NodePrepareResources"] >= 1, before
    assert before["prepare_skips"] == 0, before
    assert rpc_lines(gated.kubelet_log(DECLARING), "prepare"), "no --v=4 log of the calls"
    print(f"\nthe control claim's pod on {prepared_pod['spec']['nodeName']}; kubelet: {before}")

    # The L4: no node named; only the declaring kubelet's is offered.
    await kube.create(pod_body("skips", "skips"))
    pod = await running_pod(kube, "skips")
    assert pod["spec"]["nodeName"] == DECLARING, pod["spec"]
    claim = await kube.get("ResourceClaim", "skips", NAMESPACE)
    uid = claim["metadata"]["uid"]
    (result,) = allocated_devices(claim)
    assert result["pool"] == DECLARING, result
    assert result["skipNodeOperations"] == SKIPPED, result
    log = await started_log(kube, "skips")
    assert "KOPF_DRA_DEVICE_" not in log, log  # no CDI device: nothing prepared it

    during = await gated.kubelet_metrics(DECLARING)
    assert during["prepare_skips"] >= 1, during
    assert during["NodePrepareResources"] == before["NodePrepareResources"], (before, during)
    kubelet_log = gated.kubelet_log(DECLARING)
    prepare_calls = rpc_lines(kubelet_log, "prepare")
    assert [line for line in prepare_calls if prepared_uid in line], prepare_calls
    assert not [line for line in prepare_calls if uid in line], prepare_calls
    state = gated.kubelet_claims(DECLARING)[uid]
    expected = {DRIVER: {"Devices": None, "skipNodeOperations": SKIPPED}}
    assert state["DriverState"] == expected, state
    assert uid not in gated.driver_checkpoint(DECLARING)
    assert cdi.spec_file_name(DRIVER, uid) not in gated.cdi_specs(DECLARING)
    driver_log = gated.driver_log(DECLARING)
    assert f"{NAMESPACE}/prepared" in driver_log
    assert f"{NAMESPACE}/skips" not in driver_log, driver_log
    print(f"the skipping claim's pod on {DECLARING}, running; kubelet: {during}")
    print(f"kubelet checkpoint of the claim: {state}")

    # Deleting it: the kubelet skips unpreparing too (and forgets the claim).
    await delete_pod(kube, "skips")
    await pod_gone(kube, "skips")

    async def unprepared() -> dict[str, float] | None:
        counts = await gated.kubelet_metrics(DECLARING)
        forgotten = uid not in gated.kubelet_claims(DECLARING)
        return counts if counts["unprepare_skips"] >= 1 and forgotten else None

    after = await eventually(unprepared, within=60, what="the kubelet done with claim skips")
    assert after["NodeUnprepareResources"] == 0, after
    assert after["NodePrepareResources"] == before["NodePrepareResources"], (before, after)
    assert not rpc_lines(gated.kubelet_log(DECLARING), "unprepare")
    assert f"{NAMESPACE}/skips" not in gated.driver_log(DECLARING)
    print(f"the skipping claim's pod deleted; kubelet: {after}")

    # The control's unprepare is counted and logged where the skipped one was not.
    await delete_pod(kube, "prepared")
    await pod_gone(kube, "prepared")

    async def control_unprepared() -> dict[str, float] | None:
        counts = await gated.kubelet_metrics(DECLARING)
        gone = cdi.spec_file_name(DRIVER, prepared_uid) not in gated.cdi_specs(DECLARING)
        return counts if counts["NodeUnprepareResources"] >= 1 and gone else None

    last = await eventually(control_unprepared, within=60, what="the control claim unprepared")
    unprepare_calls = rpc_lines(gated.kubelet_log(DECLARING), "unprepare")
    assert [line for line in unprepare_calls if prepared_uid in line], unprepare_calls
    assert not [line for line in unprepare_calls if uid in line], unprepare_calls
    assert last["unprepare_skips"] == after["unprepare_skips"], (after, last)
    print(f"the control claim's pod deleted; kubelet: {last}")
    kubelet_log = gated.kubelet_log(DECLARING)
    # Its DRA manager took up the skipping pod's claim and went on without a call.
    print("the kubelet's DRA lines of both pods and its calls to the driver (--v=4):")
    pods = (f'pod="{NAMESPACE}/skips"', f'pod="{NAMESPACE}/prepared"')
    dra = [line for line in kubelet_log.splitlines() if 'logger="dra-' in line]
    for line in [line for line in dra if any(p in line for p in pods) or " rpc" in line][:40]:
        print("  " + line[:400])
