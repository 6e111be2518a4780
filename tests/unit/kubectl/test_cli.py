"""``kubectl-dra``'s command line without a cluster: flags where kubectl takes them, usage
errors, an unreachable cluster, and the ``--watch`` loop."""

from __future__ import annotations

import copy
import functools
import io
import json
from pathlib import Path
from typing import Any, cast

import pytest

from operators.kube.api import ApiError, KubeAPI
from operators.kubectl import cli
from operators.kubectl.connect import Target, context_names, default_namespace
from tests.unit.kubectl.objects import J, node
from tests.unit.kubectl.test_pools import RACK, racks


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


# --- pools --by, against an API of objects in memory ---------------------------------------------


class MemoryAPI(KubeAPI):
    """Lists ``objects`` as the API server would; a kind in ``forbidden`` is refused (403)."""

    def __init__(self, objects: list[J], forbidden: tuple[str, ...] = ()) -> None:
        super().__init__(cast(Any, None))
        self.objects = objects
        self.forbidden = forbidden

    async def version_info(self) -> dict[str, Any]:
        return {"major": "1", "minor": "37", "gitVersion": "v1.37.0"}

    async def list(
        self,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> dict[str, Any]:
        if kind in self.forbidden:
            raise ApiError(403, "Forbidden", f"cannot list {kind}", {})
        items = [copy.deepcopy(o) for o in self.objects if o["kind"] == kind]
        return {"kind": f"{kind}List", "items": items}


async def _pools(api: KubeAPI, *argv: str) -> tuple[int, str, str]:
    args = cli.build_parser().parse_args(["pools", "-n", "team-a", *argv])
    out, err = io.StringIO(), io.StringIO()
    code = await cli.pools(args, api, out, err)
    return code, out.getvalue(), err.getvalue()


async def test_pools_by_a_node_label_is_one_row_per_rack() -> None:
    objects = [*racks(), node("control-plane")]  # no rack: in <none>, with no devices
    code, out, err = await _pools(MemoryAPI(objects), "--by", RACK)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "DOMAIN (topology.example.com/rack)  NODES  DEVICES  ALLOCATED  UNAVAILABLE  AVAILABLE",
        "rack-a                              2      8        3          0            5",
        "rack-b                              2      8        0          0            8",
        "<none>                              1      0        0          0            0",
    ]  # fmt: skip


async def test_pools_by_in_json_adds_the_domains() -> None:
    code, out, _ = await _pools(MemoryAPI(racks()), "--by", RACK, "-o", "json")
    data = json.loads(out)
    assert code == 0
    assert len(data["pools"]) == 4
    assert [(d["domain"], d["available"]) for d in data["domains"]] == [
        ("rack-a", 5),
        ("rack-b", 8),
    ]
    _, plain, _ = await _pools(MemoryAPI(racks()), "-o", "json")
    assert "domains" not in json.loads(plain)


async def test_pools_by_watches(monkeypatch: pytest.MonkeyPatch) -> None:
    async def sleep(_: float) -> None:
        return None

    monkeypatch.setattr(cli, "watch", functools.partial(cli.watch, frames=2, sleep=sleep))
    code, out, _ = await _pools(MemoryAPI(racks()), "--by", RACK, "--watch")
    assert code == 0
    heads = [line for line in out.splitlines() if line.startswith("Every 2s: ")]
    assert len(heads) == 2
    assert all(f"kubectl dra pools --by {RACK}  " in h for h in heads)
    assert sum(line.startswith("rack-a  ") for line in out.splitlines()) == 2


async def test_pools_by_without_reading_nodes_warns_once_and_shows_the_pools(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def sleep(_: float) -> None:
        return None

    monkeypatch.setattr(cli, "watch", functools.partial(cli.watch, frames=2, sleep=sleep))
    api = MemoryAPI(racks(), forbidden=("Node",))
    code, out, err = await _pools(api, "--by", RACK, "--watch")
    assert code == 0
    assert err == (
        "warning: list nodes cluster-wide is forbidden: the pools are shown without domains\n"
    )
    assert "DOMAIN" not in out
    assert sum(line.startswith("DRIVER/POOL") for line in out.splitlines()) == 2
    _, data, _ = await _pools(api, "--by", RACK, "-o", "json")
    assert "domains" not in json.loads(data)


def test_by_takes_a_label_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.build_parser().parse_args(["pools", "--by", RACK]).by == RACK
    assert cli.main(["pools", "--by", "not a key"]) == cli.EXIT_USAGE
    assert "'not a key' is not a label key" in capsys.readouterr().err
    assert cli.main(["pools", "--by", ""]) == cli.EXIT_USAGE
