"""The kopf-dra command's own behaviour (components are tested in their packages)."""

from __future__ import annotations

import pytest

from operators import __version__
from operators.cli import main


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out.strip() == f"kopf-dra {__version__}"


def test_control_plane_env_prints_the_fixed_kubeconfig_path(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["control-plane", "env", "--state-dir", "/tmp/kopf-dra-state"]) == 0
    assert capsys.readouterr().out.strip() == "export KUBECONFIG=/tmp/kopf-dra-state/kubeconfig"


def test_unknown_command_exits_with_usage_error() -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["frobnicate"])
    assert exit_info.value.code == 2
