"""Our rows (differential-test findings, issue behaviour) and the result-limit rows."""

from __future__ import annotations

from .builders import (
    CLAIM0,
    CLASS_A,
    CLASS_B,
    DEVICE1,
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
    SUBREQ0,
    SUBREQ1,
    Case,
    allocation,
    claim,
    device,
    device_class,
    features,
    local_node_selector,
    node,
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
    ]
