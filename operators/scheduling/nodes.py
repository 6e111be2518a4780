"""Node filters besides DRA, with kube-scheduler's semantics and messages.

Each filter returns None when the node passes, else a short reason in kube-scheduler's words,
so that identical reasons group into "N node(s) ..." in the unschedulable message.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any, NoReturn, Protocol

from operators.allocator.errors import InvalidNodeSelectorError
from operators.allocator.nodes import selector_matches
from operators.api.core import (
    Container,
    Node,
    NodeAllocatableResourceClaimStatus,
    Pod,
    Taint,
    Toleration,
)
from operators.api.ids import PoolID
from operators.api.quantity import Quantity
from operators.api.resource import ResourceSlice

FIT_RESOURCES = ("cpu", "memory", "ephemeral-storage")
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
#: TaintToleration's reason (1.36-1.38 name no taint: the node's taints are the node's business).
UNTOLERATED_TAINT = "node(s) had untolerated taint(s)"
# What kube-scheduler's NodeUnschedulable plugin lets a pod tolerate on a cordoned node.
UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")


def toleration_matches(toleration: Toleration, taint: Taint) -> bool:
    """core/v1 Toleration.ToleratesTaint."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    operator = toleration.operator or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.value or "") == (taint.value or "")
    return False


def untolerated_taint(node: Node, tolerations: Iterable[Toleration]) -> Taint | None:
    """The first NoSchedule/NoExecute taint of the node that no toleration matches."""
    tolerations = list(tolerations)
    for taint in node.spec.taints:
        if taint.effect not in BLOCKING_EFFECTS:
            continue
        if not any(toleration_matches(t, taint) for t in tolerations):
            return taint
    return None


def affinity_matches(pod: Pod, node: Node) -> bool:
    """spec.nodeSelector and required node affinity (terms ORed, expressions ANDed)."""
    labels = node.metadata.labels
    if any(labels.get(k) != v for k, v in pod.spec.node_selector.items()):
        return False
    affinity = pod.spec.affinity
    node_affinity = affinity.node_affinity if affinity is not None else None
    required = (
        node_affinity.required_during_scheduling_ignored_during_execution
        if node_affinity is not None
        else None
    )
    if required is None or not required.node_selector_terms:
        return True
    try:
        return selector_matches(required, node)
    except InvalidNodeSelectorError:
        return False


def _requests(container: Container) -> Mapping[str, Quantity]:
    return container.resources.requests if container.resources is not None else {}


def pod_level_resource(name: str) -> bool:
    """component-helpers' IsSupportedPodLevelResource (PodLevelResources, KEP-2837)."""
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def aggregate_containers(
    pod: Pod, of: Callable[[Container], Mapping[str, Quantity]] = _requests
) -> dict[str, Decimal]:
    """component-helpers' aggregateContainerResourcesByFn over ``of`` (requests or limits).

    Regular containers add up; init containers run one at a time, so each only needs to fit
    beside the restartable (sidecar) init containers started before it; sidecars keep running
    next to the regular containers.
    """
    total: dict[str, Decimal] = {}
    for c in pod.spec.containers:
        for name, q in of(c).items():
            total[name] = total.get(name, Decimal(0)) + q.value
    sidecars: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    for c in pod.spec.init_containers:
        requests = of(c)
        if c.restart_policy == "Always":
            for name, q in requests.items():
                sidecars[name] = sidecars.get(name, Decimal(0)) + q.value
            continue
        for name, q in requests.items():
            need = q.value + sidecars.get(name, Decimal(0))
            init_peak[name] = max(init_peak.get(name, Decimal(0)), need)
    for name, amount in sidecars.items():
        total[name] = total.get(name, Decimal(0)) + amount
    for name, peak in init_peak.items():
        total[name] = max(total.get(name, Decimal(0)), peak)
    return total


def claim_status_resources(
    statuses: Iterable[NodeAllocatableResourceClaimStatus], container: str | None = None
) -> dict[str, Decimal]:
    """component-helpers' addDRANodeAllocatableClaimResources (DRANodeAllocatableResources):
    what the pod's claims take of the node, each mapping once, each overhead once per pod plus
    once per referencing container (init containers included, whether or not they run at the
    same time: upstream's TODO). With ``container``, its GetContainerDRAAllocations: the claims
    that container references, with one per-container overhead."""
    out: dict[str, Decimal] = {}
    for status in statuses:
        if container is not None and container not in status.containers:
            continue
        for mapped in status.mapping:
            if mapped.quantity is not None:
                name = mapped.name or ""
                out[name] = out.get(name, Decimal(0)) + mapped.quantity.value
        containers = 1 if container is not None else len(status.containers)
        for overhead in status.overhead:
            amount = Decimal(0)
            if overhead.per_pod is not None:
                amount += overhead.per_pod.value
            if overhead.per_container is not None and containers:
                amount += overhead.per_container.value * containers
            name = overhead.name or ""
            out[name] = out.get(name, Decimal(0)) + amount
    return out


def pod_requests(
    pod: Pod,
    claim_statuses: Sequence[NodeAllocatableResourceClaimStatus] = (),
    *,
    of: Callable[[Container], Mapping[str, Quantity]] = _requests,
    pod_level: bool = True,
) -> dict[str, Decimal]:
    """Effective requests as kube-scheduler computes them (incl. sidecars and overhead).

    The containers' aggregate (``aggregate_containers`` over ``of``: a scorer's defaults for
    missing requests), plus what ``claim_statuses`` say the pod's claims take of the node
    (DRANodeAllocatableResources; empty with the gate off). Pod-level requests
    (``spec.resources``) replace that sum for cpu, memory and hugepages (``pod_level``: a
    scorer that skips them says so). Pod overhead comes on top.
    """
    total = aggregate_containers(pod, of)
    for name, amount in claim_status_resources(claim_statuses).items():
        total[name] = total.get(name, Decimal(0)) + amount
    if pod_level and pod.spec.resources is not None:
        for name, q in pod.spec.resources.requests.items():
            if pod_level_resource(name):
                total[name] = q.value
    for name, q in pod.spec.overhead.items():
        total[name] = total.get(name, Decimal(0)) + q.value
    return total


def bound_requests(pod: Pod, node_allocatable: bool) -> dict[str, Decimal]:
    """What a bound (or assumed) pod takes of its node: ``pod_requests`` with its
    ``nodeAllocatableResourceClaimStatuses`` when DRANodeAllocatableResources is on, as
    kube-scheduler's NodeInfo counts it (PodInfo.CalculateResource)."""
    if not node_allocatable:
        return pod_requests(pod)
    return pod_requests(pod, pod.status.node_allocatable_resource_claim_statuses)


@dataclasses.dataclass(frozen=True)
class NodeUsage:
    """What the pods already bound to a node request (kept by the controller's cache)."""

    requests: Mapping[str, Decimal] = dataclasses.field(default_factory=dict)
    pods: int = 0
    #: NodeInfo.NonZeroRequested's (millicores, bytes): what the score plugins count of those
    #: pods (a container without a cpu or memory request counts 100m / 200Mi); None: the
    #: plain requests (nominated pods add to ``requests`` only: upstream scores without them).
    nonzero: tuple[int, int] | None = None

    def nonzero_requested(self) -> tuple[int, int]:
        if self.nonzero is not None:
            return self.nonzero
        cpu, memory = self.requests.get("cpu"), self.requests.get("memory")
        return (
            math.ceil(cpu * 1000) if cpu is not None else 0,
            math.ceil(memory) if memory is not None else 0,
        )


#: node, the pod's requests, its non-zero (millicores, bytes) as the score plugins count them
Placement = tuple[str, Mapping[str, Decimal], tuple[int, int]]


def pool_nodes(slices: Iterable[ResourceSlice]) -> dict[PoolID, str | None]:
    """Each pool's node, when every slice of the pool is published for that one node; None:
    its devices may be allocated elsewhere (network-attached, per-device node selection)."""
    found: dict[PoolID, str | None] = {}
    for s in slices:
        pool, node = s.pool_id, s.spec.node_name or None
        found[pool] = node if found.get(pool, node) == node else None
    return found


class UsageJournal:
    """The nodes whose usage changed, numbered in order: which changed since a version without
    comparing every node (``NodeOrder`` at 5,000 nodes). Written on the event loop; read from a
    cycle's thread, which sees the log through one atomic read of ``_log``."""

    KEEP = 32768  # entries kept after a trim; a reader further behind compares every node

    def __init__(self) -> None:
        self._log: tuple[int, list[str]] = (0, [])  # (version of the first entry, entries)

    @property
    def version(self) -> int:
        start, names = self._log
        return start + len(names)

    def add(self, node: str) -> None:
        start, names = self._log
        names.append(node)
        if len(names) > 2 * self.KEEP:
            self._log = (start + len(names) - self.KEEP, names[-self.KEEP :])

    def since(self, version: int, until: int) -> list[str] | None:
        """The nodes changed from ``version`` up to ``until``; None: no longer known."""
        start, names = self._log
        if version < start or until - start > len(names) or version > until:
            return None
        return names[version - start : until - start]


class UsageSnapshot(dict[str, NodeUsage]):
    """Node usage as the tracker had it at ``version`` of its ``journal``, read-only;
    ``overlaid``: nodes whose entry is not the tracker's (nominated pods counted there).
    Any other mapping (a copy, a group's what-if) says nothing of what changed."""

    __slots__ = ("journal", "overlaid", "version")

    def __init__(
        self,
        usage: Mapping[str, NodeUsage],
        journal: UsageJournal,
        version: int,
        overlaid: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__(usage)
        self.journal = journal
        self.version = version
        self.overlaid = overlaid

    def with_entries(self, entries: Mapping[str, NodeUsage]) -> UsageSnapshot:
        if not entries:
            return self
        return UsageSnapshot(
            {**self, **entries}, self.journal, self.version, self.overlaid | entries.keys()
        )

    def changed_since(self, version: int) -> set[str] | None:
        """Nodes whose entry may differ from the snapshot at ``version`` (an earlier one of
        the same journal, with that one's ``overlaid``); None: unknown, compare them all."""
        names = self.journal.since(version, self.version)
        return None if names is None else {*names, *self.overlaid}

    def _read_only(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("a usage snapshot is read-only: copy it with dict()")

    __setitem__ = __delitem__ = update = pop = popitem = setdefault = clear = _read_only
    __ior__ = _read_only


class UsageTracker:
    """NodeUsage of every node as running totals, like kube-scheduler's NodeInfo cache.

    Summing the requests of every bound pod for every cycle made a cycle O(bound pods).
    A pod counts where the cache shows it bound, else where this scheduler assumed it (its
    binding in flight, or done but not yet seen by the watch).
    """

    def __init__(self) -> None:
        self._observed: dict[Hashable, Placement] = {}
        self._assumed: dict[Hashable, Placement] = {}
        self._totals: dict[str, dict[str, Decimal]] = {}
        self._pods: dict[str, int] = {}
        self._nonzero: dict[str, tuple[int, int]] = {}
        self.usage: dict[str, NodeUsage] = {}
        self.journal = UsageJournal()

    def snapshot(self) -> UsageSnapshot:
        """Every node's usage now, with what lets ``NodeOrder`` re-rank only changed nodes."""
        return UsageSnapshot(self.usage, self.journal, self.journal.version)

    def observe(self, key: Hashable, placement: Placement | None) -> None:
        """The cache shows the pod bound there (which ends an assumption), or not bound yet."""
        before = self._effective(key)
        if placement is None:
            self._observed.pop(key, None)
        else:
            self._observed[key] = placement
            self._assumed.pop(key, None)
        self._move(before, self._effective(key))

    def assume(self, key: Hashable, placement: Placement | None) -> None:
        """This scheduler placed the pod there (None: the placement was undone)."""
        before = self._effective(key)
        if placement is None:
            self._assumed.pop(key, None)
        else:
            self._assumed[key] = placement
        self._move(before, self._effective(key))

    def forget(self, key: Hashable) -> None:
        """The pod is gone or finished: it uses nothing anywhere."""
        before = self._effective(key)
        self._observed.pop(key, None)
        self._assumed.pop(key, None)
        self._move(before, None)

    def forget_assumed(self) -> None:
        for key in list(self._assumed):
            self.assume(key, None)

    def node_of(self, key: Hashable) -> str | None:
        """The node where the pod counts, if any."""
        placement = self._effective(key)
        return placement[0] if placement is not None else None

    def _effective(self, key: Hashable) -> Placement | None:
        return self._observed.get(key) or self._assumed.get(key)

    def _move(self, before: Placement | None, after: Placement | None) -> None:
        if before == after:
            return
        for placement, sign in ((before, -1), (after, 1)):
            if placement is None:
                continue
            node, requests, (cpu, memory) = placement
            totals = self._totals.setdefault(node, {})
            for name, value in requests.items():
                totals[name] = totals.get(name, Decimal(0)) + sign * value
            self._pods[node] = self._pods.get(node, 0) + sign
            before_cpu, before_memory = self._nonzero.get(node, (0, 0))
            nonzero = (before_cpu + sign * cpu, before_memory + sign * memory)
            self._nonzero[node] = nonzero
            if self._pods[node] <= 0:
                del self._pods[node], self._totals[node], self._nonzero[node]
                self.usage.pop(node, None)
            else:
                self.usage[node] = NodeUsage(dict(totals), self._pods[node], nonzero)
            self.journal.add(node)


def is_scalar_resource(name: str) -> bool:
    """kube-scheduler's scalar resources: extended, hugepages, prefixed native, volumes."""
    return "/" in name or name.startswith(("hugepages-", "attachable-volumes-"))


def insufficient_resources(
    node: Node,
    requests: Mapping[str, Decimal],
    usage: NodeUsage,
    delegated: Collection[str] = (),
) -> list[str]:
    """kube-scheduler's NodeResourcesFit reasons ("Insufficient cpu", "Too many pods").

    ``delegated``: extended resources that devices serve on this node (KEP-5004): the
    DynamicResources filter decides those, not the node's allocatable."""
    reasons = []
    allocatable = node.status.allocatable
    pods_allowed = allocatable.get("pods")
    if pods_allowed is not None and usage.pods + 1 > pods_allowed.value:
        reasons.append("Too many pods")
    scalar = sorted(n for n in requests if is_scalar_resource(n) and n not in delegated)
    for name in (*FIT_RESOURCES, *scalar):
        want = requests.get(name, Decimal(0))
        if want <= 0:
            continue
        have = allocatable.get(name)
        free = (have.value if have is not None else Decimal(0)) - usage.requests.get(
            name, Decimal(0)
        )
        if want > free:
            reasons.append(f"Insufficient {name}")
    return reasons


class NodeFilters(Protocol):
    """The default profile's other plugins for one pod (``pod_filters.PodFilters``), each
    side of NodeResourcesFit in upstream's order."""

    def before_fit(self, node: Node) -> str | None: ...

    def after_fit(self, node: Node) -> str | None: ...


def node_failure(
    pod: Pod,
    node: Node,
    requests: Mapping[str, Decimal],
    usage: NodeUsage,
    delegated: Collection[str] = (),
    filters: NodeFilters | None = None,
) -> str | None:
    """The first non-DRA reason this node cannot take the pod, in kube-scheduler's words
    (``delegated``: as for ``insufficient_resources``; ``filters``: the pod's other plugins,
    ``pod_filters``, each at its place in upstream's order)."""
    # No readiness check: kube-scheduler has none (1.36-1.38). A node that is not ready gets
    # the node lifecycle controller's not-ready/unreachable taints, which TaintToleration reads.
    if node.spec.unschedulable and not any(
        toleration_matches(t, UNSCHEDULABLE_TAINT) for t in pod.spec.tolerations
    ):
        return "node(s) were unschedulable"
    # kube-scheduler's filter order: NodeUnschedulable, TaintToleration, NodeAffinity, Fit.
    if untolerated_taint(node, pod.spec.tolerations) is not None:
        return UNTOLERATED_TAINT
    if not affinity_matches(pod, node):
        return "node(s) didn't match Pod's node affinity/selector"
    if filters is not None:
        reason = filters.before_fit(node)
        if reason is not None:
            return reason
    resources = insufficient_resources(node, requests, usage, delegated)
    if resources:
        return ", ".join(resources)
    if filters is not None:
        return filters.after_fit(node)
    return None
