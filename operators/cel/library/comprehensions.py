"""cel-go's two-variable comprehensions (ext.TwoVarComprehensions): ``cel.@mapInsert``, the
step of ``transformMap`` and ``transformMapEntry``. The macros themselves are syntax.py's."""

from __future__ import annotations

from typing import Any

from ..runtime import _MISSING, CelError, CelMap, from_key, map_find, map_key
from ._registry import function


def _insert(target: dict[Any, Any], key: Any, value: Any) -> CelMap:
    if map_find(target, key) is not _MISSING:
        raise CelError(f"insert failed: key {key!r} already exists")
    result = (
        CelMap(target)
        if type(target) is CelMap
        else CelMap({map_key(k): v for k, v in target.items()})
    )
    result[map_key(key)] = value
    return result


@function(
    "cel.@mapInsert",
    "@mapInsert_map_key_value (map(K, V), K, V) -> map(K, V)",
    "@mapInsert_map_map (map(K, V), map(K, V)) -> map(K, V)",
    singleton=True,
)
def map_insert(target: Any, key: Any, value: Any = _MISSING) -> CelMap:
    if value is not _MISSING:
        return _insert(target, key, value)
    result: Any = target
    for k, v in key.items():
        result = _insert(result, from_key(k) if type(key) is CelMap else k, v)
    return result  # type: ignore[no-any-return]
