"""The example scenarios on real kubelets: pods run and their containers see their devices."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
import re
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.conftest import Scenario, VariantApply
from operators.api.core import Node
from operators.api.names import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from operators.demo.bringup import DRIVER, MANIFESTS, RACK_LABEL, System, in_one_rack
from operators.demo.view import allocated_devices
from operators.driver import cdi
from operators.driver.health import taint_key
from operators.driver.settings import DriverSettings
from operators.kube.api import KubeAPI, NotFoundError, resource_of
from operators.localcluster import realnode
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


@pytest.mark.pod_groups
async def test_gang_training_runs_each_trainer_with_its_gpu_and_the_shared_interconnect(
    scenario: Apply, kube: KubeAPI, real_nodes: realnode.RealNodes
) -> None:
    """The four trainers bound together run on the real kubelets: each sees its GPU and the
    group's interconnect, which the driver on each node prepared with the same identity."""
    s = await scenario("gang-training")
    pods = await running_pods(s, 4)
    claims = await s.claims()
    (link_claim,) = [
        c
        for c in claims.values()
        if any(o["kind"] == "PodGroup" for o in c["metadata"].get("ownerReferences") or [])
    ]
    (link,) = allocated_devices(link_claim)
    identities = set()
    for name, pod in pods.items():
        log = await log_of(kube, pod)
        results = await s.devices(pod)
        assert sorted(r["request"] for r in results) == ["gpu", "link"], (name, results)
        for result in results:
            assert f"{env_key(result)}=" in log, (name, result["device"], log)
        (identity,) = re.findall(rf"^{env_key(link)}=(.+)$", log, re.MULTILINE)
        identities.add(identity)
        assert f"{env_key(link)}_TYPE=interconnect" in log, (name, log)
    assert len(identities) == 1, identities
    assert len({p["spec"]["nodeName"] for p in pods.values()}) == 2, "both nodes' GPUs"
    uids = {c["metadata"]["uid"] for c in claims.values()}
    await assert_unprepared(s, real_nodes, uids)


@pytest.mark.pod_groups
@pytest.mark.parametrize(("example", "keep"), [("rack-training", 4), ("composite-training", 3)])
async def test_a_rack_constrained_group_runs_in_its_rack_on_the_real_kubelets(
    scenario: VariantApply, kube: KubeAPI, real_nodes: realnode.RealNodes, example: str, keep: int
) -> None:
    """rack-training (four trainers) and composite-training (the leader and three workers), cut
    to the real nodes' one rack of four GPUs: placed in it, every pod running with its GPU."""
    s = await scenario(example, in_one_rack(example, keep))
    pods = await running_pods(s, 4)
    for name, pod in pods.items():
        node = await kube.get("Node", pod["spec"]["nodeName"])
        assert node["metadata"]["labels"][RACK_LABEL] == "rack-a", name
        (gpu,) = await s.devices(pod)
        log = await log_of(kube, pod)
        assert f"{env_key(gpu)}=" in log, (name, gpu["device"], log)
    uids = {c["metadata"]["uid"] for c in (await s.claims()).values()}
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


# --- extended resources backed by DRA (KEP-5004) ---------------------------------------------

EXTENDED_RESOURCE = "example.kopf-dra.io/gpu"
DEVICE_PLUGIN_NODE = "kopf-dra-device-plugin-node"


def claim_state(claim: dict[str, Any]) -> str:
    """One line of a claim's life: allocated devices, reservations, deletion."""
    meta, status = claim["metadata"], claim.get("status") or {}
    devices = [f"{r['pool']}/{r['device']}" for r in allocated_devices(claim)]
    reserved = [r.get("name") for r in status.get("reservedFor") or []]
    owners = [f"{o['kind']}/{o['name']}" for o in meta.get("ownerReferences") or []]
    deleting = (
        " deletionTimestamp=" + meta["deletionTimestamp"] if "deletionTimestamp" in meta else ""
    )
    return (
        f"{meta['name']} owners={owners} allocated={devices or '-'} reservedFor={reserved or '-'}"
        f" finalizers={meta.get('finalizers') or '-'}{deleting}"
    )


async def record_claims(kube: KubeAPI, namespace: str, life: list[str]) -> None:
    """Append every change of the namespace's claims to ``life``, with the time it was seen."""
    last: dict[str, str] = {}
    async for event in kube.watch("ResourceClaim", namespace):
        if event["type"] not in ("ADDED", "MODIFIED", "DELETED"):
            continue
        claim = event["object"]
        state = claim_state(claim)
        if event["type"] != "DELETED" and last.get(claim["metadata"]["name"]) == state:
            continue
        last[claim["metadata"]["name"]] = state
        stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
        life.append(f"{stamp} {event['type']:8} {state}")


def is_extended_claim_of(claim: dict[str, Any], pod: dict[str, Any]) -> bool:
    annotations = claim["metadata"].get("annotations") or {}
    owned = any(
        o.get("uid") == pod["metadata"]["uid"]
        for o in claim["metadata"].get("ownerReferences") or []
    )
    return owned or annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true"


async def test_extended_resource_runs_on_a_special_claim_and_a_device_plugin_node_needs_none(
    scenario: Apply, kube: KubeAPI, real_nodes: realnode.RealNodes
) -> None:
    namespace = "kopf-dra-extended"
    life: list[str] = []
    recorder = asyncio.create_task(record_claims(kube, namespace, life))
    try:
        s = await scenario("extended-resources")
        pods = await running_pods(s, 1)
        pod = pods["legacy-gpu"]
        assert pod["spec"]["nodeName"] in {n.name for n in real_nodes.nodes}
        claims = list((await s.claims()).values())
        (claim,) = claims
        meta = claim["metadata"]
        # The special claim: annotated, controlled by the pod, allocated and reserved for it.
        assert meta["annotations"][EXTENDED_RESOURCE_CLAIM_ANNOTATION] == "true", meta
        assert meta["generateName"] == "legacy-gpu-extended-resources-", meta
        (owner,) = meta["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"], owner.get("controller")) == (
            "Pod",
            "legacy-gpu",
            pod["metadata"]["uid"],
            True,
        )
        (result,) = allocated_devices(claim)
        assert result["driver"] == DRIVER
        assert result["pool"] == pod["spec"]["nodeName"]
        assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]
        status = pod["status"]["extendedResourceClaimStatus"]
        assert status["resourceClaimName"] == meta["name"], status
        assert status["requestMappings"] == [
            {
                "containerName": "main",
                "resourceName": EXTENDED_RESOURCE,
                "requestName": result["request"],
            }
        ], status
        # The kubelet admitted the pod on a node without the resource and prepared the device.
        node = await kube.get("Node", pod["spec"]["nodeName"])
        assert EXTENDED_RESOURCE not in node["status"]["allocatable"]
        log = await log_of(kube, pod)
        assert f"{env_key(result)}=" in log, (result["device"], log)
        assert re.search(rf"\s{re.escape(result['device'])}$", log, re.MULTILINE), log
        assert cdi.spec_file_name(DRIVER, meta["uid"]) in cdi_specs(real_nodes)
        # Deleting the pod: the kubelet unprepares, the reservation cleanup deletes the claim.
        await assert_unprepared(s, real_nodes, {meta["uid"]})
        events = (await kube.list("Event", namespace))["items"]
    finally:
        recorder.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await recorder
        print("\n--- the claims of kopf-dra-extended, as watched ---\n" + "\n".join(life))
    print(f"\n--- the special claim's life (pod legacy-gpu on {pod['spec']['nodeName']}) ---")
    print(f"pod running, log:\n{log.rstrip()}")
    print(f"pod.status.extendedResourceClaimStatus: {status}")
    print(f"claim {meta['name']} created {meta['creationTimestamp']} (API server's clock)")
    print("events:")
    for e in sorted(events, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or ""):
        involved = e["involvedObject"]
        print(
            f"{e.get('lastTimestamp') or e.get('eventTime')} {involved['kind']}/{involved['name']}"
            f" {e.get('reason')}: {e.get('message')}"
        )
    assert any(line.split()[1] == "DELETED" and meta["name"] in line for line in life), life
    assert any("allocated=[" in line and "reservedFor=['legacy-gpu']" in line for line in life)

    # A node whose device plugin advertises the resource: served from its allocatable.
    body = copy.deepcopy(next(o for o in s.objects if o["kind"] == "Pod"))
    body["metadata"]["name"] = "device-plugin-gpu"
    body["spec"]["nodeSelector"] = {"kubernetes.io/hostname": DEVICE_PLUGIN_NODE}
    await create_device_plugin_node(kube)
    try:
        created = await kube.create(body)

        async def bound() -> dict[str, Any] | None:
            fresh = await kube.get("Pod", "device-plugin-gpu", namespace)
            return fresh if fresh["spec"].get("nodeName") else None

        placed = await eventually(bound, within=60, what="device-plugin-gpu bound")
        assert placed["spec"]["nodeName"] == DEVICE_PLUGIN_NODE
        # The scheduler writes a special claim and the pod status before the bind: none here.
        assert "extendedResourceClaimStatus" not in (placed.get("status") or {}), placed["status"]
        claims_now = (await kube.list("ResourceClaim", namespace))["items"]
        assert not [c for c in claims_now if is_extended_claim_of(c, created)], claims_now
        print(f"device-plugin-gpu bound to {DEVICE_PLUGIN_NODE}: no special claim, no status")
    finally:
        # No kubelet confirms a graceful deletion on the Node object: delete at once.
        with contextlib.suppress(NotFoundError):
            await kube.call(
                "DELETE",
                resource_of("Pod").path(namespace, "device-plugin-gpu"),
                body={"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
            )
        await kube.delete("Node", DEVICE_PLUGIN_NODE)


async def create_device_plugin_node(kube: KubeAPI) -> None:
    """A Node as a kubelet with a device plugin registers it: Ready, the extended resource in
    its capacity and allocatable (a real kubelet rewrites its own status, so a Node object)."""
    node = await kube.create(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": DEVICE_PLUGIN_NODE,
                "labels": {"kubernetes.io/hostname": DEVICE_PLUGIN_NODE},
            },
        }
    )
    resources = {"cpu": "32", "memory": "256Gi", "pods": "110", EXTENDED_RESOURCE: "2"}
    node["status"] = {
        "capacity": resources,
        "allocatable": resources,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "a node whose device plugin advertises example.kopf-dra.io/gpu",
                "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    }
    await kube.replace_status(node)
