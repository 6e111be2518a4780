"""The search of one ``allocate`` call: upstream's allocator state and its allocateOne steps.

Upstream (k8s.io/dynamic-resource-allocation/structured, "experimental") keeps this in its
``allocator`` struct; here it is ``Search``, built per node and call by ``Allocator.allocate``
from the node's candidates (``NodeView``). It reads the cycle's shared data (classes, allocated
state, memoised selector matches and counters) through ``Snapshot``, so that this module does not
import ``allocator.py``; ``explain.py`` and ``results.py`` read a finished search.

Where 1.37's allocator parts from 1.36's (``features.since_1_37``): the claim limit is checked
request by request, an "All" request counts devices by their capacity alone (what others hold
makes it fail, not shrink), a shared device already shared without capacity does not take its
counters again, a capacity amount the arithmetic cannot take ends the allocation, and the
constraints forget exactly what a removed device added. Its alpha gates add derived attributes
(refused with the gate off), compatibility groups per counter set, and devices whose slice
skips node operations (left alone with the gate off or on a node not declaring it).

Where 1.38's parts from 1.37's (``features.since_1_38``): constraints compare values as it holds
them (``constraints``), capacities resolve by fully qualified name (``capacity``), a device that
does not allow multiple allocations but still holds a share is not handed out exclusively, and
selectors meet a device's attributes only as they read them (1.38's CEL builds no device view
up front, so an attribute it cannot hold fails only the selectors that read it).

``_allocate_one`` takes upstream's ``deviceIndices`` as four int arguments (claim, request of the
claim, ``firstAvailable`` subrequest or 0, n-th device of the request) and its flags by position
on the recursive calls: a tuple or keywords per step cost more than the step's own bookkeeping
(measured on bench/bench_allocator.py), and the variables passed carry the names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Protocol

from operators.allocator import capacity as cap
from operators.allocator.compatibility import Members, admits, join
from operators.allocator.constraints import (
    Constraint,
    DistinctAttribute,
    MatchAttribute,
    derived_attribute,
)
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
from operators.api.core import OPTIONAL_NODE_OPERATIONS, Node
from operators.api.ids import DeviceID, PoolID
from operators.api.limits import AllocationResultsMaxSize
from operators.api.quantity import Quantity
from operators.api.resource import (
    ALLOCATION_MODE_ALL,
    ALLOCATION_MODE_EXACT_COUNT,
    Device,
    DeviceAttribute,
    DeviceClass,
    DeviceSelector,
    DeviceSubRequest,
    DeviceTaint,
    DeviceToleration,
    ExactDeviceRequest,
    ResourceClaim,
    ResourceSlice,
)
from operators.cel.errors import SelectorError

#: Per counter set consumed by a device: (counter set name, ((counter name, amount), ...)).
CounterUse = tuple[tuple[str, tuple[tuple[str, Decimal], ...]], ...]


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

    def members(self, pool: Pool) -> dict[str, Members]: ...

    def derived_value(self, expression: str, driver: str, device: Device) -> object: ...

    def device_matches(self, expression: str, driver: str, device: Device) -> bool: ...

    def check_time(self) -> None: ...


class _MaxSizeExceededError(Exception):
    """Internal: a subrequest choice would exceed the per-claim result limit."""


def _tolerates(toleration: DeviceToleration, taint: DeviceTaint) -> bool:
    """Kubernetes' toleration matching: empty effect or key match any; Exists ignores values."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in (None, "", "Equal"):
        return (toleration.value or "") == (taint.value or "")
    return toleration.operator == "Exists"


@dataclass(slots=True, eq=False)
class Candidate:
    """A device of the node with what the search needs precomputed (upstream's deviceWithID)."""

    id: DeviceID
    device: Device
    slice: ResourceSlice
    pool: Pool
    #: Index in ``NodeView.devices`` (pool, slice, device order): a cheap key and tie-breaker.
    position: int
    #: The slice sets perDeviceNodeSelection: the device, not the slice, names its nodes.
    per_device_node_selection: bool
    #: The device's own taints, then those of the taint rules that select it.
    taints: tuple[DeviceTaint, ...]
    counters: CounterUse


@dataclass(slots=True, eq=False)
class RequestSpec:
    """One request without subrequests, or one subrequest, validated (upstream's requestData)."""

    claim_index: int
    name: str
    #: The request's name when this is one of its subrequests.
    parent: str | None
    device_class: DeviceClass
    mode: str
    count: int
    admin_access: bool
    selectors: Sequence[DeviceSelector]
    tolerations: Sequence[DeviceToleration]
    capacity: Mapping[str, Quantity] | None
    #: 1.37 (DRADerivedAttributes): derived attribute name -> its CEL expression.
    derived: Mapping[str, str] | None = None
    #: Mode All: every selectable device of the node, fixed before the search starts.
    all_devices: list[Candidate] | None = None
    num_devices: int = 0
    #: Per ``Candidate.position``: whether this request can select the device (Search.selectable).
    selectable_cache: dict[int, bool] = field(default_factory=dict)

    @property
    def full_name(self) -> str:
        return f"{self.parent}/{self.name}" if self.parent else self.name


@dataclass(slots=True, eq=False)
class Alternatives:
    """A claim's request: what may satisfy it (one spec unless firstAvailable), and the pick."""

    options: list[RequestSpec]
    first_available: bool
    selected: int = 0

    @property
    def chosen(self) -> RequestSpec:
        return self.options[self.selected]


@dataclass(slots=True, eq=False)
class Choice:
    """A device tentatively taken for a request (upstream's internalDeviceResult)."""

    request: RequestSpec
    candidate: Candidate
    share_id: str | None
    consumed: dict[str, Quantity] | None


@dataclass(slots=True, eq=False)
class NodeView:
    """A node's usable pools and devices, built once and cached across calls (NodeViewCache)."""

    pools: list[Pool]
    devices: list[Candidate]
    #: ``devices`` in the order the search tries them: as they are, or smallest first (best-fit).
    search_order: list[Candidate]
    #: Devices that draw on a shared counter set (KEP-4815).
    counted: frozenset[DeviceID] = field(init=False)

    def __post_init__(self) -> None:
        self.counted = frozenset(c.id for c in self.devices if c.counters)


class Search:
    """State of one ``allocate`` call (upstream's ``allocator``): the validated requests and the
    tentative choices with what they hold (devices, capacity, counters, constraints)."""

    def __init__(
        self, allocator: Snapshot, node: Node, claims: list[ResourceClaim], view: NodeView
    ) -> None:
        self.allocator = allocator
        self.features = allocator.features
        self.node = node
        self.claims = claims
        self.view = view
        self.pools = view.pools
        self.search_order = view.search_order
        #: Per claim, per request of the claim: its alternatives.
        self.requests: list[list[Alternatives]] = []
        self.constraints: list[list[Constraint]] = []
        #: Per claim, the devices taken so far, in the order they were taken.
        self.choices: list[list[Choice]] = [[] for _ in claims]
        #: Devices taken in this call, with the indices of the claims that took them.
        self.allocating: dict[DeviceID, set[int]] = {}
        #: Capacity taken in this call from devices that allow multiple allocations.
        self.allocating_capacity: dict[DeviceID, dict[str, Decimal]] = {}
        #: Counters taken in this call, per pool and counter set (the allocated ones are in
        #: Snapshot.available_counters).
        self.consumed_counters: dict[PoolID, dict[str, dict[str, Decimal]]] = {}
        #: 1.37 (DRADeviceCompatibilityGroups): per pool and counter set, the groups of the
        #: devices on it (allocated ones, then those taken in this call).
        self.members: dict[PoolID, dict[str, Members]] = {}
        #: Derived attribute values of this call, per (device, expression), as upstream keeps.
        self.derived_values: dict[tuple[DeviceID, str], DeviceAttribute] = {}
        self.steps = 0
        #: 1.37 allocates devices whose slice skips node operations only with
        #: DRAOptionalNodeOperations on and on a node that declares the feature.
        self.skips_node_operations = self.features.since_1_37
        self.node_operations_optional = self.features.node_operations and (
            OPTIONAL_NODE_OPERATIONS in node.status.declared_features
        )
        #: 1.37: devices already shared, with capacity or without.
        self.shared_devices: frozenset[DeviceID] = (
            frozenset(d for d, _ in allocator.allocated.shared)
            if self.features.since_1_37
            else frozenset()
        )

    def validate(self) -> None:
        """Validate the claims and resolve their requests (what ``run`` does first): enough
        for an explanation without a search."""
        self._validate_claims()

    def run(self) -> bool:
        """Validate the claims, then search; True when every claim got its devices."""
        self._validate_claims()
        try:
            return self._allocate_one(0)
        except _MaxSizeExceededError:
            raise TooManyDevicesError("allocation max size exceeded") from None

    # --- validation --------------------------------------------------------------------------

    def _validate_claims(self) -> None:
        """Reject bad claims before searching, as upstream does: a bad claim is an input error
        for every node, not a node that does not fit."""
        features = self.features
        for claim_index, claim in enumerate(self.claims):
            claim_key = claim.key
            min_devices = 0
            requests: list[Alternatives] = []
            for request in claim.spec.devices.requests:
                request_name = request.name or ""
                if request.first_available:
                    if not features.prioritized_list:
                        raise FeatureDisabledError(
                            f"claim {claim_key}, request {request_name}: has subrequests, but the "
                            "DRAPrioritizedList feature is disabled"
                        )
                    if not features.consumable_capacity:
                        for sub in request.first_available:
                            if sub.capacity is not None:
                                raise FeatureDisabledError(
                                    f"claim {claim_key}, subrequest {sub.name}: has capacity "
                                    "requests, but the DRAConsumableCapacity feature is disabled"
                                )
                    options = [
                        self._validate_request(
                            claim_index,
                            name=sub.name or "",
                            parent=request_name,
                            spec=sub,
                            admin_access=None,
                        )
                        for sub in request.first_available
                    ]
                    fewest = min(option.num_devices for option in options)
                    self._check_claim_limit(claim_key, request_name, min_devices, fewest)
                    min_devices += fewest
                    requests.append(Alternatives(options, True))
                    continue
                exactly = request.exactly
                if exactly is None:
                    raise InvalidRequestError(
                        f"claim {claim_key}, request {request_name}: missing device class name "
                        "(unsupported request type?)"
                    )
                if not features.consumable_capacity and exactly.capacity is not None:
                    raise FeatureDisabledError(
                        f"claim {claim_key}, request {request_name}: has capacity requests, but "
                        "the DRAConsumableCapacity feature is disabled"
                    )
                spec = self._validate_request(
                    claim_index,
                    name=request_name,
                    parent=None,
                    spec=exactly,
                    admin_access=exactly.admin_access,
                )
                self._check_claim_limit(claim_key, request_name, min_devices, spec.num_devices)
                min_devices += spec.num_devices
                requests.append(Alternatives([spec], False))
            if min_devices > AllocationResultsMaxSize:
                raise TooManyDevicesError(
                    f"claim {claim_key}: number of requested devices {min_devices} exceeds the "
                    f"claim limit of {AllocationResultsMaxSize}"
                )
            self.requests.append(requests)
            self.constraints.append(self._claim_constraints(claim))

    def _check_claim_limit(self, claim_key: str, request: str, counted: int, more: int) -> None:
        """1.37 checks the claim limit as each request adds its devices (1.36 once per claim)."""
        if self.features.since_1_37 and more > AllocationResultsMaxSize - counted:
            raise TooManyDevicesError(
                f"claim {claim_key}, request {request}: adding {more} devices exceeds the claim "
                f"limit of {AllocationResultsMaxSize}, with {counted} already accounted for"
            )

    def _claim_constraints(self, claim: ResourceClaim) -> list[Constraint]:
        """The claim's constraints, empty at the start: the search adds and removes devices."""
        list_types = self.features.list_type_attributes
        exact = self.features.since_1_37
        derive = self._derive if self.features.derived else None
        held = self.features.since_1_38
        constraints: list[Constraint] = []
        for i, c in enumerate(claim.spec.devices.constraints):
            if c.match_attribute is not None:
                constraints.append(
                    MatchAttribute(
                        set(c.requests), c.match_attribute, list_types, exact, derive, held
                    )
                )
            elif c.distinct_attribute is not None:
                constraints.append(
                    DistinctAttribute(
                        set(c.requests), c.distinct_attribute, list_types, exact, derive, held
                    )
                )
            else:
                raise InvalidRequestError(
                    f"claim {claim.key}, constraint #{i}: empty constraint "
                    "(unsupported constraint type?)"
                )
        return constraints

    def _validate_request(
        self,
        claim_index: int,
        *,
        name: str,
        parent: str | None,
        spec: ExactDeviceRequest | DeviceSubRequest,
        admin_access: bool | None,
    ) -> RequestSpec:
        """Upstream's validateDeviceRequest: check one request or subrequest and fix how many
        devices it needs. Mode All takes its devices here, from complete and valid pools only,
        because "all" must not change while the search backtracks."""
        claim_key = self.claims[claim_index].key
        derived: dict[str, str] | None = None
        if spec.derived_attributes and self.features.since_1_37:  # 1.36 does not know them
            if not self.features.derived:
                raise FeatureDisabledError(
                    f"claim {claim_key}, request {name}: cannot handle request with derived "
                    "attributes, the feature is disabled"
                )
            derived = {a.name or "": a.expression or "" for a in spec.derived_attributes}
        for i, sel in enumerate(spec.selectors):
            if sel.cel is None or sel.cel.expression is None:
                raise InvalidSelectorError(
                    f"claim {claim_key}, request {name}, selector #{i}: CEL expression empty "
                    "(unsupported selector type?)"
                )
        if not self.features.admin_access and admin_access is not None:
            raise FeatureDisabledError(
                f"claim {claim_key}, request {name}: admin access is requested, but the feature "
                "is disabled"
            )
        class_name = spec.device_class_name
        if not class_name:
            raise InvalidRequestError(
                f"claim {claim_key}, request {name}: missing device class name "
                "(unsupported request type?)"
            )
        device_class = self.allocator.classes.get(class_name)
        if device_class is None:
            raise ClassNotFoundError(
                f"claim {claim_key}, request {name}: could not retrieve device class "
                f"{class_name}: not found"
            )
        # The API server defaults these; offline inputs may omit them.
        mode = spec.allocation_mode or ALLOCATION_MODE_EXACT_COUNT
        request = RequestSpec(
            claim_index=claim_index,
            name=name,
            parent=parent,
            device_class=device_class,
            mode=mode,
            count=1 if spec.count is None else spec.count,
            admin_access=bool(admin_access),
            selectors=spec.selectors,
            tolerations=spec.tolerations,
            capacity=spec.capacity.requests if spec.capacity is not None else None,
            derived=derived,
        )
        if mode == ALLOCATION_MODE_EXACT_COUNT:
            request.num_devices = request.count
        elif mode == ALLOCATION_MODE_ALL:
            request.all_devices = []
            for pool in self.pools:
                if pool.incomplete:
                    raise IncompletePoolError(
                        f"claim {claim_key}, request {name}: asks for all devices, but resource "
                        f"pool {pool.id} is currently being updated"
                    )
                if pool.invalid:
                    raise InvalidPoolError(
                        f"claim {claim_key}, request {name}: asks for all devices, but resource "
                        f"pool {pool.id} is currently invalid"
                    )
            for candidate in self.view.devices:
                if not self.selectable(request, candidate):
                    continue
                if self.features.consumable_capacity and not self._capacity_fits(
                    request, candidate, static=self.features.since_1_37
                ):
                    continue
                request.all_devices.append(candidate)
            request.num_devices = len(request.all_devices)
        else:
            raise InvalidRequestError(
                f"claim {claim_key}, request {name}: unsupported count mode {mode}"
            )
        return request

    # --- checks ------------------------------------------------------------------------------

    def selectable(self, request: RequestSpec, candidate: Candidate) -> bool:
        """Upstream's isSelectable: what does not change during the search (class and request
        selectors, the device's own node selection), hence cached per device and request."""
        if not self.features.binding_and_status and candidate.device.binding_conditions:
            return False
        hit = request.selectable_cache.get(candidate.position)
        if hit is not None:
            return hit
        result = self.selectors_match(
            request, candidate, request.device_class.spec.selectors, from_class=True
        )
        if result:
            result = self.selectors_match(request, candidate, request.selectors, from_class=False)
        if result and candidate.per_device_node_selection:
            d = candidate.device
            try:
                result = node_matches(self.node, d.node_name, d.all_nodes, d.node_selector)
            except InvalidNodeSelectorError as e:
                raise InvalidNodeSelectorError(f"device {candidate.id}: {e.message}") from None
        request.selectable_cache[candidate.position] = result
        return result

    def selectors_match(
        self,
        request: RequestSpec,
        candidate: Candidate,
        selectors: Sequence[DeviceSelector],
        *,
        from_class: bool,
    ) -> bool:
        """Upstream's selectorsMatch: a selector that cannot be evaluated is an input error,
        not a mismatch, so the pod fails instead of waiting for a device that never comes."""
        for i, sel in enumerate(selectors):
            expression = sel.cel.expression if sel.cel is not None else None
            if expression is None:
                where = self._selector_where(request, i, from_class)
                raise InvalidSelectorError(f"{where}: CEL expression empty")
            # 1.37's CEL takes list attributes whatever DRAListTypeAttributes says; 1.38's
            # builds no device up front (the CEL engine fails the selectors that read one).
            bad = (
                None
                if self.features.since_1_38
                else _unsupported_attribute(
                    candidate.device,
                    self.features.list_type_attributes or self.features.since_1_37,
                )
            )
            if bad is not None:
                # Upstream cannot even build the CEL device from such an attribute.
                where = self._selector_where(request, i, from_class, candidate.id)
                raise InvalidSelectorError(
                    f"{where}: CEL runtime error: attribute {bad}: unsupported attribute value"
                )
            try:
                if not self.allocator.device_matches(
                    expression, candidate.id.driver, candidate.device
                ):
                    return False
            except SelectorError as e:
                runtime = e.reason != "InvalidSelector"
                kind = "CEL runtime error" if runtime else "CEL compile error"
                where = self._selector_where(
                    request, i, from_class, candidate.id if runtime else None
                )
                raise InvalidSelectorError(f"{where}: {kind}: {e.message}") from None
        return True

    def _selector_where(
        self, request: RequestSpec, index: int, from_class: bool, device: DeviceID | None = None
    ) -> str:
        """Where a failing selector sits, for the error: built only when raising, because
        selectors_match runs once per device and request. 1.37 names the device of a runtime
        error."""
        on = f" on device {device}" if device is not None and self.features.since_1_37 else ""
        if from_class:
            return f"class {request.device_class.metadata.name}: selector #{index}{on}"
        claim_key = self.claims[request.claim_index].key
        return f"claim {claim_key}, request {request.full_name}, selector #{index}{on}"

    def _capacity_fits(
        self, request: RequestSpec, candidate: Candidate, *, static: bool = False
    ) -> bool:
        """Whether the device's capacity left (allocated and taken in this call) covers the
        request: consumable capacity is shared, so this changes while the search runs.
        ``static``: against the whole capacity (1.37's "All" requests). 1.37 stops the
        allocation at an amount its arithmetic cannot take."""
        features = self.features
        allocated = None if static else self.allocator.allocated.capacity.get(candidate.id)
        allocating = None if static else self.allocating_capacity.get(candidate.id)
        try:
            if features.since_1_38:
                fits = cap.request_fits_qualified(
                    request.capacity,
                    candidate.device.capacity,
                    allocated,
                    allocating,
                    driver=candidate.id.driver,
                    fractional=features.fractional,
                )
            else:
                fits = cap.request_fits(
                    request.capacity,
                    candidate.device.capacity,
                    allocated,
                    allocating,
                    strict=features.since_1_37,
                    fractional=features.fractional,
                )
        except cap.CapacityArithmeticError as e:
            claim_key = self.claims[request.claim_index].key
            raise InvalidRequestError(
                f"claim {claim_key}, request {request.name}: checking capacity for device "
                f"{candidate.id}: {e}"
            ) from None
        return bool(fits)

    def _in_use(self, device_id: DeviceID) -> bool:
        """Allocated already or taken in this call: off limits unless with admin access."""
        return device_id in self.allocator.allocated.devices or bool(self.allocating.get(device_id))

    def _capacity_in_use(self, device_id: DeviceID) -> bool:
        """A shared device already counted: its counters were taken by its first allocation
        (1.37 also knows one shared without capacity)."""
        return (
            device_id in self.allocator.allocated.capacity
            or device_id in self.shared_devices
            or device_id in self.allocating_capacity
        )

    def taint_blocks(self, candidate: Candidate, request: RequestSpec) -> bool:
        """A NoSchedule or NoExecute taint the request does not tolerate keeps the device out."""
        for taint in candidate.taints:
            if taint.effect in ("NoSchedule", "NoExecute") and not any(
                _tolerates(t, taint) for t in request.tolerations
            ):
                return True
        return False

    def _take_counters(self, candidate: Candidate) -> bool:
        """Upstream's checkAvailableCounters, taking them when they suffice: partitions of one
        device share its counters, so a device fits only while the pool's counters last."""
        available = self.allocator.available_counters(candidate.pool)
        consumed = self.consumed_counters.setdefault(candidate.pool.id, {})
        for set_name, counters in candidate.counters:
            have = consumed.setdefault(set_name, {})
            for n, v in counters:
                have[n] = have.get(n, Decimal(0)) + v
        for set_name, counters_left in available.items():
            used = consumed.get(set_name, {})
            for n, left in counters_left.items():
                if left < used.get(n, Decimal(0)):
                    self._release_counters(candidate)
                    return False
        return True

    def _join_groups(self, candidate: Candidate) -> list[tuple[str, Members | None, bool]] | None:
        """Upstream's checkAndConsumeCompatibilityGroups: the device joins each counter set it
        draws on if its groups fit the devices there (allocated ones included); None when not.
        Returns what each counter set was, for ``_leave_groups``."""
        running = self.members.setdefault(candidate.pool.id, {})
        allocated: dict[str, Members] | None = None
        joined: list[tuple[str, Members | None, bool]] = []
        for use in candidate.device.consumes_counters:
            name = use.counter_set or ""
            existed = name in running
            members: Members | None
            if existed:
                members = running[name]
            else:
                if allocated is None:
                    allocated = self.allocator.members(candidate.pool)
                members = allocated.get(name)
            groups = frozenset(use.compatibility_groups)
            if not admits(members, groups):
                self._leave_groups(candidate, joined)
                return None
            joined.append((name, members, existed))
            running[name] = join(members, groups)
        return joined

    def _leave_groups(
        self, candidate: Candidate, joined: list[tuple[str, Members | None, bool]]
    ) -> None:
        """Backtracking: the counter sets' groups as they were before ``_join_groups``."""
        running = self.members[candidate.pool.id]
        for name, members, existed in reversed(joined):
            if existed and members is not None:
                running[name] = members
            else:
                running.pop(name, None)

    def _derive(
        self, name: str, expression: str, device: Device, device_id: DeviceID
    ) -> DeviceAttribute:
        """Upstream's lookupAttribute for a derived attribute: its value for the device, kept for
        this call. An expression that cannot be compiled or evaluated ends the allocation."""
        key = (device_id, expression)
        hit = self.derived_values.get(key)
        if hit is not None:
            return hit
        try:
            value = self.allocator.derived_value(expression, device_id.driver, device)
            attribute = derived_attribute(value)
        except SelectorError as e:
            if e.reason == "InvalidSelector":
                raise InvalidSelectorError(
                    f"compile derived attribute {name} failed: {e.message}"
                ) from None
            raise InvalidSelectorError(
                f"evaluate derived attribute {name} on device {device_id} failed: {e.message}"
            ) from None
        except ValueError as e:
            raise InvalidSelectorError(
                f"evaluate derived attribute {name} on device {device_id} failed: {e}"
            ) from None
        self.derived_values[key] = attribute
        return attribute

    def _release_counters(self, candidate: Candidate) -> None:
        """Backtracking: give back what _take_counters took for this device."""
        consumed = self.consumed_counters[candidate.pool.id]
        for set_name, counters in candidate.counters:
            have = consumed[set_name]
            for n, v in counters:
                have[n] -= v

    # --- search ------------------------------------------------------------------------------

    def _allocate_device(
        self, request: RequestSpec, candidate: Candidate, *, must: bool
    ) -> Callable[[], None] | None:
        """Upstream's allocateDevice: take the device for the request if what changes during
        the search allows it (use by other requests, counters, constraints, taints, capacity).
        Returns the undo for backtracking, or None. ``must`` (mode All, no other device to try)
        turns a failed constraint into an input error, as upstream does."""
        claim_index = request.claim_index
        features = self.features
        multi = features.consumable_capacity and bool(candidate.device.allow_multiple_allocations)
        device_id = candidate.id
        if not multi and request.admin_access and claim_index in self.allocating.get(device_id, ()):
            return None
        if not request.admin_access and self._in_use(device_id):
            return None
        if (
            features.since_1_38
            and not request.admin_access
            and not multi
            and self._capacity_in_use(device_id)
        ):
            return None  # 1.38: still shared (allowMultipleAllocations turned off since)
        if (
            candidate.slice.spec.skip_node_operations
            and self.skips_node_operations
            and not self.node_operations_optional
        ):
            return None
        if not features.partitionable_devices and candidate.counters:
            return None
        counted = bool(candidate.counters) and not (multi and self._capacity_in_use(device_id))
        joined: list[tuple[str, Members | None, bool]] | None = None
        if counted and features.compatibility_groups:
            joined = self._join_groups(candidate)
            if joined is None:
                return None
        counters_taken = False
        if counted:
            if not self._take_counters(candidate):
                if joined is not None:
                    self._leave_groups(candidate, joined)
                return None
            counters_taken = True
        if request.parent:
            request_name, subrequest_name = request.parent, request.name
        else:
            request_name, subrequest_name = request.name, ""
        constraints = self.constraints[claim_index]
        added = 0
        marked = False
        capacity_inserted = False
        capacity_existed = False
        consumed: dict[str, Quantity] = {}
        choices = self.choices[claim_index]
        before = len(choices)

        def undo() -> None:
            del choices[before:]
            if capacity_inserted:
                have = self.allocating_capacity.get(device_id)
                if have is not None:
                    for n, q in consumed.items():
                        if n in have:
                            have[n] -= q.value
                    if all(v == 0 for v in have.values()):
                        del self.allocating_capacity[device_id]
                if capacity_existed and device_id not in self.allocating_capacity:
                    self.allocating_capacity[device_id] = {}
            if marked:
                self.allocating[device_id].discard(claim_index)
            for c in reversed(constraints[:added]):
                c.remove(request_name, subrequest_name)
            if joined is not None:
                self._leave_groups(candidate, joined)
            if counters_taken:
                self._release_counters(candidate)

        if features.device_taints and self.taint_blocks(candidate, request):
            undo()
            return None
        derived = request.derived
        for c in constraints:
            try:
                ok = c.add(request_name, subrequest_name, candidate.device, device_id, derived)
            except BaseException:  # a derived attribute that cannot be evaluated
                undo()
                raise
            if not ok:
                undo()
                if must:
                    raise InvalidRequestError(
                        f"claim {self.claims[claim_index].key}, request {request.name}: cannot "
                        f"add device {device_id} because a claim constraint would not be "
                        "satisfied"
                    )
                return None
            added += 1
        if not multi:
            self.allocating.setdefault(device_id, set()).add(claim_index)
            marked = True
        share_id: str | None = None
        if features.consumable_capacity:
            if not self._capacity_fits(request, candidate):
                undo()
                return None
            if multi:
                if features.since_1_38:
                    consumed = cap.consumption_qualified(
                        request.capacity,
                        candidate.device.capacity,
                        driver=device_id.driver,
                        fractional=features.fractional,
                    )
                else:
                    consumed = cap.consumption(
                        request.capacity,
                        candidate.device.capacity,
                        strict=features.since_1_37,
                        fractional=features.fractional,
                    )
                share_id = self.allocator.share_ids()
                capacity_existed = device_id in self.allocating_capacity
                have = self.allocating_capacity.setdefault(device_id, {})
                for n, q in consumed.items():
                    have[n] = have.get(n, Decimal(0)) + q.value
                capacity_inserted = True
        reported = consumed
        if consumed and features.since_1_38:
            reported = cap.for_status(consumed, candidate.device.capacity, device_id.driver)
        choices.append(Choice(request, candidate, share_id, reported or None))
        return undo

    def _allocate_one(
        self,
        claim_index: int,
        request_index: int = 0,
        subrequest_index: int = 0,
        device_index: int = 0,
        in_subrequest: bool = False,
        order_start: int = 0,
    ) -> bool:
        """Upstream's allocateOne: choose the ``device_index``-th device of a request, then
        recurse to the next device, request and claim; backtrack on failure. True when all
        claims from here on are satisfied.

        A request with firstAvailable tries its subrequests in order and keeps the first that
        works (``in_subrequest`` says one is being tried). Mode All takes its fixed devices in
        order. Otherwise devices are tried in search order from ``order_start``: the devices
        of one request are chosen in increasing order, so no set of devices is tried twice in
        another permutation.
        """
        self.steps += 1
        if not self.steps & 255:  # cheap enough for the innermost step, often enough to stop
            self.allocator.check_time()
        if claim_index >= len(self.claims):
            return True
        requests = self.requests[claim_index]
        if request_index >= len(requests):
            try:
                return self._allocate_one(claim_index + 1)
            except _MaxSizeExceededError:
                return False
        alternatives = requests[request_index]
        if not in_subrequest and alternatives.first_available:
            all_exceeded = True
            for option_index in range(len(alternatives.options)):
                try:
                    ok = self._allocate_one(
                        claim_index, request_index, option_index, device_index, in_subrequest=True
                    )
                except _MaxSizeExceededError:
                    continue
                all_exceeded = False
                if ok:
                    alternatives.selected = option_index
                    return True
            if all_exceeded:
                raise _MaxSizeExceededError
            return False
        request = alternatives.options[subrequest_index]
        all_mode = request.mode == ALLOCATION_MODE_ALL
        if all_mode and not request.all_devices:
            return False
        if device_index >= request.num_devices:
            return self._allocate_one(claim_index, request_index + 1)
        if (
            len(self.choices[claim_index]) + request.num_devices - device_index
            > AllocationResultsMaxSize
        ):
            raise _MaxSizeExceededError
        next_device = device_index + 1
        if all_mode:
            assert request.all_devices is not None
            undo = self._allocate_device(request, request.all_devices[device_index], must=True)
            if undo is None:
                return False
            try:
                done = self._allocate_one(
                    claim_index, request_index, subrequest_index, next_device, in_subrequest
                )
            except BaseException:
                undo()
                raise
            if not done:
                undo()
            return done
        order = self.search_order
        consumable_capacity = self.features.consumable_capacity
        for order_position in range(order_start, len(order)):
            candidate = order[order_position]
            if request.admin_access:
                if claim_index in self.allocating.get(candidate.id, ()):
                    continue
            elif self._in_use(candidate.id):
                continue
            if not self.selectable(request, candidate):
                continue
            if consumable_capacity and not self._capacity_fits(request, candidate):
                continue
            undo = self._allocate_device(request, candidate, must=False)
            if undo is None:
                continue
            try:
                done = self._allocate_one(
                    claim_index,
                    request_index,
                    subrequest_index,
                    next_device,
                    in_subrequest,
                    order_position + 1,
                )
            except BaseException:
                undo()
                raise
            if done:
                return True
            undo()
        return False


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
    "CounterUse",
    "NodeView",
    "RequestSpec",
    "Search",
    "Snapshot",
]
