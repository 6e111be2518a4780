"""Our rows (differential-test findings, issue behaviour) and the result-limit rows."""

from __future__ import annotations

from operators.api.resource import DeviceClass, ResourceSlice

from .builders import (
    CLAIM0,
    CLASS_A,
    CLASS_B,
    DEVICE1,
    DEVICE2,
    DRIVER_A,
    DRIVER_B,
    NODE1,
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
    allocation,
    claim,
    class_with_selectors,
    consumes,
    counter_set,
    device,
    device_class,
    features,
    local_node_selector,
    node,
    pool,
    prioritized,
    request,
    result,
    results_many,
    slice_,
    slice_many,
    sub_request,
)

N1 = node(NODE1, REGION1)


def cases() -> list[Case]:
    listed = slice_(
        SLICE1,
        NODE1,
        POOL1,
        DRIVER_A,
        device(DEVICE1, None, {"numa": {"int": 0}, "links": {"strings": ["p"]}}),
    )
    return [
        # Found by test_differential: without DRAListTypeAttributes upstream cannot build the
        # CEL device of a device with list attributes, which aborts the attempt.
        Case(
            "regression-list-attribute-without-gate-is-cel-error",
            features=features(device_taints=True),
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=[device_class(CLASS_A, DRIVER_A)],
            slices=[listed],
            node=N1,
            error="class class-a: selector #0: CEL runtime error: attribute links: "
            "unsupported attribute value",
        ),
        Case(
            "regression-list-attribute-with-gate-is-fine",
            features=features(list_type_attributes=True),
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=[device_class(CLASS_A, DRIVER_A)],
            slices=[listed],
            node=N1,
            expect=[allocation(local_node_selector(NODE1), result(REQ0, DRIVER_A, POOL1, DEVICE1))],
        ),
        # Upstream rows about the per-claim result limit (same names and expectations).
        Case(
            "max-number-devices",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 32))],
            classes=[device_class(CLASS_A, DRIVER_A)],
            slices=[slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 32)],
            node=N1,
            expect=[
                allocation(local_node_selector(NODE1), *results_many(REQ0, DRIVER_A, POOL1, 32))
            ],
        ),
        Case(
            "prioritized-list-max-allocation-limit-request",
            features=features(prioritized_list=True),
            claims=[
                claim(
                    CLAIM0,
                    prioritized(
                        REQ0, sub_request(SUBREQ0, CLASS_A, 32), sub_request(SUBREQ1, CLASS_A, 16)
                    ),
                    prioritized(
                        REQ1, sub_request(SUBREQ0, CLASS_A, 32), sub_request(SUBREQ1, CLASS_A, 16)
                    ),
                )
            ],
            classes=[device_class(CLASS_A, DRIVER_A)],
            slices=[slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 64)],
            node=N1,
            expect=[
                allocation(
                    local_node_selector(NODE1),
                    *results_many("req-0/subReq-1", DRIVER_A, POOL1, 16, 0),
                    *results_many("req-1/subReq-1", DRIVER_A, POOL1, 16, 16),
                )
            ],
            steps=75,
        ),
        Case(
            "prioritized-list-max-allocation-allocation-mode-all",
            features=features(prioritized_list=True),
            claims=[
                claim(
                    CLAIM0,
                    prioritized(
                        REQ0,
                        sub_request(SUBREQ0, CLASS_A, mode="All"),
                        sub_request(SUBREQ1, CLASS_A, 2),
                    ),
                    request(REQ1, CLASS_B, 2),
                )
            ],
            classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
            slices=[
                slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 31),
                slice_many(SLICE2, NODE1, POOL2, DRIVER_B, 2),
            ],
            node=N1,
            expect=[
                allocation(
                    local_node_selector(NODE1),
                    *results_many("req-0/subReq-1", DRIVER_A, POOL1, 2),
                    *results_many(REQ1, DRIVER_B, POOL2, 2),
                )
            ],
            steps=42,
        ),
        Case(
            "empty-request-list-allocates-nothing",
            claims=[claim(CLAIM0)],
            classes=[device_class(CLASS_A, DRIVER_A)],
            node=N1,
            expect=[allocation(None)],
        ),
        *_gates_and_scopes(),
    ]


def _gates_and_scopes() -> list[Case]:
    """Behaviour checked against the oracle that the upstream table does not pin down."""
    local = local_node_selector(NODE1)
    p2 = pool(POOL1, 2)

    def selecting(*expressions: str) -> list[DeviceClass]:
        return [class_with_selectors(CLASS_A, *expressions)]

    def two_drivers(set_b: str) -> list[ResourceSlice]:
        """driver-a/pool-1 and driver-b/pool-1, each with its own one-unit counter set."""

        def part(name: str, set_name: str) -> J:
            return device(name, consumes=[consumes(set_name, {"c": 1})])

        return [
            slice_(SLICE1, NODE1, p2, DRIVER_A, part(DEVICE1, "cs")),
            slice_(SLICE2, NODE1, p2, DRIVER_A, counter_sets=[counter_set("cs", {"c": 1})]),
            slice_(SLICE3, NODE1, p2, DRIVER_B, part(DEVICE1, set_b), part(DEVICE2, set_b)),
            slice_(SLICE4, NODE1, p2, DRIVER_B, counter_sets=[counter_set(set_b, {"c": 1})]),
        ]

    both = [device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)]
    return [
        # The scheduler compiles selectors in upstream's "stored expressions" environment,
        # which ignores the feature gates: the DRAConsumableCapacity and DRAListTypeAttributes
        # gates only restrict new expressions at API validation, not allocation.
        Case(
            "regression-allow-multiple-allocations-selector-without-gate",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=selecting("device.allowMultipleAllocations == false"),
            slices=[slice_(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1))],
            node=N1,
            expect=[allocation(local, result(REQ0, DRIVER_A, POOL1, DEVICE1))],
        ),
        Case(
            "regression-includes-on-scalar-without-list-gate",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=selecting('device.attributes["driver-a"].model.includes("x")'),
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, None, {"model": {"string": "x"}}),
                )
            ],
            node=N1,
            expect=[allocation(local, result(REQ0, DRIVER_A, POOL1, DEVICE1))],
        ),
        # Counter sets belong to their (driver, pool). v0.36.3 keys its counter caches by the
        # pool name alone (kubernetes#140434), so there driver-b's devices are checked
        # against driver-a's counter set and this claim does not fit; the fix
        # (kubernetes#140435, backported to release-1.36 as #140504) gives this result, which
        # kopf-dra gives as 1.36 too (its one deliberate difference from v0.36.3, which the
        # 1.36 differential run avoids by naming pools apart). v0.37.2 keys them by pool ID:
        # the 1.37 run draws one pool name for two drivers.
        Case(
            "regression-counter-sets-scoped-per-driver-and-pool",
            features=features(partitionable_devices=True),
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1), request(REQ1, CLASS_B, 1))],
            classes=both,
            slices=two_drivers("cs"),
            node=N1,
            expect=[
                allocation(
                    local,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    result(REQ1, DRIVER_B, POOL1, DEVICE1),
                )
            ],
        ),
        # ... and driver-b's own counter set still limits driver-b's devices (v0.36.3 would
        # check them against driver-a's "cs" only and over-commit "cs-b").
        Case(
            "regression-counter-sets-not-crossed-between-drivers",
            features=features(partitionable_devices=True),
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1), request(REQ1, CLASS_B, 2))],
            classes=both,
            slices=two_drivers("cs-b"),
            node=N1,
        ),
    ]
