"""Every kopf handler of every operator is a coroutine function.

kopf runs plain functions in a thread pool; ours touch the work queue, kopf's indices and the
scheduler's ledger, which only the event loop may touch. A sync handler once corrupted the
scheduler's state under load ("dictionary changed size during iteration").
"""

from __future__ import annotations

import inspect
from typing import Any

import kopf
import pytest

from operators.components import COMPONENTS


def _apps() -> list[str]:
    return sorted(name for name, c in COMPONENTS.items() if c.controller)


def _registry(component: str) -> kopf.OperatorRegistry:
    app: Any = COMPONENTS[component].runnable()
    registry: kopf.OperatorRegistry = app.build_registry(COMPONENTS[component].settings_class()())
    return registry


@pytest.mark.parametrize("component", _apps())
def test_every_handler_is_async(component: str) -> None:
    registry = _registry(component)
    handlers = [
        *registry._indexing.get_all_handlers(),
        *registry._watching.get_all_handlers(),
        *registry._activities.get_all_handlers(),
    ]
    assert handlers
    sync = [h.id for h in handlers if not inspect.iscoroutinefunction(h.fn)]
    assert sync == []


@pytest.mark.parametrize("component", _apps())
def test_no_change_handlers_since_no_diff_base_is_kept(component: str) -> None:
    """configure_kopf drops kopf's diff base (runner.NoDiffBase): change handlers would misfire."""
    registry = _registry(component)
    assert [h.id for h in registry._changing.get_all_handlers()] == []
    assert [h.id for h in registry._spawning.get_all_handlers()] == []
