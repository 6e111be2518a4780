"""Consumable capacity (KEP-5075): how much of a shareable device one allocation consumes.

A request is rounded up by the capacity's ``requestPolicy`` (validRange min/step, else
validValues); a capacity the request does not mention consumes the policy default, else the
whole capacity. Sums over all shares may never exceed the capacity. Semantics follow upstream
(including integer steps: quantities are compared by value, steps in whole units).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal

from operators.api.quantity import Quantity, QuantityFormat
from operators.api.resource import CapacityRequestPolicy, CapacityRequestPolicyRange, DeviceCapacity

#: capacity name -> consumed amount
Consumed = dict[str, Decimal]


def _int_value(q: Quantity) -> int:
    """resource.Quantity.Value(): whole units, rounded up."""
    return math.ceil(q.value)


def _round_up_range(requested: Quantity, valid: CapacityRequestPolicyRange) -> Quantity:
    assert valid.min is not None
    if requested < valid.min:
        return valid.min
    if valid.step is None:
        return requested
    step, low = _int_value(valid.step), _int_value(valid.min)
    added = _int_value(requested) - low
    n, mod = divmod(added, step) if step else (0, 0)
    if mod:
        n += 1
    return Quantity.from_decimal(low + step * n, QuantityFormat.BINARY_SI)


def consumed_for(requested: Quantity | None, cap: DeviceCapacity) -> Quantity:
    """What one allocation takes of ``cap`` when the request asks for ``requested``."""
    policy = cap.request_policy
    if requested is None:
        if policy is not None and policy.default is not None:
            return policy.default
        return cap.value if cap.value is not None else Quantity(0)
    if policy is None:
        return requested
    if policy.valid_range is not None and policy.valid_range.min is not None:
        return _round_up_range(requested, policy.valid_range)
    if policy.valid_values:
        for v in policy.valid_values:
            if requested <= v:
                return v
    return requested


def violates_policy(value: Quantity, policy: CapacityRequestPolicy | None) -> bool:
    if policy is None:
        return False
    if policy.default is not None and value == policy.default:
        return False
    if policy.valid_range is not None:
        rng = policy.valid_range
        if rng.max is not None and value > rng.max:
            return True
        if rng.step is not None:
            low = _int_value(rng.min) if rng.min is not None else 0
            step = _int_value(rng.step)
            if step and (_int_value(value) - low) % step:
                return True
        return False
    if policy.valid_values:
        return all(value != v for v in policy.valid_values)
    return False


def request_fits(
    requests: Mapping[str, Quantity] | None,
    capacity: Mapping[str, DeviceCapacity],
    allocated: Mapping[str, Decimal] | None,
    allocating: Mapping[str, Decimal] | None,
) -> bool | None:
    """True if the request fits next to what is allocated and being allocated.

    ``None`` when the request names a capacity the device does not have (upstream skips such
    devices as a non-error mismatch).
    """
    if requests and any(name not in capacity for name in requests):
        return None
    for name, cap in capacity.items():
        want = consumed_for(requests.get(name) if requests else None, cap)
        if violates_policy(want, cap.request_policy):
            return False
        total = want.value
        if allocated:
            total += allocated.get(name, Decimal(0))
        if allocating:
            total += allocating.get(name, Decimal(0))
        if cap.value is None or total > cap.value.value:
            return False
    return True


def consumption(
    requests: Mapping[str, Quantity] | None, capacity: Mapping[str, DeviceCapacity]
) -> dict[str, Quantity]:
    """The ``consumedCapacity`` of one share: every capacity of the device."""
    return {
        name: consumed_for(requests.get(name) if requests else None, cap)
        for name, cap in capacity.items()
    }
