"""Kubernetes' semver library, version 1 (``semver()``, ``isSemver()``, the Semver methods)."""

from __future__ import annotations

from typing import Any

from celpy import celtypes

from ..values import SemverValue, parse_semver
from ._base import cel_bool, cel_int, fail, is_bool, type_name, want
from ._registry import declare_ordering, function, method


@function("semver", arity=(1, 2), returns="kubernetes.Semver", fold=True)
def semver(text: Any, normalize: Any = False) -> SemverValue:
    want(text, str, "semver")
    if not is_bool(normalize):
        raise fail(f"no such overload: semver(string, {type_name(normalize)})")
    try:
        return parse_semver(str(text), normalize=bool(normalize))
    except ValueError as exc:
        raise fail(str(exc)) from None


@function("isSemver", arity=(1, 2), returns="bool")
def is_semver(text: Any, normalize: Any = False) -> celtypes.BoolType:
    want(text, str, "isSemver")
    if not is_bool(normalize):
        raise fail(f"no such overload: isSemver(string, {type_name(normalize)})")
    try:
        parse_semver(str(text), normalize=bool(normalize))
    except ValueError:
        return cel_bool(False)
    return cel_bool(True)


def _v(value: Any, fn: str) -> SemverValue:
    if not isinstance(value, SemverValue):
        raise fail(f"no such overload: {fn} on {type_name(value)}")
    return value


@method("major", arity=(0,), returns="int")
def semver_major(value: Any) -> celtypes.IntType:
    return cel_int(_v(value, "major").major)


@method("minor", arity=(0,), returns="int")
def semver_minor(value: Any) -> celtypes.IntType:
    return cel_int(_v(value, "minor").minor)


@method("patch", arity=(0,), returns="int")
def semver_patch(value: Any) -> celtypes.IntType:
    return cel_int(_v(value, "patch").patch)


declare_ordering(SemverValue, SemverValue.compare)
