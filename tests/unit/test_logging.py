"""Log output as components write it: JSON lines in a cluster, with the traceback."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from operators.observability.logging import configure


@pytest.fixture
def restored() -> Iterator[None]:
    """``configure`` sets the process's logging up: put the test run's back afterwards."""
    root = logging.getLogger()
    handlers, level, config = root.handlers[:], root.level, structlog.get_config()
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        structlog.configure(**config)


def test_a_json_line_carries_the_traceback_of_exc_info(
    restored: None, capsys: pytest.CaptureFixture[str]
) -> None:
    log = configure("test", json_output=True)
    nodes: dict[str, int] = {}
    try:
        nodes["bench-node-0167"]
    except KeyError:
        log.warning("reconcile failed", exc_info=True)
    (line,) = capsys.readouterr().err.splitlines()
    entry = json.loads(line)
    assert entry["event"] == "reconcile failed"
    assert "exc_info" not in entry
    assert entry["exception"].startswith("Traceback")
    assert "KeyError: 'bench-node-0167'" in entry["exception"]
