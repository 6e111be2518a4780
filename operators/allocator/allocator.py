"""The structured-parameters allocator: devices for every request of a pod's claims on one node.

Built once per scheduling cycle from (features, allocated state, classes, slices, selector
engine), then ``allocate(node, claims)`` per node. The search is upstream's (k8s.io/
dynamic-resource-allocation, "experimental" channel): claims, then requests, then
``firstAvailable`` entries in order; devices in pool/slice/device order; first-fit
backtracking without permutations. Same inputs give the same devices as kube-scheduler.

Outcomes: ``fits`` with one AllocationResult per claim, ``unsatisfiable`` with reasons, or
``error`` (a failure of this node: invalid pools, or an "All" request on a pool that is being
updated or invalid). Bad input raises InvalidInputError.
Nothing is persisted; the only randomness (shareIDs) comes from the injected ``share_ids``.

Modules: ``search.py`` (one call's search), ``results.py`` (AllocationResults of a successful
search), ``explain.py`` (reasons of a failed one), ``outcome.py`` (what ``allocate`` answers).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import Literal

from operators.allocator.compatibility import Members, join
from operators.allocator.errors import (
    AllocatorError,
    InvalidInputError,
    InvalidNodeSelectorError,
    InvalidPoolError,
    OutOfTimeError,
)
from operators.allocator.explain import ClaimBreakdown, breakdown, explain
from operators.allocator.features import Features
from operators.allocator.outcome import Outcome, Stats, Status
from operators.allocator.pools import Pool, counters_everywhere, gather_pools
from operators.allocator.results import allocation_result
from operators.allocator.search import Candidate, NodeView, Search
from operators.allocator.selectors import SelectorEngine
from operators.allocator.state import AllocatedState
from operators.api.core import Node
from operators.api.ids import DeviceID, PoolID
from operators.api.resource import (
    Device,
    DeviceClass,
    DeviceTaint,
    DeviceTaintRule,
    ResourceClaim,
    ResourceSlice,
)
from operators.cel import EvaluationInterrupted
from operators.cel.errors import SelectorError

Policy = Literal["first-fit", "best-fit"]

#: upstream's words when the filter timeout cuts an allocation short
TIMED_OUT = "timed out trying to allocate devices"


class NodeViewCache:
    """Per-node pools and devices, kept across scheduling cycles while the slices are the same.

    The scheduler keeps one in its dependencies and passes it to every Allocator: gathering
    and validating pools is the most expensive part of a warm call. It is keyed by the identity
    of the slice objects (held here, so identities stay valid), the node's name and labels, the
    features, the taint rules and the policy; a different slice list drops everything.
    """

    def __init__(self) -> None:
        self._slices: Sequence[ResourceSlice] = ()
        self._extra: tuple[object, ...] = ()
        self._ids: tuple[object, ...] = ()
        self._views: dict[tuple[object, ...], NodeView] = {}
        # Slices by node name, and those every node must look at (upstream's split).
        self.on_node: dict[str, list[ResourceSlice]] = {}
        self.shared: list[ResourceSlice] = []

    def generation(
        self,
        slices: Sequence[ResourceSlice],
        extra: tuple[object, ...],
        *,
        counters_everywhere: bool = True,
    ) -> None:
        """Start over unless these are the slices (and features, rules) of the last call.

        The same list object again costs nothing (the scheduler's caches hand out one list
        while nothing changed): a cycle must not be O(slices) (kubernetes#136588).
        """
        if slices is self._slices and extra == self._extra:
            return
        ids = (*map(id, slices), *extra)
        if ids != self._ids:
            self._views, self._ids = {}, ids
            self.on_node, self.shared = {}, []
            for s in slices:
                # 1.36 looks at every counter-set slice from every node; 1.37 by node name.
                if s.spec.node_name and not (counters_everywhere and s.spec.shared_counters):
                    self.on_node.setdefault(s.spec.node_name, []).append(s)
                else:
                    self.shared.append(s)
        self._slices, self._extra = slices, extra

    def get(self, key: tuple[object, ...]) -> NodeView | None:
        return self._views.get(key)

    def put(self, key: tuple[object, ...], view: NodeView) -> None:
        self._views[key] = view


class Allocator:
    """Allocates devices for claims, one node at a time, against a fixed cluster snapshot."""

    def __init__(
        self,
        features: Features,
        allocated: AllocatedState,
        classes: Iterable[DeviceClass],
        slices: Sequence[ResourceSlice],
        selectors: SelectorEngine,
        *,
        share_ids: Callable[[], str],
        taint_rules: Iterable[DeviceTaintRule] = (),
        policy: Policy = "first-fit",
        view_cache: NodeViewCache | None = None,
        out_of_time: Callable[[], bool] | None = None,
    ) -> None:
        """``out_of_time``, when given, is asked before every selector evaluation and now and
        then during the search; once it says yes, ``allocate`` raises OutOfTimeError. The
        caller owns the clock (the allocator reads none)."""
        self.features = features
        self.allocated = allocated
        self.classes = {c.metadata.name or "": c for c in classes}
        self.slices = slices
        self.selectors = selectors
        self.share_ids = share_ids
        self.policy: Policy = policy
        self.taint_rules = [r for r in taint_rules if r.spec.device_selector is not None]
        self._views = view_cache if view_cache is not None else NodeViewCache()
        self._views.generation(
            self.slices,
            (features, policy, *map(id, self.taint_rules)),
            counters_everywhere=counters_everywhere(features),
        )
        self._matches: dict[tuple[str, int], bool | SelectorError] = {}
        self._out_of_time = out_of_time
        self._available: dict[PoolID, dict[str, dict[str, Decimal]]] = {}
        self._members: dict[PoolID, dict[str, Members]] = {}

    def rebased(self, allocated: AllocatedState) -> Allocator:
        """The same allocator on another allocated state (preemption's what-ifs): views and
        selector results are kept, the counters left per pool are computed again."""
        other = copy.copy(self)
        other.allocated = allocated
        other._available = {}
        other._members = {}
        return other

    def consumes_counters(self, node: Node, devices: Iterable[DeviceID]) -> bool:
        """Whether any of these devices of ``node``'s pools draws on a shared counter set."""
        counted = self._view(node).counted
        return any(d in counted for d in devices)

    # --- per node ------------------------------------------------------------------------

    def candidates(self, node: Node) -> Sequence[Candidate]:
        """Every device of the pools ``node`` can use, in pool, slice and device order."""
        return self._view(node).devices

    def _view(self, node: Node) -> NodeView:
        """The node's pools and candidates: gathering and validating pools is the costly part of
        a warm call, so views are cached by node name and labels (NodeViewCache)."""
        name = node.metadata.name or ""
        key = (name, tuple(sorted(node.metadata.labels.items())))
        view = self._views.get(key)
        if view is not None:
            return view
        candidates = self._views.on_node.get(name, []) + self._views.shared
        try:
            pools = gather_pools(candidates, node, self.features, self.slices)
        except InvalidNodeSelectorError as e:
            raise InvalidNodeSelectorError(f"gather pool information: {e.message}") from None
        devices: list[Candidate] = []
        for pool in pools:
            if not pool.slices or not pool.usable:  # no devices: leave its check unasked
                continue
            for s in pool.slices:
                per_device = bool(s.spec.per_device_node_selection)
                for d in s.spec.devices:
                    dev_id = pool.id.device(d.name or "")
                    devices.append(
                        Candidate(
                            id=dev_id,
                            device=d,
                            slice=s,
                            pool=pool,
                            position=len(devices),
                            per_device_node_selection=per_device,
                            taints=self._taints(dev_id, d),
                            counters=tuple(
                                (
                                    use.counter_set or "",
                                    tuple(
                                        (n, c.value.value if c.value is not None else Decimal(0))
                                        for n, c in use.counters.items()
                                    ),
                                )
                                for use in d.consumes_counters
                            ),
                        )
                    )
        order = sorted(devices, key=_size_key) if self.policy == "best-fit" else devices
        view = NodeView(pools, devices, order)
        self._views.put(key, view)
        return view

    def _taints(self, dev_id: DeviceID, device: Device) -> tuple[DeviceTaint, ...]:
        extra = [
            r.spec.taint
            for r in self.taint_rules
            if r.spec.device_selector is not None and r.spec.device_selector.matches(dev_id)
        ]
        return (*device.taints, *extra)

    def available_counters(self, pool: Pool) -> dict[str, dict[str, Decimal]]:
        """Counters of a pool left after the allocated devices took theirs (cached)."""
        have = self._available.get(pool.id)
        if have is not None:
            return have
        avail = {
            name: {
                n: (c.value.value if c.value is not None else Decimal(0))
                for n, c in cs.counters.items()
            }
            for name, cs in pool.counter_sets.items()
        }
        for s in (*pool.slices, *pool.other_slices):
            for d in s.spec.devices:
                if not self.allocated.is_allocated(pool.id.device(d.name or "")):
                    continue
                for use in d.consumes_counters:
                    counters = avail.get(use.counter_set or "")
                    if counters is None:
                        continue
                    for n, c in use.counters.items():
                        if n in counters and c.value is not None:
                            counters[n] -= c.value.value
        self._available[pool.id] = avail
        return avail

    def members(self, pool: Pool) -> dict[str, Members]:
        """Per counter set of the pool, the compatibility groups of its allocated devices
        (upstream's compatibilityGroupsBaselineForPool; cached like the counters)."""
        have = self._members.get(pool.id)
        if have is not None:
            return have
        members: dict[str, Members] = {}
        for s in (*pool.slices, *pool.other_slices):
            for d in s.spec.devices:
                if not self.allocated.is_allocated(pool.id.device(d.name or "")):
                    continue
                for use in d.consumes_counters:
                    name = use.counter_set or ""
                    members[name] = join(members.get(name), frozenset(use.compatibility_groups))
        self._members[pool.id] = members
        return members

    def derived_value(self, expression: str, driver: str, device: Device) -> object:
        """A derived attribute's CEL value (1.37); the search keeps it for its call. Stops
        where the budget runs out, as selectors do."""
        self.check_time()
        try:
            return self.selectors.derived_value(
                expression, driver, device, interrupt=self._out_of_time
            )
        except EvaluationInterrupted:
            raise OutOfTimeError(TIMED_OUT) from None

    def device_matches(self, expression: str, driver: str, device: Device) -> bool:
        """Memoised CEL evaluation (errors are remembered too). A long evaluation stops where
        the budget runs out, not at its end: an expensive selector of one tenant cannot keep
        the scheduler past its turn for a device's worth of evaluation."""
        key = (expression, id(device))
        hit = self._matches.get(key)
        if hit is None:
            self.check_time()
            try:
                hit = self.selectors.device_matches(
                    expression, driver, device, interrupt=self._out_of_time
                )
            except SelectorError as e:
                hit = e
            except EvaluationInterrupted:
                raise OutOfTimeError(TIMED_OUT) from None
            self._matches[key] = hit
        if isinstance(hit, SelectorError):
            raise hit
        return hit

    def check_time(self) -> None:
        """Raise OutOfTimeError once the caller's budget is spent."""
        if self._out_of_time is not None and self._out_of_time():
            raise OutOfTimeError(TIMED_OUT)

    def breakdown(self, node: Node, claims: Sequence[ResourceClaim]) -> list[ClaimBreakdown]:
        """Device by device, why each request of ``claims`` can or cannot use ``node``'s
        devices (the search itself is not run)."""
        search = Search(self, node, list(claims), self._view(node))
        search.validate()
        return breakdown(search)

    def allocate(self, node: Node, claims: Sequence[ResourceClaim]) -> Outcome:
        """Find devices for all claims on ``node`` (claims must not be allocated yet).

        Raises only InvalidInputError (no node can help) and OutOfTimeError (the caller's
        budget); any other AllocatorError, such as a NodeAllocationError for an "All" request
        on a pool being updated, is this node's ERROR outcome, so callers (the scheduler's
        cycle, ``simulate``) need no other except clause.
        """
        search = Search(self, node, list(claims), self._view(node))
        try:
            done = search.run()
        except (InvalidInputError, OutOfTimeError):
            raise
        except AllocatorError as e:
            return Outcome(Status.ERROR, error=e, stats=Stats(search.steps))
        stats = Stats(search.steps)
        if not done:
            bad = [p for p in search.pools if p.invalid]
            if bad:
                names = ", ".join(f"{p.id} ({p.invalid_reason})" for p in bad)
                err = InvalidPoolError(f"invalid resource pools were encountered: {names}")
                return Outcome(Status.ERROR, error=err, stats=stats)
            return Outcome(Status.UNSATISFIABLE, stats=stats, explain=lambda: explain(search))
        out = tuple(allocation_result(search, i) for i in range(len(claims)))
        return Outcome(Status.SUCCESS, results=out, stats=stats)


def _size_key(candidate: Candidate) -> tuple[Decimal, Decimal, int]:
    """Best fit: smallest partitions (counters consumed) and capacities first."""
    used = sum((v for _, cs in candidate.counters for _, v in cs), Decimal(0))
    capacity = candidate.device.capacity
    total = sum((c.value.value for c in capacity.values() if c.value is not None), Decimal(0))
    return used, total, candidate.position


__all__ = ["Allocator", "InvalidInputError", "NodeViewCache", "Policy"]
