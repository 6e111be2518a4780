"""Kubernetes' quantity library (``quantity()``, ``isQuantity()`` and the Quantity methods)."""

from __future__ import annotations

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


@method("sign", arity=(0,), returns="int")
def quantity_sign(value: Any) -> celtypes.IntType:
    return cel_int(_q(value, "sign").sign())


@method("isInteger", arity=(0,), returns="bool")
def quantity_is_integer(value: Any) -> celtypes.BoolType:
    q = _q(value, "isInteger")
    return cel_bool(q.is_integer() and INT64_MIN <= q.value <= INT64_MAX)


@method("asInteger", arity=(0,), returns="int")
def quantity_as_integer(value: Any) -> celtypes.IntType:
    q = _q(value, "asInteger")
    if not q.is_integer() or not INT64_MIN <= q.value <= INT64_MAX:
        raise fail(f"cannot convert value to integer: {q.canonical()}")
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
