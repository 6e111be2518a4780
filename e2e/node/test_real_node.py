"""The example scenarios on real kubelets: pods run and their containers see their devices."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import yaml

from e2e.conftest import Scenario
from operators.api.core import Node
from operators.demo.bringup import DRIVER, MANIFESTS, System
from operators.driver import cdi
from operators.driver.health import taint_key
from operators.driver.settings import DriverSettings
from operators.kube import realnode
from operators.kube.api import KubeAPI
from tests.integration.helpers import eventually

Apply = Callable[[str], Awaitable[Scenario]]
RUNNING_WITHIN = 180.0


def running(pod: dict[str, Any]) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return bool(statuses) and all("running" in (s.get("state") or {}) for s in statuses)


async def running_pods(s: Scenario, expected: int) -> dict[str, dict[str, Any]]:
    """The scenario's bound pods, once all ``expected`` of them run."""

    async def probe() -> dict[str, dict[str, Any]] | None:
        pods = [p for p in await s.pods() if p["spec"].get("nodeName")]
        if len(pods) == expected and all(running(p) for p in pods):
            return {p["metadata"]["name"]: p for p in pods}
        return None

    return await eventually(
        probe, within=RUNNING_WITHIN, what=f"{expected} pods of {s.name} running"
    )


async def log_of(kube: KubeAPI, pod: dict[str, Any]) -> str:
    """The container's log, through the API server (which asks the kubelet), once printed."""
    meta = pod["metadata"]

    async def probe() -> str | None:
        text = await kube.pod_log(meta["namespace"], meta["name"])
        return text if "KOPF_DRA_DEVICE_" in text else None

    return await eventually(probe, within=60, what=f"the log of {meta['name']}")


def env_key(result: dict[str, Any]) -> str:
    """``KOPF_DRA_DEVICE_<DEVICE>`` as the driver names the device's variables."""
    share = result.get("shareID")
    return cdi.env_name("DEVICE", result["device"] + (f"_{share[:8]}" if share else ""))


def cdi_specs(real_nodes: realnode.RealNodes) -> set[str]:
    return {p.name for n in real_nodes.nodes for p in n.cdi_dir.glob("*.json")}


async def assert_unprepared(s: Scenario, real_nodes: realnode.RealNodes, uids: set[str]) -> None:
    """Deleting the pods makes the kubelet unprepare: the driver removes each claim's spec."""
    await s.cleanup()
    wanted = {cdi.spec_file_name(DRIVER, uid) for uid in uids}

    async def gone() -> bool:
        return not wanted & cdi_specs(real_nodes)

    await eventually(
        gone, within=60, what="the CDI specs of the deleted pods' claims to be removed"
    )


async def test_mig_partitions_run_and_see_their_partitions(
    scenario: Apply, kube: KubeAPI, real_nodes: realnode.RealNodes
) -> None:
    s = await scenario("mig-partitions")
    pods = await running_pods(s, 4)
    uids = set()
    for name, pod in pods.items():
        log = await log_of(kube, pod)
        results = await s.devices(pod)
        assert results, name
        for result in results:
            assert f"{env_key(result)}=" in log, (name, result["device"], log)
            assert re.search(rf"\s{re.escape(result['device'])}$", log, re.MULTILINE), (name, log)
        uids |= {c["metadata"]["uid"] for c in (await s.claims()).values()}
    pair_log = await log_of(kube, pods["pair"])
    pair = await s.devices(pods["pair"])
    assert len(pair) == 2
    keys = sorted(env_key(r) for r in pair)
    for key in keys:
        assert re.search(rf"^{key}_PROFILE=1g\.5gb$", pair_log, re.MULTILINE), (key, pair_log)
    assert len({r["device"].split("-mig-")[0] for r in pair}) == 1, "two partitions of one GPU"
    assert {cdi.spec_file_name(DRIVER, u) for u in uids} <= cdi_specs(real_nodes)
    await assert_unprepared(s, real_nodes, uids)


async def test_shared_nic_pods_see_their_bandwidth_share(
    scenario: Apply, kube: KubeAPI, real_nodes: realnode.RealNodes
) -> None:
    s = await scenario("shared-nic-bandwidth")
    pods = await running_pods(s, 4)
    uids = {c["metadata"]["uid"] for c in (await s.claims()).values()}
    for name, pod in pods.items():
        log = await log_of(kube, pod)
        (result,) = await s.devices(pod)
        share = result["consumedCapacity"]["bandwidth"]
        assert f"{env_key(result)}_BANDWIDTH={share}\n" in log, (name, share, log)
    await assert_unprepared(s, real_nodes, uids)


async def test_admin_access_monitor_sees_a_device_in_use(
    scenario: Apply, kube: KubeAPI, real_nodes: realnode.RealNodes
) -> None:
    s = await scenario("admin-access")
    pods = await running_pods(s, 3)
    in_use = {
        (r["pool"], r["device"])
        for n in ("trainer-1", "trainer-2")
        for r in await s.devices(pods[n])
    }
    monitored = await s.devices(pods["gpu-monitor"])
    assert monitored
    assert {(r["pool"], r["device"]) for r in monitored} <= in_use
    log = await log_of(kube, pods["gpu-monitor"])
    for result in monitored:
        assert f"{env_key(result)}_MODEL=T4\n" in log, log
    uids = {c["metadata"]["uid"] for c in (await s.claims()).values()}
    await assert_unprepared(s, real_nodes, uids)


async def test_pods_keep_running_across_a_kubelet_restart(
    scenario: Apply, kube: KubeAPI, real_nodes: realnode.RealNodes
) -> None:
    s = await scenario("prioritized-alternatives")
    pods = await running_pods(s, 4)
    node = real_nodes.by_name(next(iter(pods.values()))["spec"]["nodeName"])
    before = {
        name: [c["containerID"] for c in p["status"]["containerStatuses"]]
        for name, p in pods.items()
    }
    node.restart_kubelet()

    async def ready_again() -> bool:
        real_nodes.check()
        return Node.load(await kube.get("Node", node.name)).is_ready

    await eventually(ready_again, within=120, what=f"{node.name} Ready after its kubelet restart")
    after = await running_pods(s, 4)
    for name, pod in after.items():
        assert [c["containerID"] for c in pod["status"]["containerStatuses"]] == before[name]
        assert all(c["restartCount"] == 0 for c in pod["status"]["containerStatuses"]), name


def claim_resource_names(pod: dict[str, Any]) -> set[str]:
    """How the kubelet names a container's claims in allocatedResourcesStatus."""
    names = set()
    for container in pod["spec"]["containers"]:
        for ref in (container.get("resources") or {}).get("claims") or []:
            request = ref.get("request")
            names.add(f"claim:{ref['name']}" + (f"/{request}" if request else ""))
    return names


async def test_unhealthy_device_shows_in_pod_status_and_is_tainted(
    scenario: Apply, kube: KubeAPI, system: System, real_nodes: realnode.RealNodes
) -> None:
    s = await scenario("prioritized-alternatives")
    pods = await running_pods(s, 4)
    pod = next(iter(sorted(pods.values(), key=lambda p: p["metadata"]["name"])))
    (result,) = await s.devices(pod)
    node = next(n for n in system.nodes if n.name == pod["spec"]["nodeName"])
    driver = f"driver-{node.name}"

    async def health_of(status: str) -> list[dict[str, Any]] | None:
        fresh = await kube.get("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
        found = [
            (r, h)
            for c in (fresh.get("status") or {}).get("containerStatuses") or []
            for r in c.get("allocatedResourcesStatus") or []
            for h in r.get("resources") or []
            if h.get("health") == status and h["resourceID"].endswith(result["device"])
        ]
        return [r for r, _ in found] or None

    # The driver serves the health stream: the kubelet reports the device Healthy first.
    await eventually(lambda: health_of("Healthy"), within=60, what="the device reported Healthy")
    system.supervisor.stop_child(driver)
    system.start_driver(node, "--unhealthy-devices", result["device"])
    try:
        statuses = await eventually(
            lambda: health_of("Unhealthy"), within=60, what="the device Unhealthy"
        )
        assert {r["name"] for r in statuses} <= claim_resource_names(pod), statuses

        async def tainted() -> bool:
            slices = (await kube.list("ResourceSlice"))["items"]
            taints = [
                (t.get("key"), t.get("effect"))
                for sl in slices
                if sl["spec"]["pool"]["name"] == result["pool"]
                for d in sl["spec"].get("devices") or []
                if d["name"] == result["device"]
                for t in d.get("taints") or []
            ]
            return (taint_key(DRIVER), "NoSchedule") in taints

        await eventually(
            tainted, within=60, what="the unhealthy device tainted NoSchedule in its slice"
        )
        assert running(await kube.get("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"]))
    finally:
        system.supervisor.stop_child(driver)
        system.start_driver(node)
    await eventually(lambda: health_of("Healthy"), within=60, what="the device Healthy again")


def _kubelet_default_root_dir(bin_dir: Path) -> str:
    help_text = subprocess.run(
        [str(bin_dir / "kubelet"), "--help"], capture_output=True, text=True, check=False
    ).stdout
    match = re.search(r"--root-dir string.*?\(default \"([^\"]+)\"\)", help_text, re.DOTALL)
    assert match, "kubelet --help names no default --root-dir"
    return match.group(1)


def _containerd_default_cdi_dirs(bin_dir: Path) -> list[str]:
    config = subprocess.run(
        [str(bin_dir / "containerd"), "config", "default"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    match = re.search(r"cdi_spec_dirs = (\[.*?\])", config)
    assert match, "containerd config default names no cdi_spec_dirs"
    dirs: list[str] = yaml.safe_load(match.group(1).replace("'", '"'))
    return dirs


def test_daemonset_paths_match_the_real_kubelet(real_nodes: realnode.RealNodes) -> None:
    """The DaemonSet mounts where a kubelet and containerd with default settings look."""
    bin_dir = real_nodes.nodes[0].bin_dir
    root = _kubelet_default_root_dir(bin_dir)
    cdi_dirs = _containerd_default_cdi_dirs(bin_dir)
    (daemonset,) = [
        d
        for d in yaml.safe_load_all(
            (MANIFESTS / "driver" / "daemonset" / "daemonset.yaml").read_text()
        )
        if d and d["kind"] == "DaemonSet"
    ]
    pod = daemonset["spec"]["template"]["spec"]
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert host_paths["plugins-registry"] == f"{root}/plugins_registry"
    assert host_paths["plugin-dir"] == f"{root}/plugins/{env['KOPF_DRA_DRIVER_NAME']}"
    assert host_paths["cdi"] in cdi_dirs, (host_paths["cdi"], cdi_dirs)
    for volume in ("plugins-registry", "plugin-dir", "cdi"):
        assert mounts[volume] == host_paths[volume], volume
    assert env["KOPF_DRA_KUBELET_DIR"] == root
    assert env["KOPF_DRA_CDI_DIR"] == host_paths["cdi"]
    defaults = DriverSettings()
    assert (defaults.kubelet_dir, defaults.cdi_dir) == (root, host_paths["cdi"])
