"""The image as ``make image`` builds it (``hack/image/build.sh``: an OCI archive, no registry and
no Docker), proven without Docker:

- two forced builds of one tree give the same manifest digest (and the same kopf-dra wheel);
- the archive is what ``ctr images import`` tags ``docker.io/library/kopf-dra:<version>``, with
  uid 65532 in its passwd database and nothing of the build left in it;
- the Dockerfile describes the same image (base, Debian packages, venv, user, environment,
  entrypoint), since the test machines cannot build it;
- every kopf component and the simulated fabric manager, started from the archive's root
  filesystem by runc as the image's user (and as a uid without a passwd entry, as OpenShift
  assigns them) on a read-only root with no USER or LOGNAME, becomes ready against the test's
  kube-apiserver and stays up: the first deployment of the image crash-looped, kopf asking
  ``getpass.getuser()`` for a uid without a passwd entry.

Needs root, mmdebstrap (``hack/image/install-deps.sh``) and runc (``hack/node/install-deps.sh``),
and deb.debian.org and PyPI for a build that is not cached; without them the module is skipped,
naming what is missing, except under ``CI=true``, where that is a failure.
``KOPF_DRA_IMAGE_ARCHIVE=<archive>`` runs the checks on that archive instead of building one.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime
import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from operators import __version__
from operators.components import COMPONENTS
from operators.kube.api import KubeAPI, NotFoundError
from operators.localcluster.controlplane import free_port
from tests.integration.helpers import eventually, unique
from tests.requires import unavailable

ROOT = Path(__file__).resolve().parents[2]
IMAGE_DIR = ROOT / "hack" / "image"
NAME = f"docker.io/library/kopf-dra:{__version__}"
NONROOT = "nonroot:x:65532:65532:nonroot:/nonexistent:/usr/sbin/nologin"
# A uid the image's passwd database does not list (OpenShift assigns such uids, with gid 0).
UNLISTED = (1000680000, 0)
# What the build copies of the tree (hack/image/build.sh stages the wheel's sources from it).
TREE = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE", "operators",
        "manifests", "crds", "hack")  # fmt: skip
# The kopf operators: the components ``kopf-dra run`` starts on operators.runtime.
OPERATORS = sorted(name for name, c in COMPONENTS.items() if c.controller)


def _missing() -> list[str]:
    missing = []
    if os.geteuid() != 0:
        missing.append("root (mmdebstrap's root mode, runc)")
    if shutil.which("runc") is None:
        missing.append("runc (hack/node/install-deps.sh)")
    if shutil.which("mmdebstrap") is None and not os.environ.get("KOPF_DRA_IMAGE_ARCHIVE"):
        missing.append("mmdebstrap (hack/image/install-deps.sh)")
    return missing


def _require_prerequisites() -> None:
    missing = _missing()
    if missing:
        unavailable("the image tests need: " + "; ".join(missing))


def build(tree: Path, *args: str, env: dict[str, str] | None = None) -> Path:
    """``hack/image/build.sh`` of ``tree``; its contract: the last stdout line is the archive."""
    proc = subprocess.run(
        [str(tree / "hack" / "image" / "build.sh"), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable, **(env or {})},
        check=False,
        timeout=1200,
    )
    assert proc.returncode == 0, f"build.sh {args}: {proc.stdout[-2000:]}{proc.stderr[-4000:]}"
    archive = Path(proc.stdout.strip().splitlines()[-1])
    assert archive.is_absolute(), proc.stdout
    assert archive.is_file(), proc.stdout
    print(proc.stderr.strip().splitlines()[-1])
    return archive


@dataclasses.dataclass(frozen=True)
class Archive:
    """An OCI image archive of one manifest with one gzipped layer, read with the standard
    library as ``ctr images import`` reads it."""

    path: Path

    def _json(self, tar: tarfile.TarFile, name: str) -> dict[str, Any]:
        member = tar.extractfile(name)
        assert member is not None, name
        value: dict[str, Any] = json.load(member)
        return value

    def _blob(self, digest: str) -> str:
        algorithm, _, hexdigest = digest.partition(":")
        assert algorithm == "sha256", digest
        return f"blobs/sha256/{hexdigest}"

    @property
    def index(self) -> dict[str, Any]:
        with tarfile.open(self.path) as tar:
            return self._json(tar, "index.json")

    @property
    def manifest_digest(self) -> str:
        (manifest,) = self.index["manifests"]
        digest: str = manifest["digest"]
        return digest

    @property
    def manifest(self) -> dict[str, Any]:
        with tarfile.open(self.path) as tar:
            return self._json(tar, self._blob(self.manifest_digest))

    @property
    def config(self) -> dict[str, Any]:
        with tarfile.open(self.path) as tar:
            return self._json(tar, self._blob(self.manifest["config"]["digest"]))

    @contextlib.contextmanager
    def layer(self) -> Iterator[tarfile.TarFile]:
        (layer,) = self.manifest["layers"]
        with tarfile.open(self.path) as tar:
            blob = tar.extractfile(self._blob(layer["digest"]))
            assert blob is not None
            with tarfile.open(fileobj=blob, mode="r|gz") as entries:
                yield entries

    def unpack(self, rootfs: Path) -> None:
        """The root filesystem with its owners and modes, as containerd's snapshotter has it."""
        (layer,) = self.manifest["layers"]
        rootfs.mkdir(parents=True)
        with tarfile.open(self.path) as tar:
            blob = tar.extractfile(self._blob(layer["digest"]))
            assert blob is not None
            proc = subprocess.run(
                ["tar", "-xz", "--numeric-owner", "-C", str(rootfs)],
                input=blob.read(),
                capture_output=True,
                check=False,
            )
        assert proc.returncode == 0, proc.stderr.decode()[-2000:]


@pytest.fixture(scope="module")
def image() -> Archive:
    """The archive of this tree, as ``make image`` builds it (reused while its inputs stay)."""
    _require_prerequisites()
    given = os.environ.get("KOPF_DRA_IMAGE_ARCHIVE")
    return Archive(Path(given) if given else build(ROOT))


@pytest.fixture(scope="module")
def rootfs(image: Archive, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("image") / "rootfs"
    image.unpack(path)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _copy_tree(target: Path) -> None:
    target.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "bin", "_share")
    for name in TREE:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=ignore, symlinks=True)
        else:
            shutil.copy2(source, target / name)


def test_two_builds_of_one_tree_give_one_digest(tmp_path: Path) -> None:
    """Two forced builds of one copy of the tree (a copy: the checkout may change meanwhile),
    each into a directory of its own, at the last commit's date."""
    _require_prerequisites()
    if os.environ.get("KOPF_DRA_IMAGE_ARCHIVE"):
        pytest.skip("KOPF_DRA_IMAGE_ARCHIVE: checking a given archive, not building")
    _copy_tree(tmp_path / "tree")
    epoch = subprocess.run(
        ["git", "-C", str(ROOT), "log", "-1", "--format=%ct"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    env = {"SOURCE_DATE_EPOCH": epoch or "0"}
    first, second = (
        build(tmp_path / "tree", "--force", "--out", str(tmp_path / out), env=env)
        for out in ("first", "second")
    )
    assert first.parent != second.parent
    digests = [Archive(first).manifest_digest, Archive(second).manifest_digest]
    print(f"manifest digests: {digests[0]} {digests[1]}")
    assert digests[0] == digests[1]
    assert first.read_bytes() == second.read_bytes()
    # The project's own wheel too (setuptools honours SOURCE_DATE_EPOCH).
    (wheel_1,) = first.parent.glob("kopf_dra-*.whl")
    (wheel_2,) = second.parent.glob("kopf_dra-*.whl")
    assert (
        hashlib.sha256(wheel_1.read_bytes()).digest()
        == hashlib.sha256(wheel_2.read_bytes()).digest()
    )


def test_the_archive_is_the_image_ctr_imports(image: Archive) -> None:
    (entry,) = image.index["manifests"]
    assert entry["annotations"]["io.containerd.image.name"] == NAME
    assert entry["annotations"]["org.opencontainers.image.ref.name"] == __version__
    assert image.manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    (layer,) = image.manifest["layers"]
    assert layer["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip"
    config = image.config
    assert config["os"] == "linux"
    assert config["config"]["User"] == "65532:65532"
    assert config["config"]["Entrypoint"] == ["kopf-dra"]
    assert config["config"]["WorkingDir"] == "/tmp"
    env = dict(e.split("=", 1) for e in config["config"]["Env"])
    assert env["PATH"].startswith("/opt/kopf-dra/bin:")
    assert not {"USER", "LOGNAME", "HOME"} & set(env)


def test_the_root_filesystem_has_the_user_and_nothing_of_the_build(image: Archive) -> None:
    created = datetime.datetime.fromisoformat(image.config["created"]).timestamp()
    files: dict[str, bytes] = {}
    names = []
    with image.layer() as entries:
        for entry in entries:
            names.append(entry.name)
            assert entry.mtime <= created, entry.name
            assert not entry.isdev(), entry.name
            assert not entry.isfifo(), entry.name
            assert (entry.uname, entry.gname) == ("", ""), entry.name  # numeric owners
            if entry.name in ("etc/passwd", "etc/group", "etc/machine-id"):
                data = entries.extractfile(entry)
                assert data is not None
                files[entry.name] = data.read()
    assert NONROOT in files["etc/passwd"].decode().splitlines()
    assert "nonroot:x:65532:" in files["etc/group"].decode().splitlines()
    assert files.get("etc/machine-id", b"") == b""
    leftovers = [
        n
        for n in names
        if re.match(r"(var/lib/apt/lists/.|var/cache/apt/.|var/log/(apt|dpkg|alternatives)"
                    r"|etc/apt/|etc/resolv\.conf$|etc/hostname$|tmp/.|dev/.)", n)
    ]  # fmt: skip
    assert leftovers == []
    venv = "opt/kopf-dra/lib/python3.11/site-packages/"
    assert "opt/kopf-dra/bin/kopf-dra" in names
    assert f"{venv}operators/__init__.py" in names
    # Compiled at build time (the root filesystem is read-only at run time), no pip in the venv.
    assert any(n.startswith(f"{venv}kubernetes_asyncio/") and n.endswith(".pyc") for n in names)
    assert not any(n.startswith(f"{venv}pip/") for n in names)


# --- the Dockerfile -------------------------------------------------------------------------


def _dockerfile_stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's instructions by stage: (INSTRUCTION, arguments), continuations joined."""
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    instructions: list[str] = []
    pending = ""
    for line in lines:
        if line.lstrip().startswith("#") or not line.strip():
            continue
        pending += line.rstrip().removesuffix("\\") + " "
        if not line.rstrip().endswith("\\"):
            instructions.append(pending.strip())
            pending = ""
    stages: list[list[tuple[str, str]]] = []
    for instruction in instructions:
        keyword, _, rest = instruction.partition(" ")
        if keyword.upper() == "FROM":
            stages.append([])
        stages[-1].append((keyword.upper(), rest.strip()))
    return stages


def _pairs(arguments: str) -> dict[str, str]:
    return dict(word.split("=", 1) for word in shlex.split(arguments))


def _apt_installs(run: str) -> list[str]:
    packages: list[str] = []
    for command in run.split("&&"):
        words = shlex.split(command)
        if words[:2] == ["apt-get", "install"]:
            packages += [w for w in words[2:] if not w.startswith("-")]
    return packages


def _lines(path: Path) -> list[str]:
    return [ln.strip() for ln in path.read_text().splitlines() if ln.strip() and ln[0] != "#"]


def test_the_dockerfile_builds_the_same_image(image: Archive) -> None:
    build_stage, runtime = _dockerfile_stages()
    assert build_stage[0] == ("FROM", "debian:bookworm-slim AS build")
    assert runtime[0] == ("FROM", "debian:bookworm-slim")
    # The venv from the same script, the same locks and the same sources as build.sh's.
    build_runs = [args for keyword, args in build_stage if keyword == "RUN"]
    assert "hack/image/venv.sh /wheels /src /opt/kopf-dra" in build_runs
    assert any("--require-hashes" in r and "hack/image/requirements.lock" in r for r in build_runs)
    assert ("COPY", "--from=build /opt/kopf-dra /opt/kopf-dra") in runtime
    config = image.config["config"]
    last = dict(runtime)
    assert last["USER"] == config["User"]
    assert last["WORKDIR"] == config["WorkingDir"]
    assert json.loads(last["ENTRYPOINT"]) == config["Entrypoint"]
    assert json.loads(last["CMD"]) == config["Cmd"]
    assert _pairs(last["ENV"]) == dict(e.split("=", 1) for e in config["Env"])
    assert _pairs(last["LABEL"]) == config["Labels"]
    runs = [args for keyword, args in runtime if keyword == "RUN"]
    installed = [p for run in runs for p in _apt_installs(run)]
    assert installed == _lines(IMAGE_DIR / "packages")
    echoed = [w for run in runs for w in shlex.split(run)]
    assert NONROOT in echoed
    assert "nonroot:x:65532:" in echoed
    # What the build context holds: every directory setup.py carries, and hack/image.
    shared = re.search(r"^SHARED = \((.*)\)$", (ROOT / "setup.py").read_text(), re.M)
    assert shared is not None
    allowed = set(_lines(ROOT / ".dockerignore"))
    for name in [*re.findall(r'"([^"]+)"', shared.group(1)), "hack/image", "operators"]:
        assert f"!{name}/" in allowed, name


# --- the components, from the image, by runc --------------------------------------------------


@dataclasses.dataclass
class Container:
    id: str
    bundle: Path
    process: subprocess.Popen[bytes]

    @property
    def log(self) -> str:
        return (self.bundle / "output.log").read_text(errors="replace")


class Runc:
    """Containers of one root filesystem, each an OCI runtime bundle of runc's own default spec
    with the image's settings: read-only root, the host's network (the API server is on
    127.0.0.1), a tmpfs /tmp, no capabilities, no new privileges."""

    def __init__(self, state: Path, rootfs: Path, config: dict[str, Any]) -> None:
        self.state = state
        self.rootfs = rootfs
        self.config = config
        self.containers: list[Container] = []

    def _runc(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            ["runc", "--root", str(self.state), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert not check or proc.returncode == 0, f"runc {args}: {proc.stderr}"
        return proc

    def spec(self, bundle: Path, args: list[str], user: tuple[int, int], mounts: Path) -> None:
        self._runc("spec", "--bundle", str(bundle))
        spec = json.loads((bundle / "config.json").read_text())
        spec["root"] = {"path": str(self.rootfs), "readonly": True}
        process = spec["process"]
        process.update(
            terminal=False,
            args=args,
            cwd=self.config["WorkingDir"],
            # The image's environment alone: no USER, LOGNAME or HOME, which getpass would read.
            env=list(self.config["Env"]),
            user={"uid": user[0], "gid": user[1]},
            noNewPrivileges=True,
        )
        process["capabilities"] = {k: [] for k in process["capabilities"]}
        process.pop("rlimits", None)
        linux = spec["linux"]
        linux["namespaces"] = [n for n in linux["namespaces"] if n["type"] != "network"]
        # One level: runc delete removes it, no parent left behind.
        linux["cgroupsPath"] = f"/kopf-dra-image-test-{bundle.name}"
        spec["mounts"] += [
            {
                "destination": "/tmp",
                "type": "tmpfs",
                "source": "tmpfs",
                "options": ["nosuid", "nodev", "mode=1777", "size=16m"],
            },
            {
                "destination": "/tmp/kube",
                "type": "bind",
                "source": str(mounts),
                "options": ["rbind", "ro"],
            },
        ]
        (bundle / "config.json").write_text(json.dumps(spec))

    def run(self, bundle: Path, args: list[str], user: tuple[int, int], mounts: Path) -> Container:
        bundle.mkdir(parents=True)
        self.spec(bundle, args, user, mounts)
        with (bundle / "output.log").open("wb") as log:
            process = subprocess.Popen(
                ["runc", "--root", str(self.state), "run", "--bundle", str(bundle), bundle.name],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        container = Container(bundle.name, bundle, process)
        self.containers.append(container)
        return container

    def status(self, container: Container) -> str:
        proc = self._runc("state", container.id, check=False)
        if proc.returncode != 0:
            return "gone"
        status: str = json.loads(proc.stdout)["status"]
        return status

    def remove_all(self) -> None:
        for container in self.containers:
            self._runc("kill", container.id, "KILL", check=False)
            with contextlib.suppress(subprocess.TimeoutExpired):
                container.process.wait(timeout=30)
            if container.process.poll() is None:
                container.process.kill()
                container.process.wait(timeout=10)
            self._runc("delete", "--force", container.id, check=False)
            shutil.rmtree(container.bundle, ignore_errors=True)
        self.containers.clear()


def self_contained_kubeconfig(kubeconfig: Path, target: Path) -> None:
    """The test's kubeconfig with its files' contents inline: only it is mounted."""
    config = yaml.safe_load(kubeconfig.read_text())
    for section, key in (("clusters", "cluster"), ("users", "user")):
        for entry in config.get(section, []):
            fields = entry[key]
            for field in ("certificate-authority", "client-certificate", "client-key"):
                if field in fields:
                    data = Path(fields.pop(field)).read_bytes()
                    fields[f"{field}-data"] = base64.b64encode(data).decode()
    target.write_text(json.dumps(config))
    target.chmod(0o644)


@pytest.fixture
def runc(
    rootfs: Path, image: Archive, tmp_path: Path, kubeconfig: Path
) -> Iterator[tuple[Runc, Path]]:
    mounts = tmp_path / "kube"
    mounts.mkdir(mode=0o755)
    mounts.chmod(0o755)
    self_contained_kubeconfig(kubeconfig, mounts / "kubeconfig")
    tokens = mounts / "fabric-tokens"
    tokens.mkdir()
    tokens.chmod(0o755)
    token = hashlib.sha256(os.urandom(16)).hexdigest()
    for path in (tokens / "default", mounts / "fabric-token"):
        path.write_text(token)
        path.chmod(0o644)
    state = tmp_path / "runc"
    runtime = Runc(state, rootfs, image.config["config"])
    try:
        yield runtime, mounts
    finally:
        runtime.remove_all()


@pytest.mark.parametrize(
    "user", [None, UNLISTED], ids=["the image's user", "a uid without a passwd entry"]
)
async def test_every_component_runs_from_the_image(
    runc: tuple[Runc, Path],
    image: Archive,
    kube: KubeAPI,
    rbac_applied: list[dict[str, Any]],
    tmp_path: Path,
    user: tuple[int, int] | None,
) -> None:
    runtime, _ = runc
    config = image.config["config"]
    if user is None:
        uid, _, gid = config["User"].partition(":")
        user = (int(uid), int(gid))
    entrypoint: list[str] = config["Entrypoint"]
    manager_port = free_port()
    leases: dict[str, list[str]] = {}
    ports: dict[str, int] = {}
    commands: dict[str, list[str]] = {}
    driver = f"{unique('fabric')}.example.com"
    for component in OPERATORS:
        lease = unique(f"image-{component}")
        ports[component] = free_port()
        args = [
            "run", component, "--kubeconfig", "/tmp/kube/kubeconfig", "--log-json",
            "--metrics-bind-address", f"127.0.0.1:{ports[component]}",
            "--lease-name", lease, "--lease-namespace", "default",
        ]  # fmt: skip
        leases[component] = [lease]
        if component == "claims":
            leases[component].append(unique("image-claims-reservations"))
            args += ["--reservations-lease-name", leases[component][1]]
            args += ["--scheduler-names", unique("image-scheduler")]
        if component == "scheduler":
            args += ["--scheduler-name", unique("image-scheduler")]
        if component == "fabric":
            args += [
                "--manager-url", f"http://127.0.0.1:{manager_port}",
                "--manager-token-file", "/tmp/kube/fabric-token",
                "--driver-name", driver, "--fabric-name", unique("fabric"),
            ]  # fmt: skip
        commands[component] = args
    commands["fabric-manager-sim"] = [
        "run", "fabric-manager-sim", "--tokens-dir", "/tmp/kube/fabric-tokens",
        "--host", "127.0.0.1", "--port", str(manager_port),
    ]  # fmt: skip
    ports["fabric-manager-sim"] = manager_port
    containers = {
        name: runtime.run(
            tmp_path / "bundles" / f"kd-{name}-{os.getpid()}-{unique('c')[-6:]}",
            [*entrypoint, *args],
            user,
            runc[1],
        )
        for name, args in commands.items()
    }

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:

        async def answers(name: str, path: str) -> bool:
            container = containers[name]
            if container.process.poll() is not None:
                raise AssertionError(
                    f"{name} exited ({container.process.returncode}) as uid {user[0]}:\n"
                    + container.log[-3000:]
                )
            try:
                async with http.get(f"http://127.0.0.1:{ports[name]}{path}") as response:
                    return response.status == 200
            except (TimeoutError, aiohttp.ClientError):
                return False

        async def held(lease: str) -> str | None:
            try:
                found = await kube.get("Lease", lease, "default")
            except NotFoundError:
                return None
            holder: str | None = found.get("spec", {}).get("holderIdentity")
            return holder

        # Seven interpreters start at once on a busy machine: a generous deadline.
        for name in containers:
            path = "/healthz" if name == "fabric-manager-sim" else "/readyz"
            await eventually(
                functools.partial(answers, name, path),
                within=180,
                what=f"{name} to answer {path} from the image as uid {user[0]}",
            )
        for component in OPERATORS:
            for lease in leases[component]:
                await eventually(
                    functools.partial(held, lease),
                    within=60,
                    what=f"{component}'s Lease {lease} to have a holder",
                )
        # Still up a moment later: the Leases renewed, the containers running.
        renewed = {lease: (await kube.get("Lease", lease, "default"))["spec"]["renewTime"]
                   for names in leases.values() for lease in names}  # fmt: skip
        for lease, before in renewed.items():

            async def renewed_since(lease: str = lease, before: str = before) -> bool:
                spec = (await kube.get("Lease", lease, "default"))["spec"]
                return bool(spec["renewTime"] != before)

            await eventually(renewed_since, within=60, what=f"the Lease {lease} to be renewed")
        for name, container in containers.items():
            assert runtime.status(container) == "running", f"{name}:\n{container.log[-3000:]}"
            assert "Traceback" not in container.log, f"{name}:\n{container.log[-3000:]}"
    for slice_ in (await kube.list("ResourceSlice"))["items"]:
        if slice_["spec"]["driver"] == driver:
            await kube.delete("ResourceSlice", slice_["metadata"]["name"])


def test_kopf_dra_version_runs_from_the_image(
    runc: tuple[Runc, Path], image: Archive, tmp_path: Path
) -> None:
    """The image's entrypoint and command as they are: ``kopf-dra version``."""
    runtime, mounts = runc
    config = image.config["config"]
    uid, _, gid = config["User"].partition(":")
    container = runtime.run(
        tmp_path / "bundles" / f"kd-version-{os.getpid()}",
        [*config["Entrypoint"], *config["Cmd"]],
        (int(uid), int(gid)),
        mounts,
    )
    assert container.process.wait(timeout=120) == 0, container.log
    assert container.log.strip() == f"kopf-dra {__version__}"
