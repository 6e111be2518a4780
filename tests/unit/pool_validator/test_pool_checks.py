"""Every check of the pool validator on a minimal failing pool and a passing one, the
KEP-4815 examples, and agreement with the allocator (one function for both)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from operators.allocator import pool_checks as pc
from operators.allocator import pools
from operators.allocator.features import Features
from operators.api.resource import ResourceClaim, ResourceSlice
from tests.unit.pool_validator.builders import (
    ALL,
    claim,
    codes,
    counter_set,
    device,
    group,
    report,
    result,
    slice_,
    uses,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
PER_DEVICE = {"perDeviceNodeSelection": True}
ALL_NODES = {"allNodes": True}
GPU_SET = [counter_set("gpu-0", memory="40Gi")]


@dataclass(frozen=True)
class Case:
    slices: tuple[ResourceSlice, ...]
    #: (code, slice, device) of every problem expected, in order.
    problems: tuple[tuple[str, str, str], ...] = ()
    claims: tuple[ResourceClaim, ...] = ()
    complete: bool = True


def case(
    *slices: ResourceSlice,
    problems: tuple[tuple[str, str, str], ...] = (),
    claims: tuple[ResourceClaim, ...] = (),
    complete: bool = True,
) -> Case:
    return Case(tuple(slices), problems, claims, complete)


def partitions(*names: str, memory: str = "30Gi") -> ResourceSlice:
    return slice_("devices", *(device(n, uses("gpu-0", memory=memory)) for n in names), count=2)


COUNTERS = slice_("counters", counters=GPU_SET, count=2)

CASES: dict[str, Case] = {
    # --- the allocator's checks, shared -------------------------------------------------
    "duplicate device name": case(
        slice_("a", device("gpu-0"), count=2),
        slice_("b", device("gpu-0"), count=2),
        problems=(("DuplicateDeviceName", "b", "gpu-0"),),
    ),
    "unique device names": case(
        slice_("a", device("gpu-0"), count=2), slice_("b", device("gpu-1"), count=2)
    ),
    "duplicate device name in an incomplete pool": case(
        slice_("a", device("gpu-0"), count=3),
        slice_("b", device("gpu-0"), count=3),
        problems=(("DuplicateDeviceName", "b", "gpu-0"),),
        complete=False,
    ),
    "duplicate counter set": case(
        slice_("a", counters=GPU_SET, count=2),
        slice_("b", counters=GPU_SET, count=2),
        problems=(("DuplicateCounterSet", "b", ""),),
    ),
    "distinct counter sets": case(
        slice_("a", counters=GPU_SET, count=2),
        slice_("b", counters=[counter_set("gpu-1", memory="40Gi")], count=2),
    ),
    "counter set not found": case(
        COUNTERS,
        slice_("devices", device("p0", uses("gpu-9", memory="1Gi")), count=2),
        problems=(("CounterSetNotFound", "devices", "p0"),),
    ),
    "counter set found": case(COUNTERS, partitions("p0")),
    "counter set not there yet in an incomplete pool": case(
        slice_("devices", device("p0", uses("gpu-9", memory="1Gi")), count=2),
        complete=False,
    ),
    "counter not found": case(
        COUNTERS,
        slice_("devices", device("p0", uses("gpu-0", cores="1")), count=2),
        problems=(("CounterNotFound", "devices", "p0"),),
    ),
    "counter not found in an incomplete pool": case(
        slice_("counters", counters=GPU_SET, count=3),
        slice_("devices", device("p0", uses("gpu-0", cores="1")), count=3),
        problems=(("CounterNotFound", "devices", "p0"),),
        complete=False,
    ),
    # --- per slice ----------------------------------------------------------------------
    "counters and devices in one slice": case(
        slice_("both", device("p0"), counters=GPU_SET),
        problems=(("SharedCountersWithDevices", "both", ""),),
    ),
    "per-device selection missing on a device": case(
        slice_(
            "s",
            device("d0", nodeName="node-1"),
            device("d1"),
            selection=PER_DEVICE,
        ),
        problems=(("DeviceNodeSelection", "s", "d1"),),
    ),
    "per-device selection on every device": case(
        slice_(
            "s",
            device("d0", nodeName="node-1"),
            device("d1", allNodes=True),
            selection=PER_DEVICE,
        )
    ),
    "device selection without perDeviceNodeSelection": case(
        slice_("s", device("d0", nodeName="node-1")),
        problems=(("DeviceNodeSelection", "s", "d0"),),
    ),
    "65 devices with counters": case(
        slice_("counters", counters=[counter_set("c", n="100")], count=2),
        slice_("devices", *(device(f"d{i}", uses("c", n="1")) for i in range(65)), count=2),
        problems=(("TooManyDevices", "devices", ""),),
    ),
    "64 devices with counters": case(
        slice_("counters", counters=[counter_set("c", n="100")], count=2),
        slice_("devices", *(device(f"d{i}", uses("c", n="1")) for i in range(64)), count=2),
    ),
    "129 plain devices": case(
        slice_("s", *(device(f"d{i}") for i in range(129))),
        problems=(("TooManyDevices", "s", ""),),
    ),
    "128 plain devices": case(slice_("s", *(device(f"d{i}") for i in range(128)))),
    "invalid device name": case(
        slice_("s", device("GPU_0")), problems=(("InvalidSlice", "s", "GPU_0"),)
    ),
    "device consumes more than the counter has": case(
        COUNTERS,
        partitions("p0", memory="48Gi"),
        problems=(("ConsumptionExceedsCounter", "devices", "p0"),),
    ),
    "device consumes all the counter has": case(COUNTERS, partitions("p0", memory="40Gi")),
    # 1.37 (DRADeviceCompatibilityGroups): at most two groups, each a DNS label.
    "three compatibility groups": case(
        slice_("counters", counters=[counter_set("c", n="4")], count=2),
        slice_(
            "devices",
            device("p0", {**uses("c", n="1"), "compatibilityGroups": ["a", "b", "c"]}),
            count=2,
        ),
        problems=(("InvalidSlice", "devices", "p0"),),
    ),
    "a compatibility group that is not a DNS label": case(
        slice_("counters", counters=[counter_set("c", n="4")], count=2),
        slice_(
            "devices",
            device("p0", {**uses("c", n="1"), "compatibilityGroups": ["Mixed_Profiles"]}),
            device("p1", {**uses("c", n="1"), "compatibilityGroups": ["full"]}),
            count=2,
        ),
        problems=(("InvalidSlice", "devices", "p0"),),
    ),
    "two compatibility groups": case(
        slice_("counters", counters=[counter_set("c", n="4")], count=2),
        slice_(
            "devices",
            device("p0", {**uses("c", n="1"), "compatibilityGroups": ["full", "mixed"]}),
            count=2,
        ),
    ),
    # --- across slices ------------------------------------------------------------------
    "one pool name on two nodes": case(
        slice_("a", device("d0"), count=2),
        slice_("b", device("d1"), count=2, selection={"nodeName": "node-2"}),
        problems=(("ConflictingNodeSelection", "b", ""),),
    ),
    "one pool name on two nodes across generations": case(
        slice_("a", device("d0"), generation=2),
        slice_("b", device("d0"), generation=1, selection={"nodeName": "node-2"}),
        problems=(("ConflictingNodeSelection", "b", ""),),
    ),
    "counters for all nodes, devices per device": case(
        slice_("counters", counters=GPU_SET, count=2, selection=ALL_NODES),
        slice_(
            "devices",
            device("p0", uses("gpu-0", memory="10Gi"), nodeName="node-1"),
            count=2,
            selection=PER_DEVICE,
        ),
    ),
    "slices disagree on the slice count": case(
        slice_("a", device("d0"), count=2),
        slice_("b", device("d1"), count=3),
        problems=(("InconsistentSliceCount", "", ""),),
    ),
    "more slices than resourceSliceCount": case(
        slice_("a", device("d0"), count=2),
        slice_("b", device("d1"), count=2),
        slice_("c", device("d2"), count=2),
        problems=(("TooManySlices", "", ""),),
        complete=False,
    ),
    # --- allocations --------------------------------------------------------------------
    "device allocated to two claims": case(
        slice_("s", device("d0")),
        problems=(("DoubleAllocation", "s", "d0"),),
        claims=(claim("a", result("d0")), claim("b", result("d0"))),
    ),
    "devices allocated to one claim each": case(
        slice_("s", device("d0"), device("d1")),
        claims=(claim("a", result("d0")), claim("b", result("d1"))),
    ),
    "shareable device shared by two claims": case(
        slice_("s", device("d0", allowMultipleAllocations=True)),
        claims=(
            claim("a", result("d0", share_id="11111111-1111-1111-1111-111111111111")),
            claim("b", result("d0", share_id="22222222-2222-2222-2222-222222222222")),
        ),
    ),
    "shareable device shared and held exclusively": case(
        slice_("s", device("d0", allowMultipleAllocations=True)),
        problems=(("DoubleAllocation", "s", "d0"),),
        claims=(
            claim("a", result("d0", share_id="11111111-1111-1111-1111-111111111111")),
            claim("b", result("d0")),
        ),
    ),
    "share IDs on a device that is not shareable": case(
        slice_("s", device("d0")),
        problems=(("DoubleAllocation", "s", "d0"),),
        claims=(
            claim("a", result("d0", share_id="11111111-1111-1111-1111-111111111111")),
            claim("b", result("d0", share_id="22222222-2222-2222-2222-222222222222")),
        ),
    ),
    "admin access does not hold the device": case(
        slice_("s", device("d0")),
        claims=(claim("a", result("d0")), claim("b", result("d0", adminAccess=True))),
    ),
    "allocated partitions overcommit the counter": case(
        COUNTERS,
        partitions("p0", "p1"),
        problems=(("CounterOvercommitted", "counters", ""),),
        claims=(claim("a", result("p0")), claim("b", result("p1"))),
    ),
    "allocated partition within the counter": case(
        COUNTERS, partitions("p0", "p1"), claims=(claim("a", result("p0")),)
    ),
    "allocations in other pools are not ours": case(
        slice_("s", device("d0")),
        claims=(claim("a", result("d0", pool="other")), claim("b", result("d0", pool="other"))),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_check(name: str) -> None:
    c = CASES[name]
    r = report(*c.slices, claims=c.claims)
    assert [(p.code, p.slice, p.device) for p in r.problems] == list(c.problems)
    assert r.complete is c.complete


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.complete])
def test_the_allocator_rejects_exactly_what_the_shared_checks_report(name: str) -> None:
    """validate_pools (the allocator's view) and the report agree on the first problem."""
    c = CASES[name]
    (pool,) = pools.validate_pools(c.slices, ALL)
    shared = {
        pools.DUPLICATE_DEVICE_NAME,
        pools.DUPLICATE_COUNTER_SET,
        pools.COUNTER_SET_NOT_FOUND,
        pools.COUNTER_NOT_FOUND,
    }
    first = next((p for p in report(*c.slices).problems if p.code in shared), None)
    assert pool.invalid_reason == (first.message if first else None)


def test_every_code_has_a_severity_and_a_case() -> None:
    codes_in_cases = {p[0] for c in CASES.values() for p in c.problems}
    timed = {pc.INCOMPLETE_TOO_LONG, pc.STALE_GENERATION}  # tests/unit/pool_validator/test_planning
    assert set(pc.SEVERITY) == codes_in_cases | timed


def test_per_slice_rules_are_not_reported_twice() -> None:
    """The dedicated checks replace the matching per-slice violations, not add to them."""
    bad = slice_(
        "s",
        device("d0", uses("c", n="1"), nodeName="node-1"),
        *(device(f"d{i}", uses("c", n="1")) for i in range(1, 65)),
        counters=[counter_set("c", n="100")],
    )
    found = codes(report(bad))
    assert found.count("SharedCountersWithDevices") == 1
    assert found.count("DeviceNodeSelection") == 1
    assert found.count("TooManyDevices") == 1
    assert "InvalidSlice" not in found


def test_stale_slices_are_listed_and_ignored_otherwise() -> None:
    r = report(
        slice_("new", device("d0"), generation=2),
        slice_("old", device("d0"), device("d0"), generation=1),
    )
    assert r.stale_slices == ("old",)
    assert r.problems == ()
    assert (r.generation, r.slices, r.devices) == (2, 1, 1)


def test_utilisation_counts_allocated_devices_and_their_counters() -> None:
    r = report(
        slice_("counters", counters=[counter_set("gpu-0", memory="40Gi", cores="8")], count=2),
        slice_(
            "devices",
            device("whole", uses("gpu-0", memory="40Gi", cores="8")),
            device("p0", uses("gpu-0", memory="10Gi", cores="2")),
            device("p1", uses("gpu-0", memory="10Gi", cores="2")),
            count=2,
        ),
        claims=(claim("a", result("p0")), claim("b", result("p1"), result("p0", pool="x"))),
    )
    assert (r.devices, r.allocated_devices) == (3, 2)
    assert [(u.counter_set, u.counter, str(u.consumed), str(u.total)) for u in r.counters] == [
        ("gpu-0", "cores", "4", "8"),
        ("gpu-0", "memory", "20Gi", "40Gi"),
    ]
    assert all(u.slice == "counters" for u in r.counters)


def test_a_shared_device_consumes_its_counters_once() -> None:
    r = report(
        slice_("counters", counters=GPU_SET, count=2),
        slice_(
            "devices",
            device("nic", uses("gpu-0", memory="30Gi"), allowMultipleAllocations=True),
            count=2,
        ),
        claims=(
            claim("a", result("nic", share_id="11111111-1111-1111-1111-111111111111")),
            claim("b", result("nic", share_id="22222222-2222-2222-2222-222222222222")),
        ),
    )
    assert r.problems == ()
    assert [str(u.consumed) for u in r.counters] == ["30Gi"]


def test_without_partitionable_devices_counters_are_not_checked() -> None:
    g = group(COUNTERS, slice_("devices", device("p0", uses("gpu-9", memory="1Gi")), count=2))
    assert pc.check_pool(g, [], Features()).problems == ()


# --- KEP-4815 examples -------------------------------------------------------------------


def _fixture(name: str) -> list[ResourceSlice]:
    docs = yaml.safe_load_all((FIXTURES / f"{name}.yaml").read_text())
    return [ResourceSlice.load(d) for d in docs if d and d["kind"] == "ResourceSlice"]


def test_kep4815_gpu_partitions_are_a_valid_pool() -> None:
    slices = _fixture("kep4815-gpu-partitions")
    r = report(
        *slices,
        claims=(
            claim(
                "a",
                result("gpu-0-partition-0", pool="my-pool", driver="resource-driver.example.com"),
            ),
        ),
    )
    assert r.complete
    assert r.problems == ()
    assert (r.devices, r.allocated_devices) == (5, 1)
    assert [(u.counter, str(u.consumed), str(u.total)) for u in r.counters] == [
        ("memory", "10Gi", "40Gi")
    ]


def test_kep4815_mig_counters_are_a_valid_pool() -> None:
    r = report(*_fixture("kep4815-mig-counters"))
    assert r.complete
    assert r.problems == ()
    assert len(r.counters) == 15


def test_kep4815_tpu_example_has_dangling_counter_set_references() -> None:
    r = report(*_fixture("kep4815-tpu-multihost"))
    assert r.complete
    assert [(p.code, p.device, p.message) for p in r.problems] == [
        ("CounterSetNotFound", "tpu-2x4-1", "counter set tpu-couner-set not found"),
        ("CounterSetNotFound", "tpu-2x4-2", "counter set tpu-pool not found"),
        *(
            ("CounterSetNotFound", f"tpu-2x2-{i}", "counter set tpu-pool not found")
            for i in range(1, 5)
        ),
    ]
    assert {p.slice for p in r.problems} == {"tpu-devices"}


def test_kep4815_tpu_example_fixed_is_valid() -> None:
    fixed = [
        ResourceSlice.load(
            yaml.safe_load(
                yaml.safe_dump(s.dump())
                .replace("tpu-couner-set", "tpu-counter-set")
                .replace("counterSet: tpu-pool", "counterSet: tpu-counter-set")
            )
        )
        for s in _fixture("kep4815-tpu-multihost")
    ]
    assert report(*fixed).problems == ()
