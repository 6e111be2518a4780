"""1.37's views of a pool in a ResourcePoolStatusRequest's answer: the partition summary and the
shareable summary, counted by the allocator's rules; none of it on 1.36.

Where kopf-dra's numbers differ from kube-controller-manager 1.37.2's, the test says so (the
README's table lists them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from operators.allocator.pool_availability import incomplete_message, pool_status
from operators.allocator.pool_checks import check_pool
from operators.api.features import Release
from operators.api.poolstatus import PoolStatus
from operators.api.resource import ResourceClaim, ResourceSlice
from tests.unit.pool_validator.builders import (
    ALL,
    DRIVER,
    claim,
    counter_set,
    device,
    group,
    result,
    slice_,
    uses,
)

V137 = dataclasses.replace(ALL, kubernetes=Release(1, 37))
V136 = dataclasses.replace(ALL, kubernetes=Release(1, 36))
PROFILE = f"{DRIVER}/profile"


def status(
    *slices: ResourceSlice,
    claims: Sequence[ResourceClaim] = (),
    default: str | None = None,
    features: Any = V137,
) -> PoolStatus:
    g = group(*slices)
    return pool_status(g, check_pool(g, claims, features), claims, features, (), default)


def gpu(attribute: str | None = PROFILE, *, taint_half: bool = False) -> tuple[ResourceSlice, ...]:
    """A 40Gi GPU whole ("full") or as two 20Gi halves ("half"), its type in ``profile``."""
    half_1: dict[str, Any] = {"profile": {"string": "half"}}
    taints = [{"key": "k", "effect": "NoSchedule"}] if taint_half else []
    devices = slice_(
        "devices",
        device("whole", uses("gpu-0", memory="40Gi"), attributes={"profile": {"string": "full"}}),
        device("half-0", uses("gpu-0", memory="20Gi"), attributes={"profile": {"string": "half"}}),
        device("half-1", uses("gpu-0", memory="20Gi"), attributes=half_1, taints=taints),
        count=2,
    )
    devices.spec.partition_type_attribute = attribute
    return (slice_("counters", counters=[counter_set("gpu-0", memory="40Gi")], count=2), devices)


def summary(s: PoolStatus) -> list[tuple[str | None, int | None, int | None]]:
    return [(p.type, p.total, p.allocatable) for p in s.partition_summary]


def test_136_has_no_views_and_137_prefixes_the_incomplete_pool() -> None:
    slices = gpu()
    assert status(*slices, features=V136).dump().keys() == status(*gpu(None)).dump().keys()
    assert "partitionSummary" not in status(*slices, features=V136).dump()
    assert "partitionSummary" in status(*slices).dump()
    partial = group(slices[1])
    assert incomplete_message(partial, Release(1, 36)).startswith(
        "pool gpu.example.com/node-1 is incomplete"
    )
    message = incomplete_message(partial, Release(1, 37))
    assert incomplete_message(partial) == message
    assert message.startswith("PoolIncomplete: pool gpu.example.com/node-1 is incomplete")
    answered = pool_status(partial, check_pool(partial, [], V137), [], V137)
    assert answered.validation_error == message
    assert answered.partition_summary == []


def test_partition_types_count_what_the_counters_leave() -> None:
    assert summary(status(*gpu())) == [("full", 1, 1), ("half", 2, 2)]
    assert summary(status(*gpu(), claims=[claim("a", result("half-0"))])) == [
        ("full", 1, 0),
        ("half", 2, 1),
    ]
    assert summary(status(*gpu(), claims=[claim("a", result("whole"))])) == [
        ("full", 1, 0),
        ("half", 2, 0),
    ]
    (entry, _) = status(*gpu()).partition_summary
    assert entry.attribute == PROFILE


def test_a_tainted_partition_is_not_one_more() -> None:
    # kube-controller-manager 1.37.2 counts it: half 2/2.
    assert summary(status(*gpu(taint_half=True))) == [("full", 1, 1), ("half", 2, 1)]


def test_the_requests_default_applies_only_where_no_slice_names_one() -> None:
    assert summary(status(*gpu(None))) == []
    assert summary(status(*gpu(None), default=PROFILE)) == [("full", 1, 1), ("half", 2, 2)]
    assert summary(status(*gpu(f"{DRIVER}/other"), default=PROFILE)) == []
    named = status(*gpu(f"{DRIVER}/other"), default=PROFILE)
    assert named.validation_error is not None
    assert named.validation_error == (
        'PartitionTypeMissing: device "whole" in pool gpu.example.com/node-1 does not carry '
        'partition type attribute "gpu.example.com/other"'
    )


def test_a_view_that_cannot_be_computed_is_left_out_and_said() -> None:
    counters, devices = gpu()
    devices.spec.devices[2].consumes_counters[0].counters["memory"].value = None
    mixed = status(counters, devices)
    assert mixed.partition_summary == []
    assert mixed.validation_error is not None
    assert mixed.validation_error.startswith(
        'PartitionCostMismatch: devices of partition type "half"'
    )
    assert (mixed.total_devices, mixed.available_devices) == (3, 3)  # the counts stay
    no_sets = slice_(
        "devices",
        device("p", uses("gpu-0", memory="1"), attributes={"profile": {"string": "x"}}),
    )
    no_sets.spec.partition_type_attribute = PROFILE
    lone = status(no_sets)
    assert lone.validation_error is not None
    assert lone.validation_error.startswith("PartitionTypeMissing: pool gpu.example.com/node-1")


def nic(name: str, **extra: Any) -> dict[str, Any]:
    return device(
        name,
        allowMultipleAllocations=True,
        capacity={"bandwidth": {"value": "100G"}},
        **extra,
    )


def share(name: str, device_name: str, amount: str) -> ResourceClaim:
    return claim(
        name,
        result(
            device_name,
            share_id=f"0000000{len(name)}-0000-4000-8000-000000000000",
            consumedCapacity={"bandwidth": amount},
        ),
    )


def test_shareable_devices_are_summed() -> None:
    slices = (slice_("s", nic("nic-0"), nic("nic-1"), device("plain")),)
    claims = [share("a", "nic-0", "10G"), share("bb", "nic-0", "30G")]
    shareable = status(*slices, claims=claims).shareable_summary
    assert shareable is not None
    assert (shareable.fully_available_devices, shareable.partially_available_devices) == (1, 1)
    (bandwidth,) = shareable.capacity
    assert (bandwidth.name, str(bandwidth.total), str(bandwidth.consumed)) == (
        "bandwidth",
        "200G",
        "40G",
    )
    assert str(bandwidth.available) == "160G"
    assert status(slice_("s", device("plain"))).shareable_summary is None
    assert status(*slices, features=V136).shareable_summary is None


def test_a_used_up_or_tainted_shareable_device_is_neither_fully_nor_partially_available() -> None:
    # kube-controller-manager 1.37.2 counts the used-up NIC as partially available, the tainted
    # one as fully available, and its bandwidth as available.
    tainted = nic("nic-1", taints=[{"key": "k", "effect": "NoExecute"}])
    slices = (slice_("s", nic("nic-0"), tainted),)
    shareable = status(*slices, claims=[share("a", "nic-0", "100G")]).shareable_summary
    assert shareable is not None
    assert (shareable.fully_available_devices, shareable.partially_available_devices) == (0, 0)
    (bandwidth,) = shareable.capacity
    assert (str(bandwidth.total), str(bandwidth.consumed), str(bandwidth.available)) == (
        "200G",
        "100G",
        "0",
    )


def test_shares_of_a_device_the_pool_no_longer_publishes_are_not_counted() -> None:
    slices = (slice_("s", nic("nic-0")),)
    shareable = status(*slices, claims=[share("a", "gone", "10G")]).shareable_summary
    assert shareable is not None
    assert str(shareable.capacity[0].consumed) == "0"
    assert shareable.fully_available_devices == 1


def test_138_counts_shares_against_the_capacity_they_name_either_way() -> None:
    """1.38's allocated state keys consumed capacity by fully qualified name: the view still
    finds a share of ``bandwidth`` under the device's bare name, as 1.37's does."""
    v138 = dataclasses.replace(ALL, kubernetes=Release(1, 38))
    slices = (slice_("s", nic("nic-0")),)
    claims = [share("a", "nic-0", "100G")]
    for features in (V137, v138):
        shareable = status(*slices, claims=claims, features=features).shareable_summary
        assert shareable is not None
        (bandwidth,) = shareable.capacity
        assert (str(bandwidth.consumed), str(bandwidth.available)) == ("100G", "0"), features
        assert shareable.partially_available_devices == 0
