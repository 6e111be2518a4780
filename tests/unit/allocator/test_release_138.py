"""Where 1.38's allocator parts from 1.37's, piece by piece (the table rows are cases_138.py):
each test asserts 1.37's answer and 1.38's, so a switch on the release that breaks is caught."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any

import pytest

from operators.allocator import AllocatedState, Features, UnsupportedAttributeError
from operators.allocator import capacity as cap
from operators.allocator.constraints import DistinctAttribute, MatchAttribute, held_value
from operators.allocator.features import V1_37, V1_38
from operators.allocator.state import AllocatedTracker, Holding
from operators.api.ids import DeviceID
from operators.api.quantity import Quantity
from operators.api.resource import Device, DeviceAttribute, DeviceCapacity, ResourceClaim

DRIVER = "drv"
DEVICE = DeviceID(DRIVER, "pool", "d0")
AS_137 = dataclasses.replace(Features.all(), kubernetes=V1_37)
AS_138 = dataclasses.replace(Features.all(), kubernetes=V1_38)


def test_since_1_38_follows_the_release() -> None:
    assert not AS_137.since_1_38
    assert AS_138.since_1_38
    assert AS_138.since_1_37


# --- allocated state: consumed capacity by fully qualified name ----------------------------


def _shared_claim(consumed: dict[str, str]) -> ResourceClaim:
    result = {
        "request": "r",
        "driver": DRIVER,
        "pool": "pool",
        "device": "d0",
        "shareID": "s1",
        "consumedCapacity": consumed,
    }
    return ResourceClaim.load(
        {
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"devices": {"requests": []}},
            "status": {"allocation": {"devices": {"results": [result]}}},
        }
    )


@pytest.mark.parametrize(
    ("consumed", "as_137", "as_138"),
    [
        ({"bw": "1"}, {"bw": 1}, {"drv/bw": 1}),
        ({"drv/bw": "2"}, {"drv/bw": 2}, {"drv/bw": 2}),
        ({"other.example.com/bw": "3"}, {"other.example.com/bw": 3}, {"other.example.com/bw": 3}),
        # A 1.37 allocator could write both spellings: the qualified one wins, in any order.
        ({"bw": "1", "drv/bw": "2"}, {"bw": 1, "drv/bw": 2}, {"drv/bw": 2}),
        ({"drv/bw": "2", "bw": "1"}, {"bw": 1, "drv/bw": 2}, {"drv/bw": 2}),
    ],
)
def test_allocated_capacity_is_keyed_as_the_release_keys_it(
    consumed: dict[str, str], as_137: dict[str, int], as_138: dict[str, int]
) -> None:
    claim = _shared_claim(consumed)
    for features, want in ((AS_137, as_137), (AS_138, as_138)):
        expected = {n: Decimal(v) for n, v in want.items()}
        assert AllocatedState.from_claims([claim], features).capacity[DEVICE] == expected
        tracker: AllocatedTracker[str] = AllocatedTracker(features)
        tracker.track("c", claim)
        assert tracker.state().capacity[DEVICE] == expected
        holding = Holding.of(claim, features)
        assert {n: v for _, n, v in holding.consumed} == expected


# --- capacity -------------------------------------------------------------------------------


def _capacity(**values: str) -> dict[str, DeviceCapacity]:
    return {n.replace("__", "/"): DeviceCapacity(value=Quantity(v)) for n, v in values.items()}


def _fits(requests: dict[str, str], capacity: dict[str, DeviceCapacity], **kw: Any) -> Any:
    wanted = {n: Quantity(v) for n, v in requests.items()}
    as_137 = cap.request_fits(wanted, capacity, None, None, strict=True)
    as_138 = cap.request_fits_qualified(wanted, capacity, None, None, driver=DRIVER, **kw)
    return as_137, as_138


def test_a_bare_request_finds_the_qualified_capacity_and_back() -> None:
    assert _fits({"bw": "1"}, _capacity(drv__bw="2")) == (None, True)
    assert _fits({"drv/bw": "1"}, _capacity(bw="2")) == (None, True)
    # Another domain is another capacity, either way.
    assert _fits({"bw": "1"}, _capacity(other__bw="2")) == (None, None)
    assert _fits({"other/bw": "1"}, _capacity(bw="2")) == (None, None)


def test_a_device_publishing_both_spellings_counts_the_qualified_one() -> None:
    both = _capacity(bw="1", drv__bw="4")
    assert _fits({"bw": "2"}, both) == (False, True)
    both = _capacity(drv__bw="1", bw="4")  # whatever the order
    assert _fits({"bw": "2"}, both) == (True, False)


def test_a_request_naming_one_capacity_twice_is_an_error_in_1_38() -> None:
    wanted = {"bw": Quantity("1"), "drv/bw": Quantity("2")}
    capacity = _capacity(bw="4")
    assert cap.request_fits(wanted, capacity, None, None, strict=True) is None
    with pytest.raises(cap.CapacityArithmeticError, match='capacity "bw" requested both as'):
        cap.request_fits_qualified(wanted, capacity, None, None, driver=DRIVER)


def test_a_negative_request_is_an_error_before_rounding_in_1_38() -> None:
    policy = {"default": "2", "validRange": {"min": "2", "step": "2", "max": "4"}}
    capacity = {"bw": DeviceCapacity.model_validate({"value": "4", "requestPolicy": policy})}
    wanted = {"bw": Quantity("-1")}
    consumed = cap.consumption(wanted, capacity, strict=True)
    assert consumed == {"bw": Quantity("2")}
    with pytest.raises(cap.CapacityArithmeticError, match="capacity value is negative"):
        cap.consumption_qualified(wanted, capacity, driver=DRIVER)


def test_amounts_add_up_by_qualified_name_and_report_as_published() -> None:
    capacity = _capacity(bw="4", drv__mem="4")
    allocated = {"drv/bw": Decimal(4)}
    wanted = {"drv/bw": Quantity("1")}
    assert cap.request_fits_qualified(wanted, capacity, allocated, None, driver=DRIVER) is False
    assert cap.request_fits_qualified(wanted, capacity, {"drv/bw": Decimal(2)}, None, driver=DRIVER)
    consumed = cap.consumption_qualified(wanted, capacity, driver=DRIVER)
    assert consumed == {"drv/bw": Quantity("1"), "drv/mem": Quantity("4")}
    reported = cap.for_status(consumed, capacity, DRIVER)
    assert reported == {"bw": Quantity("1"), "drv/mem": Quantity("4")}


# --- constraints ----------------------------------------------------------------------------


def _device(**attributes: dict[str, Any]) -> Device:
    return Device.model_validate({"name": "d0", "attributes": attributes})


def _add(constraint: MatchAttribute | DistinctAttribute, *devices: Device) -> list[bool | str]:
    out: list[bool | str] = []
    for i, device in enumerate(devices):
        try:
            out.append(constraint.add("r", "", device, DeviceID(DRIVER, "pool", f"d{i}")))
        except UnsupportedAttributeError as e:
            out.append(e.message)
    return out


def _match(list_types: bool, held: bool) -> MatchAttribute:
    return MatchAttribute((), "drv/v", list_types, True, None, held)


def _distinct(list_types: bool, held: bool) -> DistinctAttribute:
    return DistinctAttribute((), "drv/v", list_types, True, None, held)


def test_versions_compare_without_build_metadata_in_1_38() -> None:
    a, b = _device(v={"version": "1.0.0+a"}), _device(v={"version": "1.0.0+b"})
    assert _add(_match(False, False), a, b) == [True, False]
    assert _add(_match(False, True), a, b) == [True, True]
    assert _add(_distinct(False, False), a, b) == [True, True]
    assert _add(_distinct(False, True), a, b) == [True, False]
    # A pre-release is another version, build metadata or not.
    c = _device(v={"version": "1.0.0-rc.1+a"})
    assert _add(_match(False, True), a, c) == [True, False]
    lists = _device(v={"versions": ["1.0.0+a", "2.0.0"]}), _device(v={"versions": ["1.0.0+b"]})
    assert _add(_match(True, False), *lists) == [True, False]
    assert _add(_match(True, True), *lists) == [True, True]


def test_a_list_without_list_types_ends_the_allocation_in_1_38() -> None:
    a, b = _device(v={"strings": ["x", "y"]}), _device(v={"strings": ["y"]})
    assert _add(_match(False, False), a, b) == [True, False]
    assert _add(_distinct(False, False), a) == [True]
    message = "device drv/pool/d0: unsupported attribute value for drv/v"
    assert _add(_match(False, True), a) == [message]
    assert _add(_distinct(False, True), a) == [message]
    assert _add(_match(True, True), a, b) == [True, True]


def test_values_1_38_cannot_hold_end_the_allocation() -> None:
    bad = (
        _device(v={}),  # no value
        _device(v={"strings": []}),  # an empty list a driver published
        _device(v={"version": "18446744073709551616.0.0"}),  # past uint64
    )
    for device in bad:
        assert _add(_distinct(True, True), device) == [
            "device drv/pool/d0: unsupported attribute value for drv/v"
        ]
    assert held_value(DeviceAttribute.model_validate({"version": "1.2.3"})) is not None
    assert held_value(DeviceAttribute.model_validate({"version": "1.2"})) is None


def test_a_derived_empty_list_is_an_empty_string_list_in_1_38() -> None:
    empty = DeviceAttribute.model_validate({"strings": []})
    assert held_value(empty) is None  # published by a driver: nothing upstream can hold
    assert held_value(empty, derived=True) == (("string", frozenset()), True)

    def derive(name: str, expression: str, device: Device, device_id: DeviceID) -> Any:
        return empty

    device = _device(v={"int": 1})
    derived = {"drv/v": "[]"}
    for held, want in ((False, [False, False]), (True, [True, True])):
        distinct = DistinctAttribute((), "drv/v", True, True, derive, held)
        got = [distinct.add("r", "", device, DeviceID(DRIVER, "pool", d), derived) for d in "ab"]
        assert got == want
    match = MatchAttribute((), "drv/v", True, True, derive, True)
    got = [match.add("r", "", device, DeviceID(DRIVER, "pool", d), derived) for d in "ab"]
    assert got == [True, False]  # the first device alone; then no common element


def test_a_removed_device_takes_back_its_narrowing_in_1_38() -> None:
    a = _device(v={"int": 1})
    match = _match(False, True)
    assert _add(match, a, a) == [True, True]
    match.remove("r", "")
    match.remove("r", "")
    assert match.count == 0
    assert _add(match, _device(v={"int": 2}), _device(v={"int": 2})) == [True, True]
