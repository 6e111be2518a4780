"""What must hold once a cluster has settled, whatever faults it went through (pure).

``check`` takes a ``Snapshot`` (the cluster's objects as the project's models, plus what only
the runner can observe: how long claims have been allocated without a reservation, and the
state of every process of the system) and returns the violations, each naming the objects
concerned. No I/O and no clock: the unit tests build snapshots from dicts, the chaos runner
from the API server.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any, Final

from operators.allocator import AllocatedState, Allocator, Features, NodeViewCache
from operators.allocator.errors import InvalidNodeSelectorError
from operators.allocator.nodes import selector_matches
from operators.allocator.pool_checks import check_pool
from operators.allocator.pools import newest_generations
from operators.allocator.selectors import CelSelectorEngine
from operators.api.consumers import generated_owner, is_group_consumer, is_pod_consumer
from operators.api.core import Node, Pod
from operators.api.groups import PodGroup, generated_for_group, group_name, is_reserved_for_pod
from operators.api.ids import DeviceID
from operators.api.names import POD_CLAIM_NAME_ANNOTATION
from operators.api.resource import (
    Device,
    DeviceClass,
    DeviceRequestAllocationResult,
    ResourceClaim,
    ResourceClaimStatus,
    ResourceSlice,
)
from operators.cel import CELEnvironment
from operators.scheduling.binding_conditions import ConditionsState, allocated_node, binding_verdict
from operators.scheduling.cycle import ClaimsNotReady, resolve_claims, run_cycle
from operators.scheduling.nodes import UsageTracker, pod_requests
from operators.scheduling.plugins.scores import counted_placement

SCHEDULER_NAME: Final = "kopf-dra"
UNRESERVED_LIMIT: Final = 60.0  # seconds

EXCLUSIVE_DEVICES: Final = "exclusive-devices"
CLAIMS_HELD: Final = "claims-held"
BOUND_PODS_HOLD_CLAIMS: Final = "bound-pods-hold-claims"
PENDING_PODS_FIT_NOWHERE: Final = "pending-pods-fit-nowhere"
UNRESERVED_ALLOCATIONS: Final = "unreserved-allocations"
GENERATED_CLAIMS: Final = "generated-claims"
GANGS_WHOLE: Final = "gangs-whole"
GANGS_IN_ONE_DOMAIN: Final = "gangs-in-one-domain"
GROUP_CLAIMS: Final = "group-claims"
PROCESSES: Final = "processes"

# name -> what it promises (the runner prints one PASS/FAIL line per entry, in this order).
INVARIANTS: Final = {
    EXCLUSIVE_DEVICES: "no device in two allocations beyond its capacity; counter sets within "
    "their totals",
    CLAIMS_HELD: "every reservation of an allocated claim is a pod bound to a node matching the "
    "allocation, or in flight",
    BOUND_PODS_HOLD_CLAIMS: "every bound, live pod's claims are allocated, reserved for it, on "
    "its node",
    PENDING_PODS_FIT_NOWHERE: "no pending pod of the scheduler fits the free devices of a node "
    "that takes it, and each says why (PodScheduled=False)",
    UNRESERVED_ALLOCATIONS: f"no claim allocated without a reservation for {UNRESERVED_LIMIT:g} s",
    GENERATED_CLAIMS: "generated claims belong to live pods, one per pod and entry, none missing",
    GANGS_WHOLE: "no partial gang: a gang's bound pods are none or at least its minCount, and "
    "the pods of a gang with none bound hold no device",
    GANGS_IN_ONE_DOMAIN: "a topology-constrained gang's bound pods share one value of its key",
    GROUP_CLAIMS: "a PodGroup's claim is reserved for its PodGroup alone; a PodGroup in a "
    "reservation exists",
    PROCESSES: "every process of the system alive, no traceback in a log",
}


@dataclasses.dataclass(frozen=True)
class Violation:
    invariant: str
    message: str
    objects: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.message} [{', '.join(self.objects)}]"


@dataclasses.dataclass(frozen=True)
class ProcessState:
    """A process of the system as the runner last saw it (killed-on-purpose ones excluded)."""

    name: str
    alive: bool
    exit_code: int | None = None
    #: One line per traceback in its log: the exception the traceback ended with.
    tracebacks: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Snapshot:
    pods: tuple[Pod, ...] = ()
    claims: tuple[ResourceClaim, ...] = ()
    slices: tuple[ResourceSlice, ...] = ()
    classes: tuple[DeviceClass, ...] = ()
    nodes: tuple[Node, ...] = ()
    #: claim key -> seconds it has been allocated without a reservation (observed over time).
    unreserved_for: Mapping[str, float] = dataclasses.field(default_factory=dict)
    processes: tuple[ProcessState, ...] = ()
    scheduler_name: str = SCHEDULER_NAME
    groups: tuple[PodGroup, ...] = ()

    @classmethod
    def load(
        cls,
        *,
        pods: Iterable[Mapping[str, Any]] = (),
        claims: Iterable[Mapping[str, Any]] = (),
        slices: Iterable[Mapping[str, Any]] = (),
        classes: Iterable[Mapping[str, Any]] = (),
        nodes: Iterable[Mapping[str, Any]] = (),
        groups: Iterable[Mapping[str, Any]] = (),
        **rest: Any,
    ) -> Snapshot:
        """From plain dicts, as listed from the API server."""
        return cls(
            tuple(Pod.load(p) for p in pods),
            tuple(ResourceClaim.load(c) for c in claims),
            tuple(ResourceSlice.load(s) for s in slices),
            tuple(DeviceClass.load(c) for c in classes),
            tuple(Node.load(n) for n in nodes),
            groups=tuple(PodGroup.load(g) for g in groups),
            **rest,
        )


def check(snapshot: Snapshot, *, unreserved_limit: float = UNRESERVED_LIMIT) -> list[Violation]:
    """Every violation of every invariant, grouped by invariant in INVARIANTS' order."""
    return [
        *exclusive_devices(snapshot),
        *claims_held(snapshot),
        *bound_pods_hold_claims(snapshot),
        *pending_pods_fit_nowhere(snapshot),
        *unreserved_allocations(snapshot, unreserved_limit),
        *generated_claims(snapshot),
        *gangs_whole(snapshot),
        *gangs_in_one_domain(snapshot),
        *group_claims(snapshot),
        *processes(snapshot),
    ]


# --- naming --------------------------------------------------------------------------------


def _pod(pod: Pod) -> str:
    return f"pod {pod.key}"


def _claim(claim: ResourceClaim | str) -> str:
    return f"claim {claim if isinstance(claim, str) else claim.key}"


def _is_live(pod: Pod) -> bool:
    return not pod.is_terminated and not pod.metadata.is_deleting


def _allocated(snapshot: Snapshot) -> list[ResourceClaim]:
    return [c for c in snapshot.claims if c.is_allocated]


def _on_node(claim: ResourceClaim, node: Node) -> bool:
    allocation = claim.status.allocation
    if allocation is None or allocation.node_selector is None:
        return True
    try:
        return selector_matches(allocation.node_selector, node)
    except InvalidNodeSelectorError:
        return False


def _in_flight(pod: Pod, claim: ResourceClaim) -> bool:
    """Allocated and reserved for the pending pod, waiting for its binding conditions."""
    return (
        claim.is_reserved_for(pod.metadata.uid or "")
        and binding_verdict(claim, None, float("inf")).state is ConditionsState.PENDING
    )


# --- exclusive-devices ---------------------------------------------------------------------


def exclusive_devices(snapshot: Snapshot) -> list[Violation]:
    """KEP-4381/5075/4815: one holder per device unless shared within its capacity; counters."""
    features = Features.all()
    allocated = _allocated(snapshot)
    devices = {
        s.pool_id.device(d.name or ""): d
        for group in newest_generations(snapshot.slices)
        for s in group.slices
        for d in s.spec.devices
    }
    holders: dict[DeviceID, list[tuple[str, DeviceRequestAllocationResult]]] = defaultdict(list)
    for claim in allocated:
        for r in claim.allocated_results():
            if not r.admin_access:
                holders[r.device_id].append((claim.key, r))
    out = []
    for device_id, uses in sorted(holders.items()):
        if len(uses) < 2:
            continue
        names = tuple(_claim(k) for k in sorted({k for k, _ in uses}))
        device = devices.get(device_id)
        shareable = device is not None and bool(device.allow_multiple_allocations)
        if not shareable or any(r.share_id is None for _, r in uses):
            out.append(
                Violation(
                    EXCLUSIVE_DEVICES,
                    f"device {device_id} is allocated {len(uses)} times and is not shared",
                    (f"device {device_id}", *names),
                )
            )
            continue
        assert device is not None
        for name, capacity in sorted(device.capacity.items()):
            total = capacity.value.value if capacity.value is not None else Decimal(0)
            used = sum(
                (r.consumed_capacity[name].value for _, r in uses if name in r.consumed_capacity),
                Decimal(0),
            )
            if used > total:
                out.append(
                    Violation(
                        EXCLUSIVE_DEVICES,
                        f"device {device_id}: shares consume {used} of capacity {name}, "
                        f"which is {total}",
                        (f"device {device_id}", *names),
                    )
                )
    for group in newest_generations(snapshot.slices):
        report = check_pool(group, allocated, features)
        for usage in report.counters:
            if not usage.overcommitted:
                continue
            consumers = sorted(
                {
                    c.key
                    for c in allocated
                    for r in c.allocated_results()
                    if not r.admin_access
                    and _consumes(devices.get(r.device_id), usage.counter_set)
                    and r.device_id.pool_id == group.id
                }
            )
            out.append(
                Violation(
                    EXCLUSIVE_DEVICES,
                    f"allocated devices consume {usage.consumed} of counter {usage.counter}, "
                    f"which is {usage.total}",
                    (
                        f"counter set {group.id}/{usage.counter_set}",
                        *(_claim(k) for k in consumers),
                    ),
                )
            )
    return out


def _consumes(device: Device | None, counter_set: str) -> bool:
    return device is not None and any(
        u.counter_set == counter_set for u in device.consumes_counters
    )


# --- claims-held ---------------------------------------------------------------------------


def claims_held(snapshot: Snapshot) -> list[Violation]:
    """Each pod in an allocated claim's reservedFor exists, is live and sits where the devices
    are (or waits for binding conditions). Claims reserved by nobody are judged by
    ``unreserved_allocations``: they may exist for a moment."""
    pods = {p.metadata.uid: p for p in snapshot.pods}
    nodes = {n.metadata.name: n for n in snapshot.nodes}
    out = []

    def add(message: str, *objects: str) -> None:
        out.append(Violation(CLAIMS_HELD, message, objects))

    for claim in _allocated(snapshot):
        where = allocated_node(claim)
        for ref in claim.status.reserved_for:
            if not is_pod_consumer(ref):
                continue
            pod = pods.get(ref.uid)
            if pod is None:
                add(
                    f"reserved for pod {ref.name} ({ref.uid}), which no longer exists",
                    _claim(claim),
                    f"pod {claim.metadata.namespace}/{ref.name}",
                )
            elif pod.is_terminated:
                add(f"reserved for a pod that is {pod.status.phase}", _claim(claim), _pod(pod))
            elif pod.spec.node_name:
                node = nodes.get(pod.spec.node_name)
                if node is None:
                    add(
                        f"reserved for a pod bound to node {pod.spec.node_name}, which is gone",
                        _claim(claim),
                        _pod(pod),
                    )
                elif not _on_node(claim, node):
                    add(
                        f"allocated on {where or 'other nodes'} but its pod is bound to "
                        f"{pod.spec.node_name}",
                        _claim(claim),
                        _pod(pod),
                    )
            elif not _in_flight(pod, claim):
                state = "being deleted" if pod.metadata.is_deleting else "pending"
                add(
                    f"stranded: allocated on {where or '(no node selector)'} and reserved for "
                    f"a {state} pod that is neither bound nor waiting for binding conditions",
                    _claim(claim),
                    _pod(pod),
                )
    return out


# --- bound-pods-hold-claims ----------------------------------------------------------------


def _claim_names(pod: Pod) -> list[tuple[str, str | None]]:
    """(entry, claim name) of every entry that needs a claim; None: not generated (yet)."""
    recorded = {s.name: s for s in pod.status.resource_claim_statuses}
    out: list[tuple[str, str | None]] = []
    for entry in pod.spec.resource_claims:
        if entry.resource_claim_name:
            out.append((entry.name or "", entry.resource_claim_name))
        elif entry.resource_claim_template_name:
            status = recorded.get(entry.name)
            if status is not None and not status.resource_claim_name:
                continue  # the template asked for no claim
            out.append((entry.name or "", status.resource_claim_name if status else None))
    return out


def bound_pods_hold_claims(snapshot: Snapshot) -> list[Violation]:
    claims = {c.key: c for c in snapshot.claims}
    nodes = {n.metadata.name: n for n in snapshot.nodes}
    out = []
    for pod in snapshot.pods:
        if not pod.spec.node_name or not _is_live(pod):
            continue
        node = nodes.get(pod.spec.node_name)
        if node is None:
            out.append(
                Violation(
                    BOUND_PODS_HOLD_CLAIMS,
                    f"bound to node {pod.spec.node_name}, which is gone",
                    (_pod(pod), f"node {pod.spec.node_name}"),
                )
            )
        for entry, name in _claim_names(pod):
            claim = claims.get(f"{pod.metadata.namespace}/{name}") if name else None
            problem = None
            if claim is None:
                problem = f"bound without claim {name or '(not generated)'} of entry {entry}"
            elif not claim.is_allocated:
                problem = f"bound, but claim {claim.key} is not allocated"
            elif not is_reserved_for_pod(claim, pod, group_claims=True):
                problem = f"bound, but claim {claim.key} is not reserved for it or its PodGroup"
            elif node is not None and not _on_node(claim, node):
                problem = (
                    f"bound to {node.metadata.name}, but claim {claim.key} is allocated on "
                    f"{allocated_node(claim)}"
                )
            if problem is not None:
                objects = (_pod(pod), _claim(claim or f"{pod.metadata.namespace}/{name}"))
                out.append(Violation(BOUND_PODS_HOLD_CLAIMS, problem, objects))
    return out


# --- pending-pods-fit-nowhere --------------------------------------------------------------


def _share_ids() -> Callable[[], str]:
    counter = itertools.count()
    return lambda: f"judge-{next(counter)}"


def _unallocated(claim: ResourceClaim) -> ResourceClaim:
    return claim.model_copy(update={"status": ResourceClaimStatus()})


def _bound_usage(snapshot: Snapshot) -> UsageTracker:
    """What the bound, unfinished pods request per node."""
    usage = UsageTracker()
    for p in snapshot.pods:
        if p.spec.node_name and not p.is_terminated:
            usage.observe(p.key, counted_placement(p, p.spec.node_name, pod_requests(p)))
    return usage


def _claims_by_namespace(snapshot: Snapshot) -> dict[str, dict[str, ResourceClaim]]:
    """Namespace -> its claims by name (what ``resolve_claims`` is given)."""
    claims: dict[str, dict[str, ResourceClaim]] = defaultdict(dict)
    for c in snapshot.claims:
        claims[c.metadata.namespace or ""][c.metadata.name or ""] = c
    return claims


def pending_pods_fit_nowhere(snapshot: Snapshot) -> list[Violation]:
    """Judged with the scheduler's own pure cycle: node filters, then the allocator on the
    devices nobody else holds. A pending pod's own allocated claims that no other pod uses are
    taken as free for it (the scheduler can take them back), so a claim stranded on a dead node
    does not hide that the pod would fit elsewhere."""
    # A gang's pods are judged together (gangs-whole): one may fit alone where the gang does not.
    pending = [
        p
        for p in snapshot.pods
        if p.spec.scheduler_name == snapshot.scheduler_name
        and not p.spec.node_name
        and not p.spec.scheduling_gates
        and _is_live(p)
        and group_name(p) is None
    ]
    if not pending:
        return []
    features = Features.all()
    selectors = CelSelectorEngine(CELEnvironment())
    views = NodeViewCache()
    usage = _bound_usage(snapshot)
    by_namespace = _claims_by_namespace(snapshot)
    allocated = _allocated(snapshot)
    out = []
    for pod in sorted(pending, key=lambda p: p.key):
        uid = pod.metadata.uid or ""
        resolved = resolve_claims(pod, by_namespace[pod.metadata.namespace or ""])
        if isinstance(resolved, ClaimsNotReady):
            continue  # a missing generated claim is generated-claims' business
        if any(c.is_allocated and _in_flight(pod, c) for c in resolved):
            continue
        own = {c.key for c in resolved if c.is_allocated and not c.reserved_for_uids() - {uid}}
        judged = [_unallocated(c) if c.key in own else c for c in resolved]
        allocator = Allocator(
            features,
            AllocatedState.from_claims([c for c in allocated if c.key not in own], features),
            snapshot.classes,
            snapshot.slices,
            selectors,
            share_ids=_share_ids(),
            view_cache=views,
        )
        result = run_cycle(pod, judged, snapshot.nodes, usage.usage, allocator)
        if result.chosen is None:
            condition = pod.condition("PodScheduled")
            if condition is None or condition.status != "False" or not condition.message:
                out.append(
                    Violation(
                        PENDING_PODS_FIT_NOWHERE,
                        "pending without the scheduler's reason (no PodScheduled=False)",
                        (_pod(pod),),
                    )
                )
            continue
        fit = result.chosen
        devices = [str(r.device_id) for a in fit.results.values() for r in a.devices.results]
        out.append(
            Violation(
                PENDING_PODS_FIT_NOWHERE,
                f"pending, but fits node {fit.node}"
                + (f" with devices {', '.join(devices)}" if devices else ""),
                (_pod(pod), f"node {fit.node}", *(_claim(c) for c in resolved)),
            )
        )
    return out


# --- unreserved-allocations ----------------------------------------------------------------


def unreserved_allocations(snapshot: Snapshot, limit: float = UNRESERVED_LIMIT) -> list[Violation]:
    out = []
    for claim in _allocated(snapshot):
        if claim.status.reserved_for:
            continue
        age = snapshot.unreserved_for.get(claim.key)
        if age is not None and age >= limit:
            out.append(
                Violation(
                    UNRESERVED_ALLOCATIONS,
                    f"allocated on {allocated_node(claim)} without a reservation for {age:.0f} s",
                    (_claim(claim),),
                )
            )
    return out


# --- generated-claims ----------------------------------------------------------------------


def generated_claims(snapshot: Snapshot) -> list[Violation]:
    """Orphans (owner gone, replaced or done), duplicates, and live pods missing theirs."""
    pods = {p.metadata.uid: p for p in snapshot.pods}
    out = []
    by_entry: dict[tuple[str, str], list[str]] = defaultdict(list)
    for claim in snapshot.claims:
        owner = generated_owner(claim)
        if owner is None:
            continue
        name, uid = owner
        pod = pods.get(uid)
        if pod is None or pod.metadata.name != name:
            out.append(
                Violation(
                    GENERATED_CLAIMS,
                    f"orphaned: its pod {name} ({uid}) no longer exists",
                    (_claim(claim), f"pod {claim.metadata.namespace}/{name}"),
                )
            )
        elif pod.is_terminated:
            out.append(
                Violation(
                    GENERATED_CLAIMS,
                    f"orphaned: its pod is {pod.status.phase}",
                    (_claim(claim), _pod(pod)),
                )
            )
        entry = claim.metadata.annotations.get(POD_CLAIM_NAME_ANNOTATION, "")
        by_entry[(uid, entry)].append(claim.key)
    for (uid, entry), keys in sorted(by_entry.items()):
        if len(keys) > 1:
            pod = pods.get(uid)
            out.append(
                Violation(
                    GENERATED_CLAIMS,
                    f"{len(keys)} claims generated for entry {entry} of one pod",
                    (*(_claim(k) for k in sorted(keys)), _pod(pod) if pod else f"pod uid {uid}"),
                )
            )
    existing = {c.key for c in snapshot.claims}
    for live in snapshot.pods:
        if not _is_live(live):
            continue
        templates = {e.name for e in live.spec.resource_claims if e.resource_claim_template_name}
        for entry, claim_name in _claim_names(live):
            if entry not in templates:
                continue
            if claim_name is None:
                out.append(
                    Violation(
                        GENERATED_CLAIMS,
                        f"no claim generated for entry {entry}",
                        (_pod(live),),
                    )
                )
            elif f"{live.metadata.namespace}/{claim_name}" not in existing:
                out.append(
                    Violation(
                        GENERATED_CLAIMS,
                        f"its status names claim {claim_name} (entry {entry}), which is gone",
                        (_pod(live), _claim(f"{live.metadata.namespace}/{claim_name}")),
                    )
                )
    return out


# --- gangs-whole and group-claims ----------------------------------------------------------


def _members(snapshot: Snapshot, group: PodGroup) -> list[Pod]:
    return [
        p
        for p in snapshot.pods
        if p.metadata.namespace == group.metadata.namespace
        and group_name(p) == group.metadata.name
        and _is_live(p)
    ]


def gangs_whole(snapshot: Snapshot) -> list[Violation]:
    """All or nothing, once settled: a gang has no bound pod or at least minCount of them,
    and while it has none, none of its pods' own claims holds a device (a gang that cannot be
    completed holds nothing; the pods say why, or wait silently for the gang's missing pods)."""
    claims = {c.key: c for c in snapshot.claims}
    out = []
    for group in snapshot.groups:
        if not group.is_gang:
            continue
        members = _members(snapshot, group)
        bound = [p for p in members if p.spec.node_name]
        key = f"podgroup {group.metadata.namespace}/{group.metadata.name}"
        if bound and len(bound) < group.min_count:
            out.append(
                Violation(
                    GANGS_WHOLE,
                    f"{len(bound)} of its pods bound, minCount {group.min_count}",
                    (key, *(_pod(p) for p in bound)),
                )
            )
        if bound:
            continue
        for pod in members:
            for _, name in _claim_names(pod):
                claim = claims.get(f"{pod.metadata.namespace}/{name}") if name else None
                if (
                    claim is not None
                    and claim.is_allocated
                    and claim.is_reserved_for(pod.metadata.uid or "")
                ):
                    out.append(
                        Violation(
                            GANGS_WHOLE,
                            "no pod of its gang is bound, but it holds devices",
                            (_claim(claim), _pod(pod), key),
                        )
                    )
        if len(members) >= group.min_count:
            fit = max(_gang_fits(snapshot, members, nodes) for nodes in _domains(snapshot, group))
            if fit >= group.min_count:
                out.append(
                    Violation(
                        GANGS_WHOLE,
                        f"no pod bound, but {fit} of its pods fit together (minCount "
                        f"{group.min_count})",
                        (key, *(_pod(p) for p in members)),
                    )
                )
            for pod in members:
                condition = pod.condition("PodScheduled")
                if condition is None or condition.status != "False" or not condition.message:
                    out.append(
                        Violation(
                            GANGS_WHOLE,
                            "pending in a gang of enough pods without the scheduler's reason",
                            (_pod(pod), key),
                        )
                    )
    return out


def _domains(snapshot: Snapshot, group: PodGroup) -> list[tuple[Node, ...]]:
    """The nodes a gang may go to: every node, or (a topology key) each domain's."""
    key = group.topology_key
    if key is None:
        return [snapshot.nodes]
    domains: dict[str, list[Node]] = {}
    for node in snapshot.nodes:
        value = node.metadata.labels.get(key)
        if value is not None:
            domains.setdefault(value, []).append(node)
    return [tuple(nodes) for _, nodes in sorted(domains.items())] or [()]


def gangs_in_one_domain(snapshot: Snapshot) -> list[Violation]:
    """A gang with a topology key has its bound pods on nodes of one value of it."""
    nodes = {n.metadata.name: n for n in snapshot.nodes}
    out = []
    for group in snapshot.groups:
        key = group.topology_key
        if key is None:
            continue
        values: dict[str, list[str]] = {}
        for pod in _members(snapshot, group):
            node = nodes.get(pod.spec.node_name or "")
            if node is not None:
                value = node.metadata.labels.get(key, "(none)")
                values.setdefault(value, []).append(_pod(pod))
        if len(values) > 1:
            out.append(
                Violation(
                    GANGS_IN_ONE_DOMAIN,
                    f"bound in {len(values)} domains of {key}: {', '.join(sorted(values))}",
                    (f"podgroup {group.metadata.namespace}/{group.metadata.name}",),
                )
            )
    return out


def _gang_fits(snapshot: Snapshot, members: Sequence[Pod], nodes: Sequence[Node]) -> int:
    """How many of a gang's pending pods the scheduler's own cycle places one after another
    on ``nodes`` (a domain's, for a gang with a topology key), each placement taken for the
    next (a group's claim allocated once), on the devices nobody else holds."""
    features = Features.all()
    selectors = CelSelectorEngine(CELEnvironment())
    usage = _bound_usage(snapshot)
    claims = _claims_by_namespace(snapshot)
    placed = 0
    for pod in sorted(members, key=lambda p: p.key):
        namespace = claims[pod.metadata.namespace or ""]
        resolved = resolve_claims(pod, namespace, group_claims=True)
        if isinstance(resolved, ClaimsNotReady):
            continue
        allocated = [c for ns in claims.values() for c in ns.values() if c.is_allocated]
        allocator = Allocator(
            features,
            AllocatedState.from_claims(allocated, features),
            snapshot.classes,
            snapshot.slices,
            selectors,
            share_ids=_share_ids(),
        )
        fit = run_cycle(pod, resolved, nodes, usage.usage, allocator).chosen
        if fit is None:
            continue
        placed += 1
        usage.observe(pod.key, counted_placement(pod, fit.node, pod_requests(pod)))
        for claim in resolved:
            result = fit.results.get(claim.key)
            if result is not None:
                status = claim.status.model_copy(update={"allocation": result})
                namespace[claim.metadata.name or ""] = claim.model_copy(update={"status": status})
    return placed


def group_claims(snapshot: Snapshot) -> list[Violation]:
    groups = {g.metadata.uid: g for g in snapshot.groups}
    out = []
    for claim in snapshot.claims:
        owner = generated_for_group(claim)
        for ref in claim.status.reserved_for:
            if is_group_consumer(ref) and ref.uid not in groups:
                out.append(
                    Violation(
                        GROUP_CLAIMS,
                        f"reserved for PodGroup {ref.name} ({ref.uid}), which no longer exists",
                        (_claim(claim),),
                    )
                )
            elif owner is not None and (ref.uid != owner[1] or not is_group_consumer(ref)):
                out.append(
                    Violation(
                        GROUP_CLAIMS,
                        f"made for PodGroup {owner[0]} but reserved for {ref.resource} {ref.name}",
                        (_claim(claim),),
                    )
                )
    return out


# --- processes -----------------------------------------------------------------------------


def processes(snapshot: Snapshot) -> list[Violation]:
    out = []
    for process in snapshot.processes:
        if not process.alive:
            out.append(
                Violation(
                    PROCESSES,
                    f"exited with {process.exit_code}",
                    (f"process {process.name}",),
                )
            )
        out.extend(
            Violation(PROCESSES, f"traceback in its log: {tb}", (f"process {process.name}",))
            for tb in process.tracebacks
        )
    return out


def by_invariant(violations: Sequence[Violation]) -> dict[str, list[Violation]]:
    """Every invariant (INVARIANTS' order) with its violations, empty when it holds."""
    grouped: dict[str, list[Violation]] = {name: [] for name in INVARIANTS}
    for v in violations:
        grouped[v.invariant].append(v)
    return grouped
