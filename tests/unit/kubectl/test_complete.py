"""``kubectl_complete-dra``: what kubectl's plugin completion is offered for each word."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from operators.kubectl import complete
from operators.kubectl.connect import Target


@pytest.mark.parametrize(
    ("words", "what", "offered"),
    [
        ([""], "words", ("claims", "pools", "why")),
        (["w"], "words", ("why",)),
        (["__complete", "p"], "words", ("pools",)),
        (["why", "-o", ""], "words", ("json", "yaml", "wide")),
        (["pools", "--w"], "words", ("--watch",)),
        (["why", "tr"], "pods", ()),
        (["claims", ""], "pods", ()),
        (["why", "trainer", ""], "words", ()),
        (["pools", ""], "words", ()),
        (["-n", "team-a", "why", ""], "pods", ()),
        (["why", "-n", ""], "namespaces", ()),
        (["why", "--context", ""], "contexts", ()),
        (["why", "--kubeconfig", ""], "files", ()),
    ],
)
def test_what_is_offered(words: list[str], what: str, offered: tuple[str, ...]) -> None:
    want = complete.wanted(words)
    assert want.what == what
    assert tuple(complete.candidates(want, want.words)) == offered


def test_flags_with_values_are_read_for_the_cluster_to_ask() -> None:
    want = complete.wanted(["why", "--context=prod", "-n", "team-a", "--kubeconfig", "k", "t"])
    assert want.what == "pods"
    assert want.target == Target("k", "prod", "team-a")
    assert want.prefix == "t"


def test_contexts_come_from_the_kubeconfig(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text("contexts: [{name: prod, context: {}}, {name: dev, context: {}}]\n")
    out = io.StringIO()
    assert complete.main(["why", "--kubeconfig", str(config), "--context", "p"], out) == 0
    assert out.getvalue() == "prod\n:4\n"


def test_no_cluster_offers_no_pods_and_no_error(tmp_path: Path) -> None:
    out = io.StringIO()
    assert complete.main(["why", "--kubeconfig", str(tmp_path / "none"), ""], out) == 0
    assert out.getvalue() == ":4\n"


def test_a_file_argument_leaves_completion_to_the_shell() -> None:
    out = io.StringIO()
    complete.main(["--kubeconfig", ""], out)
    assert out.getvalue() == ":0\n"
