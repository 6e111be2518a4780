"""Kubernetes' quantity library (``quantity()``, ``isQuantity()``, ``sign()`` and the methods).

The values are resource.Quantity as Go computes with it (values.QuantityValue), including
what upstream's implementation does to its receiver: comparing converts it to the decimal
form; in Kubernetes 1.36, add()/sub() of a decimal quantity add in place into the decimal its
copies share (1.37 adds on a deep copy). Kubernetes 1.38's apimachinery (api/resource, v0.38)
parses without capping a decimal and keeps 29 significant digits, compares without converting,
bounds the scales add()/sub() align, and gives a zero's approximate float as zero.
"""

from __future__ import annotations

from typing import Any

from ..runtime import CelError, no_overload
from ..values import QuantityError, QuantityValue
from ._registry import function, method

Q = "kubernetes.Quantity"


@function("quantity", f"string_to_quantity (string) -> {Q}", until="1.37")
def quantity(text: Any) -> QuantityValue:
    try:
        return QuantityValue.parse(text)
    except QuantityError as exc:
        raise CelError(str(exc)) from None


@function("isQuantity", "is_quantity_string (string) -> bool", until="1.37")
def is_quantity(text: Any) -> bool:
    try:
        QuantityValue.parse(text)
    except QuantityError:
        return False
    return True


@function("quantity", f"string_to_quantity (string) -> {Q}", since="1.38")
def quantity_bounded(text: Any) -> QuantityValue:
    try:
        return QuantityValue.parse(text, bounded=True)
    except QuantityError as exc:
        raise CelError(str(exc)) from None


@function("isQuantity", "is_quantity_string (string) -> bool", since="1.38")
def is_quantity_bounded(text: Any) -> bool:
    try:
        QuantityValue.parse(text, bounded=True)
    except QuantityError:
        return False
    return True


@function("sign", f"quantity_sign ({Q}) -> int")
def sign(value: Any) -> int:
    return value.sign()  # type: ignore[no-any-return]


@method("isGreaterThan", f"quantity_is_greater_than {Q}.({Q}) -> bool", until="1.37")
def is_greater_than(value: Any, other: Any) -> bool:
    return value.cmp(other) == 1  # type: ignore[no-any-return]


@method("isLessThan", f"quantity_is_less_than {Q}.({Q}) -> bool", until="1.37")
def is_less_than(value: Any, other: Any) -> bool:
    return value.cmp(other) == -1  # type: ignore[no-any-return]


@method("compareTo", f"quantity_compare_to {Q}.({Q}) -> int", until="1.37")
def compare_to(value: Any, other: Any) -> int:
    return value.cmp(other)  # type: ignore[no-any-return]


@method("asApproximateFloat", f"quantity_get_float {Q}.() -> double", until="1.37")
def as_approximate_float(value: Any) -> float:
    return value.approximate_float()  # type: ignore[no-any-return]


@method("isGreaterThan", f"quantity_is_greater_than {Q}.({Q}) -> bool", since="1.38")
def is_greater_than_pure(value: Any, other: Any) -> bool:
    return value.compare(other) == 1  # type: ignore[no-any-return]


@method("isLessThan", f"quantity_is_less_than {Q}.({Q}) -> bool", since="1.38")
def is_less_than_pure(value: Any, other: Any) -> bool:
    return value.compare(other) == -1  # type: ignore[no-any-return]


@method("compareTo", f"quantity_compare_to {Q}.({Q}) -> int", since="1.38")
def compare_to_pure(value: Any, other: Any) -> int:
    return value.compare(other)  # type: ignore[no-any-return]


@method("asApproximateFloat", f"quantity_get_float {Q}.() -> double", since="1.38")
def as_approximate_float_zero_safe(value: Any) -> float:
    return value.approximate_float(zero_safe=True)  # type: ignore[no-any-return]


@method("asInteger", f"quantity_get_int {Q}.() -> int")
def as_integer(value: Any) -> int:
    result = value.as_int64()
    if result is None:
        raise CelError("cannot convert value to integer")
    return result  # type: ignore[no-any-return]


@method("isInteger", f"quantity_is_integer {Q}.() -> bool")
def is_integer(value: Any) -> bool:
    return value.as_int64() is not None


def _operand(other: Any, function: str, value: Any) -> QuantityValue:
    if type(other) is QuantityValue:
        return other
    if type(other) is int:
        return QuantityValue(other, 0)  # resource.NewQuantity(n, DecimalExponent)
    raise no_overload(function, value, other)


_ADD = (f"quantity_add {Q}.({Q}) -> {Q}", f"quantity_add_int {Q}.(int) -> {Q}")
_SUB = (f"quantity_sub {Q}.({Q}) -> {Q}", f"quantity_sub_int {Q}.(int) -> {Q}")


@method("add", *_ADD, until="1.36")
def add(value: Any, other: Any) -> QuantityValue:
    return value.plus(_operand(other, "add", value))  # type: ignore[no-any-return]


@method("sub", *_SUB, until="1.36")
def sub(value: Any, other: Any) -> QuantityValue:
    return value.plus(_operand(other, "sub", value), -1)  # type: ignore[no-any-return]


@method("add", *_ADD, since="1.37", until="1.37")
def add_copy(value: Any, other: Any) -> QuantityValue:
    return value.plus(_operand(other, "add", value), deep=True)  # type: ignore[no-any-return]


@method("sub", *_SUB, since="1.37", until="1.37")
def sub_copy(value: Any, other: Any) -> QuantityValue:
    return value.plus(_operand(other, "sub", value), -1, deep=True)  # type: ignore[no-any-return]


@method("add", *_ADD, since="1.38")
def add_bounded(value: Any, other: Any) -> QuantityValue:
    return value.plus_bounded(_operand(other, "add", value))  # type: ignore[no-any-return]


@method("sub", *_SUB, since="1.38")
def sub_bounded(value: Any, other: Any) -> QuantityValue:
    return value.plus_bounded(_operand(other, "sub", value), -1)  # type: ignore[no-any-return]
