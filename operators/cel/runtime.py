"""CEL values at evaluation time and the core operations on them, with cel-go's semantics.

Values are plain Python where they can be: bool, int, :class:`Uint`, float (double), str,
bytes, None (null), list, dict (maps: :class:`CelMap`, or plain dicts with string keys), and
the classes here and in values.py for the rest. Errors are raised as :class:`CelError`: ``&&``,
``||``, ``?:`` and comprehensions absorb them where CEL says so. :class:`CostLimitExceeded` is
not a CEL error, so nothing absorbs it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

from .syntax import Uint
from .values import CIDRValue, IPValue, QuantityValue, SemverValue, URLValue

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "UINT64_MAX",
    "CelError",
    "CelMap",
    "CostLimitExceeded",
    "Duration",
    "Optional",
    "Timestamp",
    "TypeValue",
    "Uint",
]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1
TWO_TO_64 = 2.0**64
TWO_TO_63 = 2.0**63


class CelError(Exception):
    """An evaluation error (a CEL error value)."""

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else "evaluation error"


class NoSuchKey(CelError):
    """A map lookup that found nothing (the message says which key)."""


class CostLimitExceeded(Exception):
    """The runtime cost limit was exceeded; cel-go stops the evaluation there."""


class EvaluationInterrupted(Exception):
    """The caller's interrupt stopped an evaluation at a checkpoint (its time was up): no
    result, nothing to cache; the same evaluation may run again later, from the start."""


def no_overload(function: str, *args: Any) -> CelError:
    return CelError(f"no such overload: {function}({', '.join(type_name(a) for a in args)})")


class Optional:
    """A CEL ``optional_type`` value; ``NONE`` is the empty one."""

    __slots__ = ("value",)
    NONE: Optional

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "optional.none()" if self is Optional.NONE else f"optional.of({self.value!r})"


Optional.NONE = Optional(None)


class TypeValue:
    """A CEL type used as a value (``int``, ``type(x)``); equal when the names are."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TypeValue) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("type", self.name))

    def __repr__(self) -> str:
        return self.name


class Duration:
    """A CEL duration: an int64 of nanoseconds, as Go's time.Duration."""

    __slots__ = ("nanos",)

    def __init__(self, nanos: int) -> None:
        self.nanos = nanos

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Duration) and other.nanos == self.nanos

    def __hash__(self) -> int:
        return hash(("duration", self.nanos))

    def __repr__(self) -> str:
        return f"duration({self.nanos}ns)"


class Timestamp:
    """A CEL timestamp: nanoseconds since the Unix epoch (UTC), years 0001 to 9999."""

    __slots__ = ("nanos",)

    def __init__(self, nanos: int) -> None:
        self.nanos = nanos

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Timestamp) and other.nanos == self.nanos

    def __hash__(self) -> int:
        return hash(("timestamp", self.nanos))

    def __repr__(self) -> str:
        return f"timestamp({self.nanos}ns)"


class _BoolKey:
    """A bool as a map key: Python's True == 1 must not merge ``{true: .., 1: ..}``."""

    __slots__ = ("value",)

    def __init__(self, value: bool) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "true" if self.value else "false"


class _DoubleKey:
    """A double as a map key, so that it does not merge with an int of the same value."""

    __slots__ = ("value",)

    def __init__(self, value: float) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _DoubleKey) and other.value == self.value

    def __hash__(self) -> int:
        return hash(("double", self.value))


class _RefKey:
    """A list or map as a map key: Go keys it by its pointer, so only that value finds it."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return type(other) is _RefKey and other.value is self.value

    def __hash__(self) -> int:
        return id(self.value)


class UnhashableKey(CelError):
    """A map key whose Go value holds a slice (bytes, a version): hashing it panics in Go."""


TRUE_KEY = _BoolKey(True)
FALSE_KEY = _BoolKey(False)
# Values whose Go representation holds a slice, so that Go cannot hash them.
_UNHASHABLE_IN_GO = frozenset({bytes, SemverValue})


def map_key(value: Any) -> Any:
    """The dict key a CEL map stores for ``value`` (strings, ints and uints as they are)."""
    kind = type(value)
    if kind is str or kind is int or kind is Uint:
        return value
    if value is True:
        return TRUE_KEY
    if value is False:
        return FALSE_KEY
    if kind is float:
        return _DoubleKey(value)
    if kind in _UNHASHABLE_IN_GO:
        raise UnhashableKey(f"hash of unhashable type {type_name(value)}")
    if isinstance(value, (list, dict)):
        return _RefKey(value)
    return value


def from_key(key: Any) -> Any:
    kind = type(key)
    if kind is _BoolKey or kind is _DoubleKey or kind is _RefKey:
        return key.value
    return key


class CelMap(dict[Any, Any]):
    """A CEL map built by an expression: keys stored through :func:`map_key`."""

    __slots__ = ()


class DomainMap(dict[str, Any]):
    """``device.attributes`` / ``device.capacity``: Kubernetes' map with a default.

    Looking up any key finds something (an empty map when the domain is unknown), so ``has()``
    is true for every domain, while ``in``, ``size`` and iteration see the real domains.
    """

    __slots__ = ()


EMPTY: dict[str, Any] = {}  # the default domain map; shared, never mutated


class HeldDomains(dict[str, Any]):
    """``device.attributes`` / ``device.capacity`` as Kubernetes 1.38 hands them to CEL: maps
    over the slice's internal form (dynamic-resource-allocation's domainToAttributes and
    domainToCapacity). A key is converted to a string first (:func:`held_key`): one that
    converts to none is an error where it indexes and absent for ``in``; any string finds
    something, an empty map when the domain is unknown. Equal to another map only when every
    entry is, an error in a value's comparison being the result (not skipped). ``go_type``:
    the Go type its Value() has, which upstream's messages name."""

    __slots__ = ("go_type",)

    def __init__(self, go_type: str) -> None:
        super().__init__()
        self.go_type = go_type


class HeldNames(dict[str, Any]):
    """One domain's attributes or capacities as 1.38 hands them (nameToAttributes,
    nameToCapacity): keys converted as :class:`HeldDomains`'; a value the slice's conversion
    could not hold (:class:`Unheld`) is an error where it is read, ``has()`` included, and absent
    for ``in``, while it still counts in ``size()`` and iteration."""

    __slots__ = ("go_type",)

    def __init__(self, go_type: str) -> None:
        super().__init__()
        self.go_type = go_type


class Unheld:
    """An attribute value 1.38's slice conversion keeps as nil (a version that does not parse,
    an empty list, no value set): reading it fails with ``message``."""

    __slots__ = ("message",)

    def __init__(self, name: str) -> None:
        self.message = (
            f"attribute {name}: value is invalid or its type is not supported by this version"
        )


#: How a duration or timestamp reads as a string (library/timestamps registers it).
_TIME_TEXT: list[Callable[[Any], str]] = []


def register_time_text(text: Callable[[Any], str]) -> None:
    """The library's string form of durations and timestamps, for :func:`held_key`."""
    _TIME_TEXT[:] = [text]


def held_key(key: Any) -> str:
    """A key of 1.38's device maps as cel-go's ``ConvertToType(StringType)`` makes it a string;
    a CelError where the key's type converts to none."""
    kind = type(key)
    if kind is str:
        return key  # type: ignore[no-any-return]
    if kind is bool:
        return "true" if key else "false"
    if kind is int or kind is Uint:
        return str(int(key))
    if kind is float:
        return format_double(key)
    if kind is bytes:
        try:
            return key.decode("utf-8")  # type: ignore[no-any-return]
        except UnicodeDecodeError:
            raise CelError("invalid UTF-8 in bytes, cannot convert to string") from None
    if key is None:
        return "null"
    if kind is TypeValue:
        return key.name  # type: ignore[no-any-return]
    if (kind is Duration or kind is Timestamp) and _TIME_TEXT:
        return _TIME_TEXT[0](key)
    if kind is IPValue:
        return str(key.address)
    if kind is CIDRValue:
        return str(key.interface)
    raise CelError(f"type conversion error from '{type_name(key)}' to 'string'")


def map_items(m: dict[Any, Any]) -> Iterator[tuple[Any, Any]]:
    if type(m) is CelMap:
        for k, v in m.items():
            yield from_key(k), v
    else:
        yield from m.items()


def map_keys(m: dict[Any, Any]) -> list[Any]:
    if type(m) is CelMap:
        return [from_key(k) for k in m]
    return list(m)


_MISSING: Any = object()


def map_find(m: dict[Any, Any], key: Any) -> Any:
    """cel-go's Find: exact key, then the same number as int or uint; ``_MISSING`` if absent.

    The device's maps take string keys only; its domain maps find every key (the default).
    """
    kind = type(key)
    mtype = type(m)
    if mtype is DomainMap:
        return m.get(key, EMPTY) if kind is str else EMPTY
    if mtype is HeldDomains or mtype is HeldNames:
        try:
            name = held_key(key)
        except CelError:
            return _MISSING
        if mtype is HeldDomains:
            return m.get(name, EMPTY)
        found = m.get(name, _MISSING)
        return _MISSING if type(found) is Unheld else found
    if kind is str:
        return m.get(key, _MISSING)
    if mtype is not CelMap:
        return _MISSING
    if kind in _UNHASHABLE_IN_GO:
        # cel-go's map of an expression is a Go map: hashing such a key panics (an error),
        # except in an empty map, which is not hashed into.
        if m:
            raise CelError(f"hash of unhashable type {type_name(key)}")
        return _MISSING
    found = m.get(map_key(key), _MISSING)
    if found is not _MISSING:
        return found
    if kind is float:
        if not (math.isinf(key) or math.isnan(key)) and key == math.floor(key):
            if -TWO_TO_63 < key < TWO_TO_63:
                found = m.get(int(key), _MISSING)
                if found is not _MISSING:
                    return found
            if 0 <= key < TWO_TO_64:
                return m.get(Uint(int(key)), _MISSING)
        return _MISSING
    if kind is int:
        return m.get(Uint(key), _MISSING) if key >= 0 else _MISSING
    if kind is Uint:
        return m.get(int(key), _MISSING) if key <= INT64_MAX else _MISSING
    return _MISSING


def map_contains(m: dict[Any, Any], key: Any) -> bool:
    """``key in m``: real membership, the domain maps' default not counted."""
    mtype = type(m)
    if mtype is DomainMap:
        return type(key) is str and key in m
    if mtype is HeldDomains:
        try:
            return held_key(key) in m
        except CelError:
            return False
    return map_find(m, key) is not _MISSING


def type_name(value: Any) -> str:
    """The CEL runtime type name of a value, as cel-go prints it."""
    kind = type(value)
    name = _TYPE_NAMES.get(kind)
    if name is not None:
        return name
    if isinstance(value, dict):
        return "map"
    if isinstance(value, list):
        return "list"
    return kind.__name__


_TYPE_NAMES: dict[type, str] = {
    bool: "bool",
    int: "int",
    Uint: "uint",
    float: "double",
    str: "string",
    bytes: "bytes",
    list: "list",
    dict: "map",
    CelMap: "map",
    DomainMap: "map",
    HeldDomains: "map",
    HeldNames: "map",
    type(None): "null_type",
    Optional: "optional_type",
    TypeValue: "type",
    Duration: "google.protobuf.Duration",
    Timestamp: "google.protobuf.Timestamp",
    QuantityValue: "kubernetes.Quantity",
    SemverValue: "kubernetes.Semver",
    URLValue: "kubernetes.URL",
    IPValue: "net.IP",
    CIDRValue: "net.CIDR",
}


def register_type_name(kind: type, name: str) -> None:
    """Value classes defined elsewhere (the device's maps) name their CEL type here."""
    _TYPE_NAMES[kind] = name


# --- equality ----------------------------------------------------------------------------------


def equal(a: Any, b: Any) -> bool:
    """``a == b`` as cel-go's types.Equal; raises for the Kubernetes types' strict Equal."""
    ta, tb = type(a), type(b)
    if ta is tb:
        if ta is str or ta is int or ta is bool or ta is bytes:
            return a == b  # type: ignore[no-any-return]
        if ta is float:
            return a == b  # type: ignore[no-any-return]
    if a is None or b is None:
        return a is None and b is None
    if ta is int or ta is float or ta is Uint:
        if tb is int or tb is float or tb is Uint:
            return _number_equal(a, b)
        return False
    if ta is bool or ta is str or ta is bytes:
        return False
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return False
        for x, y in zip(a, b, strict=True):
            try:
                if not equal(x, y):
                    return False
            except CelError:
                continue  # cel-go: an element comparison that errs does not make them unequal
        return True
    if ta is HeldDomains or ta is HeldNames:
        return _held_equal(a, b)
    if isinstance(a, dict):
        if not isinstance(b, dict) or len(a) != len(b):
            return False
        for key, value in map_items(a):
            other = map_find(b, key)
            if other is _MISSING:
                return False
            try:
                if not equal(value, other):
                    return False
            except CelError:
                continue
        return True
    if ta is QuantityValue:
        if tb is not QuantityValue or b.pointer:
            raise no_overload("_==_", a, b)
        return a.equals(b)  # type: ignore[no-any-return]
    if ta in _STRICT_EQUAL:
        if ta is not tb:
            raise no_overload("_==_", a, b)
        return a == b  # type: ignore[no-any-return]
    if ta is Optional:
        if tb is not Optional:
            return False
        if a is Optional.NONE or b is Optional.NONE:
            return a is b
        return equal(a.value, b.value)
    if ta is TypeValue:
        return tb is TypeValue and a.name == b.name
    if ta is Duration or ta is Timestamp:
        return ta is tb and a.nanos == b.nanos
    return False


_STRICT_EQUAL = {SemverValue, IPValue, CIDRValue, URLValue}


def _held_equal(a: dict[str, Any], b: Any) -> bool:
    """1.38's device maps compare entry by entry and stop at the first that is not equal, an
    error included (dynamic-resource-allocation's equalMaps; cel-go's own maps skip errors)."""
    if not isinstance(b, dict) or len(a) != len(b):
        return False
    for key, value in a.items():
        if type(value) is Unheld:
            raise CelError(value.message)
        other = map_find(b, key)
        if other is _MISSING or not equal(value, other):
            return False
    return True


def register_strict_equal(kind: type) -> None:
    """A value class whose ``==`` refuses other types (the Kubernetes types' Equal)."""
    _STRICT_EQUAL.add(kind)


def _number_equal(a: Any, b: Any) -> bool:
    if type(a) is float and math.isnan(a):
        return False
    if type(b) is float and math.isnan(b):
        return False
    return compare_numbers(a, b) == 0


def compare_numbers(a: Any, b: Any) -> int:
    """cel-go's cross-type numeric comparison (a double beyond int64 compares by sign)."""
    ta, tb = type(a), type(b)
    if ta is float and tb is not float:
        return -compare_numbers(b, a)
    if tb is float:
        if ta is float:
            return (a > b) - (a < b)  # type: ignore[no-any-return]
        if ta is int:
            # Go's d < math.MinInt64 and d > math.MaxInt64 compare doubles: both bounds are
            # exactly -2^63 and 2^63, so MaxInt64 against 2^63 falls through to float64(i),
            # which rounds up to 2^63: equal, as in cel-go.
            if b < -TWO_TO_63:
                return 1
            if b > TWO_TO_63:
                return -1
        else:
            if b < 0:
                return 1
            if b > float(UINT64_MAX):
                return -1
        fa = float(a)
        return (fa > b) - (fa < b)  # type: ignore[no-any-return]
    return (a > b) - (a < b)  # type: ignore[no-any-return]


def less_than(a: Any, b: Any, function: str = "_<_") -> int:
    """-1, 0, 1 for comparable values; raises CelError (no overload, NaN) otherwise."""
    ta, tb = type(a), type(b)
    if ta is int or ta is float or ta is Uint:
        if tb is int or tb is float or tb is Uint:
            if (ta is float and math.isnan(a)) or (tb is float and math.isnan(b)):
                raise CelError("NaN values cannot be ordered")
            return compare_numbers(a, b)
        raise no_overload(function, a, b)
    if ta is tb and (ta is str or ta is bytes or ta is bool):
        return (a > b) - (a < b)  # type: ignore[no-any-return]
    if ta is tb and (ta is Duration or ta is Timestamp):
        return (a.nanos > b.nanos) - (a.nanos < b.nanos)  # type: ignore[no-any-return]
    raise no_overload(function, a, b)


def comparable(value: Any) -> bool:
    """Has cel-go's Comparer trait (what sort(), min() and max() need)."""
    return type(value) in _COMPARABLE


_COMPARABLE = frozenset({int, Uint, float, str, bytes, bool, Duration, Timestamp})


def size_of(value: Any) -> int:
    """cel-go's actualSize: the size of strings (code points), bytes, lists and maps, of
    Kubernetes' IPs and CIDRs (bytes of address and of prefix), else 1."""
    kind = type(value)
    if kind is str or kind is bytes or kind is list or isinstance(value, (dict, list)):
        return len(value)
    if kind is Optional and value is not Optional.NONE:
        return size_of(value.value)
    if kind is IPValue or kind is CIDRValue:
        return sized_net(value)
    return 1


def sized_net(value: IPValue | CIDRValue) -> int:
    """The Size() of Kubernetes' IP (address bytes) and CIDR (prefix bytes, rounded up)."""
    if isinstance(value, IPValue):
        return value.address.max_prefixlen // 8
    return -(-value.interface.network.prefixlen // 8)


def contains(items: list[Any], value: Any) -> bool:
    """cel-go's list Contains: ``value.Equal(element)``, an error counting as not equal."""
    for element in items:
        try:
            if equal(value, element):
                return True
        except CelError:
            continue
    return False


# --- arithmetic ----------------------------------------------------------------------------------


def checked_int(value: int) -> int:
    if not INT64_MIN <= value <= INT64_MAX:
        raise CelError("integer overflow")
    return value


def checked_uint(value: int) -> Uint:
    if not 0 <= value <= UINT64_MAX:
        raise CelError("unsigned integer overflow")
    return Uint(value)


def int_divide(a: int, b: int) -> int:
    if b == 0:
        raise CelError("division by zero")
    q = abs(a) // abs(b)
    return checked_int(q if (a >= 0) == (b >= 0) else -q)


def int_modulo(a: int, b: int) -> int:
    if b == 0:
        raise CelError("modulus by zero")
    if a == INT64_MIN and b == -1:
        raise CelError("integer overflow")
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


def double_divide(a: float, b: float) -> float:
    if b == 0.0:
        if a == 0.0 or math.isnan(a):
            return math.nan
        negative = (math.copysign(1.0, a) < 0) != (math.copysign(1.0, b) < 0)
        return -math.inf if negative else math.inf
    return a / b


def format_double(value: float) -> str:
    """A double as Go's ``%g`` prints it (cel-go's string(double)): shortest digits,
    exponent notation below 1e-4 and from 1e6."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0.0:
        return sign + "0"
    parts = Decimal(repr(abs(value))).as_tuple()
    digits = "".join(str(d) for d in parts.digits)
    exponent = int(parts.exponent)
    stripped = digits.rstrip("0")
    point = len(digits) + exponent  # where the decimal point goes in ``stripped``
    digits = stripped.lstrip("0")
    point -= len(stripped) - len(digits)
    x = point - 1
    if x < -4 or x >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if x < 0 else '+'}{abs(x):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{sign}{digits}{'0' * (point - len(digits))}"
    return f"{sign}{digits[:point]}.{digits[point:]}"


_GO_FLOAT = re.compile(r"[+-]?(?:[0-9_]+\.?[0-9_]*|\.[0-9_]+)(?:[eE][+-]?[0-9_]+)?")
_GO_HEX_FLOAT = re.compile(r"([+-]?)0[xX]([0-9a-fA-F_]*\.?[0-9a-fA-F_]*)[pP]([+-]?[0-9_]+)")
_GO_SPECIAL = re.compile(r"[+-]?(?:inf|infinity|nan)", re.IGNORECASE)


def _underscores_ok(text: str) -> bool:
    """Go's rule: an underscore only between digits (or after a base prefix)."""
    body = text.lstrip("+-")
    saw = "^"
    hexadecimal = body[:2].lower() == "0x"
    if hexadecimal:
        body, saw = body[2:], "0"
    for c in body:
        if c.isdigit() or (hexadecimal and c.lower() in "abcdef"):
            saw = "0"
        elif c == "_":
            if saw != "0":
                return False
            saw = "_"
        elif saw == "_":
            return False
        else:
            saw = "!"
    return saw != "_"


def go_parse_float(text: str) -> float:
    """Go's strconv.ParseFloat(text, 64); ValueError for what it rejects (out of range too)."""
    if not text.isascii():
        raise ValueError(text)
    if _GO_SPECIAL.fullmatch(text):
        return float(text)
    if "_" in text and not _underscores_ok(text):
        raise ValueError(text)
    m = _GO_HEX_FLOAT.fullmatch(text)
    if m is not None:
        sign, mantissa, exp = m.group(1), m.group(2).replace("_", ""), m.group(3)
        if not mantissa.strip("."):
            raise ValueError(text)
        try:
            value = float.fromhex(f"{sign}0x{mantissa}p{exp.replace('_', '')}")
        except OverflowError:
            raise ValueError(text) from None
    elif _GO_FLOAT.fullmatch(text) and any(c.isdigit() for c in text.split("e")[0].split("E")[0]):
        value = float(text.replace("_", ""))
    else:
        raise ValueError(text)
    if math.isinf(value):
        raise ValueError(f"{text}: value out of range")
    return value


_GO_INT = re.compile(r"[+-]?[0-9]+")
_GO_UINT = re.compile(r"[0-9]+")


def go_parse_int(text: str) -> int:
    """Go's strconv.ParseInt(text, 10, 64)."""
    if not text.isascii() or not _GO_INT.fullmatch(text):
        raise ValueError(text)
    value = int(text, 10)
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"{text}: value out of range")
    return value


def go_parse_uint(text: str) -> int:
    """Go's strconv.ParseUint(text, 10, 64)."""
    if not text.isascii() or not _GO_UINT.fullmatch(text):
        raise ValueError(text)
    value = int(text, 10)
    if value > UINT64_MAX:
        raise ValueError(f"{text}: value out of range")
    return value
