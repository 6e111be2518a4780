"""Acting as the kubelet over real unix sockets: registration, prepare/unprepare, idempotency,
restart from the checkpoint, refusals, device status on the real API server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from operators.driver.cdi import CDIWriter, cdi_kind
from operators.driver.checkpoint import Checkpoint
from operators.driver.health import HEALTH_TIMEOUT_SECONDS, taint_key
from operators.driver.plugin import (
    DEFAULT_VERSIONS,
    HEALTH_V1,
    HEALTH_V1ALPHA1,
    V1,
    V1BETA1,
    ClaimRef,
    PluginServer,
    PrepareResult,
)
from operators.driver.profiles import default_config
from operators.driver.service import DriverService
from operators.kube.api import KubeAPI
from tests.integration.driver.conftest import DRIVER, allocate, claim_body, result
from tests.integration.driver.fake_kubelet import (
    KUBELET_1_36_HEALTH,
    KUBELET_1_37_HEALTH,
    FakeKubelet,
    HealthPolicy,
    NoHealthStreamError,
)

MIG = "gpu-0-mig-1g-5gb-0"


@dataclass
class Plugin:
    """A running driver on one node (service + sockets), restartable on the same directories."""

    kube: KubeAPI
    node: str
    root: Path
    service: DriverService | None = None
    server: PluginServer | None = None
    unhealthy: tuple[str, ...] = ()

    @property
    def cdi_dir(self) -> Path:
        return self.root / "cdi"

    @property
    def kubelet_dir(self) -> Path:
        return self.root / "kubelet"

    async def start(self) -> None:
        self.service = DriverService(
            self.kube,
            driver=DRIVER,
            node_name=self.node,
            config=default_config(),
            cdi=CDIWriter(self.cdi_dir, DRIVER),
            checkpoint=Checkpoint(self.root / "state" / "checkpoint.json"),
            unhealthy=self.unhealthy,
        )
        await self.service.refresh()
        self.server = PluginServer(DRIVER, self.kubelet_dir, self.service, health=self.service)
        await self.server.start()

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop(grace=None)
        self.server = self.service = None

    @property
    def endpoint(self) -> Path:
        assert self.server is not None
        return self.server.dra_socket


@pytest.fixture
async def plugin(kube: KubeAPI, node: dict[str, Any], short_dir: Path) -> AsyncIterator[Plugin]:
    running = Plugin(kube, node["metadata"]["name"], short_dir)
    await running.start()
    yield running
    await running.stop()


@pytest.fixture
async def kubelet() -> AsyncIterator[FakeKubelet]:
    async with FakeKubelet() as fake:
        yield fake


async def _claim(
    kube: KubeAPI,
    namespace: str,
    name: str,
    node: str,
    devices: list[tuple[str, str]],
    *,
    config: list[dict[str, Any]] | None = None,
    reserved: bool = True,
    pool: str | None = None,
) -> tuple[dict[str, Any], ClaimRef]:
    created = await kube.create(claim_body(namespace, name, sorted({r for r, _ in devices})))
    allocated = await allocate(
        kube,
        created,
        [result(r, pool or node, d) for r, d in devices],
        node=node,
        config=config,
        reserved=reserved,
    )
    return allocated, ClaimRef(namespace, allocated["metadata"]["uid"], name)


async def test_registration_announces_v1_first_and_records_the_verdict(
    plugin: Plugin, kubelet: FakeKubelet
) -> None:
    assert plugin.server is not None
    socket = plugin.kubelet_dir / "plugins_registry" / f"{DRIVER}-reg.sock"
    assert socket.is_socket()
    info, version = await kubelet.register(socket)
    assert info.type == "DRAPlugin"
    assert info.name == DRIVER
    assert info.endpoint == str(plugin.kubelet_dir / "plugins" / DRIVER / "dra.sock")
    assert info.supported_versions == [V1, V1BETA1, HEALTH_V1, HEALTH_V1ALPHA1]
    assert version == V1
    assert kubelet.health_services[info.endpoint] == HEALTH_V1
    await asyncio.wait_for(plugin.server.registration.registered.wait(), timeout=10)

    await kubelet.notify(socket, False, "version skew")
    assert plugin.server.registration.error == "version skew"
    assert not plugin.server.registration.registered.is_set()


async def test_old_kubelet_picks_v1beta1_and_can_prepare(
    plugin: Plugin, kube: KubeAPI, namespace: str
) -> None:
    socket = plugin.kubelet_dir / "plugins_registry" / f"{DRIVER}-reg.sock"
    async with FakeKubelet(known_versions=[V1BETA1]) as old:
        _, version = await old.register(socket)
        assert version == V1BETA1
        _, ref = await _claim(kube, namespace, "c", plugin.node, [("gpu", "gpu-1")])
        answer = await old.prepare(plugin.endpoint, [ref], version=V1BETA1)
    assert answer[ref.uid].error == ""
    assert [d.device_name for d in answer[ref.uid].devices] == ["gpu-1"]


async def test_prepare_writes_cdi_checkpoint_and_status_and_unprepare_undoes_it(
    plugin: Plugin, kubelet: FakeKubelet, kube: KubeAPI, namespace: str
) -> None:
    config = [
        {
            "source": "FromClaim",
            "requests": ["gpu"],
            "opaque": {
                "driver": DRIVER,
                "parameters": {
                    "kind": "GpuConfig",
                    "sharing": {"strategy": "TimeSlicing", "timeSlicing": {"interval": "Short"}},
                },
            },
        }
    ]
    _, ref = await _claim(
        kube, namespace, "c", plugin.node, [("gpu", MIG), ("nic", "nic-0")], config=config
    )
    answer = (await kubelet.prepare(plugin.endpoint, [ref]))[ref.uid]
    assert answer.error == ""
    ids = {d.device_name: d.cdi_device_ids for d in answer.devices}
    assert ids == {
        MIG: [f"{cdi_kind(DRIVER)}={ref.uid}-{MIG}"],
        "nic-0": [f"{cdi_kind(DRIVER)}={ref.uid}-nic-0"],
    }
    assert {d.device_name: d.request_names for d in answer.devices} == {
        MIG: ["gpu"],
        "nic-0": ["nic"],
    }
    assert {d.pool_name for d in answer.devices} == {plugin.node}

    spec_file = plugin.cdi_dir / f"{DRIVER}-claim_{ref.uid}.json"
    spec = json.loads(spec_file.read_text())
    assert spec["cdiVersion"] == "0.5.0"
    assert spec["kind"] == f"{DRIVER}/claim"
    mig = next(d for d in spec["devices"] if d["name"] == f"{ref.uid}-{MIG}")
    env = dict(e.split("=", 1) for e in mig["containerEdits"]["env"])
    assert env["KOPF_DRA_DEVICE_GPU_0_MIG_1G_5GB_0_PROFILE"] == "1g.5gb"
    assert env["KOPF_DRA_DEVICE_GPU_0_MIG_1G_5GB_0_SHARING_STRATEGY"] == "TimeSlicing"
    assert env["KOPF_DRA_DEVICE_GPU_0_MIG_1G_5GB_0_TIMESLICE_INTERVAL"] == "Short"
    assert mig["containerEdits"]["deviceNodes"] == [
        {"path": f"/dev/kopf-dra/{MIG}", "hostPath": "/dev/null"}
    ]

    stored = await kube.get("ResourceClaim", "c", namespace)
    statuses = {d["device"]: d for d in stored["status"]["devices"]}
    assert set(statuses) == {MIG, "nic-0"}
    ready = statuses[MIG]["conditions"][0]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "Prepared")
    assert statuses[MIG]["data"]["profile"] == "1g.5gb"
    assert statuses[MIG]["data"]["sharing"] == "TimeSlicing"
    assert statuses[MIG]["data"]["uuid"].startswith("MIG-")
    assert statuses["nic-0"]["networkData"]["interfaceName"] == "net0"

    assert await kubelet.unprepare(plugin.endpoint, [ref]) == {ref.uid: ""}
    assert not spec_file.exists()
    assert plugin.service is not None
    assert plugin.service.checkpoint.get(ref.uid) is None
    stored = await kube.get("ResourceClaim", "c", namespace)
    assert stored["status"].get("devices", []) == []
    # Unprepare is idempotent too.
    assert await kubelet.unprepare(plugin.endpoint, [ref]) == {ref.uid: ""}


async def test_repeated_prepare_answers_the_same_and_survives_a_restart(
    plugin: Plugin, kubelet: FakeKubelet, kube: KubeAPI, namespace: str
) -> None:
    _, ref = await _claim(kube, namespace, "c", plugin.node, [("gpu", "gpu-0")])
    first = await kubelet.prepare(plugin.endpoint, [ref])
    assert first[ref.uid].error == ""
    assert await kubelet.prepare(plugin.endpoint, [ref]) == first

    await plugin.stop()
    # Gone from the API and from the CDI directory (a reboot empties /var/run/cdi): the
    # restarted driver still answers from its checkpoint and rewrites the spec.
    await kube.delete("ResourceClaim", "c", namespace)
    spec_file = plugin.cdi_dir / f"{DRIVER}-claim_{ref.uid}.json"
    spec_file.unlink()
    await plugin.start()
    again = await kubelet.prepare(plugin.endpoint, [ref])
    assert again == first
    assert spec_file.exists()
    assert await kubelet.unprepare(plugin.endpoint, [ref]) == {ref.uid: ""}
    assert not spec_file.exists()


async def test_claims_not_for_this_node_are_refused_per_claim(
    plugin: Plugin, kubelet: FakeKubelet, kube: KubeAPI, namespace: str
) -> None:
    _, good = await _claim(kube, namespace, "good", plugin.node, [("gpu", "gpu-1")])
    _, elsewhere = await _claim(kube, namespace, "elsewhere", "other-node", [("gpu", "gpu-1")])
    _, unreserved = await _claim(
        kube, namespace, "unreserved", plugin.node, [("gpu", "gpu-1")], reserved=False
    )
    _, foreign_pool = await _claim(
        kube, namespace, "foreign-pool", plugin.node, [("gpu", "gpu-1")], pool="fabric-a100"
    )
    missing = ClaimRef(namespace, "0b7c54c5-7a3c-4a3a-9f4e-2c8e1f5c0d11", "missing")
    created = await kube.create(claim_body(namespace, "unallocated", ["gpu"]))
    unallocated = ClaimRef(namespace, created["metadata"]["uid"], "unallocated")
    recreated = ClaimRef(namespace, "9a0c3c55-0000-4000-8000-000000000000", "good")

    answers = await kubelet.prepare(
        plugin.endpoint,
        [good, elsewhere, unreserved, foreign_pool, missing, unallocated, recreated],
    )
    assert answers[good.uid].error == ""
    assert answers[elsewhere.uid].error.startswith("WrongNode: ")
    assert answers[unreserved.uid].error.startswith("NotReserved: ")
    assert answers[foreign_pool.uid].error.startswith("WrongPool: ")
    assert answers[missing.uid].error.startswith("ClaimNotFound: ")
    assert answers[unallocated.uid].error.startswith("NotAllocated: ")
    assert answers[recreated.uid].error.startswith("ClaimUIDMismatch: ")
    assert f"claim {namespace}/elsewhere" in answers[elsewhere.uid].error
    assert plugin.service is not None
    assert [c.name for c in plugin.service.checkpoint.claims()] == ["good"]


async def test_bad_opaque_config_fails_that_claim_only(
    plugin: Plugin, kubelet: FakeKubelet, kube: KubeAPI, namespace: str
) -> None:
    bad = [
        {
            "source": "FromClass",
            "requests": [],
            "opaque": {
                "driver": DRIVER,
                "parameters": {"kind": "GpuConfig", "sharing": {"strategy": "Sometimes"}},
            },
        }
    ]
    _, broken = await _claim(kube, namespace, "broken", plugin.node, [("gpu", "gpu-1")], config=bad)
    _, fine = await _claim(kube, namespace, "fine", plugin.node, [("gpu", "gpu-0")])
    answers = await kubelet.prepare(plugin.endpoint, [broken, fine])
    assert answers[broken.uid].error.startswith("InvalidDeviceConfig: ")
    assert "sharing.strategy" in answers[broken.uid].error
    assert answers[broken.uid].devices == []
    assert answers[fine.uid].error == ""
    assert not (plugin.cdi_dir / f"{DRIVER}-claim_{broken.uid}.json").exists()


@pytest.mark.parametrize(
    ("release", "service"),
    [(KUBELET_1_37_HEALTH, HEALTH_V1), (KUBELET_1_36_HEALTH, HEALTH_V1ALPHA1)],
    ids=["kubelet-1.37", "kubelet-1.36"],
)
async def test_health_stream_reports_marked_devices_unhealthy_and_taints_them(
    kube: KubeAPI, node: dict[str, Any], short_dir: Path, release: HealthPolicy, service: str
) -> None:
    """What the kubelet's health manager hears, on the service its release opens, and what the
    scheduler sees in the slices."""
    running = Plugin(kube, node["metadata"]["name"], short_dir, unhealthy=("gpu-1",))
    await running.start()
    try:
        async with FakeKubelet(health=release) as kubelet:
            info, _ = await kubelet.register(running.server.registration_socket)  # type: ignore[union-attr]
            assert kubelet.health_services[info.endpoint] == service
            (first,) = await kubelet.watch_health(info.endpoint, 1)
        by_device = {h.device: h for h in first}
        assert by_device["gpu-1"].health == "UNHEALTHY"
        assert "--unhealthy-devices" in by_device["gpu-1"].message
        assert by_device[MIG].health == "HEALTHY"
        assert {h.pool for h in first} == {running.node}
        assert all(h.timeout_seconds == HEALTH_TIMEOUT_SECONDS for h in first)
        slices = (await kube.list("ResourceSlice"))["items"]
        taints = {
            d["name"]: d.get("taints") or []
            for sl in slices
            if sl["spec"].get("nodeName") == running.node
            for d in sl["spec"].get("devices") or []
        }
        (taint,) = taints["gpu-1"]
        assert (taint["key"], taint["effect"]) == (taint_key(DRIVER), "NoSchedule")
        assert not taints[MIG]
        # Refreshing again publishes nothing new: the taint keeps its time.
        assert running.service is not None
        assert await running.service.refresh() is None
    finally:
        await running.stop()


class Unused:
    """A NodeService for a test that prepares nothing."""

    async def prepare(self, claims: Sequence[ClaimRef]) -> dict[str, PrepareResult]:
        raise AssertionError("not called")

    async def unprepare(self, claims: Sequence[ClaimRef]) -> dict[str, str]:
        raise AssertionError("not called")


async def test_without_health_no_health_service_is_announced(short_dir: Path) -> None:
    """A 1.37 kubelet opens the health stream only when announced: a driver without a health
    source announces none, so it is never asked for one it does not serve."""
    server = PluginServer(DRIVER, short_dir / "kubelet", service=Unused(), health=None)
    await server.start()
    try:
        async with FakeKubelet() as kubelet:
            info, _ = await kubelet.register(server.registration_socket)
            assert info.supported_versions == list(DEFAULT_VERSIONS)
            with pytest.raises(NoHealthStreamError):
                await kubelet.watch_health(info.endpoint, 1)
    finally:
        await server.stop(grace=None)
