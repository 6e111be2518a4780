"""What is already taken: devices held exclusively, shares of shareable devices, their capacity.

Read from claims' ``status.allocation`` (allocated and in-flight alike), as kube-scheduler's
claim tracker does: adminAccess results never count; results with a ``shareID`` share their
device and add up ``consumedCapacity``; everything else holds its device exclusively. 1.38 keys
the consumed capacity by fully qualified name (``capacity.qualified_amounts``), 1.36 and 1.37 by
the name the claim's status gives.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Generic, TypeVar

from operators.allocator.capacity import qualified_amounts
from operators.allocator.features import Features
from operators.api.ids import DeviceID
from operators.api.resource import DeviceRequestAllocationResult, ResourceClaim

S = TypeVar("S")


class DeviceSet(AbstractSet[DeviceID]):
    """A frozen set of devices kept as a base shared between snapshots and the small changes
    since: the tracker's state after one claim's change costs that change, not a copy of every
    allocated device (36,000 at 5,000 nodes: 2-4 ms a cycle). ``removed`` is within ``base``,
    ``added`` outside it."""

    __slots__ = ("_added", "_base", "_removed")

    def __init__(
        self,
        base: frozenset[DeviceID],
        added: frozenset[DeviceID] = frozenset(),
        removed: frozenset[DeviceID] = frozenset(),
    ) -> None:
        self._base, self._added, self._removed = base, added, removed

    def __contains__(self, device: object) -> bool:
        return device in self._added or (device in self._base and device not in self._removed)

    def __iter__(self) -> Iterator[DeviceID]:
        removed = self._removed
        yield from (d for d in self._base if d not in removed)
        yield from self._added

    def __len__(self) -> int:
        return len(self._base) - len(self._removed) + len(self._added)

    __hash__ = AbstractSet._hash

    @classmethod
    def _from_iterable(cls, items: Iterable[S]) -> AbstractSet[S]:
        """What the set operators build (``|``, ``-``, ``&``): plain frozensets."""
        return frozenset(items)

    def union(self, devices: Iterable[DeviceID]) -> DeviceSet:
        devices = set(devices)
        return DeviceSet(
            self._base,
            self._added | (devices - self._base),
            self._removed - devices,
        )

    def difference(self, devices: Iterable[DeviceID]) -> DeviceSet:
        devices = set(devices)
        return DeviceSet(
            self._base,
            self._added - devices,
            self._removed | (devices & self._base),
        )


def _union(devices: AbstractSet[DeviceID], more: set[DeviceID]) -> AbstractSet[DeviceID]:
    return devices.union(more) if isinstance(devices, DeviceSet) else frozenset(devices) | more


def _difference(devices: AbstractSet[DeviceID], gone: set[DeviceID]) -> AbstractSet[DeviceID]:
    return devices.difference(gone) if isinstance(devices, DeviceSet) else frozenset(devices) - gone


@dataclass(frozen=True, slots=True)
class AllocatedState:
    """Devices and capacity in use before this cycle allocates anything."""

    devices: AbstractSet[DeviceID] = frozenset()
    shared: frozenset[tuple[DeviceID, str]] = frozenset()
    capacity: Mapping[DeviceID, Mapping[str, Decimal]] = field(default_factory=dict)

    def is_allocated(self, device: DeviceID) -> bool:
        """Upstream's IsDeviceAllocated: held, shared, or with consumed capacity."""
        return (
            device in self.devices
            or device in self.capacity
            or any(d == device for d, _ in self.shared)
        )

    def without(self, holdings: Iterable[Holding]) -> AllocatedState:
        """The state once these allocations are gone (preemption's victims released them).

        A shared device keeps its capacity entry while other shares of it remain; a device
        held exclusively by two claims (a double allocation) is not expected here.
        """
        holdings = list(holdings)
        if not holdings:
            return self
        devices = {d for h in holdings for d in h.devices}
        shared = {s for h in holdings for s in h.shared}
        remaining_shared = self.shared - shared
        capacity = {d: dict(c) for d, c in self.capacity.items()}
        for h in holdings:
            for device, name, value in h.consumed:
                have = capacity.get(device)
                if have is not None and name in have:
                    have[name] -= value
        still_shared = {d for d, _ in remaining_shared}
        for device in {d for h in holdings for d in h.capacity_devices}:
            if device not in still_shared:
                capacity.pop(device, None)
        return AllocatedState(_difference(self.devices, devices), remaining_shared, capacity)

    def plus(self, holdings: Iterable[Holding]) -> AllocatedState:
        """The state with these allocations taken as well (devices nominated for a pod)."""
        holdings = list(holdings)
        if not holdings:
            return self
        capacity = {d: dict(c) for d, c in self.capacity.items()}
        for h in holdings:
            for device in h.capacity_devices:
                capacity.setdefault(device, {})
            for device, name, value in h.consumed:
                have = capacity.setdefault(device, {})
                have[name] = have.get(name, Decimal(0)) + value
        return AllocatedState(
            _union(self.devices, {d for h in holdings for d in h.devices}),
            self.shared | {s for h in holdings for s in h.shared},
            capacity,
        )

    @classmethod
    def from_claims(cls, claims: Iterable[ResourceClaim], features: Features) -> AllocatedState:
        """Collect the state from allocated (and in-flight) claims.

        What ``AllocatedTracker`` adds up claim by claim, in one pass without its bookkeeping
        for taking claims back: a cold allocator call starts here.
        """
        devices: set[DeviceID] = set()
        shared: set[tuple[DeviceID, str]] = set()
        consumed: dict[DeviceID, dict[str, Decimal]] = {}
        consumable = features.consumable_capacity
        for claim in claims:
            for result in claim.allocated_results():
                if result.admin_access:
                    continue
                device = result.device_id
                if consumable and result.share_id is not None:
                    shared.add((device, result.share_id))
                    if result.consumed_capacity:
                        have = consumed.setdefault(device, {})
                        for name, value in _amounts(result, features):
                            have[name] = have.get(name, Decimal(0)) + value
                    continue
                devices.add(device)
        return cls(frozenset(devices), frozenset(shared), consumed)


@dataclass(frozen=True, slots=True)
class Holding:
    """What one claim's allocation takes: the unit the tracker adds and takes back."""

    devices: tuple[DeviceID, ...] = ()
    shared: tuple[tuple[DeviceID, str], ...] = ()
    consumed: tuple[tuple[DeviceID, str, Decimal], ...] = ()
    capacity_devices: tuple[DeviceID, ...] = ()  # shared devices with consumedCapacity

    @property
    def used(self) -> set[DeviceID]:
        """The devices it uses, held or shared."""
        return {*self.devices, *(d for d, _ in self.shared)}

    @classmethod
    def of(cls, claim: ResourceClaim, features: Features) -> Holding:
        return cls.of_results(claim.allocated_results(), features)

    @classmethod
    def of_results(
        cls, results: Iterable[DeviceRequestAllocationResult], features: Features
    ) -> Holding:
        """What these allocation results take (a claim's, or a nominated pod's planned ones)."""
        devices: list[DeviceID] = []
        shared: list[tuple[DeviceID, str]] = []
        consumed: list[tuple[DeviceID, str, Decimal]] = []
        capacity_devices: list[DeviceID] = []
        for result in results:
            if result.admin_access:
                continue
            device = result.device_id
            if features.consumable_capacity and result.share_id is not None:
                shared.append((device, result.share_id))
                if result.consumed_capacity:
                    capacity_devices.append(device)
                    consumed.extend((device, name, v) for name, v in _amounts(result, features))
                continue
            devices.append(device)
        return cls(tuple(devices), tuple(shared), tuple(consumed), tuple(capacity_devices))


def _amounts(
    result: DeviceRequestAllocationResult, features: Features
) -> Iterable[tuple[str, Decimal]]:
    """A shared result's consumed capacity as the release's scheduler keys it."""
    consumed = result.consumed_capacity or {}
    if features.since_1_38:
        return qualified_amounts(consumed, result.driver or "").items()
    return ((name, q.value) for name, q in consumed.items())


K = TypeVar("K", bound=Hashable)


class AllocatedTracker(Generic[K]):
    """The AllocatedState of a changing set of claims, kept up to date claim by claim.

    A scheduler sees one claim change at a time; rebuilding the state from every allocated
    claim for every pod made a cycle O(allocated claims) and was a quarter of its time.
    ``state()`` is rebuilt only after a change, from running totals.
    """

    #: The changes a state carries beside its base before the base is rebuilt: at least
    #: REBASE_MIN, else a REBASE_SHARE-th of the base (a rebuild costs the base's size).
    REBASE_MIN = 64
    REBASE_SHARE = 16

    def __init__(self, features: Features) -> None:
        self.features = features
        self._held: dict[K, Holding] = {}
        self._users: dict[DeviceID, set[K]] = {}
        # Plain dicts, not Counters: a frozenset built from a dict reuses the hashes it stores,
        # where one built from a Counter hashes every DeviceID again (issue 61: at 36,000
        # allocated devices that was most of a cycle's CPU).
        self._devices: dict[DeviceID, int] = {}
        # The held devices as the base of the last rebuild and the changes since (DeviceSet).
        self._base: frozenset[DeviceID] = frozenset()
        self._added: set[DeviceID] = set()
        self._removed: set[DeviceID] = set()
        self._shared: dict[tuple[DeviceID, str], int] = {}
        self._capacity_holders: dict[DeviceID, int] = {}
        self._consumed: dict[DeviceID, dict[str, Decimal]] = {}
        self._consumers: dict[tuple[DeviceID, str], int] = {}
        self._state: AllocatedState | None = AllocatedState()
        # Bumped whenever a claim gives up what it held (deallocated, deleted, reallocated):
        # a scheduling cycle that started at an older count may have missed room.
        self.releases = 0

    def __len__(self) -> int:
        return len(self._held)

    def track(self, key: K, claim: ResourceClaim | None) -> None:
        """``claim`` (allocated or not) is now what ``key`` holds; None: it holds nothing."""
        holding = Holding.of(claim, self.features) if claim is not None else None
        if holding == Holding():
            holding = None
        old = self._held.pop(key, None)
        if old == holding:
            if holding is not None:
                self._held[key] = holding
            return
        if old is not None:
            self._apply(key, old, -1)
            self.releases += 1
        if holding is not None:
            self._held[key] = holding
            self._apply(key, holding, 1)
        self._state = None

    def holding(self, key: K) -> Holding | None:
        """What ``key`` holds now (None: nothing)."""
        return self._held.get(key)

    def users(self, device: DeviceID) -> set[K]:
        """Keys of the claims whose allocation uses ``device`` (held or shared, not admin)."""
        return set(self._users.get(device, ()))

    def _apply(self, key: K, holding: Holding, sign: int) -> None:
        for device in holding.used:
            users = self._users.setdefault(device, set())
            if sign > 0:
                users.add(key)
            else:
                users.discard(key)
                if not users:
                    del self._users[device]
        for device in holding.devices:
            _count(self._devices, device, sign)
            held = device in self._devices
            if held and device not in self._base:
                self._added.add(device)
            elif not held and device in self._base:
                self._removed.add(device)
            else:  # back to what the base says
                self._added.discard(device)
                self._removed.discard(device)
        for pair in holding.shared:
            _count(self._shared, pair, sign)
        for device in holding.capacity_devices:
            _count(self._capacity_holders, device, sign)
        for device, name, value in holding.consumed:
            have = self._consumed.setdefault(device, {})
            have[name] = have.get(name, Decimal(0)) + sign * value
            _count(self._consumers, (device, name), sign)
            if (device, name) not in self._consumers:
                del have[name]
                if not have:
                    del self._consumed[device]

    def state(self) -> AllocatedState:
        if self._state is None:
            changes = len(self._added) + len(self._removed)
            if changes > max(self.REBASE_MIN, len(self._base) // self.REBASE_SHARE):
                self._base = frozenset(self._devices)
                self._added, self._removed = set(), set()
                changes = 0
            self._state = AllocatedState(
                DeviceSet(self._base, frozenset(self._added), frozenset(self._removed))
                if changes
                else self._base,
                frozenset(self._shared),
                {d: dict(self._consumed.get(d, {})) for d in self._capacity_holders},
            )
        return self._state


def _count(counts: dict[Any, int], key: Any, sign: int) -> None:
    count = counts.get(key, 0) + sign
    if count > 0:
        counts[key] = count
    else:
        counts.pop(key, None)
