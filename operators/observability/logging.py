"""structlog setup: JSON when not on a terminal (in cluster), readable console otherwise."""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

from operators.observability import fields


def configure(component: str, *, level: str = "INFO", json_output: bool | None = None) -> Any:
    """Configure stdlib logging (kopf logs through it) and structlog; returns a bound logger."""
    if json_output is None:
        json_output = not sys.stderr.isatty()
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    # The console renderer prints a traceback itself; JSON carries it in "exception" (without
    # it, exc_info=True left a bare "exc_info": true and the traceback was lost).
    rendering: list[Any] = (
        [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
        if json_output
        else [structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())]
    )
    structlog.configure(
        # Levels below the configured one are dropped first, before any processor runs: a
        # debug line on a hot path (a queueing hint per watch event) then costs a level check.
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *rendering],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    return structlog.get_logger().bind(**{fields.COMPONENT: component})
