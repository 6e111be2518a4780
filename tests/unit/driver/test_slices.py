"""Slice planning: API limits, the shared pool checks, names, and change detection."""

from __future__ import annotations

import pytest

from operators.api import limits
from operators.api.resource import Device, DeviceTaint
from operators.driver.profiles import (
    A100_40GB,
    DriverConfig,
    GpuGroup,
    NicGroup,
    build_inventory,
    default_config,
)
from operators.driver.slices import (
    InvalidPoolError,
    NodeRef,
    check_slices,
    chunk_devices,
    plan_slices,
    slice_prefix,
    up_to_date,
)

NODE = NodeRef("node-a", "0c1f0b52-6d54-4a8b-a6a0-9f0d8f4c2c11")
DRIVER = "example.kopf-dra.io"


def test_plain_devices_go_128_per_slice_advanced_ones_64() -> None:
    plain = [Device(name=f"d{i}") for i in range(200)]
    assert [len(c) for c in chunk_devices(plain)] == [128, 72]
    tainted = [
        Device(name=f"t{i}", taints=[DeviceTaint(key="k", effect="NoSchedule")]) for i in range(100)
    ]
    assert [len(c) for c in chunk_devices(tainted)] == [64, 36]
    # A chunk that turns advanced must respect the smaller limit from then on.
    mixed = plain[:100] + tainted[:1]
    assert [len(c) for c in chunk_devices(mixed)] == [100, 1]


def test_many_gpus_split_within_limits_and_pass_pool_checks() -> None:
    config = DriverConfig(gpus=[GpuGroup(count=10, partitions=A100_40GB.name)], nics=[NicGroup()])
    inventory = build_inventory(config, NODE.name)
    slices = plan_slices(DRIVER, NODE, NODE.name, inventory, 4)
    check_slices(slices)
    counters = [s for s in slices if s.spec.shared_counters]
    devices = [s for s in slices if s.spec.devices]
    assert [len(s.spec.shared_counters) for s in counters] == [8, 2]
    assert all(
        len(s.spec.devices) <= limits.ResourceSliceMaxDevicesWithAdvancedFeatures for s in devices
    )
    assert sum(len(s.spec.devices) for s in devices) == 10 * 26 + 1
    assert all(not (s.spec.devices and s.spec.shared_counters) for s in slices)
    assert {s.spec.pool.resource_slice_count for s in slices} == {len(slices)}
    assert {s.spec.pool.generation for s in slices} == {4}
    assert {s.spec.node_name for s in slices} == {NODE.name}
    assert all(
        s.metadata.owner_references[0].uid == NODE.uid and s.metadata.owner_references[0].controller
        for s in slices
    )


def test_empty_inventory_is_one_empty_slice() -> None:
    slices = plan_slices(DRIVER, NODE, NODE.name, build_inventory(DriverConfig(), NODE.name), 1)
    assert len(slices) == 1
    assert slices[0].spec.devices == []
    check_slices(slices)


def test_invalid_pool_is_refused_before_writing() -> None:
    inventory = build_inventory(default_config(), NODE.name)
    slices = plan_slices(DRIVER, NODE, NODE.name, inventory, 1)
    counters = next(s for s in slices if s.spec.shared_counters)
    counters.spec.shared_counters[0].name = "renamed"
    with pytest.raises(InvalidPoolError, match="counter set gpu-0-counters not found"):
        check_slices(slices)
    slices[-1].spec.devices[0].name = "Not_A_Label"
    with pytest.raises(InvalidPoolError, match=r"spec\.devices\[0\]\.name"):
        check_slices(slices)


def test_long_names_are_shortened_to_valid_unique_prefixes() -> None:
    long_a, long_b = "n" * 240 + "a", "n" * 240 + "b"
    a, b = slice_prefix(long_a, DRIVER), slice_prefix(long_b, DRIVER)
    assert a != b
    assert len(f"{a}-counters-99") <= limits.DNS1123SubdomainMaxLength
    assert slice_prefix("Node_1", DRIVER) == "node-1-example.kopf-dra.io"


def test_up_to_date_ignores_generation_but_not_content_or_layout() -> None:
    inventory = build_inventory(default_config(), NODE.name)
    stored = plan_slices(DRIVER, NODE, NODE.name, inventory, 3)
    assert up_to_date(stored, plan_slices(DRIVER, NODE, NODE.name, inventory, 99))
    changed = build_inventory(
        DriverConfig(gpus=[GpuGroup(count=1, partitions="a100-40gb")]), NODE.name
    )
    assert not up_to_date(stored, plan_slices(DRIVER, NODE, NODE.name, changed, 3))
    assert not up_to_date(stored[:1], plan_slices(DRIVER, NODE, NODE.name, inventory, 3))
    mixed = plan_slices(DRIVER, NODE, NODE.name, inventory, 3)
    mixed[0].spec.pool.generation = 2
    assert not up_to_date(mixed, stored)
    other_owner = plan_slices(DRIVER, NodeRef(NODE.name, "other-uid"), NODE.name, inventory, 3)
    assert not up_to_date(other_owner, stored)
