"""Caches, limits, error reporting and the cel-python pitfalls the environment guards against."""

from __future__ import annotations

import pytest
from celpy.celparser import CELParser

from operators.cel import (
    MAX_EXPRESSION_LENGTH,
    CELEnvironment,
    InvalidSelectorError,
    SelectorError,
    SelectorEvaluationError,
    SliceKey,
    build_device_view,
)

from .conftest import GPU, GPU_DRIVER, GPU_KEY, attribute, device

MODEL = 'device.attributes["gpu.example.com"].model == "a100"'


def test_device_is_converted_once_per_slice_generation(env: CELEnvironment) -> None:
    for expression in (MODEL, 'device.driver == "gpu.example.com"'):
        for _ in range(3):
            assert env.matches(expression, GPU_KEY, GPU)
    assert env.stats.views_built == 1
    assert env.stats.evaluations == 2
    assert env.stats.result_hits == 4


def test_new_generation_invalidates_views_and_results(env: CELEnvironment) -> None:
    assert env.matches(MODEL, GPU_KEY, GPU)
    changed = device("gpu-0", {"model": attribute("h100")})
    newer = SliceKey(GPU_KEY.uid, GPU_KEY.generation + 1, GPU_KEY.driver)
    assert env.matches(MODEL, newer, changed) is False
    assert env.stats.views_built == 2


def test_forget_slice_drops_cached_results(env: CELEnvironment) -> None:
    assert env.matches(MODEL, GPU_KEY, GPU)
    env.forget_slice(GPU_KEY.uid)
    assert env.matches(MODEL, GPU_KEY, GPU)
    assert env.stats.evaluations == 2


def test_device_view_is_cached_by_key(env: CELEnvironment) -> None:
    first = env.device_view(GPU_KEY, GPU)
    assert env.device_view(GPU_KEY, GPU) is first
    assert env.compile(MODEL).evaluate(first) is True


def test_compile_cache_is_bounded_lru() -> None:
    env = CELEnvironment(compile_cache_size=2)
    a = env.compile("true")
    env.compile("false")
    assert env.compile("true") is a  # hit, now most recent
    env.compile("1 == 1")  # evicts "false"
    assert env.stats.compiles == 3
    env.compile("false")
    assert env.stats.compiles == 4
    assert env.compile("true") is not a  # evicted by "false"


def test_compile_errors_are_cached_and_keep_position(env: CELEnvironment) -> None:
    for context in ("class a, selector #0", "claim ns/b, request gpu, selector #1"):
        with pytest.raises(InvalidSelectorError) as raised:
            env.compile('device.driver == "x" &&\n  )', context=context)
        assert raised.value.message.startswith(f"{context}: selector ")
        assert raised.value.line == 2
        assert raised.value.column is not None
    assert env.stats.compiles == 1


def test_compile_error_position_of_unknown_function(env: CELEnvironment) -> None:
    with pytest.raises(InvalidSelectorError) as raised:
        env.compile('device.driver == "x" && nope(1)')
    assert (raised.value.line, raised.value.column) == (1, 25)
    assert "line 1, column 25" in raised.value.message


def test_expression_length_limit(env: CELEnvironment) -> None:
    fits = "true" + " " * (MAX_EXPRESSION_LENGTH - 4)
    assert env.compile(fits).expression == fits
    with pytest.raises(InvalidSelectorError, match="more than the limit of 10240"):
        env.compile(fits + " ")


def test_static_cost_limit_rejects_nested_macros() -> None:
    env = CELEnvironment(cost_limit=10_000)
    items = "[" + ", ".join(str(i) for i in range(100)) + "]"
    assert env.compile(f"{items}.all(x, x >= 0)").estimated_cost < 10_000
    with pytest.raises(InvalidSelectorError, match="estimated cost"):
        env.compile(f"{items}.all(x, {items}.all(y, {items}.exists(z, x + y == z)))")


def test_default_cost_limit_allows_realistic_selectors(env: CELEnvironment) -> None:
    selector = env.compile(
        'device.attributes["gpu.example.com"].ports.all(p, p > 1024) && '
        'device.attributes.exists(d, d.startsWith("gpu"))'
    )
    assert 0 < selector.estimated_cost < 1_000_000


def test_step_budget_stops_runaway_evaluation() -> None:
    env = CELEnvironment(step_limit=50)
    # split() yields a list whose length the static estimate cannot see.
    selector = env.compile(
        '"a,b,c,d,e,f,g,h".split(",").all(x, "a,b,c,d,e,f,g,h".split(",").all(y, true))'
    )
    view = build_device_view(GPU_DRIVER, GPU)
    with pytest.raises(SelectorEvaluationError, match="budget of 50 macro iterations"):
        selector.evaluate(view, context="claim ns/a, request gpu, selector #0")


def test_step_budget_error_is_not_absorbed_by_or() -> None:
    env = CELEnvironment(step_limit=3)
    selector = env.compile("true || [1, 2, 3, 4].all(x, true)")
    # Short-circuit: the right side never runs, so nothing is spent.
    assert selector.evaluate(build_device_view(GPU_DRIVER, GPU)) is True
    runaway = env.compile("[1, 2, 3, 4].all(x, true) || true")
    with pytest.raises(SelectorEvaluationError, match="budget"):
        runaway.evaluate(build_device_view(GPU_DRIVER, GPU))


def test_bind_init_error_fails_like_kubernetes(env: CELEnvironment) -> None:
    """cel-go evaluates bind's init lazily: its error is the result only if the body reads the
    variable, and, like any error, it is absorbed by a short-circuiting operator around it."""
    view = build_device_view(GPU_DRIVER, GPU)
    ignored = env.compile('cel.bind(x, device.attributes["gpu.example.com"].nope, true)')
    assert ignored.evaluate(view) is True
    absorbed = env.compile('false || true || cel.bind(x, quantity("bad"), sign(x) == 1)')
    assert absorbed.evaluate(view) is True
    used = env.compile('cel.bind(x, quantity("bad"), sign(x) == 1) || false')
    with pytest.raises(SelectorEvaluationError, match="quantity"):
        used.evaluate(view)


def test_bind_evaluates_init_once(env: CELEnvironment) -> None:
    # The step budget counts bind scopes too: one bind is one step, whatever the body does.
    small = CELEnvironment(step_limit=1)
    selector = small.compile("cel.bind(x, 1 + 1, x == 2 && x + x == 4 && x * x == 4)")
    assert selector.evaluate(build_device_view(GPU_DRIVER, GPU)) is True


def test_invalid_attribute_fails_every_evaluation(env: CELEnvironment) -> None:
    broken = device("broken", {"v": attribute("not-a-version", version=True), "ok": attribute(1)})
    key = SliceKey("slice-broken", 1, GPU_DRIVER)
    with pytest.raises(SelectorEvaluationError, match=r"attribute v: .*not a semantic version"):
        env.matches('device.attributes["gpu.example.com"].ok == 1', key, broken)


def test_errors_share_a_base_with_reasons() -> None:
    assert issubclass(InvalidSelectorError, SelectorError)
    assert issubclass(SelectorEvaluationError, SelectorError)
    assert InvalidSelectorError("x").reason == "InvalidSelector"
    assert SelectorEvaluationError("x").reason == "SelectorEvaluationError"


def test_shared_parser_built_by_someone_else_is_tolerated(env: CELEnvironment) -> None:
    """cel-python's parser is a process-wide singleton; another user may build it with plain
    lark trees. Compilation copies the tree into transpiler nodes, so it still works."""
    saved = CELParser.CEL_PARSER
    try:
        CELParser.CEL_PARSER = None
        CELParser()  # default tree class: lark.Tree
        assert env.compile('device.driver == "gpu.example.com"').evaluate(
            build_device_view(GPU_DRIVER, GPU)
        )
    finally:
        CELParser.CEL_PARSER = saved


def test_environments_are_independent() -> None:
    first, second = CELEnvironment(), CELEnvironment(cost_limit=10)
    assert first.compile("[1, 2, 3].all(x, x > 0)").estimated_cost > 10
    with pytest.raises(InvalidSelectorError, match="estimated cost"):
        second.compile("[1, 2, 3].all(x, x > 0)")


def test_slice_key_of_models() -> None:
    from operators.api.meta import ObjectMeta
    from operators.api.resource import ResourceSlice, ResourceSliceSpec

    served = ResourceSlice(
        metadata=ObjectMeta(name="s", uid="u-1", generation=4),
        spec=ResourceSliceSpec(driver=GPU_DRIVER),
    )
    assert SliceKey.of(served) == SliceKey("u-1", 4, GPU_DRIVER)
    offline = ResourceSlice(metadata=ObjectMeta(name="s"), spec=ResourceSliceSpec(driver="d"))
    assert SliceKey.of(offline) == SliceKey("name:s", 0, "d")


def test_uncompilable_string_selector_in_matches(env: CELEnvironment) -> None:
    with pytest.raises(InvalidSelectorError, match=r"^claim ns/a, request r, selector #2: "):
        env.matches("(", GPU_KEY, GPU, context="claim ns/a, request r, selector #2")


def test_results_are_a_bounded_lru_across_slices() -> None:
    """Unique tenant selectors cannot grow the result cache past its bound."""
    env = CELEnvironment(result_cache_size=3)
    for n in range(10):
        assert env.matches(f"{n} >= 0", GPU_KEY, GPU)
    assert len(env._results) == 3
    assert env.matches("9 >= 0", GPU_KEY, GPU)  # the most recent ones are still there
    assert env.stats.result_hits == 1
    assert env.matches("0 >= 0", GPU_KEY, GPU)  # evicted long ago: evaluated again
    assert env.stats.evaluations == 11
