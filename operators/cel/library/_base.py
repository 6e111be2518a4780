"""What every library module shares: failures, argument checks, rune-aware string helpers."""

from __future__ import annotations

from typing import Any

from ..runtime import CelError, no_overload, type_name

__all__ = ["CelError", "fail", "no_overload", "type_name", "want_int", "want_list", "want_string"]


def fail(message: str) -> CelError:
    return CelError(message)


def want_string(value: Any, function: str) -> str:
    if type(value) is not str:
        raise no_overload(function, value)
    return value


def want_int(value: Any, function: str) -> int:
    if type(value) is not int:
        raise no_overload(function, value)
    return value


def want_list(value: Any, function: str) -> list[Any]:
    if not isinstance(value, list):
        raise no_overload(function, value)
    return value
