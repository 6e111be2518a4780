"""The validator's start waits for its CRD to be served (429 while a just-installed CRD's storage
starts) as an expected condition, said once; a missing CRD stops it with the command to run."""

from __future__ import annotations

from typing import Any

import kopf
import pytest
import structlog

from operators.controllers.pool_validator import handlers
from operators.controllers.pool_validator.handlers import PoolValidatorController
from operators.controllers.pool_validator.settings import PoolValidatorSettings
from operators.kube.api import ApiError, NotFoundError
from operators.runtime.controller import Deps


class StartingServer:
    """Answers ``list`` with ``failures`` errors first."""

    def __init__(self, *failures: ApiError) -> None:
        self.failures = list(failures)
        self.calls = 0

    async def list(self, kind: str, **_: Any) -> dict[str, Any]:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return {"items": []}


def _controller(api: StartingServer) -> PoolValidatorController:
    controller = PoolValidatorController(PoolValidatorSettings())
    controller._deps = Deps(api=api, events=None, applier=None)  # type: ignore[arg-type]
    return controller


def _too_many() -> ApiError:
    return ApiError(429, "TooManyRequests", "storage is (re)initializing", {})


async def test_a_crd_not_served_yet_is_waited_for_and_said_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(handlers, "SERVED_POLL", 0.0)
    api = StartingServer(_too_many(), _too_many(), _too_many())
    with structlog.testing.capture_logs() as logs:
        await _controller(api).prepare()
    assert api.calls == 4
    assert [(e["log_level"], e["event"]) for e in logs] == [
        ("info", "waiting for ResourcePoolStatus to be served")
    ]


async def test_a_missing_crd_is_permanent_and_names_the_fix() -> None:
    api = StartingServer(NotFoundError(404, "NotFound", "the server could not find it", {}))
    with pytest.raises(kopf.PermanentError, match="kubectl apply -f crds/"):
        await _controller(api).prepare()
