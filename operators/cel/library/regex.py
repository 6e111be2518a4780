"""Kubernetes' regex library (``find``, ``findAll``), and the RE2 patterns ``matches`` shares.

RE2, as in Kubernetes: linear time, so no pattern can stall the scheduler by backtracking.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from celpy import celtypes

from ._base import fail, want_int, want_string
from ._registry import method

# google-re2 ships without type information; cel-python already depends on it.
re2: Any = importlib.import_module("re2")


@functools.lru_cache(maxsize=256)
def compile_regex(pattern: str) -> Any:
    """Compile once per pattern (a pure, bounded memo; RE2 objects are immutable)."""
    try:
        return re2.compile(pattern)
    except re2.error as exc:
        raise fail(f"invalid regular expression {pattern!r}: {exc}") from None


@method("find", arity=(1,), returns="string")
def find(text: Any, pattern: Any) -> celtypes.StringType:
    match = compile_regex(want_string(pattern, "find")).search(want_string(text, "find"))
    return celtypes.StringType(match.group(0) if match else "")


@method("findAll", arity=(1, 2), returns="list")
def find_all(text: Any, pattern: Any, limit: Any = None) -> celtypes.ListType:
    n = -1 if limit is None else want_int(limit, "findAll")
    if n == 0:
        return celtypes.ListType([])
    found: list[celtypes.StringType] = []
    for match in compile_regex(want_string(pattern, "findAll")).finditer(
        want_string(text, "findAll")
    ):
        found.append(celtypes.StringType(match.group(0)))
        if 0 < n <= len(found):
            break
    return celtypes.ListType(found)
