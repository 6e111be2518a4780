"""Real nodes on this machine: containerd and the kubelet of the pinned release.

``hack/node/build.sh`` builds the kubelet, containerd (with its runc shim and ctr), a pause
program and two image archives into the per-version cache; runc, the CNI plugins and busybox
come from Debian (``hack/node/install-deps.sh``). Each node gets its own directory (kubelet
root, containerd root and state, CNI config, CDI specs, pod logs), its own ports, sockets,
cgroup root and bridge, so two nodes run side by side against one control plane.

Some of what the kubelet and containerd touch is host-wide whatever their directories say
(sysctls, ``/var/lib/kubelet/device-plugins``, ``/var/log/containers``, ``/var/lib/cni``,
``/run/containerd/s``): ``HostState`` records it before and restores it after, and a host-wide
lock (flock) keeps two runs apart. The kubelet runs without ``/usr/sbin`` on its PATH so that it
finds no iptables and leaves the host's rules alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from operators.api.features import Release
from operators.localcluster import controlplane
from operators.localcluster.files import project_root

BUILD_SCRIPT = project_root() / "hack" / "node" / "build.sh"
INSTALL_SCRIPT = project_root() / "hack" / "node" / "install-deps.sh"
LOCK_PATH = Path("/run/lock/kopf-dra-real-node.lock")
SANDBOX_IMAGE = "kopf-dra.local/pause:1"
CNI_BIN_DIR = Path("/usr/lib/cni")
CNI_PLUGINS = ("bridge", "host-local", "loopback")
RUNC = "runc"
#: Changed by the kubelet (kernel tunables it insists on) or by a CNI plugin.
SYSCTLS = ("kernel/panic", "kernel/panic_on_oops", "vm/overcommit_memory", "net/ipv4/ip_forward")
#: Written by the kubelet or containerd wherever their root directories are.
FIXED_PATHS = (
    Path("/var/lib/kubelet/device-plugins"),
    Path("/var/lib/kubelet"),
    Path("/var/log/containers"),
    Path("/var/lib/cni"),
    Path("/run/containerd/s"),
    Path("/run/containerd"),
)
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: The kubelet's PATH: no sbin, hence no iptables (it would add chains to the host's tables).
KUBELET_PATH = "/usr/local/bin:/usr/bin:/bin"
#: Pod addresses: the benchmarking range (RFC 2544), on a bridge no host interface joins.
POD_SUBNET = "198.18.{index}.0/24"
#: Every node's pod subnet (kube-proxy's cluster CIDR in the complete local cluster).
POD_CIDR = "198.18.0.0/16"
STARTUP_TIMEOUT = 120.0
#: The kubelets' releases when they differ from the control plane's (``node_versions``).
NODE_VERSION_ENV = "KOPF_DRA_NODE_KUBERNETES_VERSION"
#: How many minors a kubelet may lag kube-apiserver (Kubernetes' version skew policy).
MAX_KUBELET_SKEW = 3


class RealNodeError(RuntimeError):
    """A real node could not be built, started or stopped cleanly."""


# --- prerequisites -------------------------------------------------------------------------


def missing_prerequisites() -> list[str]:
    """What this machine lacks for real nodes (empty: it can run them); each names the fix."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root (the kubelet and containerd run as root)")
    filesystems = Path("/proc/filesystems")
    if not filesystems.exists() or "overlay" not in filesystems.read_text():
        missing.append("the overlay filesystem (containerd's overlayfs snapshotter)")
    if not (CGROUP_ROOT / "memory").is_dir() and not (CGROUP_ROOT / "cgroup.controllers").exists():
        missing.append("cgroups mounted under /sys/fs/cgroup")
    if shutil.which(RUNC) is None:
        missing.append("runc (hack/node/install-deps.sh)")
    absent = [p for p in CNI_PLUGINS if not (CNI_BIN_DIR / p).exists()]
    if absent:
        missing.append(
            f"CNI plugins {', '.join(absent)} in {CNI_BIN_DIR} (hack/node/install-deps.sh)"
        )
    if shutil.which("busybox") is None:
        missing.append("busybox, for the busybox image (hack/node/install-deps.sh)")
    if shutil.which("go") is None and not _cached():
        missing.append("Go, to build the kubelet and containerd")
    return missing


def _bin_dir() -> Path:
    return controlplane.cache_root() / controlplane.kubernetes_version() / "node" / "bin"


def _cached() -> bool:
    return (_bin_dir() / "kubelet").exists() and (_bin_dir() / "images" / "busybox.tar").exists()


def ensure_binaries(version: str | None = None) -> Path:
    """Build the node's binaries and images of ``version`` (default: the chosen release)
    unless cached; returns the bin directory."""
    proc = subprocess.run(
        ["bash", str(BUILD_SCRIPT)],
        capture_output=True, text=True, check=False, env=controlplane.release_env(version),
    )  # fmt: skip
    if proc.returncode != 0:
        release = f" {version}" if version else ""
        raise RealNodeError(f"building the node{release} failed:\n{proc.stderr[-4000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


def node_versions(
    count: int, control_plane: str | None = None, given: Sequence[str] | None = None
) -> list[str]:
    """The kubelets' releases, node by node: ``given``, else ``KOPF_DRA_NODE_KUBERNETES_VERSION``
    (comma-separated), the last repeating; else the control plane's. Refused unless
    ``hack/controlplane/VERSIONS`` lists each, and where Kubernetes' version skew policy forbids
    it: a kubelet newer than kube-apiserver, or more than three minors older."""
    server = control_plane or controlplane.kubernetes_version()
    newest = Release.parse(server)
    if not given:
        given = [v.strip() for v in os.environ.get(NODE_VERSION_ENV, "").split(",") if v.strip()]
    chosen = ([*given] + [given[-1]] * count)[:count] if given else [server] * count
    supported = controlplane.supported_versions()
    for version in chosen:
        if version not in supported:
            raise RealNodeError(
                f"{NODE_VERSION_ENV}: {version} is not a supported Kubernetes version; "
                f"supported: {' '.join(supported)} (hack/controlplane/VERSIONS)"
            )
        if not newest.minus(MAX_KUBELET_SKEW) <= Release.parse(version) <= newest:
            raise RealNodeError(
                f"{NODE_VERSION_ENV}: a {version} kubelet with a {server} kube-apiserver: "
                f"Kubernetes' version skew policy allows kubelets from {MAX_KUBELET_SKEW} minors "
                "older than kube-apiserver up to its own minor"
            )
    return chosen


def host_ip() -> str:
    """The host's first global IPv4 address: the kubelet refuses a loopback node IP."""
    out = subprocess.run(
        ["ip", "-o", "-4", "addr", "show", "scope", "global"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    for line in out.splitlines():
        fields = line.split()
        if "inet" in fields:
            return fields[fields.index("inet") + 1].split("/")[0]
    raise RealNodeError("no global IPv4 address on this host: the kubelet needs a node IP")


# --- the host: lock, record, restore -------------------------------------------------------


@contextlib.contextmanager
def host_lock(path: Path = LOCK_PATH) -> Iterator[None]:
    """Hold the host-wide lock; a second run waits for the first to finish."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@dataclasses.dataclass
class HostState:
    """What the nodes change outside their directories, as it was before they started."""

    sysctls: dict[str, str] = dataclasses.field(default_factory=dict)
    absent: list[Path] = dataclasses.field(default_factory=list)

    @classmethod
    def record(cls, extra_sysctls: Sequence[str] = ()) -> HostState:
        state = cls()
        for name in (*SYSCTLS, *extra_sysctls):
            path = Path("/proc/sys") / name
            if path.exists():
                state.sysctls[name] = path.read_text().strip()
        state.absent = [p for p in FIXED_PATHS if not p.exists()]
        return state

    def restore(self) -> list[str]:
        """Put everything back; returns what could not be restored."""
        problems = []
        for name, value in self.sysctls.items():
            path = Path("/proc/sys") / name
            try:
                if path.read_text().strip() != value:
                    path.write_text(value + "\n")
            except OSError as e:
                problems.append(f"sysctl {name}: {e}")
        for path in self.absent:  # deepest first: FIXED_PATHS lists children before parents
            if path.exists():
                unmount_below(path)
                shutil.rmtree(path, ignore_errors=True)
                if path.exists():
                    problems.append(f"{path} could not be removed")
        return problems


def _mounts_below(path: Path) -> list[str]:
    prefix = str(path).rstrip("/") + "/"
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point.startswith(prefix) or point == str(path):
            points.append(point)
    return points


def unmount_below(path: Path) -> None:
    for point in sorted(_mounts_below(path), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


# --- one node ------------------------------------------------------------------------------


@dataclasses.dataclass
class RealNode:
    """One kubelet with its own containerd, under ``home``."""

    name: str
    index: int
    home: Path
    labels: Mapping[str, str]
    bin_dir: Path
    node_ip: str
    kubelet_port: int = 0
    processes: dict[str, subprocess.Popen[bytes]] = dataclasses.field(default_factory=dict)
    #: Cluster DNS (the complete local cluster): the bridge becomes the pods' default gateway,
    #: so they reach the API server and Services, and the kubelet points them at this resolver.
    cluster_dns: str | None = None
    images: tuple[Path, ...] = ()
    #: The kubelet's release (``bin_dir``'s), whose gates it gets.
    version: str = dataclasses.field(default_factory=controlplane.kubernetes_version)
    #: Gates set on top of the release's (a scenario of an alpha feature the default gates
    #: leave off, e.g. DRAOptionalNodeOperations, which the kubelet declares on its Node).
    extra_gates: Mapping[str, bool] = dataclasses.field(default_factory=dict)
    #: The kubelet's ``--v`` (4 logs each DRA gRPC call it makes to a driver).
    verbosity: int = 2

    @property
    def kubelet_dir(self) -> Path:
        return self.home / "kubelet"

    @property
    def cdi_dir(self) -> Path:
        return self.home / "cdi"

    @property
    def containerd_socket(self) -> Path:
        return self.home / "containerd.sock"

    @property
    def cgroup_parent(self) -> str:
        return f"/kopf-dra-{self.name}"

    @property
    def bridge(self) -> str:
        return f"kdbr{self.index}"

    def log(self, name: str) -> Path:
        return self.home / f"{name}.log"

    def log_tail(self, name: str, lines: int = 25) -> str:
        path = self.log(name)
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    # --- configuration ---

    def containerd_config(self) -> str:
        cri = "plugins.'io.containerd.cri.v1.runtime'"
        runc = f"{cri}.containerd.runtimes.runc"
        disabled = [
            "io.containerd.nri.v1.nri",
            "io.containerd.internal.v1.opt",
            "io.containerd.snapshotter.v1.btrfs",
            "io.containerd.snapshotter.v1.zfs",
            "io.containerd.snapshotter.v1.devmapper",
            "io.containerd.snapshotter.v1.erofs",
            "io.containerd.tracing.processor.v1.otlp",
        ]
        return "\n".join(
            [
                "version = 3",
                f"root = {json.dumps(str(self.home / 'containerd-root'))}",
                f"state = {json.dumps(str(self.home / 'containerd-state'))}",
                f"disabled_plugins = {json.dumps(disabled)}",
                "[grpc]",
                f"  address = {json.dumps(str(self.containerd_socket))}",
                "[ttrpc]",
                f"  address = {json.dumps(str(self.containerd_socket) + '.ttrpc')}",
                "[metrics]",
                '  address = ""',
                f"[{cri}]",
                "  enable_cdi = true",
                f"  cdi_spec_dirs = {json.dumps([str(self.cdi_dir)])}",
                # Root here lacks CAP_SYS_RESOURCE: runc may not lower a score, only raise it.
                "  restrict_oom_score_adj = true",
                f"[{cri}.cni]",
                f"  bin_dirs = {json.dumps([str(CNI_BIN_DIR)])}",
                f"  conf_dir = {json.dumps(str(self.home / 'cni'))}",
                f"[{runc}]",
                "  runtime_type = 'io.containerd.runc.v2'",
                f"[{runc}.options]",
                f"  BinaryName = {json.dumps(shutil.which(RUNC) or RUNC)}",
                f"  Root = {json.dumps(str(self.home / 'runc'))}",
                "  SystemdCgroup = false",
                "[plugins.'io.containerd.cri.v1.images'.pinned_images]",
                f"  sandbox = {json.dumps(SANDBOX_IMAGE)}",
                "",
            ]
        )

    def cni_config(self) -> dict[str, Any]:
        return {
            "cniVersion": "1.0.0",
            "name": f"kopf-dra-{self.index}",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.bridge,
                    # In a cluster, pods reach the API server and Services through the host:
                    # isGateway alone gives the bridge an address but the pods no default route.
                    "isGateway": self.cluster_dns is not None,
                    "isDefaultGateway": self.cluster_dns is not None,
                    "ipMasq": False,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_SUBNET.format(index=self.index)}]],
                        "dataDir": str(self.home / "cni-ipam"),
                    },
                }
            ],
        }

    def kubelet_config(self, feature_gates: Mapping[str, bool]) -> dict[str, Any]:
        dns: dict[str, Any] = (
            {"clusterDNS": [self.cluster_dns], "clusterDomain": "cluster.local"}
            if self.cluster_dns
            else {}
        )
        return {
            **dns,
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # This machine mounts cgroup v1 (with a cgroup2 hierarchy beside it).
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup_parent,
            "failSwapOn": False,
            "address": self.node_ip,
            "port": self.kubelet_port,
            "readOnlyPort": 0,
            "healthzPort": 0,
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "podLogsDir": str(self.home / "pod-logs"),
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "featureGates": dict(feature_gates),
            "hairpinMode": "none",
            "oomScoreAdj": 0,
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {
                "memory.available": "50Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
            },
            "resolvConf": "",
            "serializeImagePulls": False,
            "nodeStatusUpdateFrequency": "2s",
            "syncFrequency": "10s",
        }

    def write_config(self, kubeconfig: Path) -> None:
        for sub in ("cni", "cni-ipam", "cdi", "pod-logs", "kubelet", "runc"):
            (self.home / sub).mkdir(parents=True, exist_ok=True)
        (self.home / "containerd.toml").write_text(self.containerd_config())
        (self.home / "cni" / "10-kopf-dra.conflist").write_text(json.dumps(self.cni_config()))
        self.write_kubelet_config()
        shutil.copy(kubeconfig, self.home / "kubeconfig")

    def write_kubelet_config(self) -> None:
        gates = {**controlplane.feature_gates(self.version), **self.extra_gates}
        (self.home / "kubelet.json").write_text(json.dumps(self.kubelet_config(gates), indent=2))

    def make_cgroups(self) -> None:
        """The kubelet wants its cgroup root to exist in every hierarchy (cpuset filled in)."""
        for hierarchy in _hierarchies():
            path = hierarchy / self.cgroup_parent.lstrip("/")
            path.mkdir(exist_ok=True)
            for name in ("cpuset.cpus", "cpuset.mems"):
                if (path / name).exists() and not (path / name).read_text().strip():
                    (path / name).write_text((hierarchy / name).read_text())

    # --- processes ---

    def _spawn(self, name: str, argv: list[str], env: Mapping[str, str]) -> None:
        with open(self.log(name), "ab") as out:
            self.processes[name] = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(env),
                preexec_fn=controlplane.die_with_parent,
            )

    def start_containerd(self) -> None:
        env = {**os.environ, "PATH": f"{self.bin_dir}:{os.environ.get('PATH', '')}"}
        self._spawn(
            "containerd",
            [str(self.bin_dir / "containerd"), "--config", str(self.home / "containerd.toml")],
            env,
        )

    def ctr(self, *args: str) -> str:
        proc = subprocess.run(
            [str(self.bin_dir / "ctr"), "--address", str(self.containerd_socket), "-n", "k8s.io",
             *args],
            capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        if proc.returncode != 0:
            raise RealNodeError(f"ctr {' '.join(args)} on {self.name}: {proc.stderr.strip()}")
        return proc.stdout

    def wait_containerd(self, deadline: float) -> None:
        while True:
            self._check("containerd")
            if self.containerd_socket.exists():
                with contextlib.suppress(RealNodeError):
                    self.ctr("version")
                    return
            if time.monotonic() > deadline:
                raise RealNodeError(f"containerd of {self.name} did not answer in time")
            time.sleep(0.2)

    def import_images(self) -> None:
        for archive in [*sorted((self.bin_dir / "images").glob("*.tar")), *self.images]:
            self.ctr("images", "import", str(archive))

    def start_kubelet(self) -> None:
        labels = ",".join(f"{k}={v}" for k, v in sorted(self.labels.items()))
        argv = [
            str(self.bin_dir / "kubelet"),
            f"--config={self.home / 'kubelet.json'}",
            f"--kubeconfig={self.home / 'kubeconfig'}",
            f"--root-dir={self.kubelet_dir}",
            f"--cert-dir={self.home / 'kubelet-pki'}",
            f"--hostname-override={self.name}",
            f"--node-ip={self.node_ip}",
            f"--v={self.verbosity}",
        ]
        if labels:
            argv.append(f"--node-labels={labels}")
        self._spawn("kubelet", argv, {**os.environ, "PATH": KUBELET_PATH})

    def _check(self, name: str) -> None:
        proc = self.processes.get(name)
        if proc is not None and proc.poll() is not None:
            raise RealNodeError(
                f"{name} of {self.name} exited with {proc.returncode}; {self.log(name)}:\n"
                + self.log_tail(name)
            )

    def check(self) -> None:
        for name in self.processes:
            self._check(name)

    def stop_process(self, name: str, grace: float = 10.0) -> None:
        proc = self.processes.pop(name, None)
        if proc is not None:
            controlplane.terminate(proc, grace)

    def restart_kubelet(self) -> None:
        self.stop_process("kubelet")
        self.start_kubelet()

    def upgrade_kubelet(self, version: str, bin_dir: Path) -> None:
        """The kubelet replaced in place by ``version``'s (``bin_dir``), with that release's
        gates; containerd and the pods it runs go on (an in-place node upgrade)."""
        self.stop_process("kubelet")
        self.version, self.bin_dir = version, bin_dir
        self.write_kubelet_config()
        self.start_kubelet()

    # --- teardown ---

    def kill_workloads(self) -> None:
        """Every process in the node's cgroups (containers) and its runc shims."""
        pids: set[int] = set()
        for hierarchy in _hierarchies():
            root = hierarchy / self.cgroup_parent.lstrip("/")
            if root.is_dir():
                for procs in root.rglob("cgroup.procs"):
                    with contextlib.suppress(OSError):
                        pids |= {int(p) for p in procs.read_text().split()}
        marker = str(self.containerd_socket).encode()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if marker in (entry / "cmdline").read_bytes():
                        pids.add(int(entry.name))
        pids.discard(os.getpid())
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def remove_cgroups(self) -> None:
        deadline = time.monotonic() + 10
        for hierarchy in _hierarchies():
            root = hierarchy / self.cgroup_parent.lstrip("/")
            if not root.is_dir():
                continue
            for path in sorted(
                (p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)
            ):
                _rmdir_when_empty(path, deadline)
            _rmdir_when_empty(root, deadline)

    def teardown(self) -> None:
        for name in ("kubelet", "containerd"):
            self.stop_process(name)
        self.kill_workloads()
        unmount_below(self.home)
        self.remove_cgroups()
        subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True, check=False)


def _hierarchies() -> list[Path]:
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        return [CGROUP_ROOT]
    return [
        p for p in sorted(CGROUP_ROOT.iterdir()) if p.is_dir() and (p / "cgroup.procs").exists()
    ]


def _rmdir_when_empty(path: Path, deadline: float) -> None:
    while True:
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:  # busy: a killed process not reaped yet
            if time.monotonic() > deadline:
                return
            time.sleep(0.1)


# --- the nodes together ----------------------------------------------------------------------


@dataclasses.dataclass
class RealNodes:
    """Started nodes; ``stop`` tears them down and restores the host."""

    nodes: list[RealNode]
    base: Path
    host: HostState
    timings: dict[str, float] = dataclasses.field(default_factory=dict)

    def by_name(self, name: str) -> RealNode:
        return next(n for n in self.nodes if n.name == name)

    def check(self) -> None:
        for node in self.nodes:
            node.check()

    def stop(self) -> list[str]:
        for node in self.nodes:
            node.teardown()
        problems = self.host.restore()
        unmount_below(self.base)
        shutil.rmtree(self.base, ignore_errors=True)
        return problems


def start(
    names: Sequence[tuple[str, Mapping[str, str]]],
    kubeconfig: Path,
    base: Path,
    host: HostState,
    *,
    cluster_dns: str | None = None,
    images: Sequence[Path] = (),
    versions: Sequence[str] | None = None,
    extra_gates: Sequence[Mapping[str, bool]] | None = None,
    kubelet_verbosity: int = 2,
) -> RealNodes:
    """Build (if needed) and start one containerd and one kubelet per name, importing the
    images (``images``: archives beyond the pause and busybox ones); returns once every kubelet
    answers (the caller waits for the Nodes to be Ready). In a cluster (``cluster_dns``), each
    node's directory is named after it, so that a kept kustomize overlay can name its paths.
    ``versions``: each kubelet's release (default: ``node_versions``); ``extra_gates``: each
    kubelet's gates on top of its release's (default: none); ``kubelet_verbosity``: their
    ``--v``."""
    started = time.monotonic()
    releases = list(versions) if versions is not None else node_versions(len(names))
    gates = list(extra_gates) if extra_gates is not None else [{}] * len(names)
    bin_dirs = {v: ensure_binaries(v) for v in sorted(set(releases))}
    built = time.monotonic()
    ip = host_ip()
    base.mkdir(parents=True, exist_ok=True)
    nodes = [
        RealNode(
            name,
            i,
            base / (name if cluster_dns else f"n{i}"),
            labels,
            bin_dirs[version],
            ip,
            controlplane.free_port(),
            cluster_dns=cluster_dns,
            images=tuple(images),
            version=version,
            extra_gates=dict(node_gates),
            verbosity=kubelet_verbosity,
        )
        for i, ((name, labels), version, node_gates) in enumerate(
            zip(names, releases, gates, strict=True)
        )
    ]
    result = RealNodes(nodes, base, host)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        for node in nodes:
            subprocess.run(["ip", "link", "delete", node.bridge], capture_output=True, check=False)
            node.write_config(kubeconfig)
            node.make_cgroups()
            node.start_containerd()
        for node in nodes:
            node.wait_containerd(deadline)
            node.import_images()
            node.start_kubelet()
    except BaseException:
        result.stop()
        raise
    result.timings = {"build": built - started, "start": time.monotonic() - built}
    return result
