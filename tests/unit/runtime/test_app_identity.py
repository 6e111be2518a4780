"""kopf's identity comes from the replica's settings, never from the passwd database."""

from __future__ import annotations

import asyncio
import getpass
from typing import Any

import kopf
import pytest

from operators.controllers.scheduler.settings import SchedulerSettings
from operators.runtime import app


def _no_passwd_entry() -> str:
    raise KeyError("getpwuid(): uid not found: 65532")


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """kopf.operator's arguments, as uid 65532 of the image would run it (no USER, LOGNAME
    or passwd entry, so getpass.getuser() raises)."""
    seen: dict[str, Any] = {}

    async def operator(**kwargs: Any) -> None:
        seen.update(kwargs)

    for name in ("USER", "LOGNAME", "LNAME", "USERNAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(getpass, "getuser", _no_passwd_entry)
    monkeypatch.setattr(kopf, "operator", operator)
    return seen


def test_the_replica_identity_names_the_operator(captured: dict[str, Any]) -> None:
    settings = SchedulerSettings(identity="kopf-dra-scheduler-7d9f-abcde")
    asyncio.run(
        app.run_operator(registry=kopf.OperatorRegistry(), component="scheduler", settings=settings)
    )
    assert captured["identity"] == "kopf-dra-scheduler-7d9f-abcde"


@pytest.mark.parametrize("settings", [None, SchedulerSettings()])
def test_without_one_the_host_name_stands_in(
    captured: dict[str, Any], settings: SchedulerSettings | None
) -> None:
    asyncio.run(
        app.run_operator(registry=kopf.OperatorRegistry(), component="scheduler", settings=settings)
    )
    identity = captured["identity"]
    assert isinstance(identity, str)
    assert identity
    assert "65532" not in identity
