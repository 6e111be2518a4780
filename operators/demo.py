"""``kopf-dra demo`` (what ``make run`` runs): the whole system on one machine, and a live view.

It starts the local control plane (or uses ``--kubeconfig``), installs the CRDs and the example
driver's DeviceClasses, creates virtual nodes (Node objects) with the example driver running for
each, starts every operator as a child process, applies the example workloads from
``manifests/examples/`` and shows, every ``--refresh`` seconds, the pods with their nodes and
devices, the utilisation of every counter set and shared device, and the pending pods with the
scheduler's reasons. Ctrl-C (or ``--once`` / ``--duration``) stops everything: every child runs
in its own process group, which is terminated, then killed; children also die with the demo
(PR_SET_PDEATHSIG) if it is killed itself.

The e2e suite (``e2e/``) starts the system with the same functions.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import dataclasses
import datetime
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import yaml

from operators.aio import wait_at_most
from operators.api.core import Pod
from operators.api.features import feature_gates_argument, format_feature_gates
from operators.api.quantity import Quantity
from operators.kube import cluster, controlplane, manifests, realnode
from operators.kube.api import ApiError, ConflictError, KubeAPI, NotFoundError
from operators.kube.client import make_api_client
from operators.kube.files import CHECKOUT, project_root

REPO_ROOT: Final = project_root()
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


class DemoError(RuntimeError):
    """The system could not be started (a child exited, a pool never appeared)."""


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

    With ``kubelet_dir`` and ``cdi_dir`` the node is real (``operators/kube/realnode.py``): its
    kubelet registers the Node and calls the driver there, its containerd reads the CDI specs.
    """

    name: str
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    profiles: Mapping[str, Any] | None = None
    kubelet_dir: str | None = None
    cdi_dir: str | None = None

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
    await api.replace_status(body)


# --- child processes -----------------------------------------------------------------------


def _own_group_and_die_with_parent() -> None:  # pragma: no cover - runs in the child
    os.setsid()
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@dataclasses.dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    log: Path


class Supervisor:
    """Child processes in process groups of their own; ``stop`` leaves nothing running."""

    def __init__(self, log_dir: Path, env: Mapping[str, str]) -> None:
        self.log_dir = log_dir
        self.env = dict(env)
        self.children: list[Child] = []
        log_dir.mkdir(parents=True, exist_ok=True)

    def start(self, name: str, *args: str) -> Child:
        log = self.log_dir / f"{name}.log"
        with open(log, "ab") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "operators.cli", *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                cwd=REPO_ROOT,
                preexec_fn=_own_group_and_die_with_parent,
            )
        child = Child(name, process, log)
        self.children.append(child)
        return child

    def pids(self) -> list[int]:
        return [c.process.pid for c in self.children]

    def exited(self) -> list[Child]:
        return [c for c in self.children if c.process.poll() is not None]

    def check(self) -> None:
        for child in self.exited():
            tail = "\n".join(child.log.read_text(errors="replace").splitlines()[-15:])
            raise DemoError(
                f"{child.name} exited with {child.process.returncode}; {child.log}:\n{tail}"
            )

    def stop_child(self, name: str, timeout: float = 10.0) -> None:
        """Stop one child (SIGTERM, then SIGKILL of its group) and forget it."""
        for child in [c for c in self.children if c.name == name]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.process.wait(timeout=timeout)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.process.pid, signal.SIGKILL)
            child.process.wait()
            self.children.remove(child)

    def stop(self, timeout: float = 10.0) -> None:
        for child in self.children:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for child in self.children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            # The group too: anything the child started itself.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.process.pid, signal.SIGKILL)
            child.process.wait()
        self.children.clear()


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


async def wait_for(
    probe: Any, what: str, supervisor: Supervisor | None = None, within: float = 60.0
) -> Any:
    """Poll ``probe`` (an async callable) until truthy; children exiting fail it early."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        if supervisor is not None:
            supervisor.check()
        result = await probe()
        if result:
            return result
        if loop.time() > deadline:
            raise DemoError(f"timed out after {within:.0f}s waiting for {what}")
        await asyncio.sleep(0.25)


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


def example_names(fabric: bool = True) -> list[str]:
    names = sorted(p.name for p in EXAMPLES.iterdir() if (p / "kustomization.yaml").is_file())
    return [n for n in names if fabric or n not in FABRIC_EXAMPLES]


def example_objects(name: str) -> list[dict[str, Any]]:
    return manifests.load_directory(EXAMPLES / name)


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


async def apply_example(api: KubeAPI, name: str) -> list[dict[str, Any]]:
    """Apply one scenario's files unchanged (server-side apply)."""
    objects = example_objects(name)
    namespaces = [o for o in objects if o["kind"] == "Namespace"]
    await manifests.apply(api, namespaces)
    for namespace in namespaces:
        await ensure_default_service_account(api, namespace["metadata"]["name"])
    return await manifests.apply(api, [o for o in objects if o["kind"] != "Namespace"])


# --- the live view -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Snapshot:
    pods: list[dict[str, Any]]
    claims: list[dict[str, Any]]
    pool_statuses: list[dict[str, Any]]
    slices: list[dict[str, Any]]
    #: Pod key -> its container's log, for pods whose containers run (real nodes).
    logs: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: ResourcePoolStatusRequests (KEP-5677; empty where resource.k8s.io/v1alpha3 is not served).
    requests: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def containers_running(pod: Mapping[str, Any]) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return bool(statuses) and all("running" in (s.get("state") or {}) for s in statuses)


_SEEN = re.compile(r"^KOPF_DRA_DEVICE_(\w+?)_(MODEL|PROFILE|BANDWIDTH)=(.*)$")


def container_view(log: str) -> str:
    """What the example pods print of their devices, in one line: each device's model,
    profile or bandwidth share from its CDI environment, and the device nodes it sees."""
    seen: dict[str, list[str]] = {}
    nodes = []
    for line in log.splitlines():
        if match := _SEEN.match(line.strip()):
            device, what, value = match.groups()
            if what == "BANDWIDTH":
                with contextlib.suppress(ValueError):
                    value = human(value)
            seen.setdefault(device.lower(), []).append(f"{what.lower()}={value}")
        elif line.startswith("c") and line.split()[-1:]:  # `ls -l` of a character device
            nodes.append("/dev/kopf-dra/" + line.split()[-1])
    parts = [f"{device} {' '.join(values)}" for device, values in sorted(seen.items())]
    return "; ".join(parts + nodes) or "(no device variables)"


async def snapshot(api: KubeAPI) -> Snapshot:
    pods = [
        p
        for p in (await api.list("Pod"))["items"]
        if p["spec"].get("schedulerName") == SCHEDULER_NAME
    ]
    claims = (await api.list("ResourceClaim"))["items"]
    try:
        statuses = (await api.list("ResourcePoolStatus"))["items"]
    except (NotFoundError, ApiError):
        statuses = []
    slices = (await api.list("ResourceSlice"))["items"]
    try:
        requests = (await api.list("ResourcePoolStatusRequest"))["items"]
    except (NotFoundError, ApiError):
        requests = []
    logs = {}
    for pod in pods:
        if containers_running(pod):
            meta = pod["metadata"]
            with contextlib.suppress(ApiError, OSError, TimeoutError):
                logs[_key(pod)] = await api.pod_log(meta["namespace"], meta["name"])
    return Snapshot(pods, claims, statuses, slices, logs, requests)


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace')}/{meta['name']}"


def pod_claims(pod: Mapping[str, Any], claims: Mapping[str, Mapping[str, Any]]) -> list[Any]:
    """The claims of a pod (direct names and generated ones), those that exist."""
    model = Pod.load(pod)
    namespace = model.metadata.namespace
    names = (model.claim_name(entry) for entry in model.spec.resource_claims)
    return [claims[f"{namespace}/{n}"] for n in names if n and f"{namespace}/{n}" in claims]


def allocated_devices(claim: Mapping[str, Any]) -> list[dict[str, Any]]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results: list[dict[str, Any]] = (allocation.get("devices") or {}).get("results") or []
    return results


def scheduled_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled":
            return dict(condition)
    return None


def is_settled(pod: Mapping[str, Any]) -> bool:
    """Bound, or the scheduler has said why not."""
    if pod["spec"].get("nodeName"):
        return True
    condition = scheduled_condition(pod)
    return bool(condition and condition.get("status") == "False" and condition.get("message"))


def pools_reported(snap: Snapshot) -> bool:
    """Every pool with slices has its ResourcePoolStatus (the pool validator caught up)."""
    pools = {(s["spec"]["driver"], s["spec"]["pool"]["name"]) for s in snap.slices}
    reported = {(s["spec"]["driver"], s["spec"]["pool"]) for s in snap.pool_statuses}
    return pools <= reported


def _bar(ratio: float, width: int = 10) -> str:
    filled = max(0, min(width, round(ratio * width)))
    return "#" * filled + "." * (width - filled)


def _ratio(used: str, total: str) -> float:
    total_q = Quantity(total).value
    return float(Quantity(used).value / total_q) if total_q else 0.0


SUFFIXES: Final = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
}


def human(quantity: str, like: str | None = None) -> str:
    """A quantity in the unit ``like`` is written in (``58593750Ki`` like ``100G``: ``60G``);
    without ``like``, in the largest unit that divides it (decimal first)."""
    value = Quantity(quantity).value
    if like is None:
        exact = [
            u for u in ("T", "G", "M", "k", "Ti", "Gi", "Mi", "Ki") if value % SUFFIXES[u] == 0
        ]
        unit = exact[0] if exact and value else ""
    else:
        unit = next((u for u in sorted(SUFFIXES, key=len, reverse=True) if like.endswith(u)), "")
    if not unit:
        return str(Quantity(quantity))
    text = f"{value / SUFFIXES[unit]:.1f}".removesuffix(".0")
    return f"{text}{unit}"


def _device_label(result: Mapping[str, Any]) -> str:
    label = f"{result['pool']}/{result['device']}"
    if result["driver"] != DRIVER:
        label = f"{result['driver']}/{label}"
    consumed = result.get("consumedCapacity") or {}
    if consumed:
        label += " (" + ", ".join(f"{k} {human(v)}" for k, v in sorted(consumed.items())) + ")"
    if result.get("adminAccess"):
        label += " [admin]"
    request = str(result.get("request", ""))
    if "/" in request:
        label += f" <{request}>"
    return label


def _table(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return [
        indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1]
        for r in rows
    ]


UNLIMITED_WIDTH: Final = 1_000_000


def output_width(out: Any) -> int:
    """The terminal's; a file or pipe gets whole lines (a log keeps every reason)."""
    tty = hasattr(out, "isatty") and out.isatty()
    return shutil.get_terminal_size().columns if tty else UNLIMITED_WIDTH


def _answer_view(requests: Sequence[Mapping[str, Any]]) -> list[str]:
    """The newest answered ResourcePoolStatusRequest, to read beside the POOLS view: what a
    user scripting against the upstream API gets (the pool validator's counts)."""
    answered = [r for r in requests if r.get("status")]
    if not answered:
        return []
    newest = max(answered, key=lambda r: (r["metadata"].get("creationTimestamp") or "", _key(r)))
    status = newest["status"]
    message = next((c.get("message") or "" for c in status.get("conditions") or []), "")
    lines = ["", f"REQUESTED  ResourcePoolStatusRequest {newest['metadata']['name']}: {message}"]
    rows = [["DRIVER/POOL", "TOTAL", "ALLOCATED", "UNAVAILABLE", "AVAILABLE"]]
    for pool in status.get("pools") or []:
        name = f"{pool.get('driver')}/{pool.get('poolName')}"
        if pool.get("validationError"):
            rows.append([name, "-", "-", "-", pool["validationError"]])
            continue
        fields = ("totalDevices", "allocatedDevices", "unavailableDevices", "availableDevices")
        rows.append([name, *(str(pool.get(f, 0)) for f in fields)])
    return lines + _table(rows)


def render_view(snap: Snapshot, *, header: str = "", width: int = 120) -> str:
    """One frame of the live view (pure: the same snapshot gives the same text)."""
    claims = {_key(c): c for c in snap.claims}
    bound = sorted((p for p in snap.pods if p["spec"].get("nodeName")), key=_key)
    pending = sorted((p for p in snap.pods if not p["spec"].get("nodeName")), key=_key)
    lines = [header] if header else []
    lines.append(f"PODS  {len(bound)} bound, {len(pending)} pending")
    rows = [["POD", "NODE", "PHASE", "DEVICES"]]
    for pod in bound:
        devices = [_device_label(r) for c in pod_claims(pod, claims) for r in allocated_devices(c)]
        phase = str((pod.get("status") or {}).get("phase") or "Pending")
        rows.append([_key(pod), pod["spec"]["nodeName"], phase, ", ".join(devices) or "-"])
    lines += _table(rows) if bound else ["  (none yet)"]

    lines.append("")
    lines.append("POOLS  counter sets: consumed / total")
    rows = [["DRIVER/POOL", "DEVICES", "COUNTER SET", "UTILISATION"]]
    for status in sorted(
        snap.pool_statuses, key=lambda s: (s["spec"]["driver"], s["spec"]["pool"])
    ):
        spec, st = status["spec"], status.get("status") or {}
        counts = st.get("devices") or {}
        pool = f"{spec['driver']}/{spec['pool']}"
        count = f"{counts.get('allocated', 0)}/{counts.get('total', 0)} used"
        counter_sets = st.get("counterSets") or []
        if not counter_sets:
            rows.append([pool, count, "-", ""])
        for i, counter_set in enumerate(counter_sets):
            counters = {c["name"]: c for c in counter_set.get("counters") or []}
            shown = []
            for name in ("memory", "multiprocessors"):
                if name in counters:
                    c = counters[name]
                    shown.append(
                        f"{name} {_bar(_ratio(c['consumed'], c['total']))} "
                        f"{human(c['consumed'], like=c['total'])}/{c['total']}"
                    )
            slices = [c for n, c in counters.items() if n.startswith("memory-slice-")]
            if slices:
                used = sum(1 for c in slices if Quantity(c["consumed"]).sign())
                shown.append(f"slices {used}/{len(slices)}")
            rows.append(
                [
                    pool if i == 0 else "",
                    count if i == 0 else "",
                    counter_set["name"],
                    "  ".join(shown),
                ]
            )
    lines += _table(rows) if len(rows) > 1 else ["  (no ResourcePoolStatus yet)"]
    lines += _answer_view(snap.requests)

    shared = shared_capacity(snap)
    if shared:
        lines.append("")
        lines.append("SHARED DEVICES  consumable capacity: consumed / total")
        rows = [["DEVICE", "CAPACITY", "CONSUMERS"]]
        for device, (capacity, consumers) in sorted(shared.items()):
            rows.append([device, capacity, ", ".join(sorted(consumers))])
        lines += _table(rows)

    if snap.logs:
        lines.append("")
        lines.append("CONTAINERS  what each running container sees of its devices")
        rows = [[key, container_view(log)] for key, log in sorted(snap.logs.items())]
        lines += _table([["POD", "SEES"], *rows])

    lines.append("")
    lines.append(f"PENDING  {len(pending)}")
    for pod in pending:
        condition = scheduled_condition(pod)
        reason = (condition or {}).get("message") or "waiting for the scheduler"
        first = str(reason).splitlines()[0]
        lines.append(f"  {_key(pod)}: {first[: max(20, width - len(_key(pod)) - 4)]}")
    return "\n".join(lines) + "\n"


def shared_capacity(snap: Snapshot) -> dict[str, tuple[str, set[str]]]:
    """Devices with allowMultipleAllocations: capacity consumed by claims, and by whom."""
    totals: dict[str, dict[str, str]] = {}
    for s in snap.slices:
        spec = s["spec"]
        for device in spec.get("devices") or []:
            if device.get("allowMultipleAllocations"):
                key = f"{spec['pool']['name']}/{device['name']}"
                totals[key] = {n: c["value"] for n, c in (device.get("capacity") or {}).items()}
    used: dict[str, dict[str, Quantity]] = {}
    consumers: dict[str, set[str]] = {}
    for claim in snap.claims:
        for result in allocated_devices(claim):
            key = f"{result['pool']}/{result['device']}"
            if key not in totals:
                continue
            consumers.setdefault(key, set()).add(_key(claim).split("/")[0])
            for name, value in (result.get("consumedCapacity") or {}).items():
                entry = used.setdefault(key, {})
                entry[name] = entry.get(name, Quantity("0")) + Quantity(value)
    out = {}
    for key, capacity in totals.items():
        parts = []
        for name, total in sorted(capacity.items()):
            consumed = used.get(key, {}).get(name, Quantity("0"))
            used_text = human(str(consumed), like=total)
            parts.append(f"{name} {_bar(_ratio(str(consumed), total))} {used_text}/{total}")
        out[key] = ("  ".join(parts), consumers.get(key, set()))
    return out


# --- the command ---------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        default=None,
        help="run the operators against this cluster (default: start the local control plane); "
        "its nodes need the example driver (kubectl apply -k manifests/driver)",
    )
    parser.add_argument(
        "--feature-gates",
        type=feature_gates_argument,
        default={},
        metavar="Name=true,...",
        help="with --kubeconfig: the cluster's DRA feature gates, for every component (default: "
        "Kubernetes' defaults; the local control plane's own otherwise)",
    )
    parser.add_argument(
        "--virtual-nodes",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="create virtual nodes with an example driver each (default: only on the local "
        "control plane)",
    )
    parser.add_argument(
        "--real-node",
        action="store_true",
        help="run kopf-dra-worker and kopf-dra-worker2 as real kubelets with containerd on this "
        "machine (root; builds them once, several minutes cold; changes host sysctls while it "
        "runs and restores them), so their pods run and show what they see of their devices",
    )
    parser.add_argument(
        "--in-cluster",
        action="store_true",
        help="kopf-dra as pods: build its image, start the complete local cluster (real "
        "kubelets, kube-proxy, CoreDNS; root), install it with Helm, then the examples and the "
        "view (make run CLUSTER=1; needs a checkout)",
    )
    parser.add_argument(
        "--image",
        default=None,
        help="with --in-cluster: this image archive instead of building one (make image)",
    )
    parser.add_argument(
        "--examples",
        default="all",
        help="comma-separated scenarios of manifests/examples/ to apply, 'all' or 'none'",
    )
    parser.add_argument("--refresh", type=float, default=2.0, help="seconds between frames")
    parser.add_argument(
        "--once",
        action="store_true",
        help="print one frame once every pod is bound or has a reason, then stop everything",
    )
    parser.add_argument(
        "--duration", type=float, default=0.0, help="stop after this many seconds (0: Ctrl-C)"
    )
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="--once: give up waiting after this long"
    )
    parser.add_argument(
        "--state-dir",
        default=None,
        help="control plane data and logs (default: ~/.cache/kopf-dra/demo)",
    )
    parser.add_argument(
        "--pid-file", default=None, help="write the pids of every child process here (tests)"
    )


def selected_examples(spec: str, fabric: bool) -> list[str]:
    available = example_names(fabric)
    if spec == "all":
        return available
    if spec == "none":
        return []
    chosen = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [c for c in chosen if c not in available]
    if unknown:
        raise DemoError(f"unknown or unavailable examples {unknown}; available: {available}")
    return chosen


@contextlib.contextmanager
def control_plane_or(kubeconfig: str | None, state_dir: Path) -> Iterator[tuple[Path, str]]:
    """The given cluster, or a local control plane for the duration of the demo."""
    if kubeconfig:
        yield Path(kubeconfig), "cluster from " + kubeconfig
        return
    with controlplane.running(state_dir / "control-plane") as cp:
        yield cp.kubeconfig, f"local control plane {cp.server} (KUBECONFIG={cp.kubeconfig})"


async def _demo(args: argparse.Namespace, stop: asyncio.Event, out: Any) -> int:
    state_dir = Path(args.state_dir) if args.state_dir else controlplane.cache_root() / "demo"
    virtual = args.virtual_nodes if args.virtual_nodes is not None else not args.kubeconfig
    print("kopf-dra demo: starting (logs in %s)" % (state_dir / "logs"), file=out, flush=True)
    # The local control plane's gates, or the ones given for the user's cluster.
    gates = args.feature_gates if args.kubeconfig else controlplane.FEATURE_GATES
    with (
        control_plane_or(args.kubeconfig, state_dir) as (kubeconfig, where),
        contextlib.ExitStack() as stack,
    ):
        async with await make_api_client(kubeconfig) as api_client:
            api = KubeAPI(api_client)
            nodes: tuple[VirtualNode, ...] = DEMO_NODES if virtual else ()
            if args.real_node:
                print("kopf-dra demo: starting the real nodes...", file=out, flush=True)
                # Only the real nodes: every pod then runs or waits with the scheduler's reason.
                nodes = await start_real_nodes(api, kubeconfig, stack)
            system = await start_system(
                api, kubeconfig, nodes=nodes, log_dir=state_dir / "logs", feature_gates=gates
            )
            try:
                if args.pid_file:
                    pids = json.dumps(system.supervisor.pids())
                    await asyncio.to_thread(Path(args.pid_file).write_text, pids)
                applied = []
                for name in selected_examples(args.examples, system.fabric):
                    applied.append(name)
                    await apply_example(api, name)
                check = system.supervisor.check
                return await view(api, check, args, stop, out, where, applied)
            finally:
                system.stop()


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
        return names <= {n["metadata"]["name"] for n in items if node_ready(n)}

    await wait_for(ready, "the real nodes to be Ready", within=120)
    return tuple(
        VirtualNode(n.name, n.labels, kubelet_dir=str(n.kubelet_dir), cdi_dir=str(n.cdi_dir))
        for n in started.nodes
    )


def node_ready(node: Mapping[str, Any]) -> bool:
    """The kubelet reports the node Ready (runtime and network up)."""
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


async def view(
    api: KubeAPI,
    check: Callable[[], None],
    args: argparse.Namespace,
    stop: asyncio.Event,
    out: Any,
    where: str,
    applied: list[str],
    *,
    kubelets: bool = False,
) -> int:
    """The live view until ``stop`` (or ``--once``: one frame once every pod is settled, and
    with ``kubelets``, every bound pod Running)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    tty = hasattr(out, "isatty") and out.isatty()

    def width() -> int:
        return output_width(out)

    while True:
        check()  # a child process or a cluster component that exited fails the demo
        snap = await snapshot(api)
        now = datetime.datetime.now().strftime("%H:%M:%S")
        header = (
            f"kopf-dra demo  {now}  {where}\n"
            f"examples: {', '.join(applied) or '-'}  |  Ctrl-C stops everything\n"
        )
        settled = bool(snap.pods) and all(is_settled(p) for p in snap.pods) and pools_reported(snap)
        if kubelets:
            settled = settled and all(
                p["status"].get("phase") == "Running"
                for p in snap.pods
                if p["spec"].get("nodeName")
            )
        elapsed = loop.time() - started
        if args.once:
            if settled or elapsed > args.timeout:
                print(render_view(snap, header=header, width=width()), file=out, flush=True)
                return 0 if any(p["spec"].get("nodeName") for p in snap.pods) else 1
        else:
            frame = render_view(snap, header=header, width=width())
            print(("\x1b[H\x1b[2J" if tty else "\n") + frame, end="", file=out, flush=True)
            if args.duration and elapsed >= args.duration:
                return 0
        await wait_at_most(stop.wait(), args.refresh if not args.once else 0.5)
        if stop.is_set():
            return 0


InCluster = Callable[[argparse.Namespace, asyncio.Event, Any], Awaitable[int]]


def main(argv: Sequence[str], *, in_cluster: InCluster | None = None) -> int:
    """``kopf-dra demo``; ``in_cluster`` runs ``--in-cluster`` (``demo_cluster``, a layer above)."""
    parser = argparse.ArgumentParser(prog="kopf-dra demo", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)

    async def run() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        if args.in_cluster:
            if in_cluster is None:
                raise DemoError("--in-cluster: run it as `kopf-dra demo --in-cluster`")
            return await in_cluster(args, stop, sys.stdout)
        return await _demo(args, stop, sys.stdout)

    try:
        return asyncio.run(run())
    except (
        DemoError,
        controlplane.ControlPlaneError,
        manifests.ManifestError,
        realnode.RealNodeError,
        cluster.ClusterError,
    ) as e:
        print(f"kopf-dra demo: {e}", file=sys.stderr)
        return 2
    finally:
        print("kopf-dra demo: stopped, nothing left running", file=sys.stderr)
