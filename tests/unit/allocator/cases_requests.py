"""Upstream table, part 2: constraints, config, invalid input, limits, prioritized lists."""

from __future__ import annotations

from .builders import (
    CLAIM0,
    CLASS_A,
    CLASS_B,
    DEVICE0,
    DEVICE1,
    DEVICE2,
    DEVICE3,
    DRIVER_A,
    DRIVER_B,
    NODE1,
    POOL1,
    POOL2,
    REGION1,
    REQ0,
    REQ1,
    REQ2,
    SLICE1,
    SLICE2,
    SUBREQ0,
    SUBREQ1,
    Case,
    all_request,
    allocation,
    attr_b,
    attr_i,
    attr_s,
    attr_v,
    claim,
    claim_config,
    claim_with_request,
    class_with_selectors,
    config_result,
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
    slice_many,
    slice_one,
    sub_request,
)

MEM = 'device.capacity["driver-a"].memory.compareTo(quantity("{}")) >= 0'
N1 = node(NODE1, REGION1)
LOCAL1 = local_node_selector(NODE1)
INT_ATTR = "driver-a/numa"
BOOL_ATTR = "driver-a/boolAttribute"
STRING_ATTR = "driver-a/stringAttribute"
VERSION_ATTR = "driver-a/driverVersion"
PL = features(prioritized_list=True)


def _mismatch(name: str, key: str, a: dict[str, object], b: dict[str, object]) -> Case:
    return Case(
        name,
        claims=[claim(CLAIM0, request(REQ0, CLASS_A, 2), constraints=[match_attribute(key)])],
        classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        slices=[
            slice_(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {key.split("/")[1]: a}),
                device(DEVICE2, None, {key.split("/")[1]: b}),
            )
        ],
        node=N1,
    )


def cases() -> list[Case]:
    cls_a = [device_class(CLASS_A, DRIVER_A)]
    cls_ab = [device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)]
    one_a = [slice_one(SLICE1, NODE1, POOL1, DRIVER_A)]
    full_attrs = {
        "driverVersion": attr_v("1.0.0"),
        "numa": attr_i(1),
        "stringAttribute": attr_s("stringAttributeValue"),
        "boolAttribute": attr_b(True),
    }
    numa_devices = (
        device(DEVICE1, None, {"numa": attr_i(1)}),
        device(DEVICE2, None, {"numa": attr_i(2)}),
    )
    return [
        Case(
            "admin-access-enabled",
            features=features(admin_access=True),
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1, admin=True))],
            allocated=[dev_id(DRIVER_A, POOL1, DEVICE1), dev_id(DRIVER_A, POOL1, DEVICE2)],
            classes=cls_a,
            slices=one_a,
            node=N1,
            expect=[allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1, True))],
        ),
        Case(
            "with-constraint",
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 1),
                    request(REQ1, CLASS_A, 1),
                    constraints=[
                        match_attribute(INT_ATTR),
                        match_attribute(VERSION_ATTR),
                        match_attribute(STRING_ATTR),
                        match_attribute(BOOL_ATTR),
                    ],
                )
            ],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, None, full_attrs),
                    device(DEVICE2, None, full_attrs),
                )
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    result(REQ1, DRIVER_A, POOL1, DEVICE2),
                )
            ],
        ),
        Case(
            "with-constraint-non-existent-attribute",
            claims=[
                claim_with_request(
                    CLAIM0, REQ0, CLASS_A, match_attribute("driver-a/NonExistentAttribute")
                )
            ],
            classes=cls_a,
            slices=one_a,
            node=N1,
        ),
        _mismatch("with-constraint-not-matching-int-attribute", INT_ATTR, attr_i(1), attr_i(2)),
        Case(
            "with-constraint-not-matching-int-attribute-all-devices",
            claims=[
                claim(CLAIM0, all_request(REQ0, CLASS_A), constraints=[match_attribute(INT_ATTR)])
            ],
            classes=cls_ab,
            slices=[slice_(SLICE1, NODE1, POOL1, DRIVER_A, *numa_devices)],
            node=N1,
            error="claim claim-0, request req-0: cannot add device driver-a/pool-1/device-2 "
            "because a claim constraint would not be satisfied",
        ),
        Case(
            "partitionable-all-mode-constraint-must-error-with-reserved-counter",
            features=features(partitionable_devices=True),
            claims=[
                claim(CLAIM0, all_request(REQ0, CLASS_A), constraints=[match_attribute(INT_ATTR)])
            ],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    pool(POOL1, 2),
                    DRIVER_A,
                    numa_devices[0],
                    device(
                        DEVICE2,
                        None,
                        {"numa": attr_i(2)},
                        consumes=[consumes("counter-set-1", {"c": "1"})],
                    ),
                ),
                slice_(
                    SLICE2,
                    NODE1,
                    pool(POOL1, 2),
                    DRIVER_A,
                    counter_sets=[counter_set("counter-set-1", {"c": "1"})],
                ),
            ],
            node=N1,
            error="claim claim-0, request req-0: cannot add device driver-a/pool-1/device-2 "
            "because a claim constraint would not be satisfied",
        ),
        _mismatch(
            "with-constraint-not-matching-string-attribute",
            STRING_ATTR,
            attr_s("stringAttributeValue"),
            attr_s("stringAttributeValue2"),
        ),
        _mismatch(
            "with-constraint-not-matching-bool-attribute", BOOL_ATTR, attr_b(True), attr_b(False)
        ),
        _mismatch(
            "with-constraint-not-matching-version-attribute",
            VERSION_ATTR,
            attr_v("1.0.0"),
            attr_v("2.0.0"),
        ),
        Case(
            "with-constraint-for-request",
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 1),
                    request(REQ1, CLASS_A, 1),
                    constraints=[match_attribute(VERSION_ATTR, REQ0)],
                )
            ],
            classes=cls_ab,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, None, {"driverVersion": attr_v("1.0.0")}),
                    device(DEVICE2, None, {"driverVersion": attr_v("2.0.0")}),
                )
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    result(REQ1, DRIVER_A, POOL1, DEVICE2),
                )
            ],
        ),
        Case(
            "with-constraint-for-request-retry",
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 1),
                    request(REQ1, CLASS_A, 1),
                    constraints=[
                        match_attribute(VERSION_ATTR, REQ0),
                        match_attribute(STRING_ATTR),
                    ],
                )
            ],
            classes=cls_ab,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(
                        DEVICE1,
                        None,
                        {"driverVersion": attr_v("1.0.0"), "stringAttribute": attr_s("a")},
                    ),
                    device(
                        DEVICE2,
                        None,
                        {"driverVersion": attr_v("2.0.0"), "stringAttribute": attr_s("b")},
                    ),
                    device(
                        DEVICE3,
                        None,
                        {"driverVersion": attr_v("3.0.0"), "stringAttribute": attr_s("b")},
                    ),
                )
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
            "with-class-device-config",
            claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes=[device_class(CLASS_A, DRIVER_A, config_attribute="classAttribute")],
            slices=one_a,
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    config=[config_result("FromClass", [REQ0], DRIVER_A, "classAttribute")],
                )
            ],
        ),
        Case(
            "with-class-device-config-with-multiple-request-and-configs",
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 1),
                    request(REQ1, CLASS_A, 1),
                    request(REQ2, CLASS_B, 1),
                )
            ],
            classes=[
                device_class(CLASS_A, DRIVER_A, config_attribute="classAttribute-A"),
                device_class(CLASS_B, DRIVER_B, config_attribute="classAttribute-B"),
            ],
            slices=[
                slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 2),
                slice_one(SLICE2, NODE1, POOL1, DRIVER_B),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE0),
                    result(REQ1, DRIVER_A, POOL1, DEVICE1),
                    result(REQ2, DRIVER_B, POOL1, DEVICE1),
                    config=[
                        config_result("FromClass", [REQ0, REQ1], DRIVER_A, "classAttribute-A"),
                        config_result("FromClass", [REQ2], DRIVER_B, "classAttribute-B"),
                    ],
                )
            ],
        ),
        Case(
            "claim-with-device-config",
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 1),
                    config=[claim_config([], DRIVER_A, "deviceAttribute")],
                )
            ],
            classes=cls_a,
            slices=one_a,
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    config=[config_result("FromClaim", [], DRIVER_A, "deviceAttribute")],
                )
            ],
        ),
        Case(
            "unknown-selector",
            claims=[
                claim(
                    CLAIM0,
                    {
                        "name": REQ0,
                        "exactly": {
                            "deviceClassName": CLASS_A,
                            "allocationMode": "ExactCount",
                            "count": 1,
                            "selectors": [{}],
                        },
                    },
                )
            ],
            classes=cls_a,
            slices=one_a,
            node=N1,
            error="CEL expression empty (unsupported selector type?)",
        ),
        Case(
            "unknown-allocation-mode",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1, mode="future-mode"))],
            classes=cls_a,
            slices=one_a,
            node=N1,
            error="unsupported count mode future-mode",
        ),
        Case(
            "unknown-constraint",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1), constraints=[{}])],
            classes=cls_a,
            slices=one_a,
            node=N1,
            error="empty constraint (unsupported constraint type?)",
        ),
        Case(
            "invalid-CEL-one-device",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1, "noSuchVar"))],
            classes=cls_a,
            slices=one_a,
            node=N1,
            error="undeclared reference",
        ),
        Case(
            "invalid-CEL-one-device-class",
            claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes=[class_with_selectors(CLASS_A, "noSuchVar")],
            slices=one_a,
            node=N1,
            error="undeclared reference",
        ),
        Case(
            "invalid-CEL-all-devices",
            claims=[claim(CLAIM0, all_request(REQ0, CLASS_A, "noSuchVar"))],
            classes=cls_a,
            slices=one_a,
            node=N1,
            error="undeclared reference",
        ),
        Case(
            "too-many-devices-single-request",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 500))],
            classes=cls_a,
            error="exceeds the claim limit",
        ),
        Case(
            "many-devices-okay",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 32))],
            classes=cls_a,
        ),
        Case(
            "too-many-devices-total",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 32), request(REQ1, CLASS_A, 1))],
            classes=cls_a,
            slices=[slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 33)],
            node=N1,
            error="exceeds the claim limit",
        ),
        Case(
            "all-devices-invalid-CEL",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 500))],
            classes=cls_a,
            error="exceeds the claim limit",
        ),
        Case(
            "prioritized-list-first-unavailable",
            features=PL,
            claims=[
                claim(
                    CLAIM0,
                    prioritized(
                        REQ0, sub_request(SUBREQ0, CLASS_B, 1), sub_request(SUBREQ1, CLASS_A, 1)
                    ),
                )
            ],
            classes=cls_ab,
            slices=one_a,
            node=N1,
            expect=[allocation(LOCAL1, result("req-0/subReq-1", DRIVER_A, POOL1, DEVICE1))],
        ),
        Case(
            "prioritized-list-non-available",
            features=PL,
            claims=[
                claim(
                    CLAIM0,
                    prioritized(
                        REQ0, sub_request(SUBREQ0, CLASS_B, 2), sub_request(SUBREQ1, CLASS_A, 2)
                    ),
                )
            ],
            classes=cls_ab,
            slices=[
                slice_one(SLICE1, NODE1, POOL1, DRIVER_A),
                slice_one(SLICE2, NODE1, POOL2, DRIVER_B),
            ],
            node=N1,
        ),
        Case(
            "prioritized-list-device-config",
            features=PL,
            claims=[
                claim(
                    CLAIM0,
                    prioritized(
                        REQ0,
                        sub_request(SUBREQ0, CLASS_A, 1),
                        sub_request(SUBREQ1, CLASS_B, 2),
                        sub_request(SUBREQ1, CLASS_B, 2),
                    ),
                    config=[
                        claim_config(["req-0/subReq-0"], DRIVER_A, "foo"),
                        claim_config(["req-0/subReq-1"], DRIVER_B, "bar"),
                    ],
                )
            ],
            classes=cls_ab,
            slices=[slice_(SLICE1, NODE1, POOL1, DRIVER_B, device(DEVICE1), device(DEVICE2))],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result("req-0/subReq-1", DRIVER_B, POOL1, DEVICE1),
                    result("req-0/subReq-1", DRIVER_B, POOL1, DEVICE2),
                    config=[config_result("FromClaim", ["req-0/subReq-1"], DRIVER_B, "bar")],
                )
            ],
        ),
        Case(
            "prioritized-list-class-config",
            features=PL,
            claims=[
                claim(
                    CLAIM0,
                    prioritized(
                        REQ0, sub_request(SUBREQ0, CLASS_A, 2), sub_request(SUBREQ1, CLASS_B, 2)
                    ),
                )
            ],
            classes=[
                device_class(CLASS_A, DRIVER_A, config_attribute="foo"),
                device_class(CLASS_B, DRIVER_B, config_attribute="bar"),
            ],
            slices=[
                slice_(SLICE1, NODE1, POOL1, DRIVER_B, device(DEVICE1), device(DEVICE2)),
                slice_(SLICE2, NODE1, POOL2, DRIVER_A, device(DEVICE3)),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result("req-0/subReq-1", DRIVER_B, POOL1, DEVICE1),
                    result("req-0/subReq-1", DRIVER_B, POOL1, DEVICE2),
                    config=[config_result("FromClass", ["req-0/subReq-1"], DRIVER_B, "bar")],
                )
            ],
        ),
        Case(
            "prioritized-list-subrequests-with-expressions",
            features=PL,
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 1, MEM.format("1Gi")),
                    prioritized(
                        REQ1,
                        sub_request(SUBREQ0, CLASS_A, 1, MEM.format("4Gi")),
                        sub_request(SUBREQ1, CLASS_A, 2, MEM.format("2Gi")),
                    ),
                )
            ],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, {"memory": "2Gi"}),
                    device(DEVICE2, {"memory": "2Gi"}),
                    device(DEVICE3, {"memory": "1Gi"}),
                )
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE3),
                    result("req-1/subReq-1", DRIVER_A, POOL1, DEVICE1),
                    result("req-1/subReq-1", DRIVER_A, POOL1, DEVICE2),
                )
            ],
        ),
        Case(
            "prioritized-list-subrequests-with-constraints-ref-parent-request",
            features=PL,
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 1, MEM.format("8Gi")),
                    prioritized(
                        REQ1,
                        sub_request(SUBREQ0, CLASS_A, 1, MEM.format("2Gi")),
                        sub_request(SUBREQ1, CLASS_A, 1, MEM.format("1Gi")),
                    ),
                    constraints=[match_attribute(VERSION_ATTR, REQ0, REQ1)],
                )
            ],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, {"memory": "8Gi"}, {"driverVersion": attr_v("1.0.0")}),
                ),
                slice_(
                    SLICE2,
                    NODE1,
                    POOL2,
                    DRIVER_A,
                    device(DEVICE2, {"memory": "2Gi"}, {"driverVersion": attr_v("2.0.0")}),
                    device(DEVICE3, {"memory": "1Gi"}, {"driverVersion": attr_v("1.0.0")}),
                ),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    result("req-1/subReq-1", DRIVER_A, POOL2, DEVICE3),
                )
            ],
        ),
        Case(
            "prioritized-list-subrequests-with-constraints-ref-sub-request",
            features=PL,
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 1, MEM.format("8Gi")),
                    prioritized(
                        REQ1,
                        sub_request(SUBREQ0, CLASS_A, 1, MEM.format("2Gi")),
                        sub_request(SUBREQ1, CLASS_A, 1, MEM.format("1Gi")),
                    ),
                    constraints=[match_attribute(VERSION_ATTR, REQ0, "req-1/subReq-0")],
                )
            ],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, {"memory": "8Gi"}, {"driverVersion": attr_v("1.0.0")}),
                ),
                slice_(
                    SLICE2,
                    NODE1,
                    POOL2,
                    DRIVER_A,
                    device(DEVICE2, {"memory": "2Gi"}, {"driverVersion": attr_v("2.0.0")}),
                ),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    result("req-1/subReq-1", DRIVER_A, POOL2, DEVICE2),
                )
            ],
        ),
        Case(
            "prioritized-list-subrequests-with-allocation-mode-all",
            features=PL,
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
            allocated=[dev_id(DRIVER_A, POOL1, DEVICE1)],
            node=N1,
            expect=[allocation(LOCAL1, result("req-0/subReq-1", DRIVER_A, POOL1, DEVICE2))],
        ),
        Case(
            "prioritized-list-allocation-mode-all-multiple-requests",
            features=PL,
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 1),
                    prioritized(
                        REQ1,
                        sub_request(SUBREQ0, CLASS_A, mode="All"),
                        sub_request(SUBREQ1, CLASS_A, 1),
                    ),
                )
            ],
            classes=cls_a,
            slices=[slice_(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2))],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    result("req-1/subReq-1", DRIVER_A, POOL1, DEVICE2),
                )
            ],
        ),
        Case(
            "prioritized-list-disabled",
            claims=[claim(CLAIM0, prioritized(REQ0, sub_request(SUBREQ0, CLASS_A, 1)))],
            classes=cls_a,
            slices=one_a,
            node=N1,
            error="claim claim-0, request req-0: has subrequests, but the DRAPrioritizedList "
            "feature is disabled",
        ),
        Case(
            "prioritized-list-multi-request",
            features=PL,
            claims=[
                claim(
                    CLAIM0,
                    request(REQ1, CLASS_A, 1, MEM.format("8Gi")),
                    prioritized(
                        REQ0,
                        sub_request(SUBREQ0, CLASS_A, 1, MEM.format("8Gi")),
                        sub_request(SUBREQ1, CLASS_A, 1, MEM.format("4Gi")),
                    ),
                )
            ],
            classes=cls_a,
            slices=[
                slice_(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1, {"memory": "8Gi"})),
                slice_(SLICE2, NODE1, POOL2, DRIVER_A, device(DEVICE2, {"memory": "4Gi"})),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ1, DRIVER_A, POOL1, DEVICE1),
                    result("req-0/subReq-1", DRIVER_A, POOL2, DEVICE2),
                )
            ],
        ),
        Case(
            "prioritized-list-with-backtracking",
            features=PL,
            claims=[
                claim(
                    CLAIM0,
                    prioritized(
                        REQ0,
                        sub_request(SUBREQ0, CLASS_A, 1, MEM.format("8Gi")),
                        sub_request(SUBREQ1, CLASS_A, 1, MEM.format("4Gi")),
                    ),
                    request(REQ1, CLASS_A, 1, MEM.format("8Gi")),
                )
            ],
            classes=cls_a,
            slices=[
                slice_(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1, {"memory": "8Gi"})),
                slice_(SLICE2, NODE1, POOL2, DRIVER_A, device(DEVICE2, {"memory": "4Gi"})),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result("req-0/subReq-1", DRIVER_A, POOL2, DEVICE2),
                    result(REQ1, DRIVER_A, POOL1, DEVICE1),
                )
            ],
        ),
        Case(
            "prioritized-list-too-many-in-first-subrequest",
            features=PL,
            claims=[
                claim(
                    CLAIM0,
                    prioritized(
                        REQ0, sub_request(SUBREQ0, CLASS_B, 500), sub_request(SUBREQ1, CLASS_A, 1)
                    ),
                )
            ],
            classes=cls_ab,
            slices=one_a,
            node=N1,
            expect=[allocation(LOCAL1, result("req-0/subReq-1", DRIVER_A, POOL1, DEVICE1))],
        ),
    ]
