"""Durations and timestamps of CEL's standard library, as cel-go computes them with Go's time.

Timestamps are nanoseconds since the Unix epoch, from year 0001 to 9999; durations int64
nanoseconds. Getters take a time zone: UTC, a fixed offset ("+05:30") or, when the caller
the process installed a zone loader (``install_zone_loader``, the CLI does at startup: Go's
``time.LoadLocation`` reads the system's zone database), an IANA name; the core reads no files
itself.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from ..runtime import (
    INT64_MAX,
    INT64_MIN,
    CelError,
    Duration,
    Timestamp,
    checked_int,
    register_time_text,
)
from ._registry import function, method

NANOS = 1_000_000_000
MIN_UNIX = -62135596800  # 0001-01-01T00:00:00Z
MAX_UNIX = 253402300799  # 9999-12-31T23:59:59Z
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

# Resolves an IANA zone name (the caller's zoneinfo.ZoneInfo, say); None: the process's.
ZONES: ContextVar[Callable[[str], datetime.tzinfo] | None] = ContextVar(
    "cel_time_zones", default=None
)
_PROCESS_ZONES: list[Callable[[str], datetime.tzinfo]] = []


def install_zone_loader(loader: Callable[[str], datetime.tzinfo]) -> None:
    """The process's IANA zone names, for every evaluation on any thread (once, at startup)."""
    _PROCESS_ZONES[:] = [loader]


def _timestamp(nanos: int) -> Timestamp:
    if not MIN_UNIX <= nanos // NANOS <= MAX_UNIX:
        raise CelError("timestamp overflow")
    return Timestamp(nanos)


# --- parsing and printing -------------------------------------------------------------------------

_UNITS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": NANOS,
    "m": 60 * NANOS,
    "h": 3600 * NANOS,
}
_COMPONENT = re.compile(r"([0-9]*)(\.([0-9]*))?([^0-9.]+)")


def parse_duration(text: str) -> int:
    """Go's time.ParseDuration, in nanoseconds; ValueError when it fails."""
    s = text
    negative = False
    if s[:1] in ("-", "+"):
        negative = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise ValueError(f"invalid duration {text!r}")
    total = 0
    while s:
        m = _COMPONENT.match(s)
        if m is None:
            raise ValueError(f"invalid duration {text!r}")
        whole, fraction, unit = m.group(1), m.group(3) or "", m.group(4)
        if not (whole or fraction):
            raise ValueError(f"invalid duration {text!r}")
        if unit not in _UNITS:
            raise ValueError(f"unknown unit {unit!r} in duration {text!r}")
        scale = _UNITS[unit]
        v = int(whole or "0")
        if v > (1 << 63) // scale:
            raise ValueError(f"invalid duration {text!r}")
        v *= scale
        if fraction:
            f = int(fraction[:18] or "0")
            f_scale = 10 ** len(fraction[:18])
            v += int(float(f) * (scale / f_scale))
            if v > 1 << 63:
                raise ValueError(f"invalid duration {text!r}")
        total += v
        if total > 1 << 63:
            raise ValueError(f"invalid duration {text!r}")
        s = s[m.end() :]
    if negative:
        return -total
    if total > INT64_MAX:
        raise ValueError(f"invalid duration {text!r}")
    return total


_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
    r"(Z|[+-][0-9]{2}:[0-9]{2})"
)


def parse_timestamp(text: str) -> int:
    """Go's time.Parse(time.RFC3339, ...) in nanoseconds; ValueError when it fails."""
    m = _RFC3339.fullmatch(text)
    if m is None:
        raise ValueError(f"cannot parse {text!r} as RFC 3339")
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    if hour > 23 or minute > 59 or second > 59:
        raise ValueError("time out of range")
    try:
        base = datetime.datetime(max(year, 1), month, day, hour, minute, second)
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    days = (base.date() - datetime.date(1970, 1, 1)).days
    if year == 0:
        days -= 366
    seconds = days * 86400 + hour * 3600 + minute * 60 + second
    zone = m.group(8)
    if zone != "Z":
        offset = int(zone[1:3]) * 3600 + int(zone[4:6]) * 60
        if int(zone[4:6]) > 59:
            raise ValueError("time zone offset out of range")
        seconds -= offset if zone[0] == "+" else -offset
    fraction = (m.group(7) or ".")[1:10].ljust(9, "0")
    return seconds * NANOS + int(fraction)


def _seconds_text(nanos: int) -> str:
    """Go's strconv.FormatFloat(d.Seconds(), 'f', -1, 64)."""
    seconds = nanos // NANOS
    value = float(seconds) + float(nanos - seconds * NANOS) / 1e9
    text = repr(value)
    if "e" in text or "E" in text:
        text = format(value, "f")
        if "." in text:
            text = text.rstrip("0").rstrip(".")
    elif text.endswith(".0"):
        text = text[:-2]
    return text


def to_string(value: Any) -> str:
    if type(value) is Duration:
        return _seconds_text(value.nanos) + "s"
    nanos = value.nanos
    seconds, frac = divmod(nanos, NANOS)
    moment = _EPOCH + datetime.timedelta(seconds=seconds)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S").rjust(19, "0")
    if frac:
        text += "." + f"{frac:09d}".rstrip("0")
    return text + "Z"


register_time_text(to_string)  # 1.38's device maps convert keys with it


# --- arithmetic -----------------------------------------------------------------------------------


def add_timestamp_duration(a: Any, b: Any) -> Timestamp:
    ts, dur = (a, b) if type(a) is Timestamp else (b, a)
    return _timestamp(ts.nanos + dur.nanos)


def subtract_timestamp(a: Any, b: Any) -> Any:
    if type(b) is Duration:
        return _timestamp(a.nanos + checked_int(-b.nanos))
    difference = a.nanos - b.nanos
    if not INT64_MIN <= difference <= INT64_MAX:
        raise CelError("integer overflow")
    return Duration(difference)


# --- conversions ----------------------------------------------------------------------------------


@function("duration", "string_to_duration (string) -> duration")
def string_to_duration(text: Any) -> Duration:
    try:
        return Duration(parse_duration(text))
    except ValueError:
        raise CelError(
            "type conversion error from 'string' to 'google.protobuf.Duration'"
        ) from None


@function("duration", "int64_to_duration (int) -> duration", until="1.36")
def int_to_duration(value: Any) -> Duration:
    raise CelError("type conversion error from 'int' to 'google.protobuf.Duration'")


@function("timestamp", "string_to_timestamp (string) -> timestamp")
def string_to_timestamp(text: Any) -> Timestamp:
    try:
        nanos = parse_timestamp(text)
    except ValueError:
        raise CelError(
            "type conversion error from 'string' to 'google.protobuf.Timestamp'"
        ) from None
    return _timestamp(nanos)


@function("timestamp", "int64_to_timestamp (int) -> timestamp")
def int_to_timestamp(value: Any) -> Timestamp:
    if not MIN_UNIX <= value <= MAX_UNIX:
        raise CelError("timestamp overflow")
    return Timestamp(value * NANOS)


function("string", "timestamp_to_string (timestamp) -> string")(to_string)
function("string", "duration_to_string (duration) -> string")(to_string)


# --- getters --------------------------------------------------------------------------------------


def _zone(name: str) -> datetime.tzinfo:
    if ":" not in name:
        if name in ("", "UTC"):
            return datetime.UTC
        loader = ZONES.get() or (_PROCESS_ZONES[0] if _PROCESS_ZONES else None)
        if loader is None:
            raise CelError(f"unknown time zone {name}")
        try:
            return loader(name)
        except Exception:
            raise CelError(f"unknown time zone {name}") from None
    hours, _, minutes = name.partition(":")
    try:
        h, m = int(hours), int(minutes)
    except ValueError:
        raise CelError(f'strconv.Atoi: parsing "{name}": invalid syntax') from None
    offset = h * 60 - m if name.startswith("-") else h * 60 + m
    return datetime.timezone(datetime.timedelta(minutes=offset))


# 400 Gregorian years: the same calendar, weekdays included, 146,097 days later.
_CYCLE_DAYS, _CYCLE_YEARS = 146_097, 400


def _in_zone(value: Any, zone: str | None) -> tuple[datetime.datetime, int, int]:
    """The local time, its nanoseconds and a year correction: a zone west of UTC puts year 1's
    first hours in year 0 (east: 9999's last in 10000), which Go's time keeps and Python's
    cannot, so such a moment is converted 400 years inward and its year corrected."""
    seconds, frac = divmod(value.nanos, NANOS)
    moment = _EPOCH + datetime.timedelta(seconds=seconds)
    if zone is None:
        return moment, frac, 0
    tz = _zone(zone)
    try:
        return moment.astimezone(tz), frac, 0
    except OverflowError:
        shift = _CYCLE_YEARS if moment.year < 5000 else -_CYCLE_YEARS
        inward = moment + datetime.timedelta(days=_CYCLE_DAYS * shift // _CYCLE_YEARS)
        return inward.astimezone(tz), frac, -shift


def _getter(
    name: str,
    overload: str,
    read: Callable[[datetime.datetime, int], int],
    tz: str = "_with_tz",
    *,
    year: bool = False,
) -> None:
    def timestamp_getter(value: Any, zone: Any = None) -> int:
        moment, frac, years = _in_zone(value, zone)
        return read(moment, frac) + (years if year else 0)

    timestamp_getter.__name__ = overload
    method(
        name,
        f"{overload} timestamp.() -> int",
        f"{overload}{tz} timestamp.(string) -> int",
    )(timestamp_getter)


_getter("getFullYear", "timestamp_to_year", lambda t, f: t.year, year=True)
_getter("getMonth", "timestamp_to_month", lambda t, f: t.month - 1)
_getter("getDayOfYear", "timestamp_to_day_of_year", lambda t, f: t.timetuple().tm_yday - 1)
_getter("getDayOfMonth", "timestamp_to_day_of_month", lambda t, f: t.day - 1)
_getter("getDate", "timestamp_to_day_of_month_1_based", lambda t, f: t.day)
_getter("getDayOfWeek", "timestamp_to_day_of_week", lambda t, f: (t.weekday() + 1) % 7)
_getter("getHours", "timestamp_to_hours", lambda t, f: t.hour)
_getter("getMinutes", "timestamp_to_minutes", lambda t, f: t.minute)
_getter("getSeconds", "timestamp_to_seconds", lambda t, f: t.second, "_tz")
_getter("getMilliseconds", "timestamp_to_milliseconds", lambda t, f: f // 1_000_000)


def _duration_getter(name: str, overload: str, unit: int) -> None:
    def duration_getter(value: Any) -> int:
        return int(value.nanos / unit) if value.nanos >= 0 else -int(-value.nanos / unit)

    duration_getter.__name__ = overload
    method(name, f"{overload} duration.() -> int")(duration_getter)


_duration_getter("getHours", "duration_to_hours", 3600 * NANOS)
_duration_getter("getMinutes", "duration_to_minutes", 60 * NANOS)
_duration_getter("getSeconds", "duration_to_seconds", NANOS)
_duration_getter("getMilliseconds", "duration_to_milliseconds", 1_000_000)
