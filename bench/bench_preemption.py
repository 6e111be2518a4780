"""The cost of a preemption search (pure core, no cluster), on the upstream shape.

    .venv/bin/python -m bench.bench_preemption [--nodes 500] [--devices 10] [--pending 30]

500 nodes x 10 devices (bench_scheduler's ``upstream`` workload, scheduler_perf's
SchedulingWithResourceClaimTemplate), every device held by a running pod through a claim of
its own (one pod per device, 5000 pods). Running pods' priorities, drawn per pod with a fixed
seed: 0 (60%), 100 (30%), 1000 (10%). Pending pods, a third each:

- priority 500, one device: any node has victims (priority 0 or 100);
- priority 500, four devices (ExactCount 4): several victims per node, reprieves;
- priority 50, one device: only priority-0 pods may go.

For each pending pod, what the scheduler does when it finds no room: the cycle
(``run_cycle``, best-first, every node full), then the victims' search (``preempt``) on the
same allocator state. Printed: per kind, median and p90 of the search, allocator calls and
nodes tried, victims chosen; and the cycle itself for comparison. No timing is asserted.
"""

from __future__ import annotations

import argparse
import datetime
import random
import statistics
import time
from collections.abc import Sequence
from typing import Any

from operators.allocator import Allocator, Features, NodeViewCache
from operators.allocator.selectors import CelSelectorEngine
from operators.allocator.state import AllocatedTracker
from operators.api.core import Node, Pod
from operators.api.resource import DeviceClass, ResourceClaim, ResourceSlice
from operators.cel import CELEnvironment
from operators.scheduling.cycle import run_cycle
from operators.scheduling.nodes import NodeUsage
from operators.scheduling.preemption import PodPriority, RunningPod, preempt

DRIVER = "bench.example.com"
NS = "bench"
RUNNING_MIX = ((0, 0.6), (100, 0.3), (1000, 0.1))
PENDING_KINDS = (("p500-x1", 500, 1), ("p500-x4", 500, 4), ("p50-x1", 50, 1))
NOW = datetime.datetime(2026, 6, 1, tzinfo=datetime.UTC)


def node(name: str) -> Node:
    return Node.load(
        {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {
                "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    )


def claim(
    name: str, count: int, on: str | None = None, device: str = "", pod: str = ""
) -> ResourceClaim:
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": DRIVER, "count": count}}
                ]
            }
        },
    }
    if on is not None:
        body["status"] = {
            "allocation": {
                "devices": {
                    "results": [{"request": "gpu", "driver": DRIVER, "pool": on, "device": device}]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [on]}
                            ]
                        }
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": pod, "uid": pod}],
        }
    return ResourceClaim.load(body)


def pod(name: str, priority: int, claim_name: str, on: str | None = None) -> Pod:
    spec: dict[str, Any] = {
        "schedulerName": "kopf-dra",
        "priority": priority,
        "containers": [{"name": "c", "image": "pause"}],
        "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
    }
    if on:
        spec["nodeName"] = on
    return Pod.load({"metadata": {"name": name, "namespace": NS, "uid": name}, "spec": spec})


def world(nodes: int, devices: int, rng: random.Random) -> tuple[Any, ...]:
    names = [f"bench-node-{i:04d}" for i in range(nodes)]
    slices = [
        ResourceSlice.load(
            {
                "metadata": {"name": f"{n}-gpus"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": n,
                    "pool": {"name": n, "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": f"gpu-{d}"} for d in range(devices)],
                },
            }
        )
        for n in names
    ]
    classes = [
        DeviceClass.load(
            {
                "metadata": {"name": DRIVER},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
            }
        )
    ]
    features = Features.all()
    tracker: AllocatedTracker[str] = AllocatedTracker(features)
    on_node: dict[str, list[RunningPod]] = {}
    values = [v for v, _ in RUNNING_MIX]
    weights = [w for _, w in RUNNING_MIX]
    for n in names:
        for d in range(devices):
            pod_name = f"run-{n}-{d}"
            held = claim(f"c-{n}-{d}", 1, n, f"gpu-{d}", pod_name)
            tracker.track(held.key, held)
            priority = rng.choices(values, weights)[0]
            on_node.setdefault(n, []).append(
                RunningPod(pod(pod_name, priority, held.metadata.name or "", n), priority, (held,))
            )
    usage = {n: NodeUsage({}, devices) for n in names}
    return [node(n) for n in names], slices, classes, tracker, on_node, usage


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--nodes", type=int, default=500)
    p.add_argument("--devices", type=int, default=10)
    p.add_argument("--pending", type=int, default=30, help="pending pods, a third of each kind")
    args = p.parse_args()
    rng = random.Random(20260601)
    nodes, slices, classes, tracker, on_node, usage = world(args.nodes, args.devices, rng)
    features = Features.all()
    views = NodeViewCache()
    selectors = CelSelectorEngine(CELEnvironment())
    print(
        f"preemption search: {args.nodes} nodes x {args.devices} devices, every device held by a "
        f"running pod; running priorities "
        + ", ".join(f"{v} ({int(w * 100)}%)" for v, w in RUNNING_MIX)
        + f"; {args.pending} pending pods: "
        + ", ".join(
            f"{k} (priority {pr}, {c} device{'s' if c > 1 else ''})" for k, pr, c in PENDING_KINDS
        )
    )
    # Warm up as a running scheduler is: selectors compiled, node views built.
    warm = Allocator(
        features,
        tracker.state(),
        classes,
        slices,
        selectors,
        share_ids=lambda: "00000000-0000-0000-0000-000000000000",
        view_cache=views,
    )
    run_cycle(pod("warm", 0, "warm"), [claim("warm", 1)], nodes, usage, warm)
    cycles: list[float] = []
    rows = []
    for kind, priority, count in PENDING_KINDS:
        seconds: list[float] = []
        calls: list[int] = []
        tried: list[int] = []
        victims: list[int] = []
        for i in range(args.pending // len(PENDING_KINDS)):
            preemptor = pod(f"{kind}-{i}", priority, f"{kind}-{i}")
            claims = [claim(f"{kind}-{i}", count)]

            def allocator() -> Allocator:
                return Allocator(
                    features,
                    tracker.state(),
                    classes,
                    slices,
                    selectors,
                    share_ids=lambda: "00000000-0000-0000-0000-000000000000",
                    view_cache=views,
                )

            started = time.perf_counter()
            cycle = run_cycle(preemptor, claims, nodes, usage, allocator(), best_only=True)
            cycles.append(time.perf_counter() - started)
            assert not cycle.fits
            started = time.perf_counter()
            result = preempt(
                preemptor,
                priority=PodPriority(priority, True),
                claims=claims,
                nodes=nodes,
                usage=usage,
                on_node=on_node,
                allocator=allocator(),
                budgets=(),
                now=NOW,
                features=features,
            )
            seconds.append(time.perf_counter() - started)
            calls.append(result.allocations)
            tried.append(result.nodes_tried)
            victims.append(len(result.candidate.victims) if result.candidate else 0)
        rows.append((kind, seconds, calls, tried, victims))
    header = ("pending", "median", "p90", "allocator calls", "nodes tried", "victims")
    print("{:10} {:>9} {:>9} {:>16} {:>12} {:>8}".format(*header))
    for kind, seconds, calls, tried, victims in rows:
        median, p90 = statistics.median(seconds) * 1000, percentile(seconds, 0.9) * 1000
        print(
            f"{kind:10} {median:7.1f}ms {p90:7.1f}ms {statistics.median(calls):16.0f} "
            f"{statistics.median(tried):12.0f} {statistics.median(victims):8.0f}"
        )
    print(
        f"the failing cycle before it (run_cycle, every node full): median "
        f"{statistics.median(cycles) * 1000:.1f}ms, p90 {percentile(cycles, 0.9) * 1000:.1f}ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
