"""``make run CLUSTER=1`` (``kopf-dra demo --in-cluster``): the complete local cluster, kopf-dra
installed with Helm, the examples Running with their devices in the live view, and nothing
left behind once it stops (the host's nftables ruleset and directories as before)."""

from __future__ import annotations

import os
import subprocess
import sys

from operators.localcluster import cluster, realnode

MIG_PODS = (
    "kopf-dra-mig/train",
    "kopf-dra-mig/infer",
    "kopf-dra-mig/notebook",
    "kopf-dra-mig/pair",
)


def test_make_run_cluster_shows_the_examples_running_and_leaves_nothing(
    prerequisites: None,
) -> None:
    before = cluster.ruleset()
    paths = {p: p.exists() for p in realnode.FIXED_PATHS}
    argv = [sys.executable, "-m", "operators.cli", "demo", "--in-cluster", "--once"]
    argv += ["--examples", "mig-partitions", "--timeout", "240"]
    if os.environ.get("KOPF_DRA_E2E_IMAGE"):
        argv += ["--image", os.environ["KOPF_DRA_E2E_IMAGE"]]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=1500)
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    frame = done.stdout[done.stdout.index("kopf-dra demo  ") :]
    pods = frame[frame.index("\nPODS") :].split("\n\n")[0]  # the PODS section, to its end
    rows = {line.split()[0]: line.split() for line in pods.splitlines() if line.startswith("  ")}
    for pod in MIG_PODS:
        node, phase, *devices = rows[pod][1:]
        assert phase == "Running", rows[pod]
        assert devices[0].startswith(f"{node}/gpu-0-mig-"), rows[pod]
    assert "installed with Helm" in frame
    assert "CONTAINERS" in frame, "what each container sees of its devices"
    assert "stopped, nothing left running" in done.stderr
    assert cluster.ruleset() == before
    assert not cluster.NODE_BASE.exists()
    assert {p: p.exists() for p in realnode.FIXED_PATHS} == paths
