"""Differential runs of kopf-dra's CEL against Kubernetes' (hack/cel-oracle).

The oracle is built once (cached by hack/cel-oracle/build.sh) and kept running: one JSON line
per selector with its devices. Outcomes compare as "compile error", "true", "false", "error"
and "cost" (the runtime cost limit); messages are not compared.

``python -m tests.unit.cel.differential --examples 100000`` runs that many random evaluations
and prints every distinct disagreement (``make cel-oracle``).
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import subprocess
import sys
from pathlib import Path

from operators.api.resource import Device
from operators.cel import CELEnvironment, InvalidSelectorError, SliceKey

from .generators import DRIVER, J

ROOT = Path(__file__).resolve().parents[3]
BUILD = ROOT / "hack" / "cel-oracle" / "build.sh"


class NoToolchainError(RuntimeError):
    """No Go toolchain: the oracle cannot be built."""


@functools.cache
def oracle_binary() -> str:
    if shutil.which("go") is None:
        raise NoToolchainError("no Go toolchain on PATH: cannot build hack/cel-oracle")
    done = subprocess.run(
        ["bash", str(BUILD)], capture_output=True, text=True, check=False, timeout=1800
    )
    if done.returncode != 0:
        raise RuntimeError(f"building the oracle failed:\n{done.stderr[-4000:]}")
    return done.stdout.strip().splitlines()[-1]


class Oracle:
    """One running oracle process; ``ask`` is a request and its answer."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [oracle_binary()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def ask(self, expression: str, devices: list[J]) -> list[str]:
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        request = {"expression": expression, "driver": DRIVER, "devices": devices}
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        answer: J = json.loads(self._process.stdout.readline())
        if answer["compile"] is not None:
            return ["compile error"] * max(1, len(devices))
        return [_outcome(r) for r in answer["results"]]

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(timeout=10)


def _outcome(result: J) -> str:
    if "value" in result:
        return "true" if result["value"] else "false"
    return "cost" if result.get("cost") else "error"


@functools.cache
def oracle() -> Oracle:
    return Oracle()


def ours(expression: str, devices: list[J], env: CELEnvironment | None = None) -> list[str]:
    env = env if env is not None else CELEnvironment()
    try:
        selector = getattr(env, "compile_for_validation", env.compile)(expression)
    except InvalidSelectorError:
        return ["compile error"] * max(1, len(devices))
    out: list[str] = []
    for i, d in enumerate(devices):
        key = SliceKey(uid="s", generation=i, driver=DRIVER)
        try:
            matched = env.matches(selector, key, Device.load(d))
        except InvalidSelectorError:  # pragma: no cover - compiled above
            out.append("compile error")
            continue
        except Exception as exc:  # SelectorEvaluationError
            out.append("cost" if "cost limit" in str(exc) else "error")
            continue
        out.append("true" if matched else "false")
    return out


def disagreement(expression: str, devices: list[J]) -> tuple[list[str], list[str]] | None:
    """(ours, theirs) when they differ."""
    want = oracle().ask(expression, devices)
    got = ours(expression, devices)
    return None if got == want else (got, want)


def main(argv: list[str] | None = None) -> int:
    from hypothesis import HealthCheck, given, settings

    from .generators import case

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--examples", type=int, default=100_000, help="evaluations to run")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--show", type=int, default=40, help="disagreements to print")
    args = parser.parse_args(argv)
    found: dict[str, tuple[str, list[J], list[str], list[str]]] = {}
    counted = {"evaluations": 0, "selectors": 0}

    @settings(
        max_examples=args.examples * 2 // 5 + 100,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        derandomize=args.seed is None,
    )
    @given(case())
    def run(item: tuple[str, list[J]]) -> None:
        if counted["evaluations"] >= args.examples:
            return
        expression, devices = item
        counted["selectors"] += 1
        counted["evaluations"] += len(devices)
        diff = disagreement(expression, devices)
        if diff is not None:
            key = f"{diff[0][0]}->{diff[1][0]}:{expression[:60]}"
            found.setdefault(key, (expression, devices, *diff))

    if args.seed is not None:
        from hypothesis import seed

        seed(args.seed)(run)()
    else:
        run()
    print(
        f"{counted['evaluations']} evaluations of {counted['selectors']} selectors, "
        f"{len(found)} distinct disagreements"
    )
    for expression, devices, got, want in list(found.values())[: args.show]:
        print(f"- {expression!r}\n  ours {got} upstream {want}\n  devices {json.dumps(devices)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
