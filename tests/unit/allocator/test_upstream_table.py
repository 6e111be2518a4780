"""Upstream's shared allocator test table (allocator_testing.go, Kubernetes 1.36), ported.

Each case runs the experimental-channel semantics with the case's feature gates; results are
compared the way upstream's gomega matchers compare them (results and node selector terms as
sets, configs in order, shareIDs replaced by a fixed value). The 1.37 rows (cases_137.py) must
also answer differently as 1.36, so each one pins a switch on the release.
"""

from __future__ import annotations

import dataclasses
import re
from decimal import Decimal
from itertools import count

import pytest

from operators.allocator import (
    AllocatedState,
    Allocator,
    AllocatorError,
    Status,
)
from operators.api.features import Release
from operators.api.ids import DeviceID

from . import cases_137, cases_138
from .builders import FIXED_SHARE_ID, NODE1, REGION1, Case, canonical, node
from .cases import CASES
from .engine import engine


def _state(case: Case) -> AllocatedState:
    capacity: dict[DeviceID, dict[str, Decimal]] = {}
    from operators.api.quantity import Quantity

    for dev, caps in case.allocated_capacity.items():
        capacity[dev] = {n: Quantity(v).value for n, v in caps.items()}
    return AllocatedState(frozenset(case.allocated), frozenset(case.allocated_shared), capacity)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name, marks=c.marks) for c in CASES])
def test_upstream_case(case: Case) -> None:
    ids = count()
    before = [c.dump() for c in case.claims]
    slices_before = [s.dump() for s in case.slices]
    allocator = Allocator(
        case.features,
        _state(case),
        case.classes,
        case.slices,
        engine(),
        share_ids=lambda: f"share-{next(ids)}",
    )
    target = case.node or node(NODE1, REGION1)
    if case.error is not None and case.raises:
        with pytest.raises(AllocatorError, match=re.escape(case.error)):
            allocator.allocate(target, case.claims)
        return
    outcome = allocator.allocate(target, case.claims)
    if case.error is not None:
        assert outcome.status is Status.ERROR, f"expected error {case.error!r}, got {outcome}"
        assert outcome.error is not None
        assert case.error in str(outcome.error)
        return
    assert outcome.status is not Status.ERROR, outcome.error
    got = []
    for res in outcome.results:
        obj = res.dump()
        for r in obj["devices"]["results"]:
            if "shareID" in r:
                r["shareID"] = FIXED_SHARE_ID
        got.append(canonical(obj))
    want = [canonical(e) for e in (case.expect or [])]
    assert got == want
    if case.steps is not None:
        assert outcome.stats.steps == case.steps
    # Inputs are not modified.
    assert [c.dump() for c in case.claims] == before
    assert [s.dump() for s in case.slices] == slices_before


def _answer(case: Case) -> object:
    """What the allocator says, in one comparable value: the error's words or the results."""
    ids = count()
    allocator = Allocator(
        case.features,
        _state(case),
        case.classes,
        case.slices,
        engine(),
        share_ids=lambda: f"share-{next(ids)}",
    )
    try:
        outcome = allocator.allocate(case.node or node(NODE1, REGION1), case.claims)
    except AllocatorError as e:
        return ("error", str(e))
    if outcome.status is Status.ERROR:
        return ("error", str(outcome.error))
    return (outcome.status.value, [canonical(r.dump()) for r in outcome.results])


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in cases_137.cases()])
def test_a_137_case_answers_otherwise_as_136(case: Case) -> None:
    as_136 = dataclasses.replace(
        case, features=dataclasses.replace(case.features, kubernetes=Release(1, 36))
    )
    assert _answer(as_136) != _answer(case)


def _pairs() -> list[tuple[Case, Case]]:
    """cases_138's rows: each 1.38 row with its "-as-137" twin."""
    rows = {c.name: c for c in cases_138.cases()}
    return [(c, rows[f"{n}-as-137"]) for n, c in rows.items() if not n.endswith("-as-137")]


@pytest.mark.parametrize(("as_138", "as_137"), [pytest.param(a, b, id=a.name) for a, b in _pairs()])
def test_a_138_case_answers_otherwise_as_137(as_138: Case, as_137: Case) -> None:
    assert as_138.features.since_1_38
    assert not as_137.features.since_1_38
    assert _answer(as_138) != _answer(as_137)
