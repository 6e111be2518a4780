"""One scheduling cycle: PreEnqueue (resolve_claims), filter + allocate + score, messages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.allocator import Allocator, Outcome, Status
from operators.api.core import OPTIONAL_NODE_OPERATIONS, Affinity, Node, Taint, Toleration
from operators.api.limits import ResourceClaimReservedForMaxSize
from operators.api.resource import ResourceClaim
from operators.scheduling.cycle import (
    ClaimsNotReady,
    CycleResult,
    KnownOutcome,
    NodeFit,
    prefer_nominated,
    resolve_claims,
    run_cycle,
    unavailable_claim,
    unschedulable_message,
)
from operators.scheduling.nodes import NodeUsage
from operators.scheduling.score import POLICIES, Score, ScorePolicy, Scoring
from tests.unit.allocator.builders import (
    CLAIM0,
    CLAIM1,
    CLASS_A,
    CLASS_B,
    DEVICE0,
    DEVICE1,
    DRIVER_A,
    DRIVER_B,
    NODE1,
    NODE2,
    POOL1,
    POOL2,
    REQ0,
    SLICE1,
    SLICE2,
    SUBREQ0,
    SUBREQ1,
    all_request,
    allocation,
    claim,
    device,
    device_class,
    local_node_selector,
    node_label_selector,
    pool,
    prioritized,
    request,
    result,
    slice_,
    slice_many,
    sub_request,
)

from .builders import (
    NS,
    POD_UID,
    J,
    allocator,
    container,
    in_namespace,
    node,
    pod,
    taint,
)

NODE3 = "node-3"
CLASSES = [device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)]
KEY0, KEY1 = f"{NS}/{CLAIM0}", f"{NS}/{CLAIM1}"


def gpu_claim(
    name: str = CLAIM0,
    *,
    count: int = 1,
    deleting: bool = False,
    allocation: J | None = None,
    reserved_for: Sequence[str] = (),
) -> ResourceClaim:
    return in_namespace(
        claim(name, request(REQ0, CLASS_A, count)),
        uid=f"uid-{name}",
        deleting=deleting,
        allocation=allocation,
        reserved_for=reserved_for,
    )


def allocated(on: str | None = NODE1) -> J:
    return allocation(
        local_node_selector(on) if on else None, result(REQ0, DRIVER_A, POOL1, DEVICE1)
    )


# --- resolve_claims (PreEnqueue) -----------------------------------------------------------


def direct(entry: str, claim_name: str) -> J:
    return {"name": entry, "resourceClaimName": claim_name}


def templated(entry: str, template: str = "gpu-template") -> J:
    return {"name": entry, "resourceClaimTemplateName": template}


def recorded(entry: str, claim_name: str | None) -> J:
    return {"name": entry, "resourceClaimName": claim_name}


def owned(
    name: str, owner: str = POD_UID, *, controller: bool = True, deleting: bool = False
) -> ResourceClaim:
    return in_namespace(
        claim(name, request(REQ0, CLASS_A)), owner=owner, controller=controller, deleting=deleting
    )


RESOLVE_CASES = [
    # (pod claims, recorded statuses, claims in the namespace, names or reason)
    pytest.param([], [], {}, [], id="no-claims"),
    pytest.param(
        [direct("a", "shared"), direct("b", "other")],
        [],
        {"shared": gpu_claim("shared"), "other": gpu_claim("other")},
        ["shared", "other"],
        id="direct-names-in-pod-order",
    ),
    pytest.param(
        [direct("a", "shared")],
        [],
        {"shared": in_namespace(claim("shared"), owner="someone-else")},
        ["shared"],
        id="direct-claims-need-no-owner",
    ),
    pytest.param(
        [templated("gpu")],
        [recorded("gpu", "p-gpu-x1")],
        {"p-gpu-x1": owned("p-gpu-x1")},
        ["p-gpu-x1"],
        id="template-recorded",
    ),
    pytest.param(
        [templated("gpu")],
        [],
        {"p-gpu-x1": owned("p-gpu-x1")},
        "waiting for the ResourceClaim of entry gpu (template gpu-template) to be created",
        id="template-not-recorded-yet",
    ),
    pytest.param(
        [templated("gpu")],
        [recorded("other", "p-other")],
        {},
        "waiting for the ResourceClaim of entry gpu (template gpu-template) to be created",
        id="template-other-entry-recorded",
    ),
    pytest.param(
        [templated("gpu"), direct("b", "shared")],
        [recorded("gpu", None)],
        {"shared": gpu_claim("shared")},
        ["shared"],
        id="template-null-name-needs-no-claim",
    ),
    pytest.param(
        [direct("a", "gone")], [], {}, f"resourceclaim {NS}/gone not found", id="direct-missing"
    ),
    pytest.param(
        [templated("gpu")],
        [recorded("gpu", "p-gpu-x1")],
        {},
        f"resourceclaim {NS}/p-gpu-x1 not found",
        id="template-claim-missing",
    ),
    pytest.param(
        [direct("a", "old")],
        [],
        {"old": gpu_claim("old", deleting=True)},
        f"resourceclaim {NS}/old is being deleted",
        id="direct-deleting",
    ),
    pytest.param(
        [templated("gpu")],
        [recorded("gpu", "p-gpu-x1")],
        {"p-gpu-x1": owned("p-gpu-x1", deleting=True)},
        f"resourceclaim {NS}/p-gpu-x1 is being deleted",
        id="template-deleting",
    ),
    pytest.param(
        [templated("gpu")],
        [recorded("gpu", "p-gpu-x1")],
        {"p-gpu-x1": owned("p-gpu-x1", owner="uid-of-an-earlier-pod")},
        f"resourceclaim {NS}/p-gpu-x1 was not created for pod {NS}/p",
        id="template-claim-of-another-pod",
    ),
    pytest.param(
        [templated("gpu")],
        [recorded("gpu", "p-gpu-x1")],
        {"p-gpu-x1": owned("p-gpu-x1", controller=False)},
        f"resourceclaim {NS}/p-gpu-x1 was not created for pod {NS}/p",
        id="template-owner-not-controller",
    ),
    pytest.param(
        [templated("gpu")],
        [recorded("gpu", "p-gpu-x1")],
        {"p-gpu-x1": gpu_claim("p-gpu-x1")},
        f"resourceclaim {NS}/p-gpu-x1 was not created for pod {NS}/p",
        id="template-claim-without-owner",
    ),
    pytest.param(
        [direct("a", "gone"), templated("gpu")],
        [],
        {},
        f"resourceclaim {NS}/gone not found",
        id="first-problem-wins",
    ),
    pytest.param([{"name": "empty"}], [], {}, [], id="entry-without-source-skipped"),
]


@pytest.mark.parametrize(("entries", "statuses", "claims", "expected"), RESOLVE_CASES)
def test_resolve_claims(
    entries: list[J],
    statuses: list[J],
    claims: Mapping[str, ResourceClaim],
    expected: list[str] | str,
) -> None:
    got = resolve_claims(pod(claims=entries, claim_statuses=statuses), claims)
    if isinstance(expected, str):
        assert got == ClaimsNotReady(expected)
    else:
        assert not isinstance(got, ClaimsNotReady), got
        assert [c.metadata.name for c in got] == expected
        assert all(c is claims[n] for c, n in zip(got, expected, strict=True))


# --- run_cycle: filters ------------------------------------------------------------------


class RecordingAllocator(Allocator):
    """The real allocator, remembering which nodes it was asked about."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.asked: list[str] = []

    def allocate(self, node: Node, claims: Sequence[ResourceClaim]) -> Outcome:
        self.asked.append(node.metadata.name or "")
        return super().allocate(node, claims)


def test_no_claims_needs_no_allocator() -> None:
    nodes = [node(NODE2), node(NODE1), node(NODE3, unschedulable=True)]
    got = run_cycle(pod(), [], nodes, {}, None)
    assert [f.node for f in got.fits] == [NODE1, NODE2]
    assert all(f.results == {} for f in got.fits)
    assert got.failures == {NODE3: "node(s) were unschedulable"}
    assert got.pod_error is None
    assert got.chosen is not None
    assert got.chosen.node == NODE1


def test_filtered_nodes_are_not_allocated_on() -> None:
    slices = [slice_many(SLICE1, n, POOL1 + n, DRIVER_A, 1) for n in (NODE1, NODE2, NODE3)]
    a = allocator(CLASSES, slices, kind=RecordingAllocator)
    assert isinstance(a, RecordingAllocator)
    nodes = [node(NODE1, unschedulable=True), node(NODE2, taints=[taint("x")]), node(NODE3)]
    got = run_cycle(pod(), [gpu_claim()], nodes, {}, a)
    assert a.asked == [NODE3]
    assert got.failures == {
        NODE1: "node(s) were unschedulable",
        NODE2: "node(s) had untolerated taint(s)",
    }
    assert [f.node for f in got.fits] == [NODE3]


def test_usage_per_node_is_applied() -> None:
    nodes = [node(NODE1, allocatable={"cpu": "2", "pods": "3"}), node(NODE2)]
    usage = {NODE1: NodeUsage({"cpu": Decimal("1.5")}, 1)}
    got = run_cycle(pod(containers=[container({"cpu": "1"})]), [], nodes, usage, None)
    assert got.failures == {NODE1: "Insufficient cpu"}
    assert [f.node for f in got.fits] == [NODE2]


# --- run_cycle: claims already allocated ---------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "fits"),
    [
        pytest.param(local_node_selector(NODE1), [NODE1], id="pinned-to-node-1"),
        pytest.param(node_label_selector("rack", "r2"), [NODE2], id="label-selector"),
        pytest.param(None, [NODE1, NODE2, NODE3], id="no-selector-any-node"),
        pytest.param(
            {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "Near"}]}]},
            [],
            id="invalid-selector-matches-nothing",
        ),
    ],
)
def test_allocated_claim_node_selector_restricts_nodes(selector: J | None, fits: list[str]) -> None:
    c = gpu_claim(allocation=allocation(selector, result(REQ0, DRIVER_A, POOL1, DEVICE1)))
    nodes = [node(n, labels={"rack": f"r{n[-1]}"}) for n in (NODE1, NODE2, NODE3)]
    got = run_cycle(pod(), [c], nodes, {}, None)  # nothing to allocate: no allocator needed
    assert [f.node for f in got.fits] == fits
    assert all(f.results == {} for f in got.fits)
    for name in {NODE1, NODE2, NODE3} - set(fits):
        assert got.failures[name] == f"node(s) didn't match allocated claim {KEY0}'s node selector"


def _skipping(on: str | None = NODE1, *skip: str) -> J:
    """An allocation whose device skips node operations (1.37, DRAOptionalNodeOperations)."""
    return allocation(
        local_node_selector(on) if on else None,
        result(REQ0, DRIVER_A, POOL1, DEVICE1, skip_node_operations=skip or ["*"]),
    )


@pytest.mark.parametrize("skip", [["*"], ["NodePrepareResources"]])
def test_a_claim_skipping_node_operations_needs_a_node_declaring_it_can(skip: list[str]) -> None:
    """DynamicResources' Filter: an allocated claim whose result has skipNodeOperations is
    unavailable on a node without DRAOptionalNodeOperations in status.declaredFeatures."""
    c = gpu_claim(allocation=_skipping(NODE1, *skip))
    assert unavailable_claim([c], node(NODE1)) is c
    declaring = node(NODE1, declared_features=[OPTIONAL_NODE_OPERATIONS])
    assert unavailable_claim([c], declaring) is None
    other = node(NODE1, declared_features=["SomeOtherFeature"])
    assert unavailable_claim([c], other) is c


def test_a_claim_not_skipping_node_operations_needs_no_declared_feature() -> None:
    c = gpu_claim(allocation=allocated(on=NODE1))
    assert unavailable_claim([c], node(NODE1)) is None
    assert unavailable_claim([gpu_claim(CLAIM1)], node(NODE1)) is None  # not allocated


def test_the_first_unavailable_claim_is_named() -> None:
    plain = gpu_claim(allocation=allocated(on=None))
    skipping = gpu_claim(CLAIM1, allocation=_skipping(None))
    assert unavailable_claim([plain, skipping], node(NODE2)) is skipping
    declaring = node(NODE2, declared_features=[OPTIONAL_NODE_OPERATIONS])
    assert unavailable_claim([plain, skipping], declaring) is None
    # The node selector is checked too: declaring the feature does not help on another node.
    pinned = gpu_claim(CLAIM1, allocation=_skipping(NODE1))
    assert unavailable_claim([plain, pinned], declaring) is pinned


def test_run_cycle_refuses_a_node_lacking_optional_node_operations() -> None:
    c = gpu_claim(allocation=_skipping(None))
    nodes = [node(NODE1), node(NODE2, declared_features=[OPTIONAL_NODE_OPERATIONS])]
    got = run_cycle(pod(), [c], nodes, {}, None)  # nothing to allocate: no allocator needed
    assert [f.node for f in got.fits] == [NODE2]
    assert got.failures[NODE1] == (
        f"resource claim {KEY0} allocation requires {OPTIONAL_NODE_OPERATIONS} feature on the node"
    )


def test_node_filters_are_reported_before_the_allocated_claim() -> None:
    c = gpu_claim(allocation=allocated(on=NODE1))
    got = run_cycle(pod(), [c], [node(NODE2, unschedulable=True)], {}, None)
    assert got.failures == {NODE2: "node(s) were unschedulable"}


@pytest.mark.parametrize(
    ("others", "includes_pod", "error"),
    [
        pytest.param(ResourceClaimReservedForMaxSize - 1, False, False, id="one-slot-left"),
        pytest.param(ResourceClaimReservedForMaxSize, False, True, id="full"),
        pytest.param(ResourceClaimReservedForMaxSize - 1, True, False, id="full-but-ours"),
    ],
)
def test_reserved_for_full(others: int, includes_pod: bool, error: bool) -> None:
    consumers = [f"other-{i}" for i in range(others)] + ([POD_UID] if includes_pod else [])
    c = gpu_claim(allocation=allocated(on=None), reserved_for=consumers)
    got = run_cycle(pod(), [c], [node(NODE1)], {}, None)
    if error:
        assert got.pod_error == (
            f"resourceclaim {KEY0} is reserved by the maximum of 256 consumers"
        )
        assert got.fits == ()
        assert got.failures == {}
        assert unschedulable_message(1, got) == got.pod_error
    else:
        assert got.pod_error is None
        assert [f.node for f in got.fits] == [NODE1]


# --- run_cycle: allocation per node ------------------------------------------------------


def test_unallocated_claims_are_allocated_per_node() -> None:
    slices = [
        slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 3),
        slice_many(SLICE2, NODE2, POOL2, DRIVER_A, 2),
    ]
    claims = [gpu_claim(CLAIM0), gpu_claim(CLAIM1, count=2)]
    got = run_cycle(pod(), claims, [node(NODE1), node(NODE2)], {}, allocator(CLASSES, slices))
    assert [f.node for f in got.fits] == [NODE1]
    fit = got.fits[0]
    assert set(fit.results) == {KEY0, KEY1}
    devices = [(r.pool, r.device) for a in fit.results.values() for r in a.devices.results]
    assert sorted(devices) == [(POOL1, f"device-{i}") for i in range(3)]  # three distinct
    assert len(fit.results[KEY1].devices.results) == 2
    for a in fit.results.values():
        assert a.node_selector is not None
        assert a.node_selector.dump() == local_node_selector(NODE1)
    # node-2 cannot take both claims; the pod fits elsewhere, so no explanation is computed.
    assert got.failures == {NODE2: "cannot allocate all claims"}
    assert got.details == {}
    # Alone, node-2 explains itself: devices for each claim alone, not for both.
    alone = run_cycle(pod(), claims, [node(NODE2)], {}, allocator(CLASSES, slices))
    assert alone.fits == ()
    assert alone.failures == {NODE2: f"cannot allocate claim {KEY0}"}
    assert "not together" in alone.details[f"cannot allocate claim {KEY0}"]


def test_unsatisfiable_request_is_named_with_its_detail() -> None:
    slices = [slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 1)]
    got = run_cycle(pod(), [gpu_claim(count=2)], [node(NODE1)], {}, allocator(CLASSES, slices))
    where = f"cannot allocate claim {KEY0}, request {REQ0}"
    assert got.failures == {NODE1: where}
    assert got.details == {where: "1 devices on node-1; 1 usable, 2 needed"}


def test_allocation_sees_devices_taken_by_other_claims() -> None:
    slices = [
        slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 1),
        slice_many(SLICE2, NODE2, POOL2, DRIVER_A, 1),
    ]
    taken = gpu_claim(
        "taken", allocation=allocation(None, result(REQ0, DRIVER_A, POOL1, "device-0"))
    )
    got = run_cycle(
        pod(), [gpu_claim()], [node(NODE1), node(NODE2)], {}, allocator(CLASSES, slices, [taken])
    )
    assert [f.node for f in got.fits] == [NODE2]
    assert NODE1 in got.failures


def test_mixed_allocated_and_unallocated_claims() -> None:
    slices = [slice_many(SLICE1, n, POOL1 + n, DRIVER_A, 1) for n in (NODE1, NODE2)]
    pinned = gpu_claim(CLAIM1, allocation=allocation(local_node_selector(NODE2)))
    got = run_cycle(
        pod(), [gpu_claim(), pinned], [node(NODE1), node(NODE2)], {}, allocator(CLASSES, slices)
    )
    assert [f.node for f in got.fits] == [NODE2]
    assert set(got.fits[0].results) == {KEY0}  # only the new allocation
    assert got.failures[NODE1] == f"node(s) didn't match allocated claim {KEY1}'s node selector"


@pytest.mark.parametrize(
    ("request_", "fragment"),
    [
        pytest.param(
            request(REQ0, CLASS_A, 1, "device.driver =="),
            f"claim {KEY0}, request {REQ0}, selector #0: CEL compile error",
            id="invalid-cel",
        ),
        pytest.param(
            request(REQ0, "no-such-class"),
            f"claim {KEY0}, request {REQ0}: could not retrieve device class no-such-class",
            id="class-not-found",
        ),
    ],
)
def test_invalid_input_is_a_pod_error(request_: J, fragment: str) -> None:
    slices = [slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 1)]
    c = in_namespace(claim(CLAIM0, request_))
    got = run_cycle(pod(), [c], [node(NODE1), node(NODE2)], {}, allocator(CLASSES, slices))
    assert got.pod_error is not None
    assert got.pod_error.startswith(fragment)
    assert got.fits == ()
    assert got.failures == {}
    assert unschedulable_message(2, got) == got.pod_error


def test_invalid_pool_is_a_node_error() -> None:
    slices = [
        slice_(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE1)),
        slice_many(SLICE2, NODE2, POOL2, DRIVER_A, 1),
    ]
    got = run_cycle(
        pod(), [gpu_claim()], [node(NODE1), node(NODE2)], {}, allocator(CLASSES, slices)
    )
    assert got.pod_error is None
    assert [f.node for f in got.fits] == [NODE2]
    assert got.failures == {
        NODE1: "node(s) had errors in their resource pools: invalid resource pools were "
        f"encountered: {DRIVER_A}/{POOL1} (duplicate device name {DEVICE1})"
    }


@pytest.mark.parametrize("best_only", [False, True])
def test_all_devices_of_a_pool_being_updated_is_a_node_error(best_only: bool) -> None:
    """node-1's driver published one of its pool's two slices: a request for all devices
    fails that node (upstream's message), and node-2, whose pool is complete, gets the pod."""
    slices = [
        slice_(SLICE1, NODE1, pool(POOL1, 2), DRIVER_A, device(DEVICE0)),
        slice_many(SLICE2, NODE2, POOL2, DRIVER_A, 1),
    ]
    c = in_namespace(claim(CLAIM0, all_request(REQ0, CLASS_A)))
    updating = (
        f"node(s) had errors in their resource pools: claim {KEY0}, request {REQ0}: asks for "
        f"all devices, but resource pool {DRIVER_A}/{POOL1} is currently being updated"
    )
    nodes = [node(NODE1), node(NODE2)]
    got = run_cycle(pod(), [c], nodes, {}, allocator(CLASSES, slices), best_only=best_only)
    assert [f.node for f in got.fits] == [NODE2]
    if not best_only:
        assert got.failures == {NODE1: updating}
    alone = run_cycle(pod(), [c], nodes[:1], {}, allocator(CLASSES, slices), best_only=best_only)
    assert alone.pod_error is None
    assert unschedulable_message(1, alone) == f"0/1 nodes are available: 1 {updating}."


# --- run_cycle: scoring ------------------------------------------------------------------


def fit_order(got: CycleResult) -> list[str]:
    return [f.node for f in got.fits]


def _prioritized_claim() -> ResourceClaim:
    return in_namespace(
        claim(
            CLAIM0, prioritized(REQ0, sub_request(SUBREQ0, CLASS_A), sub_request(SUBREQ1, CLASS_B))
        )
    )


def test_the_first_choice_scores_as_upstreams_dynamic_resources() -> None:
    """DynamicResources scores 8 for a first choice, 7 for a second, normalised by the best
    node (100 and 87, weight 2): with the nodes otherwise equal, the first choice wins; a
    node busy enough loses more on NodeResourcesFit than the first choice gains."""
    slices = [
        slice_many(SLICE1, NODE1, POOL1, DRIVER_B, 1),
        slice_many(SLICE2, NODE2, POOL2, DRIVER_A, 1),
    ]
    nodes = [node(NODE1), node(NODE2)]
    got = run_cycle(pod(), [_prioritized_claim()], nodes, {}, allocator(CLASSES, slices))
    assert fit_order(got) == [NODE2, NODE1]
    by_node = {f.node: f for f in got.fits}
    assert by_node[NODE2].score.plugins["DynamicResources"] == 100
    assert by_node[NODE1].score.plugins["DynamicResources"] == 87
    assert (by_node[NODE2].score.rank, by_node[NODE1].score.rank) == (0, 1)
    assert by_node[NODE1].results[KEY0].devices.results[0].request == f"{REQ0}/{SUBREQ1}"
    busy = {NODE2: NodeUsage({"cpu": Decimal(7)}, 1)}
    got = run_cycle(pod(), [_prioritized_claim()], nodes, busy, allocator(CLASSES, slices))
    assert fit_order(got) == [NODE1, NODE2]


def test_devices_with_binding_conditions_last() -> None:
    slices = [
        slice_(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1, binding=(["attached"], ["failed"]))),
        slice_many(SLICE2, NODE2, POOL2, DRIVER_A, 1),
    ]
    usage = {NODE2: NodeUsage({"cpu": Decimal(7)}, 1)}
    got = run_cycle(
        pod(), [gpu_claim()], [node(NODE1), node(NODE2)], usage, allocator(CLASSES, slices)
    )
    assert fit_order(got) == [NODE2, NODE1]
    by_node = {f.node: f for f in got.fits}
    assert by_node[NODE1].score.binding_devices == 1
    assert by_node[NODE2].score.binding_devices == 0
    assert by_node[NODE1].results[KEY0].devices.results[0].binding_conditions == ["attached"]


@pytest.mark.parametrize(("weight", "chosen"), [(1, NODE2), (0, NODE1)])
def test_ready_devices_weigh_against_a_first_choice_that_must_wait(
    weight: int, chosen: str
) -> None:
    """node-1's first choice waits for binding conditions, node-2's second choice is ready:
    ReadyDevices (weight 1: 100 points) outweighs DynamicResources' 13 x 2; at weight 0,
    upstream's choice."""
    slices = [
        slice_(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1, binding=(["attached"], []))),
        slice_many(SLICE2, NODE2, POOL2, DRIVER_B, 1),
    ]
    got = run_cycle(
        pod(),
        [_prioritized_claim()],
        [node(NODE1), node(NODE2)],
        {},
        allocator(CLASSES, slices),
        scoring=Scoring(ready_devices=weight),
    )
    assert got.chosen is not None
    assert got.chosen.node == chosen
    assert ("ReadyDevices" in got.chosen.score.plugins) == bool(weight)


@pytest.mark.parametrize(
    ("policy", "order"),
    [
        pytest.param("least-allocated", [NODE2, NODE3, NODE1], id="least"),
        pytest.param("most-allocated", [NODE1, NODE3, NODE2], id="most"),
    ],
)
def test_allocated_policy(policy: ScorePolicy, order: list[str]) -> None:
    nodes = [
        node(NODE1, allocatable={"cpu": "4", "memory": "4Gi"}),
        node(NODE2, allocatable={"cpu": "4", "memory": "4Gi"}),
        node(NODE3, allocatable={"cpu": "4", "memory": "4Gi"}),
    ]
    usage = {
        NODE1: NodeUsage({"cpu": Decimal(3), "memory": Decimal(3 * 2**30)}, 1),
        NODE3: NodeUsage({"cpu": Decimal(1)}, 1),
    }
    p = pod(containers=[container({"cpu": "1", "memory": "1Gi"})])
    got = run_cycle(p, [], nodes, usage, None, scoring=Scoring(policy=policy))
    assert fit_order(got) == order
    fit = {f.node: f.score.plugins["NodeResourcesFit"] for f in got.fits}
    balanced = {f.node: f.score.plugins["NodeResourcesBalancedAllocation"] for f in got.fits}
    # Least/MostAllocated: each resource's (free or used) share in whole percent, averaged
    if policy == "least-allocated":
        assert fit == {NODE1: 0, NODE2: 75, NODE3: (50 + 75) // 2}
    else:
        assert fit == {NODE1: 100, NODE2: 25, NODE3: (50 + 25) // 2}
    # the pod changes no node's balance: 50 + half of nothing
    assert balanced == {NODE1: 75, NODE2: 75, NODE3: 75}
    # and on every node TaintToleration's 100 x 3 (no taints), ReadyDevices' 100 (no devices)
    assert {f.node: f.score.points for f in got.fits} == {n: fit[n] + 75 + 400 for n in fit}


@pytest.mark.parametrize("policy", ["least-allocated", "most-allocated"])
def test_ties_break_by_node_name(policy: ScorePolicy) -> None:
    nodes = [node(n) for n in ("node-c", "node-a", "node-b")]
    got = run_cycle(pod(), [], nodes, {}, None, scoring=Scoring(policy=policy))
    assert fit_order(got) == ["node-a", "node-b", "node-c"]


def test_binding_conditions_beat_utilisation_and_utilisation_beats_name() -> None:
    slices = [
        slice_(SLICE1, "node-a", POOL1, DRIVER_A, device(DEVICE1, binding=(["attached"], []))),
        slice_many(SLICE2, "node-b", POOL2, DRIVER_A, 1),
        slice_many("slice-3", "node-c", "pool-3", DRIVER_A, 1),
    ]
    usage = {
        "node-b": NodeUsage({"cpu": Decimal(6)}, 1),
        "node-c": NodeUsage({"cpu": Decimal(1)}, 1),
    }
    nodes = [node(n) for n in ("node-a", "node-b", "node-c")]
    got = run_cycle(pod(), [gpu_claim()], nodes, usage, allocator(CLASSES, slices))
    assert fit_order(got) == ["node-c", "node-b", "node-a"]


# --- prefer_nominated --------------------------------------------------------------------


def cycle_with(*nodes_: str) -> CycleResult:
    fits = tuple(NodeFit(n, {}, Score(0, 0, 0, n)) for n in nodes_)
    return CycleResult(fits, {}, {})


@pytest.mark.parametrize(
    ("fits", "nominated", "chosen"),
    [
        pytest.param([NODE1, NODE2], NODE2, NODE2, id="nominated-still-fits"),
        pytest.param([NODE1, NODE2], NODE3, NODE1, id="nominated-no-longer-fits"),
        pytest.param([NODE1, NODE2], None, NODE1, id="none-nominated"),
        pytest.param([NODE1, NODE2], "", NODE1, id="empty-nominated"),
        pytest.param([], NODE1, None, id="nothing-fits"),
    ],
)
def test_prefer_nominated(fits: list[str], nominated: str | None, chosen: str | None) -> None:
    got = prefer_nominated(cycle_with(*fits), nominated)
    assert (got.node if got is not None else None) == chosen


# --- unschedulable_message ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("total", "failures", "details", "max_reasons", "message"),
    [
        pytest.param(
            0, {}, {}, 6, "0/0 nodes are available: no nodes in the cluster.", id="no-nodes"
        ),
        pytest.param(
            1,
            {NODE1: "node(s) were unschedulable"},
            {},
            6,
            "0/1 nodes are available: 1 node(s) were unschedulable.",
            id="one",
        ),
        pytest.param(
            12,
            {
                **{f"g{i}": "cannot allocate claim ns/gpu-claim, request gpu" for i in range(7)},
                **{f"t{i}": "node(s) had untolerated taint(s)" for i in range(5)},
            },
            {"cannot allocate claim ns/gpu-claim, request gpu": "no device matches class big"},
            6,
            "0/12 nodes are available: 7 cannot allocate claim ns/gpu-claim, request gpu: "
            "no device matches class big; 5 node(s) had untolerated taint(s).",
            id="grouped-with-details",
        ),
        pytest.param(
            4,
            {"a": "b-reason", "b": "a-reason", "c": "c-reason", "d": "c-reason"},
            {},
            6,
            "0/4 nodes are available: 2 c-reason; 1 a-reason; 1 b-reason.",
            id="count-then-reason-order",
        ),
        pytest.param(
            4,
            {"a": "r1", "b": "r2", "c": "r3", "d": "r3"},
            {},
            2,
            "0/4 nodes are available: 2 r3; 1 r1; 1 more reasons.",
            id="truncated",
        ),
    ],
)
def test_unschedulable_message(
    total: int,
    failures: dict[str, str],
    details: dict[str, str],
    max_reasons: int,
    message: str,
) -> None:
    result_ = CycleResult((), failures, details)
    assert unschedulable_message(total, result_, max_reasons) == message


def test_unschedulable_message_from_a_real_cycle() -> None:
    slices = [slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 1)]
    nodes = [
        node(NODE1),
        node(NODE2),
        node(NODE3, unschedulable=True),
        node("node-4", taints=[taint("gpu", "true")]),
    ]
    got = run_cycle(pod(), [gpu_claim(count=2)], nodes, {}, allocator(CLASSES, slices))
    assert got.fits == ()
    message = unschedulable_message(len(nodes), got)
    where = f"cannot allocate claim {KEY0}, request {REQ0}"
    assert message.startswith(f"0/4 nodes are available: 2 {where}: ")
    assert message.endswith("; 1 node(s) had untolerated taint(s); 1 node(s) were unschedulable.")
    assert got.details[where] in message


class Unexplained(Allocator):
    """An allocator that finds nothing and gives no reason."""

    def allocate(self, node: Node, claims: Sequence[ResourceClaim]) -> Outcome:
        return Outcome(Status.UNSATISFIABLE)


def test_unsatisfiable_without_reasons() -> None:
    a = allocator(CLASSES, [], kind=Unexplained)
    got = run_cycle(pod(), [gpu_claim()], [node(NODE1)], {}, a)
    assert got.failures == {NODE1: "cannot allocate all claims"}
    assert got.details == {}
    assert unschedulable_message(1, got) == "0/1 nodes are available: 1 cannot allocate all claims."


def test_one_detail_per_grouped_reason_from_the_first_node() -> None:
    slices = [slice_many(SLICE1, n, POOL1 + n, DRIVER_A, 1) for n in (NODE2, NODE1)]
    got = run_cycle(
        pod(), [gpu_claim(count=2)], [node(NODE2), node(NODE1)], {}, allocator(CLASSES, slices)
    )
    where = f"cannot allocate claim {KEY0}, request {REQ0}"
    assert got.failures == {NODE1: where, NODE2: where}
    assert got.details == {where: "1 devices on node-1; 1 usable, 2 needed"}
    assert unschedulable_message(2, got) == (
        f"0/2 nodes are available: 2 {where}: 1 devices on node-1; 1 usable, 2 needed."
    )


# --- run_cycle: nodes known not to fit the same claims ----------------------------------


class CountingAllocator:
    """An Allocator that records which nodes it was asked about."""

    def __init__(self, inner: Allocator) -> None:
        self.inner = inner
        self.allocated = inner.allocated
        self.asked: list[str] = []

    def allocate(self, node: Node, claims: Sequence[ResourceClaim]) -> Outcome:
        self.asked.append(node.metadata.name or "")
        return self.inner.allocate(node, claims)


def test_known_unsatisfiable_nodes_are_skipped_and_learned() -> None:
    slices = [
        slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 1),
        slice_many(SLICE2, NODE2, POOL2, DRIVER_A, 2),
    ]
    claims = [gpu_claim(CLAIM0, count=2)]
    counting = CountingAllocator(allocator(CLASSES, slices))
    known: dict[str, KnownOutcome] = {}
    nodes = [node(NODE1), node(NODE2)]
    first = run_cycle(pod(), claims, nodes, {}, counting, known_unsatisfiable=known)  # type: ignore[arg-type]
    assert [f.node for f in first.fits] == [NODE2]
    assert set(known) == {NODE1}
    counting.asked.clear()
    second = run_cycle(pod(), claims, nodes, {}, counting, known_unsatisfiable=known)  # type: ignore[arg-type]
    assert counting.asked == [NODE2]
    assert [f.node for f in second.fits] == [NODE2]
    assert second.failures == {NODE1: "cannot allocate all claims"}


def test_all_nodes_known_unsatisfiable_still_get_an_explanation() -> None:
    slices = [slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 1)]
    claims = [gpu_claim(CLAIM0, count=2)]
    known: dict[str, KnownOutcome] = {}
    the_allocator = allocator(CLASSES, slices)
    run_cycle(pod(), claims, [node(NODE1)], {}, the_allocator, known_unsatisfiable=known)
    assert set(known) == {NODE1}
    counting = CountingAllocator(the_allocator)
    got = run_cycle(
        pod(),
        claims,
        [node(NODE1)],
        {},
        counting,  # type: ignore[arg-type]
        known_unsatisfiable=known,
    )
    assert counting.asked == []  # nothing was allocated since: its own outcome explains it
    assert got.fits == ()
    reason = got.failures[NODE1]
    assert reason.startswith(f"cannot allocate claim {KEY0}")
    assert got.details[reason]
    assert "nodes are available" in unschedulable_message(1, got)


def test_a_node_known_from_another_pods_claim_explains_this_pods_claim() -> None:
    """Pods of one template have claims of the same specs under their own names: the outcome
    learned from the first pod's claim explains the second's by the second's name."""
    slices = [slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 1)]
    known: dict[str, KnownOutcome] = {}
    the_allocator = allocator(CLASSES, slices)
    first = [gpu_claim(CLAIM0, count=2)]
    run_cycle(pod(), first, [node(NODE1)], {}, the_allocator, known_unsatisfiable=known)
    counting = CountingAllocator(the_allocator)
    second = [gpu_claim(CLAIM1, count=2)]
    got = run_cycle(
        pod(),
        second,
        [node(NODE1)],
        {},
        counting,  # type: ignore[arg-type]
        known_unsatisfiable=known,
    )
    assert counting.asked == []  # still learned, not computed again
    (reason,) = got.failures.values()
    assert reason.startswith(f"cannot allocate claim {KEY1}"), reason


def test_known_unsatisfiable_nodes_are_explained_by_their_node_filters_first() -> None:
    """Skipping them costs no filter run while a fit exists; an unschedulable pod still gets
    kube-scheduler's explanation, node filters before DynamicResources."""
    slices = [
        slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 1),
        slice_many(SLICE2, NODE2, POOL2, DRIVER_A, 1),
    ]
    claims = [gpu_claim(CLAIM0, count=2)]
    known: dict[str, KnownOutcome] = {}
    the_allocator = allocator(CLASSES, slices)
    run_cycle(
        pod(), claims, [node(NODE1), node(NODE2)], {}, the_allocator, known_unsatisfiable=known
    )
    assert set(known) == {NODE1, NODE2}
    got = run_cycle(
        pod(),
        claims,
        [node(NODE1, unschedulable=True), node(NODE2)],
        {},
        the_allocator,
        known_unsatisfiable=known,
    )
    assert got.fits == ()
    assert got.failures[NODE1] == "node(s) were unschedulable"
    assert got.failures[NODE2].startswith(f"cannot allocate claim {KEY0}")


def test_best_only_picks_what_a_full_scan_picks_with_fewer_allocator_calls() -> None:
    slices = [
        slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 2),
        slice_many(SLICE2, NODE2, POOL2, DRIVER_A, 2),
    ]
    claims = [gpu_claim(CLAIM0)]
    nodes = [node(NODE2), node(NODE1)]
    full = run_cycle(pod(), claims, nodes, {}, allocator(CLASSES, slices))
    counting = CountingAllocator(allocator(CLASSES, slices))
    best = run_cycle(pod(), claims, nodes, {}, counting, best_only=True)  # type: ignore[arg-type]
    assert full.chosen is not None
    assert best.chosen is not None
    assert best.chosen.node == full.chosen.node
    assert counting.asked == [full.chosen.node]  # the first fit beats every other bound


def test_a_preferred_node_affinity_is_scored_over_every_feasible_node() -> None:
    """NodeAffinity normalises over the feasible nodes, so best-first visits them all: the
    preferred node wins although it is the busier one and last by name."""
    slices = [
        slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 2),
        slice_many(SLICE2, NODE2, POOL2, DRIVER_A, 2),
    ]
    nodes = [node(NODE1), node(NODE2, labels={"disk": "fast"})]
    p = pod()
    p.spec.affinity = Affinity.model_validate(
        {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "preference": {
                            "matchExpressions": [
                                {"key": "disk", "operator": "In", "values": ["fast"]}
                            ]
                        },
                    }
                ]
            }
        }
    )
    usage = {NODE2: NodeUsage({"cpu": Decimal(2)}, 2)}
    counting = CountingAllocator(allocator(CLASSES, slices))
    got = run_cycle(p, [gpu_claim(CLAIM0)], nodes, usage, counting, best_only=True)  # type: ignore[arg-type]
    assert got.chosen is not None
    assert got.chosen.node == NODE2
    assert got.chosen.score.plugins["NodeAffinity"] == 100
    assert sorted(counting.asked) == [NODE1, NODE2]


def test_best_only_visits_the_nominated_node_first() -> None:
    slices = [
        slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 2),
        slice_many(SLICE2, NODE2, POOL2, DRIVER_A, 2),
    ]
    counting = CountingAllocator(allocator(CLASSES, slices))
    got = run_cycle(
        pod(),
        [gpu_claim(CLAIM0)],
        [node(NODE1), node(NODE2)],
        {},
        counting,  # type: ignore[arg-type]
        best_only=True,
        nominated=NODE2,
    )
    assert counting.asked == [NODE2]
    assert prefer_nominated(got, NODE2) is not None
    assert prefer_nominated(got, NODE2).node == NODE2  # type: ignore[union-attr]


@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=80, deadline=None)
@given(
    layout=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=6),  # cpu already requested on the node
            st.integers(min_value=0, max_value=2),  # devices of the first-choice driver
            st.integers(min_value=0, max_value=2),  # devices of the second choice
            st.booleans(),  # first-choice devices wait for binding conditions
            st.sampled_from(["", "fast", "slow"]),  # the node's disk label
            st.booleans(),  # a PreferNoSchedule taint
        ),
        min_size=1,
        max_size=6,
    ),
    cpu=st.integers(min_value=0, max_value=2),
    prefers=st.booleans(),
    tolerates=st.booleans(),
)
def test_best_first_chooses_what_a_full_scan_chooses(
    policy: ScorePolicy,
    layout: list[tuple[int, int, int, bool, str, bool]],
    cpu: int,
    prefers: bool,
    tolerates: bool,
) -> None:
    """Best-first search stops only where no bound left can beat its fit, for every policy:
    it chooses the node a scan of every node chooses, with the same scores."""
    nodes, slices, usage = [], [], {}
    for i, (used, first, second, binding, disk, tainted) in enumerate(layout):
        name = f"node-{i}"
        n = node(
            name,
            allocatable={"cpu": "8", "memory": "8Gi", "pods": "10"},
            labels={"disk": disk} if disk else {},
        )
        if tainted:
            n.spec.taints = [Taint(key="busy", effect="PreferNoSchedule")]
        nodes.append(n)
        if used:
            usage[name] = NodeUsage({"cpu": Decimal(used)}, 1)
        conditions: tuple[list[str], list[str]] | None = (["attached"], []) if binding else None
        if first:
            slices.append(
                slice_(
                    f"a-{i}",
                    name,
                    f"pool-a-{i}",
                    DRIVER_A,
                    *(device(f"gpu-{d}", binding=conditions) for d in range(first)),
                )
            )
        if second:
            slices.append(slice_many(f"b-{i}", name, f"pool-b-{i}", DRIVER_B, second))
    p = pod(containers=[container({"cpu": str(cpu)})] if cpu else ())
    if prefers:
        p.spec.affinity = Affinity.model_validate(
            {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 10,
                            "preference": {
                                "matchExpressions": [
                                    {"key": "disk", "operator": "In", "values": ["fast"]}
                                ]
                            },
                        }
                    ]
                }
            }
        )
    if tolerates:
        p.spec.tolerations = [Toleration(key="busy", operator="Exists")]
    scoring = Scoring(policy=policy)
    c = _prioritized_claim()
    full = run_cycle(p, [c], nodes, usage, allocator(CLASSES, slices), scoring=scoring)
    counting = CountingAllocator(allocator(CLASSES, slices))
    best = run_cycle(
        p,
        [c],
        nodes,
        usage,
        counting,  # type: ignore[arg-type]
        scoring=scoring,
        best_only=True,
    )
    assert (best.chosen.node if best.chosen else None) == (
        full.chosen.node if full.chosen else None
    )
    if best.chosen is not None and full.chosen is not None:
        assert best.chosen.score == full.chosen.score


# --- the time budget (kube-scheduler's DRA filter timeout) ---------------------------------


def test_out_of_time_leaves_every_undecided_node_timed_out() -> None:
    slices = [
        slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 1),
        slice_many(SLICE2, NODE2, POOL2, DRIVER_A, 1),
    ]
    spent = allocator(CLASSES, slices, out_of_time=lambda: True)
    got = run_cycle(pod(), [gpu_claim()], [node(NODE1), node(NODE2)], {}, spent)
    assert got.timed_out
    assert got.fits == ()
    assert got.failures == dict.fromkeys([NODE1, NODE2], "timed out trying to allocate devices")
    assert unschedulable_message(2, got) == (
        "0/2 nodes are available: 2 timed out trying to allocate devices."
    )


def test_a_fit_found_before_the_budget_ran_out_is_kept() -> None:
    """A full scan ran out on the second node: the first node's fit still stands."""
    slices = [
        slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 1),
        slice_many(SLICE2, NODE2, POOL2, DRIVER_A, 1),
    ]
    evaluations = 0

    def after_the_first_node() -> bool:
        nonlocal evaluations
        evaluations += 1
        return evaluations > 1

    # The class's selector needs one CEL evaluation per device: one per node here.
    spent = allocator(CLASSES, slices, out_of_time=after_the_first_node)
    got = run_cycle(pod(), [gpu_claim()], [node(NODE1), node(NODE2)], {}, spent)
    assert got.timed_out
    assert [f.node for f in got.fits] == [NODE1]
    assert got.failures == {NODE2: "timed out trying to allocate devices"}


def test_a_skipped_node_is_explained_as_it_is_now() -> None:
    """Devices taken since a node was found too small: its explanation says so (the message
    equals the one of a cycle that skips nothing, which is what simulate gives)."""
    slices = [slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 2)]
    claims = [gpu_claim(CLAIM0, count=3)]
    known: dict[str, KnownOutcome] = {}
    run_cycle(
        pod(), claims, [node(NODE1)], {}, allocator(CLASSES, slices), known_unsatisfiable=known
    )
    taken = gpu_claim(
        CLAIM1,
        allocation=allocation(local_node_selector(NODE1), result(REQ0, DRIVER_A, POOL1, DEVICE0)),
    )
    now = allocator(CLASSES, slices, allocated=[taken])
    skipping = run_cycle(pod(), claims, [node(NODE1)], {}, now, known_unsatisfiable=known)
    scanning = run_cycle(pod(), claims, [node(NODE1)], {}, now)
    assert unschedulable_message(1, skipping) == unschedulable_message(1, scanning)
    assert "1 allocated" in unschedulable_message(1, skipping)


class ForgottenAfterTheSkip(dict[str, KnownOutcome]):
    """The event loop forgets a freed node while the cycle runs in its thread: the node was
    known when the cycle skipped it, and is gone when the cycle explains it."""

    def __contains__(self, name: object) -> bool:
        found = super().__contains__(name)
        if found:
            del self[name]  # type: ignore[arg-type]
        return found


def test_a_skipped_node_forgotten_while_the_cycle_runs_is_explained_afresh() -> None:
    slices = [slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 1)]
    claims = [gpu_claim(CLAIM0, count=2)]
    the_allocator = allocator(CLASSES, slices)
    learned: dict[str, KnownOutcome] = {}
    run_cycle(pod(), claims, [node(NODE1)], {}, the_allocator, known_unsatisfiable=learned)
    known = ForgottenAfterTheSkip(learned)
    counting = CountingAllocator(the_allocator)
    got = run_cycle(
        pod(),
        claims,
        [node(NODE1)],
        {},
        counting,  # type: ignore[arg-type]
        known_unsatisfiable=known,
    )
    assert counting.asked == [NODE1]  # skipped, then computed again to explain it
    assert got.fits == ()
    assert got.failures[NODE1].startswith(f"cannot allocate claim {KEY0}")
