"""The collector is tuned only in a process that ``kopf-dra run`` started."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from operators.runtime import memory


@pytest.fixture
def restored(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    thresholds = gc.get_threshold()
    monkeypatch.setattr(memory, "_tuned", False)
    yield
    gc.set_threshold(*thresholds)
    gc.unfreeze()


def test_an_in_process_operator_leaves_the_collector_alone(restored: None) -> None:
    thresholds = gc.get_threshold()
    frozen = gc.get_freeze_count()
    memory.listed()
    assert (gc.get_threshold(), gc.get_freeze_count()) == (thresholds, frozen)


def test_a_component_process_collects_less_often_and_freezes_what_it_listed(
    restored: None,
) -> None:
    memory.tune()
    assert gc.get_threshold() == memory.THRESHOLDS
    listed = [{"metadata": {"name": f"node-{i}"}} for i in range(100)]
    memory.listed()
    assert gc.get_freeze_count() >= len(listed)
