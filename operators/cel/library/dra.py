"""``includes()``: the method DRA adds to its attributes (DRAListTypeAttributes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from celpy import celtypes

from ._base import cel_bool, fail, same, type_name
from ._registry import method


@method("includes", arity=(1,), returns="bool")
def includes(container: Any, value: Any) -> celtypes.BoolType:
    """A list attribute includes its elements; a scalar attribute includes itself."""
    if isinstance(container, list):
        return cel_bool(any(same(element, value) for element in container))
    if isinstance(container, Mapping):
        raise fail(f"no such overload: map.includes({type_name(value)})")
    return cel_bool(same(container, value))
