"""``kubectl dra`` against the real API server: claims, pools and why as a user reads them, a
user who may read one namespace only, an unknown pod, and README's blocks kept current.

The scene: two nodes of this test's driver; node-1 has two GPUs and a shared NIC (two claims
share 80G of its 100G); node-2's two GPUs share 40Gi of memory (a counter set, 20Gi each): its
gpu-0 is held by the bound pod ``runner``, its gpu-1 is tainted. The pending pod ``trainer``
asks for three GPUs, which no node has free.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from operators.api.resource import ResourceClaim
from operators.api.timestamps import format_time
from operators.kube.api import ApiError, KubeAPI
from operators.kube.client import make_api_client
from operators.kubectl import claims as claim_view
from operators.kubectl import cli
from operators.kubectl import pools as pool_view
from operators.kubectl import why as why_view
from operators.simulate import engine
from operators.simulate.cluster import read_cluster
from operators.simulate.snapshot import Document
from tests.integration.helpers import (
    claim_body,
    create_node,
    device_class_body,
    eventually,
    grant_namespace_reads,
    pod_body,
    slice_body,
    token_kubeconfig,
    unique,
)

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"
SHARE_IDS = ("6f1c2a3e-0b4d-4e5f-8a9b-0c1d2e3f4a5b", "7a2b3c4d-1e5f-4a6b-9c8d-1e2f3a4b5c6d")


@dataclasses.dataclass(frozen=True)
class Scene:
    namespace: str
    driver: str
    nodes: tuple[str, str]

    def renamed(self, obj: Any) -> Any:
        """The objects with the scene's names as README shows them (before rendering, so that
        the columns line up as they do there)."""
        text = json.dumps(obj)
        for real, shown in (
            (self.nodes[0], "node-1"),
            (self.nodes[1], "node-2"),
            (self.driver, "gpu.example.com"),
            (self.namespace, "team-a"),
        ):
            text = text.replace(real, shown)
        return json.loads(text)


def _allocation(driver: str, node: str, device: str, request: str = "gpu", **more: Any) -> Any:
    return {
        "devices": {
            "results": [
                {"request": request, "driver": driver, "pool": node, "device": device, **more}
            ]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        },
    }


async def _allocate(kube: KubeAPI, name: str, ns: str, status: dict[str, Any]) -> None:
    await kube.patch("ResourceClaim", name, {"status": status}, ns, subresource="status")


@pytest.fixture
async def scene(kube: KubeAPI, driver: str, namespace: str) -> Scene:
    prefix = unique("node")
    nodes = (f"{prefix}-1", f"{prefix}-2")
    for node in nodes:
        await create_node(kube, node)
    gpus = [{"name": f"gpu-{i}", "attributes": {"kind": {"string": "gpu"}}} for i in range(2)]
    nic = {
        "name": "nic-0",
        "attributes": {"kind": {"string": "nic"}},
        "allowMultipleAllocations": True,
        "capacity": {"bandwidth": {"value": "100G"}},
    }
    await kube.create(slice_body(unique("slice"), driver, nodes[0], [*gpus, nic]))
    memory = [{"name": "gpu-memory", "counters": {"memory": {"value": "40Gi"}}}]
    counters = slice_body(unique("slice"), driver, nodes[1], [], count=2, sharedCounters=memory)
    del counters["spec"]["devices"]  # a slice has counters or devices, not both
    await kube.create(counters)
    consumes = [{"counterSet": "gpu-memory", "counters": {"memory": {"value": "20Gi"}}}]
    halves = [{**g, "consumesCounters": consumes} for g in gpus]
    halves[1]["taints"] = [{"key": "maintenance", "effect": "NoSchedule"}]
    await kube.create(slice_body(unique("slice"), driver, nodes[1], halves, count=2))
    await kube.create(
        device_class_body(driver, driver, f'device.attributes["{driver}"].kind == "gpu"')
    )
    await kube.create(claim_body("held", namespace, driver))
    runner = pod_body("runner", namespace, {"name": "gpu", "resourceClaimName": "held"})
    runner["spec"]["nodeName"] = nodes[1]
    created = await kube.create(runner)
    reserved = [{"resource": "pods", "name": "runner", "uid": created["metadata"]["uid"]}]
    held = _allocation(driver, nodes[1], "gpu-0")
    await _allocate(kube, "held", namespace, {"allocation": held, "reservedFor": reserved})
    for name, share in zip(("ingest", "sync"), SHARE_IDS, strict=True):
        body = claim_body(name, namespace, driver)
        body["spec"]["devices"]["requests"][0]["name"] = "nic"
        await kube.create(body)
        result = {"shareID": share, "consumedCapacity": {"bandwidth": "40G"}}
        nic_allocation = _allocation(driver, nodes[0], "nic-0", "nic", **result)
        await _allocate(kube, name, namespace, {"allocation": nic_allocation})
    big = claim_body("big", namespace, driver)
    big["spec"]["devices"]["requests"][0]["exactly"]["count"] = 3
    await kube.create(big)
    await kube.create(pod_body("trainer", namespace, {"name": "gpu", "resourceClaimName": "big"}))
    return Scene(namespace, driver, nodes)


async def _dra(*argv: str) -> tuple[int, str, str]:
    """``kubectl dra ARGV`` as a user runs it (its own event loop, in a thread)."""
    out, err = io.StringIO(), io.StringIO()
    code = await asyncio.to_thread(cli.main, list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


async def test_claims_of_a_namespace_and_of_a_pod(scene: Scene, kubeconfig: Path) -> None:
    ns = scene.namespace
    code, out, _ = await _dra("claims", "--kubeconfig", str(kubeconfig), "-n", ns)
    assert code == 0
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert sorted(rows) == ["big", "held", "ingest", "sync"]
    held = ["allocated,reserved", "gpu:", f"{scene.driver}/{scene.nodes[1]}/gpu-0", "pod/runner"]
    assert rows["held"][1:5] == held
    assert rows["sync"][4:6] == ["(bandwidth", "40G)"]
    assert rows["big"][1] == "pending"
    code, out, _ = await _dra("claims", "runner", "--kubeconfig", str(kubeconfig), "-n", ns)
    assert (code, [line.split()[0] for line in out.splitlines()]) == (0, ["NAME", "held"])
    code, out, _ = await _dra("claims", "-n", ns, "--kubeconfig", str(kubeconfig), "-o", "wide")
    head, *lines = out.splitlines()
    assert head.split()[-3:] == ["NODE", "DEVICE", "STATUS"]
    (held,) = [line.split() for line in lines if line.startswith("held ")]
    assert held[-2:] == [scene.nodes[1], "-"]
    code, out, _ = await _dra("claims", "-n", ns, "--kubeconfig", str(kubeconfig), "-o", "json")
    listing = json.loads(out)
    assert listing["kind"] == "List"
    assert {i["metadata"]["name"] for i in listing["items"]} == {"big", "held", "ingest", "sync"}


async def test_pools_from_the_api_alone(scene: Scene, kubeconfig: Path) -> None:
    code, out, _ = await _dra("pools", "--kubeconfig", str(kubeconfig), "-o", "json")
    assert code == 0
    pools = {p["pool"]: p for p in json.loads(out)["pools"]}
    first, second = (pools[f"{scene.driver}/{n}"] for n in scene.nodes)
    assert (first["devices"], first["allocated"], first["available"]) == (3, 1, 2)
    assert first["sharedDevices"] == [
        {
            "device": "nic-0",
            "capacity": {"bandwidth": {"consumed": "80G", "total": "100G"}},
            "shares": [f"{scene.namespace}/ingest", f"{scene.namespace}/sync"],
        }
    ]
    assert (second["allocated"], second["unavailable"], second["available"]) == (1, 1, 0)
    assert [t["device"] for t in second["taints"]] == ["gpu-1"]
    assert second["counters"] == [
        {"counterSet": "gpu-memory", "counter": "memory", "consumed": "20Gi", "total": "40Gi"}
    ]


async def test_devices_held_per_namespace_and_queue(
    scene: Scene, kube: KubeAPI, kubeconfig: Path
) -> None:
    """``--held``: the runner's GPU counts for its pod's Kueue queue label; the two NIC
    shares reserved for no pod count for the namespace alone."""
    ns, config = scene.namespace, str(kubeconfig)
    labels = {"metadata": {"labels": {"kueue.x-k8s.io/cluster-queue-name": "team-a-queue"}}}
    await kube.patch("Pod", "runner", labels, ns)
    code, out, _ = await _dra("pools", "--held", "-n", ns, "--kubeconfig", config, "-o", "json")
    assert code == 0
    mine = [h for h in json.loads(out)["held"] if h["namespace"] == ns]
    assert mine == [
        {"namespace": ns, "queue": None, "devices": 2, "claims": 2},
        {"namespace": ns, "queue": "team-a-queue", "devices": 1, "claims": 1},
    ]
    code, out, _ = await _dra("pools", "--held", "-n", ns, "--kubeconfig", config)
    rows = [line.split() for line in out.splitlines() if line.startswith(ns)]
    assert rows == [[ns, "<none>", "2", "2"], [ns, "team-a-queue", "1", "1"]]


async def test_why_a_pod_is_pending_and_what_a_bound_one_holds(
    scene: Scene, kubeconfig: Path
) -> None:
    ns, config = scene.namespace, str(kubeconfig)
    code, out, _ = await _dra("why", "trainer", "-n", ns, "--kubeconfig", config, "-o", "wide")
    assert code == 1
    assert "ANSWER     does not fit: 0/" in out
    prefix = scene.nodes[0].removesuffix("-1")
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith(prefix)}
    assert set(rows) == set(scene.nodes)
    assert all(" does not fit " in r for r in rows.values())
    assert "2 usable, 3 needed" in rows[scene.nodes[0]]
    assert "0 usable, 3 needed" in rows[scene.nodes[1]]
    code, out, _ = await _dra("why", "trainer", "-n", ns, "--kubeconfig", config, "--explain")
    assert code == 1
    assert f"EXPLAIN  {scene.nodes[1]}: claim {ns}/big" in out
    code, out, _ = await _dra("why", "runner", "-n", ns, "--kubeconfig", config, "-o", "json")
    answer = json.loads(out)
    assert (code, answer["node"], list(answer["holds"])) == (0, scene.nodes[1], [f"{ns}/held"])


async def test_an_unknown_pod_is_named(scene: Scene, kubeconfig: Path) -> None:
    code, out, err = await _dra(
        "why", "nope", "-n", scene.namespace, "--kubeconfig", str(kubeconfig)
    )
    assert (code, out) == (2, "")
    assert err == f'error: pod "nope" not found in namespace "{scene.namespace}"\n'


async def test_credentials_the_server_refuses_are_exit_code_3(
    api: client.ApiClient, tmp_path: Path
) -> None:
    cluster: dict[str, Any] = {"server": api.configuration.host}
    if api.configuration.ssl_ca_cert:
        cluster["certificate-authority"] = api.configuration.ssl_ca_cert
    config = tmp_path / "stale.kubeconfig"
    config.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": {"token": "not-a-token"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    code, out, err = await _dra("pools", "--kubeconfig", str(config))
    assert (code, out) == (3, "")
    assert err == (
        f"error: the API server at {api.configuration.host} did not accept the credentials "
        "(401 Unauthorized): log in again or choose another context\n"
    )


async def _namespace_reader(api: client.ApiClient, kube: KubeAPI, ns: str, tmp: Path) -> Path:
    """A kubeconfig of a ServiceAccount that may read pods, events and claims of ``ns``."""
    await grant_namespace_reads(kube, ns)
    path = await token_kubeconfig(api, "default", tmp, ns)

    async def allowed() -> bool:
        async with await make_api_client(path) as user:
            try:
                await KubeAPI(user).list("ResourceClaim", ns)
            except ApiError:
                return False
            return True

    await eventually(allowed, within=10, what="the RoleBinding to take effect")
    return path


async def test_a_user_of_one_namespace_gets_what_can_be_read(
    scene: Scene, api: client.ApiClient, kube: KubeAPI, tmp_path: Path
) -> None:
    ns = scene.namespace
    config = str(await _namespace_reader(api, kube, ns, tmp_path))
    code, out, err = await _dra("why", "trainer", "-n", ns, "--kubeconfig", config)
    assert code == 1
    assert "warning: list nodes cluster-wide is forbidden: the answer is without it" in err
    assert "NOTE  the answer considers only what could be read: list nodes cluster-wide" in out
    code, out, err = await _dra("claims", "-A", "--kubeconfig", config, "-n", ns)
    assert code == 0
    assert f"warning: list resourceclaims cluster-wide is forbidden: showing namespace {ns}" in err
    assert sorted(line.split()[0] for line in out.splitlines()[1:]) == [
        "big",
        "held",
        "ingest",
        "sync",
    ]
    code, out, err = await _dra("pools", "--kubeconfig", config)
    assert (code, out) == (3, "")
    assert err.startswith("error: forbidden: list resourceslices cluster-wide: ")


# --- README's blocks ---------------------------------------------------------------------------


def _readme_block(name: str) -> str:
    """The text block after ``<!-- kubectl-dra: NAME -->`` in README."""
    text = README.read_text()
    found = re.search(rf"<!-- kubectl-dra: {name} -->\n```text\n(.*?)```", text, re.S)
    assert found is not None, f"README has no kubectl-dra block {name!r}"
    return found.group(1)


def _normalised(text: str) -> str:
    """Ages any, columns aligned any width (the names differ in length from README's)."""
    text = re.sub(r"(?<=\s)\d+[smhd](?=\s|$)", "AGE", text)
    return "\n".join(re.sub(r" {2,}", "  ", line.rstrip()) for line in text.splitlines())


def _same_as_readme(name: str, shown: str) -> None:
    assert _normalised(shown) == _normalised(_readme_block(name)), (
        f"README's kubectl-dra block {name!r} is out of date; the command prints:\n{shown}"
    )


def _ours(scene: Scene, body: dict[str, Any]) -> bool:
    """An object of the scene (the session's other tests leave nodes, slices and classes)."""
    meta = body.get("metadata") or {}
    if body["kind"] == "Node":
        return meta.get("name") in scene.nodes
    if body["kind"] in ("ResourceSlice", "DeviceClass"):
        return scene.driver in json.dumps(body)
    return meta.get("namespace") in (None, scene.namespace)


async def test_readme_shows_the_commands_real_output(scene: Scene, kube: KubeAPI) -> None:
    """Each block is what the command renders of the scene's objects as the API server returns
    them (renamed, and only the scene's: the session's other tests leave nodes and pools)."""
    ns, err, now = scene.namespace, io.StringIO(), datetime.datetime.now(datetime.UTC)
    claims = scene.renamed((await kube.list("ResourceClaim", ns))["items"])
    models = [ResourceClaim.load(c) for c in claims]
    _same_as_readme("claims", claim_view.render(models, now))

    slices, found, rules, version = await cli.pool_objects(kube, ns, err)
    mine = [s for s in slices if s["spec"]["driver"] == scene.driver]
    # Only claims on the scene's devices: another test's claims on a driver named as the
    # scene's is renamed to (gpu.example.com) would count on its pools.
    held = [c for c in found if scene.driver in json.dumps(c.get("status") or {})]
    renamed_slices, renamed_claims, renamed_rules = scene.renamed([mine, held, rules])
    views = pool_view.from_objects(renamed_slices, renamed_claims, renamed_rules, version)
    _same_as_readme("pools", pool_view.render(views))

    read = await read_cluster(kube, namespace=ns)
    documents = [
        Document(d.source, scene.renamed(d.body)) for d in read.documents if _ours(scene, d.body)
    ]
    options = engine.Options(version=read.version)
    trainer = await kube.get("Pod", "trainer", ns)
    first = why_view.answer(scene.renamed(trainer), documents, [], read.version, options, now)
    assert first.answer is not None
    await kube.create(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": unique("trainer"), "namespace": ns},
            "involvedObject": {
                "kind": "Pod",
                "name": "trainer",
                "namespace": ns,
                "uid": trainer["metadata"]["uid"],
            },
            "reason": "FailedScheduling",
            "message": first.answer.reasons[0],
            "type": "Warning",
            "count": 1,
            "firstTimestamp": format_time(now),
            "lastTimestamp": format_time(now),
            "source": {"component": "kopf-dra"},
        }
    )
    events = scene.renamed((await kube.list("Event", ns))["items"])
    answer = why_view.answer(scene.renamed(trainer), documents, events, read.version, options, now)
    _same_as_readme("why", why_view.render(answer, now))
