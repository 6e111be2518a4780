"""Caches, limits and error reporting of the environment."""

from __future__ import annotations

import dataclasses

import pytest

from operators.cel import (
    DEFAULT_KUBERNETES,
    KUBERNETES_MINORS,
    MAX_EXPRESSION_LENGTH,
    NEWEST_KUBERNETES,
    CELEnvironment,
    CompiledSelector,
    EvaluationInterrupted,
    InvalidSelectorError,
    SelectorError,
    SelectorEvaluationError,
    SliceKey,
    build_device_view,
)
from operators.cel.compiler import CHECKPOINT_COST

from .conftest import GPU, GPU_DRIVER, GPU_KEY, attribute, device

MODEL = 'device.attributes["gpu.example.com"].model == "a100"'


def test_an_environment_speaks_a_minor_kopf_dra_knows() -> None:
    """The default is the project's default release, which need not be the newest minor
    kopf-dra speaks (a pre-release's is spoken before it is the default)."""
    assert CELEnvironment().kubernetes == DEFAULT_KUBERNETES
    assert DEFAULT_KUBERNETES in KUBERNETES_MINORS
    for kubernetes in KUBERNETES_MINORS:
        assert CELEnvironment(kubernetes=kubernetes).kubernetes == kubernetes
    assert CELEnvironment(kubernetes=NEWEST_KUBERNETES).kubernetes == KUBERNETES_MINORS[-1]
    with pytest.raises(ValueError, match=r"1\.35"):
        CELEnvironment(kubernetes="1.35")


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


def _with_runtime_limit(selector: CompiledSelector, limit: int) -> CompiledSelector:
    """The same program with a lower runtime cost limit than the one it was validated for."""
    return CompiledSelector(dataclasses.replace(selector._program, cost_limit=limit))


def test_runtime_cost_limit_stops_evaluation(env: CELEnvironment) -> None:
    selector = env.compile(
        '"a,b,c,d,e,f,g,h".split(",").all(x, "a,b,c,d,e,f,g,h".split(",").all(y, true))'
    )
    view = build_device_view(GPU_DRIVER, GPU)
    assert selector.evaluate(view) is True
    with pytest.raises(SelectorEvaluationError, match="cost limit of 50"):
        _with_runtime_limit(selector, 50).evaluate(
            view, context="claim ns/a, request gpu, selector #0"
        )


def test_runtime_cost_limit_is_not_absorbed_by_or(env: CELEnvironment) -> None:
    view = build_device_view(GPU_DRIVER, GPU)
    # Short-circuit: the right side never runs, so nothing is spent (cel-go counts 0 too).
    cheap = env.compile("true || [1, 2, 3, 4].all(x, true)")
    assert cheap.cost(view) == 0
    assert _with_runtime_limit(cheap, 3).evaluate(view) is True
    runaway = env.compile("[1, 2, 3, 4].all(x, true) || true")
    assert runaway.cost(view) == 13  # what cel-go charges: 3 per iteration, 1 for the result
    with pytest.raises(SelectorEvaluationError, match="cost limit"):
        _with_runtime_limit(runaway, 3).evaluate(view)


LONG = "[" + ", ".join(map(str, range(300))) + "]"
#: 90,000 iterations, well within the cost limit: a long evaluation a tenant may write.
EXPENSIVE = f"{LONG}.exists(x, {LONG}.exists(y, x * y == -1))"


def test_a_long_evaluation_asks_the_interrupt_at_checkpoints_and_stops_when_told(
    env: CELEnvironment,
) -> None:
    """Checkpoints every few thousand units of cost, none beyond the end; an interrupted
    evaluation raises (not a selector error: nothing to remember), and one let run gives
    the answer and the cost an uninterrupted one gives."""
    view = build_device_view(GPU_DRIVER, GPU)
    selector = env.compile(EXPENSIVE)
    cost = selector.cost(view)
    assert cost is not None
    asked: list[int] = []

    def count() -> bool:
        asked.append(1)
        return False

    assert selector.evaluate(view, interrupt=count) is False
    assert len(asked) >= cost // CHECKPOINT_COST - 1, (cost, len(asked))
    stop_at = len(asked) // 2
    asked.clear()
    with pytest.raises(EvaluationInterrupted):
        selector.evaluate(view, interrupt=lambda: len(asked) >= stop_at or count())
    assert len(asked) == stop_at
    assert selector.evaluate(view) is False
    cheap = env.compile(MODEL)
    assert cheap.evaluate(view, interrupt=lambda: True) is True, "too short for a checkpoint"


def test_the_cost_limit_holds_with_checkpoints(env: CELEnvironment) -> None:
    view = build_device_view(GPU_DRIVER, GPU)
    limited = _with_runtime_limit(env.compile(EXPENSIVE), 3 * CHECKPOINT_COST)
    asked: list[int] = []

    def count() -> bool:
        asked.append(1)
        return False

    with pytest.raises(SelectorEvaluationError, match="cost limit"):
        limited.evaluate(view, interrupt=count)
    assert asked, "checkpoints came before the limit, which still stops the evaluation"


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
    # cel-go charges 49 here: 43 for the map once, 6 for the body.
    selector = env.compile("cel.bind(x, [1, 2, 3].map(y, y + 1), x.size() + x.size() == 6)")
    view = build_device_view(GPU_DRIVER, GPU)
    assert selector.evaluate(view) is True
    assert selector.cost(view) == 49


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


def test_results_are_bounded_across_slices() -> None:
    """Unique tenant selectors cannot grow the result cache past its bound."""
    env = CELEnvironment(result_cache_size=4)
    for n in range(10):
        assert env.matches(f"{n} >= 0", GPU_KEY, GPU)
    assert len(env._results) + len(env._older) <= 4
    assert env.matches("9 >= 0", GPU_KEY, GPU)  # the most recent ones are still there
    assert env.stats.result_hits == 1
    assert env.matches("0 >= 0", GPU_KEY, GPU)  # evicted long ago: evaluated again
    assert env.stats.evaluations == 11


def test_results_found_in_the_older_generation_are_kept() -> None:
    env = CELEnvironment(result_cache_size=4)
    assert env.matches("0 >= 0", GPU_KEY, GPU)
    assert env.matches("1 >= 0", GPU_KEY, GPU)  # the young generation is full: it ages
    assert env.matches("0 >= 0", GPU_KEY, GPU)  # a hit in the older one comes back
    for n in range(2, 4):
        assert env.matches(f"{n} >= 0", GPU_KEY, GPU)
    assert env.matches("0 >= 0", GPU_KEY, GPU)
    assert env.stats.evaluations == 4
