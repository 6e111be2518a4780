"""Scheduler throughput against the real local control plane (``make bench-scheduler``).

Workloads:
  default   100 nodes x 8 devices, 1000 pods from a ResourceClaimTemplate
  upstream  500 nodes x 10 devices, 5000 pods (scheduler_perf SchedulingWithResourceClaimTemplate)
  large     5000 nodes x 8 devices, 5000 pods
``--churn`` republishes 10% of the slices every second while the pods are placed.

The claim controllers (``kopf-dra run claims``: claim-templates and reservations in one process;
``--separate``: one process each) and the scheduler run as processes of their own, as in a
cluster. Reported: pods/s from the first creation to the
last binding, p50/p99 latency from a pod's creation to its binding, API writes per pod counted
from the API server's own ``apiserver_request_total`` (the benchmark's own pod creations are
subtracted), and how many pods were left unbound; beside them every request the API server
served by verb and resource, and what etcd did for it (gRPC calls by method, WAL writes and
bytes, backend commits), so that a difference in etcd's CPU can be traced. Targets on this
machine: >= 30 pods/s, <= 5 writes per pod, none left unbound.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import aiohttp

from operators.api.features import format_feature_gates
from operators.kube.api import KubeAPI
from operators.kube.client import make_api_client
from operators.localcluster import controlplane

WORKLOADS = {
    "default": (100, 8, 1000),
    "upstream": (500, 10, 5000),
    "large": (5000, 8, 5000),
    # The upstream shape in PodGroups of GANG_SIZE pods, gang{minCount: GANG_SIZE} (1.37:
    # GenericWorkload on), each pod a GPU of its own.
    "gangs": (500, 10, 5000),
    # The upstream shape, each pod also in one of WHOLE_APPS apps that keep one pod per node
    # (required podAntiAffinity on the hostname) and mounting a bound volume: the whole pod's
    # plugins at work (InterPodAffinity is kube-scheduler's costliest filter).
    "whole": (500, 10, 5000),
    # Gangs of GANG_SIZE each constrained to one rack (TopologyAwareWorkloadScheduling on) of
    # RACK_NODES nodes: 16 racks of 80 GPUs, ten gangs a rack, every rack tried for each gang.
    "racked-gangs": (160, 8, 1280),
}
WHOLE_APPS = 100
GANG_SIZE = 8
RACK_NODES = 10
RACK_KEY = "topology.bench.example.com/rack"
GANG_WORKLOADS = ("gangs", "racked-gangs")
DRIVER = "bench.example.com"
NAMESPACE = "bench"
WRITE_VERBS = ("POST", "PUT", "PATCH", "APPLY", "DELETE")  # APPLY: server-side apply
COMPONENTS = ("claims", "scheduler")
# No kube-controller-manager runs beside kopf-dra here, so its claim controllers act on every
# pod (``--all-pods``), as in a cluster where they replace its resourceclaim controller.
KOPF_DRA_ENV = {"KOPF_DRA_LOG_LEVEL": "WARNING", "KOPF_DRA_ALL_PODS": "true"}
SEPARATE = ("claim-templates", "reservations", "scheduler")


#: The API server's counters read per request kind: served, seconds spent serving (not for
#: WATCH: a watch lasts as long as its client keeps it), bytes of the responses; and per
#: resource, the watch events sent to watchers and their bytes (encoding each event costs).
API_SERIES = {
    "apiserver_request_total": "requests",
    "apiserver_request_duration_seconds_sum": "seconds",
    "apiserver_response_sizes_sum": "response bytes",
    "apiserver_watch_events_total": "watch events",
    "apiserver_watch_events_sizes_sum": "watch event bytes",
}


async def api_counters(kube: KubeAPI) -> dict[str, dict[str, float]]:
    """The API server's counters so far (``API_SERIES``), each keyed ``VERB resource[/sub]``
    (watch events: by resource)."""
    text = await kube.api_client.call_api(
        "/metrics",
        "GET",
        {},
        [],
        {"Accept": "text/plain"},
        auth_settings=["BearerToken"],
        _preload_content=False,
    )
    body = (await text.read()).decode()
    out: dict[str, dict[str, float]] = {series: {} for series in API_SERIES.values()}
    for line in body.splitlines():
        series = API_SERIES.get(line.split("{", 1)[0])
        if series is None:
            continue
        labels, value = sample(line)
        resource = labels.get("resource", "")
        if labels.get("subresource"):
            resource += "/" + labels["subresource"]
        verb = labels.get("verb")
        if verb in ("WATCH", "CONNECT") and series == "seconds":
            continue
        key = f"{verb} {resource}" if verb else resource
        out[series][key] = out[series].get(key, 0.0) + value
    return out


def sample(line: str) -> tuple[dict[str, str], float]:
    """A Prometheus text-format sample line: its labels and its value."""
    return dict(re.findall(r'(\w+)="([^"]*)"', line)), float(line.rsplit(" ", 1)[1])


ETCD_COUNTERS = {
    "etcd_disk_wal_fsync_duration_seconds_count": "wal fsyncs",
    "etcd_disk_wal_write_duration_seconds_count": "wal writes",
    "etcd_disk_wal_write_bytes_total": "wal bytes",
    "etcd_disk_backend_commit_duration_seconds_count": "backend commits",
    "etcd_network_client_grpc_sent_bytes_total": "bytes sent",
}


async def etcd_requests(url: str) -> dict[str, float]:
    """gRPC calls etcd has handled so far by method, and its disk and network counters: what
    the API server asked of it and what that cost."""
    async with aiohttp.ClientSession() as session, session.get(f"{url}/metrics") as response:
        body = await response.text()
    counts: dict[str, float] = {}
    for line in body.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name != "grpc_server_handled_total" and name not in ETCD_COUNTERS:
            continue
        labels, value = sample(line)
        key = ETCD_COUNTERS.get(name) or labels.get("grpc_method", "")
        counts[key] = counts.get(key, 0.0) + value
    return counts


def grown(before: dict[str, float], after: dict[str, float]) -> dict[str, int]:
    return {k: int(v - before.get(k, 0)) for k, v in sorted(after.items()) if v > before.get(k, 0)}


def grown_by_series(
    before: dict[str, dict[str, float]], after: dict[str, dict[str, float]]
) -> dict[str, dict[str, float]]:
    """Per series, what grew (seconds keep their fraction)."""
    return {
        series: {
            k: round(v - before[series].get(k, 0.0), 3)
            for k, v in sorted(values.items())
            if v > before[series].get(k, 0.0)
        }
        for series, values in after.items()
    }


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def setup(kube: KubeAPI, nodes: int, devices: int, *, racks: bool = False) -> None:
    """The namespace, class, template and ``nodes`` nodes of ``devices`` GPUs (``racks``:
    labelled RACK_KEY in racks of RACK_NODES)."""
    for _kind, body in (
        ("Namespace", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        (
            "ServiceAccount",
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "default", "namespace": NAMESPACE},
            },
        ),
    ):
        with contextlib.suppress(Exception):
            await kube.create(body)
    await kube.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": DRIVER},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        }
    )
    await kube.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpu", "namespace": NAMESPACE},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]
                    }
                }
            },
        }
    )
    sem = asyncio.Semaphore(16)

    async def node(i: int) -> None:
        name = f"bench-node-{i:04d}"
        async with sem:
            created = await kube.create(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": name,
                        "labels": {
                            "kubernetes.io/hostname": name,
                            **({RACK_KEY: f"rack-{i // RACK_NODES:02d}"} if racks else {}),
                        },
                    },
                }
            )
            created["status"] = {
                "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
                "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110"},
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "bench",
                        "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ],
            }
            await kube.replace_status(created)
            await kube.create(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceSlice",
                    "metadata": {"name": f"{name}-gpus"},
                    "spec": {
                        "driver": DRIVER,
                        "nodeName": name,
                        "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                        "devices": [{"name": f"gpu-{d}"} for d in range(devices)],
                    },
                }
            )

    await asyncio.gather(*(node(i) for i in range(nodes)))


async def bound_volume(kube: KubeAPI) -> None:
    """A PV and its claim, bound as the PV controller leaves them (every pod of the whole
    workload mounts it; no controller runs in the benchmark)."""
    await kube.create(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "bench-shared"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "nfs": {"server": "nfs.example.com", "path": "/shared"},
                "claimRef": {"namespace": NAMESPACE, "name": "shared"},
            },
        }
    )
    claim = await kube.create(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": "shared",
                "namespace": NAMESPACE,
                "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
            },
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "volumeName": "bench-shared",
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
    )
    claim["status"] = {"phase": "Bound", "accessModes": ["ReadWriteMany"]}
    await kube.replace_status(claim)


def whole_pod(i: int) -> dict[str, Any]:
    """The whole workload's additions to pod ``i``: its app, the app's anti-affinity, the
    shared volume."""
    app = f"app-{i % WHOLE_APPS:03d}"
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {"matchLabels": {"app": app}},
                            "topologyKey": "kubernetes.io/hostname",
                        }
                    ]
                }
            },
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "shared"}}],
        },
    }


def churn(nodes: int, share: float = 0.1) -> Callable[[KubeAPI], Coroutine[Any, Any, None]]:
    """Republish ``share`` of the slices every second (a new pool generation each time), as a
    driver reporting device health would."""

    async def republish(kube: KubeAPI) -> None:
        count = max(1, int(nodes * share))
        turn = 0
        while True:
            started = time.monotonic()
            for i in range(turn, turn + count):
                name = f"bench-node-{i % nodes:04d}-gpus"
                body = await kube.get("ResourceSlice", name)
                body["spec"]["pool"]["generation"] += 1
                await kube.replace(body)
            turn += count
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - started)))

    return republish


async def run(
    kubeconfig: Path,
    workload: str,
    pids: dict[str, int],
    *,
    scheduler_name: str = "kopf-dra",
    during: Callable[[KubeAPI], Coroutine[Any, Any, None]] | None = None,
    etcd_url: str | None = None,
) -> dict[str, Any]:
    """Create the workload's pods as fast as possible and time their binding.

    ``during``, when given, runs beside the measured window (slice churn) and is cancelled
    when the window ends.
    """
    nodes, devices, pods = WORKLOADS[workload]
    fits = min(pods, nodes * devices)
    gang = GANG_SIZE if workload in GANG_WORKLOADS else 0
    racked = workload == "racked-gangs"
    async with await make_api_client(kubeconfig) as api_client:
        kube = KubeAPI(api_client)
        await setup(kube, nodes, devices, racks=racked)
        if workload == "whole":
            await bound_volume(kube)
        for g in range(pods // gang if gang else 0):  # the PodGroups exist before their pods
            await kube.create(
                {
                    "apiVersion": "scheduling.k8s.io/v1beta1",
                    "kind": "PodGroup",
                    "metadata": {"name": f"gang-{g:04d}", "namespace": NAMESPACE},
                    "spec": {
                        "schedulingPolicy": {"gang": {"minCount": gang}},
                        **(
                            {"schedulingConstraints": {"topology": [{"key": RACK_KEY}]}}
                            if racked
                            else {}
                        ),
                    },
                }
            )
        # Let the operators finish their initial lists before the clock starts.
        await asyncio.sleep(3)
        counters_before = await api_counters(kube)
        before = counters_before["requests"]
        etcd_before = await etcd_requests(etcd_url) if etcd_url else {}
        cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        created: dict[str, float] = {}
        bound: dict[str, float] = {}
        start = time.monotonic()
        sem = asyncio.Semaphore(32)

        async def create(i: int) -> None:
            name = f"pod-{i:05d}"
            whole = whole_pod(i) if workload == "whole" else {"metadata": {}, "spec": {}}
            async with sem:
                created[name] = time.monotonic()
                await kube.create(
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {"name": name, "namespace": NAMESPACE, **whole["metadata"]},
                        "spec": {
                            **whole["spec"],
                            "schedulerName": scheduler_name,
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "pause",
                                    "resources": {"claims": [{"name": "gpu"}]},
                                }
                            ],
                            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
                            **(
                                {"schedulingGroup": {"podGroupName": f"gang-{i // gang:04d}"}}
                                if gang
                                else {}
                            ),
                        },
                    }
                )

        async def watch() -> None:
            listing = await kube.list("Pod", NAMESPACE)
            rv = listing["metadata"]["resourceVersion"]
            while len(bound) < fits:
                async for event in kube.watch(
                    "Pod", NAMESPACE, resource_version=rv, timeout_seconds=60
                ):
                    obj = event["object"]
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    name = obj.get("metadata", {}).get("name")
                    if obj.get("spec", {}).get("nodeName") and name not in bound:
                        bound[name] = time.monotonic()
                    if len(bound) >= fits:
                        return

        watcher = asyncio.create_task(watch())
        background = asyncio.create_task(during(kube)) if during is not None else None
        await asyncio.gather(*(create(i) for i in range(pods)))
        deadline = 60 + pods / 5
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(watcher), deadline)
        elapsed = max(bound.values(), default=time.monotonic()) - start
        watcher.cancel()
        if background is not None:
            background.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await background
        counters_after = await api_counters(kube)
        after = counters_after["requests"]
        etcd_after = await etcd_requests(etcd_url) if etcd_url else {}
        cpu = {name: cpu_seconds(pid) - cpu_before[name] for name, pid in pids.items()}
    served = grown(before, after)
    delta: dict[str, int] = {}
    for key, count in served.items():
        verb, resource = key.split(" ", 1)
        if verb in WRITE_VERBS:
            delta[resource] = delta.get(resource, 0) + count
    # The components' writes on pods and claims; the benchmark's own pod creations, the API
    # server's own leases/endpoints and Events (kept apart) are not counted.
    component = ("pods/status", "pods/binding", "resourceclaims", "resourceclaims/status")
    component_writes = sum(delta.get(k, 0) for k in component)
    latencies = sorted(bound[n] - created[n] for n in bound)
    # A gang's time: from its first pod created to its last pod bound (whole gangs only).
    gang_times = sorted(
        max(bound[n] for n in names) - min(created[n] for n in names)
        for g in range(pods // gang if gang else 0)
        for names in [[f"pod-{i:05d}" for i in range(g * gang, (g + 1) * gang)]]
        if all(n in bound for n in names)
    )
    return {
        "workload": f"{workload}: {nodes} nodes x {devices} devices, {pods} pods",
        "bound": len(bound),
        "unbound": pods - len(bound),
        "seconds": elapsed,
        "pods_per_s": len(bound) / elapsed if elapsed else 0.0,
        "p50_s": statistics.median(latencies) if latencies else float("nan"),
        "p99_s": latencies[int(len(latencies) * 0.99) - 1] if latencies else float("nan"),
        "fits": fits,
        "writes_per_pod": component_writes / pods,
        "writes_by_resource": delta,
        "requests": served,
        "api_server": grown_by_series(counters_before, counters_after),
        "etcd_requests": grown(etcd_before, etcd_after),
        "cpu_seconds": cpu,
        **(
            {
                "gangs_placed": len(gang_times),
                "gang_p50_s": statistics.median(gang_times) if gang_times else float("nan"),
                "gang_p99_s": gang_times[max(0, int(len(gang_times) * 0.99) - 1)]
                if gang_times
                else float("nan"),
            }
            if gang
            else {}
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="default")
    parser.add_argument("--churn", action="store_true", help="republish 10%% of slices a second")
    parser.add_argument(
        "--separate", action="store_true", help="claim-templates and reservations apart"
    )
    args = parser.parse_args()
    components = SEPARATE if args.separate else COMPONENTS
    with tempfile.TemporaryDirectory() as tmp, controlplane.running(Path(tmp) / "cp") as cp:
        logs = Path(tmp)
        # The control plane's gates, as a cluster's components get them (1.37: GenericWorkload
        # among them, without which the gangs workload is never placed).
        env = {
            **os.environ,
            "KUBECONFIG": str(cp.kubeconfig),
            **KOPF_DRA_ENV,
            "KOPF_DRA_FEATURE_GATES": format_feature_gates(controlplane.feature_gates()),
        }
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "operators.cli",
                    "run",
                    c,
                    "--kubeconfig",
                    str(cp.kubeconfig),
                ],
                stdout=(logs / f"{c}.log").open("w"),
                stderr=subprocess.STDOUT,
                env=env,
            )
            for c in components
        ]
        try:
            pids = {c: p.pid for c, p in zip(components, procs, strict=True)}
            pids.update(
                {Path(f"/proc/{p.pid}/comm").read_text().strip(): p.pid for p in cp.processes}
            )
            nodes = WORKLOADS[args.workload][0]
            result = asyncio.run(
                run(
                    cp.kubeconfig,
                    args.workload,
                    pids,
                    during=churn(nodes) if args.churn else None,
                    etcd_url=f"http://127.0.0.1:{cp.etcd_port}",
                )
            )
        finally:
            for p in procs:
                p.terminate()
            for c, p in zip(components, procs, strict=True):
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:  # a shutdown bug: report it, keep the figures
                    print(f"{c}: still running 30 s after SIGTERM; killed")
                    p.kill()
                    p.wait()
        for c in components:
            errors = [
                line
                for line in (logs / f"{c}.log").read_text().splitlines()
                if "Traceback" in line or "error" in line.lower()
            ]
            if errors:
                print(f"{c}: {len(errors)} error lines, first: {errors[0][:3000]}")
    print(f"scheduler benchmark ({result['workload']})")
    print(
        f"  bound {result['bound']}, unbound {result['unbound']} in {result['seconds']:.1f} s"
        f" = {result['pods_per_s']:.1f} pods/s (target >= 30)"
    )
    print(f"  latency creation->binding p50 {result['p50_s']:.2f} s, p99 {result['p99_s']:.2f} s")
    print(
        f"  API writes per pod {result['writes_per_pod']:.2f} (target <= 5): "
        f"{result['writes_by_resource']}"
    )
    print(f"  API requests: {result['requests']}")
    print(f"  etcd requests: {result['etcd_requests']}")
    cpu = ", ".join(f"{name} {seconds:.1f}" for name, seconds in result["cpu_seconds"].items())
    print(f"  CPU seconds while measured (2 cores = {2 * result['seconds']:.0f}): {cpu}")
    return 0 if result["bound"] == result["fits"] else 1


if __name__ == "__main__":
    sys.exit(main())
