"""NVIDIA GPUs from the H100 fixture: NVIDIA's attributes, MIG devices, placement counters, CDI."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter as Multiset

import pytest

from operators.allocator import Status
from operators.api.quantity import Quantity
from operators.api.resource import Device
from operators.api.validation import validate_resource_slice
from operators.driver import nvidia
from operators.driver.nvml_fixture import (
    LIB_DIR,
    FixtureNvml,
    fixture_device_nodes,
    fixture_libraries,
    load_snapshot,
)
from operators.driver.sources import NvmlSource

from .gpu import FIXTURE, NODE, allocate, claim, profile_selector, slices, source

UUID = "GPU-e12c465b-7250-edd3-93a8-8110a161e2c0"
#: Checked against NVIDIA/k8s-dra-driver-gpu's GpuInfo.GetDevice (cmd/gpu-kubelet-plugin).
NVIDIA_NAMES = {
    "type",
    "uuid",
    "productName",
    "brand",
    "architecture",
    "cudaComputeCapability",
    "driverVersion",
    "cudaDriverVersion",
    "pcieBusID",
    "index",
    "minor",
}


def _attrs(device: Device) -> dict[str, object]:
    return {k: v.typed_value() for k, v in device.attributes.items()}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("580.159.04", "580.159.4"),
        ("9.0", "9.0.0"),
        ("13.0", "13.0.0"),
        ("535.104.05.1", "535.104.5"),
    ],
)
def test_versions_become_semver(raw: str, expected: str) -> None:
    assert nvidia.semver(raw) == expected
    with pytest.raises(ValueError, match="not a numeric version"):
        nvidia.semver("580.x")


def test_nvml_spellings() -> None:
    assert nvidia.cuda_version(13000) == "13.0"
    assert nvidia.cuda_version(12040) == "12.4"
    assert nvidia.bus_id("00000000:00:06.0") == "0000:00:06.0"
    assert nvidia.pcie_root_from_bus_id("00000000:00:06.0") == "pci0000:00"
    assert nvidia.pcie_root_from_bus_id("00000000:3B:00.0") is None
    assert nvidia.profile_name("MIG 1g.10gb+me") == "1g.10gb+me"


def test_mig_off_publishes_the_whole_gpu_with_nvidias_attributes() -> None:
    inventory = source().inventory(NODE)
    (gpu,) = inventory.devices
    assert gpu.name == "gpu-0"
    attrs = _attrs(gpu)
    names = {k.removeprefix("gpu.nvidia.com/") for k in attrs if k.startswith("gpu.nvidia.com/")}
    assert names >= NVIDIA_NAMES
    assert attrs["gpu.nvidia.com/uuid"] == UUID
    assert attrs["gpu.nvidia.com/productName"] == "NVIDIA H100 80GB HBM3"
    assert attrs["gpu.nvidia.com/brand"] == "Nvidia"
    assert attrs["gpu.nvidia.com/architecture"] == "Hopper"
    assert attrs["gpu.nvidia.com/cudaComputeCapability"] == "9.0.0"
    assert attrs["gpu.nvidia.com/driverVersion"] == "580.159.4"
    assert attrs["gpu.nvidia.com/cudaDriverVersion"] == "13.0.0"
    assert attrs["gpu.nvidia.com/pcieBusID"] == "0000:00:06.0"
    assert attrs["gpu.nvidia.com/migEnabled"] is False
    assert attrs["resource.kubernetes.io/pcieRoot"] == "pci0000:00"
    assert gpu.capacity["memory"].value == Quantity("85520809984")
    assert not gpu.consumes_counters
    assert inventory.counter_sets == ()
    assert all(validate_resource_slice(s) == [] for s in slices(inventory))


def test_mig_on_publishes_the_instances_that_exist_not_the_gpu() -> None:
    inventory = source(mig=True, instances=((19, 0), (14, 2), (9, 4))).inventory(NODE)
    names = [d.name for d in inventory.devices]
    assert names == ["gpu-0-mig-19-0-1", "gpu-0-mig-14-2-2", "gpu-0-mig-9-4-4"]
    by_name = {d.name: d for d in inventory.devices}
    three = _attrs(by_name["gpu-0-mig-9-4-4"])
    assert three["gpu.nvidia.com/profile"] == "3g.40gb"
    assert three["gpu.nvidia.com/parentUUID"] == UUID
    assert str(three["gpu.nvidia.com/uuid"]).startswith("MIG-")
    assert (three["gpu.nvidia.com/memorySliceStart"], three["gpu.nvidia.com/memorySlices"]) == (
        4,
        4,
    )
    assert all(validate_resource_slice(s) == [] for s in slices(inventory))
    edits = inventory.edits["gpu-0-mig-9-4-4"]
    assert edits.env["NVIDIA_VISIBLE_DEVICES"] == three["gpu.nvidia.com/uuid"]
    assert [n for n in edits.device_nodes if "nvidia-caps" in n], "MIG capability nodes"


def test_dynamic_mig_publishes_every_placement_and_the_full_profile_takes_everything() -> None:
    inventory = source(mig=True, dynamic=True).inventory(NODE)
    snapshot = load_snapshot(FIXTURE)
    expected = sum(len(p.placements) for p in snapshot.gpus[0].profiles)
    assert len(inventory.devices) == expected == 25
    (counters,) = inventory.counter_sets
    total = {k: v.value for k, v in counters.counters.items() if v.value is not None}
    assert total["memory-slice-7"] == Quantity("1")
    assert total["compute-slices"] == Quantity("7")
    full = inventory.devices[-1]
    assert full.name == "gpu-0-mig-0-0-8"
    (use,) = full.consumes_counters
    assert {k: v.value for k, v in use.counters.items()} == {
        k: v for k, v in total.items() if v.sign()
    }
    assert all(validate_resource_slice(s) == [] for s in slices(inventory))


# --- the allocator against NVML's placement rules -------------------------------------------


def _nvml_allows(profiles: tuple[str, ...]) -> bool:
    """Brute force over the fixture's placement table: some choice of placements whose memory
    slices do not overlap, within the GPU's compute slices and each profile's instance count."""
    gpu = load_snapshot(FIXTURE).gpus[0]
    table = {p.name: p for p in gpu.profiles}
    full = nvidia.full_profile(gpu)
    if sum(table[p].slices for p in profiles) > full.slices:
        return False
    if any(n > table[p].instance_count for p, n in Multiset(profiles).items()):
        return False
    for choice in itertools.product(*(table[p].placements for p in profiles)):
        used = [i for start, size in choice for i in range(start, start + size)]
        if len(used) == len(set(used)):
            return True
    return False


def _multisets(size: int) -> list[tuple[str, ...]]:
    names = sorted(p.name for p in load_snapshot(FIXTURE).gpus[0].profiles)
    return list(itertools.combinations_with_replacement(names, size))


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_one_claim_of_several_partitions_fits_exactly_when_nvml_allows(size: int) -> None:
    published = slices(source(mig=True, dynamic=True).inventory(NODE))
    answers: Multiset[bool] = Multiset()
    for profiles in _multisets(size):
        outcome = allocate(published, [claim("c", *(profile_selector(p) for p in profiles))])
        allowed = _nvml_allows(profiles)
        answers[allowed] += 1
        assert (outcome.status == Status.SUCCESS) == allowed, profiles
    assert answers[False] > 0 or size == 1, "some combinations must not fit"
    assert answers[True] > 0


def test_larger_claims_agree_with_nvml_too() -> None:
    published = slices(source(mig=True, dynamic=True).inventory(NODE))
    cases = [
        ("1g.10gb",) * 7,
        ("2g.20gb",) * 3 + ("1g.10gb",),
        ("2g.20gb",) * 3 + ("1g.20gb",),
        ("1g.20gb",) * 4,
        ("1g.20gb",) * 5,
        ("4g.40gb", "2g.20gb", "1g.10gb"),
        ("1g.10gb+me", "1g.10gb+me"),
        ("7g.80gb", "1g.10gb"),
    ]
    for profiles in cases:
        outcome = allocate(published, [claim("c", *(profile_selector(p) for p in profiles))])
        assert (outcome.status == Status.SUCCESS) == _nvml_allows(profiles), profiles


# --- CDI --------------------------------------------------------------------------------------


def test_cdi_edits_name_the_fixtures_device_nodes_and_libraries() -> None:
    inventory = source().inventory(NODE)
    edits = inventory.edits["gpu-0"]
    nodes = [n for n in fixture_device_nodes(FIXTURE) if "nvidia-caps" not in n]
    assert sorted(edits.device_nodes) == sorted(nodes)
    # Every library file but the development links (libcuda.so), as nvidia-ctk mounts them.
    libraries = {f"{LIB_DIR}/{n}" for n in fixture_libraries(FIXTURE) if ".so." in n}
    assert set(edits.mounts) == libraries
    assert f"{LIB_DIR}/libnvidia-ml.so.1" in libraries
    assert edits.env == {"NVIDIA_VISIBLE_DEVICES": UUID, "LD_LIBRARY_PATH": LIB_DIR}


def test_ldconfig_listing_gives_the_first_path_of_each_soname() -> None:
    listing = (FIXTURE / "libs.txt").read_text()
    found = nvidia.ldconfig_libraries(listing)
    assert "/usr/local/nvidia/lib64/libnvidia-ml.so.1" in found
    assert "/usr/local/nvidia/lib64/libcuda.so.1" in found
    assert not any(p.startswith("/lib/") for p in found)
    assert nvidia.mig_capability_minor("DeviceFileMinor: 12\nDeviceFileMode: 292\n") == 12


# --- dynamic MIG against the fake NVML ---------------------------------------------------------


async def test_dynamic_mig_creates_at_prepare_and_destroys_at_unprepare() -> None:
    backend = FixtureNvml(FIXTURE, mig=True)
    src = NvmlSource(backend, dynamic_mig=True)
    inventory = src.inventory(NODE)
    info = inventory.info["gpu-0-mig-15-6-2"]
    edits = await src.prepare([info])
    (instance,) = backend.snapshot().gpus[0].mig_devices
    assert (instance.profile_id, instance.start, instance.size) == (15, 6, 2)
    assert edits[info.name].env["NVIDIA_VISIBLE_DEVICES"] == instance.uuid
    assert sum("nvidia-caps" in n for n in edits[info.name].device_nodes) == 2
    assert await src.prepare([info]) == edits, "prepare again: the same instance"
    assert backend.created == 1
    await src.unprepare([info])
    assert backend.snapshot().gpus[0].mig_devices == ()
    await src.unprepare([info])
    assert backend.destroyed == 1, "unprepare again: nothing left to destroy"


# --- health -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "why"),
    [
        (nvidia.HealthEvent(nvidia.EVENT_XID_CRITICAL, UUID, 48), "NVML: critical Xid 48"),
        (nvidia.HealthEvent(nvidia.EVENT_XID_CRITICAL, UUID, 79), "fell off the bus"),
        (nvidia.HealthEvent(nvidia.EVENT_GPU_UNAVAILABLE, UUID), "fell off the bus"),
        (nvidia.HealthEvent(nvidia.EVENT_XID_CRITICAL, UUID, 13), None),
        (nvidia.HealthEvent(0x4, UUID), None),
    ],
)
def test_critical_events(event: nvidia.HealthEvent, why: str | None) -> None:
    answer = nvidia.critical(event)
    assert (answer is None) == (why is None)
    assert why is None or why in (answer or "")


async def test_an_xid_event_is_reported_for_the_gpu() -> None:
    backend = FixtureNvml(FIXTURE)
    src = NvmlSource(backend, event_timeout_ms=10)
    src.inventory(NODE)
    stop = asyncio.Event()
    reported: list[tuple[str, str]] = []

    async def report(device: str, why: str) -> None:
        reported.append((device, why))
        stop.set()

    backend.inject(nvidia.HealthEvent(nvidia.EVENT_XID_CRITICAL, UUID, 13))
    backend.inject(nvidia.HealthEvent(nvidia.EVENT_XID_CRITICAL, UUID, 48))
    await asyncio.wait_for(src.watch(report, stop), 10)
    assert reported == [("gpu-0", "NVML: critical Xid 48")]
