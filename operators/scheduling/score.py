"""How a feasible node is scored, and the best score a node can still reach before allocating.

Scores compare field by field, smaller first (a dataclass with ``order=True``):

1. ``rank``: the sum of the positions of the ``firstAvailable`` alternatives chosen, 0 when
   every prioritized request got its first choice (KEP-4816: a node that gives a better
   alternative wins; upstream's DynamicResources score orders nodes the same way);
2. ``binding_devices``: devices that must wait for binding conditions (KEP-5007: a node whose
   devices are ready now binds sooner);
3. ``utilisation``: the mean requested share of cpu and memory once the pod is placed,
   negated when packing (most-allocated), so smaller is always better;
4. ``node``: the name, so that ties break the same way every time.

``upper_bound`` is the best score a node can reach before the allocator has run: rank and
binding devices can only grow from 0, and utilisation does not depend on the devices chosen.
Best-first search (``cycle.run_cycle(best_only=True)``) visits nodes by this bound and stops
once a fit beats every bound left, so the bound must never be worse than the node's real
score. A new rule goes into ``Score`` as a field and into both constructors below; the test
that best-first equals a full scan runs over every policy.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from decimal import Decimal
from typing import Literal

from operators.api.core import Node
from operators.api.resource import AllocationResult, ResourceClaim
from operators.scheduling.nodes import NodeUsage

ScorePolicy = Literal["least-allocated", "most-allocated"]
POLICIES: tuple[ScorePolicy, ...] = ("least-allocated", "most-allocated")
ScoreKey = tuple[int, int, Decimal, str]


@dataclasses.dataclass(frozen=True, order=True, slots=True)
class Score:
    """Smaller is better; see the module docstring for each field."""

    rank: int
    binding_devices: int
    utilisation: Decimal
    node: str

    def key(self) -> ScoreKey:
        """The fields as a tuple: what sorting many nodes compares (C-speed comparisons)."""
        return (self.rank, self.binding_devices, self.utilisation, self.node)

    @classmethod
    def of(
        cls,
        node: Node,
        usage: NodeUsage,
        requests: Mapping[str, Decimal],
        claims: Sequence[ResourceClaim],
        results: Mapping[str, AllocationResult],
        policy: ScorePolicy,
    ) -> Score:
        """The score of a node where ``claims`` got ``results``."""
        return cls(
            subrequest_rank(claims, results),
            binding_devices(results),
            _signed(utilisation(node, usage, requests), policy),
            node.metadata.name or "",
        )

    @classmethod
    def upper_bound(
        cls, node: Node, usage: NodeUsage, requests: Mapping[str, Decimal], policy: ScorePolicy
    ) -> Score:
        """The best score ``node`` can reach, whatever the allocator chooses there."""
        return cls(
            0, 0, _signed(utilisation(node, usage, requests), policy), node.metadata.name or ""
        )


def _signed(value: Decimal, policy: ScorePolicy) -> Decimal:
    return value if policy == "least-allocated" else -value


def subrequest_rank(
    claims: Sequence[ResourceClaim], results: Mapping[str, AllocationResult]
) -> int:
    """Sum of the positions of the firstAvailable alternatives chosen (0 = all first choices)."""
    rank = 0
    by_key = {c.key: c for c in claims}
    for key, allocation in results.items():
        claim = by_key[key]
        for r in allocation.devices.results:
            main, _, sub = (r.request or "").partition("/")
            request = claim.request(main) if sub else None
            if request is None:
                continue
            names = [s.name for s in request.first_available]
            if sub in names:
                rank += names.index(sub)
    return rank


def binding_devices(results: Mapping[str, AllocationResult]) -> int:
    """Allocated devices that wait for binding conditions before the pod may bind."""
    return sum(
        1
        for allocation in results.values()
        for r in allocation.devices.results
        if r.binding_conditions
    )


def utilisation(node: Node, usage: NodeUsage, requests: Mapping[str, Decimal]) -> Decimal:
    """Mean requested fraction of cpu and memory after placing the pod."""
    if not requests and not usage.requests:
        return Decimal(0)  # nothing requested anywhere (run for every node of every cycle)
    fractions = []
    for name in ("cpu", "memory"):
        have = node.status.allocatable.get(name)
        if have is None or have.value <= 0:
            continue
        used = usage.requests.get(name, Decimal(0)) + requests.get(name, Decimal(0))
        fractions.append(used / have.value)
    return sum(fractions, Decimal(0)) / len(fractions) if fractions else Decimal(0)


class _Ranking:
    """One request shape's nodes, sorted by bound, and what each bound was computed from."""

    def __init__(self) -> None:
        self.keys: list[ScoreKey] = []  # sorted
        self.nodes: list[Node] = []  # in the order of ``keys``
        self.basis: dict[str, tuple[Node, NodeUsage | None, ScoreKey]] = {}
        self.listed: Sequence[Node] | None = None  # the node list last ranked

    def move(self, name: str, node: Node | None, key: ScoreKey | None) -> None:
        """Take ``name``'s old place out; put ``node`` in at ``key`` (None: gone)."""
        old = self.basis.get(name)
        if old is not None:
            at = bisect.bisect_left(self.keys, old[2])
            del self.keys[at], self.nodes[at]
        if node is not None and key is not None:
            at = bisect.bisect_left(self.keys, key)
            self.keys.insert(at, key)
            self.nodes.insert(at, node)


class NodeOrder:
    """Nodes by the best score they can reach (``Score.upper_bound``), kept across cycles.

    Ranking every node for every pod cost O(n log n) Decimal work per cycle, most of a cycle
    at 5,000 nodes. A node's bound changes only when the node does (a new object per
    resourceVersion) or its usage does (a new ``NodeUsage`` whenever a pod lands or leaves), so
    each request shape keeps its ranking and re-ranks only the nodes whose objects changed,
    found by identity in one pass. Pure and single-threaded: one cycle at a time uses it.
    """

    def __init__(self, shapes: int = 16) -> None:
        self.shapes = shapes
        self._rankings: OrderedDict[Hashable, _Ranking] = OrderedDict()

    def ranked(
        self,
        nodes: Sequence[Node],
        usage: Mapping[str, NodeUsage],
        requests: Mapping[str, Decimal],
        policy: ScorePolicy,
    ) -> tuple[list[ScoreKey], list[Node]]:
        """Every node's bound, best first, and the nodes in that order (the caller reads,
        never changes, both lists)."""
        shape = (policy, tuple(sorted(requests.items())))
        ranking = self._rankings.pop(shape, None) or _Ranking()
        self._rankings[shape] = ranking
        while len(self._rankings) > self.shapes:
            self._rankings.popitem(last=False)
        basis = ranking.basis
        if not basis:  # a new shape (or the first cycle): one sort, not n insertions
            entries = []
            for node in nodes:
                name = node.metadata.name or ""
                node_usage = usage.get(name)
                key = Score.upper_bound(node, node_usage or NodeUsage(), requests, policy).key()
                basis[name] = (node, node_usage, key)
                entries.append((key, node))
            entries.sort(key=lambda entry: entry[0])
            ranking.keys = [key for key, _ in entries]
            ranking.nodes = [node for _, node in entries]
            ranking.listed = nodes
            return ranking.keys, ranking.nodes
        seen: set[str] | None = None if nodes is ranking.listed else set()
        for node in nodes:
            name = node.metadata.name or ""
            node_usage = usage.get(name)
            if seen is not None:
                seen.add(name)
            known = basis.get(name)
            if known is not None and known[0] is node and known[1] is node_usage:
                continue
            key = Score.upper_bound(node, node_usage or NodeUsage(), requests, policy).key()
            ranking.move(name, node, key)
            basis[name] = (node, node_usage, key)
        if seen is not None:
            for gone in [n for n in basis if n not in seen]:
                ranking.move(gone, None, None)
                del basis[gone]
            ranking.listed = nodes
        return ranking.keys, ranking.nodes
