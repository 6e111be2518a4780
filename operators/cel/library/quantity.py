"""Kubernetes' quantity library (``quantity()``, ``isQuantity()`` and the Quantity methods)."""

from __future__ import annotations

import re
from typing import Any

from celpy import celtypes

from operators.api.quantity import Quantity, QuantityError

from ..values import QuantityValue, quantity_value
from ._base import INT64_MAX, INT64_MIN, cel_bool, cel_int, fail, type_name, want, want_int
from ._registry import declare_ordering, function, method


@function("quantity", arity=(1,), returns="kubernetes.Quantity", fold=True)
def quantity(text: Any) -> QuantityValue:
    want(text, str, "quantity")
    try:
        return quantity_value(text)
    except QuantityError as exc:
        raise fail(str(exc)) from None


@function("isQuantity", arity=(1,), returns="bool")
def is_quantity(text: Any) -> celtypes.BoolType:
    want(text, str, "isQuantity")
    try:
        Quantity(text)
    except QuantityError:
        return cel_bool(False)
    return cel_bool(True)


def _q(value: Any, fn: str) -> Quantity:
    if not isinstance(value, QuantityValue):
        raise fail(f"no such overload: {fn} on {type_name(value)}")
    return value.quantity


def _q_or_int(value: Any, fn: str) -> Quantity:
    if isinstance(value, QuantityValue):
        return value.quantity
    return Quantity.from_decimal(want_int(value, fn))


@function("sign", arity=(1,), returns="int")
def quantity_sign(value: Any) -> celtypes.IntType:
    """``sign(q)``: a global function in Kubernetes' quantity library, not a method."""
    return cel_int(_q(value, "sign").sign())


_SPELLING = re.compile(r"([0-9]*)(?:\.([0-9]*))?(.*)")
_DECIMAL_EXPONENTS = {"": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_EXPONENTS |= {"m": -3, "u": -6, "n": -9}
_BINARY_POWERS = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}


def _fast_int64(q: Quantity) -> bool:
    """Kubernetes' Quantity.AsInt64: only a quantity parsed into its int64 form converts, i.e.
    at most 18 significant digits and no digits below the unit (``1000m``, ``1.0`` do not,
    ``1.5k`` does), and a value inside int64."""
    if not (q.is_integer() and INT64_MIN <= q.value <= INT64_MAX):
        return False
    match = _SPELLING.fullmatch(q.text.strip().lstrip("+-"))
    if match is None:
        return False
    whole, fraction, suffix = match.group(1), match.group(2) or "", match.group(3)
    if len((whole + fraction).lstrip("0")) > 18:
        return False
    if re.fullmatch(r"[eE][+-]?[0-9]+", suffix):
        exponent = int(suffix[1:])
    elif suffix in _DECIMAL_EXPONENTS:
        exponent = _DECIMAL_EXPONENTS[suffix]
    else:  # a binary suffix
        power = _BINARY_POWERS.get(suffix)
        return not fraction and power is not None and int(whole or "0") << power <= INT64_MAX
    scale = exponent - len(fraction)
    return scale >= 0 and int((whole + fraction) or "0") * 10**scale <= INT64_MAX


@method("isInteger", arity=(0,), returns="bool")
def quantity_is_integer(value: Any) -> celtypes.BoolType:
    return cel_bool(_fast_int64(_q(value, "isInteger")))


@method("asInteger", arity=(0,), returns="int")
def quantity_as_integer(value: Any) -> celtypes.IntType:
    q = _q(value, "asInteger")
    if not _fast_int64(q):
        raise fail("cannot convert value to integer")
    return cel_int(int(q.value))


@method("asApproximateFloat", arity=(0,), returns="double")
def quantity_as_approximate_float(value: Any) -> celtypes.DoubleType:
    return celtypes.DoubleType(float(_q(value, "asApproximateFloat").value))


@method("add", arity=(1,), returns="kubernetes.Quantity")
def quantity_add(value: Any, other: Any) -> QuantityValue:
    return QuantityValue(_q(value, "add") + _q_or_int(other, "add"))


@method("sub", arity=(1,), returns="kubernetes.Quantity")
def quantity_sub(value: Any, other: Any) -> QuantityValue:
    return QuantityValue(_q(value, "sub") - _q_or_int(other, "sub"))


def _compare(value: QuantityValue, other: QuantityValue) -> int:
    a, b = value.quantity.value, other.quantity.value
    return (a > b) - (a < b)


declare_ordering(QuantityValue, _compare)
