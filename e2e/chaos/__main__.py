"""``python -m e2e.chaos`` (``make chaos``): run the scenarios, one fresh system each.

Exit status 1 when any invariant failed in any run, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from e2e.chaos.runner import Outcome, run_scenario
from e2e.chaos.scenarios import SCENARIOS as FAULTS
from e2e.chaos.scenarios import Scenario
from e2e.chaos.tenants import TENANT_SCENARIOS

SCENARIOS = {**FAULTS, **{s.name: s for s in TENANT_SCENARIOS}}


def selected(names: Sequence[str]) -> list[Scenario]:
    """Scenarios by name; a name may stand for its variants (``two-schedulers``)."""
    if not names:
        return list(SCENARIOS.values())
    chosen: list[Scenario] = []
    for name in names:
        found = [s for s in SCENARIOS.values() if s.name == name or s.name.startswith(name + "/")]
        if not found:
            raise SystemExit(f"unknown scenario {name!r}; --list shows them")
        chosen += [s for s in found if s not in chosen]
    return chosen


async def run_all(scenarios: Sequence[Scenario], seeds: Sequence[int], workdir: Path) -> int:
    """Each scenario with ``seeds`` (empty: the scenario's own default seeds)."""
    outcomes: list[Outcome] = []
    for scenario in scenarios:
        for seed in seeds or scenario.seeds:
            where = workdir / f"{scenario.name.replace('/', '-')}-seed{seed}"
            outcomes.append(await run_scenario(scenario, seed, where, sys.stdout))
    print("\n=== summary")
    for o in outcomes:
        verdict = "PASS" if not o.failed else "FAIL " + ", ".join(o.failed)
        print(f"{o.scenario:32} seed={o.seed:<4} {o.seconds:5.0f} s  {verdict}")
    failed = sum(1 for o in outcomes if o.failed)
    print(f"{len(outcomes) - failed} passed, {failed} failed")
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.chaos", description=__doc__)
    parser.add_argument(
        "--scenario", action="append", default=[], help="run this one (repeatable; default all)"
    )
    parser.add_argument(
        "--seed",
        action="append",
        type=int,
        default=[],
        help="seed of the random choices (repeatable; default each scenario's, --list shows)",
    )
    parser.add_argument("--workdir", default=None, help="logs and data (default: a temp dir)")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    args = parser.parse_args(argv)
    if args.list:
        for s in SCENARIOS.values():
            seeds = ",".join(map(str, s.seeds))
            print(f"{s.name:32} seeds {seeds:8} {s.summary}")
        return 0
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="kopf-dra-chaos-"))
    print(f"chaos: logs and data in {workdir}")
    return asyncio.run(run_all(selected(args.scenario), args.seed, workdir))


if __name__ == "__main__":
    sys.exit(main())
