"""The selector engine the allocator tests use: operators.cel's real one."""

from __future__ import annotations

import functools

from operators.allocator.selectors import CelSelectorEngine, SelectorEngine
from operators.cel import CELEnvironment


@functools.cache
def engine(kubernetes: str | None = None) -> SelectorEngine:
    """One shared engine (per Kubernetes minor, when one is named; else the CEL environment's
    default): compiled selectors are cached across cases, as in production."""
    if kubernetes is None:
        return CelSelectorEngine()
    return CelSelectorEngine(CELEnvironment(kubernetes=kubernetes))
