"""``includes()``: the method DRA adds to its attributes (DRAListTypeAttributes)."""

from __future__ import annotations

from typing import Any

from ..runtime import CelError, equal
from ._registry import method

# resourceapi.ResourceSliceMaxAttributeValuesPerDevice
MAX_VALUES = 48


def _equal(a: Any, b: Any) -> bool:
    try:
        return equal(a, b)
    except CelError:
        return False


@method("includes", "dra_includes_dyn_dyn dyn.(dyn) -> bool")
def includes(target: Any, value: Any) -> bool:
    """A list includes its elements (48 at most); anything else includes what equals it."""
    if isinstance(target, list):
        for i, item in enumerate(target):
            if i >= MAX_VALUES:
                raise CelError(
                    f"'includes' function cannot be applied to lists longer than {MAX_VALUES} "
                    "values"
                )
            if _equal(item, value):
                return True
        return False
    return _equal(target, value)
