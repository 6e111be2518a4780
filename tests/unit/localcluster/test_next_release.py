"""hack/next-release.sh finds the newest tag of the next minor on a Go module proxy (here a
file:// proxy of the test's own) and says whether the pin in hack/controlplane/VERSIONS is it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from operators.localcluster.files import project_root

SCRIPT = project_root() / "hack" / "next-release.sh"
VERSIONS = project_root() / "hack" / "controlplane" / "VERSIONS"


def _run(proxy: Path, tags: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    listing = proxy / "k8s.io" / "kubernetes" / "@v" / "list"
    listing.parent.mkdir(parents=True, exist_ok=True)
    listing.write_text("".join(f"{t}\n" for t in tags))
    env = {**os.environ, "GOPROXY": f"file://{proxy}", "GOFLAGS": ""}
    return subprocess.run(
        [str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture
def pinned() -> str:
    return VERSIONS.read_text().split()[-1]


def test_the_pinned_tag_when_it_is_the_newest(tmp_path: Path, pinned: str) -> None:
    done = _run(tmp_path, ["v1.37.2", pinned, "v1.36.3"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"newest: {pinned}", f"pinned: {pinned}"]


def test_a_newer_pre_release_then_the_release_itself_is_asked_for(
    tmp_path: Path, pinned: str
) -> None:
    minor = ".".join(pinned.removeprefix("v").split(".")[:2])
    rc = f"v{minor}.0-rc.1"
    done = _run(tmp_path, [pinned, f"v{minor}.0-rc.0", rc, f"v{minor}.0-alpha.3"])
    assert done.returncode == 3, done.stderr
    assert f"newest: {rc}" in done.stdout
    assert "--pin" in done.stderr
    done = _run(tmp_path, [pinned, rc, f"v{minor}.0", f"v{minor}.1"])
    assert done.returncode == 3, done.stderr
    assert f"newest: v{minor}.0\n" in done.stdout, "a release beats its pre-releases"


def test_a_minor_nobody_serves_is_said(tmp_path: Path) -> None:
    done = _run(tmp_path, ["v1.37.2"], "1.99")
    assert done.returncode == 1
    assert "serves no tag of Kubernetes 1.99" in done.stderr
