"""The README's NVIDIA section, run as written: its DeviceClass and claims against the H100
fixture as the driver publishes it, and its ``hack/gpu/check.sh --fake`` command."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from operators.allocator import AllocatedState, Allocator, Features, Status
from operators.allocator.selectors import CelSelectorEngine
from operators.api.core import Node
from operators.api.resource import DeviceClass, ResourceClaim, ResourceSlice

from .gpu import NODE, slices, source

ROOT = Path(__file__).resolve().parents[3]
SECTION = "## NVIDIA GPUs"


def _section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(SECTION)
    return text[start : text.index("\n## ", start + 1)]


def _documents() -> list[dict[str, Any]]:
    (block,) = re.findall(r"```yaml\n(.*?)```", _section(), re.S)
    return list(yaml.safe_load_all(block))


def _allocate(published: list[ResourceSlice], claim: ResourceClaim) -> list[str]:
    docs = _documents()
    classes = [DeviceClass.load(d) for d in docs if d["kind"] == "DeviceClass"]
    features = Features.all()
    allocator = Allocator(
        features,
        AllocatedState.from_claims([], features),
        classes,
        published,
        CelSelectorEngine(),
        share_ids=lambda: "share",
    )
    node = Node.load({"metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}}})
    outcome = allocator.allocate(node, [claim])
    if outcome.status is not Status.SUCCESS:
        return []
    return [r.device or "" for r in outcome.results[0].devices.results]


def _claims() -> dict[str, ResourceClaim]:
    return {
        d["metadata"]["name"]: ResourceClaim.load(
            {**d, "metadata": {**d["metadata"], "namespace": "ns", "uid": d["metadata"]["name"]}}
        )
        for d in _documents()
        if d["kind"] == "ResourceClaim"
    }


def test_the_readmes_claims_get_what_they_say_on_the_fixtures_h100() -> None:
    whole = slices(source().inventory(NODE))  # MIG mode off, as read
    dynamic = slices(source(mig=True, dynamic=True).inventory(NODE))
    claims = _claims()
    assert _allocate(whole, claims["whole-h100"]) == ["gpu-0"]
    assert _allocate(whole, claims["one-1g-10gb"]) == [], "MIG off: no partitions"
    (small,) = _allocate(dynamic, claims["one-1g-10gb"])
    assert small.startswith("gpu-0-mig-19-")
    pair = _allocate(dynamic, claims["two-partitions-one-gpu"])
    assert [d.split("-")[3] for d in pair] == ["19", "9"], pair  # 1g.10gb and 3g.40gb


def test_the_readmes_check_command_runs_as_written_on_the_fake_nvml(tmp_path: Path) -> None:
    (command,) = re.findall(r"```bash\n(hack/gpu/check\.sh --fake .+)\n```", _section())
    env = {**os.environ, "PYTHON": sys.executable, "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        ["bash", *command.split()],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    verdicts = [line.split(":")[0] for line in done.stdout.splitlines()]
    assert verdicts.count("PASS") == 7
    assert "FAIL" not in verdicts
