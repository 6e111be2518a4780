"""Quantity: Kubernetes' canonical forms, parse errors, exact arithmetic (with properties)."""

from __future__ import annotations

import decimal
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from operators.api.quantity import Quantity, QuantityError, QuantityFormat, parse_quantity

# (input, canonical) as k8s.io/apimachinery/pkg/api/resource prints them (quantity_test.go).
CANONICAL = [
    ("1024Mi", "1Gi"),
    ("1000m", "1"),
    ("0.5Ki", "512"),
    ("1.5", "1500m"),
    ("1000", "1k"),
    ("1e3", "1e3"),
    ("100000", "100k"),
    ("1536Mi", "1536Mi"),
    ("1.5Ki", "1536"),
    ("0.0000000001", "1n"),
    ("0", "0"),
    ("0Ki", "0"),
    ("-0", "0"),
    ("1Ki", "1Ki"),
    ("1Mi", "1Mi"),
    ("1000M", "1G"),
    ("300Mi", "300Mi"),
    ("307200Ki", "300Mi"),
    ("1025", "1025"),
    ("1001Gi", "1001Gi"),
    ("1025024Mi", "1001Gi"),
    ("1024Gi", "1Ti"),
    ("5000m", "5"),
    ("0.5", "500m"),
    ("0.001T", "1G"),
    ("1000u", "1m"),
    ("80m", "80m"),
    ("1.08", "1080m"),
    ("1080000000n", "1080m"),
    ("1E", "1E"),
    ("12E", "12E"),
    ("1000E", "1e21"),
    ("5000E", "5e21"),
    ("1000000E", "1e24"),
    (".001e12", "1e9"),
    ("0.001e0", "1e-3"),
    ("1000e-12", "1e-9"),
    ("80e-3", "80e-3"),
    ("1.7E18", "1700e15"),
    ("1.3E+6", "1300e3"),
    (".001Ki", "1024m"),
    (".000001Ki", "1024u"),
    (".000000001Ki", "1024n"),
    (".000000000001Ki", "2n"),
    ("3.001n", "4n"),
    ("0.00000012345", "124n"),
    ("0.5e-9", "1e-9"),
    ("1.1E-9", "2e-9"),
    ("9Ei", "9223372036854775807"),
    ("9223372036854775807Ki", "9223372036854775807"),
    ("100.035k", "100035"),
    ("10.035M", "10035k"),
    ("+1", "1"),
    ("1.", "1"),
    ("1.G", "1G"),
    ("-1.5", "-1500m"),
    ("-1024Mi", "-1Gi"),
    ("-.000000000001Ki", "-2n"),
]


@pytest.mark.parametrize(("text", "canonical"), CANONICAL)
def test_canonical_form_matches_kubernetes(text: str, canonical: str) -> None:
    q = Quantity(text)
    assert q.canonical() == canonical
    assert str(q) == canonical
    assert q.text == text
    again = Quantity(canonical)
    assert again == q
    assert again.canonical() == canonical


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        ("1Ki", QuantityFormat.BINARY_SI),
        ("0.5Ki", QuantityFormat.BINARY_SI),
        (".000000000001Ki", QuantityFormat.DECIMAL_SI),
        ("1k", QuantityFormat.DECIMAL_SI),
        ("1", QuantityFormat.DECIMAL_SI),
        ("1e3", QuantityFormat.DECIMAL_EXPONENT),
        ("1E-3", QuantityFormat.DECIMAL_EXPONENT),
    ],
)
def test_suffix_picks_the_format(text: str, fmt: QuantityFormat) -> None:
    assert Quantity(text).format is fmt


@pytest.mark.parametrize(
    "text",
    [
        "",
        " 1",
        "1 ",
        "1.1.M",
        "1+1.0M",
        "0.1mi",
        "0.1am",
        "aoeu",
        ".5i",
        "1i",
        "-3.01i",
        "-3.01e-",
        "1e",
        "1Kb",
        "1KI",
        "--1",
        "1e99999",
        "Gi",
    ],
)
def test_parse_errors(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_non_string_inputs() -> None:
    assert Quantity(5) == Quantity("5")
    with pytest.raises(QuantityError):
        Quantity(True)
    with pytest.raises(QuantityError):
        Quantity(1.5)  # type: ignore[arg-type]


def test_comparisons_and_hash_ignore_spelling() -> None:
    assert Quantity("1Gi") == Quantity("1024Mi")
    assert hash(Quantity("1Gi")) == hash(Quantity("1073741824"))
    assert Quantity("100m") > Quantity("50m")
    assert Quantity("10000T") > Quantity("100Gi")
    assert Quantity("1k") == 1000
    assert Quantity("1.5") == Decimal("1.5")
    assert sorted([Quantity("2"), Quantity("1500m"), Quantity("1")]) == [
        Quantity("1"),
        Quantity("1500m"),
        Quantity("2"),
    ]
    assert Quantity("1") != "1"


def test_arithmetic_keeps_the_receivers_format() -> None:
    assert str(Quantity("1Gi") + Quantity("1Gi")) == "2Gi"
    assert str(Quantity("100m") + Quantity("0")) == "100m"
    assert str(Quantity("0") + Quantity("1Gi")) == "1Gi"
    assert str(Quantity("1Gi") - Quantity("0")) == "1Gi"
    assert str(Quantity("0") - Quantity("1Gi")) == "-1Gi"
    assert str(-Quantity("9010m")) == "-9010m"
    assert str(Quantity("1") - Quantity("1")) == "0"


def test_integer_and_milli_values() -> None:
    assert Quantity("2k").as_int() == 2000
    with pytest.raises(QuantityError):
        Quantity("1500m").as_int()
    assert Quantity("1.5").milli_value() == 1500
    assert Quantity("1n").milli_value() == 1
    assert Quantity("1Gi").is_integer()
    assert Quantity("-3").sign() == -1
    assert Quantity("0").sign() == 0


def test_from_decimal_spells_canonically() -> None:
    q = Quantity.from_decimal(Decimal(2) ** 30, QuantityFormat.BINARY_SI)
    assert q.text == "1Gi"
    assert Quantity.from_decimal(Decimal("0.0000000001")).canonical() == "1n"


class _Holder(BaseModel):
    q: Quantity
    qs: list[Quantity] = []


def test_pydantic_keeps_the_original_spelling() -> None:
    for raw in ["1024Mi", 700, 0.5, " 1 "]:
        holder = _Holder.model_validate({"q": raw})
        assert holder.model_dump(mode="json")["q"] == raw
    assert _Holder.model_validate({"q": 0.5}).q == Quantity("500m")
    assert _Holder.model_validate({"q": " 1 "}).q == Quantity("1")
    assert _Holder(q=Quantity("1")).q == 1


@pytest.mark.parametrize("raw", ["1x", True, None, [1], {"a": 1}, float("nan")])
def test_pydantic_rejects_non_quantities(raw: object) -> None:
    with pytest.raises(ValidationError):
        _Holder.model_validate({"q": raw})


# --- properties ----------------------------------------------------------------------------

_SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


@st.composite
def quantity_texts(draw: st.DrawFn) -> str:
    sign = draw(st.sampled_from(["", "-", "+"]))
    whole = draw(st.integers(min_value=0, max_value=10**12))
    frac = draw(st.one_of(st.just(""), st.integers(min_value=0, max_value=10**6).map(str)))
    number = f"{whole}.{frac}" if frac else str(whole)
    suffix = draw(
        st.one_of(
            st.sampled_from(_SUFFIXES),
            st.integers(min_value=-12, max_value=24).map(lambda e: f"e{e}"),
        )
    )
    return f"{sign}{number}{suffix}"


quantities = quantity_texts().map(Quantity)
_EXACT = decimal.Context(prec=200)


@settings(max_examples=300, deadline=None)
@given(quantities)
def test_parse_of_canonical_is_the_same_quantity(q: Quantity) -> None:
    canonical = q.canonical()
    again = Quantity(canonical)
    assert again == q
    assert again.canonical() == canonical


@settings(max_examples=300, deadline=None)
@given(quantities)
def test_value_is_rounded_to_nano_units(q: Quantity) -> None:
    nanos = _EXACT.multiply(q.value, Decimal(10**9))
    assert nanos == nanos.to_integral_value()


@settings(max_examples=200, deadline=None)
@given(quantities, quantities)
def test_ordering_matches_decimal(a: Quantity, b: Quantity) -> None:
    assert (a < b) == (a.value < b.value)
    assert (a == b) == (a.value == b.value)
    assert (a <= b) == (a.value <= b.value)


@settings(max_examples=200, deadline=None)
@given(quantities, quantities)
def test_add_and_sub_are_exact(a: Quantity, b: Quantity) -> None:
    total = a + b
    assert total.value == _EXACT.add(a.value, b.value)
    assert (total - b).value == a.value
    assert (a - b) + b == a
    if total.format is not QuantityFormat.BINARY_SI or abs(total.value) <= 2**63 - 1:
        # Binary quantities beyond the largest int64 are capped when parsed, as upstream.
        assert Quantity(total.canonical()) == total


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=-(10**15), max_value=10**15), st.sampled_from(list(QuantityFormat)))
def test_integers_round_trip_in_every_format(value: int, fmt: QuantityFormat) -> None:
    q = Quantity.from_decimal(value, fmt)
    assert Quantity(q.canonical()).value == value
