"""The install path of the image, proven without Docker: build the wheel from a clean copy of the
sources, install it into a fresh virtualenv, and run every component's entry point from there.

The image does the same with the locked dependencies (``hack/image/venv.sh``, which the Dockerfile
and ``make image`` share; tests/integration/test_image.py runs the components from the image).
Here, to stay fast and offline, the fresh venv installs only the wheel (``--no-deps``) and sees
the already installed dependencies of ``.venv`` through a ``.pth`` line. A ``.pth`` line adds a
directory to ``sys.path`` without running that directory's own ``.pth`` files, so the editable
install of kopf-dra in ``.venv`` stays invisible: the test asserts that ``operators`` is imported
from the fresh venv, and that every requirement the wheel declares is satisfied there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

import pytest

from operators import __version__
from operators.components import COMPONENTS
from operators.localcluster.controlplane import supported_versions

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (
    "pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE", "operators",
    "manifests", "crds", "hack/controlplane", "hack/node", "hack/cluster",
)  # fmt: skip


def _run(*argv: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    # Never from the checkout: a working directory of /work/main would put it on sys.path.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    proc = subprocess.run(
        [str(a) for a in argv],
        capture_output=True,
        text=True,
        cwd=cwd or Path(tempfile.gettempdir()),
        env=env,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, f"{argv}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from a copy of the sources (the checkout gets no build/ directory)."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    src.mkdir()
    for name in SOURCES:
        source = ROOT / name
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(
                source, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )
        else:
            shutil.copy2(source, src / name)
    # No build isolation: setuptools and wheel come from this interpreter, not from PyPI.
    _run(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
        "-q", "-w", work, src,
    )  # fmt: skip
    (built,) = work.glob("kopf_dra-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel; returns its bin directory."""
    venv = tmp_path_factory.mktemp("packaging") / "venv"
    _run(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    _run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel)
    purelib = _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    dependencies = sysconfig.get_paths()["purelib"]
    (Path(purelib.stdout.strip()) / "kopf-dra-test-deps.pth").write_text(dependencies + "\n")
    return venv / "bin"


def test_the_wheel_holds_the_package_and_its_typing_marker(wheel: Path) -> None:
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())
    assert "operators/py.typed" in names
    assert "operators/driver/proto/dra_v1_pb2.py" in names
    assert set(COMPONENTS)
    assert all(f"{c.module.replace('.', '/')}.py" in names for c in COMPONENTS.values())
    assert not any(n.startswith(("tests/", "e2e/", "bench/")) for n in names)
    # What `kopf-dra demo`, `control-plane up` and `cluster up` need outside the Python package.
    share = "operators/_share/"
    assert f"{share}hack/controlplane/build.sh" in names
    assert f"{share}hack/controlplane/VERSIONS" in names
    assert f"{share}hack/controlplane/version.sh" in names
    assert f"{share}hack/controlplane/etcd/go.mod" in names
    assert all(f"{share}hack/controlplane/{v}/go.mod" in names for v in supported_versions())
    assert f"{share}hack/cluster/build.sh" in names
    assert f"{share}hack/cluster/coredns.yaml" in names
    assert f"{share}crds/resourcepoolstatuses.yaml" in names
    assert f"{share}manifests/kustomization.yaml" in names
    assert f"{share}manifests/examples/mig-partitions/kustomization.yaml" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    scripts = archive.read(entry_points).decode()
    assert "kopf-dra = operators.cli:main" in scripts
    assert "kubectl-dra = operators.kubectl.cli:main" in scripts
    assert "kubectl_complete-dra = operators.kubectl.complete:main" in scripts


def test_the_installed_command_runs_from_the_wheel(installed: Path) -> None:
    python = installed / "python"
    where = _run(python, "-c", "import operators; print(operators.__file__)").stdout.strip()
    assert Path(where).is_relative_to(installed.parent), where
    assert _run(installed / "kopf-dra", "version").stdout.strip() == f"kopf-dra {__version__}"
    # The kubectl plugin is on the same PATH, as `pip install kopf-dra` puts it (README).
    assert "kubectl dra why" in _run(installed / "kubectl-dra", "--help").stdout
    unmet = _run(python, "-c", CHECK_REQUIREMENTS).stdout.strip()
    assert unmet == "", unmet


# The wheel's declared runtime requirements, each satisfied in the fresh venv (not `pip check`,
# which would also judge .venv's development tools).
CHECK_REQUIREMENTS = """
from importlib import metadata
from packaging.requirements import Requirement
for line in metadata.requires("kopf-dra") or []:
    req = Requirement(line)
    if req.marker and not req.marker.evaluate({"extra": ""}):
        continue
    try:
        version = metadata.version(req.name)
    except metadata.PackageNotFoundError:
        print(req.name, "missing")
        continue
    if not req.specifier.contains(version, prereleases=True):
        print(req.name, version, "does not satisfy", req.specifier)
"""


def test_the_demo_runs_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    """`pip install kopf-dra; kopf-dra demo`: the local control plane (built from the wheel's
    copy of hack/controlplane, here already in the cache), the components, an example."""
    proc = subprocess.run(
        [
            str(installed / "kopf-dra"), "demo", "--once", "--examples", "mig-partitions",
            "--state-dir", str(tmp_path / "demo"), "--timeout", "90",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")},
        check=False,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "PODS" in proc.stdout
    assert "run from a kopf-dra checkout" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("component", sorted(COMPONENTS))
def test_every_component_answers_help(installed: Path, component: str) -> None:
    out = _run(installed / "kopf-dra", "run", component, "--help").stdout
    assert f"kopf-dra run {component}" in out
    assert "--log-level" in out
    assert "KOPF_DRA_LOG_LEVEL" in out
