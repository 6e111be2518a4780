"""Helpers of integration tests: wait on conditions with deadlines, run operators in-process."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import subprocess
import tempfile
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import kopf
import yaml
from kubernetes_asyncio import client
from prometheus_client.parser import text_string_to_metric_families

from operators.api.features import format_feature_gates
from operators.controllers.scheduler.handlers import Scheduler
from operators.controllers.scheduler.settings import SchedulerSettings
from operators.kube.api import ConflictError, KubeAPI, resource_of
from operators.localcluster import controlplane
from operators.localcluster.controlplane import feature_gates
from operators.localcluster.manifests import apply_order
from operators.runtime.app import register_login, run_operator
from operators.runtime.clock import SYSTEM_CLOCK, Clock

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kopf-dra"


async def eventually(
    probe: Callable[[], Awaitable[T | None]], *, within: float = 30.0, what: str = "condition"
) -> T:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` after ``within`` s."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        last = await probe()
        if last:
            return last
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}; last: {last!r}")
        await asyncio.sleep(0.1)


async def while_progressing(
    probe: Callable[[], Awaitable[tuple[int, T | None]]],
    *,
    stall: float = 30.0,
    what: str = "condition",
) -> T:
    """Poll ``probe`` (progress so far, result or None) until it gives a result; fail only when
    progress has not moved for ``stall`` s. For work whose total time is throughput, which a
    busy machine stretches, where only a standstill is a failure."""
    loop = asyncio.get_running_loop()
    best, deadline = -1, loop.time() + stall
    while True:
        progress, result = await probe()
        if result:
            return result
        if progress > best:
            best, deadline = progress, loop.time() + stall
        elif loop.time() > deadline:
            raise AssertionError(f"no progress for {stall}s waiting for {what}; at {progress}")
        await asyncio.sleep(0.1)


async def events_with(
    kube: KubeAPI, namespace: str, reason: str, *, within: float = 30.0
) -> list[dict[str, Any]]:
    """Wait for Events with ``reason`` in ``namespace``.

    Components post Events after the write they explain, so seeing the write does not mean
    the Event is there yet.
    """

    async def probe() -> list[dict[str, Any]]:
        items = (await kube.list("Event", namespace))["items"]
        return [e for e in items if e["reason"] == reason]

    return await eventually(probe, within=within, what=f"a {reason} Event in {namespace}")


@contextlib.asynccontextmanager
async def in_background(work: Coroutine[Any, Any, None]) -> AsyncIterator[None]:
    """``work`` (a sampler, a watcher) running as a task for the block, cancelled after it."""
    task = asyncio.create_task(work)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.asynccontextmanager
async def running_operator(registry: kopf.OperatorRegistry, component: str) -> AsyncIterator[None]:
    """Run a kopf operator in a thread of its own until the block ends (as KopfRunner does).

    A thread with its own event loop keeps kopf's end-of-run task cleanup away from the
    test's tasks, and lets a test run two operators, or restart one, like separate processes.
    """
    stop, ready = threading.Event(), threading.Event()
    failure: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(
                run_operator(
                    registry=registry, component=component, stop_flag=stop, ready_flag=ready
                )
            )
        except BaseException as e:  # reported to the test below
            failure.append(e)
            ready.set()

    thread = threading.Thread(target=target, name=f"operator-{component}", daemon=True)
    thread.start()
    try:
        started = await asyncio.to_thread(ready.wait, 60)
        if failure:
            raise failure[0]
        if not started:
            raise AssertionError(f"operator {component} did not start within 60 s")
        yield
    finally:
        stop.set()
        await asyncio.to_thread(thread.join, 60)
        if thread.is_alive():
            raise AssertionError(f"operator {component} did not stop within 60 s")


def pod_body(
    name: str, namespace: str, *claims: dict[str, Any], scheduler: str = "kopf-dra"
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
            "resourceClaims": list(claims),
        },
    }


def template_body(
    name: str, namespace: str, device_class: str = "gpu.example.com"
) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "metadata": {"labels": {"from-template": name}},
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]
                }
            },
        },
    }


def claim_body(name: str, namespace: str, device_class: str = "gpu.example.com") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}
        },
    }


ALLOCATION = {
    "devices": {
        "results": [
            {"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}
        ]
    },
    "nodeSelector": {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
        ]
    },
}


def unique(prefix: str) -> str:
    """Cluster-scoped names must not collide between tests sharing one control plane."""
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


async def create_node(
    kube: KubeAPI,
    name: str,
    labels: dict[str, str] | None = None,
    *,
    cpu: str = "32",
    memory: str = "256Gi",
    pods: str = "110",
    taints: list[dict[str, Any]] | None = None,
    ready: bool = True,
) -> dict[str, Any]:
    """A Node as kubelet would register it: Ready, with allocatable resources."""
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": taints} if taints else {},
    }
    node = await kube.create(body)
    node["status"] = {
        "capacity": {"cpu": cpu, "memory": memory, "pods": pods},
        "allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
        "conditions": [
            {
                "type": "Ready",
                "status": "True" if ready else "False",
                "reason": "KubeletReady",
                "message": "test node",
                "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    }
    result: dict[str, Any] = await kube.replace_status(node)
    return result


def device_class_body(name: str, driver: str, expression: str | None = None) -> dict[str, Any]:
    selectors = [{"cel": {"expression": f'device.driver == "{driver}"'}}]
    if expression:
        selectors.append({"cel": {"expression": expression}})
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": selectors},
    }


def slice_body(
    name: str,
    driver: str,
    node: str,
    devices: list[dict[str, Any]],
    *,
    pool: str | None = None,
    generation: int = 1,
    count: int = 1,
    **spec: Any,
) -> dict[str, Any]:
    body_spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool or node, "generation": generation, "resourceSliceCount": count},
        "devices": devices,
        **spec,
    }
    if (
        "allNodes" not in spec
        and "nodeSelector" not in spec
        and "perDeviceNodeSelection" not in spec
    ):
        body_spec["nodeName"] = node
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": body_spec,
    }


def gpus(n: int, **attributes: Any) -> list[dict[str, Any]]:
    """n plain devices named gpu-0..; attribute values are wrapped ({"string": v} etc.)."""

    def wrap(v: Any) -> dict[str, Any]:
        if isinstance(v, bool):
            return {"bool": v}
        if isinstance(v, int):
            return {"int": v}
        return {"string": str(v)}

    return [
        {"name": f"gpu-{i}", "attributes": {k: wrap(v) for k, v in attributes.items()}}
        for i in range(n)
    ]


async def create_namespace(api: client.ApiClient, labels: dict[str, str] | None = None) -> str:
    """A fresh namespace with its default ServiceAccount (no controller-manager creates it).

    Namespaces never finish deleting without the namespace controller, so none is deleted.
    """
    name = f"t-{uuid.uuid4().hex[:10]}"
    core = client.CoreV1Api(api)
    await core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels))
    )
    await core.create_namespaced_service_account(
        name, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="default"))
    )
    return name


# --- the scheduler -------------------------------------------------------------------------


def start_scheduler(
    kubeconfig: Any,
    cls: type[Scheduler] = Scheduler,
    clock: Clock = SYSTEM_CLOCK,
    **overrides: Any,
) -> tuple[Scheduler, kopf.OperatorRegistry]:
    """A scheduler replica and its registry; run it with ``running_operator(registry, ...)``.

    Its Lease is its own (a unique name) unless the test names one: tests are about scheduling,
    and a Lease left behind by another test would make this one wait for it to expire.
    """
    overrides.setdefault("lease_name", unique("scheduler"))
    overrides.setdefault("feature_gates", feature_gates())  # the control plane's, as in a cluster
    settings = SchedulerSettings(kubeconfig=str(kubeconfig), **overrides)
    registry = kopf.OperatorRegistry()
    register_login(registry, settings.kubeconfig)
    scheduler = cls(settings, clock=clock)
    scheduler.register(registry)
    return scheduler, registry


async def bound_node(kube: KubeAPI, namespace: str, name: str) -> str | None:
    pod = await kube.get("Pod", name, namespace)
    node: str | None = pod["spec"].get("nodeName")
    return node


async def pod_condition(kube: KubeAPI, namespace: str, name: str) -> dict[str, Any] | None:
    pod = await kube.get("Pod", name, namespace)
    for condition in pod.get("status", {}).get("conditions") or []:
        if condition["type"] == "PodScheduled":
            return dict(condition)
    return None


async def claim_of(
    kube: KubeAPI, namespace: str, pod_name: str, entry: str = "gpu"
) -> dict[str, Any]:
    pod = await kube.get("Pod", pod_name, namespace)
    for status in pod["status"].get("resourceClaimStatuses") or []:
        if status["name"] == entry:
            return await kube.get("ResourceClaim", status["resourceClaimName"], namespace)
    for ref in pod["spec"].get("resourceClaims") or []:
        if ref["name"] == entry and ref.get("resourceClaimName"):
            return await kube.get("ResourceClaim", ref["resourceClaimName"], namespace)
    raise AssertionError(f"pod {pod_name} has no claim for {entry}")


def devices_of(claim: dict[str, Any]) -> list[str]:
    results = claim["status"]["allocation"]["devices"]["results"]
    return [f"{r['pool']}/{r['device']}" for r in results]


async def gpu_cluster(
    kube: KubeAPI, driver: str, nodes: int, per_node: int, **attrs: Any
) -> list[str]:
    """``nodes`` Ready nodes with ``per_node`` devices each, and a DeviceClass named ``driver``."""
    names = [unique("node") for _ in range(nodes)]
    for name in names:
        await create_node(kube, name)
        await kube.create(slice_body(unique("slice"), driver, name, gpus(per_node, **attrs)))
    await kube.create(device_class_body(driver, driver))
    return names


async def mint_token(api: client.ApiClient, account: str, namespace: str = "kopf-dra") -> str:
    """A fresh token of the ServiceAccount ``namespace/account`` (TokenRequest, one hour)."""
    minted = await KubeAPI(api).post_subresource(
        "ServiceAccount",
        account,
        namespace,
        "token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )
    token: str = minted["status"]["token"]
    return token


async def grant_namespace_reads(kube: KubeAPI, namespace: str) -> None:
    """Let ``namespace``'s default ServiceAccount read its pods, events, claims and claim
    templates, and nothing else: the user of one namespace that ``kubectl dra`` must serve."""
    rules = [
        {"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["get", "list"]},
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceclaims", "resourceclaimtemplates"],
            "verbs": ["get", "list"],
        },
    ]
    meta = {"name": "dra-reader", "namespace": namespace}
    role = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "dra-reader"}
    await kube.create(
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta,
         "rules": rules}
    )  # fmt: skip
    await kube.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": role,
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": namespace}],
        }
    )


async def token_kubeconfig(
    api: client.ApiClient, account: str, directory: Path, namespace: str = "kopf-dra"
) -> Path:
    """A kubeconfig that authenticates as ``namespace/account`` with a freshly minted token."""
    token = await mint_token(api, account, namespace)
    cluster: dict[str, Any] = {"server": api.configuration.host}
    if api.configuration.ssl_ca_cert:
        cluster["certificate-authority"] = api.configuration.ssl_ca_cert
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": "c", "user": account}}],
        "current-context": account,
    }
    path = directory / f"{account}.kubeconfig"
    path.write_text(json.dumps(config))
    return path


# --- metrics and health -----------------------------------------------------------------------


async def scrape(
    port: int, path: str = "/metrics", *, token: str | None = None, secure: bool = False
) -> tuple[int, str]:
    """GET a component's endpoint as a scraper would (a self-signed certificate: unverified)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    scheme = "https" if secure else "http"
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session,
        session.get(
            f"{scheme}://127.0.0.1:{port}{path}", headers=headers, ssl=not secure
        ) as response,
    ):
        return response.status, await response.text()


def metric_names(exposition: str) -> set[str]:
    """The metric names of a scrape, as its ``# TYPE`` lines declare them."""
    return {line.split()[2] for line in exposition.splitlines() if line.startswith("# TYPE ")}


def sample(exposition: str, metric: str, **labels: str) -> float | None:
    """The value of the sample ``metric`` whose labels include ``labels``."""
    for family in text_string_to_metric_families(exposition):
        for s in family.samples:
            if s.name == metric and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return None


async def served_feature_gates(api: client.ApiClient) -> dict[str, tuple[str, bool]]:
    """The API server's own gates, from its ``kubernetes_feature_enabled`` metric: name ->
    (stage, as ``operators.api.features`` names it; enabled)."""
    stages = {"ALPHA": "Alpha", "BETA": "Beta", "": "GA", "DEPRECATED": "Deprecated"}
    response = await api.call_api(
        "/metrics", "GET", auth_settings=["BearerToken"], _preload_content=False
    )
    text = (await response.read()).decode()
    return {
        s.labels["name"]: (stages[s.labels["stage"]], bool(s.value))
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "kubernetes_feature_enabled"
    }


# --- manifests --------------------------------------------------------------------------------


def missing_fields(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Paths present in ``ours`` but absent or different in the server's answer."""
    if isinstance(ours, dict):
        if not isinstance(theirs, dict):
            return [path or "."]
        return [
            p
            for key, value in ours.items()
            for p in missing_fields(value, theirs.get(key), f"{path}.{key}")
        ]
    if isinstance(ours, list):
        if not isinstance(theirs, list) or len(theirs) != len(ours):
            return [path]
        return [p for i, v in enumerate(ours) for p in missing_fields(v, theirs[i], f"{path}[{i}]")]
    return [] if ours == theirs else [f"{path}: {ours!r} != {theirs!r}"]


async def dry_run(kube: KubeAPI, obj: dict[str, Any]) -> dict[str, Any]:
    """Create ``obj`` with a server-side dry run (every admission step, nothing stored); an
    object installed for real by an earlier test (a CRD, RBAC) gets a dry-run update instead."""
    try:
        return await kube.create(obj, dry_run=True)
    except ConflictError:
        meta = obj["metadata"]
        current = await kube.get(obj["kind"], meta["name"], meta.get("namespace"))
        version = current["metadata"]["resourceVersion"]
        update = {**obj, "metadata": {**meta, "resourceVersion": version}}
        answer: dict[str, Any] = await kube.call(
            "PUT",
            resource_of(obj["kind"]).path(meta.get("namespace"), meta["name"]),
            body=update,
            query={"dryRun": "All"},
        )
        return answer


async def dry_run_all(kube: KubeAPI, objects: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Dry-run every object in kubectl's order; the fields the server dropped or changed, per
    object (none: ``{}``). Their namespaces are created for real (a dry run needs them)."""
    for name in sorted(
        {o["metadata"]["namespace"] for o in objects if "namespace" in o["metadata"]}
    ):
        with contextlib.suppress(ConflictError):
            await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    problems = {}
    for obj in apply_order(objects):
        created = await dry_run(kube, obj)
        missing = missing_fields(obj, created)
        if missing:
            problems[f"{obj['kind']}/{obj['metadata']['name']}"] = missing
    return problems


# --- the Helm chart ---------------------------------------------------------------------------


@functools.cache
def pinned_tool(name: str) -> Path:
    """A pinned Go tool (helm, promtool), built from the Go module proxy on first use by
    hack/<name>/build.sh."""
    built = subprocess.run(
        [str(ROOT / "hack" / name / "build.sh")],
        capture_output=True,
        text=True,
        check=False,
        timeout=1200,
    )
    assert built.returncode == 0, f"hack/{name}/build.sh failed: {built.stderr[-2000:]}"
    return Path(built.stdout.strip())


def helm() -> Path:
    """The pinned helm client (hack/helm)."""
    return pinned_tool("helm")


def run_helm(*args: str, values: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
    """The pinned helm with ``args`` (and ``values`` as a values file), its cache, config and
    data in a temporary directory, never the user's."""
    with tempfile.TemporaryDirectory(prefix="kopf-dra-helm-") as home:
        values_file = Path(home) / "values.yaml"
        values_file.write_text(yaml.safe_dump(values or {}))
        env = {
            **os.environ,
            "HELM_CACHE_HOME": f"{home}/cache",
            "HELM_CONFIG_HOME": f"{home}/config",
            "HELM_DATA_HOME": f"{home}/data",
        }
        argv = [str(helm()), *args, "--values", str(values_file)]
        return subprocess.run(argv, capture_output=True, text=True, env=env, check=False)


def helm_template(
    values: dict[str, Any] | None = None,
    *,
    namespace: str = "kopf-dra",
    crds: bool = True,
    api_versions: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """``helm template`` of the chart as release kopf-dra in ``namespace``; ``api_versions``:
    what the cluster serves besides Kubernetes' own (``group/version/Kind``)."""
    args = ["template", "kopf-dra", str(CHART), "--namespace", namespace]
    args += [f"--api-versions={version}" for version in api_versions]
    return run_helm(*args, *(["--include-crds"] if crds else []), values=values)


def render_chart(values: dict[str, Any] | None = None, **kwargs: Any) -> list[dict[str, Any]]:
    """The chart's objects (see ``helm_template``); fails on any helm error."""
    rendered = helm_template(values, **kwargs)
    assert rendered.returncode == 0, rendered.stderr
    return [doc for doc in yaml.safe_load_all(rendered.stdout) if doc]


# --- kube-scheduler and kube-controller-manager beside kopf-dra -------------------------------

BUILD_UPSTREAM = Path(__file__).resolve().parents[2] / "hack" / "controlplane" / "build-upstream.sh"


def upstream_bin() -> Path:
    """kube-scheduler and kube-controller-manager of the control plane's release (cached)."""
    done = subprocess.run(
        ["bash", str(BUILD_UPSTREAM)], capture_output=True, text=True, check=True, timeout=3600
    )
    return Path(done.stdout.strip().splitlines()[-1])


@contextmanager
def upstream(kubeconfig: Path, profile: str | None, logs: Path | None = None) -> Iterator[None]:
    """kube-controller-manager's PV controller, and kube-scheduler with one profile named
    ``profile`` (None: no kube-scheduler), of the control plane's release. ``logs``: where
    their logs stay (``<name>.log``; kube-scheduler's with every node's final score, complete
    once the block is left), else they go with a temporary directory."""
    bin_dir = upstream_bin()
    gates = format_feature_gates(feature_gates())
    with tempfile.TemporaryDirectory(prefix="upstream-") as tmp:
        log_dir = logs or Path(tmp)
        config = Path(tmp) / "scheduler.yaml"
        config.write_text(
            "apiVersion: kubescheduler.config.k8s.io/v1\n"
            "kind: KubeSchedulerConfiguration\n"
            f"clientConnection: {{kubeconfig: {kubeconfig}}}\n"
            "leaderElection: {leaderElect: false}\n"
            f"profiles: [{{schedulerName: {profile}}}]\n"
        )
        common = [
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--feature-gates={gates}",
        ]
        argv: dict[str, list[str]] = {
            "kube-scheduler": [
                str(bin_dir / "kube-scheduler"),
                f"--config={config}",
                f"--secure-port={controlplane.free_port()}",
                # schedule_one.go's V(10): "Calculated node's final score for pod"
                "--vmodule=schedule_one=10",
                *common,
            ],
            "kube-controller-manager": [
                str(bin_dir / "kube-controller-manager"),
                f"--kubeconfig={kubeconfig}",
                "--controllers=persistentvolume-binder",
                "--leader-elect=false",
                f"--secure-port={controlplane.free_port()}",
                *common,
            ],
        }
        if profile is None:
            del argv["kube-scheduler"]
        procs = []
        try:
            for name, cmd in argv.items():
                with (log_dir / f"{name}.log").open("w") as log:  # the child keeps its own
                    procs.append(
                        subprocess.Popen(
                            cmd, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ)
                        )
                    )
            yield
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


async def device_quota(kube: KubeAPI, namespace: str, hard: int, used: int) -> dict[str, Any]:
    """A ResourceQuota on the template's class's devices, its status written as the quota
    controller of kube-controller-manager would (none runs here): the admission plugin refuses
    against ``used``."""
    resource = "gpu.example.com.deviceclass.resource.k8s.io/devices"
    try:
        quota = await kube.create(
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": "gpus", "namespace": namespace},
                "spec": {"hard": {resource: str(hard)}},
            }
        )
    except ConflictError:
        quota = await kube.get("ResourceQuota", "gpus", namespace)
    quota["status"] = {"hard": {resource: str(hard)}, "used": {resource: str(used)}}
    written: dict[str, Any] = await kube.replace_status(quota)
    return written
