"""Differential runs of kopf-dra's CEL against Kubernetes' (hack/cel-oracle).

The oracle is built once (cached by hack/cel-oracle/build.sh) and kept running: one JSON line
per selector with its devices. Three things are compared: the outcome per device ("compile
error", "true", "false", "error", "cost" for the runtime cost limit), the runtime cost of each
evaluation, and validation's cost estimate. Messages are not compared.

Go iterates maps in random order, so an expression whose outcome depends on that order may
get different answers from the oracle: a difference is only one when no oracle answer out of
a few agrees. The same goes for costs: where the oracle's own cost changes between runs of one
input (a macro over a map that stops at the first match), no cost is compared.

One oracle per Kubernetes minor kopf-dra speaks (hack/cel-oracle/v0.MINOR.PATCH/, the
library versions of that release), each compared with a :class:`CELEnvironment` of the same
minor. ``python -m tests.unit.cel.differential --examples 100000`` runs that many random
evaluations against each (``--kubernetes 1.37`` for one) and prints every distinct
disagreement (``make cel-oracle``).
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import shutil
import subprocess
import sys
import zoneinfo
from dataclasses import dataclass
from pathlib import Path

from operators.api.resource import Device
from operators.cel import (
    KUBERNETES_MINORS,
    NEWEST_KUBERNETES,
    CELEnvironment,
    InvalidSelectorError,
    SliceKey,
    install_zone_loader,
)

from .generators import DRIVER, J

ROOT = Path(__file__).resolve().parents[3]
ORACLES = ROOT / "hack" / "cel-oracle"
BUILD = ORACLES / "build.sh"
RETRIES = 6
install_zone_loader(zoneinfo.ZoneInfo)  # as the CLI does: the oracle's Go reads the tz database


class NoToolchainError(RuntimeError):
    """No Go toolchain: the oracle cannot be built."""


def oracle_version(kubernetes: str) -> str:
    """The library version (module directory) of the oracle for a Kubernetes minor: 1.37 is
    k8s.io/dynamic-resource-allocation v0.37.x."""
    _, minor = kubernetes.split(".")
    found = sorted(ORACLES.glob(f"v0.{minor}.*/go.mod"))
    if len(found) != 1:
        raise LookupError(f"want one oracle module for Kubernetes {kubernetes}, found {found}")
    return found[0].parent.name


@functools.cache
def oracle_binary(kubernetes: str = NEWEST_KUBERNETES) -> str:
    if shutil.which("go") is None:
        raise NoToolchainError("no Go toolchain on PATH: cannot build hack/cel-oracle")
    done = subprocess.run(
        ["bash", str(BUILD), oracle_version(kubernetes)],
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    if done.returncode != 0:
        raise RuntimeError(f"building the oracle failed:\n{done.stderr[-4000:]}")
    return done.stdout.strip().splitlines()[-1]


@dataclass(frozen=True)
class Answer:
    """What one side says about a selector on some devices."""

    outcomes: list[str]
    costs: list[int | None]  # runtime cost per device (None where not compared)
    estimate: int | None  # validation's maximum (None when it did not compile)


class Oracle:
    """One running oracle process of a Kubernetes minor; ``ask`` is a request and its answer."""

    def __init__(self, kubernetes: str = NEWEST_KUBERNETES) -> None:
        self.kubernetes = kubernetes
        self._process = subprocess.Popen(
            [oracle_binary(kubernetes)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def answer(self, expression: str, devices: list[J]) -> Answer:
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        request = {"expression": expression, "driver": DRIVER, "devices": devices}
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        answer: J = json.loads(self._process.stdout.readline())
        if answer["compile"] is not None:
            return Answer(["compile error"] * max(1, len(devices)), [], None)
        results = answer["results"]
        return Answer(
            [_outcome(r) for r in results],
            [r.get("actual") for r in results],
            int(answer["maxCost"]),
        )

    def ask(self, expression: str, devices: list[J]) -> list[str]:
        return self.answer(expression, devices).outcomes

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(timeout=10)


def _outcome(result: J) -> str:
    if "value" in result:
        return "true" if result["value"] else "false"
    return "cost" if result.get("cost") else "error"


@functools.cache
def oracle(kubernetes: str = NEWEST_KUBERNETES) -> Oracle:
    return Oracle(kubernetes)


def our_answer(
    expression: str,
    devices: list[J],
    env: CELEnvironment | None = None,
    kubernetes: str = NEWEST_KUBERNETES,
) -> Answer:
    """kopf-dra's answer; a fresh environment's (``env``'s, if given), so nothing is cached
    from an earlier expression."""
    env = env if env is not None else CELEnvironment(kubernetes=kubernetes)
    try:
        selector = env.compile(expression)
    except InvalidSelectorError:
        return Answer(["compile error"] * max(1, len(devices)), [], None)
    outcomes: list[str] = []
    costs: list[int | None] = []
    for i, d in enumerate(devices):
        key = SliceKey(uid="s", generation=i, driver=DRIVER)
        device = Device.load(d)
        view = env.device_view(key, device)
        costs.append(selector.cost(view))
        try:
            matched = env.matches(selector, key, device)
        except InvalidSelectorError:  # pragma: no cover - compiled above
            outcomes.append("compile error")
            continue
        except Exception as exc:  # SelectorEvaluationError
            outcomes.append("cost" if "cost limit" in str(exc) else "error")
            continue
        outcomes.append("true" if matched else "false")
    return Answer(outcomes, costs, selector.estimated_cost)


def ours(
    expression: str,
    devices: list[J],
    env: CELEnvironment | None = None,
    kubernetes: str = NEWEST_KUBERNETES,
) -> list[str]:
    return our_answer(expression, devices, env, kubernetes).outcomes


def _comparable_costs(mine: Answer, theirs: Answer) -> bool:
    """Runtime costs agree where both evaluated (an error or a cost stop counts what was
    spent up to it, as the oracle reports it)."""
    for ours_cost, their_cost, outcome in zip(
        mine.costs, theirs.costs, theirs.outcomes, strict=False
    ):
        if outcome in ("true", "false") and ours_cost != their_cost:
            return False
    return True


def disagreement(
    expression: str, devices: list[J], kubernetes: str = NEWEST_KUBERNETES
) -> tuple[str, Answer, Answer] | None:
    """(kind, ours, theirs) when they differ: kind is "outcome", "cost" or "estimate"."""
    upstream = oracle(kubernetes)
    mine = our_answer(expression, devices, kubernetes=kubernetes)
    theirs = upstream.answer(expression, devices)
    for attempt in range(RETRIES):
        if mine.outcomes == theirs.outcomes:
            break
        if attempt < RETRIES - 1:
            theirs = upstream.answer(expression, devices)
    if mine.outcomes != theirs.outcomes:
        return "outcome", mine, theirs
    if mine.estimate != theirs.estimate:
        return "estimate", mine, theirs
    if not _comparable_costs(mine, theirs):
        for _ in range(RETRIES):
            again = upstream.answer(expression, devices)
            if again.outcomes == mine.outcomes and _comparable_costs(mine, again):
                return None
            if not _comparable_costs(theirs, again):
                # Upstream's own cost moves between runs: it stopped early at a different map
                # entry (Go's random order), so there is no one cost to agree with.
                return None
        return "cost", mine, theirs
    return None


Finding = tuple[str, str, list[J], Answer, Answer]  # kind, expression, devices, ours, theirs


def run_corpus(
    examples: int, seed: int, kubernetes: str = NEWEST_KUBERNETES
) -> tuple[dict[str, int], list[Finding]]:
    """Generate selectors and devices until ``examples`` evaluations ran; (counts, one finding
    per distinct disagreement). A seed always generates the same corpus."""
    from hypothesis import HealthCheck, given, settings

    from .generators import case

    found: dict[str, Finding] = {}
    counted = {"evaluations": 0, "selectors": 0}

    @settings(
        max_examples=examples * 2 // 5 + 100,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case())
    def run(item: tuple[str, list[J]]) -> None:
        if counted["evaluations"] >= examples:
            return
        expression, devices = item
        counted["selectors"] += 1
        counted["evaluations"] += len(devices)
        try:
            diff = disagreement(expression, devices, kubernetes)
        except Exception as exc:  # a crash is a finding, not the end of a long run
            nothing = Answer([], [], None)
            key = f"crash:{type(exc).__name__}:{expression[:60]}"
            found.setdefault(key, (f"crash {exc!r}", expression, devices, nothing, nothing))
            return
        if diff is not None:
            kind, mine, theirs = diff
            key = f"{kind}:{mine.outcomes[0]}->{theirs.outcomes[0]}:{expression[:60]}"
            found.setdefault(key, (kind, expression, devices, mine, theirs))

    from hypothesis import seed as seeded

    seeded(seed)(run)()
    return counted, list(found.values())


def describe(finding: Finding) -> str:
    kind, expression, devices, mine, theirs = finding
    return (
        f"- [{kind}] {expression!r}\n  ours {mine.outcomes} cost {mine.costs} "
        f"max {mine.estimate}\n  upstream {theirs.outcomes} cost {theirs.costs} "
        f"max {theirs.estimate}\n  devices {json.dumps(devices)}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--examples", type=int, default=100_000, help="evaluations to run")
    parser.add_argument("--seed", type=int, default=None, help="default: a random one, printed")
    parser.add_argument("--show", type=int, default=40, help="disagreements to print")
    parser.add_argument(
        "--kubernetes",
        action="append",
        choices=KUBERNETES_MINORS,
        help="the minor to compare (repeatable); default: each kopf-dra speaks, in turn",
    )
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    failed = False
    for kubernetes in args.kubernetes or KUBERNETES_MINORS:
        print(f"Kubernetes {kubernetes} ({oracle_version(kubernetes)}), seed {seed}", flush=True)
        counted, found = run_corpus(args.examples, seed, kubernetes)
        print(
            f"{counted['evaluations']} evaluations of {counted['selectors']} selectors, "
            f"{len(found)} distinct disagreements",
            flush=True,
        )
        for finding in found[: args.show]:
            print(describe(finding))
        failed = failed or bool(found)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
