"""Behaviour beyond upstream's table: best-fit policy, DeviceTaintRules, explanations, pools."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from operators.allocator import (
    AllocatedState,
    Allocator,
    Features,
    NodeViewCache,
    Outcome,
    Status,
    validate_pools,
)
from operators.allocator.errors import InvalidPoolError, OutOfTimeError
from operators.api.features import Release
from operators.api.resource import DeviceTaintRule, ResourceClaim, ResourceSlice

from .builders import (
    CLAIM0,
    CLASS_A,
    DRIVER_A,
    NODE1,
    NODE2,
    POOL1,
    POOL2,
    REGION1,
    REQ0,
    SLICE1,
    SLICE2,
    SLICE3,
    all_request,
    claim,
    consumes,
    counter_set,
    device,
    device_class,
    node,
    pool,
    request,
    slice_,
    with_skip_node_operations,
)
from .engine import engine

N1 = node(NODE1, REGION1)
ALL = Features.all()


def partitions() -> list[ResourceSlice]:
    p2 = pool(POOL1, 2)
    return [
        slice_(
            SLICE1,
            NODE1,
            p2,
            DRIVER_A,
            device("big", consumes=[consumes("gpu", {"slices": "7"})]),
            device("small", consumes=[consumes("gpu", {"slices": "1"})]),
        ),
        slice_(SLICE2, NODE1, p2, DRIVER_A, counter_sets=[counter_set("gpu", {"slices": "7"})]),
    ]


def allocator(slices: list[ResourceSlice], features: Features = ALL, **kw: Any) -> Allocator:
    return Allocator(
        features,
        AllocatedState(),
        [device_class(CLASS_A, DRIVER_A)],
        slices,
        engine(),
        share_ids=lambda: "share",
        **kw,
    )


def picked(outcome: Outcome) -> list[str]:
    return [r.device or "" for r in outcome.results[0].devices.results]


def test_first_fit_takes_slice_order() -> None:
    out = allocator(partitions()).allocate(N1, [claim(CLAIM0, request(REQ0, CLASS_A, 1))])
    assert picked(out) == ["big"]


def test_best_fit_prefers_the_smallest_partition() -> None:
    out = allocator(partitions(), policy="best-fit").allocate(
        N1, [claim(CLAIM0, request(REQ0, CLASS_A, 1))]
    )
    assert picked(out) == ["small"]


def test_taint_rule_excludes_device_unless_tolerated() -> None:
    rule = DeviceTaintRule.load(
        {
            "metadata": {"name": "maint"},
            "spec": {
                "deviceSelector": {"driver": DRIVER_A, "device": "big"},
                "taint": {"key": "maintenance", "effect": "NoSchedule"},
            },
        }
    )
    a = allocator(partitions(), taint_rules=[rule])
    assert picked(a.allocate(N1, [claim(CLAIM0, request(REQ0, CLASS_A, 1))])) == ["small"]
    tolerant = request(REQ0, CLASS_A, 1, tolerations=[{"key": "maintenance", "operator": "Exists"}])
    assert picked(a.allocate(N1, [claim(CLAIM0, tolerant)])) == ["big"]


def test_explanation_names_counters() -> None:
    out = allocator(partitions()).allocate(N1, [claim(CLAIM0, request(REQ0, CLASS_A, 3))])
    assert out.status is Status.UNSATISFIABLE
    (reason,) = out.reasons
    assert reason.request == REQ0
    assert str(reason).startswith("claim claim-0, request req-0: 2 devices on node-1")
    assert reason.counts["needed"] == 3


def test_explanation_blocked_by_allocated_counters() -> None:
    taken = claim(CLAIM0, request(REQ0, CLASS_A, 1)).dump()
    taken["metadata"]["name"] = "old"
    taken["status"] = {
        "allocation": {
            "devices": {
                "results": [{"request": REQ0, "driver": DRIVER_A, "pool": POOL1, "device": "small"}]
            }
        }
    }
    state = AllocatedState.from_claims([ResourceClaim.load(taken)], ALL)
    a = Allocator(
        ALL,
        state,
        [device_class(CLASS_A, DRIVER_A)],
        partitions(),
        engine(),
        share_ids=lambda: "s",
    )
    out = a.allocate(N1, [claim(CLAIM0, request(REQ0, CLASS_A, 1))])
    assert out.status is Status.UNSATISFIABLE
    text = str(out.reasons[0])
    assert "1 allocated" in text
    assert "counter set gpu slices needs 7, 6 left" in text


ALPHA_137 = dataclasses.replace(
    ALL,
    kubernetes=Release(1, 37),
    device_compatibility_groups=True,
    optional_node_operations=True,
)


def test_explanation_names_compatibility_groups_that_do_not_fit() -> None:
    """1.37 (DRADeviceCompatibilityGroups): a free partition whose groups share none with the
    allocated one's on its counter set is explained, not just "blocked"."""
    p2 = pool(POOL1, 2)
    slices = [
        slice_(
            SLICE1,
            NODE1,
            p2,
            DRIVER_A,
            device("whole", consumes=[consumes("gpu", {"slices": "4"}, "whole")]),
            device("half", consumes=[consumes("gpu", {"slices": "2"}, "halves")]),
        ),
        slice_(SLICE2, NODE1, p2, DRIVER_A, counter_sets=[counter_set("gpu", {"slices": "8"})]),
    ]
    taken = claim(CLAIM0, request(REQ0, CLASS_A, 1)).dump()
    taken["metadata"]["name"] = "old"
    taken["status"] = {
        "allocation": {
            "devices": {
                "results": [{"request": REQ0, "driver": DRIVER_A, "pool": POOL1, "device": "whole"}]
            }
        }
    }
    state = AllocatedState.from_claims([ResourceClaim.load(taken)], ALPHA_137)
    a = Allocator(
        ALPHA_137, state, [device_class(CLASS_A, DRIVER_A)], slices, engine(), share_ids=lambda: "s"
    )
    out = a.allocate(N1, [claim(CLAIM0, request(REQ0, CLASS_A, 1))])
    assert out.status is Status.UNSATISFIABLE
    text = str(out.reasons[0])
    assert "incompatible groups" in text
    assert (
        "counter set gpu: its groups (halves) share none with the allocated devices' (whole)"
        in text
    )


def test_explanation_names_the_feature_a_node_does_not_declare() -> None:
    """1.37 (DRAOptionalNodeOperations): devices that skip node operations go only to nodes
    that declare the feature; elsewhere the explanation says so."""
    skipping = with_skip_node_operations(
        slice_(SLICE1, NODE1, pool(POOL1, 1), DRIVER_A, device("nic")), "*"
    )
    a = Allocator(
        ALPHA_137,
        AllocatedState(),
        [device_class(CLASS_A, DRIVER_A)],
        [skipping],
        engine(),
        share_ids=lambda: "s",
    )
    out = a.allocate(N1, [claim(CLAIM0, request(REQ0, CLASS_A, 1))])
    assert out.status is Status.UNSATISFIABLE
    assert "node does not declare DRAOptionalNodeOperations" in str(out.reasons[0])
    declaring = node(NODE1, REGION1, "DRAOptionalNodeOperations")
    (allocation,) = a.allocate(declaring, [claim(CLAIM0, request(REQ0, CLASS_A, 1))]).results
    assert allocation.devices.results[0].skip_node_operations == ["*"]


def test_view_cache_is_reused_across_allocators() -> None:
    cache = NodeViewCache()
    slices = partitions()
    first = allocator(slices, view_cache=cache)
    first.allocate(N1, [])
    second = allocator(slices, view_cache=cache)
    assert second._views is cache
    assert cache.get((NODE1, tuple(sorted(N1.metadata.labels.items())))) is not None


def test_validate_pools_reports_invalid_and_incomplete() -> None:
    slices = [
        slice_(SLICE1, NODE1, pool("a", 1), DRIVER_A, device("x"), device("x")),
        slice_(SLICE2, NODE1, pool("b", 2), DRIVER_A, device("y")),
    ]
    pools = {str(p.id): p for p in validate_pools(slices, ALL)}
    assert pools["driver-a/a"].invalid_reason == "duplicate device name x"
    assert pools["driver-a/b"].incomplete


def with_broken_pool_elsewhere() -> list[ResourceSlice]:
    """A device on node 1; node 2's pool consumes a counter its counter set does not have."""
    p2 = pool(POOL2, 2)
    return [
        slice_(SLICE1, NODE1, POOL1, DRIVER_A, device("local")),
        slice_(
            SLICE2,
            NODE2,
            p2,
            DRIVER_A,
            device("far", consumes=[consumes("gpu", {"missing": "1"})]),
        ),
        slice_(SLICE3, NODE2, p2, DRIVER_A, counter_sets=[counter_set("gpu", {"slices": "7"})]),
    ]


def test_pool_without_devices_for_the_node_is_checked_when_the_search_fails() -> None:
    """Node 1 sees node 2's pool through its counter set (it has no devices for node 1): in 1.36
    it is invalid, which matters only when the search fails or wants all devices, as upstream;
    1.37 keys counter sets by pool and never sees it from node 1."""
    slices = with_broken_pool_elsewhere()
    as_136 = {"features": dataclasses.replace(ALL, kubernetes=Release(1, 36))}
    for kw in ({}, as_136):
        fits = allocator(slices, **kw).allocate(N1, [claim(CLAIM0, request(REQ0, CLASS_A, 1))])
        assert picked(fits) == ["local"]
    failed = allocator(slices, **as_136).allocate(N1, [claim(CLAIM0, request(REQ0, CLASS_A, 2))])
    assert failed.status is Status.ERROR
    assert "driver-a/pool-2 (counter missing not found in counter set gpu)" in str(failed.error)
    every = allocator(slices, **as_136).allocate(N1, [claim(CLAIM0, all_request(REQ0, CLASS_A))])
    assert every.status is Status.ERROR
    assert isinstance(every.error, InvalidPoolError)
    assert "resource pool driver-a/pool-2 is currently invalid" in str(every.error)
    failed = allocator(slices).allocate(N1, [claim(CLAIM0, request(REQ0, CLASS_A, 2))])
    assert failed.status is Status.UNSATISFIABLE
    every = allocator(slices).allocate(N1, [claim(CLAIM0, all_request(REQ0, CLASS_A))])
    assert picked(every) == ["local"]


def test_the_budget_stops_a_long_selector_mid_evaluation_and_leaves_no_verdict() -> None:
    """An expensive selector of one tenant cannot hold the scheduler past its turn for a
    device's worth of evaluation: the budget is asked at the evaluation's checkpoints, and an
    evaluation it stops is not remembered (the next attempt evaluates it again)."""
    numbers = "[" + ", ".join(map(str, range(300))) + "]"
    expensive = f"{numbers}.exists(x, {numbers}.exists(y, x * y == -1))"
    slices = [slice_(SLICE1, NODE1, POOL1, DRIVER_A, device("gpu-0"))]
    wanted = claim(CLAIM0, request(REQ0, CLASS_A, 1, expensive))
    asked = 0

    def out_of_time() -> bool:
        nonlocal asked
        asked += 1
        return asked > 3  # the check before the evaluation, then two checkpoints

    stopped = allocator(slices, out_of_time=out_of_time)
    with pytest.raises(OutOfTimeError):
        stopped.allocate(N1, [wanted])
    assert asked == 4, "stopped at the evaluation's third checkpoint, not at its end"
    remembered = {expression for expression, _ in stopped._matches}
    assert expensive not in remembered, "no verdict remembered for an evaluation cut short"
    whole = allocator(slices).allocate(N1, [wanted])
    assert whole.status is Status.UNSATISFIABLE
