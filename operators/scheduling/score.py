"""How a feasible node is scored: kube-scheduler's default profile, plus one plugin of kopf-dra's.

The plugins and weights are upstream's default profile of the cluster's release
(``plugins.scores.DEFAULT_WEIGHTS``): TaintToleration, NodeAffinity, NodeResourcesFit,
VolumeBinding, PodTopologySpread, InterPodAffinity, DynamicResources (the positions of the
``firstAvailable`` alternatives chosen, KEP-4816), BalancedAllocation, ImageLocality; each
normalised over the feasible nodes where upstream normalises, multiplied by its weight and
summed (``plugins.scores.combine``). kopf-dra adds ``ReadyDevices`` (KEP-5007: the share of the
pod's allocated devices that wait for no binding condition, so a node whose devices are ready
binds sooner), weight ``--ready-devices-weight`` (1; 0 turns it off). Its score is the same on
every node when no device has binding conditions, so it changes no upstream choice then. The
highest total wins; a tie goes to the first node by name (upstream picks among ties at random).

Best-first search (``cycle.run_cycle(best_only=True)``) visits nodes by an upper bound of their
total known before allocating: the resource scores (Fit and BalancedAllocation, exact, kept
sorted across cycles by ``NodeOrder``) plus the most each other plugin may add
(``CycleScorer.headroom``); the visit stops once a fit's total beats every bound left. That is
exact only where no normalisation depends on which nodes turn out feasible: when the pod's
preferred node affinity, untolerated PreferNoSchedule taints, pod affinity scores or soft
topology spread (its own, or the system defaults for a pod its Services or controller select)
make those plugins differ between nodes, every node is visited
(``CycleScorer.full_scan``); DynamicResources' normalisation is settled once a fit got every
first choice (the most any node can score). Upstream scores a sample of the feasible nodes on
clusters of 100 nodes or more (``percentageOfNodesToScore``); kopf-dra scores them all.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from typing import Final, Literal

from operators.allocator.features import V1_37, V1_38
from operators.api.core import Node, Pod
from operators.api.features import Release
from operators.api.resource import AllocationResult, ResourceClaim
from operators.scheduling.nodes import NodeUsage, UsageSnapshot
from operators.scheduling.plugins import interpodaffinity, podtopologyspread, volumebinding
from operators.scheduling.plugins.scores import (
    BALANCED_ALLOCATION,
    DEFAULT_WEIGHTS,
    DYNAMIC_RESOURCES,
    IMAGE_LOCALITY,
    INTER_POD_AFFINITY,
    MAX_NODE_SCORE,
    NODE_AFFINITY,
    NODE_RESOURCES_FIT,
    POD_TOPOLOGY_SPREAD,
    TAINT_TOLERATION,
    VOLUME_BINDING,
    PreferredTerm,
    Strategy,
    allocatable_ints,
    balanced_allocation_score,
    combine,
    default_normalize,
    fit_score,
    image_locality_score,
    image_sizes,
    nonzero_requests,
    plain_requests,
    preferred_score,
    preferred_terms,
    resource_ints,
    taint_toleration_normalize,
    taint_toleration_score,
)
from operators.scheduling.pod_filters import PluginSwitches
from operators.scheduling.snapshot import Snapshot

ScorePolicy = Literal["least-allocated", "most-allocated"]
POLICIES: tuple[ScorePolicy, ...] = ("least-allocated", "most-allocated")
#: (minus the total, node name): smaller first, so sorting keys puts the best node first.
ScoreKey = tuple[int, str]
#: kopf-dra's own score plugin (see the module docstring).
READY_DEVICES: Final = "ReadyDevices"
#: resourceapi.FirstAvailableDeviceRequestMaxSize: DynamicResources' score of a first choice.
FIRST_AVAILABLE_MAX: Final = 8


@dataclasses.dataclass(frozen=True)
class Scoring:
    """The score plugins' configuration: the Fit strategy (``--score-policy``), kopf-dra's
    ReadyDevices weight, and what the release and its gates switch in the plugins (the
    filters' switches: one source for both)."""

    policy: ScorePolicy = "least-allocated"
    ready_devices: int = 1
    plugins: PluginSwitches = dataclasses.field(
        default_factory=lambda: PluginSwitches(release=V1_37)
    )

    @property
    def release(self) -> Release:
        return self.plugins.release

    @functools.cached_property
    def weights(self) -> Mapping[str, int]:
        return {**DEFAULT_WEIGHTS[str(self.release)], READY_DEVICES: self.ready_devices}

    @property
    def strategy(self) -> Strategy:
        return "LeastAllocated" if self.policy == "least-allocated" else "MostAllocated"


DEFAULT_SCORING: Final = Scoring()


@dataclasses.dataclass(frozen=True, slots=True)
class Score:
    """A feasible node's total (higher is better) and what it is made of."""

    points: int
    #: Sum of the positions of the firstAvailable alternatives chosen (0: all first choices).
    rank: int
    #: Allocated devices that wait for binding conditions before the pod may bind.
    binding_devices: int
    node: str
    #: Each plugin's normalised score (before its weight).
    plugins: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def key(self) -> ScoreKey:
        return (-self.points, self.node)


@dataclasses.dataclass(frozen=True)
class ResourceScorer:
    """NodeResourcesFit's and BalancedAllocation's weighted scores of one pod shape: the part
    of a total that needs no allocation and no other node (``NodeOrder`` keeps it sorted)."""

    nonzero: tuple[tuple[str, int], ...]
    plain: tuple[tuple[str, int], ...]
    strategy: Strategy
    fit_weight: int
    balanced_weight: int

    @classmethod
    def of(cls, pod: Pod, scoring: Scoring) -> ResourceScorer:
        weights = scoring.weights
        return cls(
            tuple(
                sorted(nonzero_requests(pod, pod_level_resources=scoring.release >= V1_38).items())
            ),
            tuple(sorted(plain_requests(pod).items())),
            scoring.strategy,
            weights[NODE_RESOURCES_FIT],
            weights[BALANCED_ALLOCATION],
        )

    def scores(self, node: Node, usage: NodeUsage) -> tuple[int, int]:
        """(Fit, BalancedAllocation) of the node with ``usage``."""
        allocatable = allocatable_ints(node)
        requested = resource_ints(usage.requests)
        nonzero = dict(requested)
        nonzero["cpu"], nonzero["memory"] = usage.nonzero_requested()
        fit = fit_score(dict(self.nonzero), allocatable, nonzero, self.strategy)
        balanced = balanced_allocation_score(dict(self.plain), allocatable, requested)
        return fit, balanced

    def points(self, node: Node, usage: NodeUsage) -> int:
        fit, balanced = self.scores(node, usage)
        return self.fit_weight * fit + self.balanced_weight * balanced


@dataclasses.dataclass(frozen=True)
class NodeIndex:
    """What the scores read of all the nodes, built once per node list (``NodeOrder.index``):
    ImageLocality's image sizes per node, how many nodes have each image and its largest size
    (what no node's score can exceed); the nodes with a PreferNoSchedule taint
    (TaintToleration differs between nodes only through them)."""

    sizes: Mapping[str, Mapping[str, int]]
    counts: Mapping[str, int]
    total: int
    prefer_no_schedule: Sequence[Node]
    largest: Mapping[str, int] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, nodes: Sequence[Node]) -> NodeIndex:
        sizes: dict[str, Mapping[str, int]] = {}
        counts: dict[str, int] = {}
        largest: dict[str, int] = {}
        tainted = []
        for node in nodes:
            if any(t.effect == "PreferNoSchedule" for t in node.spec.taints):
                tainted.append(node)
            if not node.status.images:
                continue
            of_node = image_sizes(node)
            sizes[node.metadata.name or ""] = of_node
            for name, size in of_node.items():
                counts[name] = counts.get(name, 0) + 1
                largest[name] = max(size, largest.get(name, 0))
        return cls(sizes, counts, len(nodes), tuple(tainted), largest)


def dra_score(claims: Sequence[ResourceClaim], results: Mapping[str, AllocationResult]) -> int:
    """DynamicResources' Score (computeScore): for every request with firstAvailable, 8 minus
    the position of the alternative allocated, over the claims allocated before and now."""
    score = 0
    for claim in claims:
        allocation = results.get(claim.key) or claim.status.allocation
        if allocation is None:
            continue
        chosen = {r.request for r in allocation.devices.results if "/" in (r.request or "")}
        for request in claim.spec.devices.requests:
            for i, sub in enumerate(request.first_available):
                if f"{request.name}/{sub.name}" in chosen:
                    score += FIRST_AVAILABLE_MAX - i
    return score


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


def ready_devices_score(results: Mapping[str, AllocationResult]) -> int:
    """ReadyDevices: the share of the devices allocated here that wait for no binding
    condition, 0..100 (100 when none is allocated)."""
    total = sum(len(a.devices.results) for a in results.values())
    if total == 0:
        return MAX_NODE_SCORE
    return MAX_NODE_SCORE * (total - binding_devices(results)) // total


@dataclasses.dataclass
class Candidate:
    """What a cycle knows of a fit before the scores are normalised over all fits."""

    node: Node
    claims: Sequence[ResourceClaim]  # all the pod's claims on this node (its special one too)
    results: Mapping[str, AllocationResult]
    volumes: volumebinding.PodVolumes | None
    known: int = 0  # the weighted scores that need no normalisation
    dra: int = 0  # DynamicResources' raw score
    resources: tuple[int, int] = (0, 0)  # NodeResourcesFit's and BalancedAllocation's

    @property
    def name(self) -> str:
        return self.node.metadata.name or ""


class CycleScorer:
    """One pod's scores in one cycle: what each fit is worth as it is found (for best-first
    search), and the totals once every fit is known (``finish``)."""

    def __init__(
        self,
        pod: Pod,
        claims: Sequence[ResourceClaim],
        scoring: Scoring,
        snapshot: Snapshot | None,
        index: NodeIndex,
        resources: ResourceScorer,
    ) -> None:
        self.pod = pod
        self.scoring = scoring
        self.weights = scoring.weights
        self.snapshot = snapshot
        self.index = index
        self.resources = resources
        self.preferred: tuple[PreferredTerm, ...] | None = preferred_terms(pod)
        self.affinity = (
            interpodaffinity.pre_score(
                pod, snapshot, keep_namespace_selector=scoring.release < V1_37
            )
            if snapshot is not None
            else None
        )
        own = pod.spec.topology_spread_constraints
        soft_spread = any(c.when_unsatisfiable == podtopologyspread.SCHEDULE_ANYWAY for c in own)
        # The system-default constraints (ScheduleAnyway, by hostname and zone) for a pod
        # without its own, over the peers its Services and controller select.
        self.spread_selector = None
        if snapshot is not None and not own:
            peers = snapshot.peers_of(pod)
            self.spread_selector = podtopologyspread.default_selector(
                pod,
                peers.services,
                peers.replication_controllers,
                peers.replica_sets,
                peers.stateful_sets,
            )
        self.spread = snapshot is not None and (soft_spread or self.spread_selector is not None)
        comparison = scoring.plugins.taint_comparison_operators
        self.taints = any(
            taint_toleration_score(pod, n, comparison=comparison) for n in index.prefer_no_schedule
        )
        #: Normalised plugins that may differ between nodes: every node is visited.
        self.full_scan = bool(self.preferred) or self.taints or self.spread or bool(self.affinity)
        # DynamicResources: what a node scores when every request gets its first choice, and
        # whether any node can score less.
        fixed = dra_score([c for c in claims if c.is_allocated], {})
        open_requests = [r for c in claims if not c.is_allocated for r in c.spec.devices.requests]
        self.dra_best = fixed + FIRST_AVAILABLE_MAX * sum(
            1 for r in open_requests if r.first_available
        )
        self.dra_varies = any(len(r.first_available) > 1 for r in open_requests)
        self.dra_settled = not self.dra_varies
        self.headroom = (
            self.weights[READY_DEVICES] * MAX_NODE_SCORE
            + (self.weights[DYNAMIC_RESOURCES] * MAX_NODE_SCORE if self.dra_varies else 0)
            # a node with the largest copy of each image: none scores more (the score grows
            # with the sizes present)
            + self.weights[IMAGE_LOCALITY] * self._image_score(index.largest)
            + (self.weights[VOLUME_BINDING] * MAX_NODE_SCORE if self._volumes() else 0)
        )
        """The most the plugins beyond Fit and BalancedAllocation may add to a node's
        total in the visit's comparisons (plugins equal on every node count 0)."""

    def _volumes(self) -> bool:
        """VolumeBinding may score above 0 on some node: a claim of the pod's is not bound
        yet (a bound one has nothing to bind, and scores 0 everywhere)."""
        if not self.scoring.plugins.storage_capacity_scoring or self.snapshot is None:
            return False
        pod = self.pod
        namespace, name = pod.metadata.namespace or "", pod.metadata.name or ""
        claims = self.snapshot.storage.claims
        for volume in pod.spec.volumes:
            claim = volume.claim_name(name)
            if claim is None:
                continue
            found = claims.get(f"{namespace}/{claim}")
            if found is None or not found.spec.volume_name:
                return True
        return False

    def image_score(self, node: Node) -> int:
        return self._image_score(self.index.sizes.get(node.metadata.name or "", {}))

    def _image_score(self, sizes: Mapping[str, int]) -> int:
        if not sizes:
            return 0  # below ImageLocality's threshold whatever the pod's images
        return image_locality_score(
            self.pod,
            sizes,
            self.index.total,
            self.index.counts,
            count_image_volumes=self.scoring.release >= V1_37,
        )

    def volume_score(self, volumes: volumebinding.PodVolumes | None) -> int:
        found = volumebinding.score(
            volumes, storage_capacity_scoring=self.scoring.plugins.storage_capacity_scoring
        )
        return found or 0

    def candidate(
        self,
        node: Node,
        usage: NodeUsage,
        claims: Sequence[ResourceClaim],
        results: Mapping[str, AllocationResult],
        volumes: volumebinding.PodVolumes | None,
    ) -> Candidate:
        """A fit with the scores known without the other fits."""
        w = self.weights
        found = Candidate(node, claims, results, volumes)
        found.dra = dra_score(claims, results) if claims else 0
        if found.dra == self.dra_best:
            self.dra_settled = True
        found.resources = fit, balanced = self.resources.scores(node, usage)
        found.known = (
            self.resources.fit_weight * fit
            + self.resources.balanced_weight * balanced
            + w[IMAGE_LOCALITY] * self.image_score(node)
            + w[VOLUME_BINDING] * self.volume_score(volumes)
            + w[READY_DEVICES] * ready_devices_score(results)
        )
        return found

    def least(self, found: Candidate) -> ScoreKey:
        """The least a fit's total can be in the visit's comparisons (``headroom``'s terms):
        DynamicResources' normalised by the most any node can score."""
        dra = 0
        if self.dra_varies and self.dra_best:
            dra = self.weights[DYNAMIC_RESOURCES] * (MAX_NODE_SCORE * found.dra // self.dra_best)
        return (-(found.known + dra), found.name)

    def bound(self, resource_key: ScoreKey) -> ScoreKey:
        """The most a node not visited yet can reach, from its resource scores' key."""
        return (resource_key[0] - self.headroom, resource_key[1])

    def finish(self, found: Sequence[Candidate]) -> dict[str, Score]:
        """Every fit's total: the plugins normalised over the fits found, weighted, summed."""
        if not found:
            return {}
        pod, w = self.pod, self.weights
        comparison = self.scoring.plugins.taint_comparison_operators
        per_plugin: dict[str, Mapping[str, int]] = {
            TAINT_TOLERATION: taint_toleration_normalize(
                {f.name: taint_toleration_score(pod, f.node, comparison=comparison) for f in found}
            ),
            DYNAMIC_RESOURCES: default_normalize({f.name: f.dra for f in found}, reverse=False),
        }
        if self.preferred:
            per_plugin[NODE_AFFINITY] = default_normalize(
                {f.name: preferred_score(self.preferred, f.node) for f in found}, reverse=False
            )
        if self.affinity is not None:
            per_plugin[INTER_POD_AFFINITY] = interpodaffinity.normalize(
                {f.name: interpodaffinity.score(self.affinity, f.node) for f in found}
            )
        if self.spread and self.snapshot is not None:
            state = podtopologyspread.pre_score(
                pod,
                self.snapshot,
                [f.node for f in found],
                default_selector=self.spread_selector,
                match_label_keys=self.scoring.plugins.spread_match_label_keys,
                taint_comparison_operators=comparison,
                count_empty_selector=self.scoring.release >= V1_38,
            )
            if state is not None:
                per_plugin[POD_TOPOLOGY_SPREAD] = podtopologyspread.score_nodes(
                    state, pod, [f.node for f in found]
                )
        per_plugin[NODE_RESOURCES_FIT] = {f.name: f.resources[0] for f in found}
        per_plugin[BALANCED_ALLOCATION] = {f.name: f.resources[1] for f in found}
        per_plugin[IMAGE_LOCALITY] = {f.name: self.image_score(f.node) for f in found}
        if self.scoring.plugins.storage_capacity_scoring:
            per_plugin[VOLUME_BINDING] = {f.name: self.volume_score(f.volumes) for f in found}
        if w[READY_DEVICES]:
            per_plugin[READY_DEVICES] = {f.name: ready_devices_score(f.results) for f in found}
        totals = combine(per_plugin, w)
        out = {}
        for f in found:
            out[f.name] = Score(
                totals.get(f.name, 0),
                subrequest_rank(f.claims, f.results),
                binding_devices(f.results),
                f.name,
                {p: scores[f.name] for p, scores in per_plugin.items() if f.name in scores},
            )
        return out


class _Ranking:
    """One request shape's nodes, sorted by key, and what each key was computed from."""

    def __init__(self) -> None:
        self.keys: list[ScoreKey] = []  # sorted
        self.nodes: list[Node] = []  # in the order of ``keys``
        self.basis: dict[str, tuple[Node, NodeUsage | None, ScoreKey]] = {}
        self.listed: Sequence[Node] | None = None  # the node list last ranked
        # The usage snapshot last ranked, when it was one: its changes since are the tracker's.
        self.seen: UsageSnapshot | None = None

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


def resource_key(node: Node, usage: NodeUsage | None, scorer: ResourceScorer) -> ScoreKey:
    return (-scorer.points(node, usage or NodeUsage()), node.metadata.name or "")


class NodeOrder:
    """Nodes by their resource scores (``ResourceScorer``), best first, kept across cycles;
    and the nodes' ``NodeIndex``.

    Ranking every node for every pod cost O(n log n) work per cycle, most of a cycle at 5,000
    nodes. A node's resource scores change only when the node does (a new object per
    resourceVersion) or its usage does (a new ``NodeUsage`` whenever a pod lands or leaves),
    so each request shape keeps its ranking and re-ranks only the nodes whose objects changed,
    found by identity in one pass. Pure and single-threaded: one cycle at a time uses it.
    """

    def __init__(self, shapes: int = 16) -> None:
        self.shapes = shapes
        self._rankings: OrderedDict[Hashable, _Ranking] = OrderedDict()
        self._index: tuple[Sequence[Node], NodeIndex] | None = None

    def index(self, nodes: Sequence[Node]) -> NodeIndex:
        """The index of ``nodes``, rebuilt when the node list is another."""
        if self._index is None or self._index[0] is not nodes:
            self._index = (nodes, NodeIndex.of(nodes))
        return self._index[1]

    def ranked(
        self,
        nodes: Sequence[Node],
        usage: Mapping[str, NodeUsage],
        scorer: ResourceScorer,
    ) -> tuple[list[ScoreKey], list[Node]]:
        """Every node's key, best first, and the nodes in that order (the caller reads,
        never changes, both lists). Given the tracker's snapshots (``UsageSnapshot``) of the
        same node list, only the nodes changed since the last one are looked at."""
        ranking = self._rankings.pop(scorer, None) or _Ranking()
        self._rankings[scorer] = ranking
        while len(self._rankings) > self.shapes:
            self._rankings.popitem(last=False)
        basis = ranking.basis
        seen, ranking.seen = ranking.seen, usage if isinstance(usage, UsageSnapshot) else None
        if not basis:  # a new shape (or the first cycle): one sort, not n insertions
            entries = []
            for node in nodes:
                name = node.metadata.name or ""
                node_usage = usage.get(name)
                key = resource_key(node, node_usage, scorer)
                basis[name] = (node, node_usage, key)
                entries.append((key, node))
            entries.sort(key=lambda entry: entry[0])
            ranking.keys = [key for key, _ in entries]
            ranking.nodes = [node for _, node in entries]
            ranking.listed = nodes
            return ranking.keys, ranking.nodes
        changed = (
            usage.changed_since(seen.version)
            if isinstance(usage, UsageSnapshot)
            and seen is not None
            and seen.journal is usage.journal
            and nodes is ranking.listed
            else None
        )
        if changed is not None:
            assert seen is not None
            for name in changed | seen.overlaid:
                known = basis.get(name)
                if known is not None:
                    self._rerank(ranking, name, known[0], usage.get(name), scorer)
            return ranking.keys, ranking.nodes
        listed: set[str] | None = None if nodes is ranking.listed else set()
        for node in nodes:
            name = node.metadata.name or ""
            if listed is not None:
                listed.add(name)
            self._rerank(ranking, name, node, usage.get(name), scorer)
        if listed is not None:
            for gone in [n for n in basis if n not in listed]:
                ranking.move(gone, None, None)
                del basis[gone]
            ranking.listed = nodes
        return ranking.keys, ranking.nodes

    @staticmethod
    def _rerank(
        ranking: _Ranking,
        name: str,
        node: Node,
        node_usage: NodeUsage | None,
        scorer: ResourceScorer,
    ) -> None:
        """``name``'s place, moved if its node object or usage is another than last ranked."""
        known = ranking.basis.get(name)
        if known is not None and known[0] is node and known[1] is node_usage:
            return
        key = resource_key(node, node_usage, scorer)
        ranking.move(name, node, key)
        ranking.basis[name] = (node, node_usage, key)
