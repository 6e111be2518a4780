"""Every kopf handler of every operator is a coroutine function.

kopf runs plain functions in a thread pool; ours touch the work queue, kopf's indices and the
scheduler's ledger, which only the event loop may touch. A sync handler once corrupted the
scheduler's state under load ("dictionary changed size during iteration").
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import kopf
import pytest

from operators.cli import COMPONENTS
from operators.settings import Settings


def _apps() -> list[str]:
    return sorted(m for m in COMPONENTS.values() if ".controllers." in m)


def _registry(module: str) -> kopf.OperatorRegistry:
    app: Any = importlib.import_module(module)
    settings_class = next(
        v
        for v in vars(app).values()
        if isinstance(v, type) and issubclass(v, Settings) and v is not Settings
    )
    registry: kopf.OperatorRegistry = app.build_registry(settings_class())
    return registry


@pytest.mark.parametrize("module", _apps())
def test_every_handler_is_async(module: str) -> None:
    registry = _registry(module)
    handlers = [
        *registry._indexing.get_all_handlers(),
        *registry._watching.get_all_handlers(),
        *registry._activities.get_all_handlers(),
    ]
    assert handlers
    sync = [h.id for h in handlers if not inspect.iscoroutinefunction(h.fn)]
    assert sync == []


@pytest.mark.parametrize("module", _apps())
def test_no_change_handlers_since_no_diff_base_is_kept(module: str) -> None:
    """configure_kopf drops kopf's diff base (runner.NoDiffBase): change handlers would misfire."""
    registry = _registry(module)
    assert [h.id for h in registry._changing.get_all_handlers()] == []
    assert [h.id for h in registry._spawning.get_all_handlers()] == []
