"""A fabric manager that has gone away (restarted, or the demo stopping it first) is an expected
condition: the reconcile is retried with backoff and logged in one line, without a traceback."""

from __future__ import annotations

from typing import Any, NoReturn

import pytest

from operators.controllers.fabric.handlers import PUBLISH, RECONCILE, FabricController
from operators.controllers.fabric.settings import FabricSettings
from operators.fabric.model import FabricUnavailableError
from operators.runtime.errors import TemporaryError, is_expected


class GoneManager:
    """Every call fails as the HTTP client fails when nothing listens any more."""

    def __getattr__(self, name: str) -> Any:
        async def call(*_: Any, **__: Any) -> NoReturn:
            raise FabricUnavailableError(f"{name}: ClientConnectorError: connection refused")

        return call


@pytest.mark.parametrize("key", [RECONCILE, PUBLISH])
async def test_an_unavailable_manager_is_a_temporary_error_logged_without_traceback(
    key: str,
) -> None:
    controller = FabricController(FabricSettings(), manager=GoneManager())
    controller.active = True  # leading: it would talk to the manager
    for index in controller.kopf_indices:
        controller.indices.add(index, {})
    with pytest.raises(TemporaryError, match="fabric manager unavailable: ") as raised:
        await controller._work(key)
    assert is_expected(raised.value)
