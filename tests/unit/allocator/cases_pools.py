"""Upstream table, part 5: binding conditions, multi-host pools, pool validation, search effort."""

from __future__ import annotations

from typing import Any

from operators.api.resource import ResourceSlice

from .builders import (
    CLAIM0,
    CLASS_A,
    DEVICE1,
    DEVICE2,
    DEVICE3,
    DEVICE4,
    DRIVER_A,
    FROM_COUNTERS,
    NODE1,
    NODE2,
    POOL1,
    POOL2,
    POOL3,
    POOL4,
    REGION1,
    REQ0,
    REQ1,
    REQ2,
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
    attr_s,
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
    sub_request,
    with_tolerations,
)

MEM = 'device.capacity["driver-a"].memory.compareTo(quantity("{}")) >= 0'
N1 = node(NODE1, REGION1)
LOCAL1 = local_node_selector(NODE1)
CS1, CS2 = "counter-set-1", "counter-set-2"
BINDING = features(device_binding_conditions=True, resource_claim_device_status=True)
PD = features(partitionable_devices=True)
PD_BINDING = features(
    partitionable_devices=True, device_binding_conditions=True, resource_claim_device_status=True
)
TYPE_X = 'device.attributes["driver-a"].type == "X"'
KEY1_TAINT: J = {"key": "key1", "value": "value1", "effect": "NoSchedule"}
TOL_KEY1: J = {"operator": "Exists", "key": "key1", "effect": "NoSchedule"}


def cond(ok: str, fail: str) -> tuple[list[str], list[str]]:
    return [ok], [fail]


def part(name: str, cs: str, mem: str, **kw: Any) -> J:
    return device(name, FROM_COUNTERS, consumes=[consumes(cs, {"memory": mem})], **kw)


def counters(name: str, where: object, pool_: str | J, *sets: J) -> ResourceSlice:
    return slice_(name, where, pool_, DRIVER_A, counter_sets=list(sets))


def gen_slice(name: str, where: str, generation: int, *devices: J) -> ResourceSlice:
    return slice_(name, where, pool(POOL1, 2, generation), DRIVER_A, *devices)


def cases() -> list[Case]:
    cls_a = [device_class(CLASS_A, DRIVER_A)]
    p2 = pool(POOL1, 2)
    d1, d2 = device(DEVICE1), device(DEVICE2)
    return [
        Case(
            "device-binding-conditions",
            features=BINDING,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, binding=cond("IsPrepare", "BindingFailed")),
                )
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(
                        REQ0, DRIVER_A, POOL1, DEVICE1, binding=cond("IsPrepare", "BindingFailed")
                    ),
                )
            ],
        ),
        Case(
            "binding-conditions-multiple-devices",
            features=BINDING,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 2), request(REQ1, CLASS_A, 1))],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, binding=cond("IsPrepare", "BindingFailed")),
                    device(DEVICE2, binding=cond("IsPrepare2", "BindingFailed2")),
                    device(DEVICE3, binding=cond("IsPrepare3", "BindingFailed3")),
                )
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(
                        REQ0, DRIVER_A, POOL1, DEVICE1, binding=cond("IsPrepare", "BindingFailed")
                    ),
                    result(
                        REQ0, DRIVER_A, POOL1, DEVICE2, binding=cond("IsPrepare2", "BindingFailed2")
                    ),
                    result(
                        REQ1, DRIVER_A, POOL1, DEVICE3, binding=cond("IsPrepare3", "BindingFailed3")
                    ),
                )
            ],
        ),
        Case(
            "binding-conditions-with-and-without",
            features=BINDING,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1))],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    d1,
                    device(DEVICE2, binding=cond("IsPrepare", "BindingFailed")),
                )
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    result(
                        REQ1, DRIVER_A, POOL1, DEVICE2, binding=cond("IsPrepare", "BindingFailed")
                    ),
                )
            ],
        ),
        Case(
            "binding-conditions-without-feature-gate",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, binding=cond("IsPrepare", "BindingFailed")),
                )
            ],
            node=N1,
        ),
        Case(
            "node-restriction",
            features=BINDING,
            claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    node_label_selector("planet", "earth"),
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, binds_to_node=True),
                )
            ],
            node=N1,
            expect=[allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1))],
        ),
        Case(
            "partitionable-devices-with-binding-conditions",
            features=PD_BINDING,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    p2,
                    DRIVER_A,
                    part(DEVICE1, CS1, "4Gi", binding=cond("IsPrepare", "BindingFailed")),
                ),
                counters(SLICE2, NODE1, p2, counter_set(CS1, {"memory": "8Gi"})),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(
                        REQ0, DRIVER_A, POOL1, DEVICE1, binding=cond("IsPrepare", "BindingFailed")
                    ),
                )
            ],
        ),
        Case(
            "partitionable-devices-with-binding-conditions-some-devices-no-conditions",
            features=PD_BINDING,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 3))],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    p2,
                    DRIVER_A,
                    part(DEVICE1, CS1, "2Gi", binding=cond("IsPrepare", "BindingFailed")),
                    part(DEVICE2, CS1, "2Gi"),
                    part(DEVICE3, CS1, "4Gi", binding=cond("IsReady", "BindingTimeout")),
                ),
                counters(SLICE2, NODE1, p2, counter_set(CS1, {"memory": "8Gi"})),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(
                        REQ0, DRIVER_A, POOL1, DEVICE1, binding=cond("IsPrepare", "BindingFailed")
                    ),
                    result(REQ0, DRIVER_A, POOL1, DEVICE2),
                    result(
                        REQ0, DRIVER_A, POOL1, DEVICE3, binding=cond("IsReady", "BindingTimeout")
                    ),
                )
            ],
        ),
        Case(
            "partitionable-devices-with-binding-conditions-multi-slices",
            features=PD_BINDING,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 2))],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE4,
                    NODE1,
                    pool(POOL1, 4),
                    DRIVER_A,
                    part(DEVICE1, CS1, "4Gi", binding=cond("IsPrepare", "BindingFailed")),
                ),
                counters(SLICE3, NODE1, pool(POOL1, 4), counter_set(CS1, {"memory": "8Gi"})),
                slice_(SLICE2, NODE1, pool(POOL1, 4), DRIVER_A, part(DEVICE2, CS2, "4Gi")),
                counters(SLICE1, NODE1, pool(POOL1, 4), counter_set(CS2, {"memory": "8Gi"})),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE2),
                    result(
                        REQ0, DRIVER_A, POOL1, DEVICE1, binding=cond("IsPrepare", "BindingFailed")
                    ),
                )
            ],
        ),
        Case(
            "partitionable-devices-with-binding-conditions-and-taints",
            features=features(
                partitionable_devices=True,
                device_binding_conditions=True,
                resource_claim_device_status=True,
                device_taints=True,
            ),
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 2))],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    part(
                        DEVICE1,
                        CS1,
                        "4Gi",
                        binding=cond("IsPrepare", "BindingFailed"),
                        taints=[KEY1_TAINT],
                    ),
                    part(DEVICE2, CS1, "4Gi"),
                ),
                counters(SLICE2, NODE1, POOL1, counter_set(CS1, {"memory": "8Gi"})),
            ],
            node=N1,
        ),
        Case(
            "partitionable-devices-with-binding-conditions-and-taints-tolerated",
            features=features(
                partitionable_devices=True,
                device_binding_conditions=True,
                resource_claim_device_status=True,
                device_taints=True,
            ),
            claims=[with_tolerations(claim(CLAIM0, request(REQ0, CLASS_A, 2)), TOL_KEY1)],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    p2,
                    DRIVER_A,
                    part(
                        DEVICE1,
                        CS1,
                        "4Gi",
                        binding=cond("IsPrepare", "BindingFailed"),
                        taints=[KEY1_TAINT],
                    ),
                    part(DEVICE2, CS1, "4Gi"),
                ),
                counters(SLICE2, NODE1, p2, counter_set(CS1, {"memory": "8Gi"})),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(
                        REQ0,
                        DRIVER_A,
                        POOL1,
                        DEVICE1,
                        False,
                        TOL_KEY1,
                        binding=cond("IsPrepare", "BindingFailed"),
                    ),
                    result(REQ0, DRIVER_A, POOL1, DEVICE2, False, TOL_KEY1),
                )
            ],
        ),
        Case(
            "allocation-mode-all-with-multi-host-resource-pool",
            claims=[claim(CLAIM0, all_request(REQ0, CLASS_A))],
            classes=cls_a,
            slices=[
                slice_(SLICE1, NODE1, p2, DRIVER_A, d1),
                slice_(SLICE2, NODE2, p2, DRIVER_A, d2),
            ],
            node=N1,
            expect=[allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1))],
        ),
        Case(
            "multi-host-resource-pool-with-stale-slice-for-current-node",
            claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes=cls_a,
            slices=[gen_slice(SLICE1, NODE1, 1, d1), gen_slice(SLICE2, NODE2, 2, d2)],
            node=N1,
        ),
        Case(
            "multi-host-resource-pool-complete-update-from-node-1-to-node-2",
            claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes=cls_a,
            slices=[
                gen_slice(SLICE1, NODE1, 1, d1),
                gen_slice(SLICE1, NODE1, 1, d2),
                gen_slice(SLICE2, NODE2, 2, d1),
                gen_slice(SLICE2, NODE2, 2, d2),
            ],
            node=N1,
            expect=[allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1))],
        ),
        Case(
            "multi-host-resource-pool-complete-update-from-node-2-to-node-1",
            claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes=cls_a,
            slices=[
                gen_slice(SLICE1, NODE2, 1, d1),
                gen_slice(SLICE1, NODE2, 1, d2),
                gen_slice(SLICE2, NODE1, 2, d1),
                gen_slice(SLICE2, NODE1, 2, d2),
            ],
            node=N1,
            expect=[allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1))],
        ),
        Case(
            "multi-host-resource-pool-incomplete-update-from-node-1-to-node-2",
            claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes=cls_a,
            slices=[
                gen_slice(SLICE1, NODE1, 1, d1),
                gen_slice(SLICE1, NODE1, 1, d2),
                gen_slice(SLICE2, NODE2, 2, d1),
            ],
            node=N1,
            expect=[allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE1))],
        ),
        Case(
            "multi-host-resource-pool-incomplete-update-from-node-2-to-node-1",
            claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes=cls_a,
            slices=[
                gen_slice(SLICE1, NODE2, 1, d1),
                gen_slice(SLICE1, NODE2, 1, d2),
                gen_slice(SLICE2, NODE1, 2, d1),
            ],
            node=N1,
        ),
        Case(
            "partitionable-devices-same-counter-set-name-in-different-resource-slices",
            features=PD,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=cls_a,
            slices=[
                slice_(SLICE1, NODE1, pool(POOL1, 4), DRIVER_A, d1),
                counters(SLICE2, NODE1, pool(POOL1, 4), counter_set(CS1, {})),
                slice_(SLICE3, NODE1, pool(POOL1, 4), DRIVER_A, d2),
                counters(SLICE4, NODE1, pool(POOL1, 4), counter_set(CS1, {})),
            ],
            node=N1,
            error="invalid resource pools were encountered",
        ),
        Case(
            "partitionable-devices-device-counter-consumption-references-unknown-counter-set",
            features=PD,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=cls_a,
            slices=[
                slice_(SLICE1, NODE1, p2, DRIVER_A, device(DEVICE1, consumes=[consumes(CS2, {})])),
                counters(SLICE2, NODE1, p2, counter_set(CS1, {})),
            ],
            node=N1,
            error="invalid resource pools were encountered",
        ),
        Case(
            "partitionable-devices-device-counter-consumption-references-unknown-counter-in-counter-set",
            features=PD,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    p2,
                    DRIVER_A,
                    device(DEVICE1, consumes=[consumes(CS1, {"memory": "8Gi"})]),
                ),
                counters(SLICE2, NODE1, p2, counter_set(CS1, {"other-memory": "8Gi"})),
            ],
            node=N1,
            error="invalid resource pools were encountered",
        ),
        Case(
            "partitionable-devices-device-counter-consumption-references-counter-set-in-other-pool",
            features=PD,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, consumes=[consumes(CS1, {"memory": "8Gi"})]),
                ),
                counters(SLICE2, NODE1, POOL2, counter_set(CS1, {"memory": "8Gi"})),
            ],
            node=N1,
            error="invalid resource pools were encountered",
        ),
        Case(
            "partitionable-devices-devices-on-different-nodes-consume-same-counter-set",
            features=features(partitionable_devices=True, prioritized_list=True),
            claims=[
                claim(
                    CLAIM0,
                    prioritized(
                        REQ0,
                        sub_request(SUBREQ0, CLASS_A, 1, MEM.format("6Gi")),
                        sub_request(SUBREQ1, CLASS_A, 1, MEM.format("2Gi")),
                    ),
                )
            ],
            classes=cls_a,
            slices=[
                counters(SLICE1, NODE1, pool(POOL1, 3), counter_set(CS1, {"memory": "8Gi"})),
                slice_(
                    SLICE2,
                    NODE1,
                    pool(POOL1, 3),
                    DRIVER_A,
                    part(DEVICE1, CS1, "6Gi"),
                    part(DEVICE2, CS1, "2Gi"),
                ),
                slice_(
                    SLICE3,
                    NODE2,
                    pool(POOL1, 3),
                    DRIVER_A,
                    device(DEVICE3, consumes=[consumes(CS1, {"memory": "6Gi"})]),
                ),
            ],
            allocated=[dev_id(DRIVER_A, POOL1, DEVICE3)],
            node=N1,
            expect=[allocation(LOCAL1, result("req-0/subReq-1", DRIVER_A, POOL1, DEVICE2))],
        ),
        Case(
            "partitionable-devices-validation-error-on-non-targeting-slice",
            features=PD,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=cls_a,
            slices=[
                counters(SLICE1, NODE1, pool(POOL1, 3), counter_set(CS1, {"memory": "8Gi"})),
                slice_(SLICE2, NODE1, pool(POOL1, 3), DRIVER_A, part(DEVICE1, CS1, "6Gi")),
                slice_(
                    SLICE3,
                    NODE2,
                    pool(POOL1, 3),
                    DRIVER_A,
                    device(DEVICE3, consumes=[consumes(CS2, {"memory": "6Gi"})]),
                ),
            ],
            node=N1,
            error="invalid resource pools were encountered",
        ),
        Case(
            "different-resourceslices-in-pool-can-target-different-nodes",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=cls_a,
            slices=[
                slice_(SLICE1, NODE2, p2, DRIVER_A, d1),
                slice_(SLICE2, NODE1, p2, DRIVER_A, d2),
            ],
            node=N1,
            expect=[allocation(LOCAL1, result(REQ0, DRIVER_A, POOL1, DEVICE2))],
        ),
        Case(
            "invalid-pool-is-ok-if-devices-can-be-allocated-from-other",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=cls_a,
            slices=[
                slice_(SLICE1, NODE1, p2, DRIVER_A, d1),
                slice_(SLICE2, NODE1, p2, DRIVER_A, d1),
                slice_(SLICE3, NODE1, pool(POOL2, 1), DRIVER_A, d2),
            ],
            node=N1,
            expect=[allocation(LOCAL1, result(REQ0, DRIVER_A, POOL2, DEVICE2))],
        ),
        Case(
            "invalid-pool-is-error-if-no-other-device-can-be-allocated",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=cls_a,
            slices=[
                slice_(SLICE1, NODE1, p2, DRIVER_A, d1),
                slice_(SLICE2, NODE1, p2, DRIVER_A, d1),
                slice_(SLICE3, NODE1, pool(POOL2, 1), DRIVER_A, d2),
            ],
            allocated=[dev_id(DRIVER_A, POOL2, DEVICE2)],
            node=N1,
            error="invalid resource pools were encountered",
        ),
        Case(
            "no-allocation-from-incomplete-pools",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=cls_a,
            slices=[slice_(SLICE1, NODE1, p2, DRIVER_A, d1)],
            node=N1,
        ),
        Case(
            "check-combinations-within-single-request-single-pool-single-slice",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 5))],
            classes=cls_a,
            slices=[
                slice_(SLICE1, NODE1, POOL1, DRIVER_A, d1, d2, device(DEVICE3), device(DEVICE4))
            ],
            node=N1,
            steps=16,
        ),
        Case(
            "check-combinations-within-single-request-single-pool-multiple-slices",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 5))],
            classes=cls_a,
            slices=[
                slice_(SLICE1, NODE1, p2, DRIVER_A, d1, d2),
                slice_(SLICE2, NODE1, p2, DRIVER_A, device(DEVICE3), device(DEVICE4)),
            ],
            node=N1,
            steps=16,
        ),
        Case(
            "check-combinations-within-single-request-multiple-pools-multiple-slices",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 5))],
            classes=cls_a,
            slices=[
                slice_(SLICE1, NODE1, p2, DRIVER_A, d1),
                slice_(SLICE2, NODE1, p2, DRIVER_A, d2),
                slice_(SLICE3, NODE1, POOL2, DRIVER_A, device(DEVICE3), device(DEVICE4)),
            ],
            node=N1,
            steps=16,
        ),
        Case(
            "check-combinations-within-single-request-many-pools",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 5))],
            classes=cls_a,
            slices=[
                slice_(SLICE1, NODE1, POOL1, DRIVER_A, d1),
                slice_(SLICE2, NODE1, POOL2, DRIVER_A, d2),
                slice_(SLICE3, NODE1, POOL3, DRIVER_A, device(DEVICE3)),
                slice_(SLICE4, NODE1, POOL4, DRIVER_A, device(DEVICE4)),
            ],
            node=N1,
            steps=16,
        ),
        Case(
            "check-combinations-with-backtracking",
            claims=[claim(CLAIM0, request(REQ1, CLASS_A, 2), request(REQ2, CLASS_A, 1, TYPE_X))],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, None, {"type": attr_s("X")}),
                    device(DEVICE2, None, {"type": attr_s("Y")}),
                    device(DEVICE3, None, {"type": attr_s("Y")}),
                )
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ1, DRIVER_A, POOL1, DEVICE2),
                    result(REQ1, DRIVER_A, POOL1, DEVICE3),
                    result(REQ2, DRIVER_A, POOL1, DEVICE1),
                )
            ],
            steps=12,
        ),
        Case(
            "check-combinations-with-backtracking-across-slices-and-pools",
            features=BINDING,
            claims=[claim(CLAIM0, request(REQ1, CLASS_A, 2), request(REQ2, CLASS_A, 1, TYPE_X))],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    pool(POOL1, 2),
                    DRIVER_A,
                    device(DEVICE1, None, {"type": attr_s("X")}),
                ),
                slice_(
                    SLICE2,
                    NODE1,
                    pool(POOL1, 2),
                    DRIVER_A,
                    device(DEVICE2, None, {"type": attr_s("Y")}),
                ),
                # The binding condition puts pool-2 after pool-1 in the search order.
                slice_(
                    SLICE3,
                    NODE1,
                    POOL2,
                    DRIVER_A,
                    device(DEVICE3, None, {"type": attr_s("Y")}, binding=(["IsPrepare"], [])),
                ),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ1, DRIVER_A, POOL1, DEVICE2),
                    result(REQ1, DRIVER_A, POOL2, DEVICE3, binding=(["IsPrepare"], [])),
                    result(REQ2, DRIVER_A, POOL1, DEVICE1),
                )
            ],
            steps=12,
        ),
        Case(
            "check-combinations-with-prioritized-list",
            features=features(prioritized_list=True),
            claims=[
                claim(
                    CLAIM0,
                    prioritized(
                        REQ1,
                        sub_request(
                            SUBREQ0, CLASS_A, 3, 'device.attributes["driver-a"].type == "Y"'
                        ),
                        sub_request(SUBREQ1, CLASS_A, 2),
                    ),
                    prioritized(
                        REQ2,
                        sub_request(SUBREQ0, CLASS_A, 2),
                        sub_request(SUBREQ1, CLASS_A, 1, TYPE_X),
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
                    *(
                        device(name, None, {"type": attr_s(kind)})
                        for name, kind in ((DEVICE1, "X"), (DEVICE2, "Y"), (DEVICE3, "Y"))
                    ),
                )
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result("req-1/subReq-1", DRIVER_A, POOL1, DEVICE2),
                    result("req-1/subReq-1", DRIVER_A, POOL1, DEVICE3),
                    result("req-2/subReq-1", DRIVER_A, POOL1, DEVICE1),
                )
            ],
            steps=26,
        ),
        Case(
            "partitionable-devices-with-binding-conditions-multiple",
            features=PD_BINDING,
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 2))],
            classes=cls_a,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    pool(POOL1, 2),
                    DRIVER_A,
                    part(DEVICE1, CS1, "4Gi", binding=cond("IsPrepare", "BindingFailed")),
                    part(DEVICE2, CS1, "4Gi", binding=cond("IsPrepare2", "BindingFailed2")),
                ),
                slice_(
                    SLICE2,
                    NODE1,
                    pool(POOL1, 2),
                    DRIVER_A,
                    counter_sets=[counter_set(CS1, {"memory": "8Gi"})],
                ),
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(
                        REQ0, DRIVER_A, POOL1, DEVICE1, binding=cond("IsPrepare", "BindingFailed")
                    ),
                    result(
                        REQ0, DRIVER_A, POOL1, DEVICE2, binding=cond("IsPrepare2", "BindingFailed2")
                    ),
                )
            ],
        ),
    ]
