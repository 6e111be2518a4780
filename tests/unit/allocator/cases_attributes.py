"""Upstream table, part 7: distinctAttribute and list-typed attributes (DRAListTypeAttributes)."""

from __future__ import annotations

from operators.allocator import Features
from operators.api.resource import ResourceClaim, ResourceSlice

from .builders import (
    CLAIM0,
    CLASS_A,
    DEVICE1,
    DEVICE2,
    DEVICE3,
    DEVICE4,
    DRIVER_A,
    NODE1,
    POOL1,
    REGION1,
    REQ0,
    REQ1,
    REQ2,
    REQ3,
    SLICE1,
    SUBREQ0,
    SUBREQ1,
    Case,
    J,
    allocation,
    claim,
    class_with_multi,
    device,
    device_class,
    distinct_attribute,
    features,
    local_node_selector,
    match_attribute,
    node,
    policy_range,
    pool,
    prioritized,
    request,
    result,
    slice_,
    sub_request,
)

N1 = node(NODE1, REGION1)
LOCAL1 = local_node_selector(NODE1)
LT = features(list_type_attributes=True)
LT_CC = features(list_type_attributes=True, consumable_capacity=True)
STRING = "driver-a/stringAttribute"


def devices_with(key: str, *values: J) -> list[ResourceSlice]:
    return [
        slice_(
            SLICE1,
            NODE1,
            POOL1,
            DRIVER_A,
            *(device(f"device-{i + 1}", None, {key: v}) for i, v in enumerate(values)),
        )
    ]


def strs(*v: str) -> J:
    return {"strings": list(v)}


def one(v: str) -> J:
    return {"string": v}


def pick(*devs: str) -> list[J]:
    return [allocation(LOCAL1, *(result(REQ0, DRIVER_A, POOL1, d) for d in devs))]


def constrained(kind: str, attr: str, count: int) -> list[ResourceClaim]:
    c = match_attribute(attr) if kind == "match" else distinct_attribute(attr)
    return [claim(CLAIM0, request(REQ0, CLASS_A, count), constraints=[c])]


def case(
    name: str,
    kind: str,
    attr: str,
    count: int,
    key: str,
    *values: J,
    expect: list[J] | None = None,
    error: str | None = None,
    gates: Features | None = None,
) -> Case:
    return Case(
        name,
        features=gates if gates is not None else (LT if kind == "match" else LT_CC),
        claims=constrained(kind, attr, count),
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=devices_with(key, *values),
        node=N1,
        expect=expect,
        error=error,
    )


def cases() -> list[Case]:
    m, d = "match", "distinct"
    s = "stringAttribute"
    return [
        case(
            "list-attributes-match-constaint-scalar-string-values",
            m,
            STRING,
            2,
            s,
            one("value1"),
            one("value1"),
            expect=pick(DEVICE1, DEVICE2),
        ),
        case(
            "list-attributes-match-constaint-list-of-string-values-with-common-elements",
            m,
            STRING,
            2,
            s,
            strs("value1", "value2", "value3"),
            strs("value2", "value3", "value4"),
            expect=pick(DEVICE1, DEVICE2),
        ),
        case(
            "list-attributes-match-constaint-list-of-string-values-with-partially-common-elements",
            m,
            STRING,
            3,
            s,
            strs("value1", "value2"),
            strs("value2", "value3"),
            strs("value3", "value1"),
        ),
        case(
            "list-attributes-match-constaint-mixed-scalar-and-list-of-string-values-with-"
            "common-elements",
            m,
            STRING,
            2,
            s,
            one("value1"),
            strs("value1", "value2"),
            expect=pick(DEVICE1, DEVICE2),
        ),
        case(
            "list-attributes-match-constaint-mixed-scalar-and-list-of-string-values-with-"
            "partially-common-elements",
            m,
            STRING,
            3,
            s,
            one("value1"),
            strs("value1", "value2"),
            strs("value2", "value3"),
        ),
        case(
            "list-attributes-match-constaint-mixed-scalar-and-list-of-string-values-without-"
            "common-elements",
            m,
            STRING,
            2,
            s,
            one("value1"),
            strs("value2", "value3"),
        ),
        case(
            "list-attributes-match-constaint-list-of-int-values-with-common-elements",
            m,
            "driver-a/numa",
            2,
            "numa",
            {"ints": [0, 1, 2]},
            {"ints": [1, 2, 3]},
            expect=pick(DEVICE1, DEVICE2),
        ),
        case(
            "list-attributes-match-constaint-list-of-bool-values-with-common-elements",
            m,
            "driver-a/boolAttribute",
            2,
            "boolAttribute",
            {"bools": [True, False]},
            {"bools": [True]},
            expect=pick(DEVICE1, DEVICE2),
        ),
        case(
            "list-attributes-match-constaint-list-of-version-values-with-common-elements",
            m,
            "driver-a/driverVersion",
            2,
            "driverVersion",
            {"versions": ["1.0.0", "1.1.0", "2.0.0"]},
            {"versions": ["1.1.0", "2.0.0", "2.1.0"]},
            expect=pick(DEVICE1, DEVICE2),
        ),
        case(
            "list-attributes-match-constaint-with-empty-or-unknown-type",
            m,
            STRING,
            2,
            s,
            {},
            strs(),
            error="unsupported attribute value",
        ),
        case(
            "list-attributes-disabled-match-constraint-with-lists",
            m,
            STRING,
            2,
            s,
            strs("value1", "value2", "value3"),
            strs("value2", "value3", "value4"),
            gates=features(),
            error="unsupported attribute value",
        ),
        case(
            "list-attributes-distinct-constraint-scalar-string-values-all-distinct",
            d,
            STRING,
            2,
            s,
            one("value1"),
            one("value2"),
            expect=pick(DEVICE1, DEVICE2),
        ),
        case(
            "list-attributes-distinct-constraint-scalar-string-values-not-distinct",
            d,
            STRING,
            2,
            s,
            one("value1"),
            one("value1"),
        ),
        case(
            "list-attributes-distinct-constraint-list-of-string-values-all-distinct",
            d,
            STRING,
            2,
            s,
            strs("value1", "value2"),
            strs("value2", "value3"),
            strs("value3", "value4"),
            expect=pick(DEVICE1, DEVICE3),
        ),
        case(
            "list-attributes-distinct-constraint-list-of-string-values-with-common-elements",
            d,
            STRING,
            2,
            s,
            strs("value1", "value2", "value3"),
            strs("value2", "value4", "value5"),
        ),
        Case(
            # Upstream's row has two requests, both named req-0.
            "list-attributes-match-constaint-list-of-string-values-without-common-elements",
            features=LT,
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 1),
                    request(REQ0, CLASS_A, 1),
                    constraints=[match_attribute(STRING)],
                )
            ],
            classes=[device_class(CLASS_A, DRIVER_A)],
            slices=devices_with(s, strs("value1", "value2"), strs("value3", "value4")),
            node=N1,
        ),
        case(
            "list-attributes-distinct-constraint-mixed-scalar-and-list-all-distinct",
            d,
            STRING,
            2,
            s,
            one("value1"),
            strs("value1", "value2"),
            strs("value2", "value3"),
            expect=pick(DEVICE1, DEVICE3),
        ),
        case(
            "list-attributes-distinct-constraint-mixed-scalar-and-list-with-common-elements",
            d,
            STRING,
            2,
            s,
            one("value1"),
            strs("value1", "value2"),
        ),
        case(
            "list-attributes-distinct-constraint-list-of-int-values-all-distinct",
            d,
            "driver-a/numa",
            2,
            "numa",
            {"ints": [0, 1]},
            {"ints": [1, 2]},
            {"ints": [2, 3]},
            expect=pick(DEVICE1, DEVICE3),
        ),
        case(
            "list-attributes-distinct-constraint-list-of-bool-values-all-distinct",
            d,
            "driver-a/boolAttribute",
            2,
            "boolAttribute",
            {"bools": [True]},
            {"bools": [True, False]},
            {"bools": [False]},
            expect=pick(DEVICE1, DEVICE3),
        ),
        case(
            "list-attributes-distinct-constraint-list-of-version-values-all-distinct",
            d,
            "driver-a/driverVersion",
            2,
            "driverVersion",
            {"versions": ["1.0.0", "1.1.0"]},
            {"versions": ["1.1.0", "2.0.0"]},
            {"versions": ["2.0.0", "2.1.0"]},
            expect=pick(DEVICE1, DEVICE3),
        ),
        case(
            "list-attributes-distinct-constaint-with-empty-or-unknown-type",
            d,
            "driver-a/driverVersion",
            2,
            "driverVersion",
            {"versions": []},
            {},
            error="unsupported attribute value",
        ),
        case(
            "list-attributes-disabled-distinct-constraint-with-lists",
            d,
            STRING,
            2,
            s,
            strs("value1", "value2", "value3"),
            strs("value2", "value3", "value4"),
            gates=features(consumable_capacity=True),
            error="unsupported attribute value",
        ),
        *_distinct_constraints(),
        Case(
            "with-distinct-constraints-attribute-not-set",
            features=features(consumable_capacity=True),
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 1),
                    constraints=[distinct_attribute("driver-a/boolAttribute", REQ0)],
                )
            ],
            classes=[device_class(CLASS_A, DRIVER_A)],
            slices=[slice_(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1, multi=True))],
            node=N1,
        ),
        Case(
            "with-distinct-constraints-unknown-type-attribute",
            features=features(consumable_capacity=True),
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 1),
                    constraints=[distinct_attribute("driver-a/boolAttribute", REQ0)],
                )
            ],
            classes=[device_class(CLASS_A, DRIVER_A)],
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, None, {"boolAttribute": {}}, multi=True),
                )
            ],
            node=N1,
            error="unsupported attribute value",
        ),
        Case(
            "distinct-constraint-one-multi-allocatable-device-with-distinct-constraint",
            features=features(consumable_capacity=True),
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 1, capacity="1"),
                    request(REQ1, CLASS_A, 1, capacity="1"),
                    constraints=[distinct_attribute(STRING)],
                )
            ],
            classes=[class_with_multi(CLASS_A, DRIVER_A, True)],
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(
                        DEVICE1,
                        None,
                        {s: one("stringAttributeValue")},
                        multi=True,
                        capacity_policies={"capacity-0": policy_range(2)},
                    ),
                )
            ],
            node=N1,
        ),
        Case(
            "distinct-constraint-two-multi-allocatable-devices-with-distinct-constraint",
            features=features(consumable_capacity=True),
            claims=[
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 1, capacity="2"),
                    request(REQ1, CLASS_A, 1, capacity="2"),
                    constraints=[distinct_attribute(STRING)],
                )
            ],
            classes=[class_with_multi(CLASS_A, DRIVER_A, True)],
            slices=[
                slice_(
                    SLICE1,
                    NODE1,
                    pool(POOL1, 2),
                    DRIVER_A,
                    device(
                        name,
                        None,
                        {s: one(value)},
                        multi=True,
                        capacity_policies={"capacity-0": policy_range(4)},
                    ),
                )
                for name, value in (
                    (DEVICE1, "stringAttributeValue1"),
                    (DEVICE2, "stringAttributeValue2"),
                )
            ],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    result(REQ0, DRIVER_A, POOL1, DEVICE1, share=True, consumed={"capacity-0": 2}),
                    result(REQ1, DRIVER_A, POOL1, DEVICE2, share=True, consumed={"capacity-0": 2}),
                )
            ],
        ),
    ]


def _distinct_constraints() -> list[Case]:
    """Several distinctAttribute constraints over shareable devices (no capacity)."""
    bool_attr, version, numa = (
        "driver-a/boolAttribute",
        "driver-a/driverVersion",
        "driver-a/numa",
    )
    is_true = 'device.attributes["driver-a"].boolAttribute'

    def shared(req: str, dev: str) -> J:
        return result(req, DRIVER_A, POOL1, dev, share=True)

    four = [
        device(
            name,
            None,
            {
                "driverVersion": {"version": v},
                "numa": {"int": n},
                "boolAttribute": {"bool": b},
            },
            multi=True,
        )
        for name, v, n, b in (
            (DEVICE1, "1.0.0", 0, True),
            (DEVICE2, "1.0.1", 1, False),
            (DEVICE3, "1.0.2", 2, True),
            (DEVICE4, "1.0.0", 3, True),
        )
    ]
    two = [
        device(name, None, {"boolAttribute": {"bool": b}}, multi=True)
        for name, b in ((DEVICE1, True), (DEVICE2, False))
    ]

    def choice(name: str) -> J:
        return prioritized(
            name, sub_request(SUBREQ0, CLASS_A, 1, is_true), sub_request(SUBREQ1, CLASS_A, 1)
        )

    return [
        Case(
            "with-distinct-constraints",
            features=features(consumable_capacity=True),
            claims=[
                claim(
                    CLAIM0,
                    *(request(r, CLASS_A, 1) for r in (REQ0, REQ1, REQ2, REQ3)),
                    constraints=[
                        distinct_attribute(bool_attr, REQ0, REQ1),
                        distinct_attribute(version, REQ0, REQ1, REQ2),
                        distinct_attribute(numa, REQ0, REQ1, REQ2, REQ3),
                    ],
                )
            ],
            classes=[device_class(CLASS_A, DRIVER_A)],
            slices=[slice_(SLICE1, NODE1, POOL1, DRIVER_A, *four)],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    shared(REQ0, DEVICE1),
                    shared(REQ1, DEVICE2),
                    shared(REQ2, DEVICE3),
                    shared(REQ3, DEVICE4),
                )
            ],
        ),
        Case(
            "with-distinct-constraints-with-subrequests",
            features=features(consumable_capacity=True, prioritized_list=True),
            claims=[
                claim(
                    CLAIM0,
                    choice(REQ0),
                    choice(REQ1),
                    choice(REQ2),
                    constraints=[distinct_attribute(bool_attr, REQ0, REQ1)],
                )
            ],
            classes=[device_class(CLASS_A, DRIVER_A)],
            slices=[slice_(SLICE1, NODE1, POOL1, DRIVER_A, *two)],
            node=N1,
            expect=[
                allocation(
                    LOCAL1,
                    shared(f"{REQ0}/{SUBREQ0}", DEVICE1),
                    shared(f"{REQ1}/{SUBREQ1}", DEVICE2),
                    shared(f"{REQ2}/{SUBREQ0}", DEVICE1),
                )
            ],
        ),
    ]
