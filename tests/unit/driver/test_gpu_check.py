"""hack/gpu/check.sh's checks against the fake NVML, without kopf or the Kubernetes client."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .gpu import FIXTURE

ROOT = Path(__file__).resolve().parents[3]
BLOCKED = ["kopf", "kubernetes_asyncio", "structlog", "prometheus_client"]


def test_the_gpu_check_passes_on_the_fixture_without_the_cluster_client(tmp_path: Path) -> None:
    code = (
        "import sys, runpy\n"
        f"for m in {BLOCKED!r}: sys.modules[m] = None\n"
        "check = runpy.run_path(sys.argv[1])\n"
        "sys.exit(check['main'](['--fake', sys.argv[2], '--out', sys.argv[3]]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "hack/gpu/check.py"), str(FIXTURE), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert not [line for line in lines if line.startswith("FAIL")]
    assert sum(line.startswith("PASS") for line in lines) == 7
    assert (
        "SKIP: NVML through the spec's library alone reads the device's UUID - fake NVML" in lines
    )
    assert "gpu.nvidia.com/productName:" in done.stdout
    (spec,) = tmp_path.glob("*.json")
    assert "NVIDIA_VISIBLE_DEVICES=GPU-e12c465b-7250-edd3-93a8-8110a161e2c0" in spec.read_text()
