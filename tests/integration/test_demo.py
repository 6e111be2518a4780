"""``kopf-dra demo --once`` (what ``make run`` runs, with a single frame): the view shows pods
bound to devices, and when it ends no process it started is left running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.requires import require_control_plane


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose, and never ours to reap here.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


def test_demo_once_shows_bound_pods_and_leaves_nothing_running(tmp_path: Path) -> None:
    # The demo starts a local control plane of its own, whichever cluster the session uses.
    require_control_plane()
    pid_file = tmp_path / "pids.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOPF_DRA_")}
    env.pop("KUBECONFIG", None)
    proc = subprocess.run(
        [
            sys.executable, "-m", "operators.cli", "demo", "--once",
            "--examples", "mig-partitions,shared-nic-bandwidth",
            "--state-dir", str(tmp_path / "state"), "--pid-file", str(pid_file),
            "--timeout", "90",
        ],
        capture_output=True, text=True, env=env, timeout=180, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    view = proc.stdout
    # Four MIG workloads and the five NIC pods (the demo has a NIC node), bound, with devices.
    assert "PODS  9 bound, 0 pending" in view, view
    assert "kopf-dra-mig/train" in view
    assert "-mig-3g-20gb-" in view
    assert "(bandwidth 60G)" in view
    assert "(bandwidth 40G)" in view
    assert "gpu-0-counters" in view
    assert "slices " in view
    assert "PENDING  0" in view
    pids = json.loads(pid_file.read_text())
    # A driver per virtual node, and the operators.
    assert len(pids) >= 5
    assert [pid for pid in pids if _alive(pid)] == []
    # The control plane (etcd, kube-apiserver) the demo started is gone too.
    assert "stopped, nothing left running" in proc.stderr
    leftovers = subprocess.run(
        ["pgrep", "-f", str(tmp_path)], capture_output=True, text=True, check=False
    ).stdout.split()
    assert leftovers == []


@pytest.mark.parametrize(
    ("example", "pods", "groups"),
    [
        ("rack-training", 8, ("kopf-dra-rack/training",)),
        ("composite-training", 6, ("kopf-dra-composite/leader", "kopf-dra-composite/workers")),
    ],
)
def test_demo_shows_a_rack_constrained_example_placed_in_its_rack(
    tmp_path: Path, example: str, pods: int, groups: tuple[str, ...]
) -> None:
    """The examples' READMEs' ``make run DEMO_ARGS="--examples NAME"``: every pod bound in the
    demo's one rack (eight GPUs), each PodGroup scheduled."""
    require_control_plane()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOPF_DRA_")}
    env.pop("KUBECONFIG", None)
    proc = subprocess.run(
        [
            sys.executable, "-m", "operators.cli", "demo", "--once",
            "--examples", example,
            "--state-dir", str(tmp_path / "state"), "--timeout", "90",
        ],
        capture_output=True, text=True, env=env, timeout=180, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    view = proc.stdout
    assert f"PODS  {pods} bound, 0 pending" in view, view
    for group in groups:
        (row,) = [line for line in view.splitlines() if f"{group} " in line]
        assert row.rstrip().endswith("True Scheduled"), row
