"""Kubernetes resource quantities, exact (``decimal.Decimal``), formatted as Kubernetes does.

Semantics follow k8s.io/apimachinery/pkg/api/resource: the suffix picks a format (binary SI,
decimal SI, decimal exponent), values more precise than nano units are rounded up (away from
zero) when parsed, and the canonical form is the one the API server writes back
("1024Mi" -> "1Gi", "1000m" -> "1", "0.5Ki" -> "512", "1.5" -> "1500m").
The original spelling is kept for exact JSON round trips; comparisons ignore it.
"""

from __future__ import annotations

import decimal
import enum
import math
import re
from decimal import Decimal
from functools import total_ordering
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

_CONTEXT = decimal.Context(prec=200, rounding=decimal.ROUND_HALF_EVEN, Emax=10_000, Emin=-10_000)
_NANO = Decimal("1e-9")

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_BY_EXP = {e: s for s, e in _DECIMAL.items()}
_BINARY_BY_EXP = {e: s for s, e in _BINARY.items()}

# Kubernetes' grammar: a signed number of digits with an optional decimal point, then a suffix.
_NUMBER = re.compile(r"^([+-]?)([0-9]+\.?[0-9]*|\.[0-9]+)(.*)$")
_EXPONENT = re.compile(r"^[eE]([+-]?[0-9]+)$")
# Kubernetes caps exponents so a quantity stays representable (resource.MaxMilliValue etc.).
_MAX_EXPONENT = 1000
# resource.maxAllowed: binary-SI quantities are capped at the largest int64 when parsed.
_MAX_BINARY = Decimal(2**63 - 1)


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


class QuantityFormat(enum.Enum):
    BINARY_SI = "BinarySI"
    DECIMAL_SI = "DecimalSI"
    DECIMAL_EXPONENT = "DecimalExponent"


def _parse(text: str) -> tuple[Decimal, QuantityFormat]:
    if not text:
        raise QuantityError(
            "quantities must match the regular expression "
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': empty string"
        )
    match = _NUMBER.match(text)
    if match is None:
        raise QuantityError(f"quantity {text!r}: expected a number with an optional suffix")
    sign, digits, suffix = match.groups()
    if suffix in _BINARY:
        fmt, multiplier = QuantityFormat.BINARY_SI, Decimal(2) ** _BINARY[suffix]
    elif suffix in _DECIMAL:
        fmt, multiplier = QuantityFormat.DECIMAL_SI, Decimal(10) ** _DECIMAL[suffix]
    else:
        exp = _EXPONENT.match(suffix)
        if exp is None:
            raise QuantityError(f"quantity {text!r}: unknown suffix {suffix!r}")
        power = int(exp.group(1))
        if abs(power) > _MAX_EXPONENT:
            raise QuantityError(f"quantity {text!r}: exponent out of range")
        fmt, multiplier = QuantityFormat.DECIMAL_EXPONENT, _CONTEXT.power(Decimal(10), power)
    value = _CONTEXT.multiply(Decimal(digits), multiplier)
    if sign == "-":
        value = value.copy_negate()
    value = _round_to_nano(value)
    if fmt is QuantityFormat.BINARY_SI:
        if value.copy_abs() > _MAX_BINARY:
            # resource.ParseQuantity caps binary quantities at the largest int64.
            value = _MAX_BINARY if value > 0 else -_MAX_BINARY
        elif 0 < value.copy_abs() < 1:
            # ... and turns fractions below one unit into DecimalSI ("0.5Ki" stays binary).
            fmt = QuantityFormat.DECIMAL_SI
    return value, fmt


def _round_to_nano(value: Decimal) -> Decimal:
    """Kubernetes keeps at most nano precision and rounds the rest away from zero."""
    if value == value.to_integral_value():
        return value
    return value.quantize(_NANO, rounding=decimal.ROUND_UP, context=_CONTEXT)


def _canonical_decimal(value: Decimal) -> tuple[int, int]:
    """(mantissa, exponent) with exponent a multiple of 3 and the mantissa as short as possible."""
    sign, digits, exp = value.normalize(_CONTEXT).as_tuple()
    assert isinstance(exp, int)
    mantissa = int("".join(map(str, digits)) or "0")
    shift = exp % 3
    mantissa *= 10**shift
    exp -= shift
    return (-mantissa if sign else mantissa), exp


def _format(value: Decimal, fmt: QuantityFormat) -> str:
    if value == 0:
        return "0"
    if fmt is QuantityFormat.BINARY_SI and (
        value.copy_abs() < 1024 or value != value.to_integral_value()
    ):
        fmt = QuantityFormat.DECIMAL_SI
    if fmt is QuantityFormat.BINARY_SI:
        number = int(value)
        exp = 0
        while number % 1024 == 0 and exp < 60:
            number //= 1024
            exp += 10
        return f"{number}{_BINARY_BY_EXP.get(exp, '')}"
    mantissa, exp = _canonical_decimal(value)
    if fmt is QuantityFormat.DECIMAL_EXPONENT:
        return f"{mantissa}" if exp == 0 else f"{mantissa}e{exp}"
    if exp > 18:
        # Beyond the largest suffix ("E"), Kubernetes falls back to the exponent notation
        # ("1e21", not "1000E").
        return f"{mantissa}e{exp}"
    return f"{mantissa}{_DECIMAL_BY_EXP[exp]}"


@total_ordering
class Quantity:
    """An exact Kubernetes quantity; hashes and compares by value, remembers its spelling."""

    __slots__ = ("_format", "_raw", "_text", "_value")
    _value: Decimal
    _format: QuantityFormat
    _text: str
    _raw: str | int | float

    def __init__(self, text: str | int | Quantity) -> None:
        if isinstance(text, Quantity):
            self._value, self._format = text._value, text._format
            self._text, self._raw = text._text, text._raw
            return
        if isinstance(text, bool) or not isinstance(text, (str, int)):
            raise QuantityError(
                f"quantity must be a string or an integer, not {type(text).__name__}"
            )
        self._raw = text
        self._text = str(text)
        self._value, self._format = _parse(self._text)

    @classmethod
    def from_decimal(
        cls, value: Decimal | int, fmt: QuantityFormat = QuantityFormat.DECIMAL_SI
    ) -> Quantity:
        """A quantity of an exact value, spelled canonically in the given format."""
        q = cls.__new__(cls)
        q._value = _round_to_nano(Decimal(value))
        q._format = fmt
        q._text = _format(q._value, fmt)
        q._raw = q._text
        return q

    @property
    def value(self) -> Decimal:
        return self._value

    @property
    def format(self) -> QuantityFormat:
        return self._format

    @property
    def text(self) -> str:
        """The spelling this quantity was parsed from (what a round trip writes back)."""
        return self._text

    def canonical(self) -> str:
        """The string the Kubernetes API server would store for this quantity."""
        return _format(self._value, self._format)

    def __str__(self) -> str:
        return self.canonical()

    def __repr__(self) -> str:
        return f"Quantity({self._text!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self._value == other._value
        if isinstance(other, (int, Decimal)) and not isinstance(other, bool):
            return self._value == other
        return NotImplemented

    def __lt__(self, other: Quantity | int | Decimal) -> bool:
        if isinstance(other, Quantity):
            return self._value < other._value
        if isinstance(other, (int, Decimal)) and not isinstance(other, bool):
            return self._value < other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._value)

    def _result_format(self, other: Quantity) -> QuantityFormat:
        # As resource.Quantity.Add: the receiver's format wins unless it is zero.
        return other._format if self._value == 0 else self._format

    def __add__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        return Quantity.from_decimal(
            _CONTEXT.add(self._value, other._value), self._result_format(other)
        )

    def __sub__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        return Quantity.from_decimal(
            _CONTEXT.subtract(self._value, other._value), self._result_format(other)
        )

    def __neg__(self) -> Quantity:
        return Quantity.from_decimal(self._value.copy_negate(), self._format)

    def sign(self) -> int:
        return (self._value > 0) - (self._value < 0)

    def is_integer(self) -> bool:
        return self._value == self._value.to_integral_value()

    def as_int(self) -> int:
        """The value as an integer; raises when it is fractional."""
        if not self.is_integer():
            raise QuantityError(f"quantity {self.canonical()} is not an integer")
        return int(self._value)

    def milli_value(self) -> int:
        """The value in milli-units, rounded up as Kubernetes' MilliValue does."""
        milli = _CONTEXT.multiply(self._value, Decimal(1000))
        return int(milli.to_integral_value(rounding=decimal.ROUND_CEILING))

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        def validate(raw: Any) -> Quantity:
            if isinstance(raw, Quantity):
                return raw
            if isinstance(raw, float) and math.isfinite(raw):
                # JSON numbers reach the API server as text ("0.5"); keep the number itself.
                q = Quantity(repr(raw))
                q._raw = raw
                return q
            if isinstance(raw, str) and raw != raw.strip():
                # Quantity.UnmarshalJSON trims whitespace before parsing.
                q = Quantity(raw.strip())
                q._raw = raw
                return q
            if isinstance(raw, bool) or not isinstance(raw, (str, int)):
                raise ValueError(f"quantity must be a string or a number, not {type(raw).__name__}")
            return Quantity(raw)

        def serialize(q: Quantity) -> str | int | float:
            return q._raw

        return core_schema.no_info_plain_validator_function(
            validate,
            serialization=core_schema.plain_serializer_function_ser_schema(serialize),
            json_schema_input_schema=core_schema.str_schema(),
        )


def parse_quantity(text: str | int) -> Quantity:
    """Parse or raise QuantityError with the offending text."""
    return Quantity(text)
