"""kopf-dra's own image, installed with kustomize, runs as a cluster runs it."""

from __future__ import annotations

import contextlib
import functools
import json
import re
import ssl
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from e2e.cluster.conftest import HELM_COMMANDS, NAMESPACE, OVERLAY, TOKEN_COMMAND, shell
from operators.api.features import Release
from operators.driver.plugin import HEALTH_V1, HEALTH_V1ALPHA1
from operators.kube.api import KubeAPI, NotFoundError
from operators.localcluster import cluster
from operators.localcluster.files import project_root
from tests.integration.helpers import eventually

T = TypeVar("T")
#: The leader-elected components and their Leases (the manifests' KOPF_DRA_LEASE_NAME).
LEASES = (
    "kopf-dra-scheduler",
    "kopf-dra-claim-templates",
    "kopf-dra-reservations",
    "kopf-dra-pool-validator",
    "kopf-dra-fabric",
)
DRIVER = "example.kopf-dra.io"
#: The manifests' lease duration (LeaderElectionSettings' default, not overridden).
LEASE_DURATION = 15.0


async def component_pods(kube: KubeAPI) -> list[dict[str, Any]]:
    return list((await kube.list("Pod", NAMESPACE))["items"])


def ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def restarts(pod: dict[str, Any]) -> int:
    return sum(s.get("restartCount", 0) for s in pod["status"].get("containerStatuses") or [])


def test_the_readme_has_the_commands_the_test_ran() -> None:
    readme = (project_root() / "README.md").read_text()
    for command in (TOKEN_COMMAND, *HELM_COMMANDS):
        for line in command.split("\\\n"):
            assert line.strip() in readme, line


async def test_every_component_runs_ready_from_the_image(
    installed: cluster.Cluster, kube: KubeAPI
) -> None:
    pods = await component_pods(kube)
    by_component: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        name = pod["metadata"]["labels"]["app.kubernetes.io/name"]
        by_component.setdefault(name, []).append(pod)
    assert sorted(by_component) == sorted(
        [*LEASES, "kopf-dra-driver", "kopf-dra-fabric-manager-sim"]
    )
    for name in LEASES:
        assert len(by_component[name]) == 2, name
    assert len(by_component["kopf-dra-driver"]) == 2, "one driver per node"
    for pod in pods:
        name = pod["metadata"]["name"]
        assert pod["status"]["phase"] == "Running", name
        assert ready(pod), name
        assert restarts(pod) == 0, (name, pod["status"]["containerStatuses"])
        (container,) = pod["status"]["containerStatuses"]
        assert container["image"] == "docker.io/library/kopf-dra:0.1.0", name


async def test_one_leader_per_lease_and_it_is_a_running_replica(
    installed: cluster.Cluster, kube: KubeAPI
) -> None:
    running = {p["metadata"]["name"] for p in await component_pods(kube) if ready(p)}

    async def held() -> dict[str, str] | None:
        holders = {}
        for name in LEASES:
            lease = await kube.get("Lease", name, NAMESPACE)
            holders[name] = lease["spec"].get("holderIdentity") or ""
        return holders if all(h in running for h in holders.values()) else None

    holders = await eventually(held, within=60, what="a running replica holding every Lease")
    assert len(set(holders.values())) == len(LEASES)


async def test_the_driver_registers_with_every_kubelet_and_publishes_its_slices(
    installed: cluster.Cluster, kube: KubeAPI
) -> None:
    assert installed.nodes is not None
    names = {n.name for n in installed.nodes.nodes}

    async def published() -> set[str] | None:
        slices = (await kube.list("ResourceSlice"))["items"]
        nodes = {s["spec"].get("nodeName") for s in slices if s["spec"]["driver"] == DRIVER}
        return nodes if names <= nodes else None

    await eventually(published, within=60, what="a ResourceSlice of the driver for every node")
    drivers = [
        p
        for p in await component_pods(kube)
        if p["metadata"]["name"].startswith("kopf-dra-driver-")
    ]
    assert {p["spec"]["nodeName"] for p in drivers} == names
    for pod in drivers:
        # The kubelet's NotifyRegistrationStatus(registered=true), as the driver logs it.
        command = f"kubectl -n {NAMESPACE} logs {pod['metadata']['name']}"
        await eventually(
            _sync(functools.partial(_logged, installed, command, "registered with the kubelet")),
            within=60,
            what=f"{pod['metadata']['name']} to be registered with its kubelet",
        )


async def test_each_kubelet_runs_its_release_and_opens_its_health_service(
    installed: cluster.Cluster, kube: KubeAPI
) -> None:
    """Nodes may lag the control plane by a minor (KOPF_DRA_NODE_KUBERNETES_VERSION): each
    kubelet runs its own release and opens the health service it prefers from the driver,
    v1alpha1 for 1.36 (the only one it knows), v1 for 1.37 (the first the driver announces)."""
    assert installed.nodes is not None
    versions = {n.name: n.version for n in installed.nodes.nodes}
    nodes = {n["metadata"]["name"]: n for n in (await kube.list("Node"))["items"]}
    assert {name: nodes[name]["status"]["nodeInfo"]["kubeletVersion"] for name in versions} == (
        versions
    )
    drivers = {
        p["spec"]["nodeName"]: p["metadata"]["name"]
        for p in await component_pods(kube)
        if p["metadata"]["name"].startswith("kopf-dra-driver-")
    }
    for node, version in versions.items():
        want = HEALTH_V1ALPHA1 if Release.parse(version) == Release(1, 36) else HEALTH_V1
        command = f"kubectl -n {NAMESPACE} logs {drivers[node]}"

        def opened(command: str = command) -> set[str] | None:
            lines = [
                x for x in shell(installed, command).splitlines() if "health stream opened" in x
            ]
            found = {m for x in lines for m in re.findall(r"\bv1\w*\.DRAResourceHealth", x)}
            return found or None

        opened_services = await eventually(
            _sync(opened),
            within=60,
            what=f"the {version} kubelet of {node} to open a health stream",
        )
        assert opened_services == {want}, (node, version)


def _logged(c: cluster.Cluster, command: str, text: str) -> bool:
    return text in shell(c, command)


def _sync(probe: Callable[[], T]) -> Callable[[], Awaitable[T]]:
    async def run() -> T:
        return probe()

    return run


def _served(url: str, token: str) -> bool:
    return _get(url, token) == 200


def _tail(c: cluster.Cluster, pod: str) -> str:
    return shell(c, f"kubectl -n {NAMESPACE} logs {pod} --tail=20")


def _get(url: str, token: str | None) -> int:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the components' self-signed serving certificates
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            status: int = response.status
            return status
    except urllib.error.HTTPError as e:
        return e.code


async def test_metrics_are_served_only_to_a_metrics_reader_token(
    installed: cluster.Cluster, kube: KubeAPI
) -> None:
    try:
        shell(installed, "kubectl -n default create serviceaccount scraper")
        shell(installed, "kubectl -n default create serviceaccount stranger")
        shell(
            installed,
            "kubectl create clusterrolebinding e2e-scraper-kopf-dra-metrics "
            "--clusterrole=kopf-dra-metrics-reader --serviceaccount=default:scraper",
        )
        reader = shell(installed, "kubectl -n default create token scraper").strip()
        stranger = shell(installed, "kubectl -n default create token stranger").strip()
        pods = [
            p for p in await component_pods(kube) if p["metadata"]["name"].startswith("kopf-dra-")
        ]
        checked = 0
        for pod in pods:
            (container,) = pod["spec"]["containers"]
            ports = {p["name"]: p["containerPort"] for p in container.get("ports") or []}
            if "metrics" not in ports:
                continue
            url = f"https://{pod['status']['podIP']}:{ports['metrics']}/metrics"
            name = pod["metadata"]["name"]
            assert _get(url, None) == 401, name
            refused = _get(url, stranger)
            # A 503 is a review the API server did not answer, five tries: the log says why.
            assert refused == 403, (name, refused, _tail(installed, name))
            # The authorizer's answer may take a moment to reach a fresh binding's cache.
            await eventually(
                _sync(functools.partial(_served, url, reader)), within=60, what=f"metrics of {name}"
            )
            checked += 1
        assert checked >= len(LEASES) * 2 + 2
    finally:
        shell(
            installed,
            "kubectl delete clusterrolebinding e2e-scraper-kopf-dra-metrics --ignore-not-found && "
            "kubectl -n default delete serviceaccount scraper stranger --ignore-not-found",
        )


async def test_pod_security_is_enforced_privileged_audited_restricted_and_only_the_driver_audits(
    installed: cluster.Cluster, kube: KubeAPI
) -> None:
    labels = (await kube.get("Namespace", NAMESPACE))["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert labels["pod-security.kubernetes.io/audit"] == "restricted"
    violations: dict[str, str] = {}
    created = 0
    for line in installed.audit_log.read_text().splitlines():
        event = json.loads(line)
        ref = event.get("objectRef") or {}
        if ref.get("namespace") != NAMESPACE or ref.get("resource") != "pods":
            continue
        if event.get("stage") != "ResponseComplete" or ref.get("subresource"):
            continue
        created += 1
        audit = (event.get("annotations") or {}).get("pod-security.kubernetes.io/audit-violations")
        if audit:
            violations[event["user"]["username"]] = audit
    assert created >= len(LEASES) * 2 + 3
    # The DaemonSet controller creates the driver's pods; nothing else violates "restricted".
    daemon_set_controller = "system:serviceaccount:kube-system:daemon-set-controller"
    assert set(violations) == {daemon_set_controller}, violations


async def test_the_standby_scheduler_binds_a_new_pod_once_the_leader_is_deleted(
    installed: cluster.Cluster, kube: KubeAPI
) -> None:
    lease = await kube.get("Lease", "kopf-dra-scheduler", NAMESPACE)
    leader = lease["spec"]["holderIdentity"]
    # Gone for good (its container stopped) before the new pod exists: only the standby can
    # bind it. Created earlier, the leader could bind it between the delete and its SIGTERM.
    shell(installed, f"kubectl -n {NAMESPACE} delete pod {leader} --wait=true --timeout=60s")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "after-failover", "namespace": "default"},
        "spec": {
            "schedulerName": "kopf-dra",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "c",
                    "image": "docker.io/library/busybox:1.36",
                    "imagePullPolicy": "Never",
                    "command": ["sleep", "3600"],
                }
            ],
        },
    }
    await kube.create(pod)

    async def bound() -> str | None:
        node: str | None = (await kube.get("Pod", "after-failover", "default"))["spec"].get(
            "nodeName"
        )
        return node

    try:
        await eventually(bound, within=LEASE_DURATION, what="the standby to bind the new pod")
        holder = (await kube.get("Lease", "kopf-dra-scheduler", NAMESPACE))["spec"]
        assert holder.get("holderIdentity") not in (None, "", leader), holder
    finally:
        with contextlib.suppress(NotFoundError):
            await kube.delete("Pod", "after-failover", "default")


def test_the_overlay_changes_only_the_driver_paths_and_the_gates(
    installed: cluster.Cluster,
) -> None:
    """What the overlay renders differs from manifests/ in exactly its documented items."""
    base = _render(installed, project_root() / "manifests")
    overlay = _render(installed, OVERLAY)
    base_driver = base.pop(("DaemonSet", "kopf-dra-driver"))
    drivers = {k: overlay.pop(k) for k in list(overlay) if k[0] == "DaemonSet"}
    assert set(base) == set(overlay)
    for key, obj in overlay.items():
        if key[0] == "Deployment":
            env = obj["spec"]["template"]["spec"]["containers"][0]["env"]
            assert env[-1]["name"] == "KOPF_DRA_FEATURE_GATES"
            env.pop()
        assert obj == base[key], key
    assert installed.nodes is not None
    for node in installed.nodes.nodes:
        ds = drivers[("DaemonSet", f"kopf-dra-driver-{node.name}")]
        spec = ds["spec"]["template"]["spec"]
        assert spec["nodeSelector"] == {"kubernetes.io/hostname": node.name}
        paths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
        assert paths == {
            "plugins-registry": f"{node.kubelet_dir}/plugins_registry",
            "plugin-dir": f"{node.kubelet_dir}/plugins/{DRIVER}",
            "cdi": str(node.cdi_dir),
        }
        mounts = {m["name"]: m["mountPath"] for m in spec["containers"][0]["volumeMounts"]}
        assert all(mounts[name] == path for name, path in paths.items())
    assert base_driver["spec"]["template"]["spec"]["volumes"][1]["hostPath"]["path"] == (
        "/var/lib/kubelet/plugins_registry"
    )


def _render(c: cluster.Cluster, path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    items = yaml.safe_load_all(c.run_kubectl("kustomize", str(path)))
    return {(o["kind"], o["metadata"]["name"]): o for o in items if o}


async def test_the_deployed_pool_validator_answers_a_pool_status_request(
    installed: cluster.Cluster, kube: KubeAPI
) -> None:
    """Its own RBAC, the only writer (kube-controller-manager runs without its controller)."""
    assert installed.nodes is not None
    request = await kube.create(
        {
            "apiVersion": "resource.k8s.io/v1alpha3",
            "kind": "ResourcePoolStatusRequest",
            "metadata": {"name": "e2e-how-much-is-free"},
            "spec": {"driver": DRIVER},
        }
    )

    async def complete() -> dict[str, Any] | None:
        body = await kube.get("ResourcePoolStatusRequest", request["metadata"]["name"])
        conditions = (body.get("status") or {}).get("conditions") or []
        done = any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)
        return body if done else None

    body = await eventually(complete, within=60, what="the request answered Complete")
    pools = {p["poolName"]: p for p in body["status"]["pools"]}
    for node in installed.nodes.nodes:
        assert pools[node.name]["totalDevices"] > 0, pools[node.name]
        assert "validationError" not in pools[node.name]
    with contextlib.suppress(NotFoundError):
        await kube.delete("ResourcePoolStatusRequest", request["metadata"]["name"])
