"""The functions of the DRA CEL environment: Kubernetes' base libraries on cel-python values.

Kubernetes 1.36 builds DRA selectors on its base environment (apiserver pkg/cel/environment,
base.go): the CEL standard library, ext.Strings v2, ext.Sets, optional types, and its own URLs,
Regex, Lists, Authz, Quantity, IP, CIDR, Format, Semver v1 and Image libraries, plus
``cel.bind`` and (DRAListTypeAttributes) ``includes()``. Everything a device selector can use is
implemented here; what it cannot use (authorizer, image references, named formats, optional
types, two-variable comprehensions) is rejected at compile time by ``compiler.UNSUPPORTED``.

Every function is a plain callable taking and returning cel-python values. Errors are *returned*
as ``CELEvalError`` values (as cel-go returns error values), so that ``||``, ``&&`` and ``?:``
can absorb them with CEL's commutative error semantics, and so the message survives.
"""

from __future__ import annotations

import functools
import importlib
import ipaddress
import itertools
import math
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

from operators.api.quantity import Quantity, QuantityError

from .values import (
    CIDRValue,
    IPValue,
    QuantityValue,
    SemverValue,
    URLValue,
    parse_cidr,
    parse_ip,
    parse_semver,
    parse_url,
    quantity_value,
)

# google-re2 ships without type information; cel-python already depends on it. RE2 is what
# Kubernetes uses: linear time, so no pattern can stall the scheduler by backtracking.
re2: Any = importlib.import_module("re2")

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

Function = Callable[..., Any]

TRUE = celtypes.BoolType(True)
FALSE = celtypes.BoolType(False)


def cel_bool(value: object) -> celtypes.BoolType:
    """A CEL bool without cel-python's slow constructor (one of two shared constants)."""
    return TRUE if value else FALSE


def cel_int(value: int) -> celtypes.IntType:
    """A CEL int without cel-python's constructor, which builds a decorator on every call."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise _Failure("integer overflow")
    return int.__new__(celtypes.IntType, value)


class _Failure(Exception):
    """Raised inside library functions; turned into a CELEvalError value by ``_cel``."""


def _fail(message: str) -> _Failure:
    return _Failure(message)


def _cel(fn: Function) -> Function:
    """Propagate error arguments and turn failures into CEL error values with their message."""

    @functools.wraps(fn)
    def wrapper(*args: Any) -> Any:
        for arg in args:
            if isinstance(arg, CELEvalError):
                return arg
        try:
            return fn(*args)
        except _Failure as exc:
            return CELEvalError(str(exc), _Failure, exc.args)
        except (TypeError, AttributeError) as exc:
            return CELEvalError(
                f"no such overload: {fn.__name__}{_signature(args)}", TypeError, (str(exc),)
            )
        except (ValueError, ArithmeticError, IndexError, KeyError) as exc:
            return CELEvalError(f"{fn.__name__}: {exc}", type(exc), exc.args)

    return wrapper


def type_name(value: Any) -> str:
    """The CEL type name of a value, for error messages."""
    if isinstance(value, (bool, celtypes.BoolType)):
        return "bool"
    if isinstance(value, celtypes.UintType):
        return "uint"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes):
        return "bytes"
    if isinstance(value, list):
        return "list"
    if isinstance(value, Mapping):
        return "map"
    if value is None:
        return "null_type"
    return {
        QuantityValue: "kubernetes.Quantity",
        SemverValue: "kubernetes.Semver",
        IPValue: "net.IP",
        CIDRValue: "net.CIDR",
        URLValue: "kubernetes.URL",
    }.get(type(value), type(value).__name__)


def _signature(args: tuple[Any, ...]) -> str:
    return "(" + ", ".join(type_name(a) for a in args) + ")"


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, celtypes.BoolType))


def _int(value: Any) -> celtypes.IntType:
    return cel_int(int(value))


def _want(value: Any, kind: type | tuple[type, ...], fn: str) -> None:
    if not isinstance(value, kind) or (kind is not bool and _is_bool(value) and kind is int):
        raise _fail(f"no such overload: {fn} does not take {type_name(value)}")


def _want_int(value: Any, fn: str) -> int:
    if _is_bool(value) or not isinstance(value, int):
        raise _fail(f"no such overload: {fn} does not take {type_name(value)}")
    return int(value)


# --- operators and standard functions cel-python gets wrong for our values --------------------


def logical_and(x: Any, y: Any) -> Any:
    """``&&`` with CEL's commutative error absorption; accepts Python bools from ``has()``."""
    if _is_bool(x) and not x:
        return cel_bool(False)
    if _is_bool(y) and not y:
        return cel_bool(False)
    if _is_bool(x) and _is_bool(y):
        return cel_bool(True)
    if isinstance(x, CELEvalError):
        return x
    if isinstance(y, CELEvalError):
        return y
    return CELEvalError(f"no such overload: {type_name(x)} && {type_name(y)}", TypeError, ())


def logical_or(x: Any, y: Any) -> Any:
    """``||`` with CEL's commutative error absorption."""
    if _is_bool(x) and x:
        return cel_bool(True)
    if _is_bool(y) and y:
        return cel_bool(True)
    if _is_bool(x) and _is_bool(y):
        return cel_bool(False)
    if isinstance(x, CELEvalError):
        return x
    if isinstance(y, CELEvalError):
        return y
    return CELEvalError(f"no such overload: {type_name(x)} || {type_name(y)}", TypeError, ())


def logical_not(x: Any) -> Any:
    if isinstance(x, CELEvalError):
        return x
    if _is_bool(x):
        return cel_bool(not x)
    return CELEvalError(f"no such overload: !{type_name(x)}", TypeError, ())


def conditional(cond: Any, if_true: Any, if_false: Any) -> Any:
    if isinstance(cond, CELEvalError):
        return cond
    if not _is_bool(cond):
        return CELEvalError(f"no such overload: {type_name(cond)} ? _ : _", TypeError, ())
    return if_true if cond else if_false


def index(container: Any, key: Any) -> Any:
    """``a[k]``: a missing map key is an error that says which key, and how to guard it."""
    if isinstance(container, CELEvalError):
        return container
    if isinstance(key, CELEvalError):
        return key
    if isinstance(container, Mapping):
        try:
            return container[key]
        except KeyError:
            return CELEvalError(f"no such key: {key!r}", KeyError, (key,))
        except TypeError:
            return CELEvalError(f"unsupported map key type {type_name(key)}", TypeError, ())
    if isinstance(container, list):
        if _is_bool(key) or not isinstance(key, int):
            return CELEvalError(f"no such overload: list[{type_name(key)}]", TypeError, ())
        if not 0 <= key < len(container):
            return CELEvalError(
                f"index out of bounds: {key}, list size {len(container)}", IndexError, ()
            )
        return container[key]
    return CELEvalError(f"no such overload: {type_name(container)}[_]", TypeError, ())


def member_in(item: Any, container: Any) -> Any:
    """``x in list`` / ``k in map`` (map membership is a hash lookup, not a scan)."""
    if isinstance(item, CELEvalError):
        return item
    if isinstance(container, CELEvalError):
        return container
    if isinstance(container, Mapping):
        try:
            return cel_bool(dict.__contains__(container, item))
        except TypeError:
            return cel_bool(False)
    if isinstance(container, list):
        return cel_bool(any(_equal(item, element) for element in container))
    return CELEvalError(
        f"no such overload: {type_name(item)} in {type_name(container)}", TypeError, ()
    )


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except TypeError:
        return False


def size(value: Any) -> Any:
    if isinstance(value, CELEvalError):
        return value
    if isinstance(value, (str, bytes, list, Mapping)):
        return cel_int(len(value))
    return CELEvalError(f"no such overload: size({type_name(value)})", TypeError, ())


@_cel
def string(value: Any) -> celtypes.StringType:
    """``string(x)``: the base conversion, extended to IP and CIDR values as Kubernetes does."""
    if isinstance(value, IPValue):
        return celtypes.StringType(str(value.address))
    if isinstance(value, CIDRValue):
        return celtypes.StringType(str(value.interface))
    if isinstance(value, URLValue):
        raise _fail("no such overload: string(kubernetes.URL)")
    if isinstance(value, (QuantityValue, SemverValue)):
        raise _fail(f"no such overload: string({type_name(value)})")
    if _is_bool(value):
        return celtypes.StringType("true" if value else "false")
    return celtypes.StringType(value)


# --- quantity (library/quantity.go) ------------------------------------------------------------


@_cel
def quantity(text: Any) -> QuantityValue:
    _want(text, str, "quantity")
    try:
        return quantity_value(text)
    except QuantityError as exc:
        raise _fail(str(exc)) from None


@_cel
def is_quantity(text: Any) -> celtypes.BoolType:
    _want(text, str, "isQuantity")
    try:
        Quantity(text)
    except QuantityError:
        return cel_bool(False)
    return cel_bool(True)


def _q(value: Any, fn: str) -> Quantity:
    if not isinstance(value, QuantityValue):
        raise _fail(f"no such overload: {fn} on {type_name(value)}")
    return value.quantity


def _q_or_int(value: Any, fn: str) -> Quantity:
    if isinstance(value, QuantityValue):
        return value.quantity
    return Quantity.from_decimal(_want_int(value, fn))


@_cel
def quantity_sign(value: Any) -> celtypes.IntType:
    return cel_int(_q(value, "sign").sign())


@_cel
def quantity_is_integer(value: Any) -> celtypes.BoolType:
    q = _q(value, "isInteger")
    return cel_bool(q.is_integer() and _INT64_MIN <= q.value <= _INT64_MAX)


@_cel
def quantity_as_integer(value: Any) -> celtypes.IntType:
    q = _q(value, "asInteger")
    if not q.is_integer() or not _INT64_MIN <= q.value <= _INT64_MAX:
        raise _fail(f"cannot convert value to integer: {q.canonical()}")
    return cel_int(int(q.value))


@_cel
def quantity_as_approximate_float(value: Any) -> celtypes.DoubleType:
    return celtypes.DoubleType(float(_q(value, "asApproximateFloat").value))


@_cel
def quantity_add(value: Any, other: Any) -> QuantityValue:
    return QuantityValue(_q(value, "add") + _q_or_int(other, "add"))


@_cel
def quantity_sub(value: Any, other: Any) -> QuantityValue:
    return QuantityValue(_q(value, "sub") - _q_or_int(other, "sub"))


# --- semver (library/semverlib.go) -------------------------------------------------------------


@_cel
def semver(text: Any, normalize: Any = False) -> SemverValue:
    _want(text, str, "semver")
    if not _is_bool(normalize):
        raise _fail(f"no such overload: semver(string, {type_name(normalize)})")
    try:
        return parse_semver(str(text), normalize=bool(normalize))
    except ValueError as exc:
        raise _fail(str(exc)) from None


@_cel
def is_semver(text: Any, normalize: Any = False) -> celtypes.BoolType:
    _want(text, str, "isSemver")
    if not _is_bool(normalize):
        raise _fail(f"no such overload: isSemver(string, {type_name(normalize)})")
    try:
        parse_semver(str(text), normalize=bool(normalize))
    except ValueError:
        return cel_bool(False)
    return cel_bool(True)


def _v(value: Any, fn: str) -> SemverValue:
    if not isinstance(value, SemverValue):
        raise _fail(f"no such overload: {fn} on {type_name(value)}")
    return value


@_cel
def semver_major(value: Any) -> celtypes.IntType:
    return cel_int(_v(value, "major").major)


@_cel
def semver_minor(value: Any) -> celtypes.IntType:
    return cel_int(_v(value, "minor").minor)


@_cel
def semver_patch(value: Any) -> celtypes.IntType:
    return cel_int(_v(value, "patch").patch)


# compareTo / isGreaterThan / isLessThan are shared by Quantity and Semver.


def _compare(value: Any, other: Any, fn: str) -> int:
    if isinstance(value, QuantityValue) and isinstance(other, QuantityValue):
        a, b = value.quantity.value, other.quantity.value
        return (a > b) - (a < b)
    if isinstance(value, SemverValue) and isinstance(other, SemverValue):
        return value.compare(other)
    raise _fail(f"no such overload: {type_name(value)}.{fn}({type_name(other)})")


@_cel
def compare_to(value: Any, other: Any) -> celtypes.IntType:
    return cel_int(_compare(value, other, "compareTo"))


@_cel
def is_greater_than(value: Any, other: Any) -> celtypes.BoolType:
    return cel_bool(_compare(value, other, "isGreaterThan") > 0)


@_cel
def is_less_than(value: Any, other: Any) -> celtypes.BoolType:
    return cel_bool(_compare(value, other, "isLessThan") < 0)


# --- DRA: includes() (DRAListTypeAttributes) -------------------------------------------------


@_cel
def includes(container: Any, value: Any) -> celtypes.BoolType:
    """A list attribute includes its elements; a scalar attribute includes itself."""
    if isinstance(container, list):
        return cel_bool(any(_same(element, value) for element in container))
    if isinstance(container, Mapping):
        raise _fail(f"no such overload: map.includes({type_name(value)})")
    return cel_bool(_same(container, value))


def _same(a: Any, b: Any) -> bool:
    if type_name(a) != type_name(b):
        return False
    return bool(a == b)


# --- strings extension, version 2 (cel-go ext/strings.go) -------------------------------------


def _s(value: Any, fn: str) -> str:
    if not isinstance(value, str):
        raise _fail(f"no such overload: {type_name(value)}.{fn}()")
    return value


@_cel
def char_at(text: Any, i: Any) -> celtypes.StringType:
    s, pos = _s(text, "charAt"), _want_int(i, "charAt")
    if not 0 <= pos <= len(s):
        raise _fail(f"index out of range: {pos}")
    return celtypes.StringType(s[pos : pos + 1])


@_cel
def index_of(target: Any, item: Any, offset: Any = None) -> celtypes.IntType:
    """``string.indexOf(sub[, offset])`` (strings ext) and ``list.indexOf(x)`` (lists lib)."""
    if isinstance(target, list):
        if offset is not None:
            raise _fail("no such overload: list.indexOf(_, int)")
        for i, element in enumerate(target):
            if _same(element, item):
                return cel_int(i)
        return cel_int(-1)
    s, sub = _s(target, "indexOf"), _s(item, "indexOf")
    start = 0 if offset is None else _want_int(offset, "indexOf")
    if not 0 <= start <= len(s):
        raise _fail(f"index out of range: {start}")
    return cel_int(s.find(sub, start))


@_cel
def last_index_of(target: Any, item: Any, offset: Any = None) -> celtypes.IntType:
    if isinstance(target, list):
        if offset is not None:
            raise _fail("no such overload: list.lastIndexOf(_, int)")
        for i in range(len(target) - 1, -1, -1):
            if _same(target[i], item):
                return cel_int(i)
        return cel_int(-1)
    s, sub = _s(target, "lastIndexOf"), _s(item, "lastIndexOf")
    end = len(s) if offset is None else _want_int(offset, "lastIndexOf")
    if not 0 <= end <= len(s):
        raise _fail(f"index out of range: {end}")
    return cel_int(s.rfind(sub, 0, end + len(sub)))


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


@_cel
def lower_ascii(text: Any) -> celtypes.StringType:
    return celtypes.StringType(_s(text, "lowerAscii").translate(_ASCII_LOWER))


@_cel
def upper_ascii(text: Any) -> celtypes.StringType:
    return celtypes.StringType(_s(text, "upperAscii").translate(_ASCII_UPPER))


@_cel
def replace(text: Any, old: Any, new: Any, limit: Any = None) -> celtypes.StringType:
    s, o, n = _s(text, "replace"), _s(old, "replace"), _s(new, "replace")
    count = -1 if limit is None else _want_int(limit, "replace")
    return celtypes.StringType(s.replace(o, n, count if count >= 0 else -1))


@_cel
def split(text: Any, separator: Any, limit: Any = None) -> celtypes.ListType:
    s, sep = _s(text, "split"), _s(separator, "split")
    n = -1 if limit is None else _want_int(limit, "split")
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


@_cel
def substring(text: Any, start: Any, end: Any = None) -> celtypes.StringType:
    s = _s(text, "substring")
    begin = _want_int(start, "substring")
    stop = len(s) if end is None else _want_int(end, "substring")
    if not 0 <= begin <= len(s) or not 0 <= stop <= len(s):
        raise _fail(f"index out of range: {begin if not 0 <= begin <= len(s) else stop}")
    if begin > stop:
        raise _fail(f"invalid substring range. start: {begin}, end: {stop}")
    return celtypes.StringType(s[begin:stop])


@_cel
def trim(text: Any) -> celtypes.StringType:
    return celtypes.StringType(_s(text, "trim").strip())


@_cel
def join(items: Any, separator: Any = "") -> celtypes.StringType:
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise _fail(f"no such overload: {type_name(items)}.join()")
    return celtypes.StringType(_s(separator, "join").join(items))


@_cel
def quote(text: Any) -> celtypes.StringType:
    s = _s(text, "strings.quote")
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


@_cel
def format_string(template: Any, args: Any) -> celtypes.StringType:
    """``"%s has %d".format([a, b])``: the verbs of cel-go's strings extension."""
    fmt = _s(template, "format")
    if not isinstance(args, list):
        raise _fail(f"no such overload: string.format({type_name(args)})")
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
            raise _fail("format: unterminated formatting verb")
        verb = fmt[i]
        i += 1
        if verb == "%":
            out.append("%")
            continue
        if arg >= len(args):
            raise _fail(f"format: index {arg} out of range")
        out.append(_format_one(verb, args[arg], precision))
        arg += 1
    return celtypes.StringType("".join(out))


def _format_one(verb: str, value: Any, precision: int | None) -> str:
    if verb == "s":
        return _format_plain(value)
    if verb == "d":
        if _is_bool(value) or not isinstance(value, int):
            raise _fail(f"format: %d does not take {type_name(value)}")
        return str(int(value))
    if verb in "fe":
        if _is_bool(value) or not isinstance(value, (int, float)):
            raise _fail(f"format: %{verb} does not take {type_name(value)}")
        number = float(value)
        if math.isnan(number) or math.isinf(number):
            return "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")
        return f"{number:.{6 if precision is None else precision}{verb}}"
    if verb in "xXob":
        if isinstance(value, str):
            text = value.encode().hex()
            return text.upper() if verb == "X" else text
        if _is_bool(value) or not isinstance(value, int):
            raise _fail(f"format: %{verb} does not take {type_name(value)}")
        return format(int(value), verb)
    raise _fail(f"format: unrecognized formatting clause %{verb}")


def _format_plain(value: Any) -> str:
    if _is_bool(value):
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
    raise _fail(f"format: %s does not take {type_name(value)}")


# --- lists (library/lists.go) -----------------------------------------------------------------


def _comparable_list(items: Any, fn: str) -> list[Any]:
    if not isinstance(items, list):
        raise _fail(f"no such overload: {type_name(items)}.{fn}()")
    kinds = {type_name(i) for i in items}
    if len(kinds) > 1 or kinds - {"int", "uint", "double", "string", "bytes", "bool"}:
        raise _fail(f"no such overload: {fn} of list({', '.join(sorted(kinds))})")
    return list(items)


@_cel
def is_sorted(items: Any) -> celtypes.BoolType:
    values = _comparable_list(items, "isSorted")
    return cel_bool(all(a <= b for a, b in itertools.pairwise(values)))


@_cel
def list_sum(items: Any) -> Any:
    values = _comparable_list(items, "sum")
    if not values:
        return cel_int(0)
    if isinstance(values[0], (str, bytes)) or _is_bool(values[0]):
        raise _fail(f"no such overload: sum of list({type_name(values[0])})")
    total = values[0]
    for v in values[1:]:
        total = total + v  # the cel types check overflow
    return total


@_cel
def list_min(items: Any) -> Any:
    values = _comparable_list(items, "min")
    if not values:
        raise _fail("min called on empty list")
    return min(values)


@_cel
def list_max(items: Any) -> Any:
    values = _comparable_list(items, "max")
    if not values:
        raise _fail("max called on empty list")
    return max(values)


# --- sets (cel-go ext/sets.go) ----------------------------------------------------------------


def _lists(a: Any, b: Any, fn: str) -> tuple[list[Any], list[Any]]:
    if not isinstance(a, list) or not isinstance(b, list):
        raise _fail(f"no such overload: sets.{fn}({type_name(a)}, {type_name(b)})")
    return a, b


def _contains_all(container: Iterable[Any], items: Iterable[Any]) -> bool:
    pool = list(container)
    return all(any(_numeric_equal(x, y) for y in pool) for x in items)


def _numeric_equal(a: Any, b: Any) -> bool:
    """ext.Sets compares numbers across int, uint and double, like CEL's heterogeneous equality."""
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not _is_bool(a) and not _is_bool(b):
        return (
            Decimal(a) == Decimal(b)
            if not (isinstance(a, float) or isinstance(b, float))
            else float(a) == float(b)
        )
    return _same(a, b)


@_cel
def sets_contains(a: Any, b: Any) -> celtypes.BoolType:
    first, second = _lists(a, b, "contains")
    return cel_bool(_contains_all(first, second))


@_cel
def sets_equivalent(a: Any, b: Any) -> celtypes.BoolType:
    first, second = _lists(a, b, "equivalent")
    return cel_bool(_contains_all(first, second) and _contains_all(second, first))


@_cel
def sets_intersects(a: Any, b: Any) -> celtypes.BoolType:
    first, second = _lists(a, b, "intersects")
    return cel_bool(any(_numeric_equal(x, y) for x in first for y in second))


# --- regex (library/regex.go) and matches() ---------------------------------------------------


@functools.lru_cache(maxsize=256)
def compile_regex(pattern: str) -> Any:
    """Compile once per pattern (a pure, bounded memo; RE2 objects are immutable)."""
    try:
        return re2.compile(pattern)
    except re2.error as exc:
        raise _fail(f"invalid regular expression {pattern!r}: {exc}") from None


@_cel
def matches(text: Any, pattern: Any) -> celtypes.BoolType:
    return cel_bool(compile_regex(_s(pattern, "matches")).search(_s(text, "matches")) is not None)


@_cel
def find(text: Any, pattern: Any) -> celtypes.StringType:
    match = compile_regex(_s(pattern, "find")).search(_s(text, "find"))
    return celtypes.StringType(match.group(0) if match else "")


@_cel
def find_all(text: Any, pattern: Any, limit: Any = None) -> celtypes.ListType:
    n = -1 if limit is None else _want_int(limit, "findAll")
    if n == 0:
        return celtypes.ListType([])
    found: list[celtypes.StringType] = []
    for match in compile_regex(_s(pattern, "findAll")).finditer(_s(text, "findAll")):
        found.append(celtypes.StringType(match.group(0)))
        if 0 < n <= len(found):
            break
    return celtypes.ListType(found)


# --- ip / cidr (library/ip.go, library/cidr.go) -----------------------------------------------


@_cel
def ip(text: Any) -> IPValue:
    return parse_ip(_s(text, "ip"))


@_cel
def is_ip(text: Any) -> celtypes.BoolType:
    try:
        parse_ip(_s(text, "isIP"))
    except ValueError:
        return cel_bool(False)
    return cel_bool(True)


@_cel
def ip_is_canonical(text: Any) -> celtypes.BoolType:
    s = _s(text, "ip.isCanonical")
    return cel_bool(str(parse_ip(s).address) == s)


def _addr(value: Any, fn: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if not isinstance(value, IPValue):
        raise _fail(f"no such overload: {type_name(value)}.{fn}()")
    return value.address


@_cel
def ip_family(value: Any) -> celtypes.IntType:
    return cel_int(_addr(value, "family").version)


@_cel
def ip_is_unspecified(value: Any) -> celtypes.BoolType:
    return cel_bool(_addr(value, "isUnspecified").is_unspecified)


@_cel
def ip_is_loopback(value: Any) -> celtypes.BoolType:
    return cel_bool(_addr(value, "isLoopback").is_loopback)


@_cel
def ip_is_link_local_multicast(value: Any) -> celtypes.BoolType:
    a = _addr(value, "isLinkLocalMulticast")
    net = ipaddress.ip_network("224.0.0.0/24" if a.version == 4 else "ff02::/16")
    return cel_bool(a in net)


@_cel
def ip_is_link_local_unicast(value: Any) -> celtypes.BoolType:
    a = _addr(value, "isLinkLocalUnicast")
    net = ipaddress.ip_network("169.254.0.0/16" if a.version == 4 else "fe80::/10")
    return cel_bool(a in net)


@_cel
def ip_is_global_unicast(value: Any) -> celtypes.BoolType:
    """Go's net.IP.IsGlobalUnicast: private ranges count as global unicast there."""
    a = _addr(value, "isGlobalUnicast")
    if a.version == 4 and a == ipaddress.IPv4Address("255.255.255.255"):
        return cel_bool(False)
    link_local = ipaddress.ip_network("169.254.0.0/16" if a.version == 4 else "fe80::/10")
    return cel_bool(not (a.is_unspecified or a.is_loopback or a.is_multicast or a in link_local))


@_cel
def cidr(text: Any) -> CIDRValue:
    return parse_cidr(_s(text, "cidr"))


@_cel
def is_cidr(text: Any) -> celtypes.BoolType:
    try:
        parse_cidr(_s(text, "isCIDR"))
    except ValueError:
        return cel_bool(False)
    return cel_bool(True)


def _net(value: Any, fn: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    if not isinstance(value, CIDRValue):
        raise _fail(f"no such overload: {type_name(value)}.{fn}()")
    return value.interface.network


@_cel
def cidr_contains_ip(value: Any, other: Any) -> celtypes.BoolType:
    net = _net(value, "containsIP")
    addr = parse_ip(other).address if isinstance(other, str) else _addr(other, "containsIP")
    return cel_bool(addr.version == net.version and addr in net)


@_cel
def cidr_contains_cidr(value: Any, other: Any) -> celtypes.BoolType:
    net = _net(value, "containsCIDR")
    sub = (
        parse_cidr(other).interface.network
        if isinstance(other, str)
        else _net(other, "containsCIDR")
    )
    return cel_bool(sub.version == net.version and sub.subnet_of(net))  # type: ignore[arg-type]


@_cel
def cidr_ip(value: Any) -> IPValue:
    if not isinstance(value, CIDRValue):
        raise _fail(f"no such overload: {type_name(value)}.ip()")
    return IPValue(value.interface.ip)


@_cel
def cidr_masked(value: Any) -> CIDRValue:
    net = _net(value, "masked")
    return CIDRValue(ipaddress.ip_interface(str(net)))


@_cel
def cidr_prefix_length(value: Any) -> celtypes.IntType:
    return cel_int(_net(value, "prefixLength").prefixlen)


# --- urls (library/urls.go) -------------------------------------------------------------------


@_cel
def url(text: Any) -> URLValue:
    return parse_url(_s(text, "url"))


@_cel
def is_url(text: Any) -> celtypes.BoolType:
    try:
        parse_url(_s(text, "isURL"))
    except ValueError:
        return cel_bool(False)
    return cel_bool(True)


def _u(value: Any, fn: str) -> URLValue:
    if not isinstance(value, URLValue):
        raise _fail(f"no such overload: {type_name(value)}.{fn}()")
    return value


@_cel
def url_scheme(value: Any) -> celtypes.StringType:
    return celtypes.StringType(_u(value, "getScheme").parts.scheme)


@_cel
def url_host(value: Any) -> celtypes.StringType:
    return celtypes.StringType(_u(value, "getHost").parts.netloc.rpartition("@")[2])


@_cel
def url_hostname(value: Any) -> celtypes.StringType:
    return celtypes.StringType(_u(value, "getHostname").parts.hostname or "")


@_cel
def url_port(value: Any) -> celtypes.StringType:
    port = _u(value, "getPort").parts.port
    return celtypes.StringType("" if port is None else str(port))


@_cel
def url_escaped_path(value: Any) -> celtypes.StringType:
    return celtypes.StringType(_u(value, "getEscapedPath").parts.path)


@_cel
def url_query(value: Any) -> celtypes.MapType:
    from urllib.parse import parse_qs

    query = parse_qs(_u(value, "getQuery").parts.query, keep_blank_values=True)
    return celtypes.MapType(
        {
            celtypes.StringType(k): celtypes.ListType([celtypes.StringType(v) for v in vs])
            for k, vs in query.items()
        }
    )


# --- the tables the compiler checks names against and the transpiler binds -------------------


@_cel
def to_int(value: Any) -> celtypes.IntType:
    if isinstance(value, str):
        return _int(int(value, 10))
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value) or not _INT64_MIN <= value <= _INT64_MAX:
            raise _fail("integer overflow")
        return cel_int(int(value))
    return _int(int(value))


@_cel
def to_double(value: Any) -> celtypes.DoubleType:
    return celtypes.DoubleType(float(value))


@_cel
def to_bool(value: Any) -> celtypes.BoolType:
    if _is_bool(value):
        return cel_bool(bool(value))
    text = _s(value, "bool")
    if text in ("true", "True", "TRUE", "t", "1"):
        return cel_bool(True)
    if text in ("false", "False", "FALSE", "f", "0"):
        return cel_bool(False)
    raise _fail(f"type conversion error from string to bool: {text!r}")


@_cel
def contains(target: Any, item: Any) -> celtypes.BoolType:
    return cel_bool(_s(item, "contains") in _s(target, "contains"))


@_cel
def starts_with(target: Any, prefix: Any) -> celtypes.BoolType:
    return cel_bool(_s(target, "startsWith").startswith(_s(prefix, "startsWith")))


@_cel
def ends_with(target: Any, suffix: Any) -> celtypes.BoolType:
    return cel_bool(_s(target, "endsWith").endswith(_s(suffix, "endsWith")))


def _bool_op(name: str, op: Callable[[Any, Any], bool]) -> Function:
    def compare(a: Any, b: Any) -> Any:
        if isinstance(a, CELEvalError):
            return a
        if isinstance(b, CELEvalError):
            return b
        try:
            return cel_bool(op(a, b))
        except TypeError:
            return CELEvalError(
                f"no such overload: {type_name(a)} {name} {type_name(b)}", TypeError, ()
            )

    compare.__name__ = f"op_{name}"
    return compare


def _equals(a: Any, b: Any) -> bool:
    """CEL heterogeneous equality: values of different types are unequal, not an error;
    numbers compare by value across int, uint and double."""
    x, y = _plain_number(a), _plain_number(b)
    if x is not None and y is not None:
        return x == y
    if type_name(a) != type_name(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_equals(i, j) for i, j in zip(a, b, strict=True))
    if isinstance(a, Mapping):
        return a.keys() == b.keys() and all(_equals(a[k], b[k]) for k in a)
    return bool(a == b)


def _plain_number(value: Any) -> int | float | None:
    if _is_bool(value):
        return None
    if isinstance(value, float):
        return float(value)
    if isinstance(value, int):
        return int(value)
    return None


def _ordered(op: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    """Ordering of ints, uints, doubles (across types, as CrossTypeNumericComparisons allows),
    strings, bytes and bools; anything else has no ``<`` overload."""

    def check(a: Any, b: Any) -> bool:
        x, y = _plain_number(a), _plain_number(b)
        if x is not None and y is not None:
            return op(x, y)
        if isinstance(a, str) and isinstance(b, str):
            return op(str(a), str(b))
        if isinstance(a, bytes) and isinstance(b, bytes):
            return op(bytes(a), bytes(b))
        if _is_bool(a) and _is_bool(b):
            return op(bool(a), bool(b))
        raise TypeError("unordered")

    return check


def _arith(name: str, op: Callable[[Any, Any], Any]) -> Function:
    def apply(a: Any, b: Any) -> Any:
        if isinstance(a, CELEvalError):
            return a
        if isinstance(b, CELEvalError):
            return b
        if isinstance(a, (QuantityValue, SemverValue)) or isinstance(
            b, (QuantityValue, SemverValue)
        ):
            return CELEvalError(
                f"no such overload: {type_name(a)} {name} {type_name(b)}", TypeError, ()
            )
        try:
            return op(a, b)
        except ZeroDivisionError:
            return CELEvalError("division by zero", ZeroDivisionError, ())
        except (TypeError, ValueError, OverflowError) as exc:
            return CELEvalError(
                f"no such overload or overflow: {type_name(a)} {name} {type_name(b)}",
                type(exc),
                exc.args,
            )

    apply.__name__ = f"op_{name}"
    return apply


def _negate(a: Any) -> Any:
    if isinstance(a, CELEvalError):
        return a
    try:
        return -a
    except (TypeError, ValueError, OverflowError):
        return CELEvalError(f"no such overload: -{type_name(a)}", TypeError, ())


# Global functions: ``name(args)``, including namespaced ones (``sets.contains``).
GLOBAL_FUNCTIONS: dict[str, Function] = {
    "quantity": quantity,
    "isQuantity": is_quantity,
    "semver": semver,
    "isSemver": is_semver,
    "ip": ip,
    "isIP": is_ip,
    "ip.isCanonical": ip_is_canonical,
    "cidr": cidr,
    "isCIDR": is_cidr,
    "url": url,
    "isURL": is_url,
    "sets.contains": sets_contains,
    "sets.equivalent": sets_equivalent,
    "sets.intersects": sets_intersects,
    "strings.quote": quote,
    "size": size,
    "string": string,
    "int": to_int,
    "double": to_double,
    "bool": to_bool,
    "matches": matches,
}

# Methods: ``receiver.name(args)``; the receiver is passed first.
METHODS: dict[str, Function] = {
    "sign": quantity_sign,
    "isInteger": quantity_is_integer,
    "asInteger": quantity_as_integer,
    "asApproximateFloat": quantity_as_approximate_float,
    "add": quantity_add,
    "sub": quantity_sub,
    "compareTo": compare_to,
    "isGreaterThan": is_greater_than,
    "isLessThan": is_less_than,
    "major": semver_major,
    "minor": semver_minor,
    "patch": semver_patch,
    "includes": includes,
    "charAt": char_at,
    "indexOf": index_of,
    "lastIndexOf": last_index_of,
    "lowerAscii": lower_ascii,
    "upperAscii": upper_ascii,
    "replace": replace,
    "split": split,
    "substring": substring,
    "trim": trim,
    "join": join,
    "format": format_string,
    "isSorted": is_sorted,
    "sum": list_sum,
    "min": list_min,
    "max": list_max,
    "find": find,
    "findAll": find_all,
    "matches": matches,
    "contains": contains,
    "startsWith": starts_with,
    "endsWith": ends_with,
    "size": size,
    "family": ip_family,
    "isUnspecified": ip_is_unspecified,
    "isLoopback": ip_is_loopback,
    "isLinkLocalMulticast": ip_is_link_local_multicast,
    "isLinkLocalUnicast": ip_is_link_local_unicast,
    "isGlobalUnicast": ip_is_global_unicast,
    "containsIP": cidr_contains_ip,
    "containsCIDR": cidr_contains_cidr,
    "ip": cidr_ip,
    "masked": cidr_masked,
    "prefixLength": cidr_prefix_length,
    "getScheme": url_scheme,
    "getHost": url_host,
    "getHostname": url_hostname,
    "getPort": url_port,
    "getEscapedPath": url_escaped_path,
    "getQuery": url_query,
}

# Argument counts (excluding the receiver of methods) each name accepts.
ARITY: dict[str, frozenset[int]] = {
    **dict.fromkeys(
        [
            "quantity",
            "isQuantity",
            "ip",
            "isIP",
            "ip.isCanonical",
            "cidr",
            "isCIDR",
            "url",
            "isURL",
            "strings.quote",
            "size",
            "string",
            "int",
            "double",
            "bool",
        ],
        frozenset({1}),
    ),
    "semver": frozenset({1, 2}),
    "isSemver": frozenset({1, 2}),
    "sets.contains": frozenset({2}),
    "sets.equivalent": frozenset({2}),
    "sets.intersects": frozenset({2}),
    "matches": frozenset({2}),
}
METHOD_ARITY: dict[str, frozenset[int]] = {
    **dict.fromkeys(
        [
            "sign",
            "isInteger",
            "asInteger",
            "asApproximateFloat",
            "major",
            "minor",
            "patch",
            "lowerAscii",
            "upperAscii",
            "trim",
            "isSorted",
            "sum",
            "min",
            "max",
            "size",
            "family",
            "isUnspecified",
            "isLoopback",
            "isLinkLocalMulticast",
            "isLinkLocalUnicast",
            "isGlobalUnicast",
            "ip",
            "masked",
            "prefixLength",
            "getScheme",
            "getHost",
            "getHostname",
            "getPort",
            "getEscapedPath",
            "getQuery",
        ],
        frozenset({0}),
    ),
    **dict.fromkeys(
        [
            "add",
            "sub",
            "compareTo",
            "isGreaterThan",
            "isLessThan",
            "includes",
            "charAt",
            "format",
            "find",
            "matches",
            "contains",
            "startsWith",
            "endsWith",
            "containsIP",
            "containsCIDR",
        ],
        frozenset({1}),
    ),
    "indexOf": frozenset({1, 2}),
    "lastIndexOf": frozenset({1, 2}),
    "replace": frozenset({2, 3}),
    "split": frozenset({1, 2}),
    "substring": frozenset({1, 2}),
    "join": frozenset({0, 1}),
    "findAll": frozenset({1, 2}),
}

# Operators, by the labels cel-python's transpiler asks for.
OPERATORS: dict[str, Function] = {
    "_&&_": logical_and,
    "_||_": logical_or,
    "!_": logical_not,
    "_?_:_": conditional,
    "_[_]": index,
    "_in_": member_in,
    "_==_": _bool_op("==", _equals),
    "_!=_": _bool_op("!=", lambda a, b: not _equals(a, b)),
    "_<_": _bool_op("<", _ordered(lambda a, b: a < b)),
    "_<=_": _bool_op("<=", _ordered(lambda a, b: a <= b)),
    "_>_": _bool_op(">", _ordered(lambda a, b: a > b)),
    "_>=_": _bool_op(">=", _ordered(lambda a, b: a >= b)),
    "_+_": _arith("+", lambda a, b: a + b),
    "_-_": _arith("-", lambda a, b: a - b),
    "_*_": _arith("*", lambda a, b: a * b),
    "_/_": _arith("/", lambda a, b: a / b),
    "_%_": _arith("%", lambda a, b: a % b),
    "-_": _negate,
}

# Identifiers that name namespaces of global functions (``sets.contains(...)``).
NAMESPACES = frozenset({"sets", "strings", "ip", "cel", "optional", "math", "format"})
