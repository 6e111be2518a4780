"""How many devices of a pool are free, within the fields of KEP-5677's ``PoolStatus``.

kube-controller-manager 1.36 counts one allocated device per claim result and none
unavailable, which KEP-5677 itself calls wrong for shared devices and partitions. Here the
counts are the allocator's view, so that ``availableDevices`` never promises a device the
allocator would refuse:

- a device is allocated once however many claims share it (``AllocatedState``, like the
  scheduler), and adminAccess results take nothing;
- an unallocated device is unavailable when a NoSchedule or NoExecute taint (its own or a
  DeviceTaintRule's) keeps it from new claims, or when what it consumes of its shared
  counters is more than the allocated devices left of them;
- a pool the allocator refuses whole (a duplicate device name, a consumption of a counter set
  that is not there or bigger than it) has every unallocated device unavailable;
- available = total - allocated - unavailable, as 1.36 defines it.

A pool whose newest generation is not fully published gets kube-controller-manager's
``validationError`` and no counts, so that a partial view is never taken for the pool.

On a 1.37 cluster a pool also gets 1.37's views, where they apply, by the same rules:

- ``partitionSummary``: the devices that consume shared counters, grouped by the value of
  their partition type attribute (their slice's ``partitionTypeAttribute``, or, where no slice
  of the pool names one, the request's ``defaultPartitionTypeAttribute``): per type, how many
  there are and how many more could be allocated, one after the other, from the counters the
  allocated devices leave (each type on its own); a device that is allocated, tainted or of a
  refused pool is never one more;
- ``shareableSummary``: the ``allowMultipleAllocations`` devices with no share (fully
  available) and with shares but capacity left (partially available), and per capacity the
  total, what the shares consume and what is left to allocate (of usable devices only);
- a view that cannot be computed (a device without its partition type, one type at two costs,
  more than 32 entries) is left out, and the pool's ``validationError`` says why with 1.37's
  machine-readable prefix (``PartitionTypeMissing:`` ...); the counts stay.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Final

from operators.allocator.capacity import qualified_name
from operators.allocator.features import Features
from operators.allocator.pool_checks import PoolReport, pool_devices, touches
from operators.allocator.pools import PoolGeneration, pool_problems, slice_name
from operators.allocator.state import AllocatedState
from operators.api.features import DEFAULT_RELEASE, Release
from operators.api.ids import DeviceID
from operators.api.meta import Condition
from operators.api.poolstatus import (
    CONDITION_COMPLETE,
    CONDITION_FAILED,
    LIMIT_DEFAULT,
    LIMIT_MAX,
    REASON_COMPLETE,
    REASON_FAILED,
    SUMMARY_MAX_ITEMS,
    VALIDATION_ERROR_MAX_BYTES,
    PartitionTypeStatus,
    PoolStatus,
    ResourcePoolStatusRequestSpec,
    ResourcePoolStatusRequestStatus,
    ShareableCapacityStatus,
    ShareableSummaryStatus,
)
from operators.api.quantity import Quantity
from operators.api.resource import (
    TAINT_EFFECT_NO_EXECUTE,
    TAINT_EFFECT_NO_SCHEDULE,
    Device,
    DeviceTaint,
    DeviceTaintRule,
    ResourceClaim,
)

#: Taint effects that keep a device from new claims (effect None only informs).
BLOCKING_EFFECTS = frozenset({TAINT_EFFECT_NO_SCHEDULE, TAINT_EFFECT_NO_EXECUTE})
#: The release whose pool status has the partition and shareable views.
VIEWS_SINCE: Final = Release(1, 37)
#: 1.37's machine-readable prefixes of ``validationError``.
PREFIX_INCOMPLETE: Final = "PoolIncomplete:"
PREFIX_PARTITION_TYPE_MISSING: Final = "PartitionTypeMissing:"
PREFIX_PARTITION_COST_MISMATCH: Final = "PartitionCostMismatch:"
PREFIX_PARTITION_OVER_CAP: Final = "PartitionSummaryOverCap:"
PREFIX_SHAREABLE_OVER_CAP: Final = "ShareableSummaryOverCap:"


def _bounded(message: str) -> str:
    return message.encode()[:VALIDATION_ERROR_MAX_BYTES].decode(errors="ignore")


def incomplete_message(group: PoolGeneration, release: Release = DEFAULT_RELEASE) -> str:
    """kube-controller-manager's validationError for a pool still being published (prefixed
    from 1.37 on)."""
    message = (
        f"pool {group.id.driver}/{group.id.pool} is incomplete: observed "
        f"{len(group.slices)}/{group.expected_slices} slices at generation {group.generation}"
    )
    if release >= VIEWS_SINCE:
        message = f"{PREFIX_INCOMPLETE} {message}"
    return _bounded(message)


def _node_name(group: PoolGeneration) -> str | None:
    """The node of the pool when every slice of its newest generation names the same one."""
    names = {s.spec.node_name or "" for s in group.slices}
    if len(names) != 1:
        return None
    return names.pop() or None


def _tainted(
    device_id: DeviceID, device: Device, rules: Sequence[DeviceTaintRule], features: Features
) -> bool:
    if not features.device_taints:
        return False
    taints: list[DeviceTaint] = list(device.taints)
    taints.extend(
        r.spec.taint
        for r in rules
        if r.spec.device_selector is not None and r.spec.device_selector.matches(device_id)
    )
    return any(t.effect in BLOCKING_EFFECTS for t in taints)


def _fits_counters(device: Device, remaining: Mapping[tuple[str, str], Decimal]) -> bool:
    """Whether what the device consumes is still left in every shared counter it names.

    A counter that is not there at all (a set not published) cannot be consumed either.
    """
    for use in device.consumes_counters:
        for counter, c in use.counters.items():
            need = c.value.value if c.value is not None else Decimal(0)
            have = remaining.get((use.counter_set or "", counter))
            if have is None or need > have:
                return False
    return True


def pool_status(
    group: PoolGeneration,
    report: PoolReport,
    claims: Iterable[ResourceClaim],
    features: Features,
    taint_rules: Sequence[DeviceTaintRule] = (),
    default_partition_type: str | None = None,
) -> PoolStatus:
    """The pool's answer to a ResourcePoolStatusRequest; ``report`` is ``check_pool``'s,
    ``default_partition_type`` the request's (1.37). The views are ``features.kubernetes``'s."""
    status = PoolStatus(
        driver=group.id.driver,
        pool_name=group.id.pool,
        generation=group.generation,
        node_name=_node_name(group),
    )
    if not group.complete:
        status.validation_error = incomplete_message(group, features.kubernetes)
        return status
    devices = pool_devices(group.slices, features)
    claims = [c for c in claims if touches(c, group.id)]
    state = AllocatedState.from_claims(claims, features)
    remaining = {
        (u.counter_set, u.counter): u.total.value - u.consumed.value for u in report.counters
    }
    refused, _ = pool_problems(sorted(group.slices, key=slice_name), features)
    allocated = unavailable = 0
    blocked: set[str] = set()  # unallocated devices no claim can get, whatever is freed
    for name, (_, device) in devices.items():
        device_id = group.id.device(name)
        if refused or _tainted(device_id, device, taint_rules, features):
            blocked.add(name)
        if state.is_allocated(device_id):
            allocated += 1
        elif name in blocked or (
            features.partitionable_devices
            and device.consumes_counters
            and not _fits_counters(device, remaining)
        ):
            unavailable += 1
    status.resource_slice_count = len(group.slices)
    status.total_devices = len(devices)
    status.allocated_devices = allocated
    status.unavailable_devices = unavailable
    status.available_devices = len(devices) - allocated - unavailable
    if features.kubernetes >= VIEWS_SINCE:
        pool = _PoolView(group, devices, state, blocked, remaining, claims, features.since_1_38)
        problems: list[str] = []
        partitions = []
        if features.partitionable_devices:
            partitions = _partition_summary(pool, default_partition_type, problems)
        shareable = _shareable_summary(pool, problems) if features.consumable_capacity else None
        # Absent rather than empty or null (the API's omitempty); no partial partition view.
        if problems:
            status.validation_error = _bounded(problems[0])
        elif partitions:
            status.partition_summary = partitions
        if shareable is not None:
            status.shareable_summary = shareable
    return status


@dataclass(frozen=True)
class _PoolView:
    """What the 1.37 views of one complete pool are computed from."""

    group: PoolGeneration
    devices: Mapping[str, tuple[str, Device]]
    state: AllocatedState
    blocked: set[str]
    remaining: Mapping[tuple[str, str], Decimal]
    claims: Sequence[ResourceClaim]
    #: 1.38: ``state`` keys consumed capacity by fully qualified name.
    qualified: bool = False

    @property
    def name(self) -> str:
        return f"{self.group.id.driver}/{self.group.id.pool}"

    def allocated(self, name: str) -> bool:
        return self.state.is_allocated(self.group.id.device(name))

    def partition_attributes(self, default: str | None) -> dict[str, str]:
        """Each device's partition type attribute: its slice's; where no slice of the pool
        names one, the request's default; none otherwise."""
        by_slice = {
            slice_name(s): s.spec.partition_type_attribute
            for s in self.group.slices
            if s.spec.partition_type_attribute
        }
        out: dict[str, str] = {}
        for name, (slice_, _) in self.devices.items():
            attribute = by_slice.get(slice_) if by_slice else default
            if attribute:
                out[name] = attribute
        return out


def _partition_type(driver: str, device: Device, attribute: str) -> str | None:
    """The device's string value of ``attribute`` (fully qualified, or bare in the driver's
    own domain); None when it has none, or not a string."""
    value = device.attributes.get(attribute)
    if value is None and attribute.startswith(f"{driver}/"):
        value = device.attributes.get(attribute.removeprefix(f"{driver}/"))
    return value.string if value is not None else None


def _quoted(text: str) -> str:
    """As Go's %q writes a plain string (the messages are kube-controller-manager's, so that
    what matches one matches the other)."""
    return json.dumps(text)


def _cost(device: Device) -> tuple[tuple[str, str, Decimal], ...]:
    return tuple(
        sorted(
            (use.counter_set or "", counter, c.value.value if c.value is not None else Decimal(0))
            for use in device.consumes_counters
            for counter, c in use.counters.items()
        )
    )


def _partition_summary(
    pool: _PoolView, default: str | None, problems: list[str]
) -> list[PartitionTypeStatus]:
    attributes = pool.partition_attributes(default)
    if not attributes:
        return []
    if not any(s.spec.shared_counters for s in pool.group.slices):
        problems.append(
            f"{PREFIX_PARTITION_TYPE_MISSING} pool {pool.name} declares partitionTypeAttribute "
            "but publishes no sharedCounters"
        )
        return []
    groups: dict[tuple[str, str], list[str]] = {}
    costs: dict[tuple[str, str], tuple[tuple[str, str, Decimal], ...]] = {}
    for name, (_, device) in pool.devices.items():
        attribute = attributes.get(name)
        if attribute is None or not device.consumes_counters:
            continue
        kind = _partition_type(pool.group.id.driver, device, attribute)
        if kind is None:
            problems.append(
                f"{PREFIX_PARTITION_TYPE_MISSING} device {_quoted(name)} in pool {pool.name} does "
                f"not carry partition type attribute {_quoted(attribute)}"
            )
            return []
        key = (attribute, kind)
        cost = _cost(device)
        if costs.setdefault(key, cost) != cost:
            problems.append(
                f"{PREFIX_PARTITION_COST_MISMATCH} devices of partition type {_quoted(kind)} in "
                f"pool {pool.name} consume different counters"
            )
            return []
        groups.setdefault(key, []).append(name)
    if len(groups) > SUMMARY_MAX_ITEMS:
        problems.append(
            f"{PREFIX_PARTITION_OVER_CAP} pool {pool.name} has {len(groups)} partition types, "
            f"exceeding the maximum of {SUMMARY_MAX_ITEMS}"
        )
        return []
    summary = []
    for (attribute, kind), names in sorted(groups.items()):
        left = dict(pool.remaining)
        more = 0
        for name in names:
            device = pool.devices[name][1]
            if pool.allocated(name) or name in pool.blocked or not _fits_counters(device, left):
                continue
            more += 1
            for use in device.consumes_counters:
                for counter, c in use.counters.items():
                    key = (use.counter_set or "", counter)
                    left[key] -= c.value.value if c.value is not None else Decimal(0)
        summary.append(
            PartitionTypeStatus(attribute=attribute, type=kind, total=len(names), allocatable=more)
        )
    return summary


def _shareable_summary(pool: _PoolView, problems: list[str]) -> ShareableSummaryStatus | None:
    shareable = {
        name: device
        for name, (_, device) in pool.devices.items()
        if device.allow_multiple_allocations
    }
    if not shareable:
        return None
    consumed: dict[str, Quantity] = {}
    for claim in pool.claims:
        for result in claim.allocated_results():
            if result.admin_access or result.share_id is None:
                continue
            ours = (result.driver, result.pool) == (pool.group.id.driver, pool.group.id.pool)
            if not ours or result.device not in shareable:
                continue
            for key, amount in result.consumed_capacity.items():
                consumed[key] = consumed[key] + amount if key in consumed else amount
    total: dict[str, Quantity] = {}
    available: dict[str, Decimal] = {}
    full = partial = 0
    for name, device in shareable.items():
        used = pool.state.capacity.get(pool.group.id.device(name), {})
        left_any = False
        for key, capacity in device.capacity.items():
            if capacity.value is None:
                continue
            total[key] = total[key] + capacity.value if key in total else capacity.value
            held = qualified_name(key, pool.group.id.driver) if pool.qualified else key
            left = max(Decimal(0), capacity.value.value - used.get(held, Decimal(0)))
            if name not in pool.blocked:
                available[key] = available.get(key, Decimal(0)) + left
            left_any = left_any or left > 0
        if name in pool.blocked:
            continue
        if not pool.allocated(name):
            full += 1
        elif (left_any or not device.capacity) and pool.group.id.device(name) not in (
            pool.state.devices
        ):
            partial += 1
    if len(total) > SUMMARY_MAX_ITEMS:
        problems.append(
            f"{PREFIX_SHAREABLE_OVER_CAP} pool {pool.name} has {len(total)} shareable capacity "
            f"keys, exceeding the maximum of {SUMMARY_MAX_ITEMS}"
        )
        return None
    capacities = []
    for key in sorted(total):
        amount = total[key]
        capacities.append(
            ShareableCapacityStatus(
                name=key,
                total=amount,
                consumed=consumed.get(key, Quantity.from_decimal(0, amount.format)),
                available=Quantity.from_decimal(available.get(key, Decimal(0)), amount.format),
            )
        )
    summary = ShareableSummaryStatus(
        fully_available_devices=full, partially_available_devices=partial
    )
    if capacities:
        summary.capacity = capacities
    return summary


def spec_problem(spec: ResourcePoolStatusRequestSpec) -> str | None:
    """Why a request cannot be answered (the API server checks this too; a copy may not)."""
    if not spec.driver:
        return "spec.driver: Required value"
    if spec.pool_name is not None and not spec.pool_name:
        return "spec.poolName: must not be empty when set"
    if spec.limit is not None and not 1 <= spec.limit <= LIMIT_MAX:
        return f"spec.limit: Invalid value: {spec.limit}: must be between 1 and {LIMIT_MAX}"
    return None


def wanted(spec: ResourcePoolStatusRequestSpec, group: PoolGeneration) -> bool:
    """Whether the request asks about this pool."""
    return group.id.driver == spec.driver and (
        spec.pool_name is None or group.id.pool == spec.pool_name
    )


def answer(
    spec: ResourcePoolStatusRequestSpec, pools: Iterable[PoolStatus], now: str
) -> ResourcePoolStatusRequestStatus:
    """The request's status: the first ``limit`` pools by driver and name, all counted."""
    ordered = sorted(pools, key=lambda p: (p.driver or "", p.pool_name or ""))
    limit = spec.limit if spec.limit is not None else LIMIT_DEFAULT
    shown = ordered[:limit]
    incomplete = sum(1 for p in shown if p.validation_error is not None)
    message = f"Calculated status for {len(shown)} pools"
    if incomplete:
        message += f" ({incomplete} incomplete)"
    condition = Condition(
        type=CONDITION_COMPLETE,
        status="True",
        last_transition_time=now,
        reason=REASON_COMPLETE,
        message=message,
    )
    status = ResourcePoolStatusRequestStatus(pool_count=len(ordered), conditions=[condition])
    if shown:  # omitted, not empty, when nothing matched (the API's omitempty)
        status.pools = shown
    return status


def failed(message: str, now: str) -> ResourcePoolStatusRequestStatus:
    """A request that cannot be answered: ``Failed``, with why, and no pools."""
    condition = Condition(
        type=CONDITION_FAILED,
        status="True",
        last_transition_time=now,
        reason=REASON_FAILED,
        message=message,
    )
    return ResourcePoolStatusRequestStatus(pool_count=0, conditions=[condition])
