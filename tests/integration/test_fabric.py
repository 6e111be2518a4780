"""The fabric controller end to end: real API server, the simulated fabric manager as a real
HTTP service on loopback, our scheduler and claim controllers, and (for the composable flow)
the example driver picking up hot-plugged devices.

Each test wires its own nodes to a fabric of its own (a unique label value) and uses its own
driver name, so pools and nodes of other tests never take part. Attach times are short.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import random
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml

from operators.controllers.fabric import app as fabric_app
from operators.controllers.fabric.handlers import FabricController
from operators.controllers.fabric.metrics import REGISTRY
from operators.controllers.fabric.planning import FIELD_MANAGER
from operators.controllers.fabric.settings import FabricSettings
from operators.driver.app import Driver
from operators.driver.settings import DriverSettings
from operators.fabric.auth import StaticTokens, TokenFile
from operators.fabric.client import HTTPFabricManager
from operators.fabric.model import FabricDevice, FabricSnapshot, FaultRequest, Operation
from operators.fabric.service import FabricService
from operators.fabric.simulator import FabricSimulator, parse_config
from operators.kube.api import (
    ApiError,
    KubeAPI,
    NotFoundError,
    Resource,
    register_resource,
    resource_of,
)
from operators.kube.client import make_api_client
from operators.runtime.app import register_login
from tests.integration.helpers import (
    bound_node,
    claim_of,
    create_node,
    device_class_body,
    events_with,
    eventually,
    metric_names,
    mint_token,
    pod_body,
    pod_condition,
    running_operator,
    sample,
    scrape,
    slice_body,
    start_scheduler,
    template_body,
    unique,
)
from tests.integration.test_metrics import FABRIC as FABRIC_METRICS

NODE_LABEL = "resource.kopf-dra.io/fabric"
ATTACHED = "fabric.kopf-dra.io/attached"
FAILED = "fabric.kopf-dra.io/attach-failed"
HOTPLUG = "resource.kopf-dra.io/attached-devices"


TOKENS = {
    "default": "default-cluster-token-0123456789",
    "tests": "the-tests-own-token-0123456789",
    "other-cluster": "other-cluster-token-0123456789",
}


class Fabric:
    """A simulated fabric manager on loopback, restartable from its state file. The controller
    is cluster ``default`` (its token in ``token_file``), the test injects faults as ``tests``,
    and another cluster races it as ``other-cluster``."""

    def __init__(self, config: dict[str, Any], state_file: Path) -> None:
        self.config = parse_config(config)
        self.state_file = state_file
        self.token_file = state_file.with_suffix(".token")
        self.token_file.write_text(TOKENS["default"])
        self.service: FabricService | None = None
        self.url = ""
        self.client: HTTPFabricManager | None = None
        self.other: HTTPFabricManager | None = None

    async def start(self) -> None:
        sim = FabricSimulator(self.config, self.state_file, clock=time.time, rng=random.Random(0))
        self.service = FabricService(sim, StaticTokens(TOKENS), faults=True)
        self.url = await self.service.start()
        self.client = HTTPFabricManager(self.url, TOKENS["tests"])
        self.other = HTTPFabricManager(self.url, TOKENS["other-cluster"])

    async def stop(self) -> None:
        for c in (self.client, self.other):
            if c is not None:
                await c.close()
        if self.service is not None:
            await self.service.stop()
            self.service = None

    async def devices(self) -> dict[str, FabricDevice]:
        """Every device with its holder (the manager's own view: no cluster sees others')."""
        assert self.service is not None
        return {d.id: d.model_copy() for d in self.service.sim.devices.values()}

    async def operations(self, cluster: str = "default") -> list[Operation]:
        assert self.service is not None
        return self.service.sim.list_operations(cluster=cluster)


@pytest.fixture
async def fabric_factory() -> AsyncIterator[Callable[..., Any]]:
    started: list[Fabric] = []
    directory = Path(tempfile.mkdtemp(prefix="fabric-"))

    async def make(count: int = 2, attach: float = 0.3, detach: float = 0.1) -> Fabric:
        fabric = Fabric(
            {
                "attachSeconds": attach,
                "detachSeconds": detach,
                "devices": [
                    {"model": "A100", "vendor": "nvidia", "memory": "80Gi", "count": count}
                ],
            },
            directory / f"state-{len(started)}.json",
        )
        await fabric.start()
        started.append(fabric)
        return fabric

    yield make
    for fabric in started:
        await fabric.stop()
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def fabric_name() -> str:
    return unique("fab")


def controller_settings(
    kubeconfig: Any, driver: str, fabric_name: str, fabric: Fabric, **overrides: Any
) -> FabricSettings:
    values: dict[str, Any] = {
        "kubeconfig": str(kubeconfig),
        "manager_url": fabric.url,
        "manager_token_file": str(fabric.token_file),
        "driver_name": driver,
        "fabric_name": fabric_name,
        "publish_seconds": 1.0,
        "poll_seconds": 0.5,
        **overrides,
    }
    return FabricSettings(**values)


@contextlib.asynccontextmanager
async def fabric_controller(settings: FabricSettings) -> AsyncIterator[Any]:
    """The running controller (its ``server.port`` serves metrics when asked for)."""
    registry, controller = fabric_app.APP.build(settings)
    async with running_operator(registry, "fabric"):
        yield controller


@contextlib.asynccontextmanager
async def scheduler_running(kubeconfig: Any, **overrides: Any) -> AsyncIterator[None]:
    _, registry = start_scheduler(kubeconfig, **overrides)
    async with running_operator(registry, "scheduler"):
        yield


async def wired_nodes(kube: KubeAPI, fabric_name: str, n: int) -> list[str]:
    names = [unique("fnode") for _ in range(n)]
    for name in names:
        await create_node(kube, name, {NODE_LABEL: fabric_name})
    return names


async def fabric_slice(kube: KubeAPI, driver: str) -> dict[str, Any] | None:
    listed = await kube.list(
        "ResourceSlice", label_selector="app.kubernetes.io/managed-by=kopf-dra-fabric"
    )
    for item in listed["items"]:
        if item["spec"]["driver"] == driver:
            return dict(item)
    return None


async def published(kube: KubeAPI, driver: str) -> set[str]:
    found = await fabric_slice(kube, driver)
    return {d["name"] for d in (found or {}).get("spec", {}).get("devices", [])}


def device_conditions(claim: dict[str, Any], device: str) -> dict[str, dict[str, Any]]:
    for entry in claim.get("status", {}).get("devices") or []:
        if entry["device"] == device:
            return {c["type"]: c for c in entry.get("conditions") or []}
    return {}


async def start_pod(kube: KubeAPI, namespace: str, driver: str, name: str = "worker") -> None:
    await kube.create(template_body("gpu", namespace, device_class=driver))
    await kube.create(
        pod_body(name, namespace, {"name": "gpu", "resourceClaimTemplateName": "gpu"})
    )


async def delete_pod(kube: KubeAPI, namespace: str, name: str) -> None:
    await kube.call(
        "DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body={"gracePeriodSeconds": 0}
    )


async def test_pod_gets_a_fabric_gpu_attached_and_bound_then_detached_when_deleted(
    kube: KubeAPI,
    kubeconfig: Any,
    namespace: str,
    driver: str,
    fabric_name: str,
    fabric_factory: Callable[..., Any],
    controllers: None,
) -> None:
    fabric = await fabric_factory(count=2)
    nodes = await wired_nodes(kube, fabric_name, 2)
    await kube.create(device_class_body(driver, driver))
    settings = controller_settings(
        kubeconfig, driver, fabric_name, fabric, metrics_bind_address="127.0.0.1:0"
    )
    async with fabric_controller(settings) as controller, scheduler_running(kubeconfig):
        assert await eventually(lambda: published(kube, driver), what="fabric pool") == {
            "a100-0",
            "a100-1",
        }
        before = await fabric_slice(kube, driver)
        assert before is not None
        spec = before["spec"]
        assert spec["pool"]["name"] == "fabric-a100"
        assert spec["nodeSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0] == {
            "key": NODE_LABEL,
            "operator": "In",
            "values": [fabric_name],
        }
        device0 = spec["devices"][0]
        assert device0["bindsToNode"] is True
        assert device0["bindingConditions"] == [ATTACHED]
        assert device0["bindingFailureConditions"] == [FAILED]
        assert device0["capacity"]["memory"]["value"] == "80Gi"
        assert device0["attributes"]["model"] == {"string": "A100"}

        started = time.monotonic()
        await start_pod(kube, namespace, driver)
        node = await eventually(lambda: bound_node(kube, namespace, "worker"), what="pod bound")
        latency = time.monotonic() - started
        assert node in nodes
        claim = await claim_of(kube, namespace, "worker")
        result = claim["status"]["allocation"]["devices"]["results"][0]
        assert result["pool"] == "fabric-a100"
        device = result["device"]
        conditions = device_conditions(claim, device)
        assert conditions[ATTACHED]["status"] == "True"
        assert conditions[ATTACHED]["reason"] == "Attached"
        managers = {m["manager"] for m in claim["metadata"]["managedFields"]}
        assert FIELD_MANAGER in managers
        state = (await fabric.devices())[device]
        assert (state.state, state.cluster, state.node) == ("attached", "default", node)
        # The attached device left the free pool, in a new generation.
        after = await eventually(
            lambda: _without(kube, driver, device), what="attached device unpublished"
        )
        assert after["spec"]["pool"]["generation"] > spec["pool"]["generation"]
        assert await events_with(kube, namespace, "FabricDeviceAttached")
        print(f"\nattach-to-bind: pod created -> bound in {latency:.2f}s (attach 0.3s)")
        status, text = await scrape(controller.server.port)
        assert status == 200
        assert metric_names(text) == FABRIC_METRICS
        assert sample(text, "kopf_dra_fabric_attach_results_total", result="Attached")

        await delete_pod(kube, namespace, "worker")

        async def detached() -> bool:
            d = (await fabric.devices())[device]
            return d.state == "free" and device in await published(kube, driver)

        await eventually(detached, within=20, what="device detached and free again")
        ops = [o for o in await fabric.operations() if o.device == device]
        assert [(o.kind, o.state) for o in ops] == [
            ("attach", "succeeded"),
            ("detach", "succeeded"),
        ]


async def _without(kube: KubeAPI, driver: str, device: str) -> dict[str, Any] | None:
    found = await fabric_slice(kube, driver)
    if found and device not in {d["name"] for d in found["spec"].get("devices", [])}:
        return found
    return None


async def test_attach_failure_fails_the_binding_and_the_pod_is_rescheduled(
    kube: KubeAPI,
    kubeconfig: Any,
    namespace: str,
    driver: str,
    fabric_name: str,
    fabric_factory: Callable[..., Any],
    controllers: None,
) -> None:
    fabric = await fabric_factory(count=2)
    assert fabric.client is not None
    for device in ("a100-0", "a100-1"):
        await fabric.client.inject_fault(
            FaultRequest(device=device, count=1, reason="AttachFailed", message="PCIe link down")
        )
    await wired_nodes(kube, fabric_name, 2)
    await kube.create(device_class_body(driver, driver))
    settings = controller_settings(kubeconfig, driver, fabric_name, fabric)
    async with fabric_controller(settings), scheduler_running(kubeconfig):
        await eventually(lambda: published(kube, driver), what="fabric pool")
        await start_pod(kube, namespace, driver)
        node = await eventually(
            lambda: bound_node(kube, namespace, "worker"), within=30, what="bound after a failure"
        )
        ops = await fabric.operations()
        assert [o.state for o in ops if o.kind == "attach"][:1] == ["failed"]
        assert ops[0].reason == "AttachFailed"
        claim = await claim_of(kube, namespace, "worker")
        device = claim["status"]["allocation"]["devices"]["results"][0]["device"]
        assert (await fabric.devices())[device].node == node
        # The failure was reported on the claim and the pod, and the scheduler undid it.
        failed = await events_with(kube, namespace, "FabricDeviceAttachFailed")
        assert {e["involvedObject"]["kind"] for e in failed} == {"ResourceClaim", "Pod"}
        assert "PCIe link down" in failed[0]["message"]
        assert await events_with(kube, namespace, "BindingConditionsFailed")


async def test_device_taken_by_another_cluster_is_explained_then_bound_when_released(
    kube: KubeAPI,
    kubeconfig: Any,
    namespace: str,
    driver: str,
    fabric_name: str,
    fabric_factory: Callable[..., Any],
    controllers: None,
) -> None:
    fabric = await fabric_factory(count=1)
    assert fabric.other is not None
    nodes = await wired_nodes(kube, fabric_name, 1)
    await kube.create(device_class_body(driver, driver))
    settings = controller_settings(kubeconfig, driver, fabric_name, fabric)
    async with scheduler_running(kubeconfig):
        async with fabric_controller(settings):
            await eventually(lambda: published(kube, driver), what="fabric pool")
        # The controller is away: the pool it published still offers the device.
        await start_pod(kube, namespace, driver)

        async def allocated() -> str | None:
            with contextlib.suppress(AssertionError):
                claim = await claim_of(kube, namespace, "worker")
                if claim.get("status", {}).get("allocation"):
                    return str(claim["status"]["allocation"]["devices"]["results"][0]["device"])
            return None

        device = await eventually(allocated, what="fabric device allocated")
        # Another cluster grabs it before our controller attaches it: the attach race.
        grab = await fabric.other.attach("other-grab", device, "their-node")

        async def grabbed() -> bool:
            op = await fabric.other.operation(grab.id) if fabric.other else None
            return op is not None and op.state == "succeeded"

        await eventually(grabbed, what="other cluster attached")
        async with fabric_controller(settings):

            async def explained() -> dict[str, Any] | None:
                c = await pod_condition(kube, namespace, "worker")
                return c if c and c.get("reason") == "Unschedulable" else None

            condition = await eventually(explained, within=30, what="pod explained")
            assert (
                "cannot allocate" in condition["message"]
                or "nodes are available" in (condition["message"])
            )
            taken = await events_with(kube, namespace, "FabricDeviceTaken")
            assert taken
            assert "held by another cluster" in taken[0]["message"]
            assert "other-cluster" not in taken[0]["message"]  # not ours to know
            assert await bound_node(kube, namespace, "worker") is None
            # They let it go: it is published again and our pod gets it.
            await fabric.other.detach("other-release", device)
            assert (
                await eventually(
                    lambda: bound_node(kube, namespace, "worker"),
                    within=30,
                    what="bound after release",
                )
                == nodes[0]
            )
        state = (await fabric.devices())[device]
        assert (state.cluster, state.node) == ("default", nodes[0])


async def test_binding_timeout_detaches_the_late_device(
    kube: KubeAPI,
    kubeconfig: Any,
    namespace: str,
    driver: str,
    fabric_name: str,
    fabric_factory: Callable[..., Any],
    controllers: None,
) -> None:
    fabric = await fabric_factory(count=1, attach=3.0, detach=0.1)
    await wired_nodes(kube, fabric_name, 1)
    await kube.create(device_class_body(driver, driver))
    settings = controller_settings(kubeconfig, driver, fabric_name, fabric)
    async with fabric_controller(settings), scheduler_running(kubeconfig, binding_timeout=1.5):
        await eventually(lambda: published(kube, driver), what="fabric pool")
        await start_pod(kube, namespace, driver)

        async def detach_done() -> bool:
            return any(
                o.kind == "detach" and o.state == "succeeded" for o in await fabric.operations()
            )

        await eventually(detach_done, within=20, what="late device detached")
        assert await bound_node(kube, namespace, "worker") is None
        assert await events_with(kube, namespace, "BindingConditionsFailed")
        await delete_pod(kube, namespace, "worker")

        async def all_free() -> bool:
            devices = await fabric.devices()
            running = [o for o in await fabric.operations() if o.state == "running"]
            return (
                not running
                and devices["a100-0"].state == "free"
                and "a100-0" in await published(kube, driver)
            )

        await eventually(all_free, within=20, what="device free and published after the pod")


async def test_after_attach_reschedule_binds_the_pod_to_the_node_local_device(
    kube: KubeAPI,
    kubeconfig: Any,
    namespace: str,
    driver: str,
    fabric_name: str,
    fabric_factory: Callable[..., Any],
    controllers: None,
) -> None:
    fabric = await fabric_factory(count=1)
    [node] = await wired_nodes(kube, fabric_name, 1)
    await kube.create(device_class_body(driver, driver))
    short = Path(tempfile.mkdtemp(prefix="kdf-"))
    profiles = short / "profiles.yaml"
    profiles.write_text("gpus: []\nnics: []\n")
    node_driver = Driver(
        DriverSettings(
            kubeconfig=str(kubeconfig),
            node_name=node,
            driver_name=driver,
            profiles=str(profiles),
            kubelet_dir=str(short / "kubelet"),
            cdi_dir=str(short / "cdi"),
            resync_seconds=0.3,
            allow_arbitrary_node_status=True,  # the test's admin kubeconfig
        ),
        kube,
    )
    stop = asyncio.Event()
    driver_task = asyncio.create_task(node_driver.run(stop))
    settings = controller_settings(
        kubeconfig, driver, fabric_name, fabric, after_attach="reschedule"
    )
    try:
        async with fabric_controller(settings), scheduler_running(kubeconfig):
            await eventually(lambda: published(kube, driver), what="fabric pool")
            await start_pod(kube, namespace, driver)
            assert (
                await eventually(
                    lambda: bound_node(kube, namespace, "worker"), within=30, what="pod bound"
                )
                == node
            )
            claim = await claim_of(kube, namespace, "worker")
            [result] = claim["status"]["allocation"]["devices"]["results"]
            # Bound to the node-local device: the hot-plugged fabric GPU in the node's pool.
            assert (result["pool"], result["device"]) == (node, "a100-0")
            assert not result.get("bindingConditions")
            state = (await fabric.devices())["a100-0"]
            assert (state.state, state.node, state.attach_count) == ("attached", node, 1)
            node_body = await kube.get("Node", node)
            assert '"name":"a100-0"' in node_body["metadata"]["annotations"][HOTPLUG]
            assert "a100-0" not in await published(kube, driver)
            assert [o.kind for o in await fabric.operations()] == ["attach"]  # no detach
            assert await events_with(kube, namespace, "FabricDeviceAttachedToNode")
    finally:
        stop.set()
        await asyncio.wait_for(driver_task, 20)
        for s in (await kube.list("ResourceSlice", field_selector=f"spec.nodeName={node}"))[
            "items"
        ]:
            await kube.delete("ResourceSlice", s["metadata"]["name"])
        shutil.rmtree(short, ignore_errors=True)


async def test_controller_and_manager_restarted_mid_attach_attach_once_and_bind(
    kube: KubeAPI,
    kubeconfig: Any,
    namespace: str,
    driver: str,
    fabric_name: str,
    fabric_factory: Callable[..., Any],
    controllers: None,
) -> None:
    fabric = await fabric_factory(count=2, attach=2.0)
    nodes = await wired_nodes(kube, fabric_name, 2)
    await kube.create(device_class_body(driver, driver))
    async with scheduler_running(kubeconfig):
        settings = controller_settings(kubeconfig, driver, fabric_name, fabric)
        async with fabric_controller(settings):
            await eventually(lambda: published(kube, driver), what="fabric pool")
            await start_pod(kube, namespace, driver)

            async def attaching() -> str | None:
                for d in (await fabric.devices()).values():
                    if d.state == "attaching":
                        return str(d.id)
                return None

            device = await eventually(attaching, what="attach in flight")
        # Both go down mid-attach; the manager comes back from its state file elsewhere.
        await fabric.stop()
        await fabric.start()
        assert (await fabric.devices())[device].state in ("attaching", "attached")
        settings = controller_settings(kubeconfig, driver, fabric_name, fabric)
        async with fabric_controller(settings):
            node = await eventually(
                lambda: bound_node(kube, namespace, "worker"), within=30, what="pod bound"
            )
        assert node in nodes
        devices = await fabric.devices()
        attached = [d for d in devices.values() if d.state != "free"]
        assert [(d.id, d.node, d.attach_count) for d in attached] == [(device, node, 1)]
        ops = await fabric.operations()
        assert [(o.kind, o.device, o.state) for o in ops] == [("attach", device, "succeeded")]


class LaggingDevices(HTTPFabricManager):
    """A manager whose snapshots pair the device list of the previous read with the operations
    of this one: how the controller saw the fabric when it read devices and operations in two
    calls, and an operation finished in between."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.previous: list[FabricDevice] | None = None
        self.stale_served = 0

    async def snapshot(self) -> FabricSnapshot:
        current = await super().snapshot()
        devices = current.devices if self.previous is None else self.previous
        self.previous = current.devices
        by_id = {d.id: d for d in devices}
        for op in current.operations:
            device = by_id.get(op.device)
            if op.state == "succeeded" and device is not None and device.state == "attaching":
                self.stale_served += 1
        return current.model_copy(update={"devices": devices})


class LaggingViewController(FabricController):
    async def prepare(self) -> None:
        self._manager = LaggingDevices(
            self.settings.manager_url, TokenFile(self.settings.manager_token_file or "")
        )
        await super().prepare()


async def test_an_attach_that_finished_after_the_device_list_was_read_is_not_lost(
    kube: KubeAPI,
    kubeconfig: Any,
    namespace: str,
    driver: str,
    fabric_name: str,
    fabric_factory: Callable[..., Any],
    controllers: None,
) -> None:
    """The demo's spurious DeviceLost: the attach succeeded, the device list read a moment
    before still said attaching. The controller waits for a view that agrees: the pod binds to
    the device it attached, and nothing is attached twice."""
    fabric = await fabric_factory(count=2, attach=0.5)
    nodes = await wired_nodes(kube, fabric_name, 2)
    await kube.create(device_class_body(driver, driver))
    settings = controller_settings(kubeconfig, driver, fabric_name, fabric)
    controller = LaggingViewController(settings)
    registry = kopf.OperatorRegistry()
    register_login(registry, settings.kubeconfig)
    controller.register(registry)
    async with running_operator(registry, "fabric"), scheduler_running(kubeconfig):
        await eventually(lambda: published(kube, driver), what="fabric pool")
        await start_pod(kube, namespace, driver)
        node = await eventually(lambda: bound_node(kube, namespace, "worker"), what="pod bound")
        assert node in nodes
        manager = controller.manager
        assert isinstance(manager, LaggingDevices)
        assert manager.stale_served >= 1  # the interleaving did happen
        claim = await claim_of(kube, namespace, "worker")
        device = claim["status"]["allocation"]["devices"]["results"][0]["device"]
        assert device_conditions(claim, device)[ATTACHED]["reason"] == "Attached"
        assert FAILED not in device_conditions(claim, device)
        await events_with(kube, namespace, "FabricDeviceAttached")
        reasons = {e["reason"] for e in (await kube.list("Event", namespace))["items"]}
        assert "FabricDeviceLost" not in reasons
        attaches = [o for o in await fabric.operations() if o.kind == "attach"]
        assert [(o.device, o.state) for o in attaches] == [(device, "succeeded")]


async def test_a_refused_credential_stops_the_controller_until_the_token_is_rotated(
    kube: KubeAPI,
    kubeconfig: Any,
    driver: str,
    fabric_name: str,
    fabric_factory: Callable[..., Any],
    controllers: None,
) -> None:
    fabric = await fabric_factory(count=1)
    fabric.token_file.write_text("a-token-the-manager-does-not-know")
    await wired_nodes(kube, fabric_name, 1)

    def refusals() -> float:
        sample = REGISTRY.get_sample_value(
            "kopf_dra_fabric_manager_errors_total", {"reason": "Unauthorized"}
        )
        return sample or 0.0

    before = refusals()
    settings = controller_settings(kubeconfig, driver, fabric_name, fabric)
    async with fabric_controller(settings):

        async def counted() -> bool:
            return refusals() > before

        await eventually(counted, what="the manager's 401 counted")
        assert await fabric_slice(kube, driver) is None  # it learned nothing from the manager
        fabric.token_file.write_text(TOKENS["default"])  # the Secret, rotated
        assert await eventually(
            lambda: published(kube, driver), within=30, what="published with the new token"
        ) == {"a100-0"}


# --- the manifests --------------------------------------------------------------------------

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests" / "fabric"
for _extra in (
    Resource("rbac.authorization.k8s.io/v1", "clusterroles", False, "ClusterRole"),
    Resource("rbac.authorization.k8s.io/v1", "clusterrolebindings", False, "ClusterRoleBinding"),
    Resource("rbac.authorization.k8s.io/v1", "roles", True, "Role"),
    Resource("rbac.authorization.k8s.io/v1", "rolebindings", True, "RoleBinding"),
    Resource("v1", "services", True, "Service"),
):
    register_resource(_extra)


def _manifests() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


async def test_every_manifest_is_accepted_by_a_server_side_dry_run(
    kube: KubeAPI, namespace: str
) -> None:
    kinds = []
    for doc in _manifests():
        if resource_of(doc["kind"]).namespaced:
            doc["metadata"]["namespace"] = namespace
        else:  # test_rbac.py may have installed the real ones in this session
            doc["metadata"]["name"] += f"-{namespace}"
        created = await kube.create(doc, dry_run=True)
        assert created["metadata"]["name"] == doc["metadata"]["name"]
        kinds.append(doc["kind"])
    assert sorted(kinds) == [
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "ConfigMap",
        "NetworkPolicy",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "ValidatingAdmissionPolicyBinding",
    ]
    sim_config = next(
        d for d in _manifests() if d["kind"] == "ConfigMap" and "fabric.yaml" in d["data"]
    )
    assert parse_config(yaml.safe_load(sim_config["data"]["fabric.yaml"])).devices


def _policies_for(namespace: str, driver: str) -> list[dict[str, Any]]:
    """The manifests' admission policies for this test's ServiceAccount and driver name (names
    suffixed with the namespace)."""
    policies = []
    for doc in _manifests():
        if not doc["kind"].startswith("ValidatingAdmissionPolicy"):
            continue
        doc["metadata"]["name"] += f"-{namespace}"
        if doc["kind"] == "ValidatingAdmissionPolicyBinding":
            doc["spec"]["policyName"] += f"-{namespace}"
        else:
            for condition in doc["spec"]["matchConditions"]:
                condition["expression"] = condition["expression"].replace(
                    "system:serviceaccount:kopf-dra:", f"system:serviceaccount:{namespace}:"
                )
            for variable in doc["spec"].get("variables") or []:
                variable["expression"] = variable["expression"].replace(
                    "'example.kopf-dra.io'", f"'{driver}'"
                )
        policies.append(doc)
    return policies


async def _policies_in_force(kube: KubeAPI, as_sa: KubeAPI, driver: str) -> None:
    """Wait until the API server enforces both policies for the ServiceAccount (they load
    lazily): a node label change and a node-local slice, dry-run, are refused."""
    probe = await create_node(kube, unique("probe"))
    name = probe["metadata"]["name"]
    node_local = slice_body(f"{name}-slice", driver, name, [])

    async def refused() -> bool:
        messages = []
        for attempt in (
            as_sa.call(
                "PATCH",
                f"/api/v1/nodes/{name}",
                body={"metadata": {"labels": {"x": "y"}}},
                content_type="application/merge-patch+json",
                query={"dryRun": "All"},
            ),
            as_sa.create(node_local, dry_run=True),
        ):
            try:
                await attempt
            except ApiError as e:
                messages.append(e.message)
        return len([m for m in messages if "ValidatingAdmissionPolicy" in m]) == 2

    try:
        await eventually(refused, what="the fabric admission policies in force")
    finally:
        await kube.delete("Node", name)


@pytest.fixture
async def fabric_kubeconfig(
    kube: KubeAPI, kubeconfig: Any, namespace: str, driver: str, tmp_path: Path
) -> AsyncIterator[Path]:
    """A kubeconfig as the manifests' ServiceAccount with exactly the manifests' RBAC and
    admission policies, in force (for this test's driver name; cluster-scoped names suffixed
    with the namespace)."""
    docs = {d["kind"]: copy.deepcopy(d) for d in _manifests() if "rbac" in d["apiVersion"]}
    docs["ServiceAccount"] = next(d for d in _manifests() if d["kind"] == "ServiceAccount")
    for doc in docs.values():
        if doc["metadata"].get("namespace"):
            doc["metadata"]["namespace"] = namespace
    for rule in docs["ClusterRole"]["rules"]:
        if "resourceNames" in rule:
            rule["resourceNames"] = [driver]
    for kind in ("ClusterRole", "Role"):
        docs[kind]["metadata"]["name"] += f"-{namespace}"
    for kind, role in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        docs[kind]["metadata"]["name"] += f"-{namespace}"
        docs[kind]["roleRef"]["name"] = docs[role]["metadata"]["name"]
        docs[kind]["subjects"][0]["namespace"] = namespace
    created = []
    for kind in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"):
        created.append(await kube.create(docs[kind]))
    for policy in _policies_for(namespace, driver):
        created.append(await kube.create(policy))
    token = await mint_token(kube.api_client, "kopf-dra-fabric", namespace)
    config = json.loads(await asyncio.to_thread(Path(kubeconfig).read_text))
    config["users"][0]["user"] = {"token": token}
    path = tmp_path / "fabric.kubeconfig"
    await asyncio.to_thread(path.write_text, json.dumps(config))
    try:
        async with await make_api_client(path) as as_sa:
            await _policies_in_force(kube, KubeAPI(as_sa), driver)
        yield path
    finally:
        for doc in reversed(created):
            if not resource_of(doc["kind"]).namespaced:
                await kube.delete(doc["kind"], doc["metadata"]["name"])


async def test_the_manifests_rbac_is_all_the_controller_needs(
    kube: KubeAPI,
    kubeconfig: Any,
    fabric_kubeconfig: Path,
    namespace: str,
    driver: str,
    fabric_name: str,
    fabric_factory: Callable[..., Any],
    controllers: None,
) -> None:
    """Publish, attach, report the condition (resourceclaims/driver, arbitrary-node:patch),
    hand over (node patch, within its admission policy), post Events, hold the Lease: all as
    the ServiceAccount."""
    fabric = await fabric_factory(count=1)
    [node] = await wired_nodes(kube, fabric_name, 1)
    await kube.create(device_class_body(driver, driver))
    settings = controller_settings(
        fabric_kubeconfig,
        driver,
        fabric_name,
        fabric,
        after_attach="reschedule",
        handover_timeout=0.5,
        leader_elect=True,
        lease_namespace=namespace,
        lease_duration=5,
        renew_deadline=3,
        retry_period=1,
    )
    async with fabric_controller(settings), scheduler_running(kubeconfig):
        await eventually(lambda: published(kube, driver), what="pool published as the SA")
        await start_pod(kube, namespace, driver)

        async def handed_over() -> bool:
            body = await kube.get("Node", node)
            return "a100-0" in (body["metadata"].get("annotations") or {}).get(HOTPLUG, "")

        await eventually(handed_over, what="node annotated as the SA")
        # Condition written and Event posted with the fabric ServiceAccount's token.
        assert await events_with(kube, namespace, "FabricDeviceAttachedToNode")
        lease = await kube.get("Lease", "kopf-dra-fabric", namespace)
        assert lease["spec"]["holderIdentity"]


async def test_two_replicas_one_publishes_and_the_standby_takes_over(
    kube: KubeAPI,
    kubeconfig: Any,
    namespace: str,
    driver: str,
    fabric_name: str,
    fabric_factory: Callable[..., Any],
) -> None:
    """As the manifests run it: two replicas on one Lease; only the leader publishes, and when
    it stops the standby takes the Lease over and publishes in its place."""
    fabric = await fabric_factory(count=1)
    await wired_nodes(kube, fabric_name, 1)
    lease = unique("fabric")
    replicas = {
        identity: controller_settings(
            kubeconfig,
            driver,
            fabric_name,
            fabric,
            leader_elect=True,
            lease_name=lease,
            lease_namespace=namespace,
            identity=identity,
            lease_duration=3.0,
            renew_deadline=2.0,
            retry_period=0.5,
        )
        for identity in ("one", "two")
    }
    stacks = {identity: contextlib.AsyncExitStack() for identity in replicas}
    controllers = {
        identity: await stacks[identity].enter_async_context(fabric_controller(settings))
        for identity, settings in replicas.items()
    }
    try:

        async def leader() -> str | None:
            try:
                body = await kube.get("Lease", lease, namespace)
            except NotFoundError:
                return None
            active = [i for i, c in controllers.items() if c.active]
            holder = body["spec"].get("holderIdentity")
            return active[0] if active == [holder] else None

        first = await eventually(leader, what="one leader")
        standby = "two" if first == "one" else "one"
        assert await eventually(lambda: published(kube, driver), what="pool") == {"a100-0"}
        assert not controllers[standby].active

        await stacks[first].aclose()  # the leader stops (and gives the Lease up)
        before = await fabric_slice(kube, driver)
        assert before is not None
        await kube.delete("ResourceSlice", before["metadata"]["name"])

        async def republished() -> dict[str, Any] | None:
            found = await fabric_slice(kube, driver)
            if found is None or found["metadata"]["uid"] == before["metadata"]["uid"]:
                return None
            return found

        await eventually(republished, within=15, what="the pool republished by the standby")
        assert await leader() == standby
    finally:
        for stack in stacks.values():
            await stack.aclose()
