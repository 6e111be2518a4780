"""cel-go's strings extension, version 2 (ext.Strings), with its ``format`` verbs.

``indexOf`` and ``lastIndexOf`` here are the string overloads; the list ones are in lists.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from celpy import celtypes

from ..values import CIDRValue, IPValue
from ._base import cel_int, fail, is_bool, type_name, want_int, want_string
from ._registry import function, method


@method("charAt", arity=(1,), returns="string")
def char_at(text: Any, i: Any) -> celtypes.StringType:
    s, pos = want_string(text, "charAt"), want_int(i, "charAt")
    if not 0 <= pos <= len(s):
        raise fail(f"index out of range: {pos}")
    return celtypes.StringType(s[pos : pos + 1])


@method("indexOf", arity=(1, 2), returns="int")
def index_of(text: Any, item: Any, offset: Any = None) -> celtypes.IntType:
    s, sub = want_string(text, "indexOf"), want_string(item, "indexOf")
    start = 0 if offset is None else want_int(offset, "indexOf")
    if not 0 <= start <= len(s):
        raise fail(f"index out of range: {start}")
    return cel_int(s.find(sub, start))


@method("lastIndexOf", arity=(1, 2), returns="int")
def last_index_of(text: Any, item: Any, offset: Any = None) -> celtypes.IntType:
    s, sub = want_string(text, "lastIndexOf"), want_string(item, "lastIndexOf")
    end = len(s) if offset is None else want_int(offset, "lastIndexOf")
    if not 0 <= end <= len(s):
        raise fail(f"index out of range: {end}")
    return cel_int(s.rfind(sub, 0, end + len(sub)))


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


@method("lowerAscii", arity=(0,), returns="string")
def lower_ascii(text: Any) -> celtypes.StringType:
    return celtypes.StringType(want_string(text, "lowerAscii").translate(_ASCII_LOWER))


@method("upperAscii", arity=(0,), returns="string")
def upper_ascii(text: Any) -> celtypes.StringType:
    return celtypes.StringType(want_string(text, "upperAscii").translate(_ASCII_UPPER))


@method("replace", arity=(2, 3), returns="string")
def replace(text: Any, old: Any, new: Any, limit: Any = None) -> celtypes.StringType:
    s = want_string(text, "replace")
    o, n = want_string(old, "replace"), want_string(new, "replace")
    count = -1 if limit is None else want_int(limit, "replace")
    return celtypes.StringType(s.replace(o, n, count if count >= 0 else -1))


@method("split", arity=(1, 2), returns="list")
def split(text: Any, separator: Any, limit: Any = None) -> celtypes.ListType:
    s, sep = want_string(text, "split"), want_string(separator, "split")
    n = -1 if limit is None else want_int(limit, "split")
    if n == 0:
        return celtypes.ListType([])
    if sep == "":
        chars = list(s)
        if n > 0 and len(chars) > n:
            chars = [*chars[: n - 1], "".join(chars[n - 1 :])]
        parts = chars
    else:
        parts = s.split(sep, n - 1 if n > 0 else -1)
    return celtypes.ListType([celtypes.StringType(p) for p in parts])


@method("substring", arity=(1, 2), returns="string")
def substring(text: Any, start: Any, end: Any = None) -> celtypes.StringType:
    s = want_string(text, "substring")
    begin = want_int(start, "substring")
    stop = len(s) if end is None else want_int(end, "substring")
    if not 0 <= begin <= len(s) or not 0 <= stop <= len(s):
        raise fail(f"index out of range: {begin if not 0 <= begin <= len(s) else stop}")
    if begin > stop:
        raise fail(f"invalid substring range. start: {begin}, end: {stop}")
    return celtypes.StringType(s[begin:stop])


# Unicode White_Space, what Go's strings.TrimSpace removes (Python's strip() also removes
# the separators \x1c-\x1f, which Go keeps).
_WHITE_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


@method("trim", arity=(0,), returns="string")
def trim(text: Any) -> celtypes.StringType:
    return celtypes.StringType(want_string(text, "trim").strip(_WHITE_SPACE))


@method("join", arity=(0, 1), returns="string")
def join(items: Any, separator: Any = "") -> celtypes.StringType:
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise fail(f"no such overload: {type_name(items)}.join()")
    return celtypes.StringType(want_string(separator, "join").join(items))


@function("strings.quote", arity=(1,), returns="string")
def quote(text: Any) -> celtypes.StringType:
    s = want_string(text, "strings.quote")
    escaped = (
        s.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\a", "\\a")
        .replace("\b", "\\b")
        .replace("\f", "\\f")
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
        .replace("\v", "\\v")
    )
    return celtypes.StringType(f'"{escaped}"')


@method("format", arity=(1,), returns="string")
def format_string(template: Any, args: Any) -> celtypes.StringType:
    """``"%s has %d".format([a, b])``: the verbs of cel-go's strings extension."""
    fmt = want_string(template, "format")
    if not isinstance(args, list):
        raise fail(f"no such overload: string.format({type_name(args)})")
    out: list[str] = []
    i, arg = 0, 0
    while i < len(fmt):
        c = fmt[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        i += 1
        precision: int | None = None
        if i < len(fmt) and fmt[i] == ".":
            j = i + 1
            while j < len(fmt) and fmt[j].isdigit():
                j += 1
            precision = int(fmt[i + 1 : j] or "0")
            i = j
        if i >= len(fmt):
            raise fail("format: unterminated formatting verb")
        verb = fmt[i]
        i += 1
        if verb == "%":
            out.append("%")
            continue
        if arg >= len(args):
            raise fail(f"format: index {arg} out of range")
        out.append(_format_one(verb, args[arg], precision))
        arg += 1
    return celtypes.StringType("".join(out))


def _format_one(verb: str, value: Any, precision: int | None) -> str:
    if verb == "s":
        return _format_plain(value)
    if verb == "d":
        if is_bool(value) or not isinstance(value, int):
            raise fail(f"format: %d does not take {type_name(value)}")
        return str(int(value))
    if verb in "fe":
        if is_bool(value) or not isinstance(value, (int, float)):
            raise fail(f"format: %{verb} does not take {type_name(value)}")
        number = float(value)
        if math.isnan(number) or math.isinf(number):
            return "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")
        return f"{number:.{6 if precision is None else precision}{verb}}"
    if verb in "xXob":
        if isinstance(value, str):
            text = value.encode().hex()
            return text.upper() if verb == "X" else text
        if is_bool(value) or not isinstance(value, int):
            raise fail(f"format: %{verb} does not take {type_name(value)}")
        return format(int(value), verb)
    raise fail(f"format: unrecognized formatting clause %{verb}")


def _format_plain(value: Any) -> str:
    if is_bool(value):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        return repr(float(value)) if not value.is_integer() else str(int(value))
    if isinstance(value, list):
        return "[" + ", ".join(_format_plain(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return (
            "{"
            + ", ".join(f"{_format_plain(k)}: {_format_plain(v)}" for k, v in value.items())
            + "}"
        )
    if isinstance(value, (str, int)):
        return str(value)
    if isinstance(value, IPValue):
        return str(value.address)
    if isinstance(value, CIDRValue):
        return str(value.interface)
    raise fail(f"format: %s does not take {type_name(value)}")
