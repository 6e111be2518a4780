"""cel-go's sets extension (ext.Sets): ``sets.contains``, ``.equivalent``, ``.intersects``."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from celpy import celtypes

from ._base import cel_bool, fail, is_bool, same, type_name
from ._registry import function


def _lists(a: Any, b: Any, fn: str) -> tuple[list[Any], list[Any]]:
    if not isinstance(a, list) or not isinstance(b, list):
        raise fail(f"no such overload: sets.{fn}({type_name(a)}, {type_name(b)})")
    return a, b


def _contains_all(container: Iterable[Any], items: Iterable[Any]) -> bool:
    pool = list(container)
    return all(any(_numeric_equal(x, y) for y in pool) for x in items)


def _numeric_equal(a: Any, b: Any) -> bool:
    """ext.Sets compares numbers across int, uint and double, like CEL's heterogeneous equality."""
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not is_bool(a) and not is_bool(b):
        return (
            Decimal(a) == Decimal(b)
            if not (isinstance(a, float) or isinstance(b, float))
            else float(a) == float(b)
        )
    return same(a, b)


@function("sets.contains", arity=(2,), returns="bool")
def sets_contains(a: Any, b: Any) -> celtypes.BoolType:
    first, second = _lists(a, b, "contains")
    return cel_bool(_contains_all(first, second))


@function("sets.equivalent", arity=(2,), returns="bool")
def sets_equivalent(a: Any, b: Any) -> celtypes.BoolType:
    first, second = _lists(a, b, "equivalent")
    return cel_bool(_contains_all(first, second) and _contains_all(second, first))


@function("sets.intersects", arity=(2,), returns="bool")
def sets_intersects(a: Any, b: Any) -> celtypes.BoolType:
    first, second = _lists(a, b, "intersects")
    return cel_bool(any(_numeric_equal(x, y) for x in first for y in second))
