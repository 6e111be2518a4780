"""Rows for the allocator of Kubernetes 1.37 where it parts from 1.36's (k8s.io/dynamic-resource-
allocation v0.37.2, structured/internal): each one answers differently as 1.36
(test_upstream_table.py checks that too), so a switch on the release that breaks is caught.
Several are 1.37's own rows of allocator_testing.go, ported; the others come from the
differential runs against the 1.37 oracle."""

from __future__ import annotations

import dataclasses
from typing import Any

from operators.allocator import Features
from operators.allocator.features import V1_37
from operators.api.resource import ResourceSlice

from . import cases_attributes, cases_regressions
from .builders import (
    ALL_NODES,
    CAPACITY0,
    CLAIM0,
    CLASS_A,
    CLASS_B,
    COUNTER_SET1,
    DEVICE1,
    DEVICE2,
    DEVICE3,
    DEVICE4,
    DRIVER_A,
    DRIVER_B,
    NODE1,
    NODE2,
    POOL1,
    REGION1,
    REQ0,
    REQ1,
    REQ2,
    SLICE1,
    SLICE2,
    SUBREQ0,
    SUBREQ1,
    Case,
    J,
    all_request,
    allocation,
    claim,
    claim_config,
    config_result,
    consumes,
    counter_set,
    dev_id,
    device,
    device_class,
    distinct_attribute,
    local_node_selector,
    match_attribute,
    node,
    pool,
    prioritized,
    request,
    result,
    slice_,
    slice_many,
    sub_request,
)

N1 = node(NODE1, REGION1)
LOCAL = local_node_selector(NODE1)
CLAIM = "FromClaim"


def features(**gates: bool) -> Features:
    """Only the named gates on, as the 1.37 allocator."""
    on: dict[str, Any] = dict(gates)
    return Features(**on, kubernetes=V1_37)


def _strings(*values: str) -> J:
    return {"strings": list(values)}


def _fractional(value: str) -> J:
    """A shareable capacity stepped from 200m by 100m (upstream's fractional range helper)."""
    return {
        "value": value,
        "requestPolicy": {
            "default": "200m",
            "validRange": {"min": "200m", "step": "100m", "max": value},
        },
    }


def cases() -> list[Case]:
    a_class = [device_class(CLASS_A, DRIVER_A)]
    three = slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 3)
    return [
        # allocator_*.go, result building: a claim config naming two requests is added once
        # (1.36 adds it once per request it names).
        Case(
            "137-claim-config-for-two-requests-once",
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A),
                    request(REQ1, CLASS_A),
                    request(REQ2, CLASS_A),
                    config=[claim_config([REQ0, REQ1], DRIVER_A, "deviceAttribute")],
                )
            ],
            classes=a_class,
            slices=[three],
            node=N1,
            features=features(),
            expect=[
                allocation(
                    LOCAL,
                    result(REQ0, DRIVER_A, POOL1, "device-0"),
                    result(REQ1, DRIVER_A, POOL1, "device-1"),
                    result(REQ2, DRIVER_A, POOL1, "device-2"),
                    config=[config_result(CLAIM, [REQ0, REQ1], DRIVER_A, "deviceAttribute")],
                )
            ],
        ),
        # ... and one that names every request (one by its chosen subrequest) loses its
        # requests: empty means all.
        Case(
            "137-claim-config-covering-all-requests-is-cleared",
            claims=[
                claim(
                    CLAIM0,
                    prioritized(REQ0, sub_request(SUBREQ0, CLASS_A), sub_request(SUBREQ1, CLASS_B)),
                    request(REQ1, CLASS_A),
                    config=[claim_config([f"{REQ0}/{SUBREQ0}", REQ1], DRIVER_A, "all")],
                )
            ],
            classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
            slices=[slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 2)],
            node=N1,
            features=features(prioritized_list=True),
            expect=[
                allocation(
                    LOCAL,
                    result(f"{REQ0}/{SUBREQ0}", DRIVER_A, POOL1, "device-0"),
                    result(REQ1, DRIVER_A, POOL1, "device-1"),
                    config=[config_result(CLAIM, [], DRIVER_A, "all")],
                )
            ],
        ),
        # So does a class config when the class serves every request of the claim.
        Case(
            "137-class-config-of-every-request-is-cleared",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A), request(REQ1, CLASS_A))],
            classes=[device_class(CLASS_A, DRIVER_A, config_attribute="classAttribute")],
            slices=[three],
            node=N1,
            features=features(),
            expect=[
                allocation(
                    LOCAL,
                    result(REQ0, DRIVER_A, POOL1, "device-0"),
                    result(REQ1, DRIVER_A, POOL1, "device-1"),
                    config=[config_result("FromClass", [], DRIVER_A, "classAttribute")],
                )
            ],
        ),
        # validateDeviceRequest: derived attributes with DRADerivedAttributes off (1.36 does
        # not know the field and allocates).
        Case(
            "137-derived-attributes-refused-with-the-gate-off",
            claims=[
                claim(
                    CLAIM0,
                    {
                        **request(REQ0, CLASS_A),
                        "exactly": {
                            **request(REQ0, CLASS_A)["exactly"],
                            "derivedAttributes": [
                                {"name": "derived/numa", "expression": "device.attributes"}
                            ],
                        },
                    },
                )
            ],
            classes=a_class,
            slices=[three],
            node=N1,
            features=features(),
            error=(
                "claim claim-0, request req-0: cannot handle request with derived attributes, "
                "the feature is disabled"
            ),
        ),
        # GatherPools: a slice with compatibility groups is ignored with their gate off, so
        # its pool is incomplete and none of its devices is used.
        Case(
            "137-compatibility-groups-make-the-pool-incomplete",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A))],
            classes=a_class,
            slices=[
                slice_(SLICE1, NODE1, pool(POOL1, 3), DRIVER_A, device(DEVICE1)),
                slice_(
                    SLICE2,
                    NODE1,
                    pool(POOL1, 3),
                    DRIVER_A,
                    device(
                        DEVICE2,
                        consumes=[
                            {**consumes(COUNTER_SET1, {"c": 1}), "compatibilityGroups": ["g"]}
                        ],
                    ),
                ),
                slice_(
                    "slice-counters",
                    NODE1,
                    pool(POOL1, 3),
                    DRIVER_A,
                    counter_sets=[counter_set(COUNTER_SET1, {"c": 2})],
                ),
            ],
            node=N1,
            features=features(partitionable_devices=True),
        ),
        # distinctAttribute counts every chosen device (1.36 kept one value per request, so
        # a third device could repeat the first's).
        Case(
            "137-distinct-single-request-count-3-not-distinct",
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 3),
                    constraints=[distinct_attribute(f"{DRIVER_A}/s")],
                )
            ],
            classes=a_class,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, None, {"s": {"string": "value1"}}),
                    device(DEVICE2, None, {"s": {"string": "value2"}}),
                    device(DEVICE3, None, {"s": {"string": "value1"}}),
                )
            ],
            node=N1,
            features=features(consumable_capacity=True),
        ),
        # matchAttribute on lists: backtracking restores the intersection (1.36 kept it
        # narrowed to value1 and found nothing).
        Case(
            "137-list-match-backtrack-restores-the-intersection",
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 3),
                    constraints=[match_attribute(f"{DRIVER_A}/s")],
                )
            ],
            classes=a_class,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, None, {"s": _strings("value1", "value2")}),
                    device(DEVICE2, None, {"s": _strings("value1")}),
                    device(DEVICE3, None, {"s": _strings("value2")}),
                    device(DEVICE4, None, {"s": _strings("value2")}),
                )
            ],
            node=N1,
            features=features(list_type_attributes=True),
            expect=[
                allocation(
                    LOCAL,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    result(REQ0, DRIVER_A, POOL1, DEVICE3),
                    result(REQ0, DRIVER_A, POOL1, DEVICE4),
                )
            ],
        ),
        # consumable_capacity.go with DRAFractionalCapacityRange: 250m rounds up to 300m in
        # milli-units (1.36, and 1.37 without the gate, round to whole units: 1).
        Case(
            "137-fractional-range-rounds-up-in-milli-units",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, capacity="250m"))],
            classes=a_class,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, multi=True, capacity_policies={CAPACITY0: _fractional("1")}),
                )
            ],
            node=N1,
            features=features(consumable_capacity=True, fractional_capacity_range=True),
            expect=[
                allocation(
                    LOCAL,
                    result(
                        REQ0, DRIVER_A, POOL1, DEVICE1, share=True, consumed={CAPACITY0: "300m"}
                    ),
                )
            ],
        ),
        # Quarters of a device: four shares of 250m fit one capacity of 1 in milli-units.
        Case(
            "137-fractional-range-four-quarters",
            claims=[
                claim(
                    CLAIM0,
                    *(request(f"req-{i}", CLASS_A, capacity="250m") for i in range(4)),
                )
            ],
            classes=a_class,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(
                        DEVICE1,
                        multi=True,
                        capacity_policies={
                            CAPACITY0: {
                                "value": "1",
                                "requestPolicy": {
                                    "default": "250m",
                                    "validRange": {"min": "250m", "step": "250m", "max": "1"},
                                },
                            }
                        },
                    ),
                )
            ],
            node=N1,
            features=features(consumable_capacity=True, fractional_capacity_range=True),
            expect=[
                allocation(
                    LOCAL,
                    *(
                        result(
                            f"req-{i}",
                            DRIVER_A,
                            POOL1,
                            DEVICE1,
                            share=True,
                            consumed={CAPACITY0: "250m"},
                        )
                        for i in range(4)
                    ),
                )
            ],
        ),
        # A shared device already shared without capacity does not take its counters again
        # (1.36 only knew shares with capacity, charged the counter set twice and failed).
        Case(
            "137-shared-device-without-capacity-counters-not-recharged",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A))],
            classes=a_class,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    pool(POOL1, 2),
                    DRIVER_A,
                    device(DEVICE1, multi=True, consumes=[consumes(COUNTER_SET1, {"c": 1})]),
                ),
                slice_(
                    SLICE2,
                    NODE1,
                    pool(POOL1, 2),
                    DRIVER_A,
                    counter_sets=[counter_set(COUNTER_SET1, {"c": 1})],
                ),
            ],
            allocated_shared=[(dev_id(DRIVER_A, POOL1, DEVICE1), "share-earlier")],
            node=N1,
            features=features(consumable_capacity=True, partitionable_devices=True),
            expect=[allocation(LOCAL, result(REQ0, DRIVER_A, POOL1, DEVICE1, share=True))],
        ),
        # An "All" request counts the devices by their capacity alone: one whose capacity
        # others hold makes it fail instead of leaving the device out (1.36).
        Case(
            "137-all-request-fails-on-capacity-held-by-others",
            claims=[claim(CLAIM0, all_request(REQ0, CLASS_A, capacity="2"))],
            classes=a_class,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, multi=True, capacity_policies={CAPACITY0: {"value": "2"}}),
                    device(DEVICE2, multi=True, capacity_policies={CAPACITY0: {"value": "2"}}),
                )
            ],
            allocated_capacity={dev_id(DRIVER_A, POOL1, DEVICE1): {CAPACITY0: "1"}},
            allocated_shared=[(dev_id(DRIVER_A, POOL1, DEVICE1), "share-earlier")],
            node=N1,
            features=features(consumable_capacity=True),
        ),
        # A device whose slice skips node operations needs DRAOptionalNodeOperations, off.
        Case(
            "137-skip-node-operations-needs-its-gate",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A))],
            classes=a_class,
            slices=[_skipping(slice_(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1)))],
            node=N1,
            features=features(list_type_attributes=True),
        ),
        # Counter-set slices are relevant by their node selection: a pool whose counters
        # are published for node-2 only, with an "All" request and a slice missing, is
        # unknown to node-1 (1.36 saw it, incomplete, and failed the node).
        Case(
            "137-counter-slice-for-another-node-is-not-seen",
            claims=[claim(CLAIM0, all_request(REQ0, CLASS_A))],
            classes=a_class,
            slices=[
                slice_(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1)),
                slice_(
                    SLICE2,
                    NODE2,
                    pool("pool-2", 3),
                    DRIVER_A,
                    counter_sets=[counter_set(COUNTER_SET1, {"c": 1})],
                ),
            ],
            node=N1,
            features=features(partitionable_devices=True, consumable_capacity=True),
            expect=[allocation(LOCAL, result(REQ0, DRIVER_A, POOL1, DEVICE1))],
        ),
        # The claim limit is checked request by request, with 1.37's words.
        Case(
            "137-claim-limit-per-request",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 20), request(REQ1, CLASS_A, 20))],
            classes=a_class,
            slices=[slice_many(SLICE1, ALL_NODES, POOL1, DRIVER_A, 3)],
            node=N1,
            features=features(),
            error=(
                "claim claim-0, request req-1: adding 20 devices exceeds the claim limit of "
                "32, with 20 already accounted for"
            ),
        ),
        # 1.37's CEL device takes list attributes whatever DRAListTypeAttributes says: a
        # selector over a device with one no longer fails the attempt ...
        _retold(
            cases_regressions.cases(),
            "regression-list-attribute-without-gate-is-cel-error",
            expect=[allocation(LOCAL, result(REQ0, DRIVER_A, POOL1, DEVICE1))],
        ),
        # ... and a constraint over list attributes without the gate finds nothing
        # (allocator_testing.go of v0.37.2, same name): no error.
        _retold(cases_attributes.cases(), "list-attributes-disabled-match-constraint-with-lists"),
    ]


def _retold(table: list[Case], name: str, expect: list[J] | None = None) -> Case:
    """A 1.36 row as 1.37 answers it: no error, ``expect`` instead (None: no results)."""
    (row,) = (c for c in table if c.name == name)
    return dataclasses.replace(
        row,
        name=f"137-{name}",
        features=dataclasses.replace(row.features, kubernetes=V1_37),
        error=None,
        expect=expect,
    )


def _skipping(s: ResourceSlice) -> ResourceSlice:
    """The slice with skipNodeOperations set."""
    obj = s.dump()
    obj["spec"]["skipNodeOperations"] = ["NodePrepareResources"]
    return ResourceSlice.load(obj)
