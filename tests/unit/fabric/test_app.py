"""``kopf-dra run fabric-manager-sim`` refuses to serve without usable credentials."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from operators.fabric import app


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    app.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_without_a_tokens_directory_it_does_not_start(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KOPF_DRA_TOKENS_DIR", raising=False)
    assert app.run(parse()) == 2
    assert "--tokens-dir / KOPF_DRA_TOKENS_DIR is required" in capsys.readouterr().err


def test_with_an_unusable_token_it_names_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "default").write_text("short")
    assert app.run(parse("--tokens-dir", str(tmp_path))) == 2
    assert f"{tmp_path}/default: the token is shorter" in capsys.readouterr().err


def test_faults_are_off_by_default() -> None:
    assert app.FabricSimSettings.load(parse(), environ={}).enable_faults is False
