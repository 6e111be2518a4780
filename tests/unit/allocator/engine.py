"""The selector engine the allocator tests use: operators.cel's real one."""

from __future__ import annotations

from operators.allocator.selectors import CelSelectorEngine, SelectorEngine

_ENGINE = CelSelectorEngine()


def engine() -> SelectorEngine:
    """One shared engine: compiled selectors are cached across cases, as in production."""
    return _ENGINE
