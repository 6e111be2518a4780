"""What the allocator needs from the CEL layer: "does this device match this expression?".

A Protocol keeps the allocator independent of how operators.cel compiles and caches; the
allocator adds its own memo per (expression, device object), because the same device is asked
about again for every node, request and scheduling attempt within one cycle.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, Final, Protocol

from operators.api.resource import Device
from operators.cel import CELEnvironment, DeviceView, SelectorError, build_device_view


class SelectorEngine(Protocol):
    """Evaluates CEL device selectors.

    Raises ``operators.cel.errors.InvalidSelectorError`` when the expression does not compile,
    ``operators.cel.errors.SelectorEvaluationError`` when evaluation fails for a device, and
    ``operators.cel.EvaluationInterrupted`` when ``interrupt`` stopped a long evaluation.
    """

    def device_matches(
        self,
        expression: str,
        driver: str,
        device: Device,
        interrupt: Callable[[], bool] | None = None,
    ) -> bool: ...

    def derived_value(
        self,
        expression: str,
        driver: str,
        device: Device,
        interrupt: Callable[[], bool] | None = None,
    ) -> Any:
        """A derived attribute's CEL value for the device (1.37); raises as ``device_matches``."""
        ...


# Results kept at most (all devices and expressions together): tenants write expressions, so
# a cache keyed by them must be bounded (about 200 bytes an entry).
RESULT_LIMIT: Final = 262_144


class CelSelectorEngine:
    """SelectorEngine on operators.cel: compiled selectors cached by the environment.

    The CEL ``device`` value depends only on the driver and the device, so views and results
    are kept per device object and survive scheduling cycles as long as the informer hands out
    the same slice objects. A device object that is no longer used (its slice was replaced)
    takes its entry with it; the results of all devices together are bounded by
    ``result_limit`` (past it, every result is dropped and computed again when asked).
    """

    def __init__(self, env: CELEnvironment | None = None, result_limit: int = RESULT_LIMIT) -> None:
        self.env = env if env is not None else CELEnvironment()
        self.result_limit = result_limit
        self._views: dict[int, tuple[DeviceView, dict[str, bool | SelectorError]]] = {}
        self._results = 0
        self.evaluations = 0  # evaluations started (finished, failed or interrupted)

    def _view(
        self, driver: str, device: Device
    ) -> tuple[DeviceView, dict[str, bool | SelectorError]]:
        key = id(device)
        hit = self._views.get(key)
        if hit is None:
            hit = (build_device_view(driver, device), {})
            self._views[key] = hit
            # The id is unique while the device lives; the entry goes when it does.
            weakref.finalize(device, self._views.pop, key, None)
        return hit

    def derived_value(
        self,
        expression: str,
        driver: str,
        device: Device,
        interrupt: Callable[[], bool] | None = None,
    ) -> Any:
        """Not remembered here: the search keeps each value for its own call, as upstream."""
        self.evaluations += 1
        view = self._view(driver, device)[0]
        return self.env.compile_derived(expression).value(view, interrupt=interrupt)

    def device_matches(
        self,
        expression: str,
        driver: str,
        device: Device,
        interrupt: Callable[[], bool] | None = None,
    ) -> bool:
        """``interrupt``: asked every few milliseconds of a long evaluation whether to stop
        (an interrupted evaluation leaves no result behind)."""
        hit = self._view(driver, device)
        result = hit[1].get(expression)
        if result is None:
            self.evaluations += 1
            try:
                result = self.env.compile(expression).evaluate(hit[0], interrupt=interrupt)
            except SelectorError as e:
                result = e
            self._remember(hit[1], expression, result)
        if isinstance(result, SelectorError):
            raise result
        return result

    def _remember(
        self,
        results: dict[str, bool | SelectorError],
        expression: str,
        result: bool | SelectorError,
    ) -> None:
        if self._results >= self.result_limit:
            for _, kept in list(self._views.values()):  # one C-level copy: finalizers may run
                kept.clear()
            self._results = 0
        results[expression] = result
        self._results += 1

    def forget(self) -> None:
        """Drop cached views and results (e.g. when slices were replaced)."""
        self._views.clear()
        self._results = 0
