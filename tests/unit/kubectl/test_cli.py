"""``kubectl-dra``'s command line without a cluster: flags where kubectl takes them, usage
errors, an unreachable cluster, and the ``--watch`` loop."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from operators.kubectl import cli
from operators.kubectl.connect import Target, context_names, default_namespace


def test_kubectl_flags_before_or_after_the_subcommand() -> None:
    parser = cli.build_parser()
    after = parser.parse_args(["why", "trainer", "-n", "team-a", "-o", "json", "--context", "c"])
    before = parser.parse_args(["-n", "team-a", "--context", "c", "why", "trainer"])
    for args in (after, before):
        assert (args.command, args.pod, args.namespace, args.context) == (
            "why",
            "trainer",
            "team-a",
            "c",
        )
    assert after.output == "json"
    assert before.output is None
    assert parser.parse_args(["claims", "-A"]).all_namespaces
    assert not parser.parse_args(["claims"]).all_namespaces
    why = parser.parse_args(["why", "p", "--filter-timeout", "2.5", "--explain"])
    assert (why.filter_timeout, why.explain) == (2.5, True)


def test_a_usage_error_is_exit_code_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["frobnicate"]) == cli.EXIT_USAGE
    assert cli.main(["why"]) == cli.EXIT_USAGE
    assert cli.main(["pools", "-o", "xml"]) == cli.EXIT_USAGE
    assert "invalid choice" in capsys.readouterr().err


def test_no_cluster_is_exit_code_3_naming_what_is_wrong(tmp_path: Path) -> None:
    err = io.StringIO()
    missing = tmp_path / "nowhere.kubeconfig"
    assert cli.main(["claims", "--kubeconfig", str(missing)], io.StringIO(), err) == 3
    assert err.getvalue() == (
        f"error: no usable cluster configuration: kubeconfig {missing}: no such file\n"
    )


def test_a_server_that_is_not_there_is_exit_code_3(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u, namespace: team-a}}]\n"
    )
    err = io.StringIO()
    assert cli.main(["pools", "--kubeconfig", str(config)], io.StringIO(), err) == 3
    assert err.getvalue().startswith("error: cannot reach the API server at http://127.0.0.1:9: ")


async def test_watch_prints_a_frame_every_interval_until_stopped() -> None:
    shown = iter(["one\n", "two\n", "three\n"])
    slept: list[float] = []

    async def frame() -> str:
        return next(shown)

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    out = io.StringIO()
    assert await cli.watch(frame, out, 2.0, frames=3, sleep=sleep) == 0
    assert out.getvalue() == "one\n\ntwo\n\nthree\n"  # not a terminal: frames one after another
    assert slept == [2.0, 2.0]


async def test_watch_redraws_in_place_on_a_terminal() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    async def frame() -> str:
        return "frame\n"

    async def sleep(_: float) -> None:
        return None

    out = Terminal()
    await cli.watch(frame, out, 1.0, frames=2, sleep=sleep)
    assert out.getvalue() == f"{cli.CLEAR}frame\n{cli.CLEAR}frame\n"


def test_the_namespace_is_chosen_as_kubectl_chooses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config"
    config.write_text(
        "current-context: dev\n"
        "contexts: [{name: dev, context: {namespace: team-a}}, {name: prod, context: {}}]\n"
    )
    assert default_namespace(Target(str(config))) == "team-a"
    assert default_namespace(Target(str(config), "prod")) == "default"
    assert default_namespace(Target(str(config), "dev", "team-b")) == "team-b"
    monkeypatch.setenv("KUBECONFIG", f"{config}:{tmp_path / 'second'}")
    assert default_namespace(Target()) == "team-a"  # the first file of $KUBECONFIG
    assert context_names(Target()) == ["dev", "prod"]
