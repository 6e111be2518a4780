"""The gang-training example under kube-scheduler + kube-controller-manager and under kopf-dra.

``.venv/bin/python -m bench.gang_side_by_side [--case whole|one-gpu-short] [--system ...]
[--log-dir DIR]``

``manifests/examples/gang-training`` (PodGroup ``training``, a gang of ``minCount: 4`` with a
claim ``interconnect`` made for the group from a template; four trainers, each with a GPU claim
of its own and the group's ``interconnect`` entry) on kopf-dra's local control plane (a real
kube-apiserver + etcd of the pinned release, 1.37 with GenericWorkload and
DRAWorkloadResourceClaims on, ``scheduling.k8s.io/v1beta1`` served) with the demo's two e2e
virtual nodes (``E2E_NODES``: no kubelets; the example driver of each node publishes its
ResourceSlices, two whole GPUs a node: an A100 and a T4), a fresh control plane per system and
case:

- upstream: kube-scheduler and kube-controller-manager of the same release (built like
  ``bench_compare``'s), ``--controllers=resourceclaim-controller,podgroup-protection-controller,
  garbage-collector-controller``, both with the control plane's gates; every pod's
  ``schedulerName`` rewritten to ``default-scheduler``;
- kopf-dra: the demo's operators (``start_system``), the example applied unchanged.

Cases: ``whole`` (the example as it is: four GPUs for four trainers, all should be placed) and
``one-gpu-short`` (``minCount: 5`` and a fifth trainer: none should be placed).

Printed per case and system: each pod's node or its PodScheduled reason and message, its claims
with their allocated devices and ``reservedFor``, every claim of the namespace no pod names yet,
the PodGroup's ``status.resourceClaimStatuses`` and conditions, the FailedScheduling Events'
messages (with their counts) and the other Events by reason; in ``whole``, the wall time from
the first object applied (and from the last pod created) to every trainer bound, polled every
20 ms. The components are waited for before anything is applied (each holds its Lease: for
kube-scheduler that follows its informers' sync). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from bench.bench_compare import started, upstream_argv, upstream_bin
from operators.demo.bringup import (
    E2E_NODES,
    apply_example,
    example_objects,
    gang_one_gpu_short,
    start_system,
)
from operators.kube.api import KubeAPI
from operators.kube.client import make_api_client
from operators.localcluster import controlplane

EXAMPLE = "gang-training"
NAMESPACE = "kopf-dra-gang"
GROUP = "training"
SYSTEMS = ("upstream", "kopf-dra")
CASES = ("whole", "one-gpu-short")
#: kube-controller-manager's controllers here (names of v1.37.2's
#: ``cmd/kube-controller-manager/names``): the pods' and the PodGroup's claims from their
#: templates, the PodGroup's deletion protection, and the owner-based garbage collection.
KCM_CONTROLLERS = (
    "resourceclaim-controller,podgroup-protection-controller,garbage-collector-controller"
)
#: The Leases of the components, each held once it is ready to act (kube-system).
LEASES = {
    "upstream": ("kube-scheduler", "kube-controller-manager"),
    "kopf-dra": (
        "kopf-dra-claim-templates",
        "kopf-dra-reservations",
        "kopf-dra-scheduler",
        "kopf-dra-pool-validator",
    ),
}
POLL = 0.02
READY_WITHIN = 120.0
SETTLE_WITHIN = 120.0
#: After settling, the report's state (Event counts and times left out) must stay the same this
#: long, within QUIET_WITHIN, before it is printed: the schedulers retry and rewrite messages.
QUIET_FOR = 5.0
QUIET_WITHIN = 60.0


# --- the workloads -------------------------------------------------------------------------


def case_objects(case: str, system: str) -> list[dict[str, Any]]:
    """The example's objects for ``case``, the pods' scheduler chosen for ``system``."""
    objects = gang_one_gpu_short() if case == "one-gpu-short" else example_objects(EXAMPLE)
    if system == "upstream":
        for o in objects:
            if o["kind"] == "Pod":
                o["spec"]["schedulerName"] = "default-scheduler"
    return objects


def expected_pods(case: str) -> int:
    return 5 if case == "one-gpu-short" else 4


# --- what is printed -----------------------------------------------------------------------


@dataclasses.dataclass
class Snapshot:
    pods: list[dict[str, Any]]
    claims: dict[str, dict[str, Any]]
    group: dict[str, Any] | None
    events: list[dict[str, Any]]


async def snapshot(kube: KubeAPI) -> Snapshot:
    pods = sorted((await kube.list("Pod", NAMESPACE))["items"], key=lambda p: p["metadata"]["name"])
    claims = {
        c["metadata"]["name"]: c for c in (await kube.list("ResourceClaim", NAMESPACE))["items"]
    }
    group = await kube.get_or_none("PodGroup", GROUP, NAMESPACE)
    events = (await kube.list("Event", NAMESPACE))["items"]
    return Snapshot(pods, claims, group, events)


def _scheduled(pod: dict[str, Any]) -> dict[str, Any] | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return dict(c)
    return None


def _devices(claim: dict[str, Any]) -> str:
    allocation = (claim.get("status") or {}).get("allocation")
    if not allocation:
        return "not allocated"
    results = (allocation.get("devices") or {}).get("results") or []
    return ", ".join(f"{r['driver']}/{r['pool']}/{r['device']}" for r in results) or "(none)"


def _reserved(claim: dict[str, Any]) -> str:
    refs = (claim.get("status") or {}).get("reservedFor") or []
    return ", ".join(f"{r.get('resource')}/{r.get('name')}" for r in refs) if refs else "(nobody)"


def _owner(claim: dict[str, Any]) -> str:
    owners = claim["metadata"].get("ownerReferences") or []
    return ", ".join(f"{o['kind']}/{o['name']}" for o in owners) or "(none)"


def _claim_line(claim: dict[str, Any]) -> str:
    return (
        f"{claim['metadata']['name']} (owner {_owner(claim)}): {_devices(claim)}; "
        f"reservedFor {_reserved(claim)}"
    )


def _event_text(event: dict[str, Any]) -> tuple[str, str, str]:
    """(involved object, reporting component, message) of a core/v1 view of an Event."""
    involved = event.get("involvedObject") or event.get("regarding") or {}
    source = event.get("reportingComponent") or (event.get("source") or {}).get("component") or "?"
    message = event.get("message") or event.get("note") or ""
    return f"{involved.get('kind', '?')}/{involved.get('name', '?')}", source, message


def _event_count(event: dict[str, Any]) -> int:
    series = event.get("series") or {}
    return int(series.get("count") or event.get("count") or 1)


def render(snap: Snapshot, *, with_counts: bool = True) -> list[str]:
    """The report's lines of one state (``with_counts`` False: what quiescence compares)."""
    lines = ["  pods:"]
    named: set[str] = set()
    for pod in snap.pods:
        name = pod["metadata"]["name"]
        node = pod["spec"].get("nodeName")
        if node:
            where = f"node {node}"
        else:
            c = _scheduled(pod)
            where = (
                f"not bound: PodScheduled {c.get('status')} {c.get('reason')}: {c.get('message')}"
                if c
                else "not bound, no PodScheduled condition"
            )
        lines.append(f"    {name}: {where}")
        recorded = {
            s["name"]: s.get("resourceClaimName")
            for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        }
        for entry in pod["spec"].get("resourceClaims") or []:
            claim_name = entry.get("resourceClaimName") or recorded.get(entry["name"])
            if claim_name is None:
                text = (
                    "no claim recorded in status.resourceClaimStatuses"
                    if entry["name"] not in recorded
                    else "recorded as not needed"
                )
            elif claim_name in snap.claims:
                named.add(claim_name)
                text = _claim_line(snap.claims[claim_name])
            else:
                text = f"{claim_name} (does not exist)"
            lines.append(f"      claim {entry['name']}: {text}")
    others = [c for n, c in sorted(snap.claims.items()) if n not in named]
    lines.append("  claims no pod names:" + ("" if others else " none"))
    lines += [f"    {_claim_line(c)}" for c in others]
    if snap.group is None:
        lines.append("  PodGroup training: missing")
    else:
        status = snap.group.get("status") or {}
        lines.append("  PodGroup training status:")
        statuses = status.get("resourceClaimStatuses") or []
        lines.append(
            "    resourceClaimStatuses: "
            + (
                ", ".join(f"{s['name']} -> {s.get('resourceClaimName')}" for s in statuses)
                if statuses
                else "(none)"
            )
        )
        conditions = status.get("conditions") or []
        lines.append("    conditions:" + ("" if conditions else " (none)"))
        lines += [
            f"      {c['type']} {c['status']} {c.get('reason')}: {c.get('message')}"
            for c in conditions
        ]
    failed = [e for e in snap.events if e.get("reason") == "FailedScheduling"]
    lines.append("  FailedScheduling events:" + ("" if failed else " none"))
    for e in sorted(failed, key=lambda e: _event_text(e)):
        involved, source, message = _event_text(e)
        count = f" (x{_event_count(e)})" if with_counts else ""
        lines.append(f"    {involved} [{source}]{count}: {message}")
    other: dict[tuple[str, str], int] = {}
    for e in snap.events:
        if e.get("reason") != "FailedScheduling":
            key = (e.get("reason") or "?", _event_text(e)[1])
            other[key] = other.get(key, 0) + (_event_count(e) if with_counts else 1)
    lines.append(
        "  other events: "
        + (", ".join(f"{r} [{s}] x{n}" for (r, s), n in sorted(other.items())) or "none")
    )
    return lines


# --- one run -------------------------------------------------------------------------------


async def eventually(probe: Callable[[], Awaitable[Any]], within: float) -> tuple[Any, bool]:
    """Poll ``probe`` until it returns something truthy, at most ``within`` seconds: (its
    answer, True), or (the last answer, False) at the deadline."""
    deadline = time.monotonic() + within
    result = None
    while time.monotonic() < deadline:
        result = await probe()
        if result:
            return result, True
        await asyncio.sleep(POLL)
    return result, False


async def leases_held(kube: KubeAPI, names: tuple[str, ...]) -> list[str]:
    missing = []
    for name in names:
        lease = await kube.get_or_none("Lease", name, "kube-system")
        if not lease or not (lease.get("spec") or {}).get("holderIdentity"):
            missing.append(name)
    return missing


async def measured(kube: KubeAPI, case: str, system: str) -> dict[str, Any]:
    """Apply the case, wait until it settles and goes quiet; the report's lines and timings."""
    count = expected_pods(case)
    notes: list[str] = []
    first_bound: dict[str, float] = {}
    start = time.monotonic()
    await apply_example(kube, EXAMPLE, case_objects(case, system))
    applied = time.monotonic()

    async def settled() -> bool:
        pods = (await kube.list("Pod", NAMESPACE))["items"]
        now = time.monotonic()
        for p in pods:
            if p["spec"].get("nodeName"):
                first_bound.setdefault(p["metadata"]["name"], now)
        if case == "whole":
            return len(first_bound) == count
        said = [p for p in pods if (_scheduled(p) or {}).get("status") == "False"]
        group = await kube.get_or_none("PodGroup", GROUP, NAMESPACE)
        conditions = ((group or {}).get("status") or {}).get("conditions") or []
        return len(pods) == count and len(said) + len(first_bound) == count and bool(conditions)

    _, ok = await eventually(settled, SETTLE_WITHIN)
    done = time.monotonic()
    timing = None
    if case == "whole" and ok:
        last = max(first_bound.values())
        timing = {
            "all_bound_from_apply_s": last - start,
            "all_bound_from_pods_created_s": last - applied,
            "first_bound_from_apply_s": min(first_bound.values()) - start,
            "bound_from_apply_s": {n: t - start for n, t in sorted(first_bound.items())},
        }
    elif not ok:
        notes.append(
            f"NOT SETTLED within {SETTLE_WITHIN:.0f} s "
            + (
                f"({len(first_bound)}/{count} bound)"
                if case == "whole"
                else "(not every pod told why and the PodGroup without conditions)"
            )
            + "; the state at the deadline follows"
        )
    # Quiet: the state, less Event counts, unchanged for QUIET_FOR seconds.
    last_text: list[str] | None = None
    since = time.monotonic()
    quiet_deadline = time.monotonic() + QUIET_WITHIN
    while time.monotonic() < quiet_deadline:
        text = render(await snapshot(kube), with_counts=False)
        if text != last_text:
            last_text, since = text, time.monotonic()
        elif time.monotonic() - since >= QUIET_FOR:
            break
        await asyncio.sleep(0.25)
    else:
        notes.append(f"the state still changed {QUIET_WITHIN:.0f} s after settling")
    snap = await snapshot(kube)
    if not snap.group or not ((snap.group.get("status") or {}).get("resourceClaimStatuses")):
        owned = [
            n
            for n, c in snap.claims.items()
            if any(o.get("kind") == "PodGroup" for o in c["metadata"].get("ownerReferences") or [])
        ]
        if not owned:
            notes.append(
                "the PodGroup's claim `interconnect` was never created (no claim owned by the "
                "PodGroup, none in its status.resourceClaimStatuses)"
            )
    return {
        "lines": render(snap),
        "timing": timing,
        "notes": notes,
        "settle_s": done - start,
    }


async def run_system(
    system: str, case: str, cp: controlplane.ControlPlane, bin_dir: Path | None, logs: Path
) -> dict[str, Any]:
    async with await make_api_client(cp.kubeconfig) as api_client:
        kube = KubeAPI(api_client)
        demo = await start_system(
            kube,
            cp.kubeconfig,
            nodes=E2E_NODES,
            log_dir=logs,
            operators=system == "kopf-dra",
            fabric=False,
            feature_gates=controlplane.feature_gates(),
        )
        try:
            with ExitStack() as stack:
                if system == "upstream":
                    assert bin_dir is not None
                    stack.enter_context(upstream_started(bin_dir, cp.kubeconfig, logs))
                _, ok = await eventually(lambda: _none_missing(kube, LEASES[system]), READY_WITHIN)
                if not ok:
                    missing = await leases_held(kube, LEASES[system])
                    raise RuntimeError(
                        f"{system}: Leases {missing} not held in {READY_WITHIN:.0f} s"
                    )
                demo.supervisor.check()
                result = await measured(kube, case, system)
                result["log_problems"] = log_problems(system, logs)
                return result
        finally:
            demo.stop()


#: Component logs read for errors and warnings, and the lines left out of them: the upstream
#: components' complaints about the local control plane's missing request-header CA (no
#: front proxy here) and their empty static manifest.
LOGS = {
    "upstream": ("kube-scheduler", "kube-controller-manager"),
    "kopf-dra": ("claim-templates", "reservations", "scheduler", "pool-validator"),
}
LOG_NOISE = ("configmap_cafile_content.go", "The manifest file is empty")
_KLOG = re.compile(r"^([EW])\d{4} [\d:.]+\s+\d+ [^\]]+\] (.*)$")
_STRUCTLOG = re.compile(r"^\S+ \[(error|warning|critical)\s*\] (.*)$")


def log_problems(system: str, logs: Path) -> list[str]:
    """The distinct errors and warnings (klog E and W lines, structlog error and warning) the
    components logged so far, each with how often, in the order first seen."""
    seen: dict[str, int] = {}
    for name in LOGS[system]:
        path = logs / f"{name}.log"
        if not path.exists():
            continue
        for line in path.read_text(errors="replace").splitlines():
            if any(n in line for n in LOG_NOISE):
                continue
            match = _KLOG.match(line) or _STRUCTLOG.match(line)
            if match:
                level = {"E": "error", "W": "warning"}.get(match[1], match[1])
                key = f"{name} {level}: {match[2].strip()}"
                seen[key] = seen.get(key, 0) + 1
    return [f"{k}" + (f" (x{n})" if n > 1 else "") for k, n in seen.items()]


async def _none_missing(kube: KubeAPI, names: tuple[str, ...]) -> bool:
    return not await leases_held(kube, names)


@contextmanager
def upstream_started(bin_dir: Path, kubeconfig: Path, logs: Path) -> Iterator[dict[str, int]]:
    argv = upstream_argv(bin_dir, kubeconfig, logs)
    kcm = argv["kube-controller-manager"]
    argv["kube-controller-manager"] = [
        f"--controllers={KCM_CONTROLLERS}" if a.startswith("--controllers=") else a for a in kcm
    ]
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    with started(argv, logs, env) as pids:
        yield pids


def one_run(system: str, case: str, bin_dir: Path | None, log_root: Path | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="gang-") as tmp:
        logs = (log_root or Path(tmp)) / f"{case}-{system}"
        logs.mkdir(parents=True, exist_ok=True)
        with controlplane.running(Path(tmp) / "cp") as cp:
            try:
                return asyncio.run(run_system(system, case, cp, bin_dir, logs))
            finally:
                if log_root is not None:
                    for name in ("kube-apiserver.log", "etcd.log"):
                        src = cp.state_dir / name
                        if src.exists():
                            (logs / name).write_bytes(src.read_bytes())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=CASES, action="append")
    parser.add_argument("--system", choices=SYSTEMS, action="append")
    parser.add_argument("--log-dir", type=Path, help="keep every process's log here")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = parser.parse_args()
    systems = args.system or list(SYSTEMS)
    bin_dir = upstream_bin() if "upstream" in systems else None
    version = controlplane.kubernetes_version()
    print(
        f"gang-training side by side, Kubernetes {version} (kube-apiserver + etcd; "
        f"kube-scheduler + kube-controller-manager {version} with "
        f"--controllers={KCM_CONTROLLERS}), 2 virtual nodes "
        f"({', '.join(n.name for n in E2E_NODES)}: an A100 and a T4 each, whole GPUs of "
        "class gpu.example.kopf-dra.io), a fresh control plane per system and case; the example "
        "applied once every component holds its Lease, pods polled every "
        f"{POLL * 1000:.0f} ms"
    )
    results: dict[str, dict[str, Any]] = {}
    for case in args.case or list(CASES):
        title = {
            "whole": "case 1, the example as is (minCount 4, four trainers): all should be placed",
            "one-gpu-short": (
                "case 2, one GPU short (minCount 5, five trainers): none should be placed"
            ),
        }[case]
        print(f"\n=== {title}")
        for system in systems:
            result = one_run(system, case, bin_dir, args.log_dir)
            results[f"{case}/{system}"] = result
            label = (
                "upstream (kube-scheduler + kube-controller-manager)"
                if system == "upstream"
                else "kopf-dra"
            )
            print(f"\n--- {label}")
            for note in result["notes"]:
                print(f"  NOTE: {note}")
            if result["timing"]:
                t = result["timing"]
                print(
                    f"  all {expected_pods(case)} bound {t['all_bound_from_apply_s']:.2f} s after "
                    f"the first object was applied ({t['all_bound_from_pods_created_s']:.2f} s "
                    f"after the last pod was created; first bound at "
                    f"{t['first_bound_from_apply_s']:.2f} s)"
                )
                print(
                    "  bound at: "
                    + ", ".join(f"{n} {t:.2f} s" for n, t in t["bound_from_apply_s"].items())
                )
            print("\n".join(result["lines"]))
            problems = result["log_problems"]
            print("  errors and warnings logged:" + ("" if problems else " none"))
            print("\n".join(f"    {p}" for p in problems))
        sys.stdout.flush()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
