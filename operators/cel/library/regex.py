"""Kubernetes' regex library (``find``, ``findAll``), and the RE2 patterns ``matches`` shares.

RE2, as Go's regexp: linear time, so no pattern can stall the scheduler by backtracking. Where
Go's syntax and RE2's part, patterns are read as Go reads them (``operators.cel.goregexp``).
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from ..goregexp import GoRegexpError, translate
from ..runtime import CelError
from ._registry import method

# google-re2 ships without type information.
re2: Any = importlib.import_module("re2")
# A pattern RE2 refuses is the selector's error, not a line on the scheduler's stderr.
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False


@functools.lru_cache(maxsize=256)
def compile_regex(pattern: str, go127: bool = False) -> Any:
    """Compile once per pattern (a pure, bounded memo; RE2 objects are immutable), read as
    Go's regexp reads it (goregexp: what Go refuses and RE2 would take is refused); ``go127``:
    as Go 1.27, Kubernetes 1.38's, reads it (release.Dialect.go127_regexp)."""
    try:
        return re2.compile(translate(pattern, go127), _OPTIONS)
    except (re2.error, GoRegexpError) as exc:
        raise CelError(f"invalid regular expression {pattern!r}: {exc}") from None


@method("find", "string_find_string string.(string) -> string", until="1.37")
def find(text: Any, pattern: Any) -> str:
    match = compile_regex(pattern).search(text)
    return match.group(0) if match else ""


@method("find", "string_find_string string.(string) -> string", since="1.38")
def find_go127(text: Any, pattern: Any) -> str:
    match = compile_regex(pattern, True).search(text)
    return match.group(0) if match else ""


_FIND_ALL = (
    "string_find_all_string string.(string) -> list(string)",
    "string_find_all_string_int string.(string, int) -> list(string)",
)


@method("findAll", *_FIND_ALL, until="1.37")
def find_all(text: Any, pattern: Any, limit: Any = -1) -> list[str]:
    return _find_all(text, pattern, limit, False)


@method("findAll", *_FIND_ALL, since="1.38")
def find_all_go127(text: Any, pattern: Any, limit: Any = -1) -> list[str]:
    return _find_all(text, pattern, limit, True)


def _find_all(text: Any, pattern: Any, limit: Any, go127: bool) -> list[str]:
    regex = compile_regex(pattern, go127)
    if limit == 0:
        return []
    found: list[str] = []
    for match in regex.finditer(text):
        found.append(match.group(0))
        if 0 < limit <= len(found):
            break
    return found
