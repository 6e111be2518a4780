"""The kopf-dra command's own behaviour (components are tested in their packages)."""

from __future__ import annotations

from pathlib import Path

import pytest

from operators import __version__
from operators.cli import main
from operators.components import COMPONENTS


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


def test_run_help_lists_every_component(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--help"]) == 0
    out = capsys.readouterr().out
    for name, component in COMPONENTS.items():
        assert f"  {name} " in out
        assert component.summary in out


def test_run_without_a_component_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run"]) == 2
    assert "components:" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["run", "scheduler", "--score-policy", "foo"],
            "kopf-dra run scheduler: SchedulerSettings: --score-policy / KOPF_DRA_SCORE_POLICY: "
            "Input should be 'least-allocated' or 'most-allocated'",
        ),
        (
            ["run", "reservations", "--feature-gates", "DRAAdminAccess=false"],
            "kopf-dra run reservations: ReservationSettings: --feature-gates / "
            "KOPF_DRA_FEATURE_GATES: cannot set feature gate DRAAdminAccess to false, feature is "
            "locked to true",
        ),
        (
            ["run", "claim-templates", "--kubeconfig", "/nonexistent/kubeconfig"],
            "kopf-dra run claim-templates: kubeconfig /nonexistent/kubeconfig: no such file",
        ),
        (
            ["run", "driver", "--node-name", "n", "--kubeconfig", "/nonexistent/kubeconfig"],
            "kopf-dra run driver: kubeconfig /nonexistent/kubeconfig: no such file",
        ),
    ],
)
def test_bad_settings_exit_2_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [message]


def test_an_unparsable_kubeconfig_is_named_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("clusters: [\n")
    assert main(["run", "pool-validator", "--kubeconfig", str(broken)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"kopf-dra run pool-validator: kubeconfig {broken}: ")
