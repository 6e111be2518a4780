"""Errors of the CEL layer: bad selectors (permanent) and failed evaluations, with reasons.

Messages start with the caller's coordinates (``claim ns/a, request gpu, selector #0: ...``) so
that the allocator can surface them unchanged in conditions, Events and explanations.
"""

from __future__ import annotations


class SelectorError(Exception):
    """Base of the CEL layer's errors; ``reason`` is the CamelCase machine-readable cause."""

    reason = "SelectorError"

    def __init__(self, message: str, *, expression: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.expression = expression


class InvalidSelectorError(SelectorError):
    """The expression cannot be compiled or is not allowed (syntax, unknown names, limits, type).

    Permanent: retrying with the same expression gives the same answer.
    """

    reason = "InvalidSelector"

    def __init__(
        self,
        message: str,
        *,
        expression: str = "",
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        super().__init__(message, expression=expression)
        self.line = line
        self.column = column


class SelectorEvaluationError(SelectorError):
    """Evaluating a compiled selector against one device failed (missing key, overload, cost).

    Kubernetes aborts the allocation attempt on such errors instead of treating the device as
    "not matching", so callers must not silently skip the device.
    """

    reason = "SelectorEvaluationError"


def with_context(context: str, message: str) -> str:
    """Prefix a message with the caller's coordinates, when there are any."""
    return f"{context}: {message}" if context else message
