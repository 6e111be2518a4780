"""Upstream table, part 6: consumable capacity (KEP-5075) on shareable devices."""

from __future__ import annotations

from operators.api.resource import ResourceClaim, ResourceSlice

from .builders import (
    CAPACITY0,
    CAPACITY1,
    CLAIM0,
    CLAIM1,
    CLASS_A,
    COUNTER_SET1,
    COUNTER_SET2,
    DEVICE1,
    DEVICE2,
    DEVICE3,
    DRIVER_A,
    FIXED_SHARE_ID,
    FROM_COUNTERS,
    NODE1,
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
    attr_s,
    claim,
    class_with_multi,
    consumes,
    counter_set,
    dev_id,
    device,
    device_class,
    features,
    local_node_selector,
    match_attribute,
    node,
    policy_range,
    policy_values,
    pool,
    prioritized,
    request,
    result,
    slice_,
    slice_one,
    sub_request,
)

N1 = node(NODE1, REGION1)
LOCAL1 = local_node_selector(NODE1)
CC = features(consumable_capacity=True)


def shared(name: str, **capacities: J | int) -> J:
    """A shareable device; ints are plain capacities, dicts are capacities with a policy."""
    plain = {k.replace("_", "-"): v for k, v in capacities.items() if isinstance(v, int)}
    policies = {k.replace("_", "-"): v for k, v in capacities.items() if isinstance(v, dict)}
    return device(name, plain or None, multi=True, capacity_policies=policies or None)


def share(req: str, dev: str, **consumed: int | str) -> J:
    return result(
        req,
        DRIVER_A,
        POOL1,
        dev,
        share=True,
        consumed={k.replace("_", "-"): v for k, v in consumed.items()} or None,
    )


def cases() -> list[Case]:
    multi = [class_with_multi(CLASS_A, DRIVER_A, True)]

    def two_claims(cap: str | None = None) -> list[ResourceClaim]:
        return [
            claim(CLAIM0, request(REQ0, CLASS_A, 1, capacity=cap)),
            claim(CLAIM1, request(REQ0, CLASS_A, 1, capacity=cap)),
        ]

    def one_slice(*devices: J) -> list[ResourceSlice]:
        return [slice_(SLICE1, NODE1, POOL1, DRIVER_A, *devices)]

    return [
        Case(
            "consumable-capacity-disabled-feature",
            features=features(device_binding_conditions=True, resource_claim_device_status=True),
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1, capacity="1"))],
            classes=[device_class(CLASS_A, DRIVER_A)],
            slices=[slice_one(SLICE1, NODE1, POOL1, DRIVER_A)],
            node=N1,
            error="claim claim-0, request req-0: has capacity requests, but the "
            "DRAConsumableCapacity feature is disabled",
        ),
        Case(
            "consumable-capacity-disabled-feature-with-prioritized-list",
            features=features(
                prioritized_list=True,
                device_binding_conditions=True,
                resource_claim_device_status=True,
            ),
            claims=[
                claim(
                    CLAIM0,
                    prioritized(
                        REQ0,
                        sub_request(SUBREQ0, CLASS_A, 1, capacity="1"),
                        sub_request(SUBREQ1, CLASS_A, 1, capacity="1"),
                    ),
                )
            ],
            classes=[device_class(CLASS_A, DRIVER_A)],
            slices=[slice_one(SLICE1, NODE1, POOL1, DRIVER_A)],
            node=N1,
            error="claim claim-0, subrequest subReq-0: has capacity requests, but the "
            "DRAConsumableCapacity feature is disabled",
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-with-missing-capacity-request",
            features=CC,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1, capacity="1"))],
            classes=[device_class(CLASS_A, DRIVER_A)],
            slices=one_slice(shared(DEVICE1, capacity_1=1)),
            node=N1,
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-allocation-mode-all-with-missing-"
            "capacity-request",
            features=CC,
            claims=[claim(CLAIM0, all_request(REQ0, CLASS_A, capacity="1"))],
            classes=multi,
            slices=one_slice(shared(DEVICE1, capacity_1=1)),
            node=N1,
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-without-capacity-without-capacity-"
            "request",
            features=CC,
            claims=two_claims(),
            classes=multi,
            slices=one_slice(shared(DEVICE1)),
            node=N1,
            expect=[
                allocation(LOCAL1, share(REQ0, DEVICE1)),
                allocation(LOCAL1, share(REQ0, DEVICE1)),
            ],
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request",
            features=CC,
            claims=two_claims(),
            classes=multi,
            slices=one_slice(shared(DEVICE1, capacity_0=1), shared(DEVICE2, capacity_0=1)),
            node=N1,
            expect=[
                allocation(LOCAL1, share(REQ0, DEVICE1, capacity_0=1)),
                allocation(LOCAL1, share(REQ0, DEVICE2, capacity_0=1)),
            ],
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-"
            "request-block",
            features=CC,
            claims=two_claims(),
            classes=multi,
            slices=one_slice(shared(DEVICE1, capacity_0=2)),
            node=N1,
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request",
            features=CC,
            claims=two_claims("1"),
            classes=multi,
            slices=one_slice(shared(DEVICE1, capacity_0=2)),
            node=N1,
            expect=[
                allocation(LOCAL1, share(REQ0, DEVICE1, capacity_0=1)),
                allocation(LOCAL1, share(REQ0, DEVICE1, capacity_0=1)),
            ],
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-with-policy-without-capacity-request",
            features=CC,
            claims=two_claims(),
            classes=multi,
            slices=one_slice(shared(DEVICE1, capacity_0=policy_range(4))),
            node=N1,
            expect=[
                allocation(LOCAL1, share(REQ0, DEVICE1, capacity_0=2)),
                allocation(LOCAL1, share(REQ0, DEVICE1, capacity_0=2)),
            ],
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-with-zero-request-policy",
            features=CC,
            claims=two_claims(),
            classes=multi,
            slices=one_slice(shared(DEVICE1, capacity_0=policy_values(1, 0))),
            node=N1,
            expect=[
                allocation(LOCAL1, share(REQ0, DEVICE1, capacity_0=0)),
                allocation(LOCAL1, share(REQ0, DEVICE1, capacity_0=0)),
            ],
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-violates-zero-request-policy",
            features=CC,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1, capacity="1"))],
            classes=multi,
            slices=one_slice(shared(DEVICE1, capacity_0=policy_values(1, 0))),
            node=N1,
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-with-range-policy-with-capacity-request",
            features=CC,
            claims=two_claims("1"),
            classes=multi,
            slices=one_slice(shared(DEVICE1, capacity_0=policy_range(4))),
            node=N1,
            expect=[
                allocation(LOCAL1, share(REQ0, DEVICE1, capacity_0=2)),
                allocation(LOCAL1, share(REQ0, DEVICE1, capacity_0=2)),
            ],
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-with-range-policy-step",
            features=CC,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1, capacity="3"))],
            classes=multi,
            slices=one_slice(shared(DEVICE1, capacity_0=policy_range(4))),
            node=N1,
            expect=[allocation(LOCAL1, share(REQ0, DEVICE1, capacity_0=4))],
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-with-valid-values-policy",
            features=CC,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1, capacity="2"))],
            classes=multi,
            slices=one_slice(shared(DEVICE1, capacity_0=policy_values(4, 1, 2))),
            node=N1,
            expect=[allocation(LOCAL1, share(REQ0, DEVICE1, capacity_0=2))],
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-with-valid-values-policy-round-up",
            features=CC,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1, capacity="2"))],
            classes=multi,
            slices=one_slice(shared(DEVICE1, capacity_0=policy_values(3, 1, 3))),
            node=N1,
            expect=[allocation(LOCAL1, share(REQ0, DEVICE1, capacity_0=3))],
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-with-exceeded-consumable-capacity-"
            "request",
            features=CC,
            claims=[
                claim(CLAIM0, request(REQ0, CLASS_A, 1, capacity="1")),
                claim(CLAIM1, request(REQ0, CLASS_A, 1, capacity="2")),
            ],
            classes=multi,
            slices=one_slice(shared(DEVICE1, capacity_0=policy_range(2))),
            node=N1,
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-with-request-over-max-sharing-policy",
            features=CC,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1, capacity="6"))],
            classes=multi,
            slices=one_slice(shared(DEVICE1, capacity_0=policy_range(10))),
            node=N1,
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-with-allocated-capacity-use-remaining",
            features=CC,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1, capacity="2"))],
            allocated_capacity={dev_id(DRIVER_A, POOL1, DEVICE1): {CAPACITY0: 2}},
            classes=multi,
            slices=one_slice(shared(DEVICE1, capacity_0=policy_range(4))),
            node=N1,
            expect=[allocation(LOCAL1, share(REQ0, DEVICE1, capacity_0=2))],
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-with-allocated-capacity-next-device",
            features=CC,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1, capacity="2"))],
            allocated_capacity={dev_id(DRIVER_A, POOL1, DEVICE1): {CAPACITY0: 2}},
            classes=multi,
            slices=one_slice(
                shared(DEVICE1, capacity_0=policy_range(2)),
                shared(DEVICE2, capacity_0=policy_range(2)),
            ),
            node=N1,
            expect=[allocation(LOCAL1, share(REQ0, DEVICE2, capacity_0=2))],
        ),
        *_all_mode_cases(),
        *_dedicated_cases(),
        *_partitionable_cases(),
    ]


def _all_mode_cases() -> list[Case]:
    """Shareable devices with subrequests, exhausted capacity, backtracking and mode All."""
    multi = [class_with_multi(CLASS_A, DRIVER_A, True)]
    cls_a = [device_class(CLASS_A, DRIVER_A)]
    string = "driver-a/stringAttribute"

    def one_slice(*devices: J) -> list[ResourceSlice]:
        return [slice_(SLICE1, NODE1, POOL1, DRIVER_A, *devices)]

    def all_claim(*requests: J) -> list[ResourceClaim]:
        return [claim(CLAIM0, *requests)]

    return [
        Case(
            "consumable-capacity-with-multi-allocatable-device-backtrack",
            features=CC,
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 1, capacity="2"),
                    request(REQ1, CLASS_A, 1, capacity="2"),
                    constraints=[match_attribute(string)],
                ),
                claim(CLAIM1, request(REQ0, CLASS_A, 1, capacity="2")),
            ],
            classes=cls_a,
            slices=one_slice(
                device(
                    DEVICE2,
                    None,
                    {"stringAttribute": attr_s("stringAttributeValue1")},
                    multi=True,
                    capacity_policies={CAPACITY0: policy_range(2)},
                ),
                device(
                    DEVICE1,
                    None,
                    {"stringAttribute": attr_s("stringAttributeValue2")},
                    multi=True,
                    capacity_policies={CAPACITY0: policy_range(4)},
                ),
            ),
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    share(REQ0, DEVICE1, capacity_0=2),
                    share(REQ1, DEVICE1, capacity_0=2),
                ),
                allocation(LOCAL1, share(REQ0, DEVICE2, capacity_0=2)),
            ],
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-with-subrequest",
            features=features(consumable_capacity=True, prioritized_list=True),
            claims=[
                claim(
                    CLAIM0,
                    prioritized(
                        REQ0,
                        sub_request(SUBREQ0, CLASS_A, 1, capacity="4"),
                        sub_request(SUBREQ1, CLASS_A, 1, capacity="2"),
                        sub_request(SUBREQ1, CLASS_A, 1),
                    ),
                )
            ],
            classes=multi,
            slices=one_slice(shared(DEVICE1, capacity_0=policy_range(2))),
            node=N1,
            expect=[allocation(LOCAL1, share(f"{REQ0}/{SUBREQ1}", DEVICE1, capacity_0=2))],
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-with-no-available-consumable-capacity",
            features=CC,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1, capacity="2"))],
            allocated_capacity={dev_id(DRIVER_A, POOL1, DEVICE1): {CAPACITY0: 2}},
            classes=multi,
            slices=one_slice(shared(DEVICE1, capacity_0=policy_range(2))),
            node=N1,
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-no-"
            "capacity",
            features=CC,
            claims=all_claim(all_request(REQ0, CLASS_A, capacity="2")),
            classes=multi,
            slices=one_slice(shared(DEVICE1, capacity_0=2), shared(DEVICE2)),
            node=N1,
            expect=[allocation(LOCAL1, share(REQ0, DEVICE1, capacity_0=2))],
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-"
            "insufficient-capacity",
            features=CC,
            claims=all_claim(all_request(REQ0, CLASS_A, capacity="2")),
            classes=multi,
            slices=one_slice(shared(DEVICE1, capacity_0=2), shared(DEVICE2, capacity_0=1)),
            node=N1,
            expect=[allocation(LOCAL1, share(REQ0, DEVICE1, capacity_0=2))],
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-"
            "sufficient",
            features=CC,
            claims=all_claim(
                request(REQ0, CLASS_A, 1, capacity="1"), all_request(REQ1, CLASS_A, capacity="1")
            ),
            classes=cls_a,
            slices=one_slice(shared(DEVICE1, capacity_0=2), shared(DEVICE2, capacity_0=1)),
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    share(REQ0, DEVICE1, capacity_0=1),
                    share(REQ1, DEVICE1, capacity_0=1),
                    share(REQ1, DEVICE2, capacity_0=1),
                )
            ],
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-sufficient",
            features=CC,
            allocated_capacity={dev_id(DRIVER_A, POOL1, DEVICE1): {CAPACITY0: 1}},
            claims=all_claim(all_request(REQ0, CLASS_A, capacity="1")),
            classes=cls_a,
            slices=one_slice(shared(DEVICE1, capacity_0=2), shared(DEVICE2, capacity_0=1)),
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    share(REQ0, DEVICE1, capacity_0=1),
                    share(REQ0, DEVICE2, capacity_0=1),
                )
            ],
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-"
            "insufficient",
            features=CC,
            claims=all_claim(
                request(REQ0, CLASS_A, 1, capacity="1"), all_request(REQ1, CLASS_A, capacity="1")
            ),
            classes=cls_a,
            slices=one_slice(shared(DEVICE1, capacity_0=1), shared(DEVICE2, capacity_0=1)),
            node=N1,
        ),
        Case(
            "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-insufficient",
            features=CC,
            allocated_capacity={dev_id(DRIVER_A, POOL1, DEVICE1): {CAPACITY0: 1}},
            claims=all_claim(all_request(REQ0, CLASS_A, capacity="1")),
            classes=cls_a,
            slices=one_slice(shared(DEVICE1, capacity_0=1), shared(DEVICE2, capacity_0=1)),
            node=N1,
            expect=[allocation(LOCAL1, share(REQ0, DEVICE2, capacity_0=1))],
        ),
    ]


def _dedicated_cases() -> list[Case]:
    """Devices without allowMultipleAllocations, and devices whose sharing mode changed."""
    dedicated_class = [class_with_multi(CLASS_A, DRIVER_A, False)]
    multi = [class_with_multi(CLASS_A, DRIVER_A, True)]
    ranged = {CAPACITY0: policy_range(2)}
    claim_one = [claim(CLAIM0, request(REQ0, CLASS_A, 1, capacity="1"))]
    return [
        Case(
            "consumable-capacity-dedicated-device-with-consumable-capacity-request",
            features=CC,
            claims=claim_one,
            classes=dedicated_class,
            slices=[slice_(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1, {CAPACITY0: 1}))],
            node=N1,
            expect=[allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1))],
        ),
        Case(
            "consumable-capacity-dedicated-device-with-multiple-consumable-capacity-request",
            features=CC,
            claims=[
                *claim_one,
                claim(CLAIM1, request(REQ0, CLASS_A, 1, capacity="1")),
            ],
            classes=dedicated_class,
            slices=[
                slice_(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1, capacity_policies=ranged))
            ],
            node=N1,
        ),
        Case(
            "allow-multiple-allocations-exclude-multi-allocatable-device-by-class-selector",
            features=CC,
            claims=claim_one,
            classes=dedicated_class,
            slices=[slice_(SLICE1, NODE1, POOL1, DRIVER_A, shared(DEVICE1, capacity_0=1))],
            node=N1,
        ),
        Case(
            "allow-multiple-allocations-not-allocate-multi-allocatable-device-which-already-"
            "dedicated",
            features=CC,
            allocated=[dev_id(DRIVER_A, POOL1, DEVICE1)],
            claims=claim_one,
            classes=multi,
            slices=[
                slice_(
                    SLICE1, NODE1, POOL1, DRIVER_A, shared(DEVICE1, capacity_0=ranged[CAPACITY0])
                )
            ],
            node=N1,
        ),
        Case(
            "allow-multiple-allocations-not-allocate-dedicated-device-which-change-from-multi-"
            "allocatable",
            features=CC,
            claims=claim_one,
            allocated_capacity={dev_id(DRIVER_A, POOL1, DEVICE1): {CAPACITY0: 1}},
            classes=multi,
            slices=[
                slice_(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1, capacity_policies=ranged))
            ],
            node=N1,
        ),
    ]


def _partitionable_cases() -> list[Case]:
    """Shareable devices that also consume shared counters (KEP-4815 with KEP-5075)."""
    multi = [class_with_multi(CLASS_A, DRIVER_A, True)]
    p2 = pool(POOL1, 2)
    mem = 'device.capacity["driver-a"].memory.compareTo(quantity("{}")) >= 0'
    cap0 = 'device.capacity["driver-a"]["capacity-0"].compareTo(quantity("{}")) >= 0'

    def part(name: str, *uses: J) -> J:
        return device(name, FROM_COUNTERS, consumes=list(uses), multi=True)

    def counters(*sets: J) -> ResourceSlice:
        return slice_(SLICE2, NODE1, p2, DRIVER_A, counter_sets=list(sets))

    return [
        Case(
            "allow-multiple-allocations-with-partitionable-device",
            features=features(
                prioritized_list=True, partitionable_devices=True, consumable_capacity=True
            ),
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 1),
                    prioritized(
                        REQ1,
                        sub_request(SUBREQ0, CLASS_A, 1, mem.format("6Gi")),
                        sub_request(SUBREQ1, CLASS_A, 1, mem.format("4Gi")),
                    ),
                )
            ],
            classes=multi,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    p2,
                    DRIVER_A,
                    part(DEVICE1, consumes(COUNTER_SET1, {"memory": "4Gi"})),
                    part(DEVICE2, consumes(COUNTER_SET1, {"memory": "6Gi"})),
                    part(DEVICE3, consumes(COUNTER_SET1, {"memory": "4Gi"})),
                ),
                counters(counter_set(COUNTER_SET1, {"memory": "8Gi"})),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    share(REQ0, DEVICE1, memory="4Gi"),
                    share(f"{REQ1}/{SUBREQ1}", DEVICE3, memory="4Gi"),
                )
            ],
        ),
        Case(
            "allow-multiple-allocations-with-shared-device-counter-cross-cycle",
            features=features(partitionable_devices=True, consumable_capacity=True),
            claims=[
                claim(
                    CLAIM0,
                    request(
                        REQ0, CLASS_A, 1, 'device.attributes["driver-a"].mode == "b"', capacity="1"
                    ),
                )
            ],
            allocated_shared=[(dev_id(DRIVER_A, POOL1, DEVICE1), FIXED_SHARE_ID)],
            allocated_capacity={dev_id(DRIVER_A, POOL1, DEVICE1): {CAPACITY0: 1}},
            classes=multi,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    p2,
                    DRIVER_A,
                    *(
                        device(
                            name,
                            FROM_COUNTERS,
                            {"mode": attr_s(mode)},
                            consumes=[consumes(COUNTER_SET1, {CAPACITY0: 1})],
                            multi=True,
                        )
                        for name, mode in ((DEVICE1, "a"), (DEVICE2, "b"))
                    ),
                ),
                counters(counter_set(COUNTER_SET1, {CAPACITY0: 1})),
            ],
            node=N1,
        ),
        Case(
            "consumable-capacity-with-partitionable-device-multiple-capacity-pools",
            features=features(
                prioritized_list=True, partitionable_devices=True, consumable_capacity=True
            ),
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 1, capacity="1"),
                    request(REQ2, CLASS_A, 1, capacity="2"),
                    prioritized(
                        REQ1,
                        sub_request(SUBREQ0, CLASS_A, 1, cap0.format("4"), capacity="1"),
                        sub_request(SUBREQ1, CLASS_A, 1, cap0.format("2"), capacity="1"),
                    ),
                )
            ],
            classes=[device_class(CLASS_A, DRIVER_A)],
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    p2,
                    DRIVER_A,
                    *(
                        device(
                            name,
                            FROM_COUNTERS,
                            consumes=[
                                consumes(COUNTER_SET1, {CAPACITY0: c0}),
                                consumes(COUNTER_SET2, {CAPACITY1: 4}),
                            ],
                            multi=True,
                            capacity_policies={CAPACITY1: policy_range(4)},
                        )
                        for name, c0 in ((DEVICE1, 2), (DEVICE2, 4), (DEVICE3, 2))
                    ),
                ),
                counters(
                    counter_set(COUNTER_SET1, {CAPACITY0: 4}),
                    counter_set(COUNTER_SET2, {CAPACITY1: 8}),
                ),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    share(REQ0, DEVICE1, capacity_0=1, capacity_1=2),
                    share(REQ2, DEVICE3, capacity_0=2, capacity_1=2),
                    share(f"{REQ1}/{SUBREQ1}", DEVICE1, capacity_0=1, capacity_1=2),
                )
            ],
        ),
    ]
