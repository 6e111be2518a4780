"""cel-go's strings extension, version 2 (ext.Strings), with its ``format`` (cel-go's v1
formatter, locale en_US) and ``strings.quote``. Strings index by code point, as Go's runes.

``indexOf`` and ``lastIndexOf`` here are the string overloads; the list ones are in lists.py.
"""

from __future__ import annotations

import math
import unicodedata
from typing import Any, Protocol

from ..runtime import (
    CelError,
    CelMap,
    Duration,
    Timestamp,
    TypeValue,
    Uint,
    format_double,
    from_key,
    type_name,
)
from ._registry import function, method


@method("charAt", "string_char_at_int string.(int) -> string")
def char_at(text: Any, index: Any) -> str:
    if not 0 <= index <= len(text):
        raise CelError(f"index out of range: {index}")
    return text[index : index + 1]  # type: ignore[no-any-return]


def _empty_at(text: str, offset: int, checked: bool) -> int:
    """Where the empty string is found from ``offset``: there, in cel-go 0.26; cel-go 0.29
    refuses a negative offset and stops at the end of the string."""
    if not checked:
        return offset
    if offset < 0:
        raise CelError(f"index out of range: {offset}")
    return min(offset, len(text))


def _index_of(text: str, sub: str, offset: int, checked: bool) -> int:
    if sub == "":
        return _empty_at(text, offset, checked)
    if offset < 0:
        raise CelError(f"index out of range: {offset}")
    if offset >= len(text):
        return -1
    return text.find(sub, offset)


_INDEX_OF = (
    "string_index_of_string string.(string) -> int",
    "string_index_of_string_int string.(string, int) -> int",
)


@method("indexOf", *_INDEX_OF, until="1.36")
def index_of(text: Any, sub: Any, offset: Any = 0) -> int:
    return _index_of(text, sub, offset, False)


@method("indexOf", *_INDEX_OF, since="1.37")
def index_of_checked(text: Any, sub: Any, offset: Any = 0) -> int:
    return _index_of(text, sub, offset, True)


_LAST_INDEX_OF = (
    "string_last_index_of_string string.(string) -> int",
    "string_last_index_of_string_int string.(string, int) -> int",
)


@method("lastIndexOf", *_LAST_INDEX_OF, until="1.36")
def last_index_of(text: Any, sub: Any, offset: Any = None) -> int:
    return _last_index_of(text, sub, offset, False)


@method("lastIndexOf", *_LAST_INDEX_OF, since="1.37")
def last_index_of_checked(text: Any, sub: Any, offset: Any = None) -> int:
    return _last_index_of(text, sub, offset, True)


def _last_index_of(text: str, sub: str, offset: int | None, checked: bool) -> int:
    if offset is None:
        if sub == "":
            return len(text)
        if len(text.encode()) < len(sub.encode()):
            return -1
        offset = len(text) - 1
    if sub == "":
        return _empty_at(text, offset, checked)
    if offset < 0:
        raise CelError(f"index out of range: {offset}")
    if offset >= len(text):
        return -1
    offset = min(offset, len(text) - len(sub))
    return text.rfind(sub, 0, offset + len(sub)) if offset >= 0 else -1


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


@method("lowerAscii", "string_lower_ascii string.() -> string")
def lower_ascii(text: Any) -> str:
    return text.translate(_ASCII_LOWER)  # type: ignore[no-any-return]


@method("upperAscii", "string_upper_ascii string.() -> string")
def upper_ascii(text: Any) -> str:
    return text.translate(_ASCII_UPPER)  # type: ignore[no-any-return]


@method(
    "replace",
    "string_replace_string_string string.(string, string) -> string",
    "string_replace_string_string_int string.(string, string, int) -> string",
)
def replace(text: Any, old: Any, new: Any, limit: Any = -1) -> str:
    if limit < 0:
        limit = -1
    if old == "" and limit != 0:
        # Go inserts at every rune boundary, the start and the end included.
        pieces = list(text)
        slots = len(pieces) + 1
        count = slots if limit < 0 else min(limit, slots)
        out = []
        for i in range(slots):
            if i < count:
                out.append(new)
            if i < len(pieces):
                out.append(pieces[i])
        return "".join(out)
    return text.replace(old, new, limit)  # type: ignore[no-any-return]


def _split(text: str, sep: str, limit: int) -> list[str]:
    if limit == 0:
        return []
    if sep == "":
        chars = list(text)
        if 0 < limit < len(chars):
            chars = [*chars[: limit - 1], "".join(chars[limit - 1 :])]
        return chars
    return text.split(sep, limit - 1 if limit > 0 else -1)


@method(
    "split",
    "string_split_string string.(string) -> list(string)",
    "string_split_string_int string.(string, int) -> list(string)",
)
def split(text: Any, sep: Any, limit: Any = -1) -> list[str]:
    return _split(text, sep, limit)


@method(
    "substring",
    "string_substring_int string.(int) -> string",
    "string_substring_int_int string.(int, int) -> string",
)
def substring(text: Any, start: Any, end: Any = None) -> str:
    if end is None:
        if not 0 <= start <= len(text):
            raise CelError(f"index out of range: {start}")
        return text[start:]  # type: ignore[no-any-return]
    if start > end:
        raise CelError(f"invalid substring range. start: {start}, end: {end}")
    if not 0 <= start <= len(text):
        raise CelError(f"index out of range: {start}")
    if not 0 <= end <= len(text):
        raise CelError(f"index out of range: {end}")
    return text[start:end]  # type: ignore[no-any-return]


# Unicode White_Space: what Go's strings.TrimSpace removes.
_WHITE_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


@method("trim", "string_trim string.() -> string")
def trim(text: Any) -> str:
    return text.strip(_WHITE_SPACE)  # type: ignore[no-any-return]


@method(
    "join",
    "list_join list(string).() -> string",
    "list_join_string list(string).(string) -> string",
)
def join(items: Any, separator: Any = "") -> str:
    for item in items:
        if type(item) is not str:
            raise CelError(f"join: invalid input: {item!r}")
    return separator.join(items)  # type: ignore[no-any-return]


_QUOTES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


@function("strings.quote", "strings_quote (string) -> string")
def quote(text: Any) -> str:
    return '"' + "".join(_QUOTES.get(c, c) for c in text) + '"'


# --- format ---------------------------------------------------------------------------------------


@method("format", "string_format string.(list(dyn)) -> string")
def format_string(template: Any, args: Any) -> str:
    """``"%s has %d".format([a, b])``: cel-go's formatter (v1), locale en_US."""
    return parse_format(template, _RuntimeFormatter(args))


class Formatter(Protocol):
    """What a clause does with its argument: format it (runtime) or check its type (compile)."""

    def arg(self, index: int) -> Any: ...

    def size(self) -> int: ...

    def clause(self, verb: str, value: Any, precision: int | None) -> str: ...


class _RuntimeFormatter:
    def __init__(self, args: list[Any]) -> None:
        self.args = args

    def arg(self, index: int) -> Any:
        if index >= len(self.args):
            raise CelError(f"index {index} out of range")
        return self.args[index]

    def size(self) -> int:
        return len(self.args)

    def clause(self, verb: str, value: Any, precision: int | None) -> str:
        return format_clause(verb, value, precision)


def parse_format(template: str, formatter: Formatter) -> str:
    """cel-go's parseFormatString over bytes of the template."""
    data = template.encode("utf-8", "surrogatepass")
    out = bytearray()
    i, arg_index = 0, 0
    while i < len(data):
        if data[i] != ord("%"):
            out.append(data[i])
            i += 1
            continue
        if i + 1 < len(data) and data[i + 1] == ord("%"):
            out.append(ord("%"))
            i += 2
            continue
        value = formatter.arg(arg_index)
        if i + 1 >= len(data):
            raise CelError("unexpected end of string")
        if arg_index >= formatter.size():
            raise CelError(f"index {arg_index} out of range")
        j = i + 1
        precision: int | None = None
        if data[j] == ord("."):
            k = j + 1
            while True:
                if k >= len(data):
                    raise CelError(
                        "could not parse formatting clause: error while parsing precision: "
                        "could not find end of precision specifier"
                    )
                if not chr(data[k]).isdigit():
                    break
                k += 1
            digits = data[j + 1 : k].decode()
            if not digits:
                raise CelError("could not parse formatting clause: bad precision")
            precision = int(digits)
            j = k
        verb = chr(data[j])
        if verb not in "sdfebxXo":
            raise CelError(
                f'could not parse formatting clause: unrecognized formatting clause "{verb}"'
            )
        out += formatter.clause(verb, value, precision).encode()
        i = j + 1
        arg_index += 1
    return out.decode(errors="surrogatepass")


def format_clause(verb: str, value: Any, precision: int | None) -> str:
    kind = type(value)
    if verb == "s":
        return format_plain(value)
    if verb == "d":
        if kind is int or kind is Uint:
            return str(int(value))
        raise _clause_error("decimal clause can only be used on integers", value)
    if verb in "fe":
        if kind is str and value in ("NaN", "Infinity", "-Infinity"):
            value = float(value.replace("Infinity", "inf"))
        elif kind is not float:
            what = "fixed-point" if verb == "f" else "scientific"
            raise _clause_error(f"{what} clause can only be used on doubles", value)
        digits = 6 if precision is None else precision
        if verb == "e":
            return _localized_scientific(value, digits)
        if value == 0:
            value = 0.0  # golang.org/x/text prints no sign on a negative zero
        return _go_float(value, verb, digits, grouping=True)
    if verb == "b":
        if kind is int or kind is Uint:
            return format(int(value), "b")
        if kind is bool:
            return "1" if value else "0"
        raise _clause_error("only integers and bools can be formatted as binary", value)
    if verb in "xX":
        if kind is str:
            text = value.encode().hex()
        elif kind is bytes:
            text = value.hex()
        elif kind is int or kind is Uint:
            text = format(int(value), "x")
        else:
            raise _clause_error(
                "only integers, byte buffers, and strings can be formatted as hex", value
            )
        return text.upper() if verb == "X" else text  # type: ignore[no-any-return]
    if kind is int or kind is Uint:  # "o"
        return format(int(value), "o")
    raise _clause_error("octal clause can only be used on integers", value)


def _clause_error(message: str, value: Any) -> CelError:
    return CelError(f"error during formatting: {message}, was given {type_name(value)}")


_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def _localized_scientific(value: float, width: int) -> str:
    """cel-go's ``%e``: golang.org/x/text's en_US scientific notation (``1.500000\u00d710⁰⁰``).

    cel-go passes the clause's precision as the width (``%<n>e``), so there are always six
    fraction digits and the text is padded with spaces to ``n`` characters.
    """
    if math.isnan(value):
        text = "NaN"
    elif math.isinf(value):
        text = "∞" if value > 0 else "-∞"
    else:
        mantissa, _, exponent = f"{value if value else 0.0:.6e}".partition("e")
        power = int(exponent)
        digits = f"{'-' if power < 0 else ''}{abs(power):02d}"
        text = f"{mantissa}\u00d710{digits.translate(_SUPERSCRIPT)}"
    return text.rjust(width)


def _go_float(value: float, verb: str, digits: int, *, grouping: bool) -> str:
    """Go's %.Nf / %Ne; with ``grouping`` as golang.org/x/text prints for en_US."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        if grouping:
            return "∞" if value > 0 else "-∞"
        return "+Inf" if value > 0 else "-Inf"
    if verb == "f":
        return f"{value:,.{digits}f}" if grouping else f"{value:.{digits}f}"
    text = f"{value:.{digits}e}"
    mantissa, _, exponent = text.partition("e")
    return f"{mantissa}e{exponent[0]}{int(exponent[1:]):02d}"


def format_plain(value: Any) -> str:
    """``%s``: cel-go's FormatString."""
    kind = type(value)
    if kind is str:
        return value  # type: ignore[no-any-return]
    if kind is bool:
        return "true" if value else "false"
    if kind is int or kind is Uint:
        return str(int(value))
    if kind is float:
        return format_double(value)
    if kind is bytes:
        try:
            return value.decode("utf-8")  # type: ignore[no-any-return]
        except UnicodeDecodeError:
            raise CelError("error during formatting: invalid UTF-8 in bytes") from None
    if value is None:
        return "null"
    if isinstance(value, list):
        return _format_list(value)
    if isinstance(value, dict):
        return _format_map(value)
    if kind is TypeValue:
        return value.name  # type: ignore[no-any-return]
    if kind is Duration or kind is Timestamp:
        from .timestamps import to_string

        return to_string(value)
    raise CelError(
        "error during formatting: string clause can only be used on strings, bools, bytes, "
        "ints, doubles, maps, lists, types, durations, and timestamps, was given "
        f"{type_name(value)}"
    )


def _member(value: Any) -> str:
    """A list element or map value inside %s: by type, then quoted as CEL would write it."""
    kind = type(value)
    if kind is float:
        text = _go_float(value, "f", 6, grouping=False)
        if math.isnan(value) or math.isinf(value):
            return go_quote(text)
        return text
    if kind is str:
        return go_quote(value)
    if kind is bytes:
        return "b" + go_quote(format_plain(value))
    if kind is TypeValue:
        return value.name  # type: ignore[no-any-return]
    if kind is Duration or kind is Timestamp:
        from .timestamps import to_string

        name = "duration" if kind is Duration else "timestamp"
        return f"{name}({go_quote(to_string(value))})"
    if kind in (int, Uint, bool) or value is None or isinstance(value, (list, dict)):
        return format_plain(value)
    raise CelError(f"no formatting function for {type_name(value)}")


def _format_list(items: list[Any]) -> str:
    return "[" + ", ".join(_member(v) for v in items) + "]"


def _format_map(m: dict[Any, Any]) -> str:
    pairs: list[tuple[str, str]] = []
    for raw_key, value in m.items():
        key = from_key(raw_key) if type(m) is CelMap else raw_key
        if type(key) is str:
            key_text = go_quote(key)
        elif type(key) is bool:
            key_text = "true" if key else "false"
        elif type(key) in (int, Uint):
            key_text = str(int(key))
        else:
            raise CelError(f"no formatting function for map key of type {type_name(key)}")
        pairs.append((key_text, _member(value)))
    pairs.sort(key=lambda p: p[0].encode())
    return "{" + ", ".join(f"{k}:{v}" for k, v in pairs) + "}"


_GO_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def go_quote(text: str) -> str:
    """Go's strconv.Quote (``%q``): printable runes as they are, the rest escaped."""
    out = []
    for c in text:
        escaped = _GO_ESCAPES.get(c)
        if escaped is not None:
            out.append(escaped)
        elif _go_printable(c):
            out.append(c)
        elif ord(c) < 0x80:
            out.append(f"\\x{ord(c):02x}")
        elif ord(c) == 0xFFFD:
            out.append(c)
        elif ord(c) < 0x10000:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(f"\\U{ord(c):08x}")
    return '"' + "".join(out) + '"'


def _go_printable(c: str) -> bool:
    """Go's unicode.IsPrint: letters, marks, numbers, punctuation, symbols and ASCII space."""
    if c == " ":
        return True
    return unicodedata.category(c)[0] in "LMNPS"
