"""The chaos suite's quick subset for ``make test``: the scheduler SIGKILLed and restarted
during a small burst (seed 1) breaks no invariant. The full suite is ``make chaos``.

``make e2e-kind`` leaves it out: it tests a control plane of its own, not the kind cluster."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Final

from e2e.chaos.runner import run_scenario
from e2e.chaos.scenarios import SCENARIOS
from tests.requires import require_control_plane

# 40 pods for 32 devices: some still wait, as in the full scenario.
QUICK: Final = dataclasses.replace(
    SCENARIOS["kill-scheduler"], pods=40, devices=8, burst_seconds=6.0
)


async def test_scheduler_killed_during_a_burst(tmp_path: Path) -> None:
    require_control_plane()  # its own, whichever cluster the session uses: it restarts components
    outcome = await run_scenario(QUICK, 1, tmp_path, sys.stdout)
    assert not outcome.failed, [str(v) for v in outcome.violations] or outcome.error
