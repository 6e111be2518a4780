"""Consumable capacity (KEP-5075): how much of a shareable device one allocation consumes.

A request is rounded up by the capacity's ``requestPolicy`` (validRange min/step, else
validValues); a capacity the request does not mention consumes the policy default, else the
whole capacity. Sums over all shares may never exceed the capacity. Semantics follow upstream
(including integer steps: quantities are compared by value, steps in whole units).

1.37 (``strict``) refuses what its integer arithmetic cannot represent (a request past 2^63-1,
a rounding past it) and negative amounts, as errors that end the allocation, and with
DRAFractionalCapacityRange (``fractional``) steps a range in milli-units wherever min, max and
step are whole milli-units and the step at least 1m: upstream's ``useMilli`` looks at no more
than that, so a whole-unit range is stepped in milli-units too (the same answer).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Final

from operators.api.quantity import Quantity, QuantityFormat
from operators.api.resource import CapacityRequestPolicy, CapacityRequestPolicyRange, DeviceCapacity

#: capacity name -> consumed amount
Consumed = dict[str, Decimal]
#: 1.38: fully qualified capacity name -> (the name the device published, the capacity)
Qualified = dict[str, tuple[str, DeviceCapacity]]
_NO_AMOUNTS: Final[Mapping[str, Decimal]] = {}

_MAX_INT64 = 2**63 - 1
_MIN_INT64 = -(2**63)


class CapacityArithmeticError(ValueError):
    """1.37: a capacity amount its arithmetic cannot take (the allocation stops)."""


def _int_value(q: Quantity) -> int:
    """resource.Quantity.Value(): whole units, rounded up."""
    return math.ceil(q.value)


def _milli(q: Quantity) -> int | None:
    """Upstream's safeMilliValue: the value in milli-units when that is exact and fits int64."""
    milli = q.value * 1000
    if milli != milli.to_integral_value() or not _MIN_INT64 <= milli <= _MAX_INT64:
        return None
    return int(milli)


def _use_milli(valid: CapacityRequestPolicyRange, fractional: bool) -> bool:
    """Upstream's useMilli (which, unlike its comment, does not ask for a fraction)."""
    if not fractional:
        return False
    for q in (valid.min, valid.max):
        if q is not None and _milli(q) is None:
            return False
    if valid.step is not None:
        step = _milli(valid.step)
        if step is None or step < 1:
            return False
    return True


def _go_div(a: int, b: int) -> tuple[int, int]:
    """Go's truncating integer division and remainder."""
    q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
    return q, a - q * b


def _round_up_range(
    requested: Quantity, valid: CapacityRequestPolicyRange, *, strict: bool, fractional: bool
) -> Quantity:
    assert valid.min is not None
    if requested < valid.min:
        return valid.min
    if valid.step is None:
        return requested
    if not strict:  # 1.36: whole units, in BinarySI
        step, low = _int_value(valid.step), _int_value(valid.min)
        added = _int_value(requested) - low
        n, mod = divmod(added, step) if step else (0, 0)
        if mod:
            n += 1
        return Quantity.from_decimal(low + step * n, QuantityFormat.BINARY_SI)
    fmt = valid.step.format
    if _use_milli(valid, fractional):
        want = _milli(requested)
        if want is None:
            raise CapacityArithmeticError(f"request {requested} is not a representable milli value")
        milli_step, milli_low = _milli(valid.step), _milli(valid.min)
        assert milli_step is not None
        assert milli_low is not None
        step, low, unit = milli_step, milli_low, Decimal(1000)
    else:
        if requested.value > _MAX_INT64:
            raise CapacityArithmeticError(f"request {requested} exceeds MaxInt64")
        want, step, low = _int_value(requested), _int_value(valid.step), _int_value(valid.min)
        unit = Decimal(1)
    if not step:  # Go divides by zero here; the API server never lets a zero step through
        return requested
    n, mod = _go_div(want - low, step)
    if mod:
        n += 1
    if (unit == 1000 or low >= 0) and n > _go_div(_MAX_INT64 - low, step)[0]:
        raise CapacityArithmeticError(
            f"rounding request {requested} up to the next step passes the "
            + ("milli-value range" if unit == 1000 else "MaxInt64")
        )
    return Quantity.from_decimal(Decimal(low + step * n) / unit, fmt)


def consumed_for(
    requested: Quantity | None,
    cap: DeviceCapacity,
    *,
    strict: bool = False,
    fractional: bool = False,
) -> Quantity:
    """What one allocation takes of ``cap`` when the request asks for ``requested``
    (``strict``: 1.37, which may raise CapacityArithmeticError)."""
    policy = cap.request_policy
    if requested is None:
        if policy is not None and policy.default is not None:
            return policy.default
        return cap.value if cap.value is not None else Quantity(0)
    if policy is None:
        return requested
    if policy.valid_range is not None and policy.valid_range.min is not None:
        return _round_up_range(requested, policy.valid_range, strict=strict, fractional=fractional)
    if policy.valid_values:
        for v in policy.valid_values:
            if requested <= v:
                return v
    return requested


def violates_policy(
    value: Quantity, policy: CapacityRequestPolicy | None, *, fractional: bool = False
) -> bool:
    if policy is None:
        return False
    if policy.default is not None and value == policy.default:
        return False
    if policy.valid_range is not None:
        rng = policy.valid_range
        if rng.max is not None and value > rng.max:
            return True
        if rng.step is not None:
            if _use_milli(rng, fractional):
                have = _milli(value)
                if have is None:
                    return True
                low = _milli(rng.min) if rng.min is not None else 0
                step = _milli(rng.step) or 0
            else:
                have = _int_value(value)
                low = _int_value(rng.min) if rng.min is not None else 0
                step = _int_value(rng.step)
            if step and (have - (low or 0)) % step:
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
    *,
    strict: bool = False,
    fractional: bool = False,
) -> bool | None:
    """True if the request fits next to what is allocated and being allocated.

    ``None`` when the request names a capacity the device does not have (upstream skips such
    devices as a non-error mismatch). ``strict`` (1.37): every amount is worked out before any
    is compared, so an amount it cannot take raises CapacityArithmeticError whichever
    capacity comes first.
    """
    if requests and any(name not in capacity for name in requests):
        return None
    wanted = consumption(requests, capacity, strict=strict, fractional=fractional)
    for name, cap in capacity.items():
        want = wanted[name]
        if violates_policy(want, cap.request_policy, fractional=fractional):
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
    requests: Mapping[str, Quantity] | None,
    capacity: Mapping[str, DeviceCapacity],
    *,
    strict: bool = False,
    fractional: bool = False,
) -> dict[str, Quantity]:
    """The ``consumedCapacity`` of one share: every capacity of the device. 1.37 (``strict``)
    raises CapacityArithmeticError for an amount it cannot take or a negative one."""
    out: dict[str, Quantity] = {}
    for name, cap in capacity.items():
        try:
            want = consumed_for(
                requests.get(name) if requests else None, cap, strict=strict, fractional=fractional
            )
        except CapacityArithmeticError as e:
            raise CapacityArithmeticError(f'capacity "{name}": {e}') from None
        if strict and want.sign() < 0:
            raise CapacityArithmeticError(f'capacity "{name}": capacity value is negative')
        out[name] = want
    return out


# --- 1.38: capacities by fully qualified name --------------------------------------------


def qualified_name(name: str, driver: str) -> str:
    """1.38: the capacity name with its domain; a bare name is the driver's."""
    return name if "/" in name else f"{driver}/{name}"


def by_qualified_name(capacity: Mapping[str, DeviceCapacity], driver: str) -> Qualified:
    """1.38: a device's capacities by fully qualified name, each with the name it was published
    under. Published both bare and with the driver's domain, the qualified entry wins (as for
    attributes), whatever the order."""
    out: Qualified = {}
    for name, cap in capacity.items():
        if "/" in name:
            out[name] = (name, cap)
        else:
            out.setdefault(f"{driver}/{name}", (name, cap))
    return out


def resolve_requests(
    requests: Mapping[str, Quantity] | None, capacity: Qualified, driver: str
) -> dict[str, Quantity] | None:
    """1.38: the request's amounts by fully qualified name; None when it names a capacity the
    device lacks (skip the device). A capacity named both bare and qualified is ambiguous:
    CapacityArithmeticError, which ends the allocation."""
    resolved: dict[str, Quantity] = {}
    for name, amount in (requests or {}).items():
        key = qualified_name(name, driver)
        if key not in capacity:
            return None
        if key in resolved:
            ident = key.partition("/")[2]
            other = ident if name == key else key
            raise CapacityArithmeticError(
                f'capacity "{ident}" requested both as "{name}" and as "{other}"'
            )
        resolved[key] = amount
    return resolved


def _consumption_qualified(
    resolved: Mapping[str, Quantity], capacity: Qualified, fractional: bool
) -> dict[str, Quantity]:
    """1.38: what one share takes of each capacity, by fully qualified name."""
    out: dict[str, Quantity] = {}
    for key, (_, cap) in capacity.items():
        requested = resolved.get(key)
        if requested is not None and requested.sign() < 0:
            raise CapacityArithmeticError(
                f'capacity "{key}": capacity value is negative: request {requested}'
            )
        try:
            want = consumed_for(requested, cap, strict=True, fractional=fractional)
        except CapacityArithmeticError as e:
            raise CapacityArithmeticError(f'capacity "{key}": {e}') from None
        if want.sign() < 0:
            raise CapacityArithmeticError(f'capacity "{key}": capacity value is negative')
        out[key] = want
    return out


def request_fits_qualified(
    requests: Mapping[str, Quantity] | None,
    capacity: Mapping[str, DeviceCapacity],
    allocated: Mapping[str, Decimal] | None,
    allocating: Mapping[str, Decimal] | None,
    *,
    driver: str,
    fractional: bool = False,
) -> bool | None:
    """1.38's ``request_fits``: names resolved by fully qualified name (``allocated`` and
    ``allocating`` keyed so), every amount worked out before any is compared."""
    caps = by_qualified_name(capacity, driver)
    resolved = resolve_requests(requests, caps, driver)
    if resolved is None:
        return None
    wanted = _consumption_qualified(resolved, caps, fractional)
    allocated = allocated or _NO_AMOUNTS
    allocating = allocating or _NO_AMOUNTS
    for key, (_, cap) in caps.items():
        want = wanted[key]
        if violates_policy(want, cap.request_policy, fractional=fractional):
            return False
        total = want.value + allocated.get(key, Decimal(0)) + allocating.get(key, Decimal(0))
        if cap.value is None or total > cap.value.value:
            return False
    return True


def consumption_qualified(
    requests: Mapping[str, Quantity] | None,
    capacity: Mapping[str, DeviceCapacity],
    *,
    driver: str,
    fractional: bool = False,
) -> dict[str, Quantity]:
    """1.38's ``consumption``, by fully qualified name (``for_status`` names it for a claim)."""
    caps = by_qualified_name(capacity, driver)
    return _consumption_qualified(resolve_requests(requests, caps, driver) or {}, caps, fractional)


def for_status(
    consumed: Mapping[str, Quantity], capacity: Mapping[str, DeviceCapacity], driver: str
) -> dict[str, Quantity]:
    """1.38: fully qualified amounts named as the device published each capacity, which is
    what 1.37 wrote and what drivers look up (upstream's capacityNameForStatus)."""
    caps = by_qualified_name(capacity, driver)
    return {caps[key][0] if key in caps else key: q for key, q in consumed.items()}


def qualified_amounts(consumed: Mapping[str, Quantity], driver: str) -> dict[str, Decimal]:
    """1.38: one allocation result's consumedCapacity by fully qualified name, as its
    scheduler records it (NewDeviceConsumedCapacity): a name qualified with the driver wins
    over the bare one, whichever comes first."""
    out: dict[str, Decimal] = {}
    prefix = f"{driver}/"
    for name, q in consumed.items():
        if name.startswith(prefix):
            out[name] = q.value
            continue
        key = qualified_name(name, driver)
        if key not in out:
            out[key] = q.value
    return out
