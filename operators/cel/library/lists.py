"""List functions: Kubernetes' lists library (``isSorted``, ``sum``, ``min``, ``max``,
``indexOf``, ``lastIndexOf``, since 1.37 ``includes``) and cel-go's lists extension, version 3
(``slice``, ``flatten``, ``sort``, ``sortBy``, ``lists.range``, ``reverse``, ``distinct``).
"""

from __future__ import annotations

import functools
from typing import Any

from ..runtime import (
    CelError,
    Duration,
    Uint,
    comparable,
    equal,
    less_than,
    no_overload,
    type_name,
)
from ._registry import function, method
from .standard import add

COMPARABLE = ("int", "uint", "double", "bool", "duration", "timestamp", "string", "bytes")
SUMMABLE = ("int", "uint", "double", "duration")
_ZERO: dict[str, Any] = {"int": 0, "uint": Uint(0), "double": 0.0, "duration": Duration(0)}


def _compare(a: Any, b: Any) -> int | None:
    """cel-go's Compare, None where it returns an error value (NaN, other types)."""
    try:
        return less_than(a, b)
    except CelError:
        return None


@method(
    "isSorted",
    *(f"list_{name}_is_sorted_bool list({name}).() -> bool" for name in COMPARABLE),
)
def is_sorted(items: Any) -> bool:
    previous: Any = None
    first = True
    for item in items:
        if not comparable(item):
            raise no_overload("isSorted", item)
        if not first and _compare(previous, item) == 1:
            return False
        previous, first = item, False
    return True


def _declare_sum(name: str) -> None:
    @method("sum", f"list_{name}_sum_{name} list({name}).() -> {name}")
    def list_sum(items: Any) -> Any:
        total = _ZERO[name]
        for item in items:
            if type(item) not in (int, Uint, float, str, bytes, list, Duration):
                raise no_overload("sum", item)
            total = add(total, item)
        return total

    list_sum.__name__ = f"sum_{name}"


for _name in SUMMABLE:
    _declare_sum(_name)


def _extreme(name: str, prefer: int) -> Any:
    def pick(items: Any) -> Any:
        result: Any = None
        found = False
        for item in items:
            if not comparable(item):
                raise no_overload(name, item)
            if not found:
                result, found = item, True
            elif _compare(result, item) == prefer:
                result = item
        if not found:
            raise CelError(f"{name} called on empty list")
        return result

    pick.__name__ = f"list_{name}"
    return pick


method("max", *(f"list_{n}_max_{n} list({n}).() -> {n}" for n in COMPARABLE))(_extreme("max", -1))
method("min", *(f"list_{n}_min_{n} list({n}).() -> {n}" for n in COMPARABLE))(_extreme("min", 1))


def equals(a: Any, b: Any) -> bool:
    """``a.Equal(b) == types.True``: a failed comparison is no match."""
    try:
        return equal(a, b)
    except CelError:
        return False


@method("indexOf", "list_a_index_of_int list(A).(A) -> int")
def list_index_of(items: Any, item: Any) -> int:
    for i, element in enumerate(items):
        if equals(element, item):
            return i
    return -1


@method("lastIndexOf", "list_a_last_index_of_int list(A).(A) -> int")
def list_last_index_of(items: Any, item: Any) -> int:
    for i in range(len(items) - 1, -1, -1):
        if equals(items[i], item):
            return i
    return -1


@method("includes", "list_includes_dyn_dyn dyn.(dyn) -> bool", since="1.37")
def includes(target: Any, value: Any) -> bool:
    """Kubernetes 1.37's Lists version 1 (DRA's environment declares it on its own too, as
    1.36 had DRA's): a list includes its elements, anything else what equals it."""
    if isinstance(target, list):
        return any(equals(item, value) for item in target)
    return equals(target, value)


# --- cel-go's lists extension ------------------------------------------------------------------


@method("slice", "list_slice list(T).(int, int) -> list(T)")
def list_slice(items: Any, start: Any, end: Any) -> list[Any]:
    if start < 0 or end < 0:
        raise CelError(f"cannot slice({start}, {end}), negative indexes not supported")
    if start > end:
        raise CelError(
            f"cannot slice({start}, {end}), start index must be less than or equal to end index"
        )
    if len(items) < end:
        raise CelError(f"cannot slice({start}, {end}), list is length {len(items)}")
    return list(items[start:end])


def _flatten(items: list[Any], depth: int) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if isinstance(item, list) and depth > 0:
            out.extend(_flatten(item, depth - 1))
        else:
            out.append(item)
    return out


@method(
    "flatten",
    "list_flatten list(list(T)).() -> list(T)",
    "list_flatten_int list(dyn).(int) -> list(dyn)",
    singleton=True,
)
def flatten(items: Any, depth: Any = 1) -> list[Any]:
    if not isinstance(items, list) or type(depth) is not int:
        raise no_overload("flatten", items, depth)
    if depth < 0:
        raise CelError("level must be non-negative")
    return _flatten(items, depth)


def _sorted_by(items: list[Any], keys: list[Any]) -> list[Any]:
    if len(items) != len(keys):
        raise CelError(
            "@sortByAssociatedKeys() expected a list of the same size as the associated keys "
            f"list, but got {len(items)} and {len(keys)} elements respectively"
        )
    if not items:
        return items
    first = keys[0]
    if not comparable(first):
        raise CelError("list elements must be comparable")
    if len(keys) > 1 and any(type_name(k) != type_name(first) for k in keys):
        raise CelError("list elements must have the same type")

    def order(i: int, j: int) -> int:
        if _compare(keys[i], keys[j]) == -1:
            return -1
        if _compare(keys[j], keys[i]) == -1:
            return 1
        return 0

    indices = sorted(range(len(items)), key=functools.cmp_to_key(order))
    return [items[i] for i in indices]


@method("sort", *(f"list_{n}_sort list({n}).() -> list({n})" for n in COMPARABLE), singleton=True)
def sort(items: Any) -> list[Any]:
    if not isinstance(items, list):
        raise no_overload("sort", items)
    return _sorted_by(items, items)


@method(
    "@sortByAssociatedKeys",
    *(f"list_{n}_sortByAssociatedKeys list(T).(list({n})) -> list(T)" for n in COMPARABLE),
    singleton=True,
)
def sort_by_associated_keys(items: Any, keys: Any) -> list[Any]:
    if not isinstance(items, list) or not isinstance(keys, list):
        raise no_overload("@sortByAssociatedKeys", items, keys)
    return _sorted_by(items, keys)


@function("lists.range", "lists_range (int) -> list(int)", until="1.36")
def lists_range(n: Any) -> list[int]:
    """cel-go 0.26: nothing below 0."""
    return list(range(n)) if n > 0 else []


@function("lists.range", "lists_range (int) -> list(int)", since="1.37")
def lists_range_checked(n: Any) -> list[int]:
    """cel-go 0.29 refuses a negative size (and one over a million, which the cost estimate
    refuses before)."""
    if n < 0:
        raise CelError(f"lists.range: size must be non-negative, got {n}")
    return list(range(n))


@method("reverse", "list_reverse list(T).() -> list(T)")
def reverse(items: Any) -> list[Any]:
    return items[::-1]  # type: ignore[no-any-return]


@method("distinct", "list_distinct list(T).() -> list(T)")
def distinct(items: Any) -> list[Any]:
    unique: list[Any] = []
    for item in items:
        if not any(equals(item, seen) for seen in unique):
            unique.append(item)
    return unique
