"""How a reconcile's outcome maps to what the work queue does next (kopf's vocabulary).

- ``Requeue``: not an error; call again after ``delay`` (a poll, a wait with a deadline).
- ``TemporaryError`` and every error not named here (API errors, 409 conflicts, timeouts,
  connection errors): retry with per-key exponential backoff, from a fresh read.
- ``PermanentError``: retrying cannot help until the object changes; its next event brings
  the key back.
- ``NotLeaderError``: this replica may not write now: retried with backoff (its lease may
  only be renewing late; once leadership is lost the queue stops).
- ``UnknownOutcomeError``: a write timed out, so it may or may not have happened; whoever
  wrote must re-read before deciding anything (the queue treats it as temporary).
"""

from __future__ import annotations

import dataclasses

from operators.kube.api import ApiError


@dataclasses.dataclass(frozen=True)
class Requeue(Exception):
    """Raised by a reconcile to be called again after ``delay`` seconds (not an error)."""

    delay: float
    reason: str = ""


class TemporaryError(Exception):
    """Retry with backoff, or after ``delay`` seconds when given."""

    def __init__(self, message: str, *, delay: float | None = None) -> None:
        super().__init__(message)
        self.delay = delay


class PermanentError(Exception):
    """Do not retry: nothing but a change of the object can make the next attempt differ."""


class NotLeaderError(Exception):
    """This replica does not hold the lease (or could not renew it in time): no writes.

    Retried with backoff like any temporary error: the renewal may only be late, and then no
    deactivate re-enqueues the key; when leadership is lost, the queue stops anyway."""


class UnknownOutcomeError(Exception):
    """A write timed out or its connection broke after it was sent: it may have happened."""


def retry_delay(error: BaseException, backoff: float) -> float | None:
    """Seconds until the key is tried again after ``error``; None: not until it changes."""
    if isinstance(error, Requeue):
        return error.delay
    if isinstance(error, PermanentError):
        return None
    if isinstance(error, TemporaryError) and error.delay is not None:
        return error.delay
    return backoff


def is_expected(error: BaseException) -> bool:
    """Errors of a healthy cluster (a conflict, an API server restart): logged without a
    traceback. Anything else is a bug worth its traceback."""
    return isinstance(
        error,
        ApiError | OSError | TimeoutError | TemporaryError | UnknownOutcomeError | NotLeaderError,
    )
