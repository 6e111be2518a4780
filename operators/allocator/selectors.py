"""What the allocator needs from the CEL layer: "does this device match this expression?".

A Protocol keeps the allocator independent of how operators.cel compiles and caches; the
allocator adds its own memo per (expression, device object), because the same device is asked
about again for every node, request and scheduling attempt within one cycle.
"""

from __future__ import annotations

from typing import Protocol

from operators.api.resource import Device
from operators.cel import CELEnvironment, DeviceView, SelectorError, build_device_view


class SelectorEngine(Protocol):
    """Evaluates CEL device selectors.

    Raises ``operators.cel.errors.InvalidSelectorError`` when the expression does not compile
    and ``operators.cel.errors.SelectorEvaluationError`` when evaluation fails for a device.
    """

    def device_matches(self, expression: str, driver: str, device: Device) -> bool: ...


class CelSelectorEngine:
    """SelectorEngine on operators.cel: compiled selectors cached by the environment.

    The CEL ``device`` value depends only on the driver and the device, so views and results
    are kept per device object (kept alive here, so ids stay unique) and survive scheduling
    cycles as long as the informer hands out the same slice objects. ``forget()`` drops it all.
    """

    def __init__(self, env: CELEnvironment | None = None) -> None:
        self.env = env if env is not None else CELEnvironment()
        self._views: dict[int, tuple[Device, DeviceView, dict[str, bool | SelectorError]]] = {}

    def device_matches(self, expression: str, driver: str, device: Device) -> bool:
        hit = self._views.get(id(device))
        if hit is None or hit[0] is not device:
            hit = (device, build_device_view(driver, device), {})
            self._views[id(device)] = hit
        result = hit[2].get(expression)
        if result is None:
            try:
                result = self.env.compile(expression).evaluate(hit[1])
            except SelectorError as e:
                result = e
            hit[2][expression] = result
        if isinstance(result, SelectorError):
            raise result
        return result

    def forget(self) -> None:
        """Drop cached views and results (e.g. when slices were replaced)."""
        self._views.clear()
