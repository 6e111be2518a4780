"""``kubectl dra pools``: every pool's devices, what is allocated, what is left, from the API
alone (ResourceSlices, ResourceClaims, DeviceTaintRules), no kopf-dra component needed.

The counting is the allocator's, as the pool validator counts for ResourcePoolStatusRequests:
``check_pool`` (the newest generation, counters consumed by allocated devices, KEP-4815) and
``pool_status`` (a device shared by several claims counts once; a device tainted NoSchedule
or NoExecute, or whose counters the allocated devices used up, is unavailable). A shareable
device's capacity (KEP-5075) is what its shares consume, as ``AllocatedState`` adds it up.
``--by KEY`` only sums those counts per topology domain (the nodes sharing a value of node
label KEY: a rack, an NVLink block), where a gang of pods is placed.
Pure: everything comes in as arguments.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from operators.allocator.capacity import qualified_name
from operators.allocator.features import Features
from operators.allocator.pool_availability import BLOCKING_EFFECTS, pool_status
from operators.allocator.pool_checks import CounterUsage, check_pool, pool_devices
from operators.allocator.pools import PoolGeneration, newest_generations
from operators.allocator.state import AllocatedState
from operators.api.core import Node
from operators.api.features import KubernetesVersion
from operators.api.quantity import Quantity
from operators.api.resource import DeviceTaint, DeviceTaintRule, ResourceClaim, ResourceSlice
from operators.display import paint, table, usage

#: ``memory-slice-0`` .. ``memory-slice-7``: one entry, how many of them are in use.
_NUMBERED = re.compile(r"^(.*?)-?\d+$")
#: ``PoolView.node`` of a pool not local to one node (no node name starts with ``<``).
ALL_NODES: Final = "<all nodes>"
NODE_SELECTOR: Final = "<node selector>"
#: The row of ``--by`` for what is in no domain.
NO_DOMAIN: Final = "<none>"


@dataclasses.dataclass(frozen=True)
class Taint:
    device: str
    taint: DeviceTaint
    rule: str | None = None

    def __str__(self) -> str:
        value = f"={self.taint.value}" if self.taint.value else ""
        by = f" (DeviceTaintRule {self.rule})" if self.rule else ""
        return f"{self.taint.key}{value}:{self.taint.effect}{by}"


@dataclasses.dataclass(frozen=True)
class SharedDevice:
    """An ``allowMultipleAllocations`` device: per capacity (consumed, total), and its shares."""

    device: str
    capacity: dict[str, tuple[str, str]]
    consumers: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class PoolView:
    pool: str
    node: str
    generation: int
    slices: str
    devices: int = 0
    allocated: int = 0
    unavailable: int = 0
    available: int = 0
    counters: tuple[CounterUsage, ...] = ()
    shared: tuple[SharedDevice, ...] = ()
    taints: tuple[Taint, ...] = ()
    problems: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class DomainView:
    """The pool views of one topology domain, summed; ``domain`` None: of no domain."""

    domain: str | None
    nodes: int
    pools: int
    devices: int = 0
    allocated: int = 0
    unavailable: int = 0
    available: int = 0

    @property
    def name(self) -> str:
        return NO_DOMAIN if self.domain is None else self.domain


def _node(group: PoolGeneration) -> str:
    """Where the pool's devices are: one node, every node, or chosen by a selector."""
    nodes = {s.spec.node_name for s in group.slices}
    if len(nodes) == 1 and (name := nodes.pop()):
        return name
    if all(s.spec.all_nodes for s in group.slices):
        return ALL_NODES
    return NODE_SELECTOR


def _taints(
    group: PoolGeneration, rules: Sequence[DeviceTaintRule], features: Features
) -> tuple[Taint, ...]:
    found = []
    for name, (_, device) in sorted(pool_devices(group.slices, features).items()):
        device_id = group.id.device(name)
        found += [Taint(name, t) for t in device.taints]
        found += [
            Taint(name, r.spec.taint, r.metadata.name)
            for r in rules
            if r.spec.device_selector is not None and r.spec.device_selector.matches(device_id)
        ]
    return tuple(found)


def _shared(
    group: PoolGeneration, claims: Sequence[ResourceClaim], features: Features
) -> tuple[SharedDevice, ...]:
    state = AllocatedState.from_claims(claims, features)
    out = []
    for name, (_, device) in sorted(pool_devices(group.slices, features).items()):
        if not device.allow_multiple_allocations:
            continue
        device_id = group.id.device(name)
        used = state.capacity.get(device_id, {})
        # 1.38's state keys capacity by fully qualified name.
        held = {
            key: qualified_name(key, group.id.driver) if features.since_1_38 else key
            for key in device.capacity
        }
        capacity = {
            key: (str(Quantity.from_decimal(used.get(held[key], 0), c.value.format)), str(c.value))
            for key, c in sorted(device.capacity.items())
            if c.value is not None
        }
        consumers = sorted(
            c.key
            for c in claims
            if any(r.device_id == device_id and r.share_id for r in c.allocated_results())
        )
        out.append(SharedDevice(name, capacity, tuple(consumers)))
    return tuple(out)


def pool_views(
    slices: Sequence[ResourceSlice],
    claims: Sequence[ResourceClaim],
    taint_rules: Sequence[DeviceTaintRule],
    features: Features,
) -> list[PoolView]:
    """One view per pool (its newest generation), sorted by driver and pool."""
    views = []
    for group in newest_generations(slices):
        report = check_pool(group, claims, features)
        status = pool_status(
            group, report, claims, features, taint_rules if features.device_taints else ()
        )
        touching = [
            c for c in claims if any(r.device_id.pool_id == group.id for r in c.allocated_results())
        ]
        problems = [f"{p.code}: {p.message}" for p in report.errors]
        if status.validation_error:
            problems.insert(0, status.validation_error)
        views.append(
            PoolView(
                pool=str(group.id),
                node=_node(group),
                generation=group.generation,
                slices=f"{len(group.slices)}/{group.expected_slices}",
                devices=report.devices,
                allocated=status.allocated_devices or 0,
                unavailable=status.unavailable_devices or 0,
                available=status.available_devices or 0,
                counters=report.counters,
                shared=_shared(group, touching, features),
                taints=_taints(group, taint_rules if features.device_taints else (), features),
                problems=tuple(problems),
            )
        )
    return views


def from_objects(
    slices: Sequence[Mapping[str, Any]],
    claims: Sequence[Mapping[str, Any]],
    taint_rules: Sequence[Mapping[str, Any]],
    version: KubernetesVersion,
) -> list[PoolView]:
    """``pool_views`` of the objects as read, counted as the cluster's release counts."""
    return pool_views(
        [ResourceSlice.load(s) for s in slices],
        [ResourceClaim.load(c) for c in claims],
        [DeviceTaintRule.load(r) for r in taint_rules],
        Features.release(version=version),
    )


def domain_views(views: Sequence[PoolView], nodes: Sequence[Node], key: str) -> list[DomainView]:
    """``views`` summed per value of node label ``key`` on the node each pool is local to,
    sorted by value, so that a gang's free devices per rack show. Then, where there are any,
    what is in no domain, so that the rows add up to every pool: nodes without the label or
    with an empty value (a labeling mistake, not a domain, as Kubernetes 1.38 takes it), pools
    local to them or to a node not read, pools not local to one node."""
    domain_of = {n.metadata.name: n.metadata.labels.get(key) or None for n in nodes}
    members: dict[str | None, set[str]] = {}
    for name, domain in domain_of.items():
        if name:
            members.setdefault(domain, set()).add(name)
    pooled: dict[str | None, list[PoolView]] = {}
    for view in views:
        local = view.node not in (ALL_NODES, NODE_SELECTOR)
        if local and view.node not in domain_of:
            members.setdefault(None, set()).add(view.node)
        pooled.setdefault(domain_of.get(view.node) if local else None, []).append(view)
    return [
        DomainView(
            domain=domain,
            nodes=len(members.get(domain, ())),
            pools=len(pooled.get(domain, ())),
            devices=sum(v.devices for v in pooled.get(domain, ())),
            allocated=sum(v.allocated for v in pooled.get(domain, ())),
            unavailable=sum(v.unavailable for v in pooled.get(domain, ())),
            available=sum(v.available for v in pooled.get(domain, ())),
        )
        for domain in sorted(members.keys() | pooled.keys(), key=lambda d: (d is None, d or ""))
    ]


def domains_from_objects(
    views: Sequence[PoolView], nodes: Sequence[Mapping[str, Any]], key: str
) -> list[DomainView]:
    """``domain_views`` of the Nodes as read."""
    return domain_views(views, [Node.load(n) for n in nodes], key)


def _counter_text(counters: Sequence[CounterUsage]) -> str:
    """Each counter as used/total with a bar; numbered counters (``memory-slice-0..7``) as one
    entry: how many of them are in use."""
    numbered: dict[str, list[CounterUsage]] = {}
    for c in counters:
        match = _NUMBERED.match(c.counter)
        if match is not None and match.group(1):
            numbered.setdefault(match.group(1), []).append(c)
    parts = []
    done: set[str] = set()
    for c in counters:
        match = _NUMBERED.match(c.counter)
        stem = match.group(1) if match is not None else ""
        if stem and len(numbered.get(stem, [])) > 1:
            if stem not in done:
                group = numbered[stem]
                used = sum(1 for u in group if u.consumed.sign())
                parts.append(f"{stem}-* {used}/{len(group)}")
                done.add(stem)
            continue
        parts.append(f"{c.counter} {usage(str(c.consumed), str(c.total))}")
    return "  ".join(parts)


def rows(views: Sequence[PoolView], *, wide: bool = False) -> list[list[str]]:
    head = ["DRIVER/POOL", "NODE", "DEVICES", "ALLOCATED", "AVAILABLE", "TAINTED"]
    if wide:
        head += ["UNAVAILABLE", "GENERATION", "SLICES"]
    out = [[*head, "COUNTERS (consumed/total)"]]
    for view in views:
        sets: dict[str, list[CounterUsage]] = {}
        for c in view.counters:
            sets.setdefault(c.counter_set, []).append(c)
        counter_lines = [f"{name}: {_counter_text(cs)}" for name, cs in sets.items()] or ["-"]
        tainted = len({t.device for t in view.taints if t.taint.effect in BLOCKING_EFFECTS})
        row = [
            view.pool,
            view.node,
            str(view.devices),
            str(view.allocated),
            str(view.available),
            str(tainted),
        ]
        if wide:
            row += [str(view.unavailable), str(view.generation), view.slices]
        out.append([*row, counter_lines[0]])
        out += [[""] * len(row) + [line] for line in counter_lines[1:]]
    return out


def render(views: Sequence[PoolView], *, wide: bool = False, colour: bool = False) -> str:
    """The pools table, then the shared devices, the tainted devices and the problems."""
    if not views:
        return "No ResourceSlices found.\n"
    lines = [line.rstrip() for line in table(rows(views, wide=wide), "")]
    lines[0] = paint(lines[0], "bold", colour)
    shared = [(v, s) for v in views for s in v.shared]
    if shared:
        lines += ["", paint("SHARED DEVICES  consumable capacity: consumed/total", "bold", colour)]
        body = [["DEVICE", "CAPACITY", "SHARES"]]
        for view, s in shared:
            capacity = "  ".join(f"{k} {usage(u, t)}" for k, (u, t) in s.capacity.items())
            body.append([f"{view.pool}/{s.device}", capacity or "-", ", ".join(s.consumers) or "-"])
        lines += [line.rstrip() for line in table(body)]
    taints = [(v, t) for v in views for t in v.taints]
    if taints:
        lines += ["", paint("TAINTED DEVICES", "bold", colour)]
        lines += [
            line.rstrip()
            for line in table(
                [["DEVICE", "TAINT"]] + [[f"{v.pool}/{t.device}", str(t)] for v, t in taints]
            )
        ]
    return "\n".join(lines + _problems(views, colour)) + "\n"


def _problems(views: Sequence[PoolView], colour: bool) -> list[str]:
    """What is wrong with the pools: a sum over a domain does not say it."""
    problems = [(v, p) for v in views for p in v.problems]
    if not problems:
        return []
    return ["", paint("PROBLEMS", "red", colour)] + [f"  {v.pool}: {p}" for v, p in problems]


def domain_rows(domains: Sequence[DomainView], key: str, *, wide: bool = False) -> list[list[str]]:
    head = [f"DOMAIN ({key})", "NODES", "DEVICES", "ALLOCATED", "UNAVAILABLE", "AVAILABLE"]
    out = [[*head, "POOLS"] if wide else head]
    for d in domains:
        counts = (d.nodes, d.devices, d.allocated, d.unavailable, d.available)
        row = [d.name, *(str(c) for c in counts)]
        out.append([*row, str(d.pools)] if wide else row)
    return out


def render_domains(
    domains: Sequence[DomainView],
    views: Sequence[PoolView],
    key: str,
    *,
    wide: bool = False,
    colour: bool = False,
) -> str:
    """``--by``: the domains table, then the pools' problems."""
    if not views:
        return "No ResourceSlices found.\n"
    lines = [line.rstrip() for line in table(domain_rows(domains, key, wide=wide), "")]
    lines[0] = paint(lines[0], "bold", colour)
    return "\n".join(lines + _problems(views, colour)) + "\n"


def as_json(
    views: Sequence[PoolView], domains: Sequence[DomainView] | None = None
) -> dict[str, Any]:
    """``-o json|yaml``: per pool the counts, counters, shared devices, taints and problems;
    with ``domains`` (``--by``) also their sums per domain (``domain`` null: in none)."""
    data: dict[str, Any] = {
        "pools": [
            {
                "pool": v.pool,
                "node": v.node,
                "generation": v.generation,
                "slices": v.slices,
                "devices": v.devices,
                "allocated": v.allocated,
                "unavailable": v.unavailable,
                "available": v.available,
                "counters": [
                    {
                        "counterSet": c.counter_set,
                        "counter": c.counter,
                        "consumed": str(c.consumed),
                        "total": str(c.total),
                    }
                    for c in v.counters
                ],
                "sharedDevices": [
                    {
                        "device": s.device,
                        "capacity": {
                            k: {"consumed": u, "total": t} for k, (u, t) in s.capacity.items()
                        },
                        "shares": list(s.consumers),
                    }
                    for s in v.shared
                ],
                "taints": [
                    {"device": t.device, **t.taint.dump(), **({"rule": t.rule} if t.rule else {})}
                    for t in v.taints
                ],
                "problems": list(v.problems),
            }
            for v in views
        ]
    }
    if domains is not None:
        data["domains"] = [
            {
                "domain": d.domain,
                "nodes": d.nodes,
                "pools": d.pools,
                "devices": d.devices,
                "allocated": d.allocated,
                "unavailable": d.unavailable,
                "available": d.available,
            }
            for d in domains
        ]
    return data


def held_rows(held: Mapping[tuple[str, str], tuple[int, int]], label: str) -> list[list[str]]:
    out = [["NAMESPACE", f"QUEUE ({label})", "DEVICES", "CLAIMS"]]
    for (namespace, queue), (devices, claims) in held.items():
        out.append([namespace, queue or "<none>", str(devices), str(claims)])
    return out


def render_held(
    held: Mapping[tuple[str, str], tuple[int, int]], label: str, *, colour: bool = False
) -> str:
    """``--held``: devices allocated per namespace and per queue label of the pods holding
    them, what a queue's usage (Kueue's ClusterQueue status) can be compared with."""
    if not held:
        return "No devices are allocated.\n"
    lines = [line.rstrip() for line in table(held_rows(held, label), "")]
    lines[0] = paint(lines[0], "bold", colour)
    return "\n".join(lines) + "\n"


def held_json(held: Mapping[tuple[str, str], tuple[int, int]]) -> dict[str, Any]:
    return {
        "held": [
            {"namespace": ns, "queue": queue or None, "devices": devices, "claims": claims}
            for (ns, queue), (devices, claims) in held.items()
        ]
    }
