"""Upstream table, part 1: basics, classes, All mode, admin access, node selection."""

from __future__ import annotations

from .builders import (
    ALL_NODES,
    CLAIM0,
    CLAIM1,
    CLASS_A,
    CLASS_B,
    DEVICE1,
    DEVICE2,
    DRIVER_A,
    DRIVER_B,
    NODE1,
    NODE2,
    POOL1,
    POOL2,
    POOL3,
    POOL4,
    REGION1,
    REGION2,
    REQ0,
    REQ1,
    SLICE1,
    SLICE2,
    SUBREQ0,
    SUBREQ1,
    Case,
    all_request,
    allocation,
    claim,
    claim_with_request,
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
    slice_one,
    sub_request,
)

MEM = 'device.capacity["driver-a"].memory.compareTo(quantity("{}")) >= 0'
N1 = node(NODE1, REGION1)
LOCAL1 = local_node_selector(NODE1)


def cases() -> list[Case]:
    mem_devices = (
        device(DEVICE1, {"memory": "1Gi"}),
        device(DEVICE2, {"memory": "2Gi"}),
    )
    small_large = claim(
        CLAIM0,
        request(REQ0, CLASS_A, 1, MEM.format("1Gi")),
        request(REQ1, CLASS_A, 1, MEM.format("2Gi")),
    )
    both = allocation(
        LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1), result(REQ1, DRIVER_A, POOL1, DEVICE2)
    )
    cls_a = [device_class(CLASS_A, DRIVER_A)]
    cls_ab = [device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)]
    one_a = [slice_one(SLICE1, NODE1, POOL1, DRIVER_A)]
    two_devs = [slice_(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2))]
    return [
        Case("empty"),
        Case(
            "simple",
            claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes=cls_a,
            slices=one_a,
            node=N1,
            expect=[allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1))],
        ),
        Case(
            "other-node",
            claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes=cls_a,
            slices=[
                slice_one(SLICE1, NODE1, POOL1, DRIVER_B),
                slice_one(SLICE2, NODE2, POOL2, DRIVER_A),
            ],
            node=node(NODE2, REGION2),
            expect=[allocation(local_node_selector(NODE2), result(REQ0, DRIVER_A, POOL2, DEVICE1))],
        ),
        Case(
            "small-and-large",
            claims=[small_large],
            classes=cls_a,
            slices=[slice_(SLICE1, NODE1, POOL1, DRIVER_A, *mem_devices)],
            node=N1,
            expect=[both],
        ),
        Case(
            "small-and-large-backtrack-requests",
            claims=[small_large],
            classes=cls_a,
            slices=[slice_(SLICE1, NODE1, POOL1, DRIVER_A, *reversed(mem_devices))],
            node=N1,
            expect=[both],
        ),
        Case(
            "small-and-large-backtrack-claims",
            claims=[
                claim(CLAIM0, request(REQ0, CLASS_A, 1, MEM.format("1Gi"))),
                claim(CLAIM1, request(REQ1, CLASS_A, 1, MEM.format("2Gi"))),
            ],
            classes=cls_a,
            slices=[slice_(SLICE1, NODE1, POOL1, DRIVER_A, *reversed(mem_devices))],
            node=N1,
            expect=[
                allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1)),
                allocation(LOCAL1, result(REQ1, DRIVER_A, POOL1, DEVICE2)),
            ],
        ),
        Case(
            "devices-split-across-different-slices",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 2))],
            classes=cls_a,
            slices=[
                slice_one(SLICE1, NODE1, POOL1, DRIVER_A),
                slice_one(SLICE2, NODE1, POOL2, DRIVER_A),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    result(REQ0, DRIVER_A, POOL2, DEVICE1),
                )
            ],
        ),
        Case(
            "obsolete-slice",
            claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes=cls_a,
            slices=[
                slice_("slice-1-obsolete", NODE1, pool(POOL1, 2), DRIVER_A, device(DEVICE1)),
                slice_("slice-1-obsolete", NODE1, pool(POOL1, 2, 2), DRIVER_A, device(DEVICE2)),
            ],
            node=N1,
        ),
        Case(
            "duplicate-slice",
            claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes=cls_a,
            slices=[
                slice_(SLICE1, NODE1, pool(POOL1, 2), DRIVER_A, device(DEVICE1)),
                slice_(SLICE1 + "-2", NODE1, pool(POOL1, 2), DRIVER_A, device(DEVICE1)),
            ],
            node=N1,
            error="invalid resource pools were encountered",
        ),
        Case(
            "no-slices",
            claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes=cls_a,
            node=N1,
        ),
        Case(
            "not-enough-suitable-devices",
            claims=[
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                claim_with_request(CLAIM0, REQ1, CLASS_A),
            ],
            classes=cls_a,
            slices=one_a,
            node=N1,
        ),
        Case(
            "no-classes",
            claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
            slices=one_a,
            node=N1,
            error="could not retrieve device class class-a",
        ),
        Case(
            "unknown-class",
            claims=[claim_with_request(CLAIM0, REQ0, "unknown-class")],
            classes=cls_a,
            slices=one_a,
            node=N1,
            error="could not retrieve device class unknown-class",
        ),
        Case(
            "empty-class",
            claims=[claim_with_request(CLAIM0, REQ0, "")],
            classes=cls_a,
            slices=one_a,
            node=N1,
            error="claim claim-0, request req-0: missing device class name "
            "(unsupported request type?)",
        ),
        Case("no-claims-to-allocate", classes=cls_a, slices=one_a, node=N1),
        Case(
            "all-devices-single",
            claims=[claim(CLAIM0, all_request(REQ0, CLASS_A))],
            classes=cls_a,
            slices=one_a,
            node=N1,
            expect=[allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1))],
        ),
        Case(
            "all-devices-with-consumed-counters",
            features=features(partitionable_devices=True),
            claims=[claim(CLAIM0, all_request(REQ0, CLASS_A))],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    pool(POOL1, 2),
                    DRIVER_A,
                    device(DEVICE1, consumes=[consumes("counter-set-1", {"memory": "4Gi"})]),
                ),
                slice_(
                    SLICE2,
                    NODE1,
                    pool(POOL1, 2),
                    DRIVER_A,
                    counter_sets=[counter_set("counter-set-1", {"memory": "8Gi"})],
                ),
            ],
            node=N1,
            expect=[allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1))],
        ),
        Case(
            "all-devices-many",
            claims=[claim(CLAIM0, all_request(REQ0, CLASS_A))],
            classes=cls_a,
            slices=[
                slice_one(SLICE1, NODE1, POOL1, DRIVER_A),
                slice_one(SLICE1, NODE1, POOL2, DRIVER_A),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    result(REQ0, DRIVER_A, POOL2, DEVICE1),
                )
            ],
        ),
        Case(
            "all-devices-of-the-incomplete-pool",
            claims=[claim(CLAIM0, all_request(REQ0, CLASS_A))],
            classes=cls_a,
            slices=[slice_(SLICE1, NODE1, pool(POOL1, 2), DRIVER_A, device(DEVICE1))],
            node=N1,
            error="claim claim-0, request req-0: asks for all devices, but resource pool "
            "driver-a/pool-1 is currently being updated",
        ),
        Case(
            "all-devices-plus-another",
            claims=[
                claim(CLAIM0, all_request(REQ0, CLASS_A)),
                claim(CLAIM1, request(REQ0, CLASS_B, 1)),
            ],
            classes=cls_ab,
            slices=[
                slice_one(SLICE1, NODE1, POOL1, DRIVER_A),
                slice_one(SLICE1, NODE1, POOL1, DRIVER_B),
            ],
            node=N1,
            expect=[
                allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1)),
                allocation(LOCAL1, result(REQ0, DRIVER_B, POOL1, DEVICE1)),
            ],
        ),
        Case(
            "all-devices-plus-another-reversed",
            claims=[
                claim(CLAIM1, request(REQ0, CLASS_B, 1)),
                claim(CLAIM0, all_request(REQ0, CLASS_A)),
            ],
            classes=cls_ab,
            slices=[
                slice_one(SLICE1, NODE1, POOL1, DRIVER_A),
                slice_one(SLICE1, NODE1, POOL1, DRIVER_B),
            ],
            node=N1,
            expect=[
                allocation(LOCAL1, result(REQ0, DRIVER_B, POOL1, DEVICE1)),
                allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1)),
            ],
        ),
        Case(
            "all-devices-many-plus-another",
            claims=[
                claim(CLAIM0, all_request(REQ0, CLASS_A)),
                claim(CLAIM1, request(REQ0, CLASS_B, 1)),
            ],
            classes=cls_ab,
            slices=[two_devs[0], slice_one(SLICE1, NODE1, POOL1, DRIVER_B)],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    result(REQ0, DRIVER_A, POOL1, DEVICE2),
                ),
                allocation(LOCAL1, result(REQ0, DRIVER_B, POOL1, DEVICE1)),
            ],
        ),
        Case(
            "all-devices-many-plus-another-reversed",
            claims=[
                claim(CLAIM1, request(REQ0, CLASS_B, 1)),
                claim(CLAIM0, all_request(REQ0, CLASS_A)),
            ],
            classes=cls_ab,
            slices=[two_devs[0], slice_one(SLICE1, NODE1, POOL1, DRIVER_B)],
            node=N1,
            expect=[
                allocation(LOCAL1, result(REQ0, DRIVER_B, POOL1, DEVICE1)),
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    result(REQ0, DRIVER_A, POOL1, DEVICE2),
                ),
            ],
        ),
        Case(
            "all-devices-no-solution",
            claims=[
                claim(CLAIM1, request(REQ0, CLASS_A, 1)),
                claim(CLAIM0, all_request(REQ0, CLASS_A)),
            ],
            classes=cls_a,
            slices=one_a,
            node=N1,
        ),
        Case(
            "all-devices-no-solution-reversed",
            claims=[
                claim(CLAIM0, all_request(REQ0, CLASS_A)),
                claim(CLAIM1, request(REQ0, CLASS_A, 1)),
            ],
            classes=cls_a,
            slices=one_a,
            node=N1,
        ),
        Case(
            "all-devices-slice-without-devices",
            claims=[claim(CLAIM0, all_request(REQ0, CLASS_A))],
            classes=cls_a,
            slices=[slice_(SLICE1, NODE1, POOL1, DRIVER_A)],
            node=N1,
        ),
        Case(
            "all-devices-no-slices",
            claims=[claim(CLAIM0, all_request(REQ0, CLASS_A))],
            classes=cls_a,
            node=N1,
        ),
        Case(
            "all-devices-some-allocated",
            claims=[claim(CLAIM0, all_request(REQ0, CLASS_A))],
            allocated=[dev_id(DRIVER_A, POOL1, DEVICE1)],
            classes=cls_a,
            slices=two_devs,
            node=N1,
        ),
        Case(
            "all-devices-some-allocated-admin-access",
            features=features(admin_access=True),
            claims=[claim(CLAIM0, all_request(REQ0, CLASS_A, admin=True))],
            allocated=[dev_id(DRIVER_A, POOL1, DEVICE1)],
            classes=cls_a,
            slices=two_devs,
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1, True),
                    result(REQ0, DRIVER_A, POOL1, DEVICE2, True),
                )
            ],
        ),
        Case(
            "all-devices-some-allocating-admin-access",
            features=features(admin_access=True),
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 1, admin=True),
                    all_request(REQ1, CLASS_A, admin=True),
                )
            ],
            classes=cls_a,
            slices=two_devs,
            node=N1,
        ),
        Case(
            "count-devices-some-allocated-admin-access",
            features=features(admin_access=True),
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 2, admin=True))],
            allocated=[dev_id(DRIVER_A, POOL1, DEVICE1)],
            classes=cls_a,
            slices=two_devs,
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1, True),
                    result(REQ0, DRIVER_A, POOL1, DEVICE2, True),
                )
            ],
        ),
        Case(
            "separate-claims-share-device-admin-access",
            features=features(admin_access=True),
            claims=[
                claim(CLAIM0, request(REQ0, CLASS_A, 1, admin=True)),
                claim(CLAIM1, request(REQ0, CLASS_A, 1, admin=True)),
            ],
            classes=cls_a,
            slices=two_devs,
            node=N1,
            expect=[
                allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1, True)),
                allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1, True)),
            ],
        ),
        Case(
            "admin-access-claims-device-allocating-for-non-admin-access",
            features=features(admin_access=True),
            claims=[
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                claim(CLAIM1, request(REQ0, CLASS_A, 1, admin=True)),
            ],
            classes=cls_a,
            slices=two_devs,
            node=N1,
            expect=[
                allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1)),
                allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1, True)),
            ],
        ),
        Case(
            "all-devices-slice-without-devices-prioritized-list",
            features=features(prioritized_list=True),
            claims=[
                claim(
                    CLAIM0,
                    prioritized(
                        REQ0,
                        sub_request(SUBREQ0, CLASS_A, mode="All"),
                        sub_request(SUBREQ1, CLASS_B, 1),
                    ),
                )
            ],
            classes=cls_ab,
            slices=[
                slice_(SLICE1, NODE1, POOL1, DRIVER_A),
                slice_one(SLICE2, NODE1, POOL2, DRIVER_B),
            ],
            node=N1,
            expect=[allocation(LOCAL1, result("req-0/subReq-1", DRIVER_B, POOL2, DEVICE1))],
        ),
        Case(
            "all-devices-no-slices-prioritized-list",
            features=features(prioritized_list=True),
            claims=[
                claim(
                    CLAIM0,
                    prioritized(
                        REQ0,
                        sub_request(SUBREQ0, CLASS_A, mode="All"),
                        sub_request(SUBREQ1, CLASS_B, 1),
                    ),
                )
            ],
            classes=cls_ab,
            slices=[slice_one(SLICE2, NODE1, POOL2, DRIVER_B)],
            node=N1,
            expect=[allocation(LOCAL1, result("req-0/subReq-1", DRIVER_B, POOL2, DEVICE1))],
        ),
        Case(
            "all-devices-some-allocated-prioritized-list",
            features=features(prioritized_list=True),
            claims=[
                claim(
                    CLAIM0,
                    prioritized(
                        REQ0,
                        sub_request(SUBREQ0, CLASS_A, mode="All"),
                        sub_request(SUBREQ1, CLASS_B, 1),
                    ),
                )
            ],
            allocated=[dev_id(DRIVER_A, POOL1, DEVICE1)],
            classes=cls_ab,
            slices=[two_devs[0], slice_one(SLICE2, NODE1, POOL2, DRIVER_B)],
            node=N1,
            expect=[allocation(LOCAL1, result("req-0/subReq-1", DRIVER_B, POOL2, DEVICE1))],
        ),
        Case(
            "network-attached-device",
            claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes=cls_a,
            slices=[slice_one(SLICE1, node_label_selector("region", REGION1), POOL1, DRIVER_A)],
            node=N1,
            expect=[
                allocation(
                    node_label_selector("region", REGION1), result(REQ0, DRIVER_A, POOL1, DEVICE1)
                )
            ],
        ),
        Case(
            "unsuccessful-allocation-network-attached-device",
            claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes=cls_a,
            slices=[slice_one(SLICE1, node_label_selector("region", REGION1), POOL1, DRIVER_A)],
            node=node(NODE2, REGION2),
        ),
        Case(
            "many-network-attached-devices",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 4))],
            classes=cls_a,
            slices=[
                slice_one(SLICE1, node_label_selector("region", REGION1), POOL1, DRIVER_A),
                slice_one(SLICE1, ALL_NODES, POOL2, DRIVER_A),
                slice_one(SLICE1, node_label_selector("planet", "earth"), POOL3, DRIVER_A),
                slice_one(SLICE1, local_node_selector(NODE1), POOL4, DRIVER_A),
            ],
            node=N1,
            expect=[
                allocation(
                    {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "region", "operator": "In", "values": [REGION1]},
                                    {"key": "planet", "operator": "In", "values": ["earth"]},
                                ],
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": [NODE1]}
                                ],
                            }
                        ]
                    },
                    result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    result(REQ0, DRIVER_A, POOL2, DEVICE1),
                    result(REQ0, DRIVER_A, POOL3, DEVICE1),
                    result(REQ0, DRIVER_A, POOL4, DEVICE1),
                )
            ],
        ),
        Case(
            "local-and-network-attached-devices",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 2))],
            classes=cls_a,
            slices=[
                slice_one(SLICE1, node_label_selector("region", REGION1), POOL1, DRIVER_A),
                slice_one(SLICE1, NODE1, POOL2, DRIVER_A),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    result(REQ0, DRIVER_A, POOL2, DEVICE1),
                )
            ],
        ),
        Case(
            "several-different-drivers",
            claims=[
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                claim_with_request(CLAIM0, REQ0, CLASS_B),
            ],
            classes=cls_ab,
            slices=[two_devs[0], slice_one(SLICE1, NODE1, POOL1, DRIVER_B)],
            node=N1,
            expect=[
                allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1)),
                allocation(LOCAL1, result(REQ0, DRIVER_B, POOL1, DEVICE1)),
            ],
        ),
        Case(
            "already-allocated-devices",
            claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
            allocated=[dev_id(DRIVER_A, POOL1, DEVICE1), dev_id(DRIVER_A, POOL1, DEVICE2)],
            classes=cls_a,
            slices=one_a,
            node=N1,
        ),
        Case(
            "admin-access-disabled",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1, admin=True))],
            classes=cls_a,
            slices=one_a,
            node=N1,
            error="claim claim-0, request req-0: admin access is requested, but the feature is "
            "disabled",
        ),
    ]
