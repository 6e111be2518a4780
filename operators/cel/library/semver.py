"""Kubernetes' semver library, version 1 (``semver()``, ``isSemver()``, the Semver methods)."""

from __future__ import annotations

from typing import Any

from ..runtime import CelError
from ..values import SemverValue, parse_semver
from ._registry import function, method

S = "kubernetes.Semver"


def _int64(value: int) -> int:
    """Go's types.Int(uint64): wraps above the largest int64."""
    return (value + 2**63) % 2**64 - 2**63


@function(
    "semver",
    f"string_to_semver (string) -> {S}",
    f"string_bool_to_semver (string, bool) -> {S}",
)
def semver(text: Any, normalize: Any = False) -> SemverValue:
    try:
        return parse_semver(text, normalize=normalize)
    except ValueError as exc:
        raise CelError(str(exc)) from None


@function(
    "isSemver",
    "is_semver_string (string) -> bool",
    "is_semver_string_bool (string, bool) -> bool",
)
def is_semver(text: Any, normalize: Any = False) -> bool:
    try:
        parse_semver(text, normalize=normalize)
    except ValueError:
        return False
    return True


@method("isGreaterThan", f"semver_is_greater_than {S}.({S}) -> bool")
def is_greater_than(value: Any, other: Any) -> bool:
    return value.compare(other) == 1  # type: ignore[no-any-return]


@method("isLessThan", f"semver_is_less_than {S}.({S}) -> bool")
def is_less_than(value: Any, other: Any) -> bool:
    return value.compare(other) == -1  # type: ignore[no-any-return]


@method("compareTo", f"semver_compare_to {S}.({S}) -> int")
def compare_to(value: Any, other: Any) -> int:
    return value.compare(other)  # type: ignore[no-any-return]


@method("major", f"semver_major {S}.() -> int")
def major(value: Any) -> int:
    return _int64(value.major)


@method("minor", f"semver_minor {S}.() -> int")
def minor(value: Any) -> int:
    return _int64(value.minor)


@method("patch", f"semver_patch {S}.() -> int")
def patch(value: Any) -> int:
    return _int64(value.patch)
