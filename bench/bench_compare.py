"""kopf-dra against kube-scheduler + kube-controller-manager, side by side (``make bench-compare``).

Both systems run the same workloads of ``bench_scheduler`` (pods from a ResourceClaimTemplate),
each round on a fresh local control plane, alternating system by system, for an odd number of
rounds:

- kopf-dra: ``claims`` (claim-templates and reservations in one process, as
  kube-controller-manager runs its resourceclaim controller; ``--separate``: one process each)
  and ``scheduler``; with ``--all-pods``, since no resourceclaim controller runs beside them;
- upstream: kube-scheduler and kube-controller-manager (``--controllers=resourceclaim-controller``)
  of the pinned release, built like the control plane (``hack/controlplane/build-upstream.sh``),
  client QPS/burst 5000, the control plane's DRA feature gates, leader election on as both
  ship it.

Printed per system: pods/s, p50/p99 latency, API writes per pod and CPU-seconds per process
(kube-apiserver and etcd included), the API server's requests and etcd's calls and disk counters
(medians), then the ratio of the medians with the spread across rounds.
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Coroutine, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench import bench_steady
from bench.bench_scheduler import COMPONENTS, KOPF_DRA_ENV, SEPARATE, WORKLOADS, churn, run
from operators.api.features import (
    KubernetesVersion,
    check_names,
    format_feature_gates,
    gates_of,
)
from operators.kube.api import KubeAPI
from operators.localcluster import controlplane

ROOT = Path(__file__).resolve().parents[1]
BUILD_UPSTREAM = ROOT / "hack" / "controlplane" / "build-upstream.sh"
CLAIM_CONTROLLERS = ("claims", "claim-templates", "reservations")
QPS = "5000"
PROFILE_SECONDS = 5
During = Callable[[KubeAPI], Coroutine[Any, Any, None]]


def upstream_bin() -> Path:
    done = subprocess.run(
        ["bash", str(BUILD_UPSTREAM)], capture_output=True, text=True, check=True, timeout=3600
    )
    return Path(done.stdout.strip().splitlines()[-1])


def gates(extra: Mapping[str, bool] | None = None) -> str:
    """The control plane's gates (every system gets them), with ``extra`` on top."""
    return format_feature_gates({**controlplane.feature_gates(), **(extra or {})})


def scheduler_config(path: Path, kubeconfig: Path) -> Path:
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "clientConnection:\n"
        f"  kubeconfig: {kubeconfig}\n"
        f"  qps: {QPS}\n"
        f"  burst: {QPS}\n"
    )
    return path


def upstream_argv(
    bin_dir: Path, kubeconfig: Path, tmp: Path, scheduler_gates: Mapping[str, bool] | None = None
) -> dict[str, list[str]]:
    """kube-scheduler (with ``scheduler_gates`` beside the control plane's, e.g. its
    SchedulerPreQueueingHints) and kube-controller-manager's resourceclaim controller."""
    return {
        "kube-scheduler": [
            str(bin_dir / "kube-scheduler"),
            f"--config={scheduler_config(tmp / 'scheduler.yaml', kubeconfig)}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={controlplane.free_port()}",
            f"--feature-gates={gates(scheduler_gates)}",
        ],
        "kube-controller-manager": [
            str(bin_dir / "kube-controller-manager"),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--controllers=resourceclaim-controller",
            f"--kube-api-qps={QPS}",
            f"--kube-api-burst={QPS}",
            "--bind-address=127.0.0.1",
            f"--secure-port={controlplane.free_port()}",
            f"--feature-gates={gates()}",
        ],
    }


def kopf_dra_argv(kubeconfig: Path, separate: bool) -> dict[str, list[str]]:
    return {
        c: [sys.executable, "-m", "operators.cli", "run", c, "--kubeconfig", str(kubeconfig)]
        for c in (SEPARATE if separate else COMPONENTS)
    }


@contextmanager
def started(
    argv: dict[str, list[str]], logs: Path, env: dict[str, str]
) -> Iterator[dict[str, int]]:
    procs = {
        name: subprocess.Popen(
            cmd, stdout=(logs / f"{name}.log").open("w"), stderr=subprocess.STDOUT, env=env
        )
        for name, cmd in argv.items()
    }
    try:
        yield {name: p.pid for name, p in procs.items()}
    finally:
        for p in procs.values():
            p.terminate()
        for p in procs.values():
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def launch(
    system: str,
    cp: controlplane.ControlPlane,
    logs: Path,
    bin_dir: Path,
    separate: bool,
    scheduler_gates: Mapping[str, bool] | None,
) -> tuple[dict[str, list[str]], str, dict[str, str]]:
    """The system's processes (argv), the scheduler name its pods carry, their environment."""
    # Both systems get the control plane's gates (1.37: GenericWorkload among them).
    env = {
        **os.environ,
        "KUBECONFIG": str(cp.kubeconfig),
        **KOPF_DRA_ENV,
        "KOPF_DRA_FEATURE_GATES": gates(),
    }
    if system == "kopf-dra":
        return kopf_dra_argv(cp.kubeconfig, separate), "kopf-dra", env
    return upstream_argv(bin_dir, cp.kubeconfig, logs, scheduler_gates), "default-scheduler", env


def with_control_plane(pids: dict[str, int], cp: controlplane.ControlPlane) -> dict[str, int]:
    return {
        **pids,
        **{Path(f"/proc/{p.pid}/comm").read_text().strip(): p.pid for p in cp.processes},
    }


def one_round(
    system: str,
    workload: str,
    bin_dir: Path,
    with_churn: bool,
    separate: bool,
    scheduler_gates: Mapping[str, bool] | None = None,
    profile: Path | None = None,
    profile_seconds: int = PROFILE_SECONDS,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, controlplane.running(Path(tmp) / "cp") as cp:
        logs = Path(tmp)
        argv, scheduler_name, env = launch(system, cp, logs, bin_dir, separate, scheduler_gates)
        if workload in bench_steady.STEADY:
            nodes = bench_steady.STEADY[workload]
            asyncio.run(bench_steady.prepare(cp.kubeconfig, nodes, scheduler_name))
            with started(argv, logs, env) as pids:
                return asyncio.run(
                    bench_steady.measure(
                        cp.kubeconfig, nodes, with_control_plane(pids, cp), scheduler_name
                    )
                )
        with started(argv, logs, env) as pids:
            pids = with_control_plane(pids, cp)
            nodes = WORKLOADS[workload][0]

            async def measured() -> dict[str, Any]:
                return await run(
                    cp.kubeconfig,
                    workload,
                    pids,
                    scheduler_name=scheduler_name,
                    during=alongside(
                        churn(nodes) if with_churn else None,
                        cpu_profile(profile, profile_seconds) if profile is not None else None,
                    ),
                    etcd_url=f"http://127.0.0.1:{cp.etcd_port}",
                )

            return asyncio.run(measured())


def alongside(*tasks: During | None) -> During | None:
    """The background tasks of a round, run together."""
    chosen = [t for t in tasks if t is not None]
    if not chosen:
        return None

    async def both(kube: KubeAPI) -> None:
        await asyncio.gather(*(t(kube) for t in chosen))

    return both


def cpu_profile(path: Path, seconds: int = PROFILE_SECONDS) -> During:
    """The API server's CPU profile (its /debug/pprof, profiling on as it ships) over the first
    ``seconds`` of the round, written to ``path``."""

    async def take(kube: KubeAPI) -> None:
        response = await kube.api_client.call_api(
            "/debug/pprof/profile",
            "GET",
            {},
            [("seconds", str(seconds))],
            {"Accept": "application/octet-stream"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=seconds + 30,
        )
        data = await response.read()
        await asyncio.to_thread(path.write_bytes, data)

    return take


#: Where a kube-apiserver spends its CPU, by what the samples' stacks pass through (the first
#: that matches counts): serving requests, delivering watch events, GC, etcd, the rest.
PROFILE_PARTS = (
    ("watch: events encoded and sent to clients", r"serveWatch|WatchServer|watchEncoder"),
    ("watch: cache dispatch to watchers", r"cacheWatcher|Cacher\)\.dispatch|watchCache"),
    ("etcd watch: events decoded into the cache", r"etcd3\.\(\*watchChan\)"),
    ("requests: writes (create, update, patch)", r"registry\.\(\*Store\)\.(Create|Update)"),
    ("requests: reads and everything else served", r"finishRequest|ServeHTTP"),
    ("garbage collection", r"gcBgMarkWorker|runtime\.gcDrain"),
)


def profile_breakdown(path: Path) -> str:
    """The profile's samples split by ``PROFILE_PARTS`` (each excluding the parts before it),
    in seconds and per cent of the total."""
    seen: list[str] = []
    lines = []
    total = 0.0
    for name, pattern in PROFILE_PARTS:
        argv = ["go", "tool", "pprof", "-top", "-nodecount=100000", f"-focus={pattern}"]
        if seen:
            argv.append(f"-ignore={'|'.join(seen)}")
        done = subprocess.run([*argv, str(path)], capture_output=True, text=True, check=False)
        found = re.search(r"accounting for ([\d.]+)(m?s), [\d.]+% of ([\d.]+)s total", done.stdout)
        seconds = 0.0
        if found:
            seconds = float(found.group(1)) / (1000 if found.group(2) == "ms" else 1)
            total = float(found.group(3))
        lines.append((name, seconds))
        seen.append(pattern)
    rest = total - sum(s for _, s in lines)
    out = [f"{name}: {s:.2f} s ({100 * s / total:.0f}%)" for name, s in lines if total]
    out.append(f"other: {rest:.2f} s ({100 * rest / total:.0f}%)" if total else "no samples")
    return "; ".join(out)


def median_counts(rounds: list[dict[str, int]]) -> dict[str, int]:
    """Per key, the median over the rounds (a round without the key counts 0)."""
    keys = sorted({k for r in rounds for k in r})
    return {k: int(statistics.median(r.get(k, 0) for r in rounds)) for k in keys}


def api_server_breakdown(rounds: list[dict[str, dict[str, float]]]) -> None:
    """Where the API server's time went (medians over the rounds): seconds serving each kind of
    request (WATCH excluded) and bytes answered, then watch events sent and their bytes per
    resource, largest first."""
    for series in ("seconds", "response bytes", "watch events", "watch event bytes"):
        keys = {k for r in rounds for k in r.get(series, {})}
        med = {k: statistics.median(r.get(series, {}).get(k, 0.0) for r in rounds) for k in keys}
        top = sorted(med.items(), key=lambda kv: -kv[1])[:10]
        total = sum(med.values())
        shown = ", ".join(
            f"{k} {v:.1f}" if series == "seconds" else f"{k} {int(v)}" for k, v in top
        )
        print(f"            API server {series} (medians, total {total:.0f}): {shown}")


def summary(name: str, results: list[dict[str, Any]]) -> dict[str, float]:
    rates = [r["pods_per_s"] for r in results]
    cpu: dict[str, list[float]] = {}
    for r in results:
        for proc, seconds in r["cpu_seconds"].items():
            cpu.setdefault(proc, []).append(seconds)
    med = {proc: statistics.median(v) for proc, v in cpu.items()}
    print(
        f"  {name:9s} pods/s median {statistics.median(rates):6.1f} "
        f"(rounds {', '.join(f'{x:.1f}' for x in rates)}); "
        f"p50 {statistics.median(r['p50_s'] for r in results):.2f} s, "
        f"p99 {statistics.median(r['p99_s'] for r in results):.2f} s; "
        f"writes/pod {statistics.median(r['writes_per_pod'] for r in results):.2f}; "
        f"unbound {max(r['unbound'] for r in results)}"
    )
    if "gang_p50_s" in results[0]:
        print(
            f"            gangs placed whole {min(r['gangs_placed'] for r in results)} (min); "
            f"time to place a gang (first pod created to last bound) p50 "
            f"{statistics.median(r['gang_p50_s'] for r in results):.2f} s, p99 "
            f"{statistics.median(r['gang_p99_s'] for r in results):.2f} s"
        )
    print(f"            CPU s (medians): {', '.join(f'{p} {s:.1f}' for p, s in med.items())}")
    for label, key in (("API requests", "requests"), ("etcd requests", "etcd_requests")):
        print(f"            {label} (medians): {median_counts([r[key] for r in results])}")
    api_server_breakdown([r["api_server"] for r in results])
    return {"rate": statistics.median(rates), **med}


HINTS = "SchedulerPreQueueingHints"


def systems(version: str, hints: bool) -> dict[str, dict[str, bool] | None]:
    """The systems of a run, each with kube-scheduler's extra gates: kopf-dra, upstream, and
    where the release has SchedulerPreQueueingHints but off by default (1.37's alpha;
    ``hints``) upstream again with it on. 1.38's upstream has them on by default."""
    out: dict[str, dict[str, bool] | None] = {"kopf-dra": None, "upstream": {}}
    gate = gates_of(KubernetesVersion.of(version)).get(HINTS)
    if hints and gate is not None and not gate.default:
        out["upstream+hints"] = {HINTS: True}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workload", choices=sorted([*WORKLOADS, *bench_steady.STEADY]), action="append"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--churn", action="store_true", help="republish 10%% of slices a second")
    parser.add_argument(
        "--separate", action="store_true", help="kopf-dra's claim-templates and reservations apart"
    )
    parser.add_argument(
        "--kube-scheduler-gates",
        type=check_names,
        default={},
        metavar="Name=true,...",
        help="gates for kube-scheduler beside the control plane's, in both upstream systems",
    )
    parser.add_argument(
        "--no-hints",
        action="store_true",
        help=f"no third system with kube-scheduler's {HINTS} on (1.37)",
    )
    parser.add_argument(
        "--profile-apiserver",
        type=Path,
        metavar="DIR",
        help="write the API server's CPU profile of each round's first --profile-seconds to "
        "DIR, and print where it went for the first round of each system",
    )
    parser.add_argument("--profile-seconds", type=int, default=PROFILE_SECONDS)
    parser.add_argument(
        "--system",
        action="append",
        metavar="NAME",
        help="only these systems (kopf-dra, upstream, upstream+hints; kopf-dra always runs)",
    )
    args = parser.parse_args()
    rounds = args.rounds if args.rounds % 2 else args.rounds + 1
    bin_dir = upstream_bin()
    version = controlplane.kubernetes_version()
    chosen = systems(version, not args.no_hints)
    if args.system:
        chosen = {k: v for k, v in chosen.items() if k == "kopf-dra" or k in args.system}
    for workload in args.workload or ["default", "upstream"]:
        results: dict[str, list[dict[str, Any]]] = {name: [] for name in chosen}
        names = list(chosen)
        for i in range(rounds):
            # Each round starts with another system: none always runs first or last.
            for system in names[i % len(names) :] + names[: i % len(names)]:
                profile = None
                if args.profile_apiserver is not None:
                    args.profile_apiserver.mkdir(parents=True, exist_ok=True)
                    profile = args.profile_apiserver / f"{workload}-{system}-{i}.pprof"
                extra = chosen[system]
                results[system].append(
                    one_round(
                        "kopf-dra" if system == "kopf-dra" else "upstream",
                        workload,
                        bin_dir,
                        args.churn,
                        args.separate,
                        {**args.kube_scheduler_gates, **(extra or {})},
                        profile,
                        args.profile_seconds,
                    )
                )
        if workload in bench_steady.STEADY:
            nodes = bench_steady.STEADY[workload]
            devices = nodes * bench_steady.DEVICES
            free = devices - len(
                bench_steady.fill_slots(nodes, bench_steady.DEVICES, bench_steady.FILL)
            )
            print(
                f"{workload} ({nodes} nodes x {bench_steady.DEVICES} devices, "
                f"{bench_steady.FILL:.0%} full: {free} free), {rounds} alternating rounds, "
                f"Kubernetes {version}; creation to binding of pods living "
                f"{bench_steady.LIFETIME:.0f} s"
            )
            for name in chosen:
                bench_steady.summary(name, results[name], free)
            for name in chosen:
                if name != "kopf-dra":
                    bench_steady.compare(results, name)
            continue
        title = WORKLOADS[workload]
        extra_gates = format_feature_gates(args.kube_scheduler_gates)
        print(
            f"{workload} ({title[0]} nodes x {title[1]} devices, {title[2]} pods"
            f"{', churn' if args.churn else ''}), {rounds} alternating rounds, Kubernetes "
            f"{version}" + (f", kube-scheduler also with {extra_gates}" if extra_gates else "")
        )
        sums = {name: summary(name, results[name]) for name in chosen}
        for name in chosen:
            if name != "kopf-dra":
                compare(workload, results, sums, name)
        if args.profile_apiserver is not None:
            for system in chosen:
                path = args.profile_apiserver / f"{workload}-{system}-0.pprof"
                print(f"  kube-apiserver CPU beside {system} (round 1): {profile_breakdown(path)}")
    return 0


def compare(
    workload: str,
    results: Mapping[str, list[dict[str, Any]]],
    sums: Mapping[str, dict[str, float]],
    name: str,
) -> None:
    """kopf-dra against one upstream system: CPU per bound pod and the ratios of the medians."""
    title = WORKLOADS[workload]
    ours, theirs = sums["kopf-dra"], sums[name]
    ratio = ours["rate"] / theirs["rate"] if theirs["rate"] else float("nan")
    spread = [
        a["pods_per_s"] / b["pods_per_s"]
        for a, b in zip(results["kopf-dra"], results[name], strict=True)
        if b["pods_per_s"]
    ]
    claims = sum(ours.get(c, 0.0) for c in CLAIM_CONTROLLERS)
    ours_cpu = claims + ours.get("scheduler", 0.0)
    theirs_cpu = sum(theirs.get(c, 0.0) for c in ("kube-scheduler", "kube-controller-manager"))
    kcm = theirs.get("kube-controller-manager", 0.0)
    bound = {
        system: statistics.median(title[2] - r["unbound"] for r in results[system])
        for system in ("kopf-dra", name)
    }
    per_pod = {
        system: 1000 * sum(v for k, v in cpu.items() if k != "rate") / max(bound[system], 1)
        for system, cpu in (("kopf-dra", ours), (name, theirs))
    }
    print(
        f"  against {name}: whole-system CPU per bound pod (every process, medians): kopf-dra "
        f"{per_pod['kopf-dra']:.1f} ms, {name} {per_pod[name]:.1f} ms "
        f"({per_pod['kopf-dra'] / per_pod[name]:.2f}x)"
    )
    ours_n, theirs_n = max(bound["kopf-dra"], 1), max(bound[name], 1)
    mine = {c: s for c, s in ours.items() if c in (*CLAIM_CONTROLLERS, "scheduler")}
    each = ", ".join(f"{c} {1000 * s / ours_n:.2f}" for c, s in mine.items())
    own = (ours_cpu / ours_n) / (theirs_cpu / theirs_n) if theirs_cpu else float("nan")
    print(
        f"    own CPU per bound pod: kopf-dra {1000 * ours_cpu / ours_n:.2f} ms ({each}), "
        f"{name} {1000 * theirs_cpu / theirs_n:.2f} ms ({own:.2f}x, target <= 0.5)"
    )
    ceilings = ", ".join(f"{c} {ours_n / s:.0f}" for c, s in mine.items() if s)
    scheduler = theirs.get("kube-scheduler", 0.0)
    print(
        f"    single-core ceiling (bound pods per CPU-second): kopf-dra {ceilings}; "
        f"kube-scheduler {theirs_n / scheduler if scheduler else float('nan'):.0f} "
        f"(its pods/s here {theirs['rate']:.1f})"
    )
    print(
        f"    ratio of medians (kopf-dra / {name}): pods/s {ratio:.2f} "
        f"(per round {min(spread):.2f}-{max(spread):.2f}); component CPU "
        f"{ours_cpu:.1f} / {theirs_cpu:.1f} s; kube-apiserver "
        f"{ours.get('kube-apiserver', 0):.1f} / {theirs.get('kube-apiserver', 0):.1f} s; "
        f"etcd {ours.get('etcd', 0):.1f} / {theirs.get('etcd', 0):.1f} s; claim "
        f"controllers / kube-controller-manager CPU {claims:.1f} / {kcm:.1f} s "
        f"({claims / kcm if kcm else float('nan'):.2f}, target <= 2)"
    )


if __name__ == "__main__":
    sys.exit(main())
