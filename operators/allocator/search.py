"""The search of one ``allocate`` call: upstream's allocator state and its allocateOne steps.

Upstream (k8s.io/dynamic-resource-allocation/structured, "experimental") keeps this in its
``allocator`` struct; here it is ``Search``, built per node and call by ``Allocator.allocate``
from the node's candidates (``NodeView``). It reads the cycle's shared data (classes, allocated
state, memoised selector matches and counters) through ``Snapshot``, so that this module does not
import ``allocator.py``; ``explain.py`` and ``results.py`` read a finished search.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol

from operators.allocator import capacity as cap
from operators.allocator.constraints import Constraint, DistinctAttribute, MatchAttribute
from operators.allocator.errors import (
    ClassNotFoundError,
    FeatureDisabledError,
    IncompletePoolError,
    InvalidNodeSelectorError,
    InvalidPoolError,
    InvalidRequestError,
    InvalidSelectorError,
    TooManyDevicesError,
)
from operators.allocator.features import Features
from operators.allocator.nodes import node_matches
from operators.allocator.pools import Pool
from operators.allocator.state import AllocatedState
from operators.api.core import Node
from operators.api.ids import DeviceID, PoolID
from operators.api.limits import AllocationResultsMaxSize
from operators.api.quantity import Quantity
from operators.api.resource import (
    ALLOCATION_MODE_ALL,
    ALLOCATION_MODE_EXACT_COUNT,
    Device,
    DeviceClass,
    DeviceSelector,
    DeviceTaint,
    DeviceToleration,
    ResourceClaim,
    ResourceSlice,
)
from operators.cel.errors import SelectorError


class Snapshot(Protocol):
    """What a search reads from its ``Allocator``: the cycle's inputs and memoised lookups."""

    @property
    def features(self) -> Features: ...

    @property
    def allocated(self) -> AllocatedState: ...

    @property
    def classes(self) -> Mapping[str, DeviceClass]: ...

    @property
    def share_ids(self) -> Callable[[], str]: ...

    def available_counters(self, pool: Pool) -> dict[str, dict[str, Decimal]]: ...

    def device_matches(self, expression: str, driver: str, device: Device) -> bool: ...


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
class Candidate:
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
class RequestSpec:
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
    all_devices: list[Candidate] | None = None
    num: int = 0

    @property
    def full_name(self) -> str:
        return f"{self.parent}/{self.name}" if self.parent else self.name


@dataclass(slots=True, eq=False)
class Alternatives:
    """A claim's request: its alternatives (one unless firstAvailable) and the chosen one."""

    alternatives: list[RequestSpec]
    has_sub: bool
    selected: int = 0


@dataclass(slots=True, eq=False)
class Choice:
    req: RequestSpec
    dev: Candidate
    share_id: str | None
    consumed: dict[str, Quantity] | None


@dataclass(slots=True, eq=False)
class NodeView:
    pools: list[Pool]
    devices: list[Candidate]
    best_fit: list[Candidate]


class Search:
    """State of one ``allocate`` call: tentative choices, counters, constraints."""

    def __init__(
        self, alloc: Snapshot, node: Node, claims: list[ResourceClaim], view: NodeView
    ) -> None:
        self.a = alloc
        self.f = alloc.features
        self.node = node
        self.claims = claims
        self.view = view
        self.pools = view.pools
        self.order = view.best_fit
        self.slots: list[list[Alternatives]] = []
        self.constraints: list[list[Constraint]] = []
        self.results: list[list[Choice]] = [[] for _ in claims]
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
            slots: list[Alternatives] = []
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
                    slots.append(Alternatives(alts, True))
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
                slots.append(Alternatives([r], False))
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
    ) -> RequestSpec:
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
        r = RequestSpec(
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
                if not self.selectable(r, dev):
                    continue
                if self.f.consumable_capacity and not self._capacity_fits(r, dev):
                    continue
                r.all_devices.append(dev)
            r.num = len(r.all_devices)
        else:
            raise InvalidRequestError(f"claim {ck}, request {name}: unsupported count mode {mode}")
        return r

    # --- checks ------------------------------------------------------------------------------

    def selectable(self, r: RequestSpec, dev: Candidate) -> bool:
        if not self.f.binding_and_status and dev.device.binding_conditions:
            return False
        key = (dev.pos, r.key)
        hit = self.selectable_cache.get(key)
        if hit is not None:
            return hit
        result = self.selectors_match(r, dev, r.device_class.spec.selectors, True)
        if result:
            result = self.selectors_match(r, dev, r.selectors, False)
        if result and dev.per_device:
            d = dev.device
            try:
                result = node_matches(self.node, d.node_name, d.all_nodes, d.node_selector)
            except InvalidNodeSelectorError as e:
                raise InvalidNodeSelectorError(f"device {dev.id}: {e.message}") from None
        self.selectable_cache[key] = result
        return result

    def selectors_match(
        self, r: RequestSpec, dev: Candidate, selectors: Sequence[DeviceSelector], from_class: bool
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

    def _capacity_fits(self, r: RequestSpec, dev: Candidate) -> bool:
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

    def taint_blocks(self, dev: Candidate, r: RequestSpec) -> bool:
        for taint in dev.taints:
            if taint.effect in ("NoSchedule", "NoExecute") and not any(
                _tolerates(t, taint) for t in r.tolerations
            ):
                return True
        return False

    def _take_counters(self, dev: Candidate) -> bool:
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

    def _release_counters(self, dev: Candidate) -> None:
        consumed = self.consumed[dev.pool.id]
        for set_name, counters in dev.counters:
            have = consumed[set_name]
            for n, v in counters:
                have[n] -= v

    # --- search ------------------------------------------------------------------------------

    def _allocate_device(
        self, r: RequestSpec, dev: Candidate, must: bool
    ) -> Callable[[], None] | None:
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

        if self.f.device_taints and self.taint_blocks(dev, r):
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
        results.append(Choice(r, dev, share_id, consumed or None))
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
            if not self.selectable(r, dev):
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

    def run(self) -> bool:
        """Validate the claims, then search; True when every claim got its devices."""
        self._prepare()
        try:
            return self._one(0, 0, 0, 0, False, 0)
        except _MaxSizeExceededError:
            raise TooManyDevicesError("allocation max size exceeded") from None


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


__all__ = [
    "Alternatives",
    "Candidate",
    "Choice",
    "NodeView",
    "RequestSpec",
    "Search",
    "Snapshot",
]
