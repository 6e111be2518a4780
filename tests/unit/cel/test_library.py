"""The library registry is the single source of the compiler's and the transpiler's tables."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from celpy import celtypes
from celpy.evaluation import CELEvalError

from operators.cel import InvalidSelectorError, library
from operators.cel.compiler import Scope, compile_program
from operators.cel.library import REGISTRY, Registry
from operators.cel.library._base import fail

S = celtypes.StringType
I = celtypes.IntType  # noqa: E741


def _run(expression: str) -> Any:
    return compile_program(expression).run(Scope({"device": celtypes.MapType()}, [1000]))


def _holds(expression: str) -> bool:
    result = _run(expression)
    return isinstance(result, celtypes.BoolType) and bool(result)


def _declared(kind: str) -> dict[str, list[library.Declaration]]:
    found: dict[str, list[library.Declaration]] = {}
    for declaration in REGISTRY.declarations:
        if declaration.kind == kind:
            found.setdefault(declaration.name, []).append(declaration)
    return found


# --- the real registry: every table follows the declarations ----------------------------------


def test_every_global_function_is_declared_once_with_its_arity() -> None:
    functions = _declared("function")
    assert set(library.GLOBAL_FUNCTIONS) == set(library.ARITY) == set(functions)
    for name, (declaration, *others) in functions.items():
        assert not others, f"{name} declared twice"
        assert library.ARITY[name] == declaration.arity
        implementation = library.GLOBAL_FUNCTIONS[name]
        assert getattr(implementation, "__wrapped__", implementation) is declaration.implementation


def test_every_method_takes_the_arities_of_its_overloads() -> None:
    methods = _declared("method")
    assert set(library.METHODS) == set(library.METHOD_ARITY) == set(methods)
    for name, overloads in methods.items():
        assert library.METHOD_ARITY[name] == frozenset().union(*(d.arity for d in overloads))
        receivers = [d.receiver for d in overloads]
        assert len(set(receivers)) == len(receivers), f"{name} declared twice for one receiver"


def test_non_bool_results_follow_the_declared_result_types() -> None:
    results: dict[str, set[str]] = {}
    for declaration in REGISTRY.declarations:
        results.setdefault(declaration.name, set()).update(declaration.returns)
    expected = {name for name, types in results.items() if not types & {"bool", "dyn"}}
    assert expected == library.NON_BOOL_RESULTS
    assert {"quantity", "compareTo", "sum", "strings.quote", "ip"} <= expected
    assert not {"matches", "isGreaterThan", "min", "includes"} & expected


def test_namespaces_come_from_the_namespaced_functions() -> None:
    assert {"sets", "strings", "ip"} <= library.NAMESPACES
    assert {n.split(".")[0] for n in library.GLOBAL_FUNCTIONS if "." in n} <= library.NAMESPACES


@pytest.mark.parametrize(
    ("table", "call"),
    [(library.ARITY, "{name}({args})"), (library.METHOD_ARITY, '"x".{name}({args})')],
    ids=["functions", "methods"],
)
def test_the_compiler_checks_every_declared_arity(
    table: dict[str, frozenset[int]], call: str
) -> None:
    """A call with one argument too many is rejected with the declared counts."""
    for name, allowed in table.items():
        args = ", ".join(['"a"'] * (max(allowed) + 1))
        counts = " or ".join(str(n) for n in sorted(allowed))
        with pytest.raises(InvalidSelectorError, match=rf"takes {counts} argument\(s\), got"):
            compile_program(call.format(name=name, args=args) + " == true")


def test_names_shared_by_a_function_and_a_method_keep_one_body_each() -> None:
    assert library.GLOBAL_FUNCTIONS["matches"] is library.METHODS["matches"]
    assert library.GLOBAL_FUNCTIONS["size"] is library.METHODS["size"]
    assert library.GLOBAL_FUNCTIONS["ip"] is not library.METHODS["ip"]  # ip("...") vs cidr.ip()
    assert _holds('ip("10.0.0.1") == cidr("10.0.0.1/8").ip()')
    assert _holds('matches("abc", "^a") && "abc".matches("c$")')
    assert _holds('size("ab") == 2 && "ab".size() == 2')


def test_a_method_overloaded_by_receiver_dispatches_by_receiver() -> None:
    assert _holds('"abcb".indexOf("b", 2) == 3 && ["a", "b"].indexOf("b") == 1')
    assert _holds('"abcb".lastIndexOf("b") == 3 && ["b", "b"].lastIndexOf("b") == 1')
    assert _holds('quantity("1Gi").compareTo(quantity("1Mi")) == 1')
    assert _holds('semver("1.0.0").isLessThan(semver("1.0.1"))')
    mixed = _run('quantity("1").compareTo(semver("1.0.0")) == 0')
    assert isinstance(mixed, CELEvalError)
    assert mixed.args[0] == "no such overload: kubernetes.Quantity.compareTo(kubernetes.Semver)"
    other = _run('"a".isGreaterThan("b")')
    assert isinstance(other, CELEvalError)
    assert other.args[0] == "no such overload: string.isGreaterThan(string)"
    offset = _run('["a"].indexOf("a", 0) == 0')
    assert isinstance(offset, CELEvalError)
    assert offset.args[0] == "no such overload: list.indexOf(_, int)"


# --- a registry of its own: what one declaration gives -----------------------------------------


def test_one_declaration_fills_every_table_and_is_callable_as_declared() -> None:
    registry = Registry()

    @registry.function("twice", arity=(1, 2), returns="int", fold=True)
    @registry.method("twice", arity=(0, 1), returns="int")
    def twice(value: Any, times: Any = 2) -> celtypes.IntType:
        if value < 0:
            raise fail("negative")
        return I(value * times)

    assert registry.functions["twice"] is registry.methods["twice"] is twice
    assert registry.arity == {"twice": frozenset({1, 2})}
    assert registry.method_arity == {"twice": frozenset({0, 1})}
    assert registry.non_bool == {"twice"}
    assert registry.foldable == {"twice"}
    assert [d.kind for d in registry.declarations] == ["method", "function"]
    assert twice(I(3)) == I(6)
    assert twice(I(3), I(3)) == I(9)
    error = CELEvalError("earlier", TypeError, ())
    assert twice(error) is error  # error arguments propagate
    failed = twice(I(-1))
    assert isinstance(failed, CELEvalError)
    assert failed.args[0] == "negative"
    mistyped = twice(S("a"))
    assert isinstance(mistyped, CELEvalError)
    assert mistyped.args[0] == "no such overload: twice(string)"


def test_a_declaration_is_checked() -> None:
    registry = Registry()

    @registry.function("once", arity=(1,), returns="bool")
    def once(value: Any) -> Any:
        return value

    with pytest.raises(ValueError, match="declared twice"):
        registry.function("once", arity=(1,), returns="bool")(once)
    with pytest.raises(ValueError, match="unknown result type"):
        registry.method("bad", arity=(0,), returns="boolean")(once)
    with pytest.raises(ValueError, match="no argument count"):
        registry.method("bad", arity=(), returns="bool")(once)


def test_overloads_by_receiver_become_one_method() -> None:
    registry = Registry()

    @registry.method("describe", arity=(0,), returns="string", receiver=list)
    def describe_list(items: Any) -> celtypes.StringType:
        return S(f"{len(items)} items")

    @registry.method("describe", arity=(0, 1), returns="string")
    def describe(value: Any, suffix: Any = "") -> celtypes.StringType:
        return S(f"{value}{suffix}")

    with pytest.raises(ValueError, match="declared twice"):
        registry.method("describe", arity=(0,), returns="string", receiver=list)(describe)
    dispatch = registry.methods["describe"]
    assert registry.method_arity["describe"] == frozenset({0, 1})
    assert dispatch(celtypes.ListType([I(1)])) == S("1 items")
    assert dispatch(S("x"), S("!")) == S("x!")

    typed = Registry()
    typed.method("half", arity=(0,), returns="int", receiver=int)(lambda n: I(n // 2))
    assert typed.methods["half"](I(4)) == I(2)
    missing = typed.methods["half"](S("4"))
    assert isinstance(missing, CELEvalError)
    assert missing.args[0] == "no such overload: string.half()"
    typed.method("half", arity=(0,), returns="int", receiver=float)(lambda n: n / 2)
    with pytest.raises(ValueError, match="more than two receiver types"):
        typed.method("half", arity=(0,), returns="int", receiver=str)(lambda n: n)


# --- the global registry, end to end -----------------------------------------------------------


@pytest.fixture
def global_registry() -> Iterator[Registry]:
    """The process-wide registry, put back as it was afterwards."""
    saved = copy.deepcopy(vars(REGISTRY))
    yield REGISTRY
    for name, value in saved.items():
        current = getattr(REGISTRY, name)
        if isinstance(current, list):
            current[:] = value
        else:
            current.clear()
            current.update(value)


def test_a_function_declared_once_compiles_and_evaluates(global_registry: Registry) -> None:
    @library.function("testOnlyTwice", arity=(1,), returns="int")
    def twice(value: Any) -> celtypes.IntType:
        return I(value * 2)

    assert _holds("testOnlyTwice(21) == 42")
    with pytest.raises(InvalidSelectorError, match=r"takes 1 argument\(s\), got 2"):
        compile_program("testOnlyTwice(1, 2) == 2")
    with pytest.raises(InvalidSelectorError, match="yields the result of testOnlyTwice"):
        compile_program("testOnlyTwice(1)")
    with pytest.raises(InvalidSelectorError, match="undeclared reference to method"):
        compile_program("[1].testOnlyTwice() == 2")


def test_the_scratch_declaration_is_gone_afterwards() -> None:
    assert "testOnlyTwice" not in library.GLOBAL_FUNCTIONS
    with pytest.raises(InvalidSelectorError, match="undeclared reference to function"):
        compile_program("testOnlyTwice(21) == 42")
