"""Whole-pool checks of the pool validator, on top of the allocator's own (``pools``).

KEP-4815 moved cross-slice validation from admission to allocation time; the allocator only
needs to know whether a pool is usable and stops at the first problem. The validator reports
every problem, with a code and the slice and device it is about, and adds checks the allocator
does not need (it would merely skip the device, or never look): per-slice API rules, devices
that can never fit their counters, conflicting node selection, and allocations that two
schedulers racing on one pool would produce. The allocator's checks are not repeated here:
``pools.pool_problems`` runs them, so the validator and the scheduler never disagree.

Pure: all state comes in as arguments; timing (grace periods) is the caller's business.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from operators.allocator.features import Features
from operators.allocator.pools import (
    COUNTER_NOT_FOUND,
    COUNTER_SET_NOT_FOUND,
    DUPLICATE_COUNTER_SET,
    DUPLICATE_DEVICE_NAME,
    PoolGeneration,
    PoolProblem,
    generation_of,
    pool_id_of,
    pool_problems,
    slice_name,
)
from operators.allocator.state import AllocatedState
from operators.api import limits
from operators.api.ids import PoolID
from operators.api.quantity import Quantity
from operators.api.resource import CounterSet, Device, ResourceClaim, ResourceSlice
from operators.api.validation import FieldViolation, validate_resource_slice

# Codes of the validator's own checks (the allocator's four come from ``pools``).
SHARED_COUNTERS_WITH_DEVICES = "SharedCountersWithDevices"
DEVICE_NODE_SELECTION = "DeviceNodeSelection"
TOO_MANY_DEVICES = "TooManyDevices"
INVALID_SLICE = "InvalidSlice"
CONSUMPTION_EXCEEDS_COUNTER = "ConsumptionExceedsCounter"
CONFLICTING_NODE_SELECTION = "ConflictingNodeSelection"
INCONSISTENT_SLICE_COUNT = "InconsistentSliceCount"
TOO_MANY_SLICES = "TooManySlices"
DOUBLE_ALLOCATION = "DoubleAllocation"
COUNTER_OVERCOMMITTED = "CounterOvercommitted"
# Reported by the controller once a grace period has passed (they depend on time).
INCOMPLETE_TOO_LONG = "IncompleteTooLong"
STALE_GENERATION = "StaleGeneration"

ERROR = "Error"
WARNING = "Warning"

#: Severity of every code: errors make the pool invalid, warnings are for people to look at.
SEVERITY: Mapping[str, str] = {
    DUPLICATE_DEVICE_NAME: ERROR,
    DUPLICATE_COUNTER_SET: ERROR,
    COUNTER_SET_NOT_FOUND: ERROR,
    COUNTER_NOT_FOUND: ERROR,
    SHARED_COUNTERS_WITH_DEVICES: ERROR,
    DEVICE_NODE_SELECTION: ERROR,
    TOO_MANY_DEVICES: ERROR,
    INVALID_SLICE: ERROR,
    CONSUMPTION_EXCEEDS_COUNTER: ERROR,
    CONFLICTING_NODE_SELECTION: ERROR,
    INCONSISTENT_SLICE_COUNT: ERROR,
    TOO_MANY_SLICES: ERROR,
    DOUBLE_ALLOCATION: ERROR,
    COUNTER_OVERCOMMITTED: ERROR,
    INCOMPLETE_TOO_LONG: WARNING,
    STALE_GENERATION: WARNING,
}


def severity_of(code: str) -> str:
    return SEVERITY.get(code, ERROR)


@dataclass(frozen=True, slots=True)
class CounterUsage:
    """One counter of a shared counter set: what allocated devices consume of its total."""

    counter_set: str
    counter: str
    consumed: Quantity
    total: Quantity
    slice: str = ""

    @property
    def overcommitted(self) -> bool:
        return self.consumed.value > self.total.value


@dataclass(frozen=True, slots=True)
class PoolReport:
    """Everything the validator found out about one pool (its newest generation)."""

    id: PoolID
    generation: int
    complete: bool
    slices: int
    expected_slices: int
    stale_slices: tuple[str, ...]
    devices: int
    allocated_devices: int
    counters: tuple[CounterUsage, ...]
    problems: tuple[PoolProblem, ...]

    @property
    def errors(self) -> tuple[PoolProblem, ...]:
        return tuple(p for p in self.problems if severity_of(p.code) == ERROR)


def check_pool(
    group: PoolGeneration, claims: Iterable[ResourceClaim], features: Features
) -> PoolReport:
    """The full verdict on one pool; ``claims`` are the allocated claims (others are ignored).

    A complete pool gets every check; an incomplete one those that cannot be fixed by the
    slices still missing (a counter set may still arrive, a duplicate name cannot go away).
    """
    slices = sorted(group.slices, key=slice_name)
    complete = group.complete
    problems, counter_sets = pool_problems(slices, features, complete=complete)
    problems = list(problems)
    problems.extend(_slice_count_problems(group, slices))
    for s in slices:
        problems.extend(slice_problems(s))
    problems.extend(_exceeding_consumption(slices, counter_sets))
    problems.extend(_conflicting_node_selection([*slices, *group.older]))

    pool_claims = [c for c in claims if touches(c, group.id)]
    devices = pool_devices(slices, features)
    problems.extend(_double_allocations(group.id, pool_claims, devices))
    state = AllocatedState.from_claims(pool_claims, features)
    allocated = {name for name in devices if state.is_allocated(group.id.device(name))}
    counters = _counter_usage(slices, counter_sets, allocated, features)
    problems.extend(
        PoolProblem(
            COUNTER_OVERCOMMITTED,
            f"allocated devices consume {u.consumed} of counter {u.counter} in counter set "
            f"{u.counter_set}, which has {u.total}",
            u.slice,
        )
        for u in counters
        if u.overcommitted
    )
    return PoolReport(
        id=group.id,
        generation=group.generation,
        complete=complete,
        slices=len(slices),
        expected_slices=group.expected_slices,
        stale_slices=tuple(sorted(slice_name(s) for s in group.older)),
        devices=len(devices),
        allocated_devices=len(allocated),
        counters=tuple(counters),
        problems=tuple(problems),
    )


def admission_problems(
    candidate: ResourceSlice, stored: Sequence[ResourceSlice], features: Features
) -> list[PoolProblem]:
    """Errors that admitting ``candidate`` would add to its pool, as ``stored`` shows the pool.

    ``stored`` holds the pool's slices as the cache has them, including the version of the
    candidate being replaced. Problems the pool has already are not the candidate's doing:
    a driver must always be able to write the slice that fixes them. A slice of an older
    generation than the pool's newest is ignored by allocators, so it is not judged.
    """
    name = slice_name(candidate)
    others = [s for s in stored if slice_name(s) != name]
    previous = next((s for s in stored if slice_name(s) == name), None)
    generation = generation_of(candidate)
    if any(generation_of(s) > generation for s in others):
        return []

    def errors(version: ResourceSlice | None) -> list[PoolProblem]:
        members = [s for s in others if generation_of(s) == generation]
        if version is not None and generation_of(version) == generation:
            members.append(version)
        if not members:
            return []
        older = tuple(s for s in others if generation_of(s) < generation)
        group = PoolGeneration(pool_id_of(candidate), generation, tuple(members), older)
        return list(check_pool(group, (), features).errors)

    already = Counter((p.code, p.message, p.device) for p in errors(previous))
    added = []
    for problem in errors(candidate):
        key = (problem.code, problem.message, problem.device)
        if already[key] > 0:
            already[key] -= 1
        else:
            added.append(problem)
    return added


# --- per slice -------------------------------------------------------------------------


def _advanced(s: ResourceSlice) -> bool:
    """Devices with taints, counter consumption or list attributes lower the device limit."""
    return any(
        d.taints or d.consumes_counters or any(a.is_list for a in d.attributes.values())
        for d in s.spec.devices
    )


def _covered(v: FieldViolation) -> bool:
    """Violations that a dedicated check below reports under its own code."""
    m = v.message
    return (
        "only one of `sharedCounters` or `devices` is allowed" in m
        or "can only be set if `perDeviceNodeSelection` is set to true" in m
        or (m.startswith("Required value") and "when `perDeviceNodeSelection` is set" in m)
        or (v.path == "spec.devices" and m.startswith("Too many"))
    )


def slice_problems(s: ResourceSlice) -> list[PoolProblem]:
    """What is wrong with one slice on its own (the API server checks the same at admission;
    a slice from an older server, or written before a limit tightened, can still be wrong)."""
    name = slice_name(s)
    spec = s.spec
    problems: list[PoolProblem] = []
    if spec.shared_counters and spec.devices:
        problems.append(
            PoolProblem(
                SHARED_COUNTERS_WITH_DEVICES,
                "slice holds both sharedCounters and devices; only one of them is allowed",
                name,
            )
        )
    per_device = spec.per_device_node_selection is True
    for d in spec.devices:
        has = d.node_name is not None or d.node_selector is not None or d.all_nodes is not None
        if per_device and not has:
            problems.append(
                PoolProblem(
                    DEVICE_NODE_SELECTION,
                    "slice sets perDeviceNodeSelection but the device sets none of nodeName, "
                    "nodeSelector, allNodes",
                    name,
                    d.name or "",
                )
            )
        elif not per_device and has:
            problems.append(
                PoolProblem(
                    DEVICE_NODE_SELECTION,
                    "device sets node selection but the slice does not set perDeviceNodeSelection",
                    name,
                    d.name or "",
                )
            )
    maximum = (
        limits.ResourceSliceMaxDevicesWithAdvancedFeatures
        if _advanced(s)
        else limits.ResourceSliceMaxDevices
    )
    if len(spec.devices) > maximum:
        why = " (devices use taints, counters or list attributes)" if _advanced(s) else ""
        problems.append(
            PoolProblem(
                TOO_MANY_DEVICES,
                f"slice has {len(spec.devices)} devices, at most {maximum} are allowed{why}",
                name,
            )
        )
    problems.extend(
        PoolProblem(INVALID_SLICE, str(v), name, _device_at(s, v.path))
        for v in validate_resource_slice(s)
        if not _covered(v)
    )
    return problems


def _device_at(s: ResourceSlice, path: str) -> str:
    """The device name a ``spec.devices[i]...`` path points at, or ""."""
    prefix = "spec.devices["
    if not path.startswith(prefix):
        return ""
    index = path[len(prefix) :].split("]", 1)[0]
    if not index.isdigit() or int(index) >= len(s.spec.devices):
        return ""
    return s.spec.devices[int(index)].name or ""


# --- across slices -----------------------------------------------------------------------


def _slice_count_problems(
    group: PoolGeneration, slices: Sequence[ResourceSlice]
) -> list[PoolProblem]:
    problems = []
    counts = {s.spec.pool.resource_slice_count or 0 for s in slices}
    if len(counts) > 1:
        problems.append(
            PoolProblem(
                INCONSISTENT_SLICE_COUNT,
                f"slices of generation {group.generation} disagree on resourceSliceCount: "
                + ", ".join(
                    f"{slice_name(s)}={s.spec.pool.resource_slice_count or 0}" for s in slices
                ),
            )
        )
    if len(slices) > group.expected_slices:
        problems.append(
            PoolProblem(
                TOO_MANY_SLICES,
                f"{len(slices)} slices of generation {group.generation} are published, "
                f"resourceSliceCount says {group.expected_slices}",
            )
        )
    return problems


def _exceeding_consumption(
    slices: Sequence[ResourceSlice], counter_sets: Mapping[str, CounterSet]
) -> list[PoolProblem]:
    """Devices that consume more of a counter than the counter set has: never allocatable."""
    problems = []
    for s in slices:
        for d in s.spec.devices:
            for use in d.consumes_counters:
                cs = counter_sets.get(use.counter_set or "")
                if cs is None:
                    continue
                for name, need in use.counters.items():
                    have = cs.counters.get(name)
                    if have is None or have.value is None or need.value is None:
                        continue
                    if need.value.value > have.value.value:
                        problems.append(
                            PoolProblem(
                                CONSUMPTION_EXCEEDS_COUNTER,
                                f"device consumes {need.value} of counter {name} in counter set "
                                f"{cs.name}, which has {have.value}: it can never be allocated",
                                slice_name(s),
                                d.name or "",
                            )
                        )
    return problems


def node_selection_of(s: ResourceSlice) -> str | None:
    """How a device slice selects nodes, as comparable text; None when it is not slice-wide
    (per-device selection) or the slice only holds counters."""
    spec = s.spec
    if spec.per_device_node_selection or not spec.devices:
        return None
    if spec.node_name:
        return f"nodeName {spec.node_name}"
    if spec.all_nodes:
        return "allNodes"
    if spec.node_selector is not None:
        return "nodeSelector " + json.dumps(spec.node_selector.dump(), sort_keys=True)
    return None


def _conflicting_node_selection(slices: Sequence[ResourceSlice]) -> list[PoolProblem]:
    """Device slices of one pool (any generation) that select different nodes: typically two
    nodes' drivers publishing the same pool name, overwriting each other's generations."""
    ordered = sorted(slices, key=lambda s: (-(s.spec.pool.generation or 0), slice_name(s)))
    selections = [(s, node_selection_of(s)) for s in ordered]
    selections = [(s, sel) for s, sel in selections if sel is not None]
    if not selections:
        return []
    reference_slice, reference = selections[0]
    return [
        PoolProblem(
            CONFLICTING_NODE_SELECTION,
            f"slice selects {sel}, but slice {slice_name(reference_slice)} of the same pool "
            f"selects {reference}",
            slice_name(s),
        )
        for s, sel in selections
        if sel != reference
    ]


# --- allocations ---------------------------------------------------------------------------


def touches(claim: ResourceClaim, pool: PoolID) -> bool:
    """Whether the claim's allocation has a device of the pool (the only claims it needs)."""
    return any(r.device_id.pool_id == pool for r in claim.allocated_results())


def pool_devices(
    slices: Sequence[ResourceSlice], features: Features
) -> dict[str, tuple[str, Device]]:
    """Devices of the pool by name: (slice name, device); the first of duplicates."""
    found: dict[str, tuple[str, Device]] = {}
    for s in slices:
        if features.partitionable_devices and s.spec.shared_counters:
            continue
        for d in s.spec.devices:
            found.setdefault(d.name or "", (slice_name(s), d))
    return found


def _double_allocations(
    pool: PoolID,
    claims: Sequence[ResourceClaim],
    devices: Mapping[str, tuple[str, Device]],
) -> list[PoolProblem]:
    """Devices allocated to several claims that do not share them (two schedulers racing)."""
    users: dict[str, dict[str, bool]] = {}  # device -> claim key -> holds it exclusively
    for claim in sorted(claims, key=lambda c: c.key):
        for r in claim.allocated_results():
            if r.device_id.pool_id != pool or r.admin_access:
                continue
            held = users.setdefault(r.device or "", {})
            held[claim.key] = held.get(claim.key, False) or r.share_id is None
    problems = []
    for name in sorted(users):
        held = users[name]
        if len(held) < 2:
            continue
        found = devices.get(name)
        slice_ = found[0] if found else ""
        shareable = found is not None and found[1].allow_multiple_allocations is True
        if shareable and not any(held.values()):
            continue
        problems.append(
            PoolProblem(
                DOUBLE_ALLOCATION,
                f"device is allocated to claims {', '.join(sorted(held))}, which do not share it",
                slice_,
                name,
            )
        )
    return problems


def _counter_usage(
    slices: Sequence[ResourceSlice],
    counter_sets: Mapping[str, CounterSet],
    allocated: set[str],
    features: Features,
) -> list[CounterUsage]:
    """Per counter of every counter set: consumed by allocated devices, and the total."""
    consumed: dict[tuple[str, str], Decimal] = {}
    for name, (_, device) in pool_devices(slices, features).items():
        if name not in allocated:
            continue
        for use in device.consumes_counters:
            for counter, c in use.counters.items():
                if c.value is not None:
                    key = (use.counter_set or "", counter)
                    consumed[key] = consumed.get(key, Decimal(0)) + c.value.value
    where = {
        cs.name or "": slice_name(s)
        for s in reversed(slices)
        for cs in s.spec.shared_counters  # the first slice of a duplicate wins
    }
    usage = []
    for set_name in sorted(counter_sets):
        cs = counter_sets[set_name]
        for counter in sorted(cs.counters):
            total = cs.counters[counter].value or Quantity(0)
            used = consumed.get((set_name, counter), Decimal(0))
            usage.append(
                CounterUsage(
                    set_name,
                    counter,
                    Quantity.from_decimal(used, total.format),
                    total,
                    where.get(set_name, ""),
                )
            )
    return usage
