"""CEL's standard library, where cel-python's own functions get our values wrong.

The operators (by the labels cel-python's transpiler asks for), the conversions, ``size``,
the string predicates and ``matches``. ``string()`` also converts IPs and CIDRs: Kubernetes
declares those overloads in its ip and cidr libraries; one conversion here saves a dispatch.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

from ..values import CIDRValue, IPValue, QuantityValue, SemverValue, URLValue
from ._base import INT64_MAX, INT64_MIN, cel_bool, cel_int, fail, is_bool, type_name, want_string
from ._registry import Function, function, method
from .regex import compile_regex

# --- operators ---------------------------------------------------------------------------------


def logical_and(x: Any, y: Any) -> Any:
    """``&&`` with CEL's commutative error absorption; accepts Python bools from ``has()``."""
    if is_bool(x) and not x:
        return cel_bool(False)
    if is_bool(y) and not y:
        return cel_bool(False)
    if is_bool(x) and is_bool(y):
        return cel_bool(True)
    if isinstance(x, CELEvalError):
        return x
    if isinstance(y, CELEvalError):
        return y
    return CELEvalError(f"no such overload: {type_name(x)} && {type_name(y)}", TypeError, ())


def logical_or(x: Any, y: Any) -> Any:
    """``||`` with CEL's commutative error absorption."""
    if is_bool(x) and x:
        return cel_bool(True)
    if is_bool(y) and y:
        return cel_bool(True)
    if is_bool(x) and is_bool(y):
        return cel_bool(False)
    if isinstance(x, CELEvalError):
        return x
    if isinstance(y, CELEvalError):
        return y
    return CELEvalError(f"no such overload: {type_name(x)} || {type_name(y)}", TypeError, ())


def logical_not(x: Any) -> Any:
    if isinstance(x, CELEvalError):
        return x
    if is_bool(x):
        return cel_bool(not x)
    return CELEvalError(f"no such overload: !{type_name(x)}", TypeError, ())


def conditional(cond: Any, if_true: Any, if_false: Any) -> Any:
    if isinstance(cond, CELEvalError):
        return cond
    if not is_bool(cond):
        return CELEvalError(f"no such overload: {type_name(cond)} ? _ : _", TypeError, ())
    return if_true if cond else if_false


def index(container: Any, key: Any) -> Any:
    """``a[k]``: a missing map key is an error that says which key, and how to guard it."""
    if isinstance(container, CELEvalError):
        return container
    if isinstance(key, CELEvalError):
        return key
    if isinstance(container, Mapping):
        try:
            return container[key]
        except KeyError:
            return CELEvalError(f"no such key: {key!r}", KeyError, (key,))
        except TypeError:
            return CELEvalError(f"unsupported map key type {type_name(key)}", TypeError, ())
    if isinstance(container, list):
        if is_bool(key) or not isinstance(key, int):
            return CELEvalError(f"no such overload: list[{type_name(key)}]", TypeError, ())
        if not 0 <= key < len(container):
            return CELEvalError(
                f"index out of bounds: {key}, list size {len(container)}", IndexError, ()
            )
        return container[key]
    return CELEvalError(f"no such overload: {type_name(container)}[_]", TypeError, ())


def member_in(item: Any, container: Any) -> Any:
    """``x in list`` / ``k in map`` (map membership is a hash lookup, not a scan)."""
    if isinstance(item, CELEvalError):
        return item
    if isinstance(container, CELEvalError):
        return container
    if isinstance(container, Mapping):
        try:
            return cel_bool(dict.__contains__(container, item))
        except TypeError:
            return cel_bool(False)
    if isinstance(container, list):
        return cel_bool(any(_equal(item, element) for element in container))
    return CELEvalError(
        f"no such overload: {type_name(item)} in {type_name(container)}", TypeError, ()
    )


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except TypeError:
        return False


def _bool_op(name: str, op: Callable[[Any, Any], bool]) -> Function:
    def compare(a: Any, b: Any) -> Any:
        if isinstance(a, CELEvalError):
            return a
        if isinstance(b, CELEvalError):
            return b
        try:
            return cel_bool(op(a, b))
        except TypeError:
            return CELEvalError(
                f"no such overload: {type_name(a)} {name} {type_name(b)}", TypeError, ()
            )

    compare.__name__ = f"op_{name}"
    return compare


def _equals(a: Any, b: Any) -> bool:
    """CEL heterogeneous equality: values of different types are unequal, not an error;
    numbers compare by value across int, uint and double."""
    x, y = _plain_number(a), _plain_number(b)
    if x is not None and y is not None:
        return x == y
    if type_name(a) != type_name(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_equals(i, j) for i, j in zip(a, b, strict=True))
    if isinstance(a, Mapping):
        return a.keys() == b.keys() and all(_equals(a[k], b[k]) for k in a)
    return bool(a == b)


def _plain_number(value: Any) -> int | float | None:
    if is_bool(value):
        return None
    if isinstance(value, float):
        return float(value)
    if isinstance(value, int):
        return int(value)
    return None


def _ordered(op: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    """Ordering of ints, uints, doubles (across types, as CrossTypeNumericComparisons allows),
    strings, bytes and bools; anything else has no ``<`` overload."""

    def check(a: Any, b: Any) -> bool:
        x, y = _plain_number(a), _plain_number(b)
        if x is not None and y is not None:
            return op(x, y)
        if isinstance(a, str) and isinstance(b, str):
            return op(str(a), str(b))
        if isinstance(a, bytes) and isinstance(b, bytes):
            return op(bytes(a), bytes(b))
        if is_bool(a) and is_bool(b):
            return op(bool(a), bool(b))
        raise TypeError("unordered")

    return check


def _arith(name: str, op: Callable[[Any, Any], Any]) -> Function:
    def apply(a: Any, b: Any) -> Any:
        if isinstance(a, CELEvalError):
            return a
        if isinstance(b, CELEvalError):
            return b
        if isinstance(a, (QuantityValue, SemverValue)) or isinstance(
            b, (QuantityValue, SemverValue)
        ):
            return CELEvalError(
                f"no such overload: {type_name(a)} {name} {type_name(b)}", TypeError, ()
            )
        try:
            return op(a, b)
        except ZeroDivisionError:
            return CELEvalError("division by zero", ZeroDivisionError, ())
        except (TypeError, ValueError, OverflowError) as exc:
            return CELEvalError(
                f"no such overload or overflow: {type_name(a)} {name} {type_name(b)}",
                type(exc),
                exc.args,
            )

    apply.__name__ = f"op_{name}"
    return apply


def _negate(a: Any) -> Any:
    if isinstance(a, CELEvalError):
        return a
    try:
        return -a
    except (TypeError, ValueError, OverflowError):
        return CELEvalError(f"no such overload: -{type_name(a)}", TypeError, ())


def _divide(a: Any, b: Any) -> Any:
    """IEEE division for doubles (x/0.0 is +-Inf, 0/0 and NaN/0 NaN), truncating for ints."""
    if isinstance(a, float) and isinstance(b, float) and b == 0.0:
        if a == 0.0 or math.isnan(a):
            return celtypes.DoubleType(math.nan)
        negative = (math.copysign(1.0, a) < 0) != (math.copysign(1.0, b) < 0)
        return celtypes.DoubleType(-math.inf if negative else math.inf)
    return a / b


def _modulo(a: Any, b: Any) -> Any:
    """``%`` on int64 overflows for MIN % -1, as in cel-go."""
    if isinstance(a, int) and not isinstance(a, celtypes.UintType) and a == INT64_MIN and b == -1:
        raise OverflowError("integer overflow")
    return a % b


# Operators, by the labels cel-python's transpiler asks for.
OPERATORS: dict[str, Function] = {
    "_&&_": logical_and,
    "_||_": logical_or,
    "!_": logical_not,
    "_?_:_": conditional,
    "_[_]": index,
    "_in_": member_in,
    "_==_": _bool_op("==", _equals),
    "_!=_": _bool_op("!=", lambda a, b: not _equals(a, b)),
    "_<_": _bool_op("<", _ordered(lambda a, b: a < b)),
    "_<=_": _bool_op("<=", _ordered(lambda a, b: a <= b)),
    "_>_": _bool_op(">", _ordered(lambda a, b: a > b)),
    "_>=_": _bool_op(">=", _ordered(lambda a, b: a >= b)),
    "_+_": _arith("+", lambda a, b: a + b),
    "_-_": _arith("-", lambda a, b: a - b),
    "_*_": _arith("*", lambda a, b: a * b),
    "_/_": _arith("/", lambda a, b: _divide(a, b)),
    "_%_": _arith("%", lambda a, b: _modulo(a, b)),
    "-_": _negate,
}


def format_double(value: float) -> str:
    """A double as cel-go's string() writes it (Go's strconv 'g' with the shortest digits)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    text = repr(value)
    mantissa, _, exponent = text.partition("e")
    if mantissa.endswith(".0"):
        mantissa = mantissa[:-2]
    exp = int(exponent) if exponent else None
    if exp is None:
        # Python prints without an exponent up to 1e16; Go's 'g' switches at exponent >= 21.
        digits = mantissa.replace("-", "").replace(".", "").lstrip("0") or "0"
        int_part = mantissa.replace("-", "").split(".")[0]
        magnitude = len(int_part) - 1 if int_part != "0" else None
        if magnitude is not None and magnitude >= 21:
            return _go_exponent(value, digits, magnitude)
        return mantissa
    if -4 <= exp < 21:
        return f"{value:f}".rstrip("0").rstrip(".") if "." in f"{value:f}" else f"{value:f}"
    sign = "-" if exp < 0 else "+"
    return f"{mantissa}e{sign}{abs(exp):02d}"


def _go_exponent(value: float, digits: str, magnitude: int) -> str:
    sign = "-" if value < 0 else ""
    digits = digits.rstrip("0") or "0"
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{mantissa}e+{magnitude:02d}"


# --- functions ---------------------------------------------------------------------------------


@function("size", arity=(1,), returns="int", wrap=False)
@method("size", arity=(0,), returns="int", wrap=False)
def size(value: Any) -> Any:
    if isinstance(value, CELEvalError):
        return value
    if isinstance(value, (str, bytes, list, Mapping)):
        return cel_int(len(value))
    return CELEvalError(f"no such overload: size({type_name(value)})", TypeError, ())


@function("string", arity=(1,), returns="string")
def string(value: Any) -> celtypes.StringType:
    """``string(x)``: the base conversion, extended to IP and CIDR values as Kubernetes does."""
    if isinstance(value, IPValue):
        return celtypes.StringType(str(value.address))
    if isinstance(value, CIDRValue):
        return celtypes.StringType(str(value.interface))
    if isinstance(value, URLValue):
        raise fail("no such overload: string(kubernetes.URL)")
    if isinstance(value, (QuantityValue, SemverValue)):
        raise fail(f"no such overload: string({type_name(value)})")
    if is_bool(value):
        return celtypes.StringType("true" if value else "false")
    if isinstance(value, float):
        return celtypes.StringType(format_double(float(value)))
    if isinstance(value, (list, dict)):
        raise fail(f"no such overload: string({type_name(value)})")
    return celtypes.StringType(value)


_DECIMAL = re.compile(r"[+-]?[0-9]+")


@function("int", arity=(1,), returns="int")
def to_int(value: Any) -> celtypes.IntType:
    if isinstance(value, str):
        if not _DECIMAL.fullmatch(value):
            raise fail(f"type conversion error from 'string' to 'int': {value!r}")
        return cel_int(int(value, 10))
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value) or not INT64_MIN <= value <= INT64_MAX:
            raise fail("integer overflow")
        return cel_int(int(value))
    return cel_int(int(value))


@function("double", arity=(1,), returns="double")
def to_double(value: Any) -> celtypes.DoubleType:
    return celtypes.DoubleType(float(value))


@function("bool", arity=(1,), returns="bool")
def to_bool(value: Any) -> celtypes.BoolType:
    if is_bool(value):
        return cel_bool(bool(value))
    text = want_string(value, "bool")
    if text in ("true", "True", "TRUE", "t", "1"):
        return cel_bool(True)
    if text in ("false", "False", "FALSE", "f", "0"):
        return cel_bool(False)
    raise fail(f"type conversion error from string to bool: {text!r}")


@method("contains", arity=(1,), returns="bool")
def contains(target: Any, item: Any) -> celtypes.BoolType:
    return cel_bool(want_string(item, "contains") in want_string(target, "contains"))


@method("startsWith", arity=(1,), returns="bool")
def starts_with(target: Any, prefix: Any) -> celtypes.BoolType:
    return cel_bool(want_string(target, "startsWith").startswith(want_string(prefix, "startsWith")))


@method("endsWith", arity=(1,), returns="bool")
def ends_with(target: Any, suffix: Any) -> celtypes.BoolType:
    return cel_bool(want_string(target, "endsWith").endswith(want_string(suffix, "endsWith")))


@function("matches", arity=(2,), returns="bool")
@method("matches", arity=(1,), returns="bool")
def matches(text: Any, pattern: Any) -> celtypes.BoolType:
    found = compile_regex(want_string(pattern, "matches")).search(want_string(text, "matches"))
    return cel_bool(found is not None)
