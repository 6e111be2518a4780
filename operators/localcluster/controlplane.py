"""A real local control plane: kube-apiserver + etcd of a pinned release, like envtest.

The binaries are built once per Kubernetes version by ``hack/controlplane/build.sh`` into a
user-level cache, of the default release (``hack/controlplane/VERSION``) or of another that
``hack/controlplane/VERSIONS`` lists, chosen with ``KOPF_DRA_KUBERNETES_VERSION``. This module
starts them on free loopback ports with generated certificates, service-account keys, RBAC, the
DRA feature gates kopf-dra implements, and an admin kubeconfig.
Processes die with their parent when started for tests (PR_SET_PDEATHSIG), and ``stop()`` kills
the whole process groups, so an interrupted test run leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Final

from operators.api.features import format_feature_gates
from operators.kube import certs
from operators.localcluster.files import project_root

BUILD_SCRIPT = project_root() / "hack" / "controlplane" / "build.sh"
VERSION_FILE = project_root() / "hack" / "controlplane" / "VERSION"
#: The releases it can be built of, one a line, each with its Go module in a directory of its name.
VERSIONS_FILE = project_root() / "hack" / "controlplane" / "VERSIONS"
#: Chooses a release of VERSIONS instead of VERSION's, here as in the build scripts
#: (``hack/controlplane/version.sh``), so that what is built is what is started.
VERSION_ENV: Final = "KOPF_DRA_KUBERNETES_VERSION"

# 1.36's: exactly the DRA gates this design implements (README, "The local control plane"), alpha
# ones included; gates of behaviour we do not implement are switched off. DRAPrioritizedList and
# DRAAdminAccess are GA (the latter locked on). Components started on it get the same gates
# (``--feature-gates``), the real nodes' kubelets too.
_GATES_1_36: Final = {
    "DRAPartitionableDevices": True,
    "DRAConsumableCapacity": True,
    "DRADeviceBindingConditions": True,
    "DRADeviceTaints": True,
    "DRADeviceTaintRules": True,
    "DRAResourceClaimDeviceStatus": True,
    "DRAResourceClaimGranularStatusAuthorization": True,
    "DRAListTypeAttributes": True,
    "DRAExtendedResource": True,
    "DRANodeAllocatableResources": False,
    "DRAWorkloadResourceClaims": False,
    "DRAResourcePoolStatus": True,
}
#: The gates of each minor release (``feature_gates``). In 1.37 DRAResourceClaimDeviceStatus and
#: DRAExtendedResource are GA and locked on, the value they have here. DRAFractionalCapacityRange
#: (beta) defaults on only where the min compatibility version is 1.37, which a stock 1.37 keeps
#: at 1.36 so that it can be rolled back; it is switched on by name, as a 1.37 cluster that keeps
#: that rollback opts into a beta gate. --min-compatibility-version=1.37 would change more than
#: this gate (the CEL environment of new expressions, whose list library kopf-dra's CEL follows
#: at 1.36's version; storage versions) and would be one more flag for every component, where
#: the gates already reach them all, kopf-dra's own included.
#: 1.37 adds gang scheduling with devices (GenericWorkload, DRAWorkloadResourceClaims: beta, off
#: by default), which kopf-dra implements from 1.37 on, a group's topology constraint
#: (TopologyAwareWorkloadScheduling: alpha in 1.37, beta and off in 1.38) and groups of groups
#: (CompositePodGroup: alpha in 1.37, beta and off in 1.38; it needs GenericWorkload and
#: TopologyAwareWorkloadScheduling). 1.38 (its pre-release) takes 1.37's: the gates it made GA
#: keep the value they have here (locked or not), and none of these is removed.
_GATES_1_37: Final = {
    **_GATES_1_36,
    "DRAFractionalCapacityRange": True,
    "GenericWorkload": True,
    "DRAWorkloadResourceClaims": True,
    "TopologyAwareWorkloadScheduling": True,
    "CompositePodGroup": True,
}
_FEATURE_GATES: Final[Mapping[str, Mapping[str, bool]]] = {
    "1.36": _GATES_1_36,
    "1.37": _GATES_1_37,
    "1.38": _GATES_1_37,
}
#: DeviceTaintRule (v1beta2; v1 too from 1.37) and ResourcePoolStatusRequest (v1alpha3), where
#: kopf-dra reads them: both versions are still served, off by default, by 1.36 and 1.37.
RUNTIME_CONFIG = "resource.k8s.io/v1beta2=true,resource.k8s.io/v1alpha3=true"
#: Beyond RUNTIME_CONFIG, by minor release: 1.37 serves Workload and PodGroup in
#: scheduling.k8s.io/v1beta1 only when it is switched on (GenericWorkload alone is not enough),
#: and CompositePodGroup only in scheduling.k8s.io/v1alpha3 (the gate alone is not enough
#: either: kube-scheduler 1.37 with the gate on watches them there and schedules nothing until
#: they are served). 1.38 serves CompositePodGroup in v1beta1, and in v1alpha3 where that is
#: switched on, as here: one manifest (manifests/examples/composite-training) for both.
_RUNTIME_CONFIG_EXTRA: Final[Mapping[str, str]] = {
    "1.37": "scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true",
    "1.38": "scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true",
}
#: Service ClusterIPs: the benchmarking range (RFC 2544) beside the real nodes' pod subnets
#: (198.18.x.0/24), so that no packet for a Service ever leaves this machine, routed or not.
SERVICE_CIDR = "198.19.0.0/24"
#: The ``kubernetes`` Service's ClusterIP (the range's first address), in the serving cert.
KUBERNETES_SERVICE_IP = "198.19.0.1"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
STARTUP_TIMEOUT = 90.0
#: Pod creations at Metadata level: enough for Pod Security's audit-violations annotations.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "Metadata",
            "verbs": ["create"],
            "resources": [{"group": "", "resources": ["pods"]}],
        },
        {"level": "None"},
    ],
}


class ControlPlaneError(RuntimeError):
    """The local control plane could not be built, started or reached."""


def cache_root() -> Path:
    """The per-user cache holding built binaries, shared by every clone and CI run."""
    explicit = os.environ.get("KOPF_DRA_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kopf-dra"


def default_state_dir() -> Path:
    """Where ``kopf-dra control-plane up`` keeps data, certificates and the kubeconfig."""
    explicit = os.environ.get("KOPF_DRA_CONTROL_PLANE_DIR")
    return Path(explicit) if explicit else cache_root() / "local"


def supported_versions() -> tuple[str, ...]:
    return tuple(VERSIONS_FILE.read_text().split())


def default_version() -> str:
    """The release built and started when ``KOPF_DRA_KUBERNETES_VERSION`` chooses none."""
    return VERSION_FILE.read_text().strip()


def kubernetes_version() -> str:
    """The chosen release: ``KOPF_DRA_KUBERNETES_VERSION``, else the default; refused, as the
    build scripts refuse it, unless VERSIONS lists it."""
    version = os.environ.get(VERSION_ENV) or default_version()
    supported = supported_versions()
    if version not in supported:
        raise ControlPlaneError(
            f"{VERSION_ENV}={version}: not a supported Kubernetes version; "
            f"supported: {' '.join(supported)} (hack/controlplane/VERSIONS)"
        )
    return version


def feature_gates(version: str | None = None) -> dict[str, bool]:
    """The DRA gates of a release (the chosen one by default) that the local control plane and
    every component started on it get: the gates differ between minor releases."""
    major_minor = ".".join((version or kubernetes_version()).lstrip("v").split(".")[:2])
    return dict(_FEATURE_GATES[major_minor])


def runtime_config(version: str | None = None) -> str:
    """The API versions a release's local control plane switches on beyond its defaults."""
    major_minor = ".".join((version or kubernetes_version()).lstrip("v").split(".")[:2])
    extra = _RUNTIME_CONFIG_EXTRA.get(major_minor)
    return f"{RUNTIME_CONFIG},{extra}" if extra else RUNTIME_CONFIG


def release_env(version: str | None) -> dict[str, str] | None:
    """The environment in which the build scripts build ``version`` (None: the chosen one)."""
    return {**os.environ, VERSION_ENV: version} if version else None


def ensure_binaries(version: str | None = None) -> Path:
    """Build the binaries of ``version`` (default: the chosen release) unless cached; returns
    the bin directory."""
    if not BUILD_SCRIPT.exists():
        raise ControlPlaneError(f"{BUILD_SCRIPT} is missing: reinstall kopf-dra")
    if version is None:
        kubernetes_version()  # refused here, with the same words, rather than by the script
    proc = subprocess.run(
        ["bash", str(BUILD_SCRIPT)],
        capture_output=True, text=True, check=False, env=release_env(version),
    )  # fmt: skip
    if proc.returncode != 0:
        raise ControlPlaneError(f"building the control plane failed:\n{proc.stderr[-4000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


#: Where listening ports are chosen: below Kubernetes' NodePort range (30000-32767, which the
#: complete cluster's kube-proxy holds) and below the kernel's ephemeral range.
_LISTEN_RANGE: Final = (20000, 30000)


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return _LISTEN_RANGE[1]


def free_port() -> int:
    """A port nothing listens on now, for a component to listen on, chosen at random below
    the kernel's ephemeral range: a port the kernel hands out itself (bind to 0) is one an
    outgoing connection may take as its source port before the component binds it ("address
    already in use"), which the machine's other clients do all the time; below the range only
    another listener can take it."""
    high = min(_ephemeral_low(), _LISTEN_RANGE[1])
    low = min(_LISTEN_RANGE[0], high - 1000)
    for _ in range(200):
        port = random.randrange(low, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise ControlPlaneError(f"no free port in {low}-{high - 1} after 200 tries")


def _openssl(*args: str, cwd: Path) -> None:
    try:
        certs.openssl(*args, cwd=cwd)
    except certs.CertificateError as e:
        raise ControlPlaneError(str(e)) from None


def generate_pki(pki: Path, addresses: tuple[str, ...] = ()) -> None:
    """A CA, the apiserver's serving cert, an admin client cert and service-account keys.

    The serving cert names loopback, the ``kubernetes`` Service (its names and ClusterIP, as
    pods reach it) and ``addresses`` (the host's, where it serves pods on real nodes)."""
    pki.mkdir(parents=True, exist_ok=True)
    _front_proxy_pki(pki)
    if (pki / "admin.crt").exists():
        return
    ips = ",".join(f"IP:{a}" for a in ("127.0.0.1", KUBERNETES_SERVICE_IP, *addresses))
    (pki / "san.cnf").write_text(
        f"subjectAltName={ips},DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n"
    )
    steps: list[tuple[str, ...]] = [
        ("genrsa", "-out", "ca.key", "2048"),
        (
            "req",
            "-x509",
            "-new",
            "-key",
            "ca.key",
            "-days",
            "3650",
            "-subj",
            "/CN=kopf-dra-local-ca",
            "-out",
            "ca.crt",
        ),
        ("genrsa", "-out", "apiserver.key", "2048"),
        (
            "req",
            "-new",
            "-key",
            "apiserver.key",
            "-subj",
            "/CN=kube-apiserver",
            "-out",
            "apiserver.csr",
        ),
        (
            "x509",
            "-req",
            "-in",
            "apiserver.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "3650",
            "-extfile",
            "san.cnf",
            "-out",
            "apiserver.crt",
        ),
        ("genrsa", "-out", "admin.key", "2048"),
        (
            "req",
            "-new",
            "-key",
            "admin.key",
            "-subj",
            "/O=system:masters/CN=kopf-dra-admin",
            "-out",
            "admin.csr",
        ),
        (
            "x509",
            "-req",
            "-in",
            "admin.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "3650",
            "-out",
            "admin.crt",
        ),
        ("genrsa", "-out", "sa.key", "2048"),
        ("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub"),
    ]
    for step in steps:
        _openssl(*step, cwd=pki)


#: The client the API server proxies aggregated APIs as (Kueue's visibility API, metrics-server):
#: the only name ``--requestheader-allowed-names`` lets assert a user, as kubeadm sets it up.
FRONT_PROXY_CLIENT = "front-proxy-client"


def _front_proxy_pki(pki: Path) -> None:
    """The aggregation layer's own CA and the API server's proxy client cert, apart from the
    cluster's CA as kubeadm keeps them (an extension API server trusts only this CA for the
    requesting user's headers). Also for a state directory made before the layer was on."""
    if (pki / "front-proxy-client.crt").exists():
        return
    steps: list[tuple[str, ...]] = [
        ("genrsa", "-out", "front-proxy-ca.key", "2048"),
        ("req", "-x509", "-new", "-key", "front-proxy-ca.key", "-days", "3650",
         "-subj", "/CN=kopf-dra-front-proxy-ca", "-out", "front-proxy-ca.crt"),
        ("genrsa", "-out", "front-proxy-client.key", "2048"),
        ("req", "-new", "-key", "front-proxy-client.key", "-subj", f"/CN={FRONT_PROXY_CLIENT}",
         "-out", "front-proxy-client.csr"),
        ("x509", "-req", "-in", "front-proxy-client.csr", "-CA", "front-proxy-ca.crt",
         "-CAkey", "front-proxy-ca.key", "-CAcreateserial", "-days", "3650",
         "-out", "front-proxy-client.crt"),
    ]  # fmt: skip
    for step in steps:
        _openssl(*step, cwd=pki)


def write_kubeconfig(path: Path, server: str, pki: Path) -> None:
    """An admin kubeconfig (JSON is valid YAML) with embedded file paths."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "kopf-dra-local",
                "cluster": {"server": server, "certificate-authority": str(pki / "ca.crt")},
            }
        ],
        "users": [
            {
                "name": "kopf-dra-admin",
                "user": {
                    "client-certificate": str(pki / "admin.crt"),
                    "client-key": str(pki / "admin.key"),
                },
            }
        ],
        "contexts": [
            {
                "name": "kopf-dra-local",
                "context": {"cluster": "kopf-dra-local", "user": "kopf-dra-admin"},
            }
        ],
        "current-context": "kopf-dra-local",
    }
    path.write_text(json.dumps(config, indent=2) + "\n")


def die_with_parent() -> None:
    """Runs in the child: SIGTERM it when the parent (a test run) dies, however it dies."""
    os.setsid()
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGTERM)


@dataclasses.dataclass
class ControlPlane:
    """One running kube-apiserver + etcd pair."""

    state_dir: Path
    bin_dir: Path
    tie_to_parent: bool = True
    #: Where kube-apiserver listens and what it advertises (the ``kubernetes`` Service's
    #: endpoint): loopback, or the host's address when pods on real nodes must reach it.
    address: str = "127.0.0.1"
    #: The release of ``bin_dir``'s binaries, whose gates it gets.
    version: str = dataclasses.field(default_factory=kubernetes_version)
    #: Gates set on top of the release's (a test of alpha fields the default gates drop).
    extra_gates: Mapping[str, bool] = dataclasses.field(default_factory=dict)
    #: The API versions switched on beyond the release's defaults (None: ``runtime_config``
    #: of ``version``, which follows an upgrade).
    runtime_config: str | None = None
    #: Where to write the audit log of pod creations (Pod Security's audit annotations).
    audit_log: Path | None = None
    api_port: int = 0
    etcd_port: int = 0
    processes: list[subprocess.Popen[bytes]] = dataclasses.field(default_factory=list)
    apiserver: subprocess.Popen[bytes] | None = None

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def gates(self) -> dict[str, bool]:
        """What kube-apiserver runs with: the release's gates, then ``extra_gates``."""
        return {**feature_gates(self.version), **self.extra_gates}

    @property
    def server(self) -> str:
        return f"https://{self.address}:{self.api_port}"

    @property
    def pki(self) -> Path:
        return self.state_dir / "pki"

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.state_dir / f"{name}.log", "ab")  # noqa: SIM115 - owned by the child
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent if self.tie_to_parent else os.setsid,
        )
        log.close()
        self.processes.append(proc)
        return proc

    def start(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        generate_pki(self.pki, () if self.address == "127.0.0.1" else (self.address,))
        self.api_port = self.api_port or free_port()
        self.etcd_port = self.etcd_port or free_port()
        etcd_peer = free_port()
        data = self.state_dir / "etcd"
        shutil.rmtree(data, ignore_errors=True)
        self._spawn(
            "etcd",
            [
                str(self.bin_dir / "etcd"),
                f"--data-dir={data}",
                f"--listen-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
            ],
        )
        self.apiserver = self._spawn("kube-apiserver", self.apiserver_argv())
        write_kubeconfig(self.kubeconfig, self.server, self.pki)
        self.wait_ready()

    def apiserver_argv(self) -> list[str]:
        """kube-apiserver's command line (the same for a restart on the running etcd)."""
        pki = self.pki
        return [
            str(self.bin_dir / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            f"--bind-address={self.address}",
            f"--advertise-address={self.address}",
            f"--secure-port={self.api_port}",
            f"--cert-dir={pki}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--api-audiences={SERVICE_ACCOUNT_ISSUER}",
            "--authorization-mode=RBAC",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true",
            f"--runtime-config={self.runtime_config or runtime_config(self.version)}",
            f"--feature-gates={format_feature_gates(self.gates)}",
            "--enable-priority-and-fairness=false",
            # The aggregation layer, as kubeadm configures it: APIServices of extension API
            # servers (Kueue's visibility API) are proxied with the requesting user's headers.
            f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
            f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
            # No node lifecycle controller would ever lift its not-ready taint from test nodes.
            "--disable-admission-plugins=TaintNodesByCondition",
            # Logs and exec of pods on real nodes (operators/localcluster/realnode.py): reach the
            # kubelet at its node IP, not at a node name no resolver knows.
            "--kubelet-preferred-address-types=InternalIP",
            "--storage-media-type=application/json",
            "--v=1",
            *self._endpoint_args(),
            *self._audit_args(),
        ]

    def _endpoint_args(self) -> list[str]:
        """Only a routable address can be the ``kubernetes`` Service's endpoint: on loopback
        1.36 fails every sync of it, and 1.37 refuses to start, unless nothing reconciles it.
        Served on the host's address (the complete local cluster), pods reach it through it."""
        return ["--endpoint-reconciler-type=none"] if self.address == "127.0.0.1" else []

    def _audit_args(self) -> list[str]:
        if self.audit_log is None:
            return []
        policy = self.state_dir / "audit-policy.json"
        policy.write_text(json.dumps(AUDIT_POLICY))
        return [f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}"]

    def restart_apiserver(self, grace: float = 5.0, timeout: float = STARTUP_TIMEOUT) -> None:
        """Stop kube-apiserver (SIGTERM, SIGKILL after ``grace`` s) and start it again on the
        same port and etcd (fault tests). Its graceful termination stops listening at once but
        can take longer than 15 s to exit."""
        old = self.apiserver
        assert old is not None, "the control plane has not started"
        terminate(old, grace)
        self.processes.remove(old)
        self.apiserver = self._spawn("kube-apiserver", self.apiserver_argv())
        self.wait_ready(timeout)

    def upgrade_apiserver(self, version: str, bin_dir: Path) -> None:
        """kube-apiserver replaced by ``version``'s (``bin_dir``), with its gates, on the same
        port, certificates and etcd: a control plane upgrade."""
        self.version, self.bin_dir = version, bin_dir
        self.restart_apiserver()

    def _ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        ctx.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        return ctx

    def get(self, path: str) -> bytes:
        """A raw admin GET, used for readiness (no client library needed here)."""
        with urllib.request.urlopen(
            self.server + path, context=self._ssl_context(), timeout=5
        ) as r:
            body: bytes = r.read()
            return body

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        last_error = "no answer yet"
        while time.monotonic() < deadline:
            for proc in self.processes:
                if proc.poll() is not None:
                    self.stop()
                    raise ControlPlaneError(
                        f"{proc.args!r} exited with {proc.returncode}; "
                        f"logs in {self.state_dir}:\n{self.log_tail()}"
                    )
            try:
                if self.get("/readyz") == b"ok":
                    return
            except (urllib.error.URLError, OSError, ssl.SSLError) as e:
                last_error = str(e)
            time.sleep(0.2)
        self.stop()
        raise ControlPlaneError(f"control plane not ready in {timeout:.0f}s: {last_error}")

    def log_tail(self, lines: int = 30) -> str:
        out = []
        for name in ("etcd", "kube-apiserver"):
            path = self.state_dir / f"{name}.log"
            if path.exists():
                out.append(f"--- {name}.log\n" + "\n".join(path.read_text().splitlines()[-lines:]))
        return "\n".join(out)

    def stop(self) -> None:
        for proc in reversed(self.processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self.processes):
            try:
                # The data is thrown away: no point waiting out the apiserver's graceful drain.
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        self.processes.clear()


def terminate(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM the process group, SIGKILL it after ``grace`` seconds; reaped either way."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@contextlib.contextmanager
def running(
    state_dir: Path,
    *,
    extra_gates: Mapping[str, bool] | None = None,
    runtime_config: str | None = None,
) -> Iterator[ControlPlane]:
    """Build (if needed), start, yield, and always stop a control plane; ``extra_gates`` and
    ``runtime_config`` as ``ControlPlane`` takes them (alpha gates for tests of their
    features)."""
    cp = ControlPlane(
        state_dir=state_dir,
        bin_dir=ensure_binaries(),
        extra_gates=dict(extra_gates or {}),
        runtime_config=runtime_config,
    )
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


# Background mode for `kopf-dra control-plane up|down`: pids live in a file beside the kubeconfig.


def up(state_dir: Path) -> ControlPlane:
    pidfile = state_dir / "pids.json"
    if pidfile.exists():
        down(state_dir)
    cp = ControlPlane(state_dir=state_dir, bin_dir=ensure_binaries(), tie_to_parent=False)
    cp.start()
    pidfile.write_text(json.dumps({"pids": [p.pid for p in cp.processes], "server": cp.server}))
    return cp


def down(state_dir: Path) -> bool:
    """Stop a background control plane; True when something was running."""
    pidfile = state_dir / "pids.json"
    if not pidfile.exists():
        return False
    pids = json.loads(pidfile.read_text())["pids"]
    for pid in reversed(pids):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    for pid in pids:
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.1)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
    pidfile.unlink()
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
