"""Derived attributes (1.37 alpha, DRADerivedAttributes): compiling and evaluating their CEL as
k8s.io/dynamic-resource-allocation v0.37.2's cel/compile.go does (stored expressions: the output
must be a scalar, or a list of scalars, of bool, int, string or semver)."""

from __future__ import annotations

from typing import Any

import pytest

from operators.cel import (
    CELEnvironment,
    CompiledDerived,
    InvalidSelectorError,
    SelectorEvaluationError,
    SemverValue,
    build_device_view,
)

from .conftest import GPU, GPU_DRIVER

G = f'device.attributes["{GPU_DRIVER}"]'
OUTPUT_RULE = (
    "must evaluate to a primitive scalar (string, integer, boolean, semver) or a list of these "
    "scalars, not {}"
)


def _value(env: CELEnvironment, expression: str) -> Any:
    return env.compile_derived(expression).value(build_device_view(GPU_DRIVER, GPU))


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("true", True),
        (f"{G}.mig", True),
        ("1 + 2", 3),
        (f"{G}.memoryGB", 80),
        ('"numa-" + string(1)', "numa-1"),
        (f"{G}.model", "a100"),
        (f"{G}.ports", [8080, 9090]),
        (f"{G}.tags", ["fast", "nvlink"]),
        (f"{G}.flags", [True]),
        ("[]", []),
    ],
)
def test_a_derived_attribute_evaluates_to_its_cel_value(
    env: CELEnvironment, expression: str, expected: object
) -> None:
    value = _value(env, expression)
    assert value == expected
    assert type(value) is type(expected)


def test_semver_values_stay_semver(env: CELEnvironment) -> None:
    version = _value(env, f"{G}.driverVersion")
    assert isinstance(version, SemverValue)
    assert version.text == "12.4.0"
    versions = _value(env, f"{G}.compat")
    assert [v.text for v in versions] == ["1.0.0", "2.1.0"]
    assert _value(env, 'semver("1.2.3")').text == "1.2.3"


def test_compiled_derived_is_cached_and_keeps_its_expression(env: CELEnvironment) -> None:
    compiled = env.compile_derived(f"{G}.model")
    assert isinstance(compiled, CompiledDerived)
    assert compiled.expression == f"{G}.model"
    assert env.compile_derived(f"{G}.model") is compiled


@pytest.mark.parametrize(
    ("expression", "shown"),
    [
        ("1.5", "double"),
        ("1u", "uint"),
        ("null", "null"),
        ("[1u]", "list(uint)"),
        ("device.capacity", "map(string, map(string, kubernetes.Quantity))"),
    ],
)
def test_an_output_type_outside_the_rule_is_a_compile_error(
    env: CELEnvironment, expression: str, shown: str
) -> None:
    with pytest.raises(InvalidSelectorError) as raised:
        env.compile_derived(expression)
    assert OUTPUT_RULE.format(shown) in str(raised.value)


def test_a_compile_error_is_raised_again_from_the_cache(env: CELEnvironment) -> None:
    for _ in range(2):
        with pytest.raises(InvalidSelectorError, match="not double"):
            env.compile_derived("2.0 * 3.0")


def test_a_syntax_error_is_a_compile_error(env: CELEnvironment) -> None:
    with pytest.raises(InvalidSelectorError):
        env.compile_derived("device.attributes[")


def test_dyn_passes_the_compile_check(env: CELEnvironment) -> None:
    """dyn (and lists of dyn) are allowed output types: what they hold is checked at runtime,
    when the value is turned into a device attribute."""
    assert _value(env, "dyn(1.5)") == 1.5
    assert _value(env, '[dyn(1), dyn("a")]') == [1, "a"]


def test_a_missing_attribute_is_an_evaluation_error(env: CELEnvironment) -> None:
    with pytest.raises(SelectorEvaluationError, match="no such key"):
        _value(env, f"{G}.missingAttr")
