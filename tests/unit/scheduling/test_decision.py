"""The decision after a filter cycle (``scheduling.decision``): the one sequence the scheduler
and ``simulate`` both follow."""

from __future__ import annotations

import ast
import pathlib
from typing import Any

import pytest

from operators.api.core import Pod
from operators.api.resource import ResourceClaim
from operators.controllers.scheduler import handlers
from operators.scheduling import attempt, decision
from operators.scheduling.cycle import CycleResult, NodeFit
from operators.scheduling.decision import (
    FREED_MEANWHILE,
    Deallocate,
    Preempt,
    ReleaseVictimClaims,
    Reserve,
    Unschedulable,
    decide,
    stranded_claim,
)
from operators.scheduling.preemption import AlternativesPolicy
from operators.scheduling.score import Score
from operators.simulate import engine

SELECTOR = {
    "nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
    ]
}


def claim(name: str, *, allocated: bool = True, reserved: tuple[str, ...] = ()) -> ResourceClaim:
    status: dict[str, Any] = {}
    if allocated:
        result = {"request": "gpu", "driver": "gpu.example.com", "pool": "p", "device": name}
        status["allocation"] = {"devices": {"results": [result]}, "nodeSelector": SELECTOR}
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": uid, "uid": uid} for uid in reserved]
    spec = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "g"}}]}}
    return ResourceClaim.load(
        {"metadata": {"name": name, "namespace": "ns"}, "spec": spec, "status": status}
    )


POD = Pod.load({"metadata": {"name": "p", "namespace": "ns", "uid": "p"}, "spec": {}})


def fit(rank: int) -> NodeFit:
    return NodeFit("node-2", {}, Score(0, rank, 0, "node-2"))


def result(*, unavailable: tuple[str, ...] = (), **kw: Any) -> CycleResult:
    return CycleResult((), {"node-1": "no"}, {}, unavailable=unavailable, **kw)


def test_stranded_claim_is_one_unavailable_claim_held_by_nobody_else() -> None:
    mine = claim("a", reserved=("p",))
    nobodys = claim("b")
    shared = claim("c", reserved=("p", "q"))
    fine = claim("d", reserved=("p",))
    assert stranded_claim(POD, [shared, fine, mine, nobodys], ["ns/c", "ns/a", "ns/b"]) is mine
    assert stranded_claim(POD, [shared, nobodys], ["ns/c", "ns/b"]) is nobodys
    assert stranded_claim(POD, [shared, fine], ["ns/c"]) is None  # q holds it
    assert stranded_claim(POD, [claim("e", allocated=False)], ["ns/e"]) is None


@pytest.mark.parametrize("policy", ["no-preemption-first", "rank-first", None])
def test_a_fit_is_reserved_unless_rank_first_wants_a_better_alternative(policy: Any) -> None:
    best, worse = fit(0), fit(1)
    assert decide(POD, [], result(), best, preemption=policy) == Reserve(best)
    wanted = decide(POD, [], result(), worse, preemption=policy)
    if policy == "rank-first":
        assert wanted == Preempt(better_than=1, fallback=worse)
        # Devices freed meanwhile: no eviction for room that may be there already.
        assert decide(POD, [], result(), worse, preemption=policy, freed=True) == Reserve(worse)
    else:
        assert wanted == Reserve(worse)


def test_nothing_fits_the_sequence_is_stranded_claim_victims_preemption_then_give_up() -> None:
    stranded = claim("a", reserved=("p",))
    victim = claim("v", reserved=("gone",))
    stuck = result(unavailable=("ns/a",))
    on: AlternativesPolicy = "no-preemption-first"
    full = decide(POD, [stranded], stuck, None, preemption=on, victim_claims=[victim])
    assert full == Deallocate(stranded)
    # Its deallocation is being written already: the next step.
    waiting = decide(
        POD, [stranded], stuck, None, preemption=on, in_flight={"ns/a"}, victim_claims=[victim]
    )
    assert waiting == ReleaseVictimClaims((victim,))
    assert decide(POD, [], result(), None, preemption=on) == Preempt()
    assert decide(POD, [], result(), None, preemption=on, freed=True) == Unschedulable(
        FREED_MEANWHILE
    )
    assert decide(POD, [], result(), None, preemption=None) == Unschedulable()
    assert decide(POD, [], result(timed_out=True), None, preemption=on) == Unschedulable()
    bad = CycleResult((), {}, {}, pod_error="invalid CEL")
    assert decide(POD, [], bad, None, preemption=on) == Unschedulable()


def _calls(module: Any) -> set[str]:
    """Names of the functions a module's code calls (``f(...)`` or ``x.f(...)``)."""
    tree = ast.parse(pathlib.Path(module.__file__).read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            found.add(func.id if isinstance(func, ast.Name) else getattr(func, "attr", ""))
    return found


#: The steps ``attempt.prepare`` and ``decide`` take for both: neither caller may call them.
OWN_STEPS = {
    "stranded_claim",
    "wanted",
    "resolve_claims",
    "binding_verdict",
    "makes_claim",
    "extended_resources",
    "requests_and_mappings",
    "special_claim",
}


def test_the_scheduler_and_simulate_prepare_and_decide_alike_and_repeat_none_of_it() -> None:
    """One preparation of the attempt and one decision after Filter, for both: each calls
    them, and neither calls the steps they take on its own (resolving claims, the binding
    verdict, building or weighing the special claim for extended resources, the
    stranded-claim rule, preemption's "wanted")."""
    assert vars(handlers)["decide"] is vars(engine)["decide"] is decision.decide
    assert vars(handlers)["prepare"] is vars(engine)["prepare"] is attempt.prepare
    for module in (handlers, engine):
        calls = _calls(module)
        assert {"decide", "prepare"} <= calls, module.__name__
        assert not calls & OWN_STEPS, (module.__name__, calls & OWN_STEPS)
