"""CEL's standard library as cel-go v0.26 declares and implements it (common/stdlib).

Operators are singletons that check the runtime types themselves (cel-go's traits), so a
``dyn`` operand fails with "no such overload" exactly where cel-go's does. The conversions are
per-overload implementations. ``_?_:_``, ``_&&_``, ``_||_``, ``_==_``, ``_!=_``, ``_[_]`` and
``@not_strictly_false`` are planned specially (planner.py); they are declared here for the
checker.
"""

from __future__ import annotations

import math
from typing import Any

from ..runtime import (
    INT64_MAX,
    INT64_MIN,
    TWO_TO_63,
    TWO_TO_64,
    UINT64_MAX,
    CelError,
    CelMap,
    Duration,
    Optional,
    Timestamp,
    TypeValue,
    Uint,
    checked_int,
    checked_uint,
    contains,
    double_divide,
    format_double,
    go_parse_float,
    go_parse_int,
    go_parse_uint,
    int_divide,
    int_modulo,
    less_than,
    map_contains,
    no_overload,
    type_name,
)
from ._registry import declare, function, method
from .regex import compile_regex

A = "A"

# --- operators the planner evaluates itself -------------------------------------------------------

declare("_?_:_", "conditional (bool, A, A) -> A")
declare("_&&_", "logical_and (bool, bool) -> bool")
declare("_||_", "logical_or (bool, bool) -> bool")
declare("@not_strictly_false", "not_strictly_false (bool) -> bool")
declare("_==_", "equals (A, A) -> bool")
declare("_!=_", "not_equals (A, A) -> bool")
declare("_[_]", "index_list (list(A), int) -> A", "index_map (map(A, B), A) -> B")


@function("!_", "logical_not (bool) -> bool", singleton=True)
def logical_not(value: Any) -> bool:
    if value is True:
        return False
    if value is False:
        return True
    raise no_overload("!_", value)


@function("-_", "negate_double (double) -> double", "negate_int64 (int) -> int", singleton=True)
def negate(value: Any) -> Any:
    kind = type(value)
    if kind is int:
        return checked_int(-value)
    if kind is float:
        return -value
    if kind is Duration:
        return Duration(checked_int(-value.nanos))
    raise no_overload("-_", value)


@function(
    "_+_",
    "add_bytes (bytes, bytes) -> bytes",
    "add_double (double, double) -> double",
    "add_duration_duration (duration, duration) -> duration",
    "add_duration_timestamp (duration, timestamp) -> timestamp",
    "add_timestamp_duration (timestamp, duration) -> timestamp",
    "add_int64 (int, int) -> int",
    "add_list (list(A), list(A)) -> list(A)",
    "add_string (string, string) -> string",
    "add_uint64 (uint, uint) -> uint",
    singleton=True,
)
def add(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is tb:
        if ta is int:
            return checked_int(a + b)
        if ta is str or ta is float or ta is bytes:
            return a + b
        if ta is Uint:
            return checked_uint(a + b)
        if ta is list:
            return a + b if a and b else (a or b)
        if ta is Duration:
            return Duration(checked_int(a.nanos + b.nanos))
    if isinstance(a, list) and isinstance(b, list):
        return list(a) + list(b)
    if (ta is Duration and tb is Timestamp) or (ta is Timestamp and tb is Duration):
        from .timestamps import add_timestamp_duration

        return add_timestamp_duration(a, b)
    if ta not in _ADDERS:
        raise no_overload("_+_", a, b)
    raise no_overload("_+_", a, b)


_ADDERS = frozenset({int, Uint, float, str, bytes, list, Duration, Timestamp})


@function(
    "_-_",
    "subtract_double (double, double) -> double",
    "subtract_duration_duration (duration, duration) -> duration",
    "subtract_int64 (int, int) -> int",
    "subtract_timestamp_duration (timestamp, duration) -> timestamp",
    "subtract_timestamp_timestamp (timestamp, timestamp) -> duration",
    "subtract_uint64 (uint, uint) -> uint",
    singleton=True,
)
def subtract(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is tb:
        if ta is int:
            return checked_int(a - b)
        if ta is float:
            return a - b
        if ta is Uint:
            return checked_uint(a - b)
        if ta is Duration:
            return Duration(checked_int(a.nanos - b.nanos))
    if ta is Timestamp and tb in (Duration, Timestamp):
        from .timestamps import subtract_timestamp

        return subtract_timestamp(a, b)
    raise no_overload("_-_", a, b)


@function(
    "_*_",
    "multiply_double (double, double) -> double",
    "multiply_int64 (int, int) -> int",
    "multiply_uint64 (uint, uint) -> uint",
    singleton=True,
)
def multiply(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is tb:
        if ta is int:
            return checked_int(a * b)
        if ta is float:
            return a * b
        if ta is Uint:
            return checked_uint(a * b)
    raise no_overload("_*_", a, b)


@function(
    "_/_",
    "divide_double (double, double) -> double",
    "divide_int64 (int, int) -> int",
    "divide_uint64 (uint, uint) -> uint",
    singleton=True,
)
def divide(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is tb:
        if ta is int:
            return int_divide(a, b)
        if ta is float:
            return double_divide(a, b)
        if ta is Uint:
            if b == 0:
                raise CelError("division by zero")
            return Uint(int(a) // int(b))
    raise no_overload("_/_", a, b)


@function(
    "_%_", "modulo_int64 (int, int) -> int", "modulo_uint64 (uint, uint) -> uint", singleton=True
)
def modulo(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is tb:
        if ta is int:
            return int_modulo(a, b)
        if ta is Uint:
            if b == 0:
                raise CelError("modulus by zero")
            return Uint(int(a) % int(b))
    raise no_overload("_%_", a, b)


def _ordering(name: str, prefix: str, test: Any) -> None:
    """The ordering operator ``name``: an error where a NaN is ordered (cel-go 0.26 and 0.29,
    through 1.37); false (cel-go 0.33's standard library, 1.38)."""
    signatures = [
        f"{prefix}_bool (bool, bool) -> bool",
        f"{prefix}_int64 (int, int) -> bool",
        f"{prefix}_int64_double (int, double) -> bool",
        f"{prefix}_int64_uint64 (int, uint) -> bool",
        f"{prefix}_uint64 (uint, uint) -> bool",
        f"{prefix}_uint64_double (uint, double) -> bool",
        f"{prefix}_uint64_int64 (uint, int) -> bool",
        f"{prefix}_double (double, double) -> bool",
        f"{prefix}_double_int64 (double, int) -> bool",
        f"{prefix}_double_uint64 (double, uint) -> bool",
        f"{prefix}_string (string, string) -> bool",
        f"{prefix}_bytes (bytes, bytes) -> bool",
        f"{prefix}_timestamp (timestamp, timestamp) -> bool",
        f"{prefix}_duration (duration, duration) -> bool",
    ]

    def compare(a: Any, b: Any) -> bool:
        return test(less_than(a, b, name))  # type: ignore[no-any-return]

    def compare_nan_false(a: Any, b: Any) -> bool:
        if (type(a) is float and math.isnan(a)) or (type(b) is float and math.isnan(b)):
            return False
        return test(less_than(a, b, name))  # type: ignore[no-any-return]

    compare.__name__ = prefix
    compare_nan_false.__name__ = prefix
    function(name, *signatures, singleton=True, until="1.37")(compare)
    function(name, *signatures, singleton=True, since="1.38")(compare_nan_false)


_ordering("_<_", "less", lambda c: c < 0)
_ordering("_<=_", "less_equals", lambda c: c <= 0)
_ordering("_>_", "greater", lambda c: c > 0)
_ordering("_>=_", "greater_equals", lambda c: c >= 0)


@function("@in", "in_list (A, list(A)) -> bool", "in_map (A, map(A, B)) -> bool", singleton=True)
def member_in(item: Any, container: Any) -> bool:
    if isinstance(container, list):
        return contains(container, item)
    if isinstance(container, dict):
        return map_contains(container, item)
    raise no_overload("@in", item, container)


@function(
    "size",
    "size_bytes (bytes) -> int",
    "size_list (list(A)) -> int",
    "size_map (map(A, B)) -> int",
    "size_string (string) -> int",
    singleton=True,
)
@method(
    "size",
    "bytes_size bytes.() -> int",
    "list_size list(A).() -> int",
    "map_size map(A, B).() -> int",
    "string_size string.() -> int",
    singleton=True,
)
def size(value: Any) -> int:
    kind = type(value)
    if kind is str or kind is bytes or kind is list or isinstance(value, (dict, list)):
        return len(value)
    raise no_overload("size", value)


# --- conversions ----------------------------------------------------------------------------------


def _identity(value: Any) -> Any:
    return value


function("bool", "bool_to_bool (bool) -> bool")(_identity)
function("bytes", "bytes_to_bytes (bytes) -> bytes")(_identity)
function("double", "double_to_double (double) -> double")(_identity)
function("duration", "duration_to_duration (duration) -> duration")(_identity)
function("int", "int64_to_int64 (int) -> int")(_identity)
function("string", "string_to_string (string) -> string")(_identity)
function("timestamp", "timestamp_to_timestamp (timestamp) -> timestamp")(_identity)
function("uint", "uint64_to_uint64 (uint) -> uint")(_identity)


@function("bool", "string_to_bool (string) -> bool")
def string_to_bool(text: Any) -> bool:
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise CelError(f"type conversion error from 'string' to 'bool': {text!r}")


@function("bytes", "string_to_bytes (string) -> bytes")
def string_to_bytes(text: Any) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # type: ignore[no-any-return]


@function("double", "int64_to_double (int) -> double", "uint64_to_double (uint) -> double")
def number_to_double(value: Any) -> float:
    return float(value)


@function("double", "string_to_double (string) -> double")
def string_to_double(text: Any) -> float:
    try:
        return go_parse_float(text)
    except ValueError:
        raise CelError(f"type conversion error from 'string' to 'double': {text!r}") from None


@function("int", "double_to_int64 (double) -> int")
def double_to_int(value: Any) -> int:
    if math.isinf(value) or math.isnan(value) or value <= -TWO_TO_63 or value >= TWO_TO_63:
        raise CelError("integer overflow")
    return int(value)


@function("int", "duration_to_int64 (duration) -> int")
def duration_to_int(value: Any) -> int:
    return value.nanos  # type: ignore[no-any-return]


@function("int", "string_to_int64 (string) -> int")
def string_to_int(text: Any) -> int:
    try:
        return go_parse_int(text)
    except ValueError:
        raise CelError(f"type conversion error from 'string' to 'int': {text!r}") from None


@function("int", "timestamp_to_int64 (timestamp) -> int")
def timestamp_to_int(value: Any) -> int:
    return value.nanos // 1_000_000_000  # type: ignore[no-any-return]


@function("int", "uint64_to_int64 (uint) -> int")
def uint_to_int(value: Any) -> int:
    if value > INT64_MAX:
        raise CelError("integer overflow")
    return int(value)


@function("string", "bool_to_string (bool) -> string")
def bool_to_string(value: Any) -> str:
    return "true" if value else "false"


@function("string", "bytes_to_string (bytes) -> string")
def bytes_to_string(value: Any) -> str:
    try:
        return value.decode("utf-8")  # type: ignore[no-any-return]
    except UnicodeDecodeError:
        raise CelError("invalid UTF-8 in bytes, cannot convert to string") from None


@function("string", "double_to_string (double) -> string")
def double_to_string(value: Any) -> str:
    return format_double(value)


@function("string", "int64_to_string (int) -> string", "uint64_to_string (uint) -> string")
def int_to_string(value: Any) -> str:
    return str(int(value))


@function("uint", "double_to_uint64 (double) -> uint")
def double_to_uint(value: Any) -> Uint:
    if math.isinf(value) or math.isnan(value) or value < 0 or value >= TWO_TO_64:
        raise CelError("unsigned integer overflow")
    return Uint(int(value))


@function("uint", "int64_to_uint64 (int) -> uint")
def int_to_uint(value: Any) -> Uint:
    if value < 0:
        raise CelError("unsigned integer overflow")
    return Uint(value)


@function("uint", "string_to_uint64 (string) -> uint")
def string_to_uint(text: Any) -> Uint:
    try:
        return Uint(go_parse_uint(text))
    except ValueError:
        raise CelError(f"type conversion error from 'string' to 'uint': {text!r}") from None


@function("dyn", "to_dyn (A) -> dyn", singleton=True)
def to_dyn(value: Any) -> Any:
    return value


@function("type", "type (A) -> type(A)", singleton=True)
def type_of(value: Any) -> TypeValue:
    return TypeValue(type_name(value))


# --- strings --------------------------------------------------------------------------------------


@method("contains", "contains_string string.(string) -> bool")
def string_contains(text: Any, sub: Any) -> bool:
    return sub in text


@method("endsWith", "ends_with_string string.(string) -> bool")
def ends_with(text: Any, suffix: Any) -> bool:
    return text.endswith(suffix)  # type: ignore[no-any-return]


@method("startsWith", "starts_with_string string.(string) -> bool")
def starts_with(text: Any, prefix: Any) -> bool:
    return text.startswith(prefix)  # type: ignore[no-any-return]


@function("matches", "matches (string, string) -> bool", singleton=True, until="1.37")
@method("matches", "matches_string string.(string) -> bool", singleton=True, until="1.37")
def matches(text: Any, pattern: Any) -> bool:
    if type(text) is not str or type(pattern) is not str:
        raise no_overload("matches", text, pattern)
    return compile_regex(pattern).search(text) is not None


@function("matches", "matches (string, string) -> bool", singleton=True, since="1.38")
@method("matches", "matches_string string.(string) -> bool", singleton=True, since="1.38")
def matches_go127(text: Any, pattern: Any) -> bool:
    """matches as Kubernetes 1.38 (Go 1.27's regexp) reads the pattern."""
    if type(text) is not str or type(pattern) is not str:
        raise no_overload("matches", text, pattern)
    return compile_regex(pattern, True).search(text) is not None


__all__ = [
    "INT64_MIN",
    "UINT64_MAX",
    "CelMap",
    "Optional",
    "add",
    "divide",
    "logical_not",
    "matches",
    "member_in",
    "modulo",
    "multiply",
    "negate",
    "size",
    "subtract",
]
