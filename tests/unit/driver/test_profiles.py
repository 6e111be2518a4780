"""Profiles generate the KEP-4815 A100 counters and partitions, plain GPUs and shareable NICs."""

from __future__ import annotations

import itertools
from collections import Counter as Multiset
from decimal import Decimal
from pathlib import Path

import pytest

from operators.api.quantity import Quantity
from operators.api.resource import Device
from operators.api.validation import validate_resource_slice
from operators.driver.profiles import (
    A100_40GB,
    PCIE_ROOT_ATTRIBUTE,
    DriverConfig,
    GpuGroup,
    NicGroup,
    ProfileError,
    build_inventory,
    default_config,
    load_config,
    parse_config,
    parse_hotplug,
    partitioned_gpu,
)
from operators.driver.slices import NodeRef, plan_slices

# KEP-4815, "MIG profiles available on an NVIDIA A100 40GB GPU":
# profile: (memory, memory slices, multiprocessors, copy engines, decoders, JPEG, OFA)
KEP_TABLE = {
    "7g.40gb": ("40192Mi", 8, 98, 7, 5, 1, 1),
    "4g.20gb": ("19968Mi", 4, 56, 4, 2, 0, 0),
    "3g.20gb": ("19968Mi", 4, 42, 3, 2, 0, 0),
    "2g.10gb": ("9856Mi", 2, 28, 2, 1, 0, 0),
    "1g.10gb": ("9856Mi", 2, 14, 1, 1, 0, 0),
    "1g.5gb+me": ("4864Mi", 1, 14, 1, 1, 1, 1),
    "1g.5gb": ("4864Mi", 1, 14, 1, 0, 0, 0),
}
# Placements of the KEP's memory-slice diagram (X marks excluded).
KEP_PLACEMENTS = {
    "7g.40gb": 1,
    "4g.20gb": 1,
    "3g.20gb": 2,
    "2g.10gb": 3,
    "1g.10gb": 4,
    "1g.5gb+me": 7,
    "1g.5gb": 7,
}


def _gpu() -> tuple[dict[str, Quantity], list[Device]]:
    counter_set, devices, _ = partitioned_gpu("node-a", 0, A100_40GB)
    return {k: v.value for k, v in counter_set.counters.items() if v.value is not None}, devices


def _consumed(device: Device) -> dict[str, Quantity]:
    (use,) = device.consumes_counters
    return {k: v.value for k, v in use.counters.items() if v.value is not None}


def _attr(device: Device, name: str) -> object:
    attribute = device.attributes.get(name)
    return None if attribute is None else attribute.typed_value()


def test_counter_set_is_the_whole_a100() -> None:
    counters, _ = _gpu()
    expected = {
        "copy-engines": "7",
        "decoders": "5",
        "encoders": "0",
        "jpeg-engines": "1",
        "memory": "40Gi",
        "multiprocessors": "98",
        "ofa-engines": "1",
        **{f"memory-slice-{i}": "1" for i in range(8)},
    }
    assert counters == {k: Quantity(v) for k, v in expected.items()}


def test_every_placement_of_every_profile_plus_the_whole_gpu() -> None:
    _, devices = _gpu()
    profiles = Multiset(str(_attr(d, "profile")) for d in devices if _attr(d, "type") == "mig")
    assert dict(profiles) == KEP_PLACEMENTS
    assert len(devices) == sum(KEP_PLACEMENTS.values()) + 1
    assert devices[-1].name == "gpu-0"
    assert _attr(devices[-1], "partitionable") is True


def test_partitions_consume_their_table_row() -> None:
    _, devices = _gpu()
    for device in devices[:-1]:
        profile = str(_attr(device, "profile"))
        memory, slices, sms, copy, dec, jpeg, ofa = KEP_TABLE[profile]
        used = _consumed(device)
        start = _attr(device, "memorySliceStart")
        assert isinstance(start, int)
        assert used.get("memory") == Quantity(memory)
        assert used.get("multiprocessors") == Quantity(sms)
        assert used.get("copy-engines") == Quantity(copy)
        assert used.get("decoders", Quantity(0)) == Quantity(dec)
        assert used.get("jpeg-engines", Quantity(0)) == Quantity(jpeg)
        assert used.get("ofa-engines", Quantity(0)) == Quantity(ofa)
        assert "encoders" not in used  # zero consumption is left out
        assert {k for k in used if k.startswith("memory-slice-")} == {
            f"memory-slice-{i}" for i in range(start, start + slices)
        }
        assert start % slices == 0 or profile == "7g.40gb"
        assert device.capacity["memory"].value == Quantity(memory)


def test_partitions_are_ordered_smallest_first() -> None:
    _, devices = _gpu()
    memory = [d.capacity["memory"].value for d in devices]
    assert all(a is not None and b is not None and a <= b for a, b in itertools.pairwise(memory))
    names = [d.name for d in devices]
    assert names[:2] == ["gpu-0-mig-1g-5gb-0", "gpu-0-mig-1g-5gb-1"]
    assert names.index("gpu-0-mig-1g-5gb-6") < names.index("gpu-0-mig-1g-5gb-me-0")


def test_whole_gpu_consumes_every_counter_fully() -> None:
    counters, devices = _gpu()
    whole = _consumed(devices[-1])
    assert whole == {k: v for k, v in counters.items() if v.sign()}


def test_seven_small_partitions_fit_but_an_eighth_memory_slice_does_not_exist() -> None:
    """Non-overlapping placements fit the counters; 1g.5gb never starts on slice 7."""
    counters, devices = _gpu()
    small = [d for d in devices if _attr(d, "profile") == "1g.5gb"]
    total: dict[str, Decimal] = {}
    for device in small:
        for name, value in _consumed(device).items():
            total[name] = total.get(name, Decimal(0)) + value.value
    assert all(total[name] <= counters[name].value for name in total)
    assert "memory-slice-7" not in total


def test_overlapping_placements_share_a_memory_slice() -> None:
    _, devices = _gpu()
    by_name = {d.name: d for d in devices}
    two = set(_consumed(by_name["gpu-0-mig-2g-10gb-0"]))
    assert "memory-slice-1" in two & set(_consumed(by_name["gpu-0-mig-1g-5gb-1"]))
    assert not {k for k in two if "slice" in k} & set(_consumed(by_name["gpu-0-mig-1g-5gb-2"]))


def test_uuids_are_stable_per_node_and_device() -> None:
    one = build_inventory(default_config(), "node-a")
    again = build_inventory(default_config(), "node-a")
    other = build_inventory(default_config(), "node-b")
    assert one.info["gpu-0"].uuid == again.info["gpu-0"].uuid
    assert one.info["gpu-0"].uuid != other.info["gpu-0"].uuid
    mig = one.info["gpu-0-mig-3g-20gb-4"]
    assert (mig.kind, mig.profile, mig.parent) == ("mig", "3g.20gb", "gpu-0")


def test_plain_gpus_and_shared_nics() -> None:
    config = DriverConfig(
        gpus=[GpuGroup(count=2, model="T4", memory=Quantity("16Gi"))],
        nics=[NicGroup(count=1, bandwidth=Quantity("200G"))],
    )
    inventory = build_inventory(config, "node-a")
    by_name = {d.name: d for d in inventory.devices}
    assert set(by_name) == {"gpu-0", "gpu-1", "nic-0"}
    assert by_name["gpu-1"].capacity["memory"].value == Quantity("16Gi")
    assert not by_name["gpu-1"].consumes_counters
    nic = by_name["nic-0"]
    assert nic.allow_multiple_allocations is True
    bandwidth = nic.capacity["bandwidth"]
    assert bandwidth.value == Quantity("200G")
    assert bandwidth.request_policy is not None
    assert bandwidth.request_policy.default == Quantity("1G")
    assert bandwidth.request_policy.valid_range is not None
    assert bandwidth.request_policy.valid_range.max == Quantity("200G")
    assert _attr(nic, PCIE_ROOT_ATTRIBUTE) == _attr(by_name["gpu-0"], PCIE_ROOT_ATTRIBUTE)
    assert inventory.counter_sets == ()


def test_default_config_publishes_valid_slices() -> None:
    inventory = build_inventory(default_config(), "node-a")
    for s in plan_slices("example.kopf-dra.io", NodeRef("node-a", "uid"), "node-a", inventory, 1):
        assert validate_resource_slice(s) == []


def test_config_file_round_trip_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text(
        "gpus:\n- count: 2\n  partitions: a100-40gb\nnics:\n- bandwidth: 25G\n"
        "deviceNodeHostPath: ''\n"
    )
    config = load_config(path)
    assert config.gpus[0].count == 2
    assert config.nics[0].bandwidth == Quantity("25G")
    assert config.device_node_host_path == ""
    assert load_config(None) == default_config()
    with pytest.raises(ProfileError, match="unknown partition table 'h100'"):
        parse_config({"gpus": [{"partitions": "h100"}]})
    with pytest.raises(ProfileError, match=r"gpus\.0\.cuont"):
        parse_config({"gpus": [{"cuont": 1}]})
    with pytest.raises(ProfileError, match=r"missing\.yaml"):
        load_config(tmp_path / "missing.yaml")


def test_hotplug_annotation_skips_bad_entries() -> None:
    devices, problems = parse_hotplug(
        '[{"name": "fab-0", "memory": "80Gi"}, {"name": "Bad_Name"}, {"nom": "x"}]'
    )
    assert [d.name for d in devices] == ["fab-0"]
    assert len(problems) == 2
    assert parse_hotplug(None) == ([], [])
    assert parse_hotplug("{")[1] != []
    inventory = build_inventory(DriverConfig(gpus=[GpuGroup(count=1)]), "n", devices)
    assert inventory.info["fab-0"].kind == "gpu"
    clash, _ = parse_hotplug('[{"name": "gpu-0"}]')
    assert build_inventory(DriverConfig(gpus=[GpuGroup(count=1)]), "n", clash).problems
