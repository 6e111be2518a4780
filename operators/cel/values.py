"""Python value types behind the Kubernetes CEL extension types (quantity, semver, IP, CIDR, URL).

These classes define exactly the operations Kubernetes' CEL libraries define: equality for all
of them, no ``<``/``>`` (Kubernetes has ``isLessThan``/``compareTo`` instead), so
``quantity("1") < quantity("2")`` is refused as it is in the API server.
"""

from __future__ import annotations

import ipaddress
import math
import re
from contextvars import ContextVar
from dataclasses import dataclass
from fractions import Fraction
from functools import total_ordering
from typing import Any

from . import gourl
from .gourl import GoURL

__all__ = [
    "MUTATIONS",
    "CIDRValue",
    "IPValue",
    "QuantityError",
    "QuantityValue",
    "SemverError",
    "SemverValue",
    "URLValue",
    "parse_semver",
]


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity (resource.ParseQuantity's errors)."""


# Changes made to quantities the device owns, while an evaluation runs: cel-go's quantity
# functions mutate their receiver (Cmp converts it to its decimal form, Add/Sub of a decimal
# quantity adds in place into the decimal its copies share). Within one evaluation that is
# visible, as upstream; the evaluator restores the device's values afterwards.
MUTATIONS: ContextVar[list[tuple[Any, tuple[Any, ...]]] | None] = ContextVar(
    "cel_quantity_mutations", default=None
)


class _Dec:
    """inf.Dec: ``unscaled * 10**-scale``, mutable and shared as Go's *inf.Dec is."""

    __slots__ = ("scale", "shared", "unscaled")

    def __init__(self, unscaled: int, scale: int, shared: bool = False) -> None:
        self.unscaled = unscaled
        self.scale = scale
        self.shared = shared

    def exact(self) -> Fraction:
        if self.scale >= 0:
            return Fraction(self.unscaled, 10**self.scale)
        return Fraction(self.unscaled * 10 ** (-self.scale))

    def add(self, x: _Dec, y: _Dec, sign: int = 1) -> None:
        """``self = x + sign*y`` at the larger of their scales (inf.Dec.Add/Sub)."""
        scale = max(x.scale, y.scale)
        a = x.unscaled * 10 ** (scale - x.scale)
        b = y.unscaled * 10 ** (scale - y.scale)
        _log(self, (self.unscaled, self.scale))
        self.unscaled, self.scale = a + sign * b, scale


def _log(obj: Any, state: tuple[Any, ...]) -> None:
    if getattr(obj, "shared", False):
        log = MUTATIONS.get()
        if log is not None:
            log.append((obj, state))


def restore(log: list[tuple[Any, tuple[Any, ...]]]) -> None:
    """Undo mutations of the device's quantities, newest first."""
    for obj, state in reversed(log):
        if isinstance(obj, _Dec):
            obj.unscaled, obj.scale = state
        else:
            obj.value, obj.scale, obj.dec = state
    log.clear()


_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12}
_DECIMAL_SUFFIXES |= {"P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_MAX_INT64_FACTORS = 18
_NANO = -9


def _fits(value: int) -> bool:
    return _INT64_MIN <= value <= _INT64_MAX


def _scaled(base: int, scale: int) -> int | None:
    """positiveScaleInt64: base * 10**scale, or None on int64 overflow."""
    if scale == 0:
        return base
    if base == _INT64_MIN:
        return None
    value = base * 10**scale
    return value if _fits(value) else None


def _round_up(unscaled: int, scale: int, to: int) -> tuple[int, int]:
    """inf.Dec.Round(x, to, RoundUp): away from zero when digits are dropped."""
    if scale <= to:
        return unscaled * 10 ** (to - scale), to
    divisor = 10 ** (scale - to)
    q, r = divmod(abs(unscaled), divisor)
    if r:
        q += 1
    return (q if unscaled >= 0 else -q), to


_POW10_TAB = [float(f"1e{i}") for i in range(32)]
_POW10_POS = [float(f"1e{32 * i}") for i in range(10)]
_POW10_NEG = [float(f"1e-{32 * i}") for i in range(11)]


def _go_pow10(n: int) -> float:
    """Go's math.Pow10, table for table (the product rounds as Go's does)."""
    if 0 <= n <= 308:
        return _POW10_POS[n // 32] * _POW10_TAB[n % 32]
    if -323 <= n <= 0:
        return _POW10_NEG[-n // 32] / _POW10_TAB[-n % 32]
    return math.inf if n > 0 else 0.0


class QuantityValue:
    """A CEL ``kubernetes.Quantity``: resource.Quantity's two forms, int64 (``value`` at a
    decimal ``scale``) or decimal (``dec``), as Go computes with them.

    ``pointer`` marks a result of add()/sub() (upstream returns a pointer there, and the
    value type's Equal refuses it); ``shared`` one the device owns.
    """

    __slots__ = ("dec", "pointer", "scale", "shared", "value")

    def __init__(
        self,
        value: int = 0,
        scale: int = 0,
        dec: _Dec | None = None,
        *,
        pointer: bool = False,
        shared: bool = False,
    ) -> None:
        self.value = value
        self.scale = scale
        self.dec = dec
        self.pointer = pointer
        self.shared = shared

    @classmethod
    def parse(cls, text: str, *, shared: bool = False, bounded: bool = False) -> QuantityValue:
        """resource.ParseQuantity; ``bounded``: as Kubernetes 1.38's apimachinery parses (no
        cap on a decimal, 29 significant digits, 19-digit integers in the int64 form)."""
        if bounded:
            return _parse_quantity_bounded(text, shared)
        return _parse_quantity(text, shared)

    def copy(self) -> QuantityValue:
        """A new quantity of the same form, mutable on its own (as a fresh parse is)."""
        dec = None if self.dec is None else _Dec(self.dec.unscaled, self.dec.scale)
        return QuantityValue(self.value, self.scale, dec, pointer=self.pointer)

    def exact(self) -> Fraction:
        if self.dec is not None:
            return self.dec.exact()
        if self.scale >= 0:
            return Fraction(self.value * 10**self.scale)
        return Fraction(self.value, 10 ** (-self.scale))

    def as_dec(self) -> _Dec:
        """Quantity.AsDec: converts the receiver to its decimal form (a mutation)."""
        if self.dec is None:
            _log(self, (self.value, self.scale, self.dec))
            self.dec = _Dec(self.value, -self.scale, self.shared)
            self.value, self.scale = 0, 0
        return self.dec

    def copy_dec(self) -> _Dec:
        """The decimal form of a copy (Go passes the argument by value)."""
        if self.dec is not None:
            return self.dec
        return _Dec(self.value, -self.scale)

    def cmp(self, other: QuantityValue) -> int:
        """Quantity.Cmp (pointer receiver: converts itself when either side is decimal)."""
        if self.dec is None and other.dec is None:
            a, b = self.exact(), other.exact()
            return (a > b) - (a < b)
        mine, theirs = self.as_dec().exact(), other.copy_dec().exact()
        return (mine > theirs) - (mine < theirs)

    def compare(self, other: QuantityValue) -> int:
        """Quantity.Cmp as 1.38 has it: converts neither side."""
        a, b = self.exact(), other.exact()
        return (a > b) - (a < b)

    def equals(self, other: QuantityValue) -> bool:
        """Quantity.Equal (value receiver: nothing is converted)."""
        return self.exact() == other.exact()

    def sign(self) -> int:
        if self.dec is not None:
            return (self.dec.unscaled > 0) - (self.dec.unscaled < 0)
        return (self.value > 0) - (self.value < 0)

    def as_int64(self) -> int | None:
        if self.dec is not None or self.scale < 0:
            return None
        return _scaled(self.value, self.scale)

    def approximate_float(self, zero_safe: bool = False) -> float:
        """AsApproximateFloat64; ``zero_safe``: 1.38 returns a zero base as it is (0 * Inf is
        no NaN)."""
        if self.dec is not None:
            base, exponent = float(self.dec.unscaled), -self.dec.scale
        else:
            base, exponent = float(self.value), self.scale
        if exponent == 0 or (zero_safe and base == 0):
            return base
        return base * _go_pow10(exponent)

    def plus(self, other: QuantityValue, sign: int = 1, *, deep: bool = False) -> QuantityValue:
        """``copy := *q; copy.Add(y)`` (or Sub): the copy shares q's decimal, if any, unless
        ``deep`` (``copy := q.DeepCopy()``, Kubernetes 1.37)."""
        dec = self.dec
        if deep and dec is not None:
            dec = _Dec(dec.unscaled, dec.scale)
        result = QuantityValue(self.value, self.scale, dec, pointer=True)
        if result.dec is None and other.dec is None:
            addend = sign * other.value
            if addend == 1 << 63:  # int64Amount.Sub negates in int64: -MinInt64 wraps
                addend = -(1 << 63)
            total = _add_int64(result.value, result.scale, addend, other.scale)
            if total is not None:
                result.value, result.scale = total
                return result
        if result.dec is None:
            result.dec = _Dec(result.value, -result.scale)
            result.value, result.scale = 0, 0
        result.dec.add(result.dec, other.copy_dec(), sign)
        return result

    def plus_bounded(self, other: QuantityValue, sign: int = 1) -> QuantityValue:
        """``copy := q; copy.Add(y)`` (or Sub) as 1.38's apimachinery computes it: in int64
        where it fits (a subtrahend of MinInt64 never does), else in decimals, the finer of two
        operands more than 29 orders of magnitude apart rounded away from zero first."""
        result = QuantityValue(self.value, self.scale, self.dec, pointer=True)
        if self.dec is None and other.dec is None:
            if sign < 0 and self.value == 0 and other.value == _INT64_MIN:
                # 0 - y is -y: y's scale kept, in decimal form once negated.
                result.value, result.scale = 0, 0
                result.dec = _Dec(-other.value, -other.scale)
                return result
            if not (sign < 0 and other.value == _INT64_MIN):
                total = _add_int64(self.value, self.scale, sign * other.value, other.scale)
                if total is not None:
                    result.value, result.scale = total
                    return result
        x = self.dec if self.dec is not None else _Dec(self.value, -self.scale)
        y = other.copy_dec()
        result.value, result.scale = 0, 0
        if y.unscaled == 0:
            result.dec = _Dec(x.unscaled, x.scale)
        elif x.unscaled == 0:
            result.dec = _Dec(sign * y.unscaled, y.scale)
        else:
            x, y = _bound_scale_gap(x, y)
            result.dec = _Dec(0, 0)
            result.dec.add(x, y, sign)
        return result

    def __repr__(self) -> str:
        return f"quantity({float(self.exact())!r})"


#: How many orders of magnitude 1.38's Add and Sub keep between their operands.
_MAX_SCALE_GAP = 29


def _as_scale(dec: _Dec, exponent: int) -> _Dec:
    """infDecAmount.AsScale (1.38): at least the base-10 ``exponent``, rounded away from zero."""
    if -dec.scale >= exponent:
        return _Dec(dec.unscaled, dec.scale)
    unscaled, scale = _round_up(dec.unscaled, dec.scale, -exponent)
    return _Dec(unscaled, scale)


def _bound_scale_gap(x: _Dec, y: _Dec) -> tuple[_Dec, _Dec]:
    """boundScaleGap: round the finer operand when the two are too many orders apart."""
    x_exp, y_exp = -x.scale, -y.scale
    if x_exp - y_exp > _MAX_SCALE_GAP:
        return x, _as_scale(y, x_exp - _MAX_SCALE_GAP)
    if y_exp - x_exp > _MAX_SCALE_GAP:
        return _as_scale(x, y_exp - _MAX_SCALE_GAP), y
    return x, y


def _add_int64(a: int, a_scale: int, b: int, b_scale: int) -> tuple[int, int] | None:
    """int64Amount.Add: exact in int64 at the smaller scale, or None."""
    if b == 0:
        return a, a_scale
    if a == 0:
        return b, b_scale
    if a_scale == b_scale:
        c = a + b
        return (c, a_scale) if _fits(c) else None
    if a_scale > b_scale:
        scaled = _scaled(a, a_scale - b_scale)
        if scaled is None or not _fits(scaled + b):
            return None
        return scaled + b, b_scale
    scaled = _scaled(b, b_scale - a_scale)
    if scaled is None or not _fits(a + scaled):
        return None
    return a + scaled, a_scale


_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")


def _split_quantity(text: str) -> tuple[bool, str, str, str, str]:
    """resource.parseQuantityString: (positive, number text, num, denom, suffix)."""
    positive, pos, end = True, 0, len(text)
    if text[0] == "-":
        positive, pos = False, 1
    elif text[0] == "+":
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    i = pos
    while i < end and text[i] in _DIGITS:
        i += 1
    num = text[pos:i] or "0"
    if i >= end:
        return positive, text, num, "", ""
    pos = i
    denom = ""
    if text[pos] == ".":
        pos += 1
        i = pos
        while i < end and text[i] in _DIGITS:
            i += 1
        denom = text[pos:i]
        if i >= end:
            return positive, text, num, denom, ""
        pos = i
    value = text[:pos]
    suffix_start = pos
    i = pos
    while i < end and text[i] in _SUFFIX_CHARS:
        i += 1
    if i >= end:
        return positive, value, num, denom, text[suffix_start:]
    pos = i
    if text[pos] in "+-":
        pos += 1
    i = pos
    while i < end and text[i] in _DIGITS:
        i += 1
    if i >= end:
        return positive, value, num, denom, text[suffix_start:]
    raise QuantityError(f"quantity {text!r}: quantities must match the regular expression")


def _interpret_suffix(suffix: str) -> tuple[int, int, str] | None:
    """(base, exponent, format) of a suffix, as resource's suffixer reads it."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], "DecimalSI"
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], "BinarySI"
    if len(suffix) > 1 and suffix[0] in "eE" and re.fullmatch(r"[+-]?[0-9]+", suffix[1:]):
        parsed = int(suffix[1:], 10)
        if not _fits(parsed):
            return None
        return 10, (parsed + 2**31) % 2**32 - 2**31, "DecimalExponent"  # Go's int32(parsed)
    return None


def _parse_quantity(text: str, shared: bool) -> QuantityValue:
    if not text:
        raise QuantityError("quantities must match the regular expression")
    if text == "0":
        return QuantityValue(shared=shared)
    positive, value_text, num, denom, suffix = _split_quantity(text)
    interpreted = _interpret_suffix(suffix)
    if interpreted is None:
        raise QuantityError(f"quantity {text!r}: unable to parse quantity's suffix")
    base, exponent, fmt = interpreted
    scale, mantissa = 0, 1
    if fmt == "BinarySI":
        if exponent >= 0 and not denom:
            mantissa = 1 << exponent
            precision = 15 - len(num) - int(exponent * 3 / 10) - 1
        else:
            precision = -1
    else:
        scale = exponent
        precision = _MAX_INT64_FACTORS - (len(num) + len(denom))
    if precision >= 0:
        scale -= len(denom)
        if scale >= _NANO:
            value = int(num + denom, 10)
            result = value * mantissa
            if _fits(result) and not (mantissa not in (0, 1) and value == _INT64_MIN):
                return QuantityValue(result if positive else -result, scale, shared=shared)
    sign, number = "", value_text
    if number and number[0] in "+-":  # ("" is in every string: a bare suffix has no sign)
        sign, number = number[0], number[1:]
    whole, _, fraction = number.partition(".")
    if not (whole + fraction) or not set(whole + fraction) <= _DIGITS:
        raise QuantityError(f"quantity {text!r}: unable to parse quantity's numeric value")
    unscaled = int(whole + fraction, 10)
    dec_scale = len(fraction)
    if base == 10:
        dec_scale -= exponent
    else:
        unscaled <<= exponent
    if unscaled != 0 or not _fits(unscaled):
        unscaled, dec_scale = _round_up(unscaled, dec_scale, 9)
    if fmt == "BinarySI" and Fraction(unscaled) / Fraction(10) ** dec_scale > _INT64_MAX:
        unscaled, dec_scale = _INT64_MAX, 0
    if sign == "-":
        unscaled = -unscaled
    return QuantityValue(dec=_Dec(unscaled, dec_scale, shared), shared=shared)


def _split_quantity_bounded(text: str) -> tuple[bool, str, str, str, bool]:
    """1.38's parseQuantityString: (positive, integer digits without leading zeros or "0",
    fraction digits, suffix, whether the integer part was defaulted to "0" unseen)."""
    positive, pos, end = True, 0, len(text)
    if text[0] == "-":
        positive, pos = False, 1
    elif text[0] == "+":
        pos = 1
    zeros = False
    while pos < end and text[pos] == "0":
        zeros, pos = True, pos + 1
    if pos >= end:
        return positive, "0", "", "", not zeros
    i = pos
    while i < end and text[i] in _DIGITS:
        i += 1
    num = text[pos:i]
    if i >= end:
        return positive, num, "", "", False
    pos = i
    defaulted = False
    if not num:
        num, defaulted = "0", not zeros
    denom = ""
    if text[pos] == ".":
        pos += 1
        i = pos
        while i < end and text[i] in _DIGITS:
            i += 1
        denom = text[pos:i]
        if i >= end:
            return positive, num, denom, "", defaulted
        pos = i
    suffix_start = pos
    i = pos
    while i < end and text[i] in _SUFFIX_CHARS:
        i += 1
    if i >= end:
        return positive, num, denom, text[suffix_start:], defaulted
    pos = i
    if text[pos] in "+-":
        pos += 1
    i = pos
    while i < end and text[i] in _DIGITS:
        i += 1
    if i >= end:
        return positive, num, denom, text[suffix_start:], defaulted
    raise QuantityError(f"quantity {text!r}: quantities must match the regular expression")


#: Significant digits 1.38 keeps of a decimal quantity, and in front of a binary suffix.
_DECIMAL_DIGITS = 29
_BINARY_DIGITS = 70
_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1


def _parse_quantity_bounded(text: str, shared: bool) -> QuantityValue:
    """ParseQuantity of Kubernetes 1.38 (apimachinery v0.38 api/resource/quantity.go)."""
    if not text:
        raise QuantityError("quantities must match the regular expression")
    if text == "0":
        return QuantityValue(shared=shared)
    positive, num, denom, suffix, defaulted = _split_quantity_bounded(text)
    interpreted = _interpret_suffix(suffix)
    if interpreted is None:
        raise QuantityError(f"quantity {text!r}: unable to parse quantity's suffix")
    base, exponent, fmt = interpreted
    scale, mantissa = 0, 1
    if fmt == "BinarySI":
        if exponent >= 0 and not denom:
            mantissa = 1 << exponent
            precision = 15 - len(num) - int(exponent * 3 / 10) - 1
        else:
            precision = -1
    else:
        scale = exponent
        precision = _MAX_INT64_FACTORS + 1 - (len(num) + len(denom))
    if precision >= 0:
        scale -= len(denom)
        if scale >= _NANO:
            magnitude = int(num + denom, 10)
            value = magnitude if positive else -magnitude
            if _fits(value):
                product = _int64_multiply(value, mantissa)
                if product is not None:
                    return QuantityValue(product, scale, shared=shared)
    if not denom and defaulted:
        raise QuantityError(f"quantity {text!r}: unable to parse quantity's numeric value")
    digits = (num + denom).lstrip("0") or "0"
    keep = _DECIMAL_DIGITS if base == 10 else _BINARY_DIGITS
    exp10 = -len(denom)  # the value is unscaled * 10**exp10
    dropped = ""
    if len(digits) > keep:
        digits, dropped = digits[:keep], digits[keep:]
        exp10 += len(dropped)
    unscaled = int(digits, 10) + (1 if dropped.strip("0") else 0)
    if base == 10:
        if exponent == _INT32_MIN:
            raise QuantityError(f"quantity {text!r}: unable to parse quantity's suffix")
        effective = max(_INT32_MIN, min(_INT32_MAX, exp10 + exponent))
        if effective == _INT32_MIN:  # no inf.Scale holds it: round to nano first
            unscaled = _as_scale(_Dec(unscaled, -exp10), _NANO - exponent).unscaled
            effective = _NANO
        exp10 = effective
    else:
        unscaled <<= exponent
    if unscaled != 0:
        rounded = _as_scale(_Dec(unscaled, -exp10), _NANO)
        unscaled, exp10 = rounded.unscaled, -rounded.scale
    if fmt == "BinarySI" and Fraction(unscaled) * Fraction(10) ** exp10 > _INT64_MAX:
        unscaled, exp10 = _INT64_MAX, 0
    if not positive:
        unscaled = -unscaled
    return QuantityValue(dec=_Dec(unscaled, -exp10, shared), shared=shared)


def _int64_multiply(a: int, b: int) -> int | None:
    """resource's int64Multiply: a*b, or None where int64 overflows."""
    if a in (0, 1) or b in (0, 1):
        return a * b
    if _INT64_MIN in (a, b):
        return None
    product = a * b
    return product if _fits(product) else None


class SemverError(ValueError):
    """A string that is not a semantic version (semver.org 2.0.0)."""


_NUMERIC = re.compile(r"^(0|[1-9][0-9]*)$")
_IDENT = re.compile(r"^[0-9A-Za-z-]+$")


@total_ordering
@dataclass(frozen=True, slots=True, eq=False)
class _SemverKey:
    """Semver 2.0.0 precedence; build metadata takes no part."""

    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _SemverKey):
            return NotImplemented
        return self._tuple() == other._tuple()

    def __hash__(self) -> int:
        return hash(self._tuple())

    def _tuple(self) -> tuple[int, int, int, tuple[int | str, ...]]:
        return (self.major, self.minor, self.patch, self.pre)

    def __lt__(self, other: _SemverKey) -> bool:
        if (self.major, self.minor, self.patch) != (other.major, other.minor, other.patch):
            return (self.major, self.minor, self.patch) < (other.major, other.minor, other.patch)
        if not self.pre or not other.pre:
            # A version without a pre-release outranks the same version with one.
            return bool(self.pre) and not other.pre
        for mine, theirs in zip(self.pre, other.pre, strict=False):
            if mine == theirs:
                continue
            if isinstance(mine, int) and isinstance(theirs, int):
                return mine < theirs
            if isinstance(mine, int) != isinstance(theirs, int):
                return isinstance(mine, int)  # numeric identifiers sort first
            return str(mine) < str(theirs)
        return len(self.pre) < len(other.pre)


class SemverValue:
    """A CEL ``kubernetes.Semver`` (strict semver.org 2.0.0, as blang/semver parses it)."""

    __slots__ = ("build", "key", "text")

    def __init__(self, key: _SemverKey, build: tuple[str, ...], text: str) -> None:
        self.key = key
        self.build = build
        self.text = text

    @property
    def major(self) -> int:
        return self.key.major

    @property
    def minor(self) -> int:
        return self.key.minor

    @property
    def patch(self) -> int:
        return self.key.patch

    def compare(self, other: SemverValue) -> int:
        return (self.key > other.key) - (self.key < other.key)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SemverValue):
            return self.key == other.key
        return False

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"semver({self.text!r})"


def _parse_number(part: str, what: str, text: str) -> int:
    if not _NUMERIC.match(part):
        raise SemverError(f"invalid {what} version {part!r} in {text!r}")
    number = int(part)
    if number >= 2**64:
        raise SemverError(f"{what} version {part!r} in {text!r}: value out of range")
    return number


def parse_semver(text: str, *, normalize: bool = False) -> SemverValue:
    """Parse strictly, or (``normalize``) accept a ``v`` prefix, short forms and leading zeros."""
    source = text
    if normalize:
        text = _normalize_semver(text)
    core, plus, build_text = text.partition("+")
    core, dash, pre_text = core.partition("-")
    parts = core.split(".")
    if len(parts) != 3:
        raise SemverError(f"{source!r} is not a semantic version: expected MAJOR.MINOR.PATCH")
    major, minor, patch = (
        _parse_number(p, w, source) for p, w in zip(parts, ("major", "minor", "patch"), strict=True)
    )
    pre: list[int | str] = []
    if dash:
        for ident in pre_text.split("."):
            if not ident or not _IDENT.match(ident):
                raise SemverError(f"invalid pre-release identifier {ident!r} in {source!r}")
            if ident.isdigit():
                pre.append(_parse_number(ident, "pre-release", source))
            else:
                pre.append(ident)
    build: tuple[str, ...] = ()
    if plus:
        build = tuple(build_text.split("."))
        if any(not b or not _IDENT.match(b) for b in build):
            raise SemverError(f"invalid build metadata in {source!r}")
    return SemverValue(_SemverKey(major, minor, patch, tuple(pre)), build, text)


def _normalize_semver(text: str) -> str:
    """As Kubernetes' normalizeAndParse: drop "v", strip leading zeros, fill minor/patch."""
    text = text.removeprefix("v")
    parts = text.split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            stripped = part.lstrip("0")
            if not stripped or not stripped[0].isdigit():
                stripped = "0" + stripped
            parts[i] = stripped
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise SemverError(f"{text!r}: short version cannot contain pre-release/build metadata")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


class IPValue:
    """A CEL ``net.IP`` (Kubernetes library/ip.go): IPv4 or IPv6 without zone."""

    __slots__ = ("address",)

    def __init__(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> None:
        self.address = address

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IPValue) and self.address == other.address

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.address)

    def __repr__(self) -> str:
        return f"ip({str(self.address)!r})"


class CIDRValue:
    """A CEL ``net.CIDR``: an address with a prefix length (host bits may be set)."""

    __slots__ = ("interface",)

    def __init__(self, interface: ipaddress.IPv4Interface | ipaddress.IPv6Interface) -> None:
        self.interface = interface

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CIDRValue) and self.interface == other.interface

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.interface)

    def __repr__(self) -> str:
        return f"cidr({str(self.interface)!r})"


class URLValue:
    """A CEL ``kubernetes.URL`` (Kubernetes library/urls.go): the text and Go's reading of it."""

    __slots__ = ("parts", "text")

    def __init__(self, text: str, parts: GoURL) -> None:
        self.text = text
        self.parts = parts

    def __eq__(self, other: object) -> bool:
        return isinstance(other, URLValue) and self.text == other.text

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"url({self.text!r})"


def parse_url(text: str) -> URLValue:
    """As Kubernetes' url(): Go's ParseRequestURI must accept it, Parse reads it."""
    try:
        gourl.parse_request_uri(text)
        return URLValue(text, gourl.parse(text))
    except gourl.URLError as exc:
        raise ValueError(f"URL parse error during conversion from string: {exc}") from None


def parse_ip(text: str) -> IPValue:
    """As Kubernetes' ip(): no zones, no IPv4-mapped IPv6 addresses."""
    if "%" in text:
        raise ValueError(f"IP address with zone value is not allowed: {text!r}")
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        raise ValueError(f"IP Address {text!r} parse error during conversion from string") from None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address is not allowed: {text!r}")
    return IPValue(address)


def parse_cidr(text: str) -> CIDRValue:
    """As Kubernetes' cidr() (Go's netip.ParsePrefix): an address, "/", a decimal prefix
    length without leading zeros."""
    if "/" not in text:
        raise ValueError(f"network address parse error during conversion from string: {text!r}")
    address, _, bits = text.rpartition("/")
    if not bits.isascii() or not bits.isdigit() or (len(bits) > 1 and bits[0] == "0"):
        raise ValueError(f"network address parse error during conversion from string: {text!r}")
    parse_ip(address)
    try:
        interface = ipaddress.ip_interface(text)
    except ValueError:
        raise ValueError(
            f"network address parse error during conversion from string: {text!r}"
        ) from None
    return CIDRValue(interface)
