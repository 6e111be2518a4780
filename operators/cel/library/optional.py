"""cel-go's optional types library (``optional.of``, ``.value()``, ``.orValue()``, ``[?]``, ...).

``.?field``, ``[?index]``, ``or`` and ``orValue`` are planned specially (planner.py): they
short-circuit or qualify attributes; they are declared here for the checker.
"""

from __future__ import annotations

from typing import Any

from ..runtime import CelError, DomainMap, Duration, Optional, Timestamp, Uint
from ._registry import declare, function, method

declare("_?._", "select_optional_field (dyn, string) -> optional(V)")
declare(
    "_[?_]",
    "list_optindex_optional_int (list(V), int) -> optional(V)",
    "optional_list_optindex_optional_int (optional(list(V)), int) -> optional(V)",
    "map_optindex_optional_value (map(K, V), K) -> optional(V)",
    "optional_map_optindex_optional_value (optional(map(K, V)), K) -> optional(V)",
)
declare(
    "_[_]",
    "optional_list_index_int (optional(list(V)), int) -> optional(V)",
    "optional_map_index_value (optional(map(K, V)), K) -> optional(V)",
)
declare("or", "optional_or_optional optional(V).(optional(V)) -> optional(V)")
declare("orValue", "optional_orValue_value optional(V).(V) -> V")

# Timestamp zero: Go's time.Time{} (January 1, year 1, UTC), in nanoseconds from the epoch.
_ZERO_TIME = -62135596800 * 1_000_000_000


@function("optional.of", "optional_of (V) -> optional(V)")
def optional_of(value: Any) -> Optional:
    return Optional(value)


def is_zero(value: Any) -> bool:
    """cel-go's Zeroer: the zero value of the types that have one."""
    kind = type(value)
    if kind is DomainMap:  # Kubernetes' device maps are no Zeroer: never zero, even empty
        return False
    if kind in (bool, int, Uint, float, str, bytes) or isinstance(value, (list, dict)):
        return not value
    if value is None:
        return True
    if kind is Duration:
        return value.nanos == 0  # type: ignore[no-any-return]
    if kind is Timestamp:
        return value.nanos == _ZERO_TIME  # type: ignore[no-any-return]
    return False


@function("optional.ofNonZeroValue", "optional_ofNonZeroValue (V) -> optional(V)")
def optional_of_non_zero_value(value: Any) -> Optional:
    return Optional.NONE if is_zero(value) else Optional(value)


@function("optional.none", "optional_none () -> optional(V)")
def optional_none() -> Optional:
    return Optional.NONE


@method("value", "optional_value optional(V).() -> V")
def optional_value(value: Any) -> Any:
    if value is Optional.NONE:
        raise CelError("optional.none() dereference")
    return value.value


@method("hasValue", "optional_hasValue optional(V).() -> bool")
def optional_has_value(value: Any) -> bool:
    return value is not Optional.NONE


@method("last", "list_last list(V).() -> optional(V)")
def list_last(items: Any) -> Optional:
    return Optional(items[-1]) if items else Optional.NONE


@method("first", "list_first list(V).() -> optional(V)")
def list_first(items: Any) -> Optional:
    return Optional(items[0]) if items else Optional.NONE


def _unwrap(items: Any) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if type(item) is not Optional:
            raise CelError(f"value {item!r} is not optional")
        if item is not Optional.NONE:
            out.append(item.value)
    return out


function("optional.unwrap", "optional_unwrap (list(optional(V))) -> list(V)")(_unwrap)
method("unwrapOpt", "optional_unwrapOpt list(optional(V)).() -> list(V)")(_unwrap)
