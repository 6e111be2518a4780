"""``includes()``: the method DRA adds to its attributes (DRAListTypeAttributes), in 1.36.

Kubernetes 1.37 has it from its Lists library instead (lists.py), without the length limit and
priced as a traversal.
"""

from __future__ import annotations

from typing import Any

from ..runtime import CelError
from ._registry import method
from .lists import equals

# resourceapi.ResourceSliceMaxAttributeValuesPerDevice
MAX_VALUES = 48


@method("includes", "dra_includes_dyn_dyn dyn.(dyn) -> bool", until="1.36")
def includes(target: Any, value: Any) -> bool:
    """A list includes its elements (48 at most); anything else includes what equals it."""
    if isinstance(target, list):
        for i, item in enumerate(target):
            if i >= MAX_VALUES:
                raise CelError(
                    f"'includes' function cannot be applied to lists longer than {MAX_VALUES} "
                    "values"
                )
            if equals(item, value):
                return True
        return False
    return equals(target, value)
