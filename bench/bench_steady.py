"""Pod startup latency on a full cluster: ClusterLoader2's DRA steady-state shape.

Run by ``make bench-compare BENCH_ARGS="--workload steady-500"`` (or ``steady-5000``) beside
kube-scheduler + kube-controller-manager. The cluster (``nodes`` x ``DEVICES`` GPUs) is filled to
``FILL`` of its devices with long-running pods before the systems start, as pods that ran for an
hour would leave it: bound, each with a claim of its own allocated and reserved for it, the free
devices spread one to a node over the first nodes, so that a search meets a full cluster. Then,
with the systems running, short-lived pods from a ResourceClaimTemplate arrive at a steady rate
(each of ``RATES`` in turn, ``WINDOW`` seconds of arrivals) and finish ``LIFETIME`` seconds after
their binding (phase Succeeded, as a kubelet reports a finished Job's pod), which frees their
devices for later arrivals: the claim controllers deallocate and delete each generated claim.
Each rate's phase ends when its pods are bound, finished and their claims gone.

Per phase: p50/p90/p99 of creation to binding, pods left unbound, and CPU-seconds per process
over the phase. Where a rate's pods outlive the free devices (rate x LIFETIME above the free
count), pods wait for devices whatever the scheduler, and the percentiles say so.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.bench_scheduler import DRIVER, NAMESPACE, cpu_seconds, setup
from operators.kube.api import KubeAPI
from operators.kube.client import make_api_client

#: name -> nodes (ClusterLoader2's DRA tests run 8 GPUs a node).
STEADY = {"steady-500": 500, "steady-5000": 5000}
DEVICES = 8
FILL = 0.9
RATES = (5.0, 20.0)
WINDOW = 60.0
LIFETIME = 30.0
FILL_PREFIX = "fill-"
#: Time allowed after a phase's last arrival for its pods to bind, finish and be released.
DRAIN = 300.0


def fill_slots(nodes: int, devices: int, share: float) -> list[tuple[str, int]]:
    """(node, device index) of each long-running pod: device by device across the nodes, so the
    free devices are left one to a node."""
    total = int(nodes * devices * share)
    return [(f"bench-node-{j % nodes:04d}", j // nodes) for j in range(total)]


def claim_spec() -> dict[str, Any]:
    return {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}


def pod_spec(scheduler_name: str, claim: dict[str, str]) -> dict[str, Any]:
    return {
        "schedulerName": scheduler_name,
        "containers": [{"name": "c", "image": "pause", "resources": {"claims": [{"name": "gpu"}]}}],
        "resourceClaims": [{"name": "gpu", **claim}],
    }


async def fill(kube: KubeAPI, nodes: int, scheduler_name: str) -> int:
    """The long-running pods, bound, and their claims, allocated and reserved for them."""
    sem = asyncio.Semaphore(64)

    async def one(i: int, node: str, device: int) -> None:
        name = f"{FILL_PREFIX}{i:05d}"
        async with sem:
            pod = await kube.create(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name, "namespace": NAMESPACE},
                    "spec": {
                        **pod_spec(scheduler_name, {"resourceClaimName": name}),
                        "nodeName": node,
                    },
                }
            )
            claim = await kube.create(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaim",
                    "metadata": {
                        "name": name,
                        "namespace": NAMESPACE,
                        "finalizers": ["resource.kubernetes.io/delete-protection"],
                    },
                    "spec": claim_spec(),
                }
            )
            claim["status"] = {
                "allocation": {
                    "devices": {
                        "results": [
                            {
                                "request": "gpu",
                                "driver": DRIVER,
                                "pool": node,
                                "device": f"gpu-{device}",
                            }
                        ]
                    },
                    "nodeSelector": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": [node]}
                                ]
                            }
                        ]
                    },
                },
                "reservedFor": [{"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]}],
            }
            await kube.replace_status(claim)

    slots = fill_slots(nodes, DEVICES, FILL)
    await asyncio.gather(*(one(i, node, d) for i, (node, d) in enumerate(slots)))
    return len(slots)


async def prepare(kubeconfig: Path, nodes: int, scheduler_name: str) -> int:
    """Nodes, slices, class, template and the long-running pods, before the systems start."""
    async with await make_api_client(kubeconfig) as api_client:
        kube = KubeAPI(api_client)
        await setup(kube, nodes, DEVICES)
        return await fill(kube, nodes, scheduler_name)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return values[max(0, int(len(values) * q + 0.5) - 1)]


class Phase:
    """One rate's arrivals: when each pod was created, bound and finished; its live claims."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.created: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.finished: set[str] = set()
        self.claims: set[str] = set()
        self.done = asyncio.Event()
        self.arrived = False

    def check(self) -> None:
        if (
            self.arrived
            and len(self.finished) == len(self.created)
            and not self.claims
            and len(self.bound) == len(self.created)
        ):
            self.done.set()


async def measure(
    kubeconfig: Path,
    nodes: int,
    pids: dict[str, int],
    scheduler_name: str,
    rates: tuple[float, ...] | None = None,
    window: float | None = None,
) -> dict[str, Any]:
    """Each rate's phase on the filled cluster, the systems running (``pids``); ``RATES`` and
    ``WINDOW`` unless given."""
    rates = RATES if rates is None else rates
    window = WINDOW if window is None else window
    async with await make_api_client(kubeconfig) as api_client:
        kube = KubeAPI(api_client)
        phases: list[Phase] = []
        tasks: set[asyncio.Task[Any]] = set()

        def current(name: str) -> Phase | None:
            return next((p for p in phases if name.startswith(p.prefix)), None)

        async def finish(phase: Phase, name: str, at: float) -> None:
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            await kube.patch(
                "Pod", name, {"status": {"phase": "Succeeded"}}, NAMESPACE, subresource="status"
            )
            phase.finished.add(name)
            phase.check()

        async def follow(kind: str, rv: str, seen: Callable[[str, Any, Phase], None]) -> None:
            """Every event of ``kind`` from ``rv`` on, of an object of a phase, to ``seen``."""
            while True:
                async for event in kube.watch(kind, NAMESPACE, resource_version=rv):
                    meta = event["object"].get("metadata", {})
                    rv = meta.get("resourceVersion", rv)
                    phase = current(meta.get("name", ""))
                    if phase is not None:
                        seen(event["type"], event["object"], phase)

        def pod_seen(_: str, pod: Any, phase: Phase) -> None:
            name = pod["metadata"]["name"]
            if name in phase.bound or not pod["spec"].get("nodeName"):
                return
            phase.bound[name] = time.monotonic()
            task = asyncio.create_task(finish(phase, name, phase.bound[name] + LIFETIME))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        def claim_seen(kind: str, claim: Any, phase: Phase) -> None:
            # A generated claim is named after its pod: <pod>-gpu-<suffix>.
            if kind == "DELETED":
                phase.claims.discard(claim["metadata"]["name"])
                phase.check()
            else:
                phase.claims.add(claim["metadata"]["name"])

        pods_rv = (await kube.list("Pod", NAMESPACE, label_selector="none=none"))["metadata"][
            "resourceVersion"
        ]
        claims_rv = (await kube.list("ResourceClaim", NAMESPACE, label_selector="none=none"))[
            "metadata"
        ]["resourceVersion"]
        watchers = [
            asyncio.create_task(follow("Pod", pods_rv, pod_seen)),
            asyncio.create_task(follow("ResourceClaim", claims_rv, claim_seen)),
        ]

        async def create(phase: Phase, name: str, at: float) -> None:
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            phase.created[name] = time.monotonic()
            await kube.create(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name, "namespace": NAMESPACE},
                    "spec": pod_spec(scheduler_name, {"resourceClaimTemplateName": "gpu"}),
                }
            )

        async def run_phase(prefix: str, rate: float, count: int) -> dict[str, Any]:
            phase = Phase(prefix)
            phases.append(phase)
            cpu_before = {p: cpu_seconds(pid) for p, pid in pids.items()}
            start = time.monotonic()
            await asyncio.gather(
                *(create(phase, f"{prefix}{i:05d}", start + i / rate) for i in range(count))
            )
            phase.arrived = True
            phase.check()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(phase.done.wait(), DRAIN + LIFETIME)
            latencies = sorted(phase.bound[n] - phase.created[n] for n in phase.bound)
            return {
                "rate": rate,
                "pods": count,
                "unbound": count - len(phase.bound),
                "p50_s": percentile(latencies, 0.5),
                "p90_s": percentile(latencies, 0.9),
                "p99_s": percentile(latencies, 0.99),
                "seconds": time.monotonic() - start,
                "cpu_seconds": {p: cpu_seconds(pid) - cpu_before[p] for p, pid in pids.items()},
            }

        try:
            # One pod first: the systems have listed the filled cluster once it is bound.
            warm = await run_phase("warm-", 1.0, 1)
            if warm["unbound"]:
                raise RuntimeError("the warm-up pod was not bound: is the scheduler running?")
            results = [
                await run_phase(f"churn-{int(rate)}-", rate, int(rate * window)) for rate in rates
            ]
        finally:
            for task in [*watchers, *tasks]:
                task.cancel()
        return {"nodes": nodes, "devices": nodes * DEVICES, "phases": results}


def summary(name: str, results: list[dict[str, Any]], free: int) -> None:
    """Medians over the rounds per phase."""
    for i, phase in enumerate(results[0]["phases"]):
        rows = [r["phases"][i] for r in results]
        cpu = {
            p: statistics.median(r["cpu_seconds"][p] for r in rows) for p in phase["cpu_seconds"]
        }
        demand = phase["rate"] * LIFETIME
        print(
            f"  {name:15s} {phase['rate']:4.0f}/s x {phase['pods']} pods"
            f"{' (more in flight than free devices)' if demand > free else ''}: "
            f"p50 {statistics.median(r['p50_s'] for r in rows):.2f} s, "
            f"p90 {statistics.median(r['p90_s'] for r in rows):.2f} s, "
            f"p99 {statistics.median(r['p99_s'] for r in rows):.2f} s "
            f"(p99 per round {', '.join(format(r['p99_s'], '.2f') for r in rows)}); "
            f"unbound {max(r['unbound'] for r in rows)}; CPU s "
            + ", ".join(f"{p} {s:.1f}" for p, s in cpu.items())
        )


def compare(results: dict[str, list[dict[str, Any]]], name: str) -> None:
    """kopf-dra's percentiles over ``name``'s, phase by phase (medians of the rounds)."""
    for i, phase in enumerate(results["kopf-dra"][0]["phases"]):
        ratios = []
        for q in ("p50_s", "p90_s", "p99_s"):
            ours = statistics.median(r["phases"][i][q] for r in results["kopf-dra"])
            theirs = statistics.median(r["phases"][i][q] for r in results[name])
            ratios.append(f"{q[:3]} {ours / theirs if theirs else float('nan'):.2f}")
        print(
            f"  {phase['rate']:.0f}/s, kopf-dra / {name}: {', '.join(ratios)} (p99 target <= 0.5)"
        )
