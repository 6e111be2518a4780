"""Rows of 1.37's table (allocator_testing.go of k8s.io/dynamic-resource-allocation v0.37.2) for
its alpha features DRADeviceCompatibilityGroups, DRADerivedAttributes and
DRAOptionalNodeOperations, ported with the same names prefixed "137-".

1.36 has none of these features, so many rows answer the same as 1.36 (e.g. compatible devices
are allocated either way): unlike cases_137, they are not checked to answer otherwise as 1.36.
"""

from __future__ import annotations

from typing import Any

from operators.allocator import Features
from operators.allocator.features import V1_37
from operators.api.core import OPTIONAL_NODE_OPERATIONS
from operators.api.resource import ResourceSlice

from .builders import (
    CAPACITY0,
    CLAIM0,
    CLAIM1,
    CLASS_A,
    CLASS_B,
    COUNTER_SET1,
    COUNTER_SET2,
    DEVICE1,
    DEVICE2,
    DEVICE3,
    DEVICE4,
    DRIVER_A,
    DRIVER_B,
    FROM_COUNTERS,
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
    attr_i,
    attr_s,
    claim,
    claim_with_request,
    class_with_multi,
    consumes,
    counter_set,
    derived_attribute,
    dev_id,
    device,
    device_class,
    local_node_selector,
    match_attribute,
    node,
    pool,
    prioritized,
    request,
    result,
    slice_,
    slice_one,
    sub_request,
    with_skip_node_operations,
)

N1 = node(NODE1, REGION1)
LOCAL = local_node_selector(NODE1)
MIG, VGPU = "mig", "vgpu"
#: resourceapi.SkipNodeOperationAll.
SKIP_ALL = "*"
TAINT_NO_SCHEDULE: J = {"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}
EXAMPLE_DRIVER = "dra.example.com"


def features(**gates: bool) -> Features:
    """Only the named gates on, as the 1.37 allocator."""
    on: dict[str, Any] = dict(gates)
    return Features(**on, kubernetes=V1_37)


GROUPS = features(partitionable_devices=True, device_compatibility_groups=True)
GROUPS_OFF = features(partitionable_devices=True, device_compatibility_groups=False)
DERIVED = features(derived_attributes=True)


def _grouped(name: str, counter_set_: str, amount: int, *groups: str, **kw: Any) -> J:
    """A device drawing ``amount`` of capacity-0 from one counter set, in ``groups``."""
    return device(name, consumes=[consumes(counter_set_, {CAPACITY0: amount}, *groups)], **kw)


def _counters(name: str, count: int, *sets: str) -> ResourceSlice:
    """A slice of pool-1 (``count`` slices) on node-1 with counter sets of capacity-0 = 4."""
    return slice_(
        name,
        NODE1,
        pool(POOL1, count),
        DRIVER_A,
        counter_sets=[counter_set(s, {CAPACITY0: 4}) for s in sets],
    )


def _devices(*devices: J) -> ResourceSlice:
    """slice-1 of pool-1 (two slices) on node-1 with ``devices``."""
    return slice_(SLICE1, NODE1, pool(POOL1, 2), DRIVER_A, *devices)


def _two_requests() -> list[J]:
    return [request(REQ0, CLASS_A), request(REQ1, CLASS_A)]


def cases() -> list[Case]:
    return [*_compatibility_groups(), *_optional_node_operations(), *_derived_attributes()]


def _compatibility_groups() -> list[Case]:
    a_class = [device_class(CLASS_A, DRIVER_A)]
    return [
        Case(
            "137-compatibility-groups-compatible",
            claims=[claim(CLAIM0, *_two_requests())],
            classes=a_class,
            slices=[
                _devices(
                    _grouped(DEVICE1, COUNTER_SET1, 2, MIG),
                    _grouped(DEVICE2, COUNTER_SET1, 2, MIG),
                ),
                _counters(SLICE2, 2, COUNTER_SET1),
            ],
            node=N1,
            features=GROUPS,
            expect=[
                allocation(
                    LOCAL,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    result(REQ1, DRIVER_A, POOL1, DEVICE2),
                )
            ],
        ),
        Case(
            "137-compatibility-groups-incompatible",
            claims=[claim(CLAIM0, *_two_requests())],
            classes=a_class,
            slices=[
                _devices(
                    _grouped(DEVICE1, COUNTER_SET1, 2, MIG),
                    _grouped(DEVICE2, COUNTER_SET1, 2, VGPU),
                ),
                _counters(SLICE2, 2, COUNTER_SET1),
            ],
            node=N1,
            features=GROUPS,
        ),
        Case(
            "137-compatibility-groups-taint-rollback",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A))],
            classes=a_class,
            slices=[
                _devices(
                    _grouped(DEVICE1, COUNTER_SET1, 2, MIG, taints=[TAINT_NO_SCHEDULE]),
                    _grouped(DEVICE2, COUNTER_SET1, 2, VGPU),
                ),
                _counters(SLICE2, 2, COUNTER_SET1),
            ],
            node=N1,
            features=features(
                partitionable_devices=True, device_compatibility_groups=True, device_taints=True
            ),
            expect=[allocation(LOCAL, result(REQ0, DRIVER_A, POOL1, DEVICE2))],
        ),
        Case(
            "137-compatibility-groups-incompatible-with-allocated-peer",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A))],
            allocated=[dev_id(DRIVER_A, POOL1, DEVICE1)],
            classes=a_class,
            slices=[
                _devices(
                    _grouped(DEVICE1, COUNTER_SET1, 1, MIG),
                    _grouped(DEVICE2, COUNTER_SET1, 1, VGPU),
                ),
                _counters(SLICE2, 2, COUNTER_SET1),
            ],
            node=N1,
            features=GROUPS,
        ),
        Case(
            "137-compatibility-groups-compatible-with-allocated-peer",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A))],
            allocated=[dev_id(DRIVER_A, POOL1, DEVICE1)],
            classes=a_class,
            slices=[
                _devices(
                    _grouped(DEVICE1, COUNTER_SET1, 1, MIG),
                    _grouped(DEVICE2, COUNTER_SET1, 1, MIG),
                ),
                _counters(SLICE2, 2, COUNTER_SET1),
            ],
            node=N1,
            features=GROUPS,
            expect=[allocation(LOCAL, result(REQ0, DRIVER_A, POOL1, DEVICE2))],
        ),
        Case(
            "137-compatibility-groups-disabled-skips-grouped-pool",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A))],
            classes=a_class,
            slices=[
                _devices(_grouped(DEVICE1, COUNTER_SET1, 2, MIG)),
                _counters(SLICE2, 2, COUNTER_SET1),
                slice_(
                    SLICE3,
                    NODE1,
                    pool(POOL2, 2),
                    DRIVER_A,
                    _grouped(DEVICE2, COUNTER_SET2, 2),
                ),
                slice_(
                    SLICE4,
                    NODE1,
                    pool(POOL2, 2),
                    DRIVER_A,
                    counter_sets=[counter_set(COUNTER_SET2, {CAPACITY0: 4})],
                ),
            ],
            node=N1,
            features=GROUPS_OFF,
            expect=[allocation(LOCAL, result(REQ0, DRIVER_A, POOL2, DEVICE2))],
        ),
        Case(
            "137-compatibility-groups-disabled-skips-ungrouped-device-in-grouped-pool",
            claims=[claim(CLAIM0, request(REQ0, CLASS_A))],
            classes=a_class,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    pool(POOL1, 3),
                    DRIVER_A,
                    _grouped(DEVICE1, COUNTER_SET1, 1, MIG),
                ),
                slice_(
                    SLICE2,
                    NODE1,
                    pool(POOL1, 3),
                    DRIVER_A,
                    _grouped(DEVICE2, COUNTER_SET1, 1),
                ),
                _counters(SLICE3, 3, COUNTER_SET1),
            ],
            node=N1,
            features=GROUPS_OFF,
        ),
        Case(
            "137-compatibility-groups-multiple-counter-sets",
            claims=[claim(CLAIM0, *_two_requests())],
            classes=a_class,
            slices=[
                _devices(
                    _grouped(DEVICE1, COUNTER_SET1, 2, MIG),
                    _grouped(DEVICE2, COUNTER_SET2, 2, VGPU),
                ),
                _counters(SLICE2, 2, COUNTER_SET1, COUNTER_SET2),
            ],
            node=N1,
            features=GROUPS,
            expect=[
                allocation(
                    LOCAL,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    result(REQ1, DRIVER_A, POOL1, DEVICE2),
                )
            ],
        ),
        Case(
            "137-compatibility-groups-multiple-counter-sets-spanning-device",
            claims=[claim(CLAIM0, *_two_requests())],
            classes=a_class,
            slices=[
                _devices(
                    _grouped(DEVICE1, COUNTER_SET1, 1, MIG),
                    device(
                        DEVICE2,
                        consumes=[
                            consumes(COUNTER_SET1, {CAPACITY0: 1}, VGPU),
                            consumes(COUNTER_SET2, {CAPACITY0: 1}, VGPU),
                        ],
                    ),
                ),
                _counters(SLICE2, 2, COUNTER_SET1, COUNTER_SET2),
            ],
            node=N1,
            features=GROUPS,
        ),
        Case(
            "137-compatibility-groups-with-prioritized-list",
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A),
                    prioritized(
                        REQ1, sub_request(SUBREQ0, CLASS_A, 2), sub_request(SUBREQ1, CLASS_A)
                    ),
                )
            ],
            classes=a_class,
            slices=[
                _devices(
                    _grouped(DEVICE1, COUNTER_SET1, 1, MIG),
                    _grouped(DEVICE2, COUNTER_SET1, 1, MIG),
                    _grouped(DEVICE3, COUNTER_SET1, 1, VGPU),
                ),
                _counters(SLICE2, 2, COUNTER_SET1),
            ],
            node=N1,
            features=features(
                partitionable_devices=True, device_compatibility_groups=True, prioritized_list=True
            ),
            expect=[
                allocation(
                    LOCAL,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    result(f"{REQ1}/{SUBREQ1}", DRIVER_A, POOL1, DEVICE2),
                )
            ],
        ),
        Case(
            "137-compatibility-groups-with-consumable-capacity",
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, capacity="1"),
                    request(REQ1, CLASS_A, capacity="1"),
                )
            ],
            classes=[class_with_multi(CLASS_A, DRIVER_A, True)],
            slices=[
                _devices(
                    _from_counters(DEVICE1, MIG),
                    _from_counters(DEVICE2, VGPU),
                    _from_counters(DEVICE3, MIG),
                ),
                _counters(SLICE2, 2, COUNTER_SET1),
            ],
            node=N1,
            features=features(
                partitionable_devices=True,
                device_compatibility_groups=True,
                consumable_capacity=True,
            ),
            expect=[
                allocation(
                    LOCAL,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1, share=True, consumed={CAPACITY0: 1}),
                    result(REQ1, DRIVER_A, POOL1, DEVICE3, share=True, consumed={CAPACITY0: 1}),
                )
            ],
        ),
        Case(
            "137-compatibility-groups-multiple-claims",
            claims=[
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                claim_with_request(CLAIM1, REQ0, CLASS_A),
            ],
            classes=a_class,
            slices=[
                _devices(
                    _grouped(DEVICE1, COUNTER_SET1, 1, MIG),
                    _grouped(DEVICE2, COUNTER_SET1, 1, MIG),
                ),
                _counters(SLICE2, 2, COUNTER_SET1),
            ],
            node=N1,
            features=GROUPS,
            expect=[
                allocation(LOCAL, result(REQ0, DRIVER_A, POOL1, DEVICE1)),
                allocation(LOCAL, result(REQ0, DRIVER_A, POOL1, DEVICE2)),
            ],
        ),
        Case(
            "137-compatibility-groups-multiple-claims-incompatible",
            claims=[
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                claim_with_request(CLAIM1, REQ0, CLASS_A),
            ],
            classes=a_class,
            slices=[
                _devices(
                    _grouped(DEVICE1, COUNTER_SET1, 1, MIG),
                    _grouped(DEVICE2, COUNTER_SET1, 1, VGPU),
                ),
                _counters(SLICE2, 2, COUNTER_SET1),
            ],
            node=N1,
            features=GROUPS,
        ),
    ]


def _from_counters(name: str, group: str) -> J:
    """Upstream's ``fromCounters`` capacity: the device's capacity is what it consumes."""
    return device(
        name,
        FROM_COUNTERS,
        consumes=[consumes(COUNTER_SET1, {CAPACITY0: 1}, group)],
        multi=True,
    )


def _optional_node_operations() -> list[Case]:
    a_class = [device_class(CLASS_A, DRIVER_A)]
    skipping = with_skip_node_operations(slice_one(SLICE1, NODE1, POOL1, DRIVER_A), SKIP_ALL)
    return [
        Case(
            "137-optional-node-operations",
            claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes=a_class,
            slices=[skipping],
            node=node(NODE1, REGION1, OPTIONAL_NODE_OPERATIONS),
            features=features(optional_node_operations=True),
            expect=[
                allocation(
                    LOCAL,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1, skip_node_operations=[SKIP_ALL]),
                )
            ],
        ),
        Case(
            "137-optional-node-operations-missing-feature",
            claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes=a_class,
            slices=[skipping],
            node=N1,
            features=features(optional_node_operations=True),
            expect=[],
        ),
    ]


def _derived_attributes() -> list[Case]:
    ab_classes = [device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)]
    a_class = [device_class(CLASS_A, DRIVER_A)]
    return [
        Case(
            "137-derived-attributes",
            claims=[
                claim(
                    CLAIM0,
                    request(
                        REQ0,
                        CLASS_A,
                        derived=[
                            derived_attribute(
                                "derived/sharedNumaNode", f'device.attributes["{DRIVER_A}"]["numa"]'
                            )
                        ],
                    ),
                    request(
                        REQ1,
                        CLASS_B,
                        derived=[
                            derived_attribute(
                                "derived/sharedNumaNode",
                                f'device.attributes["{DRIVER_B}"]["numaNode"]',
                            )
                        ],
                    ),
                    constraints=[match_attribute("derived/sharedNumaNode", REQ0, REQ1)],
                )
            ],
            classes=ab_classes,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE2, None, {"numa": attr_s("numa-0")}),
                    device(DEVICE1, None, {"numa": attr_s("numa-1")}),
                ),
                slice_(
                    SLICE2,
                    NODE1,
                    POOL2,
                    DRIVER_B,
                    device(DEVICE3, None, {"numaNode": attr_s("numa-1")}),
                    device(DEVICE4, None, {"numaNode": attr_s("numa-2")}),
                ),
            ],
            node=N1,
            features=DERIVED,
            expect=[
                allocation(
                    LOCAL,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    result(REQ1, DRIVER_B, POOL2, DEVICE3),
                )
            ],
        ),
        Case(
            "137-derived-attributes-with-prioritized-list",
            claims=[
                claim(
                    CLAIM0,
                    prioritized(
                        REQ0,
                        sub_request(
                            SUBREQ0,
                            CLASS_A,
                            derived=[
                                derived_attribute(
                                    "derived/match", f'device.attributes["{DRIVER_A}"]["foo"]'
                                )
                            ],
                        ),
                        sub_request(
                            SUBREQ1,
                            CLASS_A,
                            derived=[
                                derived_attribute(
                                    "derived/match", f'device.attributes["{DRIVER_A}"]["bar"]'
                                )
                            ],
                        ),
                    ),
                    request(
                        REQ1,
                        CLASS_B,
                        derived=[
                            derived_attribute(
                                "derived/match", f'device.attributes["{DRIVER_B}"]["baz"]'
                            )
                        ],
                    ),
                    constraints=[match_attribute("derived/match", REQ0, REQ1)],
                )
            ],
            classes=ab_classes,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, None, {"foo": attr_s("A"), "bar": attr_s("B")}),
                ),
                slice_(SLICE2, NODE1, POOL2, DRIVER_B, device(DEVICE2, None, {"baz": attr_s("B")})),
            ],
            node=N1,
            features=features(derived_attributes=True, prioritized_list=True),
            expect=[
                allocation(
                    LOCAL,
                    result(f"{REQ0}/{SUBREQ1}", DRIVER_A, POOL1, DEVICE1),
                    result(REQ1, DRIVER_B, POOL2, DEVICE2),
                )
            ],
        ),
        Case(
            "137-derived-attributes-override",
            claims=[
                claim(
                    CLAIM0,
                    request(
                        REQ0,
                        CLASS_A,
                        derived=[derived_attribute(f"{EXAMPLE_DRIVER}/myAttr", '"value-2"')],
                    ),
                    request(REQ1, CLASS_A),
                    constraints=[match_attribute(f"{EXAMPLE_DRIVER}/myAttr", REQ0, REQ1)],
                )
            ],
            classes=[device_class(CLASS_A, EXAMPLE_DRIVER)],
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    EXAMPLE_DRIVER,
                    device(DEVICE1, None, {"myAttr": attr_s("value-1")}),
                    device(DEVICE2, None, {"myAttr": attr_s("value-2")}),
                )
            ],
            node=N1,
            features=DERIVED,
            expect=[
                allocation(
                    LOCAL,
                    result(REQ0, EXAMPLE_DRIVER, POOL1, DEVICE1),
                    result(REQ1, EXAMPLE_DRIVER, POOL1, DEVICE2),
                )
            ],
        ),
        Case(
            "137-derived-attributes-cel-missing-attribute",
            claims=[
                claim(
                    CLAIM0,
                    request(
                        REQ0,
                        CLASS_A,
                        derived=[
                            derived_attribute(
                                "derived/missing", f'device.attributes["{DRIVER_A}"]["missingAttr"]'
                            )
                        ],
                    ),
                    constraints=[match_attribute("derived/missing", REQ0)],
                )
            ],
            classes=a_class,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, None, {"existingAttr": attr_s("yes")}),
                )
            ],
            node=N1,
            features=DERIVED,
            error="no such key: missingAttr",
        ),
        Case(
            "137-derived-attributes-type-mismatch",
            claims=[
                claim(
                    CLAIM0,
                    request(
                        REQ0,
                        CLASS_A,
                        2,
                        derived=[
                            derived_attribute(
                                "derived/myAttr", f'device.attributes["{DRIVER_A}"]["static"]'
                            )
                        ],
                    ),
                    constraints=[match_attribute("derived/myAttr", REQ0)],
                )
            ],
            classes=a_class,
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, None, {"static": attr_s("value")}),
                    device(DEVICE2, None, {"static": attr_i(1)}),
                )
            ],
            node=N1,
            features=DERIVED,
        ),
    ]
