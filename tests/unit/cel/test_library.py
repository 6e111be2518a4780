"""The library registry: one typed declaration per overload is what the checker resolves,
the cost model names and the planner calls."""

from __future__ import annotations

import zoneinfo
from collections.abc import Iterator
from typing import Any

import pytest

from operators.cel import (
    KUBERNETES_MINORS,
    CELEnvironment,
    InvalidSelectorError,
    SelectorEvaluationError,
    install_zone_loader,
)
from operators.cel import types as t
from operators.cel.compiler import compile_program
from operators.cel.library import (
    FUNCTIONS,
    REGISTRY,
    Registry,
    functions_of,
    runtime_matches,
    timestamps,
)
from operators.cel.library._registry import parse_signature
from operators.cel.runtime import CelError, Uint

from .conftest import GPU, GPU_KEY


def _holds(expression: str) -> bool:
    program = compile_program(expression)
    value, _ = program.run({})
    return value is True


def _fails(expression: str) -> str:
    program = compile_program(expression)
    with pytest.raises(CelError) as raised:
        program.run({})
    return raised.value.message


# --- the real registry ---------------------------------------------------------------------------


@pytest.mark.parametrize("kubernetes", KUBERNETES_MINORS)
def test_every_function_has_uniquely_named_overloads_with_types(kubernetes: str) -> None:
    """In each minor's table; an id may be declared again for other minors (FUNCTIONS)."""
    for name, fn in functions_of(kubernetes).items():
        assert fn.overloads, name
        ids = [o.id for o in fn.overloads]
        assert len(ids) == len(set(ids)), f"{name}: an overload id twice"
        for overload in fn.overloads:
            assert overload.impl is not None or fn.singleton is not None, overload.id
            if overload.member:
                assert overload.params, f"{overload.id}: a method without a receiver"


def test_the_checker_rejects_a_call_no_signature_takes() -> None:
    for call in ("size(1, 2) == 1", '"a".startsWith() == true', 'quantity(1) == quantity("1")'):
        with pytest.raises(InvalidSelectorError, match="found no matching overload"):
            compile_program(call)


def test_names_shared_by_a_function_and_a_method() -> None:
    assert _holds('ip("10.0.0.1") == cidr("10.0.0.1/8").ip()')
    assert _holds('matches("abc", "^a") && "abc".matches("c$")')
    assert _holds('size("ab") == 2 && "ab".size() == 2')


def test_overloads_by_receiver_resolve_by_type() -> None:
    assert _holds('"abcb".indexOf("b", 2) == 3 && [1, 2].indexOf(2) == 1')
    assert _holds('quantity("1Gi").compareTo(quantity("1Mi")) == 1')
    assert _holds('semver("1.0.0").isLessThan(semver("1.0.1"))')
    with pytest.raises(InvalidSelectorError, match="found no matching overload"):
        compile_program('quantity("1").compareTo(semver("1.0.0")) == 0')
    # With a dyn receiver the choice is made at runtime, by the declared types.
    assert _fails('dyn(quantity("1")).compareTo(dyn(semver("1.0.0"))) == 0').startswith(
        "no such overload"
    )
    assert _holds('dyn(semver("1.0.0")).compareTo(dyn(semver("1.0.0"))) == 0')


def test_signatures_parse_into_cel_types() -> None:
    assert parse_signature("x (list(A), int) -> A") == (
        "x",
        False,
        (t.list_of(t.param("A")), t.INT),
        t.param("A"),
    )
    assert parse_signature("y kubernetes.Quantity.() -> optional(map(string, int))") == (
        "y",
        True,
        (t.QUANTITY,),
        t.optional_of(t.map_of(t.STRING, t.INT)),
    )
    with pytest.raises(ValueError, match="unknown type"):
        parse_signature("z (integer) -> bool")


def test_runtime_guards_read_the_declared_types() -> None:
    assert runtime_matches(t.INT, 1)
    assert not runtime_matches(t.INT, True)
    assert not runtime_matches(t.INT, Uint(1))
    assert runtime_matches(t.list_of(t.STRING), [])
    assert runtime_matches(t.list_of(t.STRING), ["a", 1])  # cel-go looks at the first only
    assert not runtime_matches(t.list_of(t.STRING), [1, "a"])
    assert runtime_matches(t.DYN, object())


# --- a registry of its own -----------------------------------------------------------------------


def test_one_declaration_gives_the_overloads_their_implementation() -> None:
    registry = Registry()

    @registry.function("twice", "twice_int (int) -> int", "twice_int_int (int, int) -> int")
    @registry.method("twice", "int_twice int.() -> int")
    def twice(value: Any, times: Any = 2) -> int:
        if value < 0:
            raise CelError("negative")
        return int(value * times)

    fn = registry.functions["twice"]
    assert [o.id for o in fn.overloads] == ["int_twice", "twice_int", "twice_int_int"]
    assert [o.member for o in fn.overloads] == [True, False, False]
    assert all(o.impl is twice for o in fn.overloads)
    assert fn.singleton is None
    assert fn.overload("twice_int").params == (t.INT,)


def test_a_minor_declares_its_own_overloads() -> None:
    """An overload bounded by ``since``/``until`` is in those minors' tables only; one id may
    be declared again for other minors, never twice for one."""
    registry = Registry()

    def old(value: Any) -> Any:
        return value

    def new(value: Any) -> Any:
        return value

    registry.function("f", "f_int (int) -> int", until="1.36")(old)
    registry.function("f", "f_int (int) -> int", since="1.37")(new)
    registry.function("g", "g_int (int) -> int", since="1.37")(new)
    assert registry.table("1.36")["f"].overloads[0].impl is old
    assert registry.table("1.37")["f"].overloads[0].impl is new
    assert "g" not in registry.table("1.36")
    with pytest.raises(ValueError, match="declared twice"):
        registry.function("f", "f_int (int) -> int")(old)
    with pytest.raises(ValueError, match="no minor kopf-dra speaks"):
        registry.function("h", "h_int (int) -> int", since="1.35")


def test_the_minors_functions_part_where_their_releases_do() -> None:
    def ids(kubernetes: str, name: str) -> list[str]:
        return [o.id for o in functions_of(kubernetes)[name].overloads]

    assert ids("1.36", "includes") == ["dra_includes_dyn_dyn"]
    assert ids("1.37", "includes") == ["list_includes_dyn_dyn"]
    assert "int64_to_duration" in ids("1.36", "duration")
    assert "int64_to_duration" not in ids("1.37", "duration")


def test_a_declaration_is_checked() -> None:
    registry = Registry()

    def once(value: Any) -> Any:
        return value

    registry.function("once", "once_bool (bool) -> bool")(once)
    with pytest.raises(ValueError, match="declared twice"):
        registry.function("once", "once_bool (bool) -> bool")(once)
    with pytest.raises(ValueError, match="must have a receiver"):
        registry.method("bad", "bad (bool) -> bool")
    with pytest.raises(ValueError, match="must have no receiver"):
        registry.function("bad", "bad bool.() -> bool")
    with pytest.raises(ValueError, match="signature without a result"):
        registry.function("bad", "bad (bool)")


# --- the global registry, end to end -----------------------------------------------------------


@pytest.fixture
def scratch() -> Iterator[Registry]:
    """The process-wide registry, with anything added by the test removed afterwards."""
    saved = REGISTRY.snapshot()
    yield REGISTRY
    REGISTRY.restore(saved)


def test_a_function_declared_once_compiles_and_evaluates(scratch: Registry) -> None:
    @scratch.function("testOnlyTwice", "test_only_twice (int) -> int")
    def twice(value: Any) -> int:
        return int(value * 2)

    assert _holds("testOnlyTwice(21) == 42")
    with pytest.raises(InvalidSelectorError, match="found no matching overload"):
        compile_program("testOnlyTwice(1, 2) == 2")
    with pytest.raises(InvalidSelectorError, match="must evaluate to bool"):
        compile_program("testOnlyTwice(1)")
    with pytest.raises(InvalidSelectorError, match="found no matching overload"):
        compile_program("[1].testOnlyTwice() == 2")
    # A dyn argument of the wrong type meets the declared type at runtime.
    env = CELEnvironment()
    with pytest.raises(SelectorEvaluationError, match="no such overload"):
        env.matches('testOnlyTwice(dyn("a")) == 2', GPU_KEY, GPU)


def test_the_scratch_declaration_is_gone_afterwards() -> None:
    assert "testOnlyTwice" not in FUNCTIONS
    with pytest.raises(InvalidSelectorError, match="undeclared reference"):
        compile_program("testOnlyTwice(21) == 42")


def test_iana_zone_names_come_from_the_loader_the_process_installed() -> None:
    """The core reads no tz database: names resolve through the loader the CLI installs
    (zoneinfo, as Go's time.LoadLocation reads the system's), offsets and UTC always."""
    expression = 'timestamp("2020-01-01T00:00:00Z").getHours("America/New_York") == 19'
    saved = list(timestamps._PROCESS_ZONES)
    try:
        timestamps._PROCESS_ZONES.clear()
        assert "unknown time zone America/New_York" in _fails(expression)
        assert _holds('timestamp("2020-01-01T00:00:00Z").getHours("-05:00") == 19')
        install_zone_loader(zoneinfo.ZoneInfo)
        assert _holds(expression)
        assert "unknown time zone Mars/Olympus" in _fails(
            'timestamp("2020-01-01T00:00:00Z").getHours("Mars/Olympus") == 0'
        )
    finally:
        timestamps._PROCESS_ZONES[:] = saved
