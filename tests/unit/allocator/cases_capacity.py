"""Upstream table, part 6: consumable capacity (KEP-5075) on shareable devices."""

from __future__ import annotations

from operators.api.resource import ResourceClaim, ResourceSlice

from .builders import (
    CAPACITY0,
    CLAIM0,
    CLAIM1,
    CLASS_A,
    DEVICE1,
    DEVICE2,
    DRIVER_A,
    NODE1,
    POOL1,
    REGION1,
    REQ0,
    SLICE1,
    SUBREQ0,
    SUBREQ1,
    Case,
    J,
    all_request,
    allocation,
    claim,
    class_with_multi,
    dev_id,
    device,
    device_class,
    features,
    local_node_selector,
    node,
    policy_range,
    policy_values,
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


def share(req: str, dev: str, **consumed: int) -> J:
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
    ]
