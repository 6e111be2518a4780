"""Bringing the demo's system up: the base objects, virtual (or real) nodes with the example
driver, the operators as child processes, the fabric and the example workloads.

The demo (``command``), ``in_cluster`` and the e2e suite (``e2e/``) start the system with
these functions.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import os
import secrets
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import yaml

from operators.api.core import Node
from operators.api.features import format_feature_gates
from operators.demo.supervision import REPO_ROOT, Child, DemoError, Supervisor, wait_for
from operators.kube.api import ConflictError, KubeAPI
from operators.localcluster import controlplane, manifests, realnode
from operators.localcluster.files import CHECKOUT

MANIFESTS: Final = REPO_ROOT / "manifests"
EXAMPLES: Final = MANIFESTS / "examples"
CRDS: Final = REPO_ROOT / "crds"
DRIVER: Final = "example.kopf-dra.io"
SCHEDULER_NAME: Final = "kopf-dra"
RACK_LABEL: Final = "example.kopf-dra.io/rack"
FABRIC_LABEL: Final = "resource.kopf-dra.io/fabric"
OPERATORS: Final = ("claim-templates", "reservations", "scheduler", "pool-validator")
# Scenarios in manifests/examples/ that need the fabric components.
FABRIC_EXAMPLES: Final = frozenset({"fabric-gpu"})
#: Examples of pod groups (scheduling.k8s.io/v1beta1): Kubernetes 1.37 with GenericWorkload and
#: DRAWorkloadResourceClaims on.
GROUP_EXAMPLES: Final = frozenset({"composite-training", "gang-training", "rack-training"})
#: Examples of 1.37's alpha features, with the gate each needs on: the API server drops their
#: fields with it off, so they run only where it is on (e2e/test_alpha_features.py).
ALPHA_EXAMPLES: Final = {
    "compatibility-groups": "DRADeviceCompatibilityGroups",
    "derived-attributes": "DRADerivedAttributes",
    "node-allocatable": "DRANodeAllocatableResources",
}
#: Examples that hold whole GPUs the others partition, or more GPUs in one rack than the demo
#: has: never among "all", run when named.
ALONE_EXAMPLES: Final = frozenset({"composite-training", "numa-alignment", "rack-training"})


# --- virtual nodes -------------------------------------------------------------------------


def manifest_profiles() -> dict[str, Any]:
    """The driver profile of the DaemonSet's ConfigMap: every real node gets this one."""
    for doc in manifests.load_documents(MANIFESTS / "driver" / "configmap.yaml"):
        if doc["kind"] == "ConfigMap":
            profiles: dict[str, Any] = yaml.safe_load(doc["data"]["profiles.yaml"])
            return profiles
    raise DemoError("manifests/driver/configmap.yaml holds no ConfigMap")


@dataclasses.dataclass(frozen=True)
class VirtualNode:
    """A Node object with an example driver of its own (``profiles`` None: the ConfigMap's).

    With ``kubelet_dir`` and ``cdi_dir`` the node is real (``operators/localcluster/realnode.py``):
    its kubelet registers the Node and calls the driver there, its containerd reads the CDI specs.
    ``declared_features``: what a virtual node reports in ``status.declaredFeatures``, as a kubelet
    with those gates on would (NodeDeclaredFeatures: e.g. a slice whose devices take node
    resources needs its node to declare DRANodeAllocatableResources).
    """

    name: str
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    profiles: Mapping[str, Any] | None = None
    kubelet_dir: str | None = None
    cdi_dir: str | None = None
    declared_features: tuple[str, ...] = ()

    @property
    def real(self) -> bool:
        return self.kubelet_dir is not None

    def driver_config(self) -> dict[str, Any]:
        return dict(self.profiles) if self.profiles is not None else manifest_profiles()


WIRED: Final = {RACK_LABEL: "rack-a", FABRIC_LABEL: "fabric1"}
# The kind cluster's two workers (e2e/kind/cluster.yaml), as virtual nodes: the e2e scenarios
# expect exactly this (one A100 with MIG partitions, one T4 and one 100G NIC per node).
E2E_NODES: Final = (
    VirtualNode("kopf-dra-worker", WIRED),
    VirtualNode("kopf-dra-worker2", WIRED),
)
# `make run`: four such GPU nodes, a NIC node, and a node with nothing but its fabric port.
DEMO_NODES: Final = (
    *E2E_NODES,
    VirtualNode("kopf-dra-gpu-3", WIRED),
    VirtualNode("kopf-dra-gpu-4", WIRED),
    VirtualNode(
        "kopf-dra-nic-node",
        {},
        {"nics": [{"count": 2, "model": "ConnectX-7", "bandwidth": "100G"}]},
    ),
    VirtualNode("kopf-dra-fabric-node", {FABRIC_LABEL: "fabric1"}, {"gpus": [], "nics": []}),
)
# The simulated fabric behind the fabric-wired nodes (quick attaches for a demo).
FABRIC_INVENTORY: Final = {
    "attachSeconds": 1,
    "detachSeconds": 1,
    "devices": [
        {"model": "A100", "vendor": "nvidia", "memory": "80Gi", "count": 2},
        {"model": "H100", "vendor": "nvidia", "memory": "94Gi", "count": 2},
    ],
}


def node_body(node: VirtualNode) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": {"kubernetes.io/hostname": node.name, **node.labels},
        },
    }


NODE_STATUS: Final = {
    "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
    "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
    "conditions": [
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "virtual node of kopf-dra demo",
            "lastHeartbeatTime": "2026-01-01T00:00:00Z",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    ],
}


async def ensure_node(api: KubeAPI, node: VirtualNode) -> None:
    """Create (or keep) the Node and report it Ready, as its kubelet would."""
    try:
        body = await api.create(node_body(node))
    except ConflictError:
        body = await api.get("Node", node.name)
    body["status"] = NODE_STATUS
    if node.declared_features:
        body["status"] = {**NODE_STATUS, "declaredFeatures": sorted(node.declared_features)}
    await api.replace_status(body)


# --- the system ----------------------------------------------------------------------------


@dataclasses.dataclass
class System:
    """What ``start_system`` started, to stop it again."""

    supervisor: Supervisor
    nodes: tuple[VirtualNode, ...]
    workdir: Path
    fabric: bool

    @property
    def real(self) -> bool:
        """Kubelets run the pods (a graceful deletion completes)."""
        return any(n.real for n in self.nodes)

    def stop(self) -> None:
        self.supervisor.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def start_driver(self, node: VirtualNode, *extra: str) -> Child:
        """The example driver of ``node`` (again, after ``stop_child``), with ``extra`` flags."""
        home = self.workdir / node.name
        (home / "kubelet").mkdir(parents=True, exist_ok=True)
        profiles = home / "profiles.yaml"
        profiles.write_text(yaml.safe_dump(node.driver_config()))
        return self.supervisor.start(
            f"driver-{node.name}",
            "run", "driver",
            "--node-name", node.name,
            "--profiles", str(profiles),
            "--kubelet-dir", node.kubelet_dir or str(home / "kubelet"),
            "--cdi-dir", node.cdi_dir or str(home / "cdi"),
            "--state-dir", str(home / "state"),
            "--resync-seconds", "2",
            # The demo's drivers share the admin kubeconfig, which may write any claim.
            "--allow-arbitrary-node-status",
            *extra,
        )  # fmt: skip


async def install_base(api: KubeAPI) -> None:
    """Namespace kopf-dra, the CRDs and the example driver's DeviceClasses."""
    objects = [o for o in manifests.render(MANIFESTS) if o["kind"] == "Namespace"]
    objects += manifests.render(CRDS)
    objects += manifests.load_documents(MANIFESTS / "driver" / "deviceclasses.yaml")
    await manifests.apply(api, objects)


async def start_system(
    api: KubeAPI,
    kubeconfig: Path,
    *,
    nodes: Sequence[VirtualNode],
    log_dir: Path,
    operators: bool = True,
    fabric: bool = True,
    feature_gates: Mapping[str, bool] | None = None,
) -> System:
    """Install the base, create ``nodes`` with a driver each, start the operators with
    ``feature_gates`` (the cluster's DRA gates; None: Kubernetes' defaults)."""
    await install_base(api)
    workdir = Path(tempfile.mkdtemp(prefix="kd-"))  # short: unix socket paths live below
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "KOPF_DRA_LOG_JSON": "false",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("PYTHONPATH", None)
    if REPO_ROOT == CHECKOUT:  # a wheel's components need no path
        env["PYTHONPATH"] = str(REPO_ROOT)
    # Settings come from flags here; a user's KOPF_DRA_* must not change the demo.
    for key in [k for k in env if k.startswith("KOPF_DRA_") and k != "KOPF_DRA_LOG_JSON"]:
        del env[key]
    if feature_gates is not None:
        env["KOPF_DRA_FEATURE_GATES"] = format_feature_gates(feature_gates)
    supervisor = Supervisor(log_dir, env)
    system = System(supervisor, tuple(nodes), workdir, fabric)
    try:
        for node in nodes:
            if not node.real:  # a real node's kubelet registers the Node itself
                await ensure_node(api, node)
            system.start_driver(node)
        if operators:
            supervisor.start("claim-templates", "run", "claim-templates")
            supervisor.start("reservations", "run", "reservations")
            supervisor.start(
                "scheduler", "run", "scheduler", "--unschedulable-retry", "5",
                "--binding-timeout", "60",
            )  # fmt: skip
            supervisor.start("pool-validator", "run", "pool-validator",
                             "--incomplete-grace-period", "5")  # fmt: skip
        if fabric and operators:
            start_fabric(supervisor, workdir)
        names = {n.name for n in nodes}

        async def pools_published() -> bool:
            slices = (await api.list("ResourceSlice"))["items"]
            published = {s["spec"].get("nodeName") for s in slices if s["spec"]["driver"] == DRIVER}
            return names <= published

        await wait_for(pools_published, "every virtual node's ResourceSlices", supervisor)
    except BaseException:
        system.stop()
        raise
    return system


def start_fabric(supervisor: Supervisor, workdir: Path) -> None:
    """The simulated fabric manager and the fabric controller, with a token made for this run
    (the manager's directory holds it as cluster ``default``, the controller its own copy)."""
    config = workdir / "fabric.yaml"
    config.write_text(yaml.safe_dump(FABRIC_INVENTORY))
    tokens = workdir / "fabric-tokens"
    tokens.mkdir(mode=0o700)
    token = secrets.token_hex(32)
    token_file = workdir / "fabric-token"
    for path in (tokens / "default", token_file):
        path.touch(mode=0o600)
        path.write_text(token)
    port = controlplane.free_port()
    supervisor.start(
        "fabric-manager-sim", "run", "fabric-manager-sim",
        "--fabric-config", str(config), "--host", "127.0.0.1", "--port", str(port),
        "--tokens-dir", str(tokens),
    )  # fmt: skip
    supervisor.start(
        "fabric", "run", "fabric",
        "--manager-url", f"http://127.0.0.1:{port}",
        "--manager-token-file", str(token_file),
        "--publish-seconds", "2", "--poll-seconds", "0.5",
    )  # fmt: skip


# --- the example workloads -----------------------------------------------------------------


def example_names(
    fabric: bool = True, groups: bool = True, gates: Mapping[str, bool] | None = None
) -> list[str]:
    """The examples a cluster can run: the fabric ones need the fabric controller, the pod
    group ones Kubernetes 1.37 with GenericWorkload and DRAWorkloadResourceClaims on, the
    alpha ones their gate in ``gates``."""
    names = sorted(p.name for p in EXAMPLES.iterdir() if (p / "kustomization.yaml").is_file())
    return [
        n
        for n in names
        if (fabric or n not in FABRIC_EXAMPLES)
        and (groups or n not in GROUP_EXAMPLES)
        and (n not in ALPHA_EXAMPLES or bool((gates or {}).get(ALPHA_EXAMPLES[n])))
    ]


def serves_groups(gates: Mapping[str, bool]) -> bool:
    """The cluster of these gates serves PodGroups with claims (``GROUP_EXAMPLES`` run)."""
    return bool(gates.get("GenericWorkload") and gates.get("DRAWorkloadResourceClaims"))


def example_objects(name: str) -> list[dict[str, Any]]:
    return manifests.load_directory(EXAMPLES / name)


def gang_one_gpu_short(group: str = "training") -> list[dict[str, Any]]:
    """gang-training with a fifth trainer and ``minCount: 5``: one GPU more than the two e2e
    nodes have, so that no trainer may be placed; the PodGroup named ``group``."""
    objects = example_objects("gang-training")
    pods = [o for o in objects if o["kind"] == "Pod"]
    fifth = copy.deepcopy(pods[-1])
    fifth["metadata"]["name"] = f"trainer-{len(pods)}"
    objects.append(fifth)
    for obj in objects:
        if obj["kind"] == "PodGroup":
            obj["metadata"]["name"] = group
            obj["spec"]["schedulingPolicy"]["gang"]["minCount"] = len(pods) + 1
        elif obj["kind"] == "Pod":
            obj["spec"]["schedulingGroup"]["podGroupName"] = group
    return objects


def in_one_rack(example: str, keep: int) -> list[dict[str, Any]]:
    """``rack-training`` or ``composite-training`` cut to what one rack of the two real nodes
    (four GPUs) holds: the first ``keep`` pods of its last PodGroup (the trainers, the
    workers), that group's ``minCount`` lowered to match."""
    objects = example_objects(example)
    groups = [o for o in objects if o["kind"] == "PodGroup"]
    last = groups[-1]["metadata"]["name"]
    members = [
        o
        for o in objects
        if o["kind"] == "Pod" and o["spec"]["schedulingGroup"]["podGroupName"] == last
    ]
    dropped = {id(o) for o in members[keep:]}
    groups[-1]["spec"]["schedulingPolicy"]["gang"]["minCount"] = keep
    return [o for o in objects if id(o) not in dropped]


async def ensure_default_service_account(api: KubeAPI, namespace: str) -> None:
    """What a controller-manager creates in every namespace of a real cluster, and the local
    control plane has none of: the ``default`` ServiceAccount and the ``kube-root-ca.crt``
    ConfigMap (a real kubelet mounts it into every pod with the service account token)."""
    with contextlib.suppress(ConflictError):
        await api.create(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "default", "namespace": namespace},
            }
        )
    ca_path = api.api_client.configuration.ssl_ca_cert
    if ca_path:
        ca = await asyncio.to_thread(Path(ca_path).read_text)
        with contextlib.suppress(ConflictError):
            await api.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "kube-root-ca.crt", "namespace": namespace},
                    "data": {"ca.crt": ca},
                }
            )


async def apply_example(
    api: KubeAPI, name: str, objects: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Apply one scenario's files unchanged (server-side apply), or ``objects`` instead (a
    variant of it)."""
    objects = example_objects(name) if objects is None else objects
    namespaces = [o for o in objects if o["kind"] == "Namespace"]
    await manifests.apply(api, namespaces)
    for namespace in namespaces:
        await ensure_default_service_account(api, namespace["metadata"]["name"])
    return await manifests.apply(api, [o for o in objects if o["kind"] != "Namespace"])


# --- real nodes ----------------------------------------------------------------------------


async def start_real_nodes(
    api: KubeAPI, kubeconfig: Path, stack: contextlib.ExitStack
) -> tuple[VirtualNode, ...]:
    """The e2e workers as real kubelets (``realnode``), stopped by ``stack`` (host restored)."""
    missing = realnode.missing_prerequisites()
    if missing:
        raise DemoError("--real-node needs: " + "; ".join(missing))
    stack.enter_context(realnode.host_lock())
    host = realnode.HostState.record()
    base = Path(tempfile.mkdtemp(prefix="kdn-"))
    try:
        started = await asyncio.to_thread(
            realnode.start, [(n.name, dict(n.labels)) for n in E2E_NODES], kubeconfig, base, host
        )
    except realnode.RealNodeError as e:
        raise DemoError(str(e)) from None
    stack.callback(started.stop)
    names = {n.name for n in started.nodes}

    async def ready() -> bool:
        started.check()
        items = (await api.list("Node"))["items"]
        return names <= {n["metadata"]["name"] for n in items if Node.load(n).is_ready}

    await wait_for(ready, "the real nodes to be Ready", within=120)
    return tuple(
        VirtualNode(n.name, n.labels, kubelet_dir=str(n.kubelet_dir), cdi_dir=str(n.cdi_dir))
        for n in started.nodes
    )
