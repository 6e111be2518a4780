"""How many devices of a pool are free, within the fields of KEP-5677's ``PoolStatus`` (1.36).

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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal

from operators.allocator.features import Features
from operators.allocator.pool_checks import PoolReport, pool_devices, touches
from operators.allocator.pools import PoolGeneration, pool_problems, slice_name
from operators.allocator.state import AllocatedState
from operators.api.ids import DeviceID
from operators.api.meta import Condition
from operators.api.poolstatus import (
    CONDITION_COMPLETE,
    CONDITION_FAILED,
    LIMIT_DEFAULT,
    LIMIT_MAX,
    REASON_COMPLETE,
    REASON_FAILED,
    VALIDATION_ERROR_MAX_BYTES,
    PoolStatus,
    ResourcePoolStatusRequestSpec,
    ResourcePoolStatusRequestStatus,
)
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


def incomplete_message(group: PoolGeneration) -> str:
    """kube-controller-manager's validationError for a pool still being published."""
    message = (
        f"pool {group.id.driver}/{group.id.pool} is incomplete: observed "
        f"{len(group.slices)}/{group.expected_slices} slices at generation {group.generation}"
    )
    return message.encode()[:VALIDATION_ERROR_MAX_BYTES].decode(errors="ignore")


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
) -> PoolStatus:
    """The pool's answer to a ResourcePoolStatusRequest; ``report`` is ``check_pool``'s."""
    status = PoolStatus(
        driver=group.id.driver,
        pool_name=group.id.pool,
        generation=group.generation,
        node_name=_node_name(group),
    )
    if not group.complete:
        status.validation_error = incomplete_message(group)
        return status
    devices = pool_devices(group.slices, features)
    state = AllocatedState.from_claims([c for c in claims if touches(c, group.id)], features)
    remaining = {
        (u.counter_set, u.counter): u.total.value - u.consumed.value for u in report.counters
    }
    refused, _ = pool_problems(sorted(group.slices, key=slice_name), features)
    allocated = unavailable = 0
    for name, (_, device) in devices.items():
        device_id = group.id.device(name)
        if state.is_allocated(device_id):
            allocated += 1
        elif (
            refused
            or _tainted(device_id, device, taint_rules, features)
            or (
                features.partitionable_devices
                and device.consumes_counters
                and not _fits_counters(device, remaining)
            )
        ):
            unavailable += 1
    status.resource_slice_count = len(group.slices)
    status.total_devices = len(devices)
    status.allocated_devices = allocated
    status.unavailable_devices = unavailable
    status.available_devices = len(devices) - allocated - unavailable
    return status


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
