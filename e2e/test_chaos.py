"""The chaos suite's quick subset for ``make test``: the scheduler SIGKILLed and restarted
during a small burst (seed 1) breaks no invariant. The full suite is ``make chaos``."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Final

import pytest

from e2e.chaos.runner import run_scenario
from e2e.chaos.scenarios import SCENARIOS

# 40 pods for 32 devices: some still wait, as in the full scenario.
QUICK: Final = dataclasses.replace(
    SCENARIOS["kill-scheduler"], pods=40, devices=8, burst_seconds=6.0
)


@pytest.mark.skipif(
    os.environ.get("KOPF_DRA_USE_EXISTING_CLUSTER") == "1",
    reason="needs its own local control plane (it restarts components)",
)
async def test_scheduler_killed_during_a_burst(tmp_path: Path) -> None:
    outcome = await run_scenario(QUICK, 1, tmp_path, sys.stdout)
    assert not outcome.failed, [str(v) for v in outcome.violations] or outcome.error
