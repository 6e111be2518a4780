"""What every library module shares: CEL bools and ints, failures, type names, argument checks.

A library function raises :class:`Failure` (or lets a Python error escape); the wrapper its
declaration puts around it (_registry.py) turns that into a CEL error value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from celpy import celtypes

from ..values import CIDRValue, IPValue, QuantityValue, SemverValue, URLValue

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

TRUE = celtypes.BoolType(True)
FALSE = celtypes.BoolType(False)


def cel_bool(value: object) -> celtypes.BoolType:
    """A CEL bool without cel-python's slow constructor (one of two shared constants)."""
    return TRUE if value else FALSE


def cel_int(value: int) -> celtypes.IntType:
    """A CEL int without cel-python's constructor, which builds a decorator on every call."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise Failure("integer overflow")
    return int.__new__(celtypes.IntType, value)


class Failure(Exception):
    """Raised inside library functions; turned into a CELEvalError value by the wrapper."""


def fail(message: str) -> Failure:
    return Failure(message)


def no_overload(receiver: Any, fn: str, *args: Any) -> Failure:
    """``receiver.fn(args)`` has no overload for these types."""
    return Failure(f"no such overload: {type_name(receiver)}.{fn}({type_names(args)})")


_CUSTOM_TYPE_NAMES: dict[type, str] = {
    QuantityValue: "kubernetes.Quantity",
    SemverValue: "kubernetes.Semver",
    IPValue: "net.IP",
    CIDRValue: "net.CIDR",
    URLValue: "kubernetes.URL",
}
# Result types a declaration may name: CEL's, the Kubernetes libraries', and dyn for unknown.
RESULT_TYPES = frozenset(
    {"bool", "int", "uint", "double", "string", "bytes", "list", "map", "null_type", "dyn"}
    | set(_CUSTOM_TYPE_NAMES.values())
)


def type_name(value: Any) -> str:
    """The CEL type name of a value, for error messages."""
    if isinstance(value, (bool, celtypes.BoolType)):
        return "bool"
    if isinstance(value, celtypes.UintType):
        return "uint"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes):
        return "bytes"
    if isinstance(value, list):
        return "list"
    if isinstance(value, Mapping):
        return "map"
    if value is None:
        return "null_type"
    return _CUSTOM_TYPE_NAMES.get(type(value), type(value).__name__)


def type_names(args: Iterable[Any]) -> str:
    """``int, string``: the types of arguments, for messages."""
    return ", ".join(type_name(a) for a in args)


def is_bool(value: Any) -> bool:
    return isinstance(value, (bool, celtypes.BoolType))


def want(value: Any, kind: type | tuple[type, ...], fn: str) -> None:
    if not isinstance(value, kind) or (kind is not bool and is_bool(value) and kind is int):
        raise fail(f"no such overload: {fn} does not take {type_name(value)}")


def want_int(value: Any, fn: str) -> int:
    if is_bool(value) or not isinstance(value, int):
        raise fail(f"no such overload: {fn} does not take {type_name(value)}")
    return int(value)


def want_string(value: Any, fn: str) -> str:
    if not isinstance(value, str):
        raise fail(f"no such overload: {type_name(value)}.{fn}()")
    return value


def same(a: Any, b: Any) -> bool:
    """Equal and of the same CEL type (no cross-type numeric equality)."""
    if type_name(a) != type_name(b):
        return False
    return bool(a == b)
