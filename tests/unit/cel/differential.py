"""Differential runs of kopf-dra's CEL against Kubernetes' (hack/cel-oracle).

The oracle is built once (cached by hack/cel-oracle/build.sh) and kept running: one JSON line
per selector with its devices. Three things are compared: the outcome per device ("compile
error", "true", "false", "error", "cost" for the runtime cost limit), the runtime cost of each
evaluation, and validation's cost estimate. Messages are not compared.

Go iterates maps in random order, so an expression whose outcome depends on that order may
get different answers from the oracle: a difference is only one when no oracle answer out of
a few agrees, device by device (each device's evaluation draws its own order). The same goes
for costs: where the oracle's own cost changes between runs of one input (a macro over a map
that stops at the first match), no cost is compared.

One oracle per Kubernetes minor kopf-dra speaks (hack/cel-oracle/v0.MINOR.PATCH/, the
library versions of that release), each compared with a :class:`CELEnvironment` of the same
minor. ``python -m tests.unit.cel.differential --examples 100000`` runs that many random
evaluations against each (``--kubernetes 1.37`` for one) and prints every distinct
disagreement (``make cel-oracle``).

Derived attributes (1.37, DRADerivedAttributes) have a mode of their own (``--derived``): the
oracle answers for a new derived expression what validation says (accepted, or refused for its
length, its syntax or types, its result type, or its estimated cost) and, per device, the
DeviceAttribute the scheduler derives (GetOrCompileDerivedAttribute, EvaluateDerivedAttribute)
or its error; kopf-dra's answers are :func:`check_derived_attribute` (list types on, as the
oracle's gates) and :meth:`CELEnvironment.compile_derived` with :func:`derived_attribute`. The
verdict is compared by kind, each attribute exactly, a failed conversion by its message, other
errors by presence, and costs as above.
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
from typing import Any

from operators.allocator.constraints import derived_attribute
from operators.api.resource import Device
from operators.cel import (
    DEFAULT_KUBERNETES,
    KUBERNETES_MINORS,
    CELEnvironment,
    InvalidSelectorError,
    SelectorEvaluationError,
    SliceKey,
    build_device_view,
    install_zone_loader,
)
from operators.cel.compiler import CostLimitExceeded
from operators.cel.derived import DERIVED_ATTRIBUTES_SINCE, check_derived_attribute, compile_derived

from .generators import DRIVER, J

ROOT = Path(__file__).resolve().parents[3]
ORACLES = ROOT / "hack" / "cel-oracle"
BUILD = ORACLES / "build.sh"
RETRIES = 12  # oracle answers asked before a difference counts (Go map order varies them)
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
def oracle_binary(kubernetes: str = DEFAULT_KUBERNETES) -> str:
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

    def __init__(self, kubernetes: str = DEFAULT_KUBERNETES) -> None:
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

    def derived(self, expression: str, devices: list[J]) -> Answer:
        """The answer on a derived attribute: outcomes ["refused KIND"] (KIND one of
        :data:`REFUSALS`), or per device 'attribute {JSON}', 'convert: MESSAGE' (a value that
        is no attribute), "error" or "cost"."""
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        request = {"expression": expression, "driver": DRIVER, "devices": devices, "derived": True}
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        answer: J = json.loads(self._process.stdout.readline())
        if answer["compile"] is not None:
            return Answer([f"refused {_upstream_refusal(answer['compile'])}"], [], None)
        results = answer["results"]
        return Answer(
            [_derived_outcome(r) for r in results],
            [r.get("actual") for r in results],
            int(answer["maxCost"]),
        )

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(timeout=10)


def _outcome(result: J) -> str:
    if "value" in result:
        return "true" if result["value"] else "false"
    return "cost" if result.get("cost") else "error"


# Why validation refuses a derived expression: its length, syntax or types ("compile"), a
# result that is no attribute ("type"), its estimated cost; "scheduler" where validation
# accepts and the scheduler's compile refuses, "unsupported" for a library before 1.37.
REFUSALS = ("length", "compile", "type", "cost", "scheduler", "unsupported")
_CONVERSIONS = ("unsupported CEL return type", "expected list element", "unsupported list element")


def _upstream_refusal(message: str) -> str:
    if message.startswith("too long"):
        return "length"
    if message.startswith("must evaluate to"):
        return "type"
    if message.startswith("too complex"):
        return "cost"
    if message.startswith("scheduler: "):
        return "scheduler"
    if message == "this library has no derived attributes":
        return "unsupported"
    return "compile"  # "compilation failed: ...", or a panic of cel-go's planner


def _our_refusal(message: str) -> str:
    if "bytes long, more than the limit" in message:
        return "length"
    if message.startswith("must evaluate to"):
        return "type"
    if message.startswith("estimated cost"):
        return "cost"
    return "compile"


def _attribute_outcome(attribute: J) -> str:
    return "attribute " + json.dumps(attribute, sort_keys=True, ensure_ascii=False)


def _derived_outcome(result: J) -> str:
    if "attribute" in result:
        return _attribute_outcome(result["attribute"])
    if result.get("cost"):
        return "cost"
    error: str = result["error"]
    return f"convert: {error}" if error.startswith(_CONVERSIONS) else "error"


@functools.cache
def oracle(kubernetes: str = DEFAULT_KUBERNETES) -> Oracle:
    return Oracle(kubernetes)


def our_answer(
    expression: str,
    devices: list[J],
    env: CELEnvironment | None = None,
    kubernetes: str = DEFAULT_KUBERNETES,
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
    kubernetes: str = DEFAULT_KUBERNETES,
) -> list[str]:
    return our_answer(expression, devices, env, kubernetes).outcomes


def _comparable_costs(mine: Answer, theirs: Answer) -> bool:
    """Runtime costs agree where both evaluated (an error or a cost stop counts what was
    spent up to it, as the oracle reports it)."""
    for ours_cost, their_cost, outcome, our_outcome in zip(
        mine.costs, theirs.costs, theirs.outcomes, mine.outcomes, strict=False
    ):
        if outcome in ("true", "false") and outcome == our_outcome and ours_cost != their_cost:
            return False
    return True


def _agree(mine: list[str], seen: list[set[str]]) -> bool:
    """Every device's outcome is one the oracle gave for it (in some run)."""
    return len(mine) == len(seen) and all(o in s for o, s in zip(mine, seen, strict=True))


def _see(seen: list[set[str]], outcomes: list[str]) -> None:
    if len(outcomes) == len(seen):
        for s, o in zip(seen, outcomes, strict=True):
            s.add(o)


def disagreement(
    expression: str, devices: list[J], kubernetes: str = DEFAULT_KUBERNETES
) -> tuple[str, Answer, Answer] | None:
    """(kind, ours, theirs) when they differ: kind is "outcome", "cost" or "estimate"."""
    upstream = oracle(kubernetes)
    mine = our_answer(expression, devices, kubernetes=kubernetes)
    theirs = upstream.answer(expression, devices)
    seen = [{o} for o in theirs.outcomes]
    for _ in range(RETRIES - 1):
        if _agree(mine.outcomes, seen):
            break
        theirs = upstream.answer(expression, devices)
        _see(seen, theirs.outcomes)
    if not _agree(mine.outcomes, seen):
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


def our_derived(expression: str, devices: list[J], kubernetes: str = DEFAULT_KUBERNETES) -> Answer:
    """kopf-dra's answer on a derived attribute, in :meth:`Oracle.derived`'s terms: the API
    server's verdict (list types on, as the oracle's gates), then the scheduler's compile and
    each device's value as an attribute, from a fresh environment."""
    verdict = check_derived_attribute(expression, list_types=True, kubernetes=kubernetes)
    if verdict.error is not None:
        return Answer([f"refused {_our_refusal(verdict.error.message)}"], [], None)
    env = CELEnvironment(kubernetes=kubernetes)
    try:
        compiled = env.compile_derived(expression)
        program = compile_derived(expression, kubernetes=kubernetes)
    except InvalidSelectorError:
        return Answer(["refused scheduler"], [], None)
    outcomes: list[str] = []
    costs: list[int | None] = []
    for d in devices:
        view = build_device_view(DRIVER, Device.load(d))
        costs.append(_runtime_cost(program, view))
        try:
            value = compiled.value(view)
        except SelectorEvaluationError as exc:
            outcomes.append("cost" if "cost limit" in str(exc) else "error")
            continue
        try:
            attribute = derived_attribute(value)
        except ValueError as exc:
            outcomes.append(f"convert: {exc}")
            continue
        outcomes.append(_attribute_outcome(attribute.dump()))
    return Answer(outcomes, costs, verdict.cost)


def _runtime_cost(program: Any, view: Any) -> int | None:
    """One evaluation's runtime cost (None when the device could not be converted)."""
    value, error = view.device(program.lazy_attributes)
    if error is not None:
        return None
    try:
        return int(program.run(value)[1])
    except CostLimitExceeded as exc:
        return int(exc.args[0]) if exc.args else None
    except Exception:
        return None


def derived_disagreement(
    expression: str, devices: list[J], kubernetes: str = DERIVED_ATTRIBUTES_SINCE
) -> tuple[str, Answer, Answer] | None:
    """(kind, ours, theirs) when they differ on a derived attribute: kind is "verdict" (one
    accepts, the other refuses, or they refuse for different reasons), "value", "message" (a
    conversion error's words only), "estimate" or "cost"; a value or cost that moves between
    the oracle's runs (Go's map order) is retried."""
    return _derived_compare(expression, devices, kubernetes)[0]


def _derived_compare(
    expression: str, devices: list[J], kubernetes: str
) -> tuple[tuple[str, Answer, Answer] | None, Answer]:
    """(the disagreement or None, upstream's answer)."""
    upstream = oracle(kubernetes)
    mine = our_derived(expression, devices, kubernetes)
    theirs = upstream.derived(expression, devices)
    seen = [{o} for o in theirs.outcomes]
    for _ in range(RETRIES - 1):
        if _agree(mine.outcomes, seen):
            break
        theirs = upstream.derived(expression, devices)
        _see(seen, theirs.outcomes)
    if not _agree(mine.outcomes, seen):
        refused = [o.startswith("refused") for o in (mine.outcomes[0], theirs.outcomes[0])]
        if any(refused):
            return ("verdict", mine, theirs), theirs
        if _agree(_unworded(mine.outcomes), [set(_unworded(sorted(s))) for s in seen]):
            return ("message", mine, theirs), theirs  # a conversion error's words only
        return ("value", mine, theirs), theirs
    if mine.estimate != theirs.estimate:
        return ("estimate", mine, theirs), theirs
    if not _comparable_derived_costs(mine, theirs):
        for _ in range(RETRIES):
            again = upstream.derived(expression, devices)
            if again.outcomes == mine.outcomes and _comparable_derived_costs(mine, again):
                return None, theirs
            if not _comparable_derived_costs(theirs, again):
                return None, theirs  # upstream's own cost moves (a map macro stopping early)
        return ("cost", mine, theirs), theirs
    return None, theirs


def _unworded(outcomes: list[str]) -> list[str]:
    return ["convert" if o.startswith("convert") else o for o in outcomes]


def _comparable_derived_costs(mine: Answer, theirs: Answer) -> bool:
    for ours_cost, their_cost, outcome, our_outcome in zip(
        mine.costs, theirs.costs, theirs.outcomes, mine.outcomes, strict=False
    ):
        if outcome.startswith("attribute") and outcome == our_outcome and ours_cost != their_cost:
            return False
    return True


def run_derived(
    examples: int, seed: int, kubernetes: str = DERIVED_ATTRIBUTES_SINCE
) -> tuple[dict[str, int], list[Finding]]:
    """Generate derived expressions and devices until ``examples`` evaluations ran (an
    expression refused counts one); (counts, one finding per distinct disagreement). The
    counts are upstream's: expressions, evaluations, accepted, refused (and per kind),
    attributes (and per field), conversion errors, other errors and cost stops."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as seeded

    found: dict[str, Finding] = {}
    counted: dict[str, int] = {"expressions": 0, "evaluations": 0, "accepted": 0, "refused": 0}

    @settings(
        max_examples=examples * 2 // 3 + 100,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(derived_case())
    def run(item: tuple[str, list[J]]) -> None:
        if counted["evaluations"] >= examples:
            return
        expression, devices = item
        counted["expressions"] += 1
        try:
            diff, theirs = _derived_compare(expression, devices, kubernetes)
        except Exception as exc:  # a crash is a finding, not the end of a long run
            nothing = Answer([], [], None)
            key = f"crash:{type(exc).__name__}:{expression[:60]}"
            found.setdefault(key, (f"crash {exc!r}", expression, devices, nothing, nothing))
            counted["evaluations"] += 1
            return
        _count(counted, theirs)
        if diff is not None:
            kind, mine, upstream = diff
            key = f"{kind}:{mine.outcomes[0][:30]}->{upstream.outcomes[0][:30]}:{expression[:60]}"
            found.setdefault(key, (kind, expression, devices, mine, upstream))

    seeded(seed)(run)()
    return counted, list(found.values())


def _count(counted: dict[str, int], answer: Answer) -> None:
    def bump(key: str) -> None:
        counted[key] = counted.get(key, 0) + 1

    first = answer.outcomes[0] if answer.outcomes else ""
    if first.startswith("refused"):
        counted["evaluations"] += 1
        bump("refused")
        bump(first)
        return
    bump("accepted")
    for outcome in answer.outcomes:
        counted["evaluations"] += 1
        if outcome.startswith("attribute"):
            bump("attributes")
            bump("attribute " + ",".join(sorted(json.loads(outcome.split(" ", 1)[1]))))
        elif outcome.startswith("convert"):
            bump("conversion errors")
        else:
            bump("cost stops" if outcome == "cost" else "errors")


def run_corpus(
    examples: int, seed: int, kubernetes: str = DEFAULT_KUBERNETES
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


def derived_case() -> Any:
    """A strategy of (derived expression, devices): values of every type CEL has (scalars the
    attribute takes, and doubles, uints, bytes, maps, nulls, durations, timestamps, types,
    optionals it does not), as they are or behind dyn() so that only the value decides; lists
    of one type, of mixed types, of attributes, of map keys (Go's order); errors; and
    selectors, which are bools."""
    from hypothesis import strategies as st

    from . import generators as g

    scalars = [*g._SCALARS, g.gen_semver, g.gen_semver, g.gen_bool]
    others = [
        "null",
        "duration('1h')",
        "timestamp('2024-01-01T00:00:00Z')",
        "int",
        "type(1)",
        "optional.of(1)",
        "optional.none()",
        "[1, 2].last()",
        f"device.attributes[{DRIVER!r}].?a",
        "optional.of(type(1))",
        "1 / 0",
        "int('x')",
        "[1][5]",
        "device",
        "device.attributes",
        "device.capacity",
        "device.driver",
        "device.allowMultipleAllocations",
        "quantity('1')",
        "ip('10.0.0.1')",
        "cidr('10.0.0.0/8')",
        "url('https://x.io')",
    ]

    @st.composite
    def expression(draw: st.DrawFn) -> str:
        depth = draw(st.integers(0, 3))
        family = draw(st.integers(0, 11))
        gen = draw(st.sampled_from(scalars))
        if family <= 3:
            return gen(draw, depth)
        if family == 4:
            return f"dyn({gen(draw, depth)})"
        if family == 5:
            n = draw(st.integers(0, 4))
            return "[" + ", ".join(gen(draw, max(0, depth - 1)) for _ in range(n)) + "]"
        if family == 6:
            parts = [
                draw(st.sampled_from(scalars))(draw, 0) for _ in range(draw(st.integers(1, 3)))
            ]
            return "[" + ", ".join(f"dyn({p})" for p in parts) + "]"
        if family == 7:
            other = draw(st.sampled_from(others))
            return draw(st.sampled_from([other, f"dyn({other})", f"[{other}]", f"[dyn({other})]"]))
        if family == 8:
            attr = g._attr(draw)
            return draw(
                st.sampled_from(
                    [attr, f"[{attr}]", f"{attr}.map(x, x)", f"[{attr}, {g._attr(draw)}]"]
                )
            )
        if family == 9:
            mp = g.gen_map(draw, depth)
            return draw(
                st.sampled_from([f"{mp}.map(k, k)", f"{mp}.map(k, {mp}[k])", f"{mp}.map(k, v, v)"])
            )
        if family == 10:
            cond = g.gen_bool(draw, max(0, depth - 1))
            second = draw(st.sampled_from(scalars))
            return f"{cond} ? {gen(draw, depth)} : {second(draw, depth)}"
        return draw(g.selector())

    @st.composite
    def item(draw: st.DrawFn) -> tuple[str, list[J]]:
        devices = [draw(g.device(i)) for i in range(draw(st.integers(1, 4)))]
        return draw(expression()), devices

    return item()


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
    parser.add_argument(
        "--derived",
        action="store_true",
        help="derived attributes' expressions instead of selectors (1.37 and later only)",
    )
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    minors = args.kubernetes or KUBERNETES_MINORS
    if args.derived:
        since = tuple(map(int, DERIVED_ATTRIBUTES_SINCE.split(".")))
        older = [m for m in minors if tuple(map(int, m.split("."))) < since]
        if args.kubernetes and older:
            parser.error(f"--derived: Kubernetes {', '.join(older)} has no derived attributes")
        minors = [m for m in minors if m not in older]
    failed = False
    for kubernetes in minors:
        print(f"Kubernetes {kubernetes} ({oracle_version(kubernetes)}), seed {seed}", flush=True)
        if args.derived:
            counted, found = run_derived(args.examples, seed, kubernetes)
            summary = ", ".join(f"{k} {v}" for k, v in counted.items())
            print(f"derived: {summary}; {len(found)} distinct disagreements", flush=True)
        else:
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
