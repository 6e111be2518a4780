"""constraints.derived_attribute: a derived attribute's CEL value as a DeviceAttribute, as
k8s.io/dynamic-resource-allocation v0.37.2's valToDeviceAttribute (cel/compile.go) makes it.

The values come from CEL itself (compile_derived on a device), as the allocator gets them; dyn
lets the values no stored expression may type-check as (uint, double, null, mixed lists) through.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from operators.allocator.constraints import derived_attribute
from operators.api.resource import Device, DeviceAttribute
from operators.cel import CELEnvironment, build_device_view

DRIVER = "driver-a"
DEVICE = Device.load(
    {
        "name": "device-1",
        "attributes": {
            "numa": {"int": 1},
            "model": {"string": "a100"},
            "mig": {"bool": True},
            "driverVersion": {"version": "1.2.3"},
            "ports": {"ints": [80, 443]},
        },
    }
)
A = f'device.attributes["{DRIVER}"]'


def _cel(expression: str) -> Any:
    return CELEnvironment().compile_derived(expression).value(build_device_view(DRIVER, DEVICE))


def _convert(expression: str) -> DeviceAttribute:
    return derived_attribute(_cel(expression))


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("true", {"bool": True}),
        (f"{A}.mig", {"bool": True}),
        ("false", {"bool": False}),
        ("42", {"int": 42}),
        (f"{A}.numa", {"int": 1}),
        ("-1", {"int": -1}),
        ('"numa-1"', {"string": "numa-1"}),
        (f"{A}.model", {"string": "a100"}),
        ('""', {"string": ""}),
        ('semver("1.2.3")', {"version": "1.2.3"}),
        (f"{A}.driverVersion", {"version": "1.2.3"}),
        ("[true, false]", {"bools": [True, False]}),
        ("[1, 2, 1]", {"ints": [1, 2, 1]}),
        (f"{A}.ports", {"ints": [80, 443]}),
        ('["a", "b"]', {"strings": ["a", "b"]}),
        ('[semver("1.0.0"), semver("2.1.0")]', {"versions": ["1.0.0", "2.1.0"]}),
        ("[dyn(1), dyn(2)]", {"ints": [1, 2]}),
    ],
)
def test_scalars_and_lists_of_one_type_convert(expression: str, expected: dict[str, Any]) -> None:
    assert _convert(expression).dump() == expected


def test_a_bool_is_not_an_int() -> None:
    attr = _convert("true")
    assert attr.bool_ is True
    assert attr.int_ is None


@pytest.mark.parametrize("expression", ["[]", "dyn([])", '[1, 2].filter(x, x > 5).map(x, "a")'])
def test_an_empty_list_is_an_empty_string_list(expression: str) -> None:
    attr = _convert(expression)
    assert attr.strings == []
    assert attr.dump() == {"strings": []}
    assert attr.ints is None
    assert attr.bools is None
    assert attr.versions is None
    assert attr.string is None


@pytest.mark.parametrize(
    "expression",
    [
        "dyn(1u)",
        "dyn(1.5)",
        "dyn(null)",
        "[dyn(1u)]",
        "[dyn(1.5)]",
        "[dyn(null)]",
        '[dyn(1), dyn("a")]',
        "[dyn(true), dyn(1)]",
        '[dyn("a"), dyn(semver("1.0.0"))]',
        '[dyn(semver("1.0.0")), dyn("a")]',
        "[dyn(1), dyn(1u)]",
    ],
)
def test_anything_else_is_a_value_error(expression: str) -> None:
    with pytest.raises(ValueError, match=r"^(unsupported|expected list element)"):
        _convert(expression)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        # fmt's %T of the value cel-go hands over (ref.Val.Value()).
        ("dyn(1u)", "unsupported CEL return type: uint64"),
        ("dyn(1.5)", "unsupported CEL return type: float64"),
        ("dyn(null)", "unsupported CEL return type: structpb.NullValue"),
        ("[dyn(1u)]", "unsupported list element type: uint64"),
        ("[dyn(2.5)]", "unsupported list element type: float64"),
        ('[dyn(1), dyn("a")]', "expected list element at index 1 to be int, got string"),
        ("[dyn(true), dyn(1)]", "expected list element at index 1 to be bool, got int64"),
        ("[dyn(1), dyn(1u)]", "expected list element at index 1 to be int, got uint64"),
        (
            '[dyn("a"), dyn(semver("1.0.0"))]',
            "expected list element at index 1 to be string, got semver.Version",
        ),
        (
            '[dyn(semver("1.0.0")), dyn("a")]',
            "expected list element at index 1 to be semver, got string",
        ),
    ],
)
def test_value_errors_use_upstreams_words(expression: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        _convert(expression)


@pytest.mark.parametrize("expression", ["dyn(optional.of([1]))", f"dyn({A}.?ports)"])
def test_a_list_inside_an_optional_is_refused_as_upstream_refuses_it(expression: str) -> None:
    """Upstream reads a list from the CEL value, and an optional hands over its content's Go
    value instead: the oracle's ``unsupported CEL return type``. A scalar inside one converts."""
    with pytest.raises(ValueError, match="unsupported CEL return type"):
        _convert(expression)
    assert _convert(f"dyn({A}.?numa)").dump() == {"int": 1}
