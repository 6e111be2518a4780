"""Run one scenario with one seed on a fresh system: its timeline, settling, then PASS/FAIL per
invariant with the evidence (the violations, each naming its objects)."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from pathlib import Path
from typing import Final, TextIO

from e2e.chaos.invariants import INVARIANTS, UNRESERVED_LIMIT, Violation, by_invariant, check
from e2e.chaos.scenarios import (
    SCHEDULER,
    UNSCHEDULABLE_RETRY,
    Context,
    Scenario,
    install_workload,
)
from e2e.chaos.system import ChaosSystem, running_system
from tests.integration.helpers import eventually

SETTLE_WITHIN: Final = 180.0
EVIDENCE_LINES: Final = 12  # per invariant; the count says how many more there were


@dataclasses.dataclass
class Outcome:
    scenario: str
    seed: int
    seconds: float = 0.0
    settled_after: float | None = None  # seconds after the scenario's workload ended
    violations: list[Violation] = dataclasses.field(default_factory=list)
    error: str | None = None  # the scenario could not do what it meant to (a deadline)

    @property
    def failed(self) -> list[str]:
        names = [name for name, vs in by_invariant(self.violations).items() if vs]
        if self.settled_after is None:
            names.append("settles")
        if self.error is not None:
            names.append("scenario")
        return names


async def settle(system: ChaosSystem, quiet: float, within: float = SETTLE_WITHIN) -> bool:
    """No pod or claim written for ``quiet`` s; then, unreserved allocations either gone or
    old enough to count (the observer measures their age)."""

    async def still() -> bool:
        return system.observer.quiet_for() >= quiet

    async def unreserved_judged() -> bool:
        ages = system.observer.unreserved_for().values()
        return all(age >= UNRESERVED_LIMIT for age in ages)

    try:
        await eventually(still, within=within, what=f"no pod or claim write for {quiet:g}s")
        if system.observer.unreserved_since:
            system.say(
                f"{len(system.observer.unreserved_since)} claims allocated without a "
                f"reservation: watching them for up to {UNRESERVED_LIMIT:g} s"
            )
            await eventually(
                unreserved_judged, within=UNRESERVED_LIMIT + 10, what="unreserved claims"
            )
            await eventually(still, within=within, what=f"no pod or claim write for {quiet:g}s")
    except AssertionError as e:
        system.say(f"NOT SETTLED: {e}")
        return False
    return True


def start_components(system: ChaosSystem, scenario: Scenario) -> list[str]:
    """The controllers and the scheduler replicas (each with its name as identity)."""
    system.start("claim-templates", "run", "claim-templates")
    system.start("reservations", "run", "reservations")
    names = scenario.replica_names()
    for name, flags in zip(names, scenario.schedulers, strict=True):
        system.start(name, *SCHEDULER, *flags, "--identity", name)
    return names


async def run_scenario(scenario: Scenario, seed: int, workdir: Path, out: TextIO) -> Outcome:
    outcome = Outcome(scenario.name, seed)
    print(f"\n=== {scenario.name} seed={seed}: {scenario.summary}", file=out, flush=True)
    started = time.monotonic()
    async with running_system(workdir, scenario.node_list(), out) as system:
        system.say(
            f"control plane at {system.cp.server}; {scenario.nodes} nodes x {scenario.devices} "
            f"GPUs; logs in {system.log_dir}"
        )
        await install_workload(system.api)
        replicas = start_components(system, scenario)
        ctx = Context(system, random.Random(seed), scenario, replicas)
        try:
            await scenario.run(ctx)
        except AssertionError as e:
            outcome.error = str(e)
            system.say(f"SCENARIO FAILED: {e}")
        ended = time.monotonic()
        system.observer.restart_quiet()
        system.say(f"workload and faults done; settling ({2 * UNSCHEDULABLE_RETRY:g} s quiet)")
        if await settle(system, 2 * UNSCHEDULABLE_RETRY):
            outcome.settled_after = time.monotonic() - ended
        snapshot = await system.snapshot()
        bound = sum(1 for p in snapshot.pods if p.spec.node_name and not p.is_terminated)
        pending = sum(1 for p in snapshot.pods if not p.spec.node_name and not p.is_terminated)
        done = sum(1 for p in snapshot.pods if p.is_terminated)
        allocated = sum(1 for c in snapshot.claims if c.is_allocated)
        system.say(
            f"settled: {bound} pods bound, {pending} pending, {done} finished; "
            f"{len(snapshot.claims)} claims, {allocated} allocated"
            if outcome.settled_after is not None
            else "checking the invariants on an unsettled cluster"
        )
        outcome.violations = await asyncio.to_thread(check, snapshot)
    outcome.seconds = time.monotonic() - started
    report(outcome, out)
    return outcome


def report(outcome: Outcome, out: TextIO) -> None:
    for name, violations in by_invariant(outcome.violations).items():
        if not violations:
            print(f"PASS {name}", file=out)
            continue
        print(f"FAIL {name} ({len(violations)}): {INVARIANTS[name]}", file=out)
        for v in violations[:EVIDENCE_LINES]:
            print(f"     - {v}", file=out)
        if len(violations) > EVIDENCE_LINES:
            print(f"     ... and {len(violations) - EVIDENCE_LINES} more", file=out)
    if outcome.settled_after is None:
        print("FAIL settles: no quiet period before the deadline", file=out)
    if outcome.error is not None:
        print(f"FAIL scenario: {outcome.error}", file=out)
    verdict = "PASS" if not outcome.failed else "FAIL (" + ", ".join(outcome.failed) + ")"
    print(
        f"=== {outcome.scenario} seed={outcome.seed}: {verdict} in {outcome.seconds:.0f} s",
        file=out,
        flush=True,
    )
