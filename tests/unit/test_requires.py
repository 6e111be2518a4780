"""The skip policy of tests/requires.py: a missing program skips, except under CI=true."""

from __future__ import annotations

import pytest

from tests.requires import require_program

ABSENT = "kopf-dra-no-such-program"


def test_a_missing_program_skips_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=f"{ABSENT} is not on PATH"):
        require_program(ABSENT, "a test of the policy")


def test_under_ci_a_missing_program_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "True")
    with pytest.raises(pytest.fail.Exception, match=f"{ABSENT} is not on PATH.*CI=true"):
        require_program(ABSENT, "a test of the policy")


def test_a_present_program_is_its_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    assert require_program("sh", "a test of the policy").endswith("/sh")
