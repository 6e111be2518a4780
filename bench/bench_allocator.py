"""Allocator benchmarks (issue 4, workloads a-f; issue 14, g): per-call latency and claims/s.

Each "fill" runs scheduling cycles as the scheduler does: per pod one Allocator built from the
current allocated state, nodes tried in name order until one fits, the result reserved.
"Warm" figures repeat one call on an Allocator whose caches (CEL, pools) are warm.
"g" is the cold path (what every slice change costs): a new Allocator without a view cache
and one call, on 100 MIG nodes, beside upstream's NewAllocator+Allocate on the same inputs,
timed inside the Go allocator oracle (hack/allocator-oracle; needs Go). Target: within 2x.
Figures are printed, never asserted: timings belong in benchmarks, not in tests.
"""

from __future__ import annotations

import itertools
import json
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from operators.allocator import AllocatedState, Allocator, Features, NodeViewCache
from operators.allocator.selectors import CelSelectorEngine
from operators.api.core import Node
from operators.api.resource import DeviceClass, ResourceClaim, ResourceSlice

FEATURES = Features.all()
DRIVER = "gpu.example.com"
ENGINE = CelSelectorEngine()
TARGETS = {"a": 0.5, "b": 2.0, "f": 20.0}
ORACLE = Path(__file__).resolve().parents[1] / "hack" / "allocator-oracle" / "build.sh"
J = dict[str, Any]


def node(name: str) -> Node:
    return Node.load({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}})


def gpu_class(name: str = "gpu", driver: str = DRIVER) -> DeviceClass:
    return DeviceClass.load(
        {
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
        }
    )


def claim(name: str, *requests: J, constraints: Sequence[J] = ()) -> ResourceClaim:
    devices: J = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = list(constraints)
    return ResourceClaim.load(
        {"metadata": {"name": name, "namespace": "bench"}, "spec": {"devices": devices}}
    )


def exact(name: str, cls: str = "gpu", count: int = 1, *selectors: str, **extra: Any) -> J:
    body: J = {"deviceClassName": cls, "allocationMode": "ExactCount", "count": count}
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    body.update(extra)
    return {"name": name, "exactly": body}


def node_slice(
    name: str, node_name: str, devices: list[J], count: int = 1, counters: list[J] | None = None
) -> ResourceSlice:
    spec: J = {
        "driver": DRIVER,
        "nodeName": node_name,
        "pool": {"name": node_name, "generation": 1, "resourceSliceCount": count},
    }
    if devices:
        spec["devices"] = devices
    if counters:
        spec["sharedCounters"] = counters
    return ResourceSlice.load({"metadata": {"name": name}, "spec": spec})


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def report(name: str, calls: list[float], claims: int = 0, total: float = 0.0) -> None:
    med = statistics.median(calls) * 1000
    p99 = percentile(calls, 99) * 1000
    target = TARGETS.get(name[0])
    verdict = "" if target is None else (" OK" if med <= target else f" (target {target} ms)")
    rate = (
        f"  fill: {claims} claims in {total:.2f} s = {claims / total:,.0f} claims/s"
        if claims
        else ""
    )
    print(f"({name}) median {med:.3f} ms  p99 {p99:.3f} ms per call{verdict}{rate}")


def fill(
    nodes: list[Node],
    classes: list[DeviceClass],
    slices: list[ResourceSlice],
    make_claim: Callable[[int], ResourceClaim],
    limit: int,
    allocated: list[ResourceClaim] | None = None,
) -> tuple[list[float], int, float]:
    """Schedule claims one per cycle until none fits anywhere (or ``limit``); the allocated
    claims are appended to ``allocated`` when given."""
    calls: list[float] = []
    allocated = [] if allocated is None else allocated
    ids = itertools.count()
    first_open = 0
    views = NodeViewCache()
    start = time.perf_counter()
    for i in range(limit):
        c = make_claim(i)
        a = Allocator(
            FEATURES,
            AllocatedState.from_claims(allocated, FEATURES),
            classes,
            slices,
            ENGINE,
            share_ids=lambda: f"00000000-0000-0000-0000-{next(ids):012d}",
            view_cache=views,
        )
        placed = False
        for index in range(first_open, len(nodes)):
            t0 = time.perf_counter()
            outcome = a.allocate(nodes[index], [c])
            calls.append(time.perf_counter() - t0)
            if outcome.fits:
                obj = c.dump()
                obj["status"] = {"allocation": outcome.results[0].dump()}
                allocated.append(ResourceClaim.load(obj))
                placed = True
                break
            first_open = index + 1
        if not placed:
            break
    return calls, len(allocated), time.perf_counter() - start


def warm(
    n: Node,
    classes: list[DeviceClass],
    slices: list[ResourceSlice],
    claims: list[ResourceClaim],
    repeat: int = 300,
) -> list[float]:
    a = Allocator(FEATURES, AllocatedState(), classes, slices, ENGINE, share_ids=lambda: "share")
    a.allocate(n, claims)
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        a.allocate(n, claims)
        out.append(time.perf_counter() - t0)
    return out


def workload_a() -> None:
    nodes = [node(f"node-{i:03d}") for i in range(100)]
    slices = [
        node_slice(
            f"{n.metadata.name}-gpus",
            n.metadata.name or "",
            [{"name": f"gpu-{g}"} for g in range(8)],
        )
        for n in nodes
    ]
    classes = [gpu_class()]
    report("a warm", warm(nodes[0], classes, slices, [claim("c", exact("gpu"))]))
    calls, placed, total = fill(nodes, classes, slices, lambda i: claim(f"c{i}", exact("gpu")), 900)
    report("a fill", calls, placed, total)


MIG = [("1g", 1, 5)] * 7 + [("1g.10", 1, 10)] * 6 + [("2g", 2, 10)] * 3 + [("3g", 3, 20)] * 2
MIG += [("4g", 4, 20), ("7g", 7, 40)]


def mig_slices(node_name: str) -> list[ResourceSlice]:
    out = []
    counters = []
    for g in range(8):
        counters.append(
            {
                "name": f"gpu-{g}",
                "counters": {"slices": {"value": "7"}, "memory": {"value": "40Gi"}},
            }
        )
        devices = []
        for i, (profile, sl, mem) in enumerate(MIG):
            devices.append(
                {
                    "name": f"gpu-{g}-mig-{i}",
                    "attributes": {"profile": {"string": profile}},
                    "consumesCounters": [
                        {
                            "counterSet": f"gpu-{g}",
                            "counters": {
                                "slices": {"value": str(sl)},
                                "memory": {"value": f"{mem}Gi"},
                            },
                        }
                    ],
                }
            )
        out.append(node_slice(f"{node_name}-gpu-{g}", node_name, devices, count=9))
    out.append(node_slice(f"{node_name}-counters", node_name, [], count=9, counters=counters))
    return out


def mig_claim(i: int) -> ResourceClaim:
    """One MIG partition of a profile that changes with ``i``."""
    p = ["1g", "2g", "3g", "1g", "1g.10"][i % 5]
    return claim(f"c{i}", exact("gpu", "gpu", 1, f'device.attributes["{DRIVER}"].profile == "{p}"'))


def workload_b() -> None:
    nodes = [node(f"node-{i:02d}") for i in range(10)]
    slices = [s for n in nodes for s in mig_slices(n.metadata.name or "")]
    classes = [gpu_class()]
    make = mig_claim

    report("b warm", warm(nodes[0], classes, slices, [make(1)]))
    calls, placed, total = fill(nodes, classes, slices, make, 2000)
    report("b fill", calls, placed, total)


def workload_c() -> None:
    nodes = [node(f"node-{i}") for i in range(2)]
    slices = []
    for n in nodes:
        nics = [
            {
                "name": f"nic-{k}",
                "allowMultipleAllocations": True,
                "capacity": {
                    "bandwidth": {
                        "value": "200Gi",
                        "requestPolicy": {
                            "default": "1Gi",
                            "validRange": {"min": "1Gi", "step": "1Gi"},
                        },
                    }
                },
            }
            for k in range(2)
        ]
        slices.append(node_slice(f"{n.metadata.name}-nics", n.metadata.name or "", nics))
    classes = [gpu_class()]

    def make(i: int) -> ResourceClaim:
        return claim(f"c{i}", exact("nic", "gpu", capacity={"requests": {"bandwidth": "1Gi"}}))

    report("c warm", warm(nodes[0], classes, slices, [make(0)]))
    calls, placed, total = fill(nodes, classes, slices, make, 2 * 2 * 200 + 1)
    report("c fill", calls, placed, total)


def workload_d() -> None:
    nodes = [node(f"node-{i:02d}") for i in range(20)]
    slices = [
        node_slice(
            f"{n.metadata.name}-gpus",
            n.metadata.name or "",
            [{"name": f"gpu-{g}", "attributes": {"model": {"string": "z"}}} for g in range(8)],
        )
        for n in nodes
    ]
    classes = [gpu_class()]

    def make(i: int) -> ResourceClaim:
        subs = [
            {
                "name": m,
                "deviceClassName": "gpu",
                "allocationMode": "ExactCount",
                "count": 1,
                "selectors": [
                    {"cel": {"expression": f'device.attributes["{DRIVER}"].model == "{m}"'}}
                ],
            }
            for m in ("x", "y", "z")
        ]
        return claim(f"c{i}", {"name": "gpu", "firstAvailable": subs})

    report("d warm", warm(nodes[0], classes, slices, [make(0)]))
    calls, placed, total = fill(nodes, classes, slices, make, 200)
    report("d fill", calls, placed, total)


def workload_e() -> None:
    nodes = [node(f"node-{i:02d}") for i in range(20)]
    slices = []
    for n in nodes:
        devices = [
            {"name": f"gpu-{g}", "attributes": {"kind": {"string": "gpu"}, "numa": {"int": g % 4}}}
            for g in range(8)
        ] + [
            {
                "name": f"nic-{g}",
                "attributes": {"kind": {"string": "nic"}, "numa": {"int": (g + 1) % 4}},
            }
            for g in range(8)
        ]
        slices.append(node_slice(f"{n.metadata.name}-devs", n.metadata.name or "", devices))
    classes = [gpu_class()]

    def make(i: int) -> ResourceClaim:
        return claim(
            f"c{i}",
            exact("gpu", "gpu", 1, f'device.attributes["{DRIVER}"].kind == "gpu"'),
            exact("nic", "gpu", 1, f'device.attributes["{DRIVER}"].kind == "nic"'),
            constraints=[{"matchAttribute": f"{DRIVER}/numa"}],
        )

    report("e warm", warm(nodes[0], classes, slices, [make(0)]))
    calls, placed, total = fill(nodes, classes, slices, make, 200)
    report("e fill", calls, placed, total)


def workload_f() -> None:
    n = node("big")
    slices = [
        node_slice(
            f"big-{s}",
            "big",
            [
                {"name": f"dev-{s}-{d}", "attributes": {"group": {"int": (s * 128 + d) % 64}}}
                for d in range(128)
            ],
            count=8,
        )
        for s in range(8)
    ]
    classes = [gpu_class()]
    c = claim(
        "all",
        exact("all", "gpu", 0, f'device.attributes["{DRIVER}"].group == 7', allocationMode="All"),
    )
    report("f warm", warm(n, classes, slices, [c], repeat=50))
    cold = []
    for _ in range(5):
        a = Allocator(FEATURES, AllocatedState(), classes, slices, ENGINE, share_ids=lambda: "s")
        t0 = time.perf_counter()
        a.allocate(n, [c])
        cold.append(time.perf_counter() - t0)
    report("f cold allocator, warm CEL", cold)


def upstream_calls(payload: J) -> list[float] | None:
    """Durations of upstream's NewAllocator+Allocate on ``payload``, timed in the Go process
    (None without a Go toolchain)."""
    if shutil.which("go") is None:
        return None
    # The oracle of the release FEATURES behave as (hack/allocator-oracle/v0.MINOR.PATCH).
    (version,) = (p.name for p in ORACLE.parent.glob(f"v0.{FEATURES.kubernetes.minor}.*"))
    built = subprocess.run(
        ["bash", str(ORACLE), version], capture_output=True, text=True, check=True
    )
    done = subprocess.run(
        [built.stdout.strip().splitlines()[-1]],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        check=True,
    )
    out = json.loads(done.stdout)
    if out["outcome"] != "success":
        raise RuntimeError(f"oracle: {out['outcome']} {out['error']}")
    return [ns / 1e9 for ns in out["timings_ns"]]


def workload_g(repeat: int = 30) -> None:
    """Cold calls on the MIG shape: 100 nodes, 100 pools of 9 slices, a fifth of it allocated."""
    nodes = [node(f"node-{i:03d}") for i in range(100)]
    slices = [s for n in nodes for s in mig_slices(n.metadata.name or "")]
    classes = [gpu_class()]
    allocated: list[ResourceClaim] = []
    fill(nodes[:20], classes, slices, mig_claim, 100_000, allocated)
    target, pod_claim = nodes[50], mig_claim(len(allocated))
    cold = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        a = Allocator(
            FEATURES,
            AllocatedState.from_claims(allocated, FEATURES),
            classes,
            slices,
            ENGINE,
            share_ids=lambda: "s",
        )
        outcome = a.allocate(target, [pod_claim])
        cold.append(time.perf_counter() - t0)
    assert outcome.fits
    report(f"g cold, no view cache ({len(slices)} slices, {len(allocated)} allocated)", cold)
    theirs = upstream_calls(
        {
            "features": FEATURES.gates(),
            "node": target.dump(),
            "classes": [c.dump() for c in classes],
            "slices": [s.dump() for s in slices],
            "claims": [pod_claim.dump()],
            "allocated": [c.dump() for c in allocated],
            "repeat": repeat,
        }
    )
    if theirs is None:
        print("(g upstream) skipped: no Go toolchain to build hack/allocator-oracle")
        return
    report("g upstream NewAllocator+Allocate, timed in Go", theirs)
    ratio = statistics.median(cold) / statistics.median(theirs)
    print(f"(g) kopf-dra / upstream, medians: {ratio:.2f} (target <= 2)")


def main() -> int:
    for fn in (workload_a, workload_b, workload_c, workload_d, workload_e, workload_f, workload_g):
        fn()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
