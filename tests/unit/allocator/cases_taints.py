"""Upstream table, part 4: per-device node selection, device taints, All-mode alternatives."""

from __future__ import annotations

from operators.api.resource import ResourceSlice

from .builders import (
    ALL_NODES,
    CLAIM0,
    CLASS_A,
    CLASS_B,
    DEVICE1,
    DEVICE2,
    DEVICE3,
    DRIVER_A,
    DRIVER_B,
    FROM_COUNTERS,
    NODE1,
    NODE2,
    PER_DEVICE,
    POOL1,
    POOL2,
    REGION1,
    REQ0,
    REQ1,
    SLICE1,
    SLICE2,
    SLICE3,
    SLICE4,
    SUBREQ0,
    SUBREQ1,
    Case,
    J,
    all_request,
    allocation,
    attr_b,
    attr_s,
    claim,
    claim_with_request,
    class_with_selectors,
    consumes,
    counter_set,
    dev_id,
    device,
    device_class,
    features,
    local_node_selector,
    node,
    node_label_selector,
    pool,
    prioritized,
    request,
    result,
    slice_,
    sub_request,
    with_tolerations,
)

MEM = 'device.capacity["driver-a"].memory.compareTo(quantity("{}")) >= 0'
GEN = 'device.attributes["driver-a"].generation == "{}"'
N1 = node(NODE1, REGION1)
LOCAL1 = local_node_selector(NODE1)
CS1, CS2 = "counter-set-1", "counter-set-2"
TAINT_NONE: J = {"key": "taint-key", "value": "taint-value", "effect": "None"}
TAINT_NO_SCHEDULE: J = {"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}
TAINT_NO_EXECUTE: J = {"key": "taint-key", "value": "taint-value-2", "effect": "NoExecute"}
TOL_NO_SCHEDULE: J = {"operator": "Exists", "key": "taint-key", "effect": "NoSchedule"}
TOL_NO_EXECUTE: J = {
    "operator": "Equal",
    "key": "taint-key",
    "value": "taint-value-2",
    "effect": "NoExecute",
}
TAINTS = features(device_taints=True)


def part(name: str, cs: str, mem: str, where: object = None) -> J:
    return device(
        name, FROM_COUNTERS, consumes=[consumes(cs, {"memory": mem})], node_selection=where
    )


def tainted(*taints_per_device: list[J]) -> list[ResourceSlice]:
    return [
        slice_(
            SLICE1,
            NODE1,
            POOL1,
            DRIVER_A,
            *(device(f"device-{i + 1}", taints=t) for i, t in enumerate(taints_per_device)),
        )
    ]


def cases() -> list[Case]:
    cls_a = [device_class(CLASS_A, DRIVER_A)]
    cls_ab = [device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)]
    p2 = pool(POOL1, 2)
    gen_all = prioritized(
        REQ0,
        sub_request(SUBREQ0, CLASS_A, 0, GEN.format("v6"), mode="All"),
        sub_request(SUBREQ1, CLASS_A, 0, GEN.format("v5"), mode="All"),
    )
    return [
        Case(
            "partitionable-devices-disabled-other-device-do-not-consume-counters",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    p2,
                    DRIVER_A,
                    device(DEVICE1, consumes=[consumes(CS1, {"memory": "4Gi"})]),
                    device(DEVICE2),
                ),
                slice_(
                    SLICE2, NODE1, p2, DRIVER_A, counter_sets=[counter_set(CS1, {"memory": "18Gi"})]
                ),
            ],
            node=N1,
            expect=[allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE2))],
        ),
        Case(
            "partitionable-devices-disabled-per-device-node-selection",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=cls_a,
            slices=[
                slice_(SLICE1, PER_DEVICE, POOL1, DRIVER_A, device(DEVICE2, node_selection=NODE1))
            ],
            node=N1,
        ),
        Case(
            "partitionable-devices-per-device-node-selection-nodename",
            features=features(partitionable_devices=True, prioritized_list=True),
            claims=[
                claim(
                    CLAIM0,
                    prioritized(
                        REQ0,
                        sub_request(SUBREQ0, CLASS_A, 1, MEM.format("6Gi")),
                        sub_request(SUBREQ1, CLASS_A, 1, MEM.format("4Gi")),
                    ),
                )
            ],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    PER_DEVICE,
                    p2,
                    DRIVER_A,
                    part(DEVICE1, CS1, "4Gi", NODE1),
                    part(DEVICE2, CS1, "6Gi", NODE2),
                ),
                slice_(
                    SLICE2,
                    PER_DEVICE,
                    p2,
                    DRIVER_A,
                    counter_sets=[counter_set(CS1, {"memory": "18Gi"})],
                ),
            ],
            node=N1,
            expect=[allocation(LOCAL1, result("req-0/subReq-1", DRIVER_A, POOL1, DEVICE1))],
        ),
        Case(
            "partitionable-devices-per-device-node-selection-node-selector",
            features=features(partitionable_devices=True, prioritized_list=True),
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    PER_DEVICE,
                    p2,
                    DRIVER_A,
                    part(DEVICE1, CS1, "4Gi", node_label_selector("region", REGION1)),
                ),
                slice_(
                    SLICE2,
                    PER_DEVICE,
                    p2,
                    DRIVER_A,
                    counter_sets=[counter_set(CS1, {"memory": "18Gi"})],
                ),
            ],
            node=N1,
            expect=[
                allocation(
                    node_label_selector("region", REGION1), result(REQ0, DRIVER_A, POOL1, DEVICE1)
                )
            ],
        ),
        Case(
            "partitionable-devices-per-device-node-selection-node-selector-multiple-devices",
            features=features(partitionable_devices=True, prioritized_list=True),
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 3), request(REQ1, CLASS_B, 3))],
            classes=cls_ab,
            slices=[
                slice_(
                    SLICE1,
                    PER_DEVICE,
                    p2,
                    DRIVER_A,
                    part(DEVICE1, CS1, "4Gi", node_label_selector("region", REGION1)),
                    part(DEVICE2, CS1, "4Gi", NODE1),
                    part(DEVICE3, CS1, "4Gi", ALL_NODES),
                ),
                slice_(
                    SLICE2,
                    PER_DEVICE,
                    p2,
                    DRIVER_A,
                    counter_sets=[counter_set(CS1, {"memory": "18Gi"})],
                ),
                slice_(
                    SLICE3,
                    NODE1,
                    pool(POOL2, 2),
                    DRIVER_B,
                    part(DEVICE1, CS2, "4Gi"),
                    part(DEVICE2, CS2, "4Gi"),
                    part(DEVICE3, CS2, "4Gi"),
                ),
                slice_(
                    SLICE4,
                    NODE1,
                    pool(POOL2, 2),
                    DRIVER_B,
                    counter_sets=[counter_set(CS2, {"memory": "12Gi"})],
                ),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    result(REQ0, DRIVER_A, POOL1, DEVICE2),
                    result(REQ0, DRIVER_A, POOL1, DEVICE3),
                    result(REQ1, DRIVER_B, POOL2, DEVICE1),
                    result(REQ1, DRIVER_B, POOL2, DEVICE2),
                    result(REQ1, DRIVER_B, POOL2, DEVICE3),
                )
            ],
        ),
        Case(
            "tainted-two-devices",
            features=TAINTS,
            claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes=cls_a,
            slices=tainted([TAINT_NO_SCHEDULE], [TAINT_NO_EXECUTE]),
            node=N1,
        ),
        Case(
            "tainted-one-device-two-taints",
            features=TAINTS,
            claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes=cls_a,
            slices=tainted([TAINT_NO_SCHEDULE, TAINT_NO_EXECUTE]),
            node=N1,
        ),
        Case(
            "tainted-two-devices-tolerated",
            features=TAINTS,
            claims=[with_tolerations(claim_with_request(CLAIM0, REQ0, CLASS_A), TOL_NO_EXECUTE)],
            classes=cls_a,
            slices=tainted([TAINT_NO_SCHEDULE], [TAINT_NO_EXECUTE]),
            node=N1,
            expect=[
                allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE2, False, TOL_NO_EXECUTE))
            ],
        ),
        Case(
            "tainted-two-devices-prioritized-list-tolerated",
            features=features(device_taints=True, prioritized_list=True),
            claims=[
                claim(
                    CLAIM0,
                    prioritized(
                        REQ0,
                        sub_request(SUBREQ0, CLASS_A, 1),
                        sub_request(SUBREQ1, CLASS_A, 1, tolerations=[TOL_NO_EXECUTE]),
                    ),
                )
            ],
            classes=cls_a,
            slices=tainted([TAINT_NO_SCHEDULE], [TAINT_NO_EXECUTE]),
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result("req-0/subReq-1", DRIVER_A, POOL1, DEVICE2, False, TOL_NO_EXECUTE),
                )
            ],
        ),
        Case(
            "tainted-no-effect",
            features=TAINTS,
            claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes=cls_a,
            slices=tainted([TAINT_NONE]),
            node=N1,
            expect=[allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1))],
        ),
        Case(
            "tainted-one-device-two-taints-both-tolerated",
            features=TAINTS,
            claims=[
                with_tolerations(
                    claim_with_request(CLAIM0, REQ0, CLASS_A), TOL_NO_SCHEDULE, TOL_NO_EXECUTE
                )
            ],
            classes=cls_a,
            slices=tainted([TAINT_NO_SCHEDULE, TAINT_NO_EXECUTE]),
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1, False, TOL_NO_SCHEDULE, TOL_NO_EXECUTE),
                )
            ],
        ),
        Case(
            "tainted-disabled",
            claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes=cls_a,
            slices=tainted([TAINT_NO_SCHEDULE, TAINT_NO_EXECUTE]),
            node=N1,
            expect=[allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1))],
        ),
        Case(
            "tainted-prioritized-list",
            features=features(device_taints=True, prioritized_list=True),
            claims=[
                claim(
                    CLAIM0,
                    prioritized(
                        REQ0, sub_request(SUBREQ0, CLASS_B, 1), sub_request(SUBREQ1, CLASS_A, 1)
                    ),
                )
            ],
            classes=cls_ab,
            slices=tainted([TAINT_NO_SCHEDULE]),
            node=N1,
        ),
        Case(
            "tainted-prioritized-list-disabled",
            features=features(prioritized_list=True),
            claims=[
                claim(
                    CLAIM0,
                    prioritized(
                        REQ0, sub_request(SUBREQ0, CLASS_B, 1), sub_request(SUBREQ1, CLASS_A, 1)
                    ),
                )
            ],
            classes=cls_ab,
            slices=tainted([TAINT_NO_SCHEDULE]),
            node=N1,
            expect=[allocation(LOCAL1, result("req-0/subReq-1", DRIVER_A, POOL1, DEVICE1))],
        ),
        Case(
            "tainted-admin-access",
            features=features(device_taints=True, admin_access=True),
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1, admin=True))],
            allocated=[dev_id(DRIVER_A, POOL1, DEVICE1), dev_id(DRIVER_A, POOL1, DEVICE2)],
            classes=cls_a,
            slices=tainted([TAINT_NO_SCHEDULE]),
            node=N1,
        ),
        Case(
            "tainted-admin-access-disabled",
            features=features(admin_access=True),
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1, admin=True))],
            allocated=[dev_id(DRIVER_A, POOL1, DEVICE1), dev_id(DRIVER_A, POOL1, DEVICE2)],
            classes=cls_a,
            slices=tainted([TAINT_NO_SCHEDULE]),
            node=N1,
            expect=[allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1, True))],
        ),
        Case(
            "tainted-all-devices-single",
            features=TAINTS,
            claims=[claim(CLAIM0, all_request(REQ0, CLASS_A))],
            classes=cls_a,
            slices=tainted([TAINT_NO_SCHEDULE]),
            node=N1,
        ),
        Case(
            "tainted-all-devices-single-disabled",
            claims=[claim(CLAIM0, all_request(REQ0, CLASS_A))],
            classes=cls_a,
            slices=tainted([TAINT_NO_SCHEDULE]),
            node=N1,
            expect=[allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1))],
        ),
        Case(
            "prioritized-list-allocation-mode-all",
            features=features(prioritized_list=True),
            claims=[
                claim(
                    CLAIM0,
                    prioritized(
                        REQ0,
                        sub_request(SUBREQ0, CLASS_A, mode="All"),
                        sub_request(SUBREQ1, CLASS_A, 1),
                    ),
                )
            ],
            classes=cls_a,
            slices=[slice_(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2))],
            allocated=[dev_id(DRIVER_A, POOL1, DEVICE2)],
            node=N1,
            expect=[allocation(LOCAL1, result("req-0/subReq-1", DRIVER_A, POOL1, DEVICE1))],
        ),
        Case(
            "prioritized-list-allocation-mode-all-with-selectors",
            features=features(prioritized_list=True),
            claims=[claim(CLAIM0, gen_all)],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, None, {"generation": attr_s("v5")}),
                )
            ],
            node=N1,
            expect=[allocation(LOCAL1, result("req-0/subReq-1", DRIVER_A, POOL1, DEVICE1))],
        ),
        Case(
            "prioritized-list-allocation-mode-all-with-selectors-multiple-pools",
            features=features(prioritized_list=True),
            claims=[claim(CLAIM0, gen_all)],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, None, {"generation": attr_s("v5")}),
                ),
                slice_(
                    SLICE2,
                    NODE1,
                    POOL2,
                    DRIVER_A,
                    device(DEVICE1, None, {"generation": attr_s("v5")}),
                ),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result("req-0/subReq-1", DRIVER_A, POOL1, DEVICE1),
                    result("req-0/subReq-1", DRIVER_A, POOL2, DEVICE1),
                )
            ],
        ),
        Case(
            "prioritized-list-allocation-mode-all-with-selectors-multiple-pools-across-nodes",
            features=features(prioritized_list=True),
            claims=[claim(CLAIM0, gen_all)],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, None, {"generation": attr_s("v5")}),
                ),
                slice_(
                    SLICE2,
                    NODE2,
                    POOL2,
                    DRIVER_A,
                    device(DEVICE1, None, {"generation": attr_s("v5")}),
                    device(DEVICE2, None, {"generation": attr_s("v6")}),
                ),
            ],
            node=N1,
            expect=[allocation(LOCAL1, result("req-0/subReq-1", DRIVER_A, POOL1, DEVICE1))],
        ),
        Case(
            "prioritized-list-allocation-mode-all-with-selectors-deviceclass-subset",
            features=features(prioritized_list=True),
            claims=[claim(CLAIM0, gen_all)],
            classes=[
                class_with_selectors(
                    CLASS_A,
                    'device.driver == "driver-a" && device.attributes["driver-a"].selected',
                )
            ],
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    *(
                        device(name, None, {"generation": attr_s(gen), "selected": attr_b(sel)})
                        for name, gen, sel in (
                            (DEVICE1, "v6", False),
                            (DEVICE2, "v5", False),
                            (DEVICE3, "v5", True),
                        )
                    ),
                )
            ],
            node=N1,
            expect=[allocation(LOCAL1, result("req-0/subReq-1", DRIVER_A, POOL1, DEVICE3))],
        ),
    ]
