"""Upstream table, part 3: partitionable devices (shared counters), with taints and capacity."""

from __future__ import annotations

from typing import Any

from operators.api.resource import ResourceSlice

from .builders import (
    CLAIM0,
    CLAIM1,
    CLASS_A,
    DEVICE1,
    DEVICE2,
    DEVICE3,
    DRIVER_A,
    FROM_COUNTERS,
    NODE1,
    POOL1,
    POOL2,
    REGION1,
    REQ0,
    REQ1,
    REQ2,
    REQ3,
    SLICE1,
    SLICE2,
    SLICE3,
    SLICE4,
    SUBREQ0,
    SUBREQ1,
    Case,
    J,
    allocation,
    attr_b,
    attr_s,
    claim,
    consumes,
    counter_set,
    dev_id,
    device,
    device_class,
    features,
    local_node_selector,
    match_attribute,
    node,
    pool,
    prioritized,
    request,
    result,
    slice_,
    sub_request,
)

MEM = 'device.capacity["driver-a"].memory.compareTo(quantity("{}")) >= 0'
KIND = 'device.attributes["driver-a"].kind == "{}"'
N1 = node(NODE1, REGION1)
LOCAL1 = local_node_selector(NODE1)
PD = features(partitionable_devices=True)
CS1, CS2 = "counter-set-1", "counter-set-2"
TAINT_NO_SCHEDULE = {"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}


def counters_slice(name: str, pool_: str | J, *sets: J) -> ResourceSlice:
    return slice_(name, NODE1, pool_, DRIVER_A, counter_sets=list(sets))


def part(name: str, *uses: J, **kw: Any) -> J:
    return device(name, FROM_COUNTERS, consumes=list(uses), **kw)


def cases() -> list[Case]:
    cls_a = [device_class(CLASS_A, DRIVER_A)]
    p2 = pool(POOL1, 2)
    three_parts = [
        part(DEVICE1, consumes(CS1, {"memory": "4Gi"})),
        part(DEVICE2, consumes(CS1, {"memory": "6Gi"})),
        part(DEVICE3, consumes(CS1, {"memory": "4Gi"})),
    ]
    return [
        Case(
            "partitionable-devices-single-device",
            features=PD,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    p2,
                    DRIVER_A,
                    device(DEVICE1, consumes=[consumes(CS1, {"memory": "4Gi"})]),
                ),
                counters_slice(SLICE2, p2, counter_set(CS1, {"memory": "8Gi"})),
            ],
            node=N1,
            expect=[allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1))],
        ),
        Case(
            "partitionable-devices-taint-releases-counter",
            features=features(partitionable_devices=True, device_taints=True),
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    p2,
                    DRIVER_A,
                    device(
                        DEVICE1, taints=[TAINT_NO_SCHEDULE], consumes=[consumes(CS1, {"c": "1"})]
                    ),
                    device(DEVICE2, consumes=[consumes(CS1, {"c": "1"})]),
                ),
                counters_slice(SLICE2, p2, counter_set(CS1, {"c": "1"})),
            ],
            node=N1,
            expect=[allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE2))],
        ),
        Case(
            "partitionable-devices-constraint-releases-counter",
            features=PD,
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 2),
                    constraints=[match_attribute("driver-a/stringAttribute")],
                )
            ],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    p2,
                    DRIVER_A,
                    *(
                        device(
                            d,
                            None,
                            {"stringAttribute": attr_s(color)},
                            consumes=[consumes(CS1, {"c": "1"})],
                        )
                        for d, color in ((DEVICE1, "red"), (DEVICE2, "blue"), (DEVICE3, "blue"))
                    ),
                ),
                counters_slice(SLICE2, p2, counter_set(CS1, {"c": "2"})),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE2),
                    result(REQ0, DRIVER_A, POOL1, DEVICE3),
                )
            ],
        ),
        Case(
            "partitionable-consumable-capacity-backtrack-releases-counter",
            features=features(partitionable_devices=True, consumable_capacity=True),
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 1, KIND.format("shared")),
                    request(REQ1, CLASS_A, 1, KIND.format("counteronly")),
                )
            ],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    p2,
                    DRIVER_A,
                    device(
                        DEVICE1,
                        None,
                        {"kind": attr_s("shared")},
                        multi=True,
                        consumes=[consumes(CS1, {"c": "1"})],
                    ),
                    device(DEVICE2, None, {"kind": attr_s("shared")}),
                    device(
                        DEVICE3,
                        None,
                        {"kind": attr_s("counteronly")},
                        consumes=[consumes(CS1, {"c": "1"})],
                    ),
                ),
                counters_slice(SLICE2, p2, counter_set(CS1, {"c": "1"})),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE2),
                    result(REQ1, DRIVER_A, POOL1, DEVICE3),
                )
            ],
        ),
        Case(
            "consumable-capacity-rejection-rolls-back-constraints",
            features=features(consumable_capacity=True, prioritized_list=True),
            claims=[
                claim(
                    CLAIM0,
                    request(
                        REQ0,
                        CLASS_A,
                        1,
                        'device.attributes["driver-a"].stringAttribute == "cap"',
                        capacity="2",
                    ),
                ),
                claim(
                    CLAIM1,
                    prioritized(
                        REQ0,
                        sub_request(
                            SUBREQ0,
                            CLASS_A,
                            1,
                            'device.attributes["driver-a"].stringAttribute == "cap"',
                            mode="All",
                            capacity="2",
                        ),
                        sub_request(
                            SUBREQ1,
                            CLASS_A,
                            1,
                            'device.attributes["driver-a"].stringAttribute == "fb"',
                        ),
                    ),
                    constraints=[match_attribute("driver-a/stringAttribute")],
                ),
            ],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(
                        DEVICE1, {"capacity-0": "2"}, {"stringAttribute": attr_s("cap")}, multi=True
                    ),
                    device(DEVICE2, None, {"stringAttribute": attr_s("fb")}),
                )
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(
                        REQ0, DRIVER_A, POOL1, DEVICE1, share=True, consumed={"capacity-0": "2"}
                    ),
                ),
                allocation(LOCAL1, result("req-0/subReq-1", DRIVER_A, POOL1, DEVICE2)),
            ],
        ),
        Case(
            "partitionable-empty-capacity-multiple-share-backtrack-keeps-counter-ownership",
            features=features(partitionable_devices=True, consumable_capacity=True),
            claims=[
                claim(CLAIM0, request(REQ0, CLASS_A, 1, KIND.format("shared"))),
                claim(
                    CLAIM1,
                    request(
                        REQ1,
                        CLASS_A,
                        1,
                        'device.attributes["driver-a"].kind == "shared" || '
                        'device.attributes["driver-a"].kind == "fallback"',
                    ),
                    request(REQ2, CLASS_A, 1, KIND.format("gate")),
                    request(REQ3, CLASS_A, 1, KIND.format("shared")),
                    constraints=[match_attribute("driver-a/stringAttribute", REQ1, REQ2)],
                ),
            ],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    p2,
                    DRIVER_A,
                    device(
                        DEVICE1,
                        None,
                        {"kind": attr_s("shared"), "stringAttribute": attr_s("red")},
                        multi=True,
                        consumes=[consumes(CS1, {"c": "1"})],
                    ),
                    device(
                        DEVICE2,
                        None,
                        {"kind": attr_s("fallback"), "stringAttribute": attr_s("blue")},
                    ),
                    device(
                        DEVICE3, None, {"kind": attr_s("gate"), "stringAttribute": attr_s("blue")}
                    ),
                ),
                counters_slice(SLICE2, p2, counter_set(CS1, {"c": "1"})),
            ],
            node=N1,
            expect=[
                allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1, share=True)),
                allocation(
                    LOCAL1,
                    result(REQ1, DRIVER_A, POOL1, DEVICE2),
                    result(REQ2, DRIVER_A, POOL1, DEVICE3),
                    result(REQ3, DRIVER_A, POOL1, DEVICE1, share=True),
                ),
            ],
        ),
        Case(
            "partitionable-devices-prioritized-list",
            features=features(prioritized_list=True, partitionable_devices=True),
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 1),
                    prioritized(
                        REQ1,
                        sub_request(SUBREQ0, CLASS_A, 1, MEM.format("6Gi")),
                        sub_request(SUBREQ1, CLASS_A, 1, MEM.format("4Gi")),
                    ),
                )
            ],
            classes=cls_a,
            slices=[
                slice_(SLICE1, NODE1, p2, DRIVER_A, *three_parts),
                counters_slice(SLICE2, p2, counter_set(CS1, {"memory": "8Gi"})),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    result("req-1/subReq-1", DRIVER_A, POOL1, DEVICE3),
                )
            ],
        ),
        Case(
            "partitionable-devices-multiple-devices",
            features=PD,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1))],
            classes=cls_a,
            slices=[
                slice_(SLICE1, NODE1, p2, DRIVER_A, *three_parts),
                counters_slice(SLICE2, p2, counter_set(CS1, {"memory": "8Gi"})),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    result(REQ1, DRIVER_A, POOL1, DEVICE3),
                )
            ],
        ),
        Case(
            "partitionable-devices-multiple-capacity-pools",
            features=features(prioritized_list=True, partitionable_devices=True),
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 1),
                    prioritized(
                        REQ1,
                        sub_request(SUBREQ0, CLASS_A, 1, MEM.format("6Gi")),
                        sub_request(SUBREQ1, CLASS_A, 1, MEM.format("4Gi")),
                    ),
                )
            ],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    p2,
                    DRIVER_A,
                    part(DEVICE1, consumes(CS1, {"memory": "4Gi"}), consumes(CS2, {"cpus": "4"})),
                    part(DEVICE2, consumes(CS1, {"memory": "6Gi"}), consumes(CS2, {"cpus": "6"})),
                    part(DEVICE3, consumes(CS1, {"memory": "4Gi"}), consumes(CS2, {"cpus": "4"})),
                ),
                counters_slice(
                    SLICE2,
                    p2,
                    counter_set(CS1, {"memory": "18Gi"}),
                    counter_set(CS2, {"cpus": "8"}),
                ),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    result("req-1/subReq-1", DRIVER_A, POOL1, DEVICE3),
                )
            ],
        ),
        Case(
            "partitionable-devices-multiple-counters",
            features=PD,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1))],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    p2,
                    DRIVER_A,
                    part(
                        DEVICE1,
                        consumes(CS1, {"memory": "4Gi", "cpus": "6"}),
                        consumes(CS2, {"cpus": "4", "memory": "2Gi"}),
                    ),
                    part(
                        DEVICE2,
                        consumes(CS1, {"memory": "6Gi", "cpus": "4"}),
                        consumes(CS2, {"cpus": "6", "memory": "6Gi"}),
                    ),
                    part(
                        DEVICE3,
                        consumes(CS1, {"memory": "4Gi", "cpus": "4"}),
                        consumes(CS2, {"cpus": "4", "memory": "4Gi"}),
                    ),
                ),
                counters_slice(
                    SLICE2,
                    p2,
                    counter_set(CS1, {"cpus": "8", "memory": "18Gi"}),
                    counter_set(CS2, {"cpus": "12", "memory": "18Gi"}),
                ),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE2),
                    result(REQ1, DRIVER_A, POOL1, DEVICE3),
                )
            ],
        ),
        Case(
            "partitionable-devices-multiple-pools",
            features=PD,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1))],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    p2,
                    DRIVER_A,
                    part(DEVICE1, consumes(CS1, {"cpus": "6", "memory": "4Gi"})),
                    part(DEVICE2, consumes(CS1, {"cpus": "4", "memory": "6Gi"})),
                    part(DEVICE3, consumes(CS1, {"cpus": "4", "memory": "4Gi"})),
                ),
                counters_slice(SLICE2, p2, counter_set(CS1, {"cpus": "8", "memory": "18Gi"})),
                slice_(
                    SLICE3,
                    NODE1,
                    pool(POOL2, 2),
                    DRIVER_A,
                    part(DEVICE1, consumes(CS1, {"cpus": "6", "memory": "4Gi"})),
                    part(DEVICE2, consumes(CS1, {"cpus": "1", "memory": "7Gi"})),
                    part(DEVICE3, consumes(CS1, {"cpus": "1", "memory": "7Gi"})),
                ),
                counters_slice(
                    SLICE4, pool(POOL2, 2), counter_set(CS1, {"cpus": "8", "memory": "18Gi"})
                ),
            ],
            allocated=[
                dev_id(DRIVER_A, POOL1, DEVICE2),
                dev_id(DRIVER_A, POOL1, DEVICE3),
                dev_id(DRIVER_A, POOL2, DEVICE1),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL2, DEVICE2),
                    result(REQ1, DRIVER_A, POOL2, DEVICE3),
                )
            ],
        ),
        Case(
            "partitionable-devices-unused-counters-in-counter-set",
            features=PD,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 2))],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    p2,
                    DRIVER_A,
                    device(DEVICE1, consumes=[consumes(CS1, {"memory": "5Gi"})]),
                    device(DEVICE2, consumes=[consumes(CS1, {"memory": "4Gi"})]),
                    device(DEVICE3, consumes=[consumes(CS1, {"memory": "4Gi"})]),
                ),
                counters_slice(SLICE2, p2, counter_set(CS1, {"memory": "8Gi", "unused": "1Gi"})),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE2),
                    result(REQ0, DRIVER_A, POOL1, DEVICE3),
                )
            ],
        ),
        Case(
            "partitionable-devices-no-capacity-available",
            features=PD,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    part(DEVICE1, consumes(CS1, {"memory": "4Gi"})),
                    part(DEVICE2, consumes(CS1, {"memory": "16Gi"})),
                ),
                counters_slice(SLICE2, POOL1, counter_set(CS1, {"memory": "18Gi"})),
            ],
            allocated=[dev_id(DRIVER_A, POOL1, DEVICE2)],
            node=N1,
        ),
        Case(
            "partitionable-devices-overallocated-capacity-pool",
            features=PD,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    part(DEVICE1, consumes(CS1, {"memory": "4Gi"})),
                    part(DEVICE2, consumes(CS1, {"memory": "20Gi"})),
                ),
                counters_slice(SLICE2, POOL1, counter_set(CS1, {"memory": "18Gi"})),
            ],
            allocated=[dev_id(DRIVER_A, POOL1, DEVICE2)],
            node=N1,
        ),
        Case(
            "partitionable-devices-disabled-device-consumes-counters",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, consumes=[consumes(CS1, {"memory": "4Gi"})]),
                ),
                counters_slice(SLICE2, POOL1, counter_set(CS1, {"memory": "18Gi"})),
            ],
            node=N1,
        ),
        Case(
            "partitionable-devices-with-attribute-selector",
            features=PD,
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 2),
                    request(REQ1, CLASS_A, 1, 'device.attributes["driver-a"].special'),
                )
            ],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    p2,
                    DRIVER_A,
                    *(
                        device(
                            name,
                            None,
                            {"special": attr_b(special)},
                            consumes=[
                                consumes(CS1, {cpu: "1"}),
                                consumes(CS2, {"mem": "10Gi"}),
                            ],
                        )
                        for name, special, cpu in (
                            (DEVICE1, True, "cpu1"),
                            (DEVICE2, False, "cpu2"),
                            (DEVICE3, False, "cpu3"),
                        )
                    ),
                ),
                counters_slice(
                    SLICE2,
                    p2,
                    counter_set(CS1, {"cpu1": "1", "cpu2": "1", "cpu3": "1"}),
                    counter_set(CS2, {"mem": "30Gi"}),
                ),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE2),
                    result(REQ0, DRIVER_A, POOL1, DEVICE3),
                    result(REQ1, DRIVER_A, POOL1, DEVICE1),
                )
            ],
        ),
    ]
