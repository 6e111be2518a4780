"""cel-go's sets extension (ext.Sets): ``sets.contains``, ``.equivalent``, ``.intersects``."""

from __future__ import annotations

from typing import Any

from ..runtime import contains
from ._registry import function


@function("sets.contains", "list_sets_contains_list (list(T), list(T)) -> bool")
def sets_contains(items: Any, sub: Any) -> bool:
    return all(contains(items, x) for x in sub)


@function("sets.equivalent", "list_sets_equivalent_list (list(T), list(T)) -> bool")
def sets_equivalent(a: Any, b: Any) -> bool:
    return sets_contains(a, b) and sets_contains(b, a)  # type: ignore[no-any-return]


@function("sets.intersects", "list_sets_intersects_list (list(T), list(T)) -> bool")
def sets_intersects(a: Any, b: Any) -> bool:
    return any(contains(b, x) for x in a)
