"""The public face of the CEL layer: compile selectors, evaluate them against devices, cache both.

One :class:`CELEnvironment` per process (it lives in the operator's ``memo``, not in a module
global). The allocator builds its per-cycle state from it:

    env = CELEnvironment()
    selector = env.compile(expression, context="class gpu, selector #0")   # InvalidSelectorError
    env.matches(selector, SliceKey.of(resource_slice), device,
                context="claim ns/a, request gpu, selector #0")          # SelectorEvaluationError

Three caches, all bounded and all pure data: compiled selectors by expression text, device
views by (slice UID, slice generation, device name), and results by (slice entry, expression,
device) across all slices. Expressions are written by tenants, so a per-slice table of results
would grow with every unique selector until the slice is republished; the shared table bounds
that. It keeps two generations: a hit is a dict lookup (promoted from the older generation
when found there), a full young generation replaces the old one, so memory stays within the
bound and a steady set of selectors keeps hitting. A new slice generation (or
``forget_slice``) gets a new entry, so stale results are never found and age out.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .compiler import DEFAULT_COST_LIMIT, Program, compile_program
from .derived import compile_derived
from .device import DeviceLike, DeviceView, build_device_view
from .errors import InvalidSelectorError, SelectorEvaluationError, with_context
from .release import DEFAULT_KUBERNETES, check_minor
from .runtime import CelError, CostLimitExceeded, EvaluationInterrupted, NoSuchKey, type_name

__all__ = ["CELEnvironment", "CacheStats", "CompiledDerived", "CompiledSelector", "SliceKey"]

C = TypeVar("C", "CompiledSelector", "CompiledDerived")

_MISSING_KEY_HINT = (
    '; guard optional attributes with has(device.attributes["<domain>"].<name>) or '
    '"<name>" in device.attributes["<domain>"]'
)


@dataclass(frozen=True, slots=True)
class SliceKey:
    """Identifies one generation of a ResourceSlice; devices are converted once per key.

    Objects from the API server always have a UID and a generation. Offline snapshots (the
    ``simulate`` CLI) may lack them: ``of()`` then keys by name, which is safe because a
    snapshot never changes while it is being simulated.
    """

    uid: str
    generation: int
    driver: str

    @classmethod
    def of(cls, resource_slice: Any) -> SliceKey:
        """Read ``metadata.uid``, ``metadata.generation`` and ``spec.driver`` of a slice model."""
        metadata = resource_slice.metadata
        uid = getattr(metadata, "uid", None) or f"name:{getattr(metadata, 'name', None) or ''}"
        generation = getattr(metadata, "generation", None) or 0
        return cls(uid=str(uid), generation=int(generation), driver=str(resource_slice.spec.driver))


class CompiledSelector:
    """A compiled, checked selector. Evaluate with :meth:`evaluate` or through the environment."""

    __slots__ = ("_program",)

    def __init__(self, program: Program) -> None:
        self._program = program

    @property
    def expression(self) -> str:
        return self._program.expression

    @property
    def estimated_cost(self) -> int:
        """Worst-case cost, as estimated at compile time (<= the cost limit)."""
        return self._program.estimated_cost

    def evaluate(
        self,
        device: DeviceView,
        *,
        context: str = "",
        interrupt: Callable[[], bool] | None = None,
    ) -> bool:
        """Does the device match? Raises SelectorEvaluationError for every failure, and
        EvaluationInterrupted when ``interrupt`` (asked every few milliseconds of a long
        evaluation) says to stop: then there is no result to remember."""
        failure = self._run(device, interrupt)
        if isinstance(failure, str):
            raise SelectorEvaluationError(
                with_context(context, failure), expression=self._program.expression
            )
        return failure

    def cost(self, device: DeviceView) -> int | None:
        """The runtime cost of one evaluation (None when the device could not be converted)."""
        value, error = device.device(self._program.lazy_attributes)
        if error is not None:
            return None
        try:
            return self._program.run(value)[1]  # type: ignore[no-any-return]
        except CostLimitExceeded as exc:
            return int(exc.args[0]) if exc.args else None
        except Exception:
            return None

    def _run(self, device: DeviceView, interrupt: Callable[[], bool] | None = None) -> bool | str:
        """The result, or the failure message (without context) for caching."""
        value, failure = _outcome(self._program, device, interrupt)
        if failure is not None:
            return self._failure(failure)
        if value is True or value is False:
            return value
        return self._failure(f"a selector must evaluate to bool, got {type_name(value)}")

    def _failure(self, message: str) -> str:
        return f"selector {self._program.expression!r}: {message}"

    def __repr__(self) -> str:
        return f"CompiledSelector({self._program.expression!r})"


def _outcome(
    program: Program, device: DeviceView, interrupt: Callable[[], bool] | None
) -> tuple[Any, str | None]:
    """(value, None), or (None, why it failed): selectors and derived attributes fail alike."""
    value, error = device.device(program.lazy_attributes)
    if error is not None:
        return None, f"device {device.name}: {error}"
    try:
        return program.run(value, interrupt)[0], None
    except EvaluationInterrupted:
        raise
    except CostLimitExceeded:
        return None, (
            f"evaluation exceeded the cost limit of {program.cost_limit} (actual cost limit "
            "exceeded)"
        )
    except NoSuchKey as exc:
        return None, exc.message + _MISSING_KEY_HINT
    except CelError as exc:
        return None, exc.message
    except RecursionError:
        return None, "evaluation nested too deeply"
    except Exception as exc:  # an internal failure must not crash the scheduler
        return None, f"internal error: {type(exc).__name__}: {exc}"


class CompiledDerived:
    """A compiled derived attribute (1.37): its value per device, a grouping key for the
    claim's constraints rather than a filter."""

    __slots__ = ("_program",)

    def __init__(self, program: Program) -> None:
        self._program = program

    @property
    def expression(self) -> str:
        return self._program.expression

    def value(self, device: DeviceView, *, interrupt: Callable[[], bool] | None = None) -> Any:
        """The CEL value (bool, int, Uint, str, SemverValue, list, ...); raises
        SelectorEvaluationError, or EvaluationInterrupted when ``interrupt`` says to stop."""
        value, failure = _outcome(self._program, device, interrupt)
        if failure is not None:
            raise SelectorEvaluationError(failure, expression=self._program.expression)
        return value


@dataclass(slots=True)
class CacheStats:
    """Counters for metrics and the benchmark (the core never logs; callers export these)."""

    compiles: int = 0
    compile_hits: int = 0
    views_built: int = 0
    view_hits: int = 0
    evaluations: int = 0
    result_hits: int = 0


@dataclass(slots=True)
class _SliceEntry:
    generation: int
    token: int  # unique per entry: the results key by it, so a new entry starts empty
    views: dict[str, DeviceView] = field(default_factory=dict)


# Results kept across all slices: enough for every (selector, device) pair of a large cluster's
# steady state (e.g. 10 selectors on 10,000 devices), a few tens of MB at most.
DEFAULT_RESULT_CACHE_SIZE = 131_072

ResultKey = tuple[int, str, str]


class CELEnvironment:
    """Compiles DRA device selectors and evaluates them with caching; safe to share per process.

    Not thread-safe for concurrent mutation of its caches; the scheduler runs cycles one at a
    time (an asyncio loop), which is the intended use. ``kubernetes`` is the minor whose CEL it
    speaks (release.py: 1.36, 1.37 or 1.38; DEFAULT_KUBERNETES by default): pass the cluster's.
    """

    def __init__(
        self,
        *,
        cost_limit: int = DEFAULT_COST_LIMIT,
        compile_cache_size: int = 4096,
        slice_cache_size: int = 16384,
        result_cache_size: int = DEFAULT_RESULT_CACHE_SIZE,
        kubernetes: str = DEFAULT_KUBERNETES,
    ) -> None:
        self.cost_limit = cost_limit
        self.kubernetes = check_minor(kubernetes)
        self._compile_cache_size = compile_cache_size
        self._slice_cache_size = slice_cache_size
        self._compiled: OrderedDict[str, CompiledSelector | InvalidSelectorError] = OrderedDict()
        self._derived: OrderedDict[str, CompiledDerived | InvalidSelectorError] = OrderedDict()
        self._slices: OrderedDict[str, _SliceEntry] = OrderedDict()
        # Two generations of results, each at most half the bound.
        self._generation_size = max(1, result_cache_size // 2)
        self._results: dict[ResultKey, bool | str] = {}
        self._older: dict[ResultKey, bool | str] = {}
        self._tokens = 0
        self.stats = CacheStats()

    # --- compiling ---

    def compile(self, expression: str, *, context: str = "") -> CompiledSelector:
        """Compile (or fetch) a selector; raises InvalidSelectorError prefixed with ``context``."""
        cached = self._cached(
            self._compiled,
            expression,
            lambda: CompiledSelector(
                compile_program(expression, cost_limit=self.cost_limit, kubernetes=self.kubernetes)
            ),
        )
        if isinstance(cached, InvalidSelectorError):
            raise InvalidSelectorError(
                with_context(context, f"selector {expression!r}: {cached.message}"),
                expression=expression,
                line=cached.line,
                column=cached.column,
            )
        return cached

    def compile_derived(self, expression: str) -> CompiledDerived:
        """Compile (or fetch) a derived attribute's expression (1.37); raises
        InvalidSelectorError. Cached apart from selectors: the same text is a selector there."""
        cached = self._cached(
            self._derived,
            expression,
            lambda: CompiledDerived(
                compile_derived(expression, kubernetes=self.kubernetes, cost_limit=self.cost_limit)
            ),
        )
        if isinstance(cached, InvalidSelectorError):
            raise cached
        return cached

    def _cached(
        self,
        table: OrderedDict[str, C | InvalidSelectorError],
        expression: str,
        build: Callable[[], C],
    ) -> C | InvalidSelectorError:
        """A bounded LRU of compilations, failures included (they are as costly to find)."""
        cached = table.get(expression)
        if cached is not None:
            self.stats.compile_hits += 1
            table.move_to_end(expression)
            return cached
        self.stats.compiles += 1
        try:
            cached = build()
        except InvalidSelectorError as exc:
            cached = exc
        table[expression] = cached
        if len(table) > self._compile_cache_size:
            table.popitem(last=False)
        return cached

    # --- devices ---

    def device_view(self, slice_key: SliceKey, device: DeviceLike) -> DeviceView:
        """The ``device`` value, converted at most once per slice generation."""
        entry = self._entry(slice_key)
        view = entry.views.get(device.name or "")
        if view is None:
            self.stats.views_built += 1
            view = build_device_view(slice_key.driver, device)
            entry.views[device.name or ""] = view
        else:
            self.stats.view_hits += 1
        return view

    def matches(
        self,
        selector: CompiledSelector | str,
        slice_key: SliceKey,
        device: DeviceLike,
        *,
        context: str = "",
    ) -> bool:
        """Does ``device`` (of the slice ``slice_key``) satisfy the selector? Cached.

        Raises InvalidSelectorError (a string that does not compile) or
        SelectorEvaluationError; both messages start with ``context``.
        """
        if isinstance(selector, str):
            selector = self.compile(selector, context=context)
        entry = self._entry(slice_key)
        key = (entry.token, selector.expression, device.name or "")
        outcome = self._results.get(key)
        if outcome is None:
            outcome = self._older.get(key)
            if outcome is None:
                view = entry.views.get(device.name or "")
                if view is None:
                    self.stats.views_built += 1
                    view = build_device_view(slice_key.driver, device)
                    entry.views[device.name or ""] = view
                self.stats.evaluations += 1
                outcome = selector._run(view)
            else:
                self.stats.result_hits += 1
            self._remember(key, outcome)
        else:
            self.stats.result_hits += 1
        if outcome is True or outcome is False:
            return outcome
        raise SelectorEvaluationError(with_context(context, outcome), expression=key[1])

    def _remember(self, key: ResultKey, outcome: bool | str) -> None:
        results = self._results
        results[key] = outcome
        if len(results) >= self._generation_size:
            self._older = results
            self._results = {}

    def forget_slice(self, uid: str) -> None:
        """Drop what is cached for a deleted slice (a new generation replaces it by itself)."""
        self._slices.pop(uid, None)

    def clear(self) -> None:
        self._compiled.clear()
        self._derived.clear()
        self._slices.clear()
        self._results.clear()
        self._older.clear()

    def _entry(self, slice_key: SliceKey) -> _SliceEntry:
        entry = self._slices.get(slice_key.uid)
        if entry is None or entry.generation != slice_key.generation:
            self._tokens += 1
            entry = _SliceEntry(slice_key.generation, self._tokens)
            self._slices[slice_key.uid] = entry
            if len(self._slices) > self._slice_cache_size:
                self._slices.popitem(last=False)
        return entry
