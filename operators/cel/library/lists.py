"""Kubernetes' lists library (``isSorted``, ``sum``, ``min``, ``max``, ``indexOf``, ...).

``indexOf`` and ``lastIndexOf`` here are the list overloads of the strings extension's methods.
"""

from __future__ import annotations

import itertools
from typing import Any

from celpy import celtypes

from ._base import cel_bool, cel_int, fail, is_bool, same, type_name
from ._registry import method


def _comparable_list(items: Any, fn: str) -> list[Any]:
    if not isinstance(items, list):
        raise fail(f"no such overload: {type_name(items)}.{fn}()")
    kinds = {type_name(i) for i in items}
    if len(kinds) > 1 or kinds - {"int", "uint", "double", "string", "bytes", "bool"}:
        raise fail(f"no such overload: {fn} of list({', '.join(sorted(kinds))})")
    return list(items)


@method("isSorted", arity=(0,), returns="bool")
def is_sorted(items: Any) -> celtypes.BoolType:
    values = _comparable_list(items, "isSorted")
    return cel_bool(all(a <= b for a, b in itertools.pairwise(values)))


@method("sum", arity=(0,), returns=("int", "uint", "double"))
def list_sum(items: Any) -> Any:
    values = _comparable_list(items, "sum")
    if not values:
        return cel_int(0)
    if isinstance(values[0], (str, bytes)) or is_bool(values[0]):
        raise fail(f"no such overload: sum of list({type_name(values[0])})")
    total = values[0]
    for v in values[1:]:
        total = total + v  # the cel types check overflow
    return total


@method("min", arity=(0,), returns="dyn")
def list_min(items: Any) -> Any:
    values = _comparable_list(items, "min")
    if not values:
        raise fail("min called on empty list")
    return min(values)


@method("max", arity=(0,), returns="dyn")
def list_max(items: Any) -> Any:
    values = _comparable_list(items, "max")
    if not values:
        raise fail("max called on empty list")
    return max(values)


# The compiler allows the offset argument of the string overloads, so these refuse it.


@method("indexOf", arity=(1,), returns="int", receiver=list)
def index_of(items: list[Any], item: Any, offset: Any = None) -> celtypes.IntType:
    if offset is not None:
        raise fail("no such overload: list.indexOf(_, int)")
    for i, element in enumerate(items):
        if same(element, item):
            return cel_int(i)
    return cel_int(-1)


@method("lastIndexOf", arity=(1,), returns="int", receiver=list)
def last_index_of(items: list[Any], item: Any, offset: Any = None) -> celtypes.IntType:
    if offset is not None:
        raise fail("no such overload: list.lastIndexOf(_, int)")
    for i in range(len(items) - 1, -1, -1):
        if same(items[i], item):
            return cel_int(i)
    return cel_int(-1)
