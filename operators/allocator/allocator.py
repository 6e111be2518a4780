"""The structured-parameters allocator: devices for every request of a pod's claims on one node.

Built once per scheduling cycle from (features, allocated state, classes, slices, selector
engine), then ``allocate(node, claims)`` per node. The search is upstream's (k8s.io/
dynamic-resource-allocation, "experimental" channel): claims, then requests, then
``firstAvailable`` entries in order; devices in pool/slice/device order; first-fit
backtracking without permutations. Same inputs give the same devices as kube-scheduler.

Outcomes: ``fits`` with one AllocationResult per claim, ``unsatisfiable`` with reasons, or
``error`` (a failure of this node, e.g. invalid pools). Bad input raises InvalidInputError.
Nothing is persisted; the only randomness (shareIDs) comes from the injected ``share_ids``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from operators.allocator import capacity as cap
from operators.allocator.constraints import Constraint, DistinctAttribute, MatchAttribute
from operators.allocator.errors import (
    ClassNotFoundError,
    FeatureDisabledError,
    IncompletePoolError,
    InvalidInputError,
    InvalidNodeSelectorError,
    InvalidPoolError,
    InvalidRequestError,
    InvalidSelectorError,
    TooManyDevicesError,
)
from operators.allocator.features import Features
from operators.allocator.nodes import node_matches
from operators.allocator.outcome import Outcome, Stats, Status
from operators.allocator.pools import Pool, gather_pools
from operators.allocator.selectors import SelectorEngine
from operators.allocator.state import AllocatedState
from operators.api.core import Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from operators.api.ids import DeviceID, PoolID
from operators.api.limits import AllocationResultsMaxSize
from operators.api.quantity import Quantity
from operators.api.resource import (
    ALLOCATION_CONFIG_SOURCE_CLAIM,
    ALLOCATION_CONFIG_SOURCE_CLASS,
    ALLOCATION_MODE_ALL,
    ALLOCATION_MODE_EXACT_COUNT,
    AllocationResult,
    Device,
    DeviceAllocationConfiguration,
    DeviceAllocationResult,
    DeviceClass,
    DeviceRequestAllocationResult,
    DeviceSelector,
    DeviceTaint,
    DeviceTaintRule,
    DeviceToleration,
    ResourceClaim,
    ResourceSlice,
)
from operators.cel.errors import SelectorError

Policy = Literal["first-fit", "best-fit"]


class _MaxSizeExceededError(Exception):
    """Internal: a subrequest choice would exceed the per-claim result limit."""


def _tolerates(tol: DeviceToleration, taint: DeviceTaint) -> bool:
    if tol.effect and tol.effect != taint.effect:
        return False
    if tol.key and tol.key != taint.key:
        return False
    if tol.operator in (None, "", "Equal"):
        return (tol.value or "") == (taint.value or "")
    return tol.operator == "Exists"


@dataclass(slots=True, eq=False)
class _Dev:
    """A device with what the search needs precomputed."""

    id: DeviceID
    device: Device
    slice: ResourceSlice
    pool: Pool
    pos: int
    per_device: bool
    taints: tuple[DeviceTaint, ...]
    counters: tuple[tuple[str, tuple[tuple[str, Decimal], ...]], ...]


@dataclass(slots=True, eq=False)
class _Req:
    """One request without subrequests, or one subrequest."""

    claim_index: int
    name: str
    parent: str | None
    device_class: DeviceClass
    mode: str
    count: int
    admin: bool
    selectors: Sequence[DeviceSelector]
    tolerations: Sequence[DeviceToleration]
    capacity: Mapping[str, Quantity] | None
    key: tuple[int, int, int]
    all_devices: list[_Dev] | None = None
    num: int = 0

    @property
    def full_name(self) -> str:
        return f"{self.parent}/{self.name}" if self.parent else self.name


@dataclass(slots=True, eq=False)
class _Slot:
    """A claim's request: its alternatives (one unless firstAvailable) and the chosen one."""

    alternatives: list[_Req]
    has_sub: bool
    selected: int = 0


@dataclass(slots=True, eq=False)
class _Result:
    req: _Req
    dev: _Dev
    share_id: str | None
    consumed: dict[str, Quantity] | None


@dataclass(slots=True, eq=False)
class _NodeView:
    pools: list[Pool]
    devices: list[_Dev]
    best_fit: list[_Dev]


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
        self._views: dict[tuple[object, ...], _NodeView] = {}
        # Slices by node name, and those every node must look at (upstream's split).
        self.on_node: dict[str, list[ResourceSlice]] = {}
        self.shared: list[ResourceSlice] = []

    def generation(self, slices: Sequence[ResourceSlice], extra: tuple[object, ...]) -> None:
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
                if s.spec.node_name and not s.spec.shared_counters:
                    self.on_node.setdefault(s.spec.node_name, []).append(s)
                else:
                    self.shared.append(s)
        self._slices, self._extra = slices, extra

    def get(self, key: tuple[object, ...]) -> _NodeView | None:
        return self._views.get(key)

    def put(self, key: tuple[object, ...], view: _NodeView) -> None:
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
    ) -> None:
        self.features = features
        self.allocated = allocated
        self.classes = {c.metadata.name or "": c for c in classes}
        self.slices = slices
        self.selectors = selectors
        self.share_ids = share_ids
        self.policy: Policy = policy
        self.taint_rules = [r for r in taint_rules if r.spec.device_selector is not None]
        self._views = view_cache if view_cache is not None else NodeViewCache()
        self._views.generation(self.slices, (features, policy, *map(id, self.taint_rules)))
        self._matches: dict[tuple[str, int], bool | SelectorError] = {}
        self._available: dict[PoolID, dict[str, dict[str, Decimal]]] = {}

    # --- per node ------------------------------------------------------------------------

    def _view(self, node: Node) -> _NodeView:
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
        devices: list[_Dev] = []
        for pool in pools:
            if not pool.usable:
                continue
            for s in pool.slices:
                per_device = bool(s.spec.per_device_node_selection)
                for d in s.spec.devices:
                    dev_id = pool.id.device(d.name or "")
                    devices.append(
                        _Dev(
                            id=dev_id,
                            device=d,
                            slice=s,
                            pool=pool,
                            pos=len(devices),
                            per_device=per_device,
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
        best = sorted(devices, key=_size_key) if self.policy == "best-fit" else devices
        view = _NodeView(pools, devices, best)
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

    def device_matches(self, expression: str, driver: str, device: Device) -> bool:
        """Memoised CEL evaluation (errors are remembered too)."""
        key = (expression, id(device))
        hit = self._matches.get(key)
        if hit is None:
            try:
                hit = self.selectors.device_matches(expression, driver, device)
            except SelectorError as e:
                hit = e
            self._matches[key] = hit
        if isinstance(hit, SelectorError):
            raise hit
        return hit

    def allocate(self, node: Node, claims: Sequence[ResourceClaim]) -> Outcome:
        """Find devices for all claims on ``node`` (claims must not be allocated yet)."""
        call = _Call(self, node, list(claims), self._view(node))
        return call.run()


def _size_key(dev: _Dev) -> tuple[Decimal, Decimal, int]:
    """Best fit: smallest partitions (counters consumed) and capacities first."""
    used = sum((v for _, cs in dev.counters for _, v in cs), Decimal(0))
    total = sum(
        (c.value.value for c in dev.device.capacity.values() if c.value is not None), Decimal(0)
    )
    return used, total, dev.pos


class _Call:
    """State of one ``allocate`` call: tentative choices, counters, constraints."""

    def __init__(
        self, alloc: Allocator, node: Node, claims: list[ResourceClaim], view: _NodeView
    ) -> None:
        self.a = alloc
        self.f = alloc.features
        self.node = node
        self.claims = claims
        self.view = view
        self.pools = view.pools
        self.order = view.best_fit
        self.slots: list[list[_Slot]] = []
        self.constraints: list[list[Constraint]] = []
        self.results: list[list[_Result]] = [[] for _ in claims]
        self.allocating: dict[DeviceID, set[int]] = {}
        self.allocating_capacity: dict[DeviceID, dict[str, Decimal]] = {}
        self.consumed: dict[PoolID, dict[str, dict[str, Decimal]]] = {}
        self.selectable_cache: dict[tuple[int, tuple[int, int, int]], bool] = {}
        self.steps = 0

    # --- validation --------------------------------------------------------------------------

    def _prepare(self) -> None:
        f = self.f
        for ci, claim in enumerate(self.claims):
            ck = claim.key
            min_devices = 0
            slots: list[_Slot] = []
            for ri, request in enumerate(claim.spec.devices.requests):
                rname = request.name or ""
                if request.first_available:
                    if not f.prioritized_list:
                        raise FeatureDisabledError(
                            f"claim {ck}, request {rname}: has subrequests, but the "
                            "DRAPrioritizedList feature is disabled"
                        )
                    if not f.consumable_capacity:
                        for sub in request.first_available:
                            if sub.capacity is not None:
                                raise FeatureDisabledError(
                                    f"claim {ck}, subrequest {sub.name}: has capacity requests, "
                                    "but the DRAConsumableCapacity feature is disabled"
                                )
                    alts = []
                    for si, sub in enumerate(request.first_available):
                        r = self._request(
                            ci,
                            claim,
                            sub.name or "",
                            rname,
                            sub.device_class_name,
                            sub.allocation_mode,
                            sub.count,
                            None,
                            sub.selectors,
                            sub.tolerations,
                            sub.capacity.requests if sub.capacity is not None else None,
                            (ci, ri, si),
                        )
                        alts.append(r)
                    min_devices += min(r.num for r in alts)
                    slots.append(_Slot(alts, True))
                    continue
                ex = request.exactly
                if ex is None:
                    raise InvalidRequestError(
                        f"claim {ck}, request {rname}: missing device class name "
                        "(unsupported request type?)"
                    )
                if not f.consumable_capacity and ex.capacity is not None:
                    raise FeatureDisabledError(
                        f"claim {ck}, request {rname}: has capacity requests, but the "
                        "DRAConsumableCapacity feature is disabled"
                    )
                r = self._request(
                    ci,
                    claim,
                    rname,
                    None,
                    ex.device_class_name,
                    ex.allocation_mode,
                    ex.count,
                    ex.admin_access,
                    ex.selectors,
                    ex.tolerations,
                    ex.capacity.requests if ex.capacity is not None else None,
                    (ci, ri, 0),
                )
                min_devices += r.num
                slots.append(_Slot([r], False))
            if min_devices > AllocationResultsMaxSize:
                raise TooManyDevicesError(
                    f"claim {ck}: number of requested devices {min_devices} exceeds the claim "
                    f"limit of {AllocationResultsMaxSize}"
                )
            self.slots.append(slots)
            constraints: list[Constraint] = []
            for i, c in enumerate(claim.spec.devices.constraints):
                if c.match_attribute is not None:
                    constraints.append(
                        MatchAttribute(set(c.requests), c.match_attribute, f.list_type_attributes)
                    )
                elif c.distinct_attribute is not None:
                    constraints.append(
                        DistinctAttribute(
                            set(c.requests), c.distinct_attribute, f.list_type_attributes
                        )
                    )
                else:
                    raise InvalidRequestError(
                        f"claim {ck}, constraint #{i}: empty constraint "
                        "(unsupported constraint type?)"
                    )
            self.constraints.append(constraints)

    def _request(
        self,
        ci: int,
        claim: ResourceClaim,
        name: str,
        parent: str | None,
        class_name: str | None,
        mode: str | None,
        count: int | None,
        admin: bool | None,
        selectors: Sequence[DeviceSelector],
        tolerations: Sequence[DeviceToleration],
        capacity: Mapping[str, Quantity] | None,
        key: tuple[int, int, int],
    ) -> _Req:
        ck = claim.key
        for i, sel in enumerate(selectors):
            if sel.cel is None or sel.cel.expression is None:
                raise InvalidSelectorError(
                    f"claim {ck}, request {name}, selector #{i}: CEL expression empty "
                    "(unsupported selector type?)"
                )
        if not self.f.admin_access and admin is not None:
            raise FeatureDisabledError(
                f"claim {ck}, request {name}: admin access is requested, but the feature is "
                "disabled"
            )
        if not class_name:
            raise InvalidRequestError(
                f"claim {ck}, request {name}: missing device class name (unsupported request type?)"
            )
        device_class = self.a.classes.get(class_name)
        if device_class is None:
            raise ClassNotFoundError(
                f"claim {ck}, request {name}: could not retrieve device class {class_name}: "
                "not found"
            )
        # The API server defaults these; offline inputs may omit them.
        mode = mode or ALLOCATION_MODE_EXACT_COUNT
        r = _Req(
            claim_index=ci,
            name=name,
            parent=parent,
            device_class=device_class,
            mode=mode,
            count=1 if count is None else count,
            admin=bool(admin),
            selectors=selectors,
            tolerations=tolerations,
            capacity=capacity,
            key=key,
        )
        if mode == ALLOCATION_MODE_EXACT_COUNT:
            r.num = r.count
        elif mode == ALLOCATION_MODE_ALL:
            r.all_devices = []
            for pool in self.pools:
                if pool.incomplete:
                    raise IncompletePoolError(
                        f"claim {ck}, request {name}: asks for all devices, but resource pool "
                        f"{pool.id} is currently being updated"
                    )
                if pool.invalid:
                    raise InvalidPoolError(
                        f"claim {ck}, request {name}: asks for all devices, but resource pool "
                        f"{pool.id} is currently invalid"
                    )
            for dev in self.view.devices:
                if not self._selectable(r, dev):
                    continue
                if self.f.consumable_capacity and not self._capacity_fits(r, dev):
                    continue
                r.all_devices.append(dev)
            r.num = len(r.all_devices)
        else:
            raise InvalidRequestError(f"claim {ck}, request {name}: unsupported count mode {mode}")
        return r

    # --- checks ------------------------------------------------------------------------------

    def _selectable(self, r: _Req, dev: _Dev) -> bool:
        if not self.f.binding_and_status and dev.device.binding_conditions:
            return False
        key = (dev.pos, r.key)
        hit = self.selectable_cache.get(key)
        if hit is not None:
            return hit
        result = self._selectors_match(r, dev, r.device_class.spec.selectors, True)
        if result:
            result = self._selectors_match(r, dev, r.selectors, False)
        if result and dev.per_device:
            d = dev.device
            try:
                result = node_matches(self.node, d.node_name, d.all_nodes, d.node_selector)
            except InvalidNodeSelectorError as e:
                raise InvalidNodeSelectorError(f"device {dev.id}: {e.message}") from None
        self.selectable_cache[key] = result
        return result

    def _selectors_match(
        self, r: _Req, dev: _Dev, selectors: Sequence[DeviceSelector], from_class: bool
    ) -> bool:
        for i, sel in enumerate(selectors):
            expression = sel.cel.expression if sel.cel is not None else None
            if from_class:
                where = f"class {r.device_class.metadata.name}: selector #{i}"
            else:
                where = (
                    f"claim {self.claims[r.claim_index].key}, request {r.full_name}, selector #{i}"
                )
            if expression is None:
                raise InvalidSelectorError(f"{where}: CEL expression empty")
            bad = _unsupported_attribute(dev.device, self.f.list_type_attributes)
            if bad is not None:
                # Upstream cannot even build the CEL device from such an attribute.
                raise InvalidSelectorError(
                    f"{where}: CEL runtime error: attribute {bad}: unsupported attribute value"
                )
            try:
                if not self.a.device_matches(expression, dev.id.driver, dev.device):
                    return False
            except SelectorError as e:
                kind = "CEL runtime error" if e.reason != "InvalidSelector" else "CEL compile error"
                raise InvalidSelectorError(f"{where}: {kind}: {e.message}") from None
        return True

    def _capacity_fits(self, r: _Req, dev: _Dev) -> bool:
        fits = cap.request_fits(
            r.capacity,
            dev.device.capacity,
            self.a.allocated.capacity.get(dev.id),
            self.allocating_capacity.get(dev.id),
        )
        return bool(fits)

    def _in_use(self, dev_id: DeviceID) -> bool:
        return dev_id in self.a.allocated.devices or bool(self.allocating.get(dev_id))

    def _capacity_in_use(self, dev_id: DeviceID) -> bool:
        return dev_id in self.a.allocated.capacity or dev_id in self.allocating_capacity

    def _taint_blocks(self, dev: _Dev, r: _Req) -> bool:
        for taint in dev.taints:
            if taint.effect in ("NoSchedule", "NoExecute") and not any(
                _tolerates(t, taint) for t in r.tolerations
            ):
                return True
        return False

    def _take_counters(self, dev: _Dev) -> bool:
        avail = self.a.available_counters(dev.pool)
        consumed = self.consumed.setdefault(dev.pool.id, {})
        for set_name, counters in dev.counters:
            have = consumed.setdefault(set_name, {})
            for n, v in counters:
                have[n] = have.get(n, Decimal(0)) + v
        for set_name, counters_left in avail.items():
            used = consumed.get(set_name, {})
            for n, left in counters_left.items():
                if left < used.get(n, Decimal(0)):
                    self._release_counters(dev)
                    return False
        return True

    def _release_counters(self, dev: _Dev) -> None:
        consumed = self.consumed[dev.pool.id]
        for set_name, counters in dev.counters:
            have = consumed[set_name]
            for n, v in counters:
                have[n] -= v

    # --- search ------------------------------------------------------------------------------

    def _allocate_device(self, r: _Req, dev: _Dev, must: bool) -> Callable[[], None] | None:
        """Tentatively take ``dev`` for ``r``; returns the undo, or None when it cannot."""
        ci = r.claim_index
        multi = self.f.consumable_capacity and bool(dev.device.allow_multiple_allocations)
        if not multi and r.admin and ci in self.allocating.get(dev.id, ()):
            return None
        if not r.admin and self._in_use(dev.id):
            return None
        if not self.f.partitionable_devices and dev.counters:
            return None
        counters_taken = False
        if not (multi and self._capacity_in_use(dev.id)) and dev.counters:
            if not self._take_counters(dev):
                return None
            counters_taken = True
        base, sub = (r.parent, r.name) if r.parent else (r.name, "")
        constraints = self.constraints[ci]
        added = 0
        marked = False
        cap_inserted = False
        cap_existed = False
        consumed: dict[str, Quantity] = {}
        results = self.results[ci]
        before = len(results)

        def undo() -> None:
            del results[before:]
            if cap_inserted:
                have = self.allocating_capacity.get(dev.id)
                if have is not None:
                    for n, q in consumed.items():
                        if n in have:
                            have[n] -= q.value
                    if all(v == 0 for v in have.values()):
                        del self.allocating_capacity[dev.id]
                if cap_existed and dev.id not in self.allocating_capacity:
                    self.allocating_capacity[dev.id] = {}
            if marked:
                self.allocating[dev.id].discard(ci)
            for c in reversed(constraints[:added]):
                c.remove(base, sub)
            if counters_taken:
                self._release_counters(dev)

        if self.f.device_taints and self._taint_blocks(dev, r):
            undo()
            return None
        for c in constraints:
            if not c.add(base, sub, dev.device, dev.id):
                undo()
                if must:
                    raise InvalidRequestError(
                        f"claim {self.claims[ci].key}, request {r.name}: cannot add device "
                        f"{dev.id} because a claim constraint would not be satisfied"
                    )
                return None
            added += 1
        if not multi:
            self.allocating.setdefault(dev.id, set()).add(ci)
            marked = True
        share_id: str | None = None
        if self.f.consumable_capacity:
            if not self._capacity_fits(r, dev):
                undo()
                return None
            if multi:
                consumed = cap.consumption(r.capacity, dev.device.capacity)
                share_id = self.a.share_ids()
                cap_existed = dev.id in self.allocating_capacity
                have = self.allocating_capacity.setdefault(dev.id, {})
                for n, q in consumed.items():
                    have[n] = have.get(n, Decimal(0)) + q.value
                cap_inserted = True
        results.append(_Result(r, dev, share_id, consumed or None))
        return undo

    def _one(self, ci: int, ri: int, si: int, di: int, in_sub: bool, start: int) -> bool:
        self.steps += 1
        if ci >= len(self.claims):
            return True
        slots = self.slots[ci]
        if ri >= len(slots):
            try:
                return self._one(ci + 1, 0, 0, 0, False, 0)
            except _MaxSizeExceededError:
                return False
        slot = slots[ri]
        if not in_sub and slot.has_sub:
            all_exceeded = True
            for sub_index in range(len(slot.alternatives)):
                try:
                    ok = self._one(ci, ri, sub_index, di, True, 0)
                except _MaxSizeExceededError:
                    continue
                all_exceeded = False
                if ok:
                    slot.selected = sub_index
                    return True
            if all_exceeded:
                raise _MaxSizeExceededError
            return False
        r = slot.alternatives[si]
        all_mode = r.mode == ALLOCATION_MODE_ALL
        if all_mode and not r.all_devices:
            return False
        if di >= r.num:
            return self._one(ci, ri + 1, 0, 0, False, 0)
        if len(self.results[ci]) + r.num - di > AllocationResultsMaxSize:
            raise _MaxSizeExceededError
        if all_mode:
            assert r.all_devices is not None
            undo = self._allocate_device(r, r.all_devices[di], True)
            if undo is None:
                return False
            try:
                done = self._one(ci, ri, si, di + 1, in_sub, 0)
            except BaseException:
                undo()
                raise
            if not done:
                undo()
            return done
        order = self.order
        for idx in range(start, len(order)):
            dev = order[idx]
            if r.admin:
                if ci in self.allocating.get(dev.id, ()):
                    continue
            elif self._in_use(dev.id):
                continue
            if not self._selectable(r, dev):
                continue
            if self.f.consumable_capacity and not self._capacity_fits(r, dev):
                continue
            undo = self._allocate_device(r, dev, False)
            if undo is None:
                continue
            try:
                done = self._one(ci, ri, si, di + 1, in_sub, idx + 1)
            except BaseException:
                undo()
                raise
            if done:
                return True
            undo()
        return False

    # --- results -----------------------------------------------------------------------------

    def run(self) -> Outcome:
        self._prepare()
        try:
            done = self._one(0, 0, 0, 0, False, 0)
        except _MaxSizeExceededError:
            raise TooManyDevicesError("allocation max size exceeded") from None
        stats = Stats(self.steps)
        if not done:
            bad = [p for p in self.pools if p.invalid]
            if bad:
                names = ", ".join(f"{p.id} ({p.invalid_reason})" for p in bad)
                err = InvalidPoolError(f"invalid resource pools were encountered: {names}")
                return Outcome(Status.ERROR, error=err, stats=stats)
            from operators.allocator.explain import explain

            return Outcome(Status.UNSATISFIABLE, stats=stats, explain=lambda: explain(self))
        out = tuple(self._result(ci) for ci in range(len(self.claims)))
        return Outcome(Status.SUCCESS, results=out, stats=stats)

    def _result(self, ci: int) -> AllocationResult:
        items: list[DeviceRequestAllocationResult] = []
        for res in self.results[ci]:
            r, dev = res.req, res.dev
            kwargs: dict[str, object] = {
                "request": r.full_name,
                "driver": dev.id.driver,
                "pool": dev.id.pool,
                "device": dev.id.device,
            }
            if r.admin:
                kwargs["admin_access"] = True
            if r.tolerations:
                kwargs["tolerations"] = [t.model_copy(deep=True) for t in r.tolerations]
            if self.f.binding_and_status:
                if dev.device.binding_conditions:
                    kwargs["binding_conditions"] = list(dev.device.binding_conditions)
                if dev.device.binding_failure_conditions:
                    kwargs["binding_failure_conditions"] = list(
                        dev.device.binding_failure_conditions
                    )
            if res.share_id is not None:
                kwargs["share_id"] = res.share_id
            if res.consumed:
                kwargs["consumed_capacity"] = dict(res.consumed)
            items.append(DeviceRequestAllocationResult(**kwargs))
        configs = self._configs(ci)
        devices = (
            DeviceAllocationResult(results=items, config=configs)
            if configs
            else DeviceAllocationResult(results=items)
        )
        selector = self._node_selector(ci)
        if selector is None:
            return AllocationResult(devices=devices)
        return AllocationResult(devices=devices, node_selector=selector)

    def _configs(self, ci: int) -> list[DeviceAllocationConfiguration]:
        claim = self.claims[ci]
        out: list[DeviceAllocationConfiguration] = []
        by_class: dict[str, tuple[int, int]] = {}
        for slot in self.slots[ci]:
            r = slot.alternatives[slot.selected]
            class_name = r.device_class.metadata.name or ""
            span = by_class.get(class_name)
            if span is not None:
                for i in range(*span):
                    out[i].requests.append(r.full_name)
                continue
            first = len(out)
            for cfg in r.device_class.spec.config:
                out.append(
                    DeviceAllocationConfiguration(
                        source=ALLOCATION_CONFIG_SOURCE_CLASS,
                        requests=[r.full_name],
                        opaque=cfg.opaque.model_copy(deep=True) if cfg.opaque else None,
                    )
                )
            by_class[class_name] = (first, len(out))
        for claim_cfg in claim.spec.devices.config:
            opaque = claim_cfg.opaque
            names = claim_cfg.requests
            if not names:
                out.append(_claim_config(names, opaque))
                continue
            for ri, request in enumerate(claim.spec.devices.requests):
                if request.name in names:
                    out.append(_claim_config(names, opaque))
                    continue
                slot = self.slots[ci][ri]
                if not slot.has_sub:
                    continue
                chosen = slot.alternatives[slot.selected]
                if chosen.full_name in names:
                    out.append(_claim_config(names, opaque))
        return out

    def _node_selector(self, ci: int) -> NodeSelector | None:
        fields: list[NodeSelectorRequirement] = []
        exprs: list[NodeSelectorRequirement] = []
        for res in self.results[ci]:
            dev = res.dev
            spec = dev.slice.spec
            if dev.per_device:
                name, selector = dev.device.node_name, dev.device.node_selector
            else:
                name, selector = spec.node_name, spec.node_selector
            if name is not None or dev.device.binds_to_node:
                term = NodeSelectorTerm(
                    match_fields=[
                        NodeSelectorRequirement(
                            key="metadata.name",
                            operator="In",
                            values=[self.node.metadata.name or ""],
                        )
                    ]
                )
                return NodeSelector(node_selector_terms=[term])
            if selector is None or not selector.node_selector_terms:
                continue
            if len(selector.node_selector_terms) > 1:
                raise InvalidNodeSelectorError(
                    f"create NodeSelector for claim {self.claims[ci].metadata.name}: unsupported "
                    f"ResourceSlice.NodeSelector with {len(selector.node_selector_terms)} terms"
                )
            term0 = selector.node_selector_terms[0]
            _merge(term0.match_fields, fields)
            _merge(term0.match_expressions, exprs)
        if not fields and not exprs:
            return None
        term_kwargs: dict[str, object] = {}
        if exprs:
            term_kwargs["match_expressions"] = exprs
        if fields:
            term_kwargs["match_fields"] = fields
        return NodeSelector(node_selector_terms=[NodeSelectorTerm(**term_kwargs)])


def _unsupported_attribute(device: Device, list_types: bool) -> str | None:
    """The first attribute CEL cannot represent: no value, an empty list, or a list while
    DRAListTypeAttributes is off (upstream reports one of them; we pick the first by name)."""
    for name in sorted(device.attributes):
        attr = device.attributes[name]
        scalar = (attr.int_, attr.bool_, attr.string, attr.version)
        lists = (attr.ints, attr.bools, attr.strings, attr.versions)
        if any(v is not None for v in scalar):
            continue
        if any(lists) and list_types:
            continue
        return name
    return None


def _claim_config(requests: list[str], opaque: object) -> DeviceAllocationConfiguration:
    from operators.api.resource import OpaqueDeviceConfiguration

    kwargs: dict[str, object] = {"source": ALLOCATION_CONFIG_SOURCE_CLAIM}
    if requests:
        kwargs["requests"] = list(requests)
    if isinstance(opaque, OpaqueDeviceConfiguration):
        kwargs["opaque"] = opaque.model_copy(deep=True)
    return DeviceAllocationConfiguration(**kwargs)


def _merge(src: Sequence[NodeSelectorRequirement], dst: list[NodeSelectorRequirement]) -> None:
    for req in src:
        values = set(req.values)
        if not any(
            have.key == req.key and have.operator == req.operator and set(have.values) == values
            for have in dst
        ):
            dst.append(req.model_copy(deep=True))


__all__ = ["Allocator", "InvalidInputError", "NodeViewCache", "Policy"]
