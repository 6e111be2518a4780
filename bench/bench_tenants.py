"""One tenant against another, side by side with kube-scheduler (``make bench-tenants``).

On 2 nodes x 8 devices, tenant A creates three pods whose claims have expensive selectors
(each its own constant, so no cache helps; legal, within the API's cost limit), then tenant B
creates a plain pod asking for one device. Printed: how long the plain pod takes from
creation to binding, under kopf-dra's scheduler and under kube-scheduler of the pinned
release (same control plane build, a fresh one per run, the systems alternating), for
``--rounds`` rounds, with the machine idle and with a CPU burner on one core; then the
medians side by side, and whether kopf-dra's scheduler kept its Lease.

``--trace`` runs kopf-dra's scheduler at debug level and prints, for its last loaded run,
the timeline of the plain pod and of the attempts around it (queueing, each attempt's wall
and CPU time, CEL evaluations, yields, the bind). ``--selectors N`` then measures the
scheduler's memory before and after N claims with unique selectors.

Figures are printed, never asserted: the integration test
``test_a_tenants_expensive_selectors_do_not_stall_another_tenants_pod`` checks the behaviour.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.bench_compare import upstream_argv, upstream_bin
from bench.bench_scheduler import DRIVER, setup
from operators.kube.api import KubeAPI
from operators.kube.client import make_api_client
from operators.localcluster import controlplane

LEASE = ("kube-system", "kopf-dra-scheduler")
SYSTEMS = ("kopf-dra", "kube-scheduler")
SCHEDULER_NAMES = {"kopf-dra": "kopf-dra", "kube-scheduler": "default-scheduler"}


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def hostile_selector(constant: int) -> str:
    numbers = ", ".join(str(i) for i in range(300))
    return f"[{numbers}].exists(x, [{numbers}].exists(y, x * y == -{constant}))"


async def namespace(kube: KubeAPI, name: str) -> None:
    for body in (
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": name},
        },
    ):
        with contextlib.suppress(Exception):
            await kube.create(body)


async def claim_and_pod(
    kube: KubeAPI, ns: str, name: str, selector: str | None, scheduler: str
) -> None:
    request: dict[str, Any] = {"deviceClassName": DRIVER}
    if selector is not None:
        request["selectors"] = [{"cel": {"expression": selector}}]
    await kube.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}},
        }
    )
    await kube.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "schedulerName": scheduler,
                "containers": [{"name": "c", "image": "pause"}],
                "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
            },
        }
    )


async def answered_after(kube: KubeAPI, ns: str, name: str, created: float) -> float:
    """Seconds from ``created`` until the pod is bound, or told why it is not."""
    while True:
        pod = await kube.get("Pod", name, ns)
        conditions = (pod.get("status") or {}).get("conditions") or []
        said = any(c.get("type") == "PodScheduled" for c in conditions)
        if pod["spec"].get("nodeName") or said:
            return time.monotonic() - created
        await asyncio.sleep(0.02)


async def lease(kube: KubeAPI) -> tuple[str, int]:
    spec = (await kube.get("Lease", LEASE[1], LEASE[0]))["spec"]
    return spec["holderIdentity"], int(spec.get("leaseTransitions") or 0)


async def scenario(kubeconfig: Path, system: str, constant: int) -> dict[str, Any]:
    """The plain pod's wait behind three hostile pods, on a cluster the scheduler leads."""
    scheduler = SCHEDULER_NAMES[system]
    async with await make_api_client(kubeconfig) as api_client:
        kube = KubeAPI(api_client)
        await setup(kube, 2, 8)
        for ns in ("tenant-a", "tenant-b"):
            await namespace(kube, ns)
        # Ready when it binds a pod: its lists, its Lease and its first cycle are behind it.
        await claim_and_pod(kube, "tenant-b", "warm-up", None, scheduler)
        await asyncio.wait_for(answered_after(kube, "tenant-b", "warm-up", time.monotonic()), 120)
        holder = await lease(kube) if system == "kopf-dra" else None
        hostile_created = time.monotonic()
        for i in range(3):
            selector = hostile_selector(constant + i)
            await claim_and_pod(kube, "tenant-a", f"hostile-{i}", selector, scheduler)
        created = time.monotonic()
        await claim_and_pod(kube, "tenant-b", "plain", None, scheduler)
        plain = await asyncio.wait_for(answered_after(kube, "tenant-b", "plain", created), 300)
        hostile = [
            await asyncio.wait_for(
                answered_after(kube, "tenant-a", f"hostile-{i}", hostile_created), 300
            )
            for i in range(3)
        ]
        kept = holder is None or await lease(kube) == holder
        return {"plain": plain, "hostile": hostile, "kept": kept}


@contextlib.contextmanager
def burner(loaded: bool) -> Iterator[None]:
    """A busy loop on one core (the other core is left to the system under test)."""
    if not loaded:
        yield
        return
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


def scheduler_argv(system: str, kubeconfig: Path, tmp: Path) -> list[str]:
    if system == "kopf-dra":
        return [sys.executable, "-m", "operators.cli", "run", "scheduler"]
    return upstream_argv(upstream_bin(), kubeconfig, tmp)["kube-scheduler"]


def one_run(system: str, loaded: bool, constant: int, trace: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, controlplane.running(Path(tmp) / "cp") as cp:
        level = "DEBUG" if trace else "WARNING"
        env = {**os.environ, "KUBECONFIG": str(cp.kubeconfig), "KOPF_DRA_LOG_LEVEL": level}
        log_path = Path(tmp) / "scheduler.log"
        with log_path.open("w") as log:
            proc = subprocess.Popen(
                scheduler_argv(system, cp.kubeconfig, Path(tmp)),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
            try:
                with burner(loaded):
                    result = asyncio.run(scenario(cp.kubeconfig, system, constant))
            finally:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
        if trace and system == "kopf-dra":
            result["trace"] = timeline(log_path.read_text())
        return result


#: The scheduler's log lines a trace shows (debug level), and the fields it prints of them.
TRACED = {
    "queueing hint": ("pod", "reason"),
    "attempt": ("pod", "attempt"),
    "attempt filtered": (
        "pod",
        "wall_s",
        "allocator_s",
        "allocator_cpu_s",
        "cel_evaluations",
        "fits",
        "timed_out",
        "yielded",
    ),
    "pod unschedulable": ("pod", "reason"),
    "pod bound": ("pod", "node"),
}


def timeline(log: str) -> list[str]:
    """The traced lines from the first hostile pod on, with seconds since then."""
    lines, start = [], None
    for raw in log.splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        event = entry.get("event")
        pod = str(entry.get("pod", ""))
        if event not in TRACED or "tenant-" not in pod or "warm-up" in pod:
            continue
        stamp = datetime_seconds(entry.get("timestamp", ""))
        if start is None:
            start = stamp
        shown = ", ".join(f"{k}={entry[k]}" for k in TRACED[event][1:] if k in entry)
        lines.append(f"{stamp - start:7.3f}s {event:18s} {pod:22s} {shown}")
    return lines


def datetime_seconds(stamp: str) -> float:
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


async def memory(kubeconfig: Path, pid: int, selectors: int) -> str:
    async with await make_api_client(kubeconfig) as api_client:
        kube = KubeAPI(api_client)
        await setup(kube, 2, 8)
        await namespace(kube, "tenant-c")
        await asyncio.sleep(3)  # the scheduler's initial lists
        before = rss_mib(pid)
        sem = asyncio.Semaphore(16)

        async def unique(i: int) -> None:
            async with sem:
                expression = f'device.driver == "unique-{i}.example.com"'
                await claim_and_pod(kube, "tenant-c", f"u-{i:05d}", expression, "kopf-dra")

        started = time.monotonic()
        await asyncio.gather(*(unique(i) for i in range(selectors)))
        await asyncio.sleep(30)  # the scheduler tries them all (they never fit)
        return (
            f"scheduler RSS: {before:.0f} MiB before, {rss_mib(pid):.0f} MiB after "
            f"{selectors} claims with unique selectors ({time.monotonic() - started:.0f} s)"
        )


def memory_run(selectors: int) -> str:
    with tempfile.TemporaryDirectory() as tmp, controlplane.running(Path(tmp) / "cp") as cp:
        env = {**os.environ, "KUBECONFIG": str(cp.kubeconfig), "KOPF_DRA_LOG_LEVEL": "WARNING"}
        proc = subprocess.Popen(
            scheduler_argv("kopf-dra", cp.kubeconfig, Path(tmp)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            env=env,
        )
        try:
            return asyncio.run(memory(cp.kubeconfig, proc.pid, selectors))
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def _list(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--trace", action="store_true", help="print kopf-dra's timeline")
    parser.add_argument("--selectors", type=int, default=0, help="then measure memory")
    args = parser.parse_args()
    results: dict[tuple[str, bool], list[dict[str, Any]]] = {}
    trace: list[str] = []
    for loaded in (False, True):
        for r in range(args.rounds):
            order = SYSTEMS if r % 2 == 0 else tuple(reversed(SYSTEMS))
            for system in order:
                result = one_run(system, loaded, 100 * r + 1, args.trace)
                results.setdefault((system, loaded), []).append(result)
                trace = result.get("trace", trace)
                print(
                    f"  {'loaded' if loaded else 'idle':6s} round {r + 1} {system:14s} plain pod "
                    f"{result['plain']:.2f} s; hostile pods answered after "
                    f"{_list(result['hostile'])} s",
                    flush=True,
                )
    print("tenant isolation (2 nodes x 8 devices): the plain pod's wait, medians")
    for loaded in (False, True):
        medians = {s: statistics.median(x["plain"] for x in results[(s, loaded)]) for s in SYSTEMS}
        print(
            f"  {'loaded (1 core busy)' if loaded else 'idle':21s} "
            + "; ".join(
                f"{s} {medians[s]:.2f} s ({_list([x['plain'] for x in results[(s, loaded)]])})"
                for s in SYSTEMS
            )
        )
    kept = all(x["kept"] for (s, _), runs in results.items() if s == "kopf-dra" for x in runs)
    print(f"  kopf-dra's scheduler kept its Lease throughout: {kept}")
    if trace:
        print("trace of kopf-dra's last loaded run (seconds from the first hostile pod's event):")
        for line in trace:
            print(f"  {line}")
    if args.selectors:
        print(f"  {memory_run(args.selectors)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
