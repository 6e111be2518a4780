"""Rows for the allocator of Kubernetes 1.38 (pre-release v1.38.0-beta.0) where it parts from
1.37's (k8s.io/dynamic-resource-allocation v0.38.0-beta.0, structured/internal): each row comes
twice, as 1.38 with 1.38's answer and as 1.37 ("-as-137") with 1.37's, so that a switch on the
release that breaks either way is caught (test_upstream_table.py also checks that the two
answers differ). Most are 1.38's own new rows of allocator_testing.go, ported with their names;
the derived-list rows come from the differential run against the 1.38 oracle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from operators.allocator import Features
from operators.allocator.features import V1_37, V1_38
from operators.api.resource import ResourceSlice

from .builders import (
    CAPACITY0,
    CAPACITY1,
    CLAIM0,
    CLASS_A,
    DEVICE1,
    DEVICE2,
    DEVICE3,
    DRIVER_A,
    NODE1,
    POOL1,
    REGION1,
    REQ0,
    SLICE1,
    Case,
    J,
    allocation,
    attr_s,
    attr_v,
    claim,
    class_with_multi,
    dev_id,
    device,
    device_class,
    distinct_attribute,
    local_node_selector,
    match_attribute,
    node,
    request,
    result,
    slice_,
)

N1 = node(NODE1, REGION1)
LOCAL = local_node_selector(NODE1)
VERSION = f"{DRIVER_A}/driverVersion"
STRING = f"{DRIVER_A}/stringAttribute"
QUALIFIED0 = f"{DRIVER_A}/{CAPACITY0}"


@dataclasses.dataclass(frozen=True)
class Answer:
    """What one release says: results (None: none fit) or an error's words."""

    expect: Sequence[J] | None = None
    error: str | None = None


NONE = Answer()


def _pair(
    name: str, gates: Mapping[str, bool], as_138: Answer, as_137: Answer, **kw: Any
) -> list[Case]:
    """The row as 1.38 and as 1.37, each with its release's answer."""
    on: dict[str, Any] = dict(gates)  # bool fields only, by name
    base = Features(**on)
    return [
        Case(
            f"138-{name}",
            features=dataclasses.replace(base, kubernetes=V1_38),
            expect=as_138.expect,
            error=as_138.error,
            **kw,
        ),
        Case(
            f"138-{name}-as-137",
            features=dataclasses.replace(base, kubernetes=V1_37),
            expect=as_137.expect,
            error=as_137.error,
            **kw,
        ),
    ]


def _slice(*devices: J) -> list[ResourceSlice]:
    return [slice_(SLICE1, NODE1, POOL1, DRIVER_A, *devices)]


def _both(*devices: str) -> Answer:
    """Success: request req-0 gets these devices of pool-1."""
    return Answer([allocation(LOCAL, *(result(REQ0, DRIVER_A, POOL1, d) for d in devices))])


def _capacity_request(requests: Mapping[str, str], count: int = 1) -> J:
    """A request of class-a for ``count`` devices with these capacity requests by name."""
    r = request(REQ0, CLASS_A, count)
    r["exactly"]["capacity"] = {"requests": dict(requests)}
    return r


def _shared(consumed: Mapping[str, str]) -> Answer:
    return Answer(
        [allocation(LOCAL, result(REQ0, DRIVER_A, POOL1, DEVICE1, share=True, consumed=consumed))]
    )


def _versions(constraint: J, first: J, second: J) -> dict[str, Any]:
    return {
        "claims": [claim(CLAIM0, request(REQ0, CLASS_A, 2), constraints=[constraint])],
        "classes": [device_class(CLASS_A, DRIVER_A)],
        "slices": _slice(
            device(DEVICE1, None, {"driverVersion": first}),
            device(DEVICE2, None, {"driverVersion": second}),
        ),
        "node": N1,
    }


def _derived_links(constraint: J, count: int) -> dict[str, Any]:
    """Requests deriving ``derived.example.com/links`` as ``[]`` (an empty string list)."""
    r = request(REQ0, CLASS_A, count)
    r["exactly"]["derivedAttributes"] = [
        {"name": "derived.example.com/links", "expression": "[]"},
    ]
    return {
        "claims": [claim(CLAIM0, r, constraints=[constraint])],
        "classes": [device_class(CLASS_A, DRIVER_A)],
        "slices": _slice(device(DEVICE1), device(DEVICE2)),
        "node": N1,
    }


def _capacity(
    requests: Mapping[str, str], capacity: Mapping[str, str | int], *, multi: bool = False
) -> dict[str, Any]:
    klass = class_with_multi(CLASS_A, DRIVER_A, True) if multi else device_class(CLASS_A, DRIVER_A)
    return {
        "claims": [claim(CLAIM0, _capacity_request(requests))],
        "classes": [klass],
        "slices": _slice(device(DEVICE1, dict(capacity), multi=multi)),
        "node": N1,
    }


def cases() -> list[Case]:
    consumable = {"consumable_capacity": True}
    list_types = {"list_type_attributes": True}
    derived = {"derived_attributes": True, "list_type_attributes": True}
    v1 = {"versions": ["1.0.0+build1", "2.0.0"]}
    v2 = {"versions": ["1.0.0+build2", "3.0.0"]}
    return [
        # Versions compare as semver.Version.Equals: build metadata does not count.
        *_pair(
            "with-constraint-matching-version-attribute-differing-only-in-build-metadata",
            {},
            _both(DEVICE1, DEVICE2),
            NONE,
            **_versions(match_attribute(VERSION), attr_v("1.0.0+build1"), attr_v("1.0.0+build2")),
        ),
        *_pair(
            "with-constraint-distinct-version-attribute-differing-only-in-build-metadata",
            consumable,
            NONE,
            _both(DEVICE1, DEVICE2),
            **_versions(
                distinct_attribute(VERSION), attr_v("1.0.0+build1"), attr_v("1.0.0+build2")
            ),
        ),
        *_pair(
            "list-attributes-match-constaint-list-of-version-values-common-element-differs-only-"
            "in-build-metadata",
            list_types,
            _both(DEVICE1, DEVICE2),
            NONE,
            **_versions(match_attribute(VERSION), v1, v2),
        ),
        *_pair(
            "list-attributes-distinct-constraint-list-of-version-values-common-element-differs-"
            "only-in-build-metadata",
            {**list_types, **consumable},
            NONE,
            _both(DEVICE1, DEVICE2),
            **_versions(distinct_attribute(VERSION), v1, v2),
        ),
        # A list without DRAListTypeAttributes: 1.38 ends the allocation, 1.37 took the first
        # device's list and compared it as a scalar (never equal).
        *_pair(
            "list-attributes-disabled-distinct-constraint-single-device-with-list",
            consumable,
            Answer(error=f"device {DRIVER_A}/{POOL1}/{DEVICE1}: unsupported attribute value"),
            _both(DEVICE1),
            claims=[
                claim(CLAIM0, request(REQ0, CLASS_A, 1), constraints=[distinct_attribute(STRING)])
            ],
            classes=[device_class(CLASS_A, DRIVER_A)],
            slices=_slice(device(DEVICE1, None, {"stringAttribute": {"strings": ["v1", "v2"]}})),
            node=N1,
        ),
        *_pair(
            "list-attributes-disabled-match-constraint-with-lists",
            {},
            Answer(error="unsupported attribute value for " + STRING),
            NONE,
            claims=[
                claim(CLAIM0, request(REQ0, CLASS_A, 2), constraints=[match_attribute(STRING)])
            ],
            classes=[device_class(CLASS_A, DRIVER_A)],
            slices=_slice(
                device(DEVICE1, None, {"stringAttribute": {"strings": ["v1", "v2"]}}),
                device(DEVICE2, None, {"stringAttribute": {"strings": ["v2", "v3"]}}),
            ),
            node=N1,
        ),
        # Found by the differential run against the 1.38 oracle (seed 7): a derived [] is an
        # empty string list, disjoint from everything; 1.37 could not use it at all.
        *_pair(
            "derived-empty-list-distinct",
            derived,
            _both(DEVICE1, DEVICE2),
            NONE,
            **_derived_links(distinct_attribute("derived.example.com/links"), 2),
        ),
        *_pair(
            "derived-empty-list-match-one-device",
            derived,
            _both(DEVICE1),
            NONE,
            **_derived_links(match_attribute("derived.example.com/links"), 1),
        ),
        # Capacity names resolve by fully qualified name.
        *_pair(
            "consumable-capacity-request-unqualified-and-qualified-device-exclusive",
            consumable,
            _both(DEVICE1),
            NONE,
            **_capacity({CAPACITY0: "1"}, {QUALIFIED0: 2}),
        ),
        *_pair(
            "consumable-capacity-request-qualified-and-unqualified-device-shared",
            consumable,
            _shared({CAPACITY0: "1"}),
            NONE,
            **_capacity({QUALIFIED0: "1"}, {CAPACITY0: 2}, multi=True),
        ),
        *_pair(
            "consumable-capacity-request-unqualified-and-qualified-device-shared",
            consumable,
            _shared({QUALIFIED0: "1"}),
            NONE,
            **_capacity({CAPACITY0: "1"}, {QUALIFIED0: 2}, multi=True),
        ),
        *_pair(
            "consumable-capacity-request-unqualified-and-device-with-unqualified-and-qualified-"
            "capacity-names-shared",
            consumable,
            _shared({QUALIFIED0: "2"}),
            NONE,
            **_capacity({CAPACITY0: "2"}, {CAPACITY0: 1, QUALIFIED0: 4}, multi=True),
        ),
        *_pair(
            "consumable-capacity-request-unqualified-and-device-with-unrelated-qualified-"
            "capacity-shared",
            consumable,
            _shared({CAPACITY0: "1", f"{DRIVER_A}/{CAPACITY1}": "4"}),
            NONE,
            **_capacity(
                {f"{DRIVER_A}/{CAPACITY0}": "1"},
                {CAPACITY0: 2, f"{DRIVER_A}/{CAPACITY1}": 4},
                multi=True,
            ),
        ),
        *_pair(
            "consumable-capacity-request-with-unqualified-and-qualified-capacity-request-names-"
            "shared",
            consumable,
            Answer(error=f'capacity "{CAPACITY0}" requested both as'),
            NONE,
            **_capacity({CAPACITY0: "1", QUALIFIED0: "4"}, {CAPACITY0: 2}, multi=True),
        ),
        # A negative request is refused before the policy could round it up to a valid value.
        *_pair(
            "consumable-capacity-negative-request-with-range-policy-aborts",
            consumable,
            Answer(error="capacity value is negative"),
            _shared({CAPACITY0: "2"}),
            claims=[claim(CLAIM0, _capacity_request({CAPACITY0: "-1"}))],
            classes=[class_with_multi(CLASS_A, DRIVER_A, True)],
            slices=_slice(
                device(
                    DEVICE1,
                    multi=True,
                    capacity_policies={
                        CAPACITY0: {
                            "value": "4",
                            "requestPolicy": {
                                "default": "2",
                                "validRange": {"min": "2", "step": "2", "max": "4"},
                            },
                        }
                    },
                )
            ),
            node=N1,
        ),
        # A device that no longer allows multiple allocations but still holds a share.
        *_pair(
            "consumable-capacity-dedicated-request-falls-back-past-persisted-share",
            consumable,
            _both(DEVICE2),
            _both(DEVICE1),
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=[device_class(CLASS_A, DRIVER_A)],
            slices=_slice(device(DEVICE1), device(DEVICE2)),
            node=N1,
            allocated_shared=[(dev_id(DRIVER_A, POOL1, DEVICE1), "share-0")],
        ),
        *_pair(
            "consumable-capacity-dedicated-request-blocked-by-persisted-capacity",
            consumable,
            NONE,
            _both(DEVICE1),
            claims=[claim(CLAIM0, request(REQ0, CLASS_A, 1))],
            classes=[device_class(CLASS_A, DRIVER_A)],
            slices=_slice(device(DEVICE1), device(DEVICE3, None, {"x": attr_s("y")})),
            node=N1,
            allocated=[dev_id(DRIVER_A, POOL1, DEVICE3)],
            allocated_capacity={dev_id(DRIVER_A, POOL1, DEVICE1): {QUALIFIED0: 1}},
        ),
    ]
