"""The demo's live view: every ``--refresh`` seconds, the pods with their nodes and devices,
the utilisation of every counter set and shared device, and the pending pods with the
scheduler's reasons.

Rendering a frame is pure (``render_view`` of a ``Snapshot``), so it is tested without a cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from operators.aio import wait_at_most
from operators.api.core import Pod
from operators.api.quantity import Quantity
from operators.demo.bringup import DRIVER, SCHEDULER_NAME
from operators.display import bar as _bar
from operators.display import human as human
from operators.display import output_width as output_width
from operators.display import ratio as _ratio
from operators.display import table as _table
from operators.kube.api import ApiError, KubeAPI, NotFoundError


@dataclasses.dataclass(frozen=True)
class Snapshot:
    pods: list[dict[str, Any]]
    claims: list[dict[str, Any]]
    pool_statuses: list[dict[str, Any]]
    slices: list[dict[str, Any]]
    #: Pod key -> its container's log, for pods whose containers run (real nodes).
    logs: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: ResourcePoolStatusRequests (KEP-5677; empty where resource.k8s.io/v1alpha3 is not served).
    requests: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: PodGroups (1.37; empty where scheduling.k8s.io/v1beta1 is not served).
    groups: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def containers_running(pod: Mapping[str, Any]) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return bool(statuses) and all("running" in (s.get("state") or {}) for s in statuses)


_SEEN = re.compile(r"^KOPF_DRA_DEVICE_(\w+?)_(MODEL|PROFILE|BANDWIDTH)=(.*)$")


def container_view(log: str) -> str:
    """What the example pods print of their devices, in one line: each device's model,
    profile or bandwidth share from its CDI environment, and the device nodes it sees."""
    seen: dict[str, list[str]] = {}
    nodes = []
    for line in log.splitlines():
        if match := _SEEN.match(line.strip()):
            device, what, value = match.groups()
            if what == "BANDWIDTH":
                with contextlib.suppress(ValueError):
                    value = human(value)
            seen.setdefault(device.lower(), []).append(f"{what.lower()}={value}")
        elif line.startswith("c") and line.split()[-1:]:  # `ls -l` of a character device
            nodes.append("/dev/kopf-dra/" + line.split()[-1])
    parts = [f"{device} {' '.join(values)}" for device, values in sorted(seen.items())]
    return "; ".join(parts + nodes) or "(no device variables)"


async def snapshot(api: KubeAPI) -> Snapshot:
    pods = [
        p
        for p in (await api.list("Pod"))["items"]
        if p["spec"].get("schedulerName") == SCHEDULER_NAME
    ]
    claims = (await api.list("ResourceClaim"))["items"]
    try:
        statuses = (await api.list("ResourcePoolStatus"))["items"]
    except (NotFoundError, ApiError):
        statuses = []
    slices = (await api.list("ResourceSlice"))["items"]
    try:
        requests = (await api.list("ResourcePoolStatusRequest"))["items"]
    except (NotFoundError, ApiError):
        requests = []
    try:
        groups = (await api.list("PodGroup"))["items"]
    except (NotFoundError, ApiError):
        groups = []
    logs = {}
    for pod in pods:
        if containers_running(pod):
            meta = pod["metadata"]
            with contextlib.suppress(ApiError, OSError, TimeoutError):
                logs[_key(pod)] = await api.pod_log(meta["namespace"], meta["name"])
    return Snapshot(pods, claims, statuses, slices, logs, requests, groups)


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace')}/{meta['name']}"


def pod_claims(pod: Mapping[str, Any], claims: Mapping[str, Mapping[str, Any]]) -> list[Any]:
    """The claims of a pod (direct names, generated ones, and the special claim of its
    extended resources backed by DRA, KEP-5004: a pod asking ``example.com/gpu: 1`` has no
    entry in ``spec.resourceClaims``), those that exist."""
    model = Pod.load(pod)
    namespace = model.metadata.namespace
    names = [model.claim_name(entry) for entry in model.spec.resource_claims]
    extended = model.status.extended_resource_claim_status
    if extended is not None and extended.resource_claim_name not in names:
        names.append(extended.resource_claim_name)
    return [claims[f"{namespace}/{n}"] for n in names if n and f"{namespace}/{n}" in claims]


def allocated_devices(claim: Mapping[str, Any]) -> list[dict[str, Any]]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results: list[dict[str, Any]] = (allocation.get("devices") or {}).get("results") or []
    return results


def scheduled_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled":
            return dict(condition)
    return None


def is_settled(pod: Mapping[str, Any]) -> bool:
    """Bound, or the scheduler has said why not."""
    if pod["spec"].get("nodeName"):
        return True
    condition = scheduled_condition(pod)
    return bool(condition and condition.get("status") == "False" and condition.get("message"))


def pools_reported(snap: Snapshot) -> bool:
    """Every pool with slices has its ResourcePoolStatus (the pool validator caught up)."""
    pools = {(s["spec"]["driver"], s["spec"]["pool"]["name"]) for s in snap.slices}
    reported = {(s["spec"]["driver"], s["spec"]["pool"]) for s in snap.pool_statuses}
    return pools <= reported


def _device_label(result: Mapping[str, Any]) -> str:
    label = f"{result['pool']}/{result['device']}"
    if result["driver"] != DRIVER:
        label = f"{result['driver']}/{label}"
    consumed = result.get("consumedCapacity") or {}
    if consumed:
        label += " (" + ", ".join(f"{k} {human(v)}" for k, v in sorted(consumed.items())) + ")"
    if result.get("adminAccess"):
        label += " [admin]"
    request = str(result.get("request", ""))
    if "/" in request:
        label += f" <{request}>"
    return label


def _answer_view(requests: Sequence[Mapping[str, Any]]) -> list[str]:
    """The newest answered ResourcePoolStatusRequest, to read beside the POOLS view: what a
    user scripting against the upstream API gets (the pool validator's counts)."""
    answered = [r for r in requests if r.get("status")]
    if not answered:
        return []
    newest = max(answered, key=lambda r: (r["metadata"].get("creationTimestamp") or "", _key(r)))
    status = newest["status"]
    message = next((c.get("message") or "" for c in status.get("conditions") or []), "")
    lines = ["", f"REQUESTED  ResourcePoolStatusRequest {newest['metadata']['name']}: {message}"]
    rows = [["DRIVER/POOL", "TOTAL", "ALLOCATED", "UNAVAILABLE", "AVAILABLE"]]
    for pool in status.get("pools") or []:
        name = f"{pool.get('driver')}/{pool.get('poolName')}"
        if pool.get("validationError"):
            rows.append([name, "-", "-", "-", pool["validationError"]])
            continue
        fields = ("totalDevices", "allocatedDevices", "unavailableDevices", "availableDevices")
        rows.append([name, *(str(pool.get(f, 0)) for f in fields)])
    return lines + _table(rows)


def _groups_view(snap: Snapshot, claims: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Each PodGroup: its policy, how many of its pods are bound, its shared claims' devices
    (allocated once for the whole group) and how its last scheduling cycle ended."""
    if not snap.groups:
        return []
    rows = [["POD GROUP", "POLICY", "BOUND", "SHARED CLAIMS", "SCHEDULED"]]
    for group in sorted(snap.groups, key=_key):
        meta, spec = group["metadata"], group.get("spec") or {}
        gang = (spec.get("schedulingPolicy") or {}).get("gang")
        policy = f"gang, minCount {gang.get('minCount')}" if gang is not None else "basic"
        members = [
            p
            for p in snap.pods
            if p["metadata"].get("namespace") == meta.get("namespace")
            and ((p["spec"].get("schedulingGroup") or {}).get("podGroupName") == meta["name"])
        ]
        placed = sum(1 for p in members if p["spec"].get("nodeName"))
        shared = []
        for status in (group.get("status") or {}).get("resourceClaimStatuses") or []:
            claim = claims.get(f"{meta.get('namespace')}/{status.get('resourceClaimName')}")
            devices = [_device_label(r) for r in allocated_devices(claim)] if claim else []
            shared.append(f"{status.get('name')}: {', '.join(devices) or 'not allocated'}")
        condition = next(
            (
                c
                for c in (group.get("status") or {}).get("conditions") or []
                if c.get("type") == "PodGroupInitiallyScheduled"
            ),
            None,
        )
        said = f"{condition.get('status')} {condition.get('reason')}" if condition else "-"
        rows.append(
            [_key(group), policy, f"{placed}/{len(members)}", "; ".join(shared) or "-", said]
        )
    return ["", f"POD GROUPS  {len(snap.groups)}", *_table(rows)]


def render_view(snap: Snapshot, *, header: str = "", width: int = 120) -> str:
    """One frame of the live view (pure: the same snapshot gives the same text)."""
    claims = {_key(c): c for c in snap.claims}
    bound = sorted((p for p in snap.pods if p["spec"].get("nodeName")), key=_key)
    pending = sorted((p for p in snap.pods if not p["spec"].get("nodeName")), key=_key)
    lines = [header] if header else []
    lines.append(f"PODS  {len(bound)} bound, {len(pending)} pending")
    rows = [["POD", "NODE", "PHASE", "DEVICES"]]
    for pod in bound:
        devices = [_device_label(r) for c in pod_claims(pod, claims) for r in allocated_devices(c)]
        phase = str((pod.get("status") or {}).get("phase") or "Pending")
        rows.append([_key(pod), pod["spec"]["nodeName"], phase, ", ".join(devices) or "-"])
    lines += _table(rows) if bound else ["  (none yet)"]

    lines += _groups_view(snap, claims)

    lines.append("")
    lines.append("POOLS  counter sets: consumed / total")
    rows = [["DRIVER/POOL", "DEVICES", "COUNTER SET", "UTILISATION"]]
    for status in sorted(
        snap.pool_statuses, key=lambda s: (s["spec"]["driver"], s["spec"]["pool"])
    ):
        spec, st = status["spec"], status.get("status") or {}
        counts = st.get("devices") or {}
        pool = f"{spec['driver']}/{spec['pool']}"
        count = f"{counts.get('allocated', 0)}/{counts.get('total', 0)} used"
        counter_sets = st.get("counterSets") or []
        if not counter_sets:
            rows.append([pool, count, "-", ""])
        for i, counter_set in enumerate(counter_sets):
            counters = {c["name"]: c for c in counter_set.get("counters") or []}
            shown = []
            for name in ("memory", "multiprocessors"):
                if name in counters:
                    c = counters[name]
                    shown.append(
                        f"{name} {_bar(_ratio(c['consumed'], c['total']))} "
                        f"{human(c['consumed'], like=c['total'])}/{c['total']}"
                    )
            slices = [c for n, c in counters.items() if n.startswith("memory-slice-")]
            if slices:
                used = sum(1 for c in slices if Quantity(c["consumed"]).sign())
                shown.append(f"slices {used}/{len(slices)}")
            rows.append(
                [
                    pool if i == 0 else "",
                    count if i == 0 else "",
                    counter_set["name"],
                    "  ".join(shown),
                ]
            )
    lines += _table(rows) if len(rows) > 1 else ["  (no ResourcePoolStatus yet)"]
    lines += _answer_view(snap.requests)

    shared = shared_capacity(snap)
    if shared:
        lines.append("")
        lines.append("SHARED DEVICES  consumable capacity: consumed / total")
        rows = [["DEVICE", "CAPACITY", "CONSUMERS"]]
        for device, (capacity, consumers) in sorted(shared.items()):
            rows.append([device, capacity, ", ".join(sorted(consumers))])
        lines += _table(rows)

    if snap.logs:
        lines.append("")
        lines.append("CONTAINERS  what each running container sees of its devices")
        rows = [[key, container_view(log)] for key, log in sorted(snap.logs.items())]
        lines += _table([["POD", "SEES"], *rows])

    lines.append("")
    lines.append(f"PENDING  {len(pending)}")
    for pod in pending:
        condition = scheduled_condition(pod)
        reason = (condition or {}).get("message") or "waiting for the scheduler"
        first = str(reason).splitlines()[0]
        lines.append(f"  {_key(pod)}: {first[: max(20, width - len(_key(pod)) - 4)]}")
    return "\n".join(lines) + "\n"


def shared_capacity(snap: Snapshot) -> dict[str, tuple[str, set[str]]]:
    """Devices with allowMultipleAllocations: capacity consumed by claims, and by whom."""
    totals: dict[str, dict[str, str]] = {}
    for s in snap.slices:
        spec = s["spec"]
        for device in spec.get("devices") or []:
            if device.get("allowMultipleAllocations"):
                key = f"{spec['pool']['name']}/{device['name']}"
                totals[key] = {n: c["value"] for n, c in (device.get("capacity") or {}).items()}
    used: dict[str, dict[str, Quantity]] = {}
    consumers: dict[str, set[str]] = {}
    for claim in snap.claims:
        for result in allocated_devices(claim):
            key = f"{result['pool']}/{result['device']}"
            if key not in totals:
                continue
            consumers.setdefault(key, set()).add(_key(claim).split("/")[0])
            for name, value in (result.get("consumedCapacity") or {}).items():
                entry = used.setdefault(key, {})
                entry[name] = entry.get(name, Quantity("0")) + Quantity(value)
    out = {}
    for key, capacity in totals.items():
        parts = []
        for name, total in sorted(capacity.items()):
            consumed = used.get(key, {}).get(name, Quantity("0"))
            used_text = human(str(consumed), like=total)
            parts.append(f"{name} {_bar(_ratio(str(consumed), total))} {used_text}/{total}")
        out[key] = ("  ".join(parts), consumers.get(key, set()))
    return out


async def view(
    api: KubeAPI,
    check: Callable[[], None],
    args: argparse.Namespace,
    stop: asyncio.Event,
    out: Any,
    where: str,
    applied: list[str],
    *,
    kubelets: bool = False,
) -> int:
    """The live view until ``stop`` (or ``--once``: one frame once every pod is settled, and
    with ``kubelets``, every bound pod Running)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    tty = hasattr(out, "isatty") and out.isatty()

    def width() -> int:
        return output_width(out)

    while True:
        check()  # a child process or a cluster component that exited fails the demo
        snap = await snapshot(api)
        now = datetime.datetime.now().strftime("%H:%M:%S")
        header = (
            f"kopf-dra demo  {now}  {where}\n"
            f"examples: {', '.join(applied) or '-'}  |  Ctrl-C stops everything\n"
        )
        settled = bool(snap.pods) and all(is_settled(p) for p in snap.pods) and pools_reported(snap)
        if kubelets:
            settled = settled and all(
                p["status"].get("phase") == "Running"
                for p in snap.pods
                if p["spec"].get("nodeName")
            )
        elapsed = loop.time() - started
        if args.once:
            if settled or elapsed > args.timeout:
                print(render_view(snap, header=header, width=width()), file=out, flush=True)
                return 0 if any(p["spec"].get("nodeName") for p in snap.pods) else 1
        else:
            frame = render_view(snap, header=header, width=width())
            print(("\x1b[H\x1b[2J" if tty else "\n") + frame, end="", file=out, flush=True)
            if args.duration and elapsed >= args.duration:
                return 0
        await wait_at_most(stop.wait(), args.refresh if not args.once else 0.5)
        if stop.is_set():
            return 0
