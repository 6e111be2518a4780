"""Properties: CEL quantity and semver semantics agree with the Python models behind them."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from operators.api.quantity import Quantity
from operators.cel import CELEnvironment, DeviceView, SliceKey, build_device_view

from .conftest import attribute, device

ENV = CELEnvironment()  # compiled once for all examples; evaluation is what is under test
C = 'device.capacity["q.example.com"]'
QUANTITY_SELECTORS = {
    "less": ENV.compile(f"{C}.a.compareTo({C}.b) == -1"),
    "equal": ENV.compile(f"{C}.a.compareTo({C}.b) == 0"),
    "greater": ENV.compile(f"{C}.a.compareTo({C}.b) == 1"),
    "eq": ENV.compile(f"{C}.a == {C}.b"),
    "is_less": ENV.compile(f"{C}.a.isLessThan({C}.b)"),
    "is_greater": ENV.compile(f"{C}.a.isGreaterThan({C}.b)"),
    "sum": ENV.compile(f"{C}.a.add({C}.b) == {C}.sum"),
    "difference": ENV.compile(f"{C}.a.sub({C}.b) == {C}.difference"),
    "sign": ENV.compile(f'sign({C}.a) == {C}.a.compareTo(quantity("0"))'),
}

SUFFIXES = ["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti", "n", "u", "e3", "E-2"]


@st.composite
def quantities(draw: st.DrawFn) -> str:
    sign = draw(st.sampled_from(["", "-", "+"]))
    whole = draw(st.integers(min_value=0, max_value=10**6))
    fraction = draw(st.one_of(st.just(""), st.integers(0, 999).map(lambda f: f".{f}")))
    return f"{sign}{whole}{fraction}{draw(st.sampled_from(SUFFIXES))}"


def _view(a: Quantity, b: Quantity) -> DeviceView:
    dev = device(
        "q",
        capacity={
            "a": a.text,
            "b": b.text,
            "sum": (a + b).canonical(),
            "difference": (a - b).canonical(),
        },
    )
    return build_device_view("q.example.com", dev)


@settings(max_examples=300, deadline=None)
@given(quantities(), quantities())
def test_quantity_comparisons_agree_with_model(a_text: str, b_text: str) -> None:
    a, b = Quantity(a_text), Quantity(b_text)
    view = _view(a, b)
    got = {name: selector.evaluate(view) for name, selector in QUANTITY_SELECTORS.items()}
    assert got == {
        "less": a < b,
        "equal": a == b,
        "greater": a > b,
        "eq": a == b,
        "is_less": a < b,
        "is_greater": a > b,
        "sum": True,
        "difference": True,
        "sign": True,
    }


@settings(max_examples=200, deadline=None)
@given(quantities())
def test_quantity_equality_ignores_spelling(text: str) -> None:
    q = Quantity(text)
    canonical = q.canonical()
    selector = ENV.compile(f'quantity("{text}") == quantity("{canonical}")')
    assert selector.evaluate(build_device_view("d", device("x"))) is True
    as_integer = ENV.compile(f'quantity("{text}").isInteger()')
    # Kubernetes answers from the int64 form a quantity was parsed into: a whole value spelled
    # with sub-unit digits ("1000m") is not an integer there, so only the implication holds.
    if as_integer.evaluate(build_device_view("d", device("x"))):
        assert q.is_integer()
        assert -(2**63) <= q.value < 2**63


VERSION_SELECTOR = ENV.compile(
    'device.attributes["v.example.com"].a.compareTo(device.attributes["v.example.com"].b) == '
    'device.attributes["v.example.com"].expected'
)


@st.composite
def versions(draw: st.DrawFn) -> tuple[str, tuple[Any, ...]]:
    core = draw(st.tuples(*(st.integers(0, 30) for _ in range(3))))
    pre = draw(
        st.lists(
            st.one_of(st.integers(0, 20), st.sampled_from(["alpha", "beta", "rc"])), max_size=2
        )
    )
    text = ".".join(map(str, core)) + ("-" + ".".join(map(str, pre)) if pre else "")
    # semver precedence: no pre-release ranks above any pre-release of the same core;
    # numeric identifiers rank below alphanumeric ones.
    key = tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in pre)
    return text, (*core, 0 if pre else 1, key)


@settings(max_examples=300, deadline=None)
@given(versions(), versions())
def test_semver_order_agrees_with_precedence(
    a: tuple[str, tuple[Any, ...]], b: tuple[str, tuple[Any, ...]]
) -> None:
    (a_text, a_key), (b_text, b_key) = a, b
    expected = (a_key > b_key) - (a_key < b_key)
    dev = device(
        "v",
        {
            "a": attribute(a_text, version=True),
            "b": attribute(b_text, version=True),
            "expected": attribute(expected),
        },
    )
    assert VERSION_SELECTOR.evaluate(build_device_view("v.example.com", dev)) is True


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=20), st.integers(-(2**40), 2**40)
)
def test_cached_results_equal_fresh_evaluation(values: list[int], threshold: int) -> None:
    env = CELEnvironment()
    expression = f'device.attributes["i.example.com"].x >= {threshold}'
    key = SliceKey("s", 1, "i.example.com")
    devices = [device(f"d{i}", {"x": attribute(v)}) for i, v in enumerate(values)]
    first = [env.matches(expression, key, d) for d in devices]
    again = [env.matches(expression, key, d) for d in devices]
    assert first == again == [v >= threshold for v in values]
    assert env.stats.evaluations == len(values)
    assert env.stats.result_hits == len(values)


def test_quantity_strategy_covers_fractions_and_suffixes() -> None:
    assert Quantity("1.5Gi").value == Decimal(3 * 2**29)
