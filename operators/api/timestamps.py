"""RFC 3339 timestamps as the API server writes them, and ages computed from them.

Pure: ``now`` is always passed in (the runtime's clock), so that tests choose the time and
no decision depends on when a module happened to be imported or called.
"""

from __future__ import annotations

import datetime


def format_time(moment: datetime.datetime) -> str:
    """metav1.Time: seconds, UTC, ``Z`` (what creationTimestamp and conditions carry)."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(moment: datetime.datetime) -> str:
    """metav1.MicroTime: microseconds, UTC (Lease renewTime, Event eventTime)."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str | None) -> datetime.datetime | None:
    """A Time or MicroTime string; None for None, empty (unset) or unparsable (a hand-written
    status must not stop a controller)."""
    if not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def epoch(text: str | None) -> float | None:
    """Seconds since the epoch of a timestamp (None as ``parse_time``)."""
    moment = parse_time(text)
    return None if moment is None else moment.timestamp()


def format_epoch(seconds: float) -> str:
    """metav1.Time of seconds since the epoch."""
    return format_time(datetime.datetime.fromtimestamp(seconds, datetime.UTC))


def age(text: str | None, now: datetime.datetime) -> float | None:
    """Seconds from the timestamp ``text`` to ``now``; None when the timestamp is unset."""
    then = parse_time(text)
    return None if then is None else (now - then).total_seconds()
