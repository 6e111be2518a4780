"""A complete local cluster: what kind gives elsewhere, built on this machine from source.

kube-apiserver and etcd (``controlplane``), kube-controller-manager with every controller but
``resourceclaim-controller`` and ``resourcepoolstatusrequest-controller`` (kopf-dra's jobs),
kube-scheduler for every pod that is not kopf-dra's, real kubelet nodes with containerd
(``realnode``), kube-proxy in nftables mode for Service routing, and CoreDNS as cluster DNS
(``hack/cluster/coredns.yaml``). Pods reach the API server through the ``kubernetes`` Service,
as in any cluster: kube-apiserver serves and advertises the host's address, each node's bridge
is its pods' default gateway, and kube-proxy maps the Service's ClusterIP to that address.

What it changes on the host, and undoes at teardown (``Cluster.stop`` returns what it could
not): the nodes' sysctls, directories and bridges (``realnode.HostState``), kube-proxy's
nftables tables (``kube-proxy --cleanup``), a table of its own that drops any pod or Service
packet that would leave the machine (``GUARD_TABLE``), and the node directories under
``NODE_BASE``. The host's nftables ruleset is recorded before and compared after.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from operators.api.features import format_feature_gates
from operators.localcluster import controlplane, realnode
from operators.localcluster.files import project_root

BUILD_SCRIPT = project_root() / "hack" / "cluster" / "build.sh"
UPSTREAM_BUILD_SCRIPT = project_root() / "hack" / "controlplane" / "build-upstream.sh"
COREDNS_MANIFEST = project_root() / "hack" / "cluster" / "coredns.yaml"
#: Only in a checkout (the wheel carries neither): the image's build, helm's, and the chart.
IMAGE_BUILD_SCRIPT = project_root() / "hack" / "image" / "build.sh"
HELM_BUILD_SCRIPT = project_root() / "hack" / "helm" / "build.sh"
#: The chart's values for this cluster's nodes (a driver group per node, the cluster's gates).
HELM_VALUES = project_root() / "hack" / "cluster" / "helm-values.yaml"
NAMESPACE = "kopf-dra"
#: Kueue (sigs.k8s.io/kueue, hack/kueue/VERSION) for this cluster: built from its Go module, its
#: image imported into the nodes at start (``kopf-dra cluster up --image``), installed with its
#: own chart as the README's "Queues and quotas" says.
KUEUE_BUILD_SCRIPT = project_root() / "hack" / "kueue" / "build.sh"
KUEUE_NAMESPACE = "kueue-system"
KUEUE_HELM_COMMAND = (
    'helm install kueue "$(hack/kueue/build.sh)/chart" --namespace kueue-system '
    "--create-namespace \\\n"
    "  -f manifests/kueue/values.yaml -f hack/kueue/values-local.yaml --wait --timeout 5m"
)
#: Kueue's visibility API, served through the aggregation layer: available once Kueue answers.
KUEUE_APISERVICE = "v1beta2.visibility.kueue.x-k8s.io"
#: The fabric manager's token Secret, exactly as the README tells users to create it.
TOKEN_COMMAND = (
    "kubectl -n kopf-dra create secret generic kopf-dra-fabric-tokens \\\n"
    "  --from-file=default=<(openssl rand -hex 32)"
)
#: The README's Helm install, the namespace and its Pod Security labels first.
HELM_COMMANDS = (
    "kubectl create namespace kopf-dra",
    "kubectl label namespace kopf-dra pod-security.kubernetes.io/enforce=privileged \\\n"
    "  pod-security.kubernetes.io/audit=restricted",
    TOKEN_COMMAND,
    "helm install kopf-dra charts/kopf-dra --namespace kopf-dra",
)
#: The nodes' directories, named after the nodes: a kept overlay names the driver's paths below
#: (e2e/cluster/overlay). Short, since unix socket paths live below.
NODE_BASE = Path("/var/lib/kopf-dra-cluster")
#: kube-dns's ClusterIP (hack/cluster/coredns.yaml), the kubelets' clusterDNS.
CLUSTER_DNS = "198.19.0.10"
#: An nftables table of our own: pods and Services never send a packet off this machine.
GUARD_TABLE = "kopf-dra-cluster-guard"
#: What kube-proxy may change besides its tables (it is told to leave conntrack alone).
PROXY_SYSCTLS = (
    "net/ipv4/conf/all/route_localnet",
    "net/bridge/bridge-nf-call-iptables",
    "net/netfilter/nf_conntrack_max",
)
#: kube-controller-manager's controllers: all but those kopf-dra replaces, its claim controllers
#: and the pool validator's answers to ResourcePoolStatusRequests (one writer per request).
CONTROLLERS = "*,-resourceclaim-controller,-resourcepoolstatusrequest-controller"
#: kube-proxy, kcm and the scheduler need nft and friends: unlike the kubelet, /usr/sbin.
SBIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
STARTUP_TIMEOUT = 180.0


class ClusterError(RuntimeError):
    """The local cluster could not be built, started or torn down cleanly."""


def missing_prerequisites() -> list[str]:
    """What this machine lacks for the cluster (empty: it can run one); each names the fix."""
    missing = realnode.missing_prerequisites()
    if shutil.which("nft", path=SBIN_PATH) is None:
        missing.append("nft, for kube-proxy's nftables mode (Debian's nftables)")
    return missing


def default_state_dir() -> Path:
    """Certificates, kubeconfig and logs of ``kopf-dra cluster up`` and the in-cluster demo."""
    return controlplane.cache_root() / "cluster"


def node_names(count: int) -> list[tuple[str, dict[str, str]]]:
    """kind's worker names (kopf-dra-worker, kopf-dra-worker2, ...), each wired to rack-a and
    fabric1 as the e2e scenarios expect (``demo.WIRED``)."""
    if count < 1:
        raise ClusterError(f"--nodes must be at least 1, got {count}")
    wired = {"example.kopf-dra.io/rack": "rack-a", "resource.kopf-dra.io/fabric": "fabric1"}
    return [(f"kopf-dra-worker{i + 1 if i else ''}", dict(wired)) for i in range(count)]


def _build(script: Path, timeout: float | None = None, version: str | None = None) -> Path:
    """Run a build script (of ``version``; default: the chosen release) that prints what it
    built last; it says what went wrong."""
    if not script.is_file():
        raise ClusterError(f"{script} is missing: this needs a checkout of kopf-dra")
    proc = subprocess.run(
        ["bash", str(script)], capture_output=True, text=True, check=False, timeout=timeout,
        env=controlplane.release_env(version),
    )  # fmt: skip
    if proc.returncode != 0:
        raise ClusterError(f"{script} failed:\n{proc.stderr[-4000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def _as_cluster_error() -> Iterator[None]:
    """A control plane's or a node's failure (a build, a version refused) as ``ClusterError``."""
    try:
        yield
    except (realnode.RealNodeError, controlplane.ControlPlaneError) as e:
        raise ClusterError(str(e)) from e


def build_image() -> Path:
    """kopf-dra's image archive from this checkout (``make image``; cached by its inputs)."""
    return _build(IMAGE_BUILD_SCRIPT, timeout=1200)


def build_kueue() -> Path:
    """Kueue's build directory (``hack/kueue/build.sh``: its binary, image and chart),
    built unless cached."""
    return _build(KUEUE_BUILD_SCRIPT, timeout=2400)


@functools.cache
def helm() -> Path:
    """The pinned helm (``make helm``), built unless cached."""
    return _build(HELM_BUILD_SCRIPT)


def _nft(*args: str, stdin: str | None = None) -> str:
    proc = subprocess.run(
        ["nft", *args], input=stdin, capture_output=True, text=True, check=False,
        env={**os.environ, "PATH": SBIN_PATH},
    )  # fmt: skip
    if proc.returncode != 0:
        raise ClusterError(f"nft {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def ruleset() -> str:
    """The host's whole nftables ruleset (iptables-nft's tables included)."""
    return _nft("list", "ruleset")


def guard_rules(host_ip: str) -> str:
    """Forwarded pod packets may go to pods only (Services are DNATed before forwarding, the
    host's own address is input, not forward); host packets to a ClusterIP that kube-proxy has
    not mapped (yet) are dropped instead of taking the default route."""
    return f"""table inet {GUARD_TABLE} {{
    chain forward {{
        type filter hook forward priority filter; policy accept;
        ip saddr {realnode.POD_CIDR} ip daddr != {realnode.POD_CIDR} drop
    }}
    chain output {{
        type filter hook output priority filter; policy accept;
        ip daddr {controlplane.SERVICE_CIDR} drop
    }}
}}
"""


@dataclasses.dataclass
class Cluster:
    """A started cluster; ``stop`` tears it down and says what it could not restore."""

    control_plane: controlplane.ControlPlane
    state_dir: Path
    host_ip: str
    upstream_bin: Path
    cluster_bin: Path
    ruleset_before: str
    nodes: realnode.RealNodes | None = None
    processes: dict[str, subprocess.Popen[bytes]] = dataclasses.field(default_factory=dict)
    timings: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def kubeconfig(self) -> Path:
        return self.control_plane.kubeconfig

    @property
    def kubectl(self) -> Path:
        return self.cluster_bin / "kubectl"

    @property
    def audit_log(self) -> Path:
        return self.state_dir / "audit.log"

    def run_kubectl(self, *args: str, stdin: str | None = None) -> str:
        proc = subprocess.run(
            [str(self.kubectl), "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin, capture_output=True, text=True, check=False, timeout=180,
        )  # fmt: skip
        if proc.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout

    def shell(self, command: str) -> str:
        """A command as a user types it in the checkout: bash, kubectl and helm on PATH,
        KUBECONFIG set; its output, or ClusterError with what it printed."""
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "PATH": f"{self.kubectl.parent}:{helm().parent}:{os.environ.get('PATH', '')}",
        }
        proc = subprocess.run(
            ["bash", "-c", command], capture_output=True, text=True, check=False, env=env,
            timeout=300, cwd=project_root(),
        )  # fmt: skip
        if proc.returncode != 0:
            raise ClusterError(f"{command}\n{proc.stdout}\n{proc.stderr}")
        return proc.stdout

    def install_with_helm(self, *extra: str, values: Path = HELM_VALUES) -> None:
        """kopf-dra installed as the README's Helm commands do, with this cluster's values
        (``extra``: more helm arguments), every rollout finished."""
        *prepare, install = HELM_COMMANDS
        for command in prepare:
            self.shell(command)
        given = (
            values.relative_to(project_root()) if values.is_relative_to(project_root()) else values
        )
        self.shell(" ".join([install, "-f", str(given), *extra]))
        self.wait_rollouts()

    def install_kueue(self) -> None:
        """Kueue installed with its own chart as the README says (its image imported at
        start), its webhooks answering and its visibility API available."""
        self.shell(KUEUE_HELM_COMMAND)
        self.shell(
            f"kubectl wait --for=condition=Available apiservice/{KUEUE_APISERVICE} --timeout=300s"
        )

    def uninstall_kueue(self) -> None:
        """Kueue's release and namespace gone (its CRDs with the release: its objects too)."""
        self.shell(f"helm uninstall kueue --namespace {KUEUE_NAMESPACE} --wait --timeout 4m")
        self.shell(f"kubectl delete namespace {KUEUE_NAMESPACE} --wait --timeout=300s")

    def wait_rollouts(self) -> None:
        for kind in ("deployment", "daemonset"):
            self.shell(f"kubectl -n {NAMESPACE} rollout status {kind} --timeout=300s")

    def _spawn(self, name: str, argv: list[str]) -> None:
        with open(self.state_dir / f"{name}.log", "ab") as out:
            self.processes[name] = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PATH": SBIN_PATH},
                preexec_fn=controlplane.die_with_parent,
            )

    def check(self) -> None:
        """Raise if a component has exited (the nodes' processes included)."""
        for name, proc in self.processes.items():
            if proc.poll() is not None:
                log = self.state_dir / f"{name}.log"
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
                raise ClusterError(f"{name} exited with {proc.returncode}; {log}:\n{tail}")
        if self.nodes is not None:
            self.nodes.check()

    def start_components(self, node: str) -> None:
        """kube-controller-manager, kube-scheduler and kube-proxy (named after ``node``)."""
        self.start_controller_manager()
        self.start_scheduler()
        self.start_proxy(node)

    @property
    def gates(self) -> str:
        """The control plane release's gates, which its components get."""
        return format_feature_gates(controlplane.feature_gates(self.control_plane.version))

    def start_controller_manager(self) -> None:
        pki = self.control_plane.pki
        self._spawn(
            "kube-controller-manager",
            [
                str(self.upstream_bin / "kube-controller-manager"),
                f"--kubeconfig={self.kubeconfig}",
                f"--controllers={CONTROLLERS}",
                f"--root-ca-file={pki / 'ca.crt'}",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                "--use-service-account-credentials=true",
                f"--service-cluster-ip-range={controlplane.SERVICE_CIDR}",
                f"--feature-gates={self.gates}",
                "--leader-elect=false",
                "--secure-port=0",
                "--v=1",
            ],
        )

    def start_scheduler(self) -> None:
        self._spawn(
            "kube-scheduler",
            [
                str(self.upstream_bin / "kube-scheduler"),
                f"--kubeconfig={self.kubeconfig}",
                f"--feature-gates={self.gates}",
                "--leader-elect=false",
                "--secure-port=0",
                "--v=1",
            ],
        )

    def start_proxy(self, node: str) -> None:
        config = self.state_dir / "kube-proxy.json"
        config.write_text(json.dumps(self.proxy_config(node), indent=2))
        self._spawn(
            "kube-proxy",
            [str(self.cluster_bin / "kube-proxy"), f"--config={config}", "--v=1"],
        )

    # --- a control plane upgrade, one component at a time, as Kubernetes orders it ---

    def upgrade_apiserver(self, version: str) -> None:
        """kube-apiserver replaced by ``version``'s on the same etcd and certificates."""
        with _as_cluster_error():
            bin_dir = controlplane.ensure_binaries(version)
        self.control_plane.upgrade_apiserver(version, bin_dir)

    def upgrade_components(self, version: str) -> None:
        """kube-controller-manager, then kube-scheduler, replaced by ``version``'s (the API
        server first: neither may be newer than it)."""
        self._require_apiserver(version, "kube-controller-manager and kube-scheduler")
        self.upstream_bin = _build(UPSTREAM_BUILD_SCRIPT, version=version)
        for name, start in (
            ("kube-controller-manager", self.start_controller_manager),
            ("kube-scheduler", self.start_scheduler),
        ):
            controlplane.terminate(self.processes.pop(name))
            start()

    def upgrade_kubelet(self, node: str, version: str) -> None:
        """One node's kubelet replaced in place by ``version``'s; its pods go on running."""
        self._require_apiserver(version, f"the kubelet of {node}")
        assert self.nodes is not None, "the cluster has no nodes"
        with _as_cluster_error():
            bin_dir = realnode.ensure_binaries(version)
        self.nodes.by_name(node).upgrade_kubelet(version, bin_dir)

    def upgrade_proxy(self, version: str) -> None:
        """kube-proxy (the host's, every node's) replaced by ``version``'s."""
        self._require_apiserver(version, "kube-proxy")
        self.cluster_bin = _build(BUILD_SCRIPT, version=version)
        controlplane.terminate(self.processes.pop("kube-proxy"))
        self.start_proxy(self.proxy_node)

    @property
    def proxy_node(self) -> str:
        assert self.nodes is not None, "the cluster has no nodes"
        return self.nodes.nodes[0].name

    def _require_apiserver(self, version: str, what: str) -> None:
        if self.control_plane.version != version:
            raise ClusterError(
                f"{what} {version} before kube-apiserver {version} (it runs "
                f"{self.control_plane.version}): Kubernetes upgrades the API server first"
            )

    def proxy_config(self, node: str) -> dict[str, object]:
        """kube-proxy's configuration: one for the host, which all the nodes share, named after
        ``node`` (any of them)."""
        return {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "mode": "nftables",
            "clientConnection": {"kubeconfig": str(self.kubeconfig)},
            "hostnameOverride": node,
            "bindAddress": self.host_ip,
            "clusterCIDR": realnode.POD_CIDR,
            "detectLocalMode": "ClusterCIDR",
            # Every node's bridge is on this host: a pod reaching a Service whose endpoint is
            # on its own bridge would get the reply straight from it, un-NATed. Masquerading
            # all Service traffic sends the reply back through the host.
            "nftables": {"masqueradeAll": True, "syncPeriod": "30s", "minSyncPeriod": "0s"},
            "nodePortAddresses": [f"{self.host_ip}/32"],
            # Leave the host's conntrack tunables as they are (0: do not set).
            "conntrack": {
                "maxPerCore": 0,
                "min": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
            },
            "healthzBindAddress": f"127.0.0.1:{controlplane.free_port()}",
            "metricsBindAddress": f"127.0.0.1:{controlplane.free_port()}",
        }

    def stop(self) -> list[str]:
        """Stop everything, in the reverse of starting; returns what was left changed."""
        problems: list[str] = []
        for name in ("kube-proxy", "kube-scheduler", "kube-controller-manager"):
            proc = self.processes.pop(name, None)
            if proc is not None:
                controlplane.terminate(proc)
        cleanup = subprocess.run(
            [str(self.cluster_bin / "kube-proxy"), "--cleanup"],
            capture_output=True, text=True, check=False, env={**os.environ, "PATH": SBIN_PATH},
        )  # fmt: skip
        if cleanup.returncode != 0:
            problems.append(f"kube-proxy --cleanup: {cleanup.stderr.strip()[-500:]}")
        if self.nodes is not None:
            problems += self.nodes.stop()
            self.nodes = None
        self.control_plane.stop()
        with contextlib.suppress(ClusterError):
            _nft("delete", "table", "inet", GUARD_TABLE)
        after = ruleset()
        if after != self.ruleset_before:
            problems.append("the host's nftables ruleset differs from before the cluster")
        return problems


def start(
    state_dir: Path,
    nodes: Sequence[tuple[str, Mapping[str, str]]],
    images: Sequence[Path] = (),
    node_versions: Sequence[str] | None = None,
) -> Cluster:
    """Build what is missing and start a cluster; the caller holds ``realnode.host_lock()``
    and must ``stop()`` it. Returns once every node is Ready and cluster DNS answers.
    ``node_versions``: each kubelet's release, as the version skew policy allows (default:
    ``KOPF_DRA_NODE_KUBERNETES_VERSION``, else the control plane's)."""
    started = time.monotonic()
    if not nodes:
        raise ClusterError("a cluster needs at least one node")
    missing = missing_prerequisites()
    if missing:
        raise ClusterError("the local cluster needs: " + "; ".join(missing))
    with _as_cluster_error():
        kubelets = realnode.node_versions(len(nodes), given=node_versions)
        apiserver_bin = controlplane.ensure_binaries()
        upstream_bin = _build(UPSTREAM_BUILD_SCRIPT)
        cluster_bin = _build(BUILD_SCRIPT)
        for version in sorted(set(kubelets)):
            realnode.ensure_binaries(version)
    built = time.monotonic()
    host = realnode.HostState.record(PROXY_SYSCTLS)
    before = ruleset()
    ip = realnode.host_ip()
    state_dir.mkdir(parents=True, exist_ok=True)
    cp = controlplane.ControlPlane(state_dir=state_dir, bin_dir=apiserver_bin, address=ip)
    cluster = Cluster(cp, state_dir, ip, upstream_bin, cluster_bin, before)
    try:
        _nft("-f", "-", stdin=guard_rules(ip))
        cp.audit_log = cluster.audit_log
        cp.start()
        cluster.start_components(nodes[0][0])
        cluster.run_kubectl("apply", "--server-side", "-f", str(COREDNS_MANIFEST))
        if NODE_BASE.exists():  # left by a run that was killed: nothing of it is running now
            realnode.unmount_below(NODE_BASE)
            shutil.rmtree(NODE_BASE)
        cluster.nodes = realnode.start(
            nodes,
            cp.kubeconfig,
            NODE_BASE,
            host,
            cluster_dns=CLUSTER_DNS,
            images=[cluster_bin / "images" / "coredns.tar", *images],
            versions=kubelets,
        )
        _wait(cluster, "every node Ready", lambda: _nodes_ready(cluster, len(nodes)))
        _wait(cluster, "CoreDNS available", lambda: _coredns_available(cluster))
    except BaseException:
        cluster.stop()
        raise
    cluster.timings = {"build": built - started, "start": time.monotonic() - built}
    return cluster


def _wait(cluster: Cluster, what: str, probe: object, within: float = STARTUP_TIMEOUT) -> None:
    assert callable(probe)
    deadline = time.monotonic() + within
    while not probe():
        cluster.check()
        if time.monotonic() > deadline:
            raise ClusterError(f"the local cluster: not {what} after {within:.0f}s")
        time.sleep(0.5)


def _nodes_ready(cluster: Cluster, count: int) -> bool:
    items = json.loads(cluster.run_kubectl("get", "nodes", "-o", "json"))["items"]
    ready = [
        n
        for n in items
        if any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in n.get("status", {}).get("conditions", [])
        )
    ]
    return len(ready) >= count


def _coredns_available(cluster: Cluster) -> bool:
    deployment = json.loads(
        cluster.run_kubectl("-n", "kube-system", "get", "deployment", "coredns", "-o", "json")
    )
    return bool(deployment.get("status", {}).get("availableReplicas"))


@contextlib.contextmanager
def running(
    state_dir: Path,
    nodes: Sequence[tuple[str, Mapping[str, str]]],
    images: Sequence[Path] = (),
    node_versions: Sequence[str] | None = None,
) -> Iterator[Cluster]:
    """Hold the host lock, start a cluster, yield it, and always tear it down; raises
    ``ClusterError`` at exit if the host was not restored."""
    with realnode.host_lock():
        cluster = start(state_dir, nodes, images, node_versions)
        try:
            yield cluster
        finally:
            problems = cluster.stop()
            if problems:
                raise ClusterError("teardown left the host changed: " + "; ".join(problems))
