"""The driver's 1.37 additions: partitionTypeAttribute (DRAPartitionableDevicesType), slices that
skip the kubelet's calls (DRAOptionalNodeOperations), each only on 1.37 with its gate on; and
the standard ``resource.kubernetes.io/numaNode`` attribute (no gate), from the profile config
and from sysfs for NVML's GPUs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from operators.api.features import Release
from operators.api.resource import Device, ResourceClaim, ResourceSlice
from operators.api.validation import validate
from operators.driver.app import slice_fields
from operators.driver.nvml import numa_node
from operators.driver.prepare import plan_prepare, skips_prepare
from operators.driver.profiles import (
    NUMA_NODE_ATTRIBUTE,
    GpuGroup,
    NicGroup,
    ProfileError,
    build_inventory,
    default_config,
    parse_config,
)
from operators.driver.settings import DriverSettings
from operators.driver.slices import (
    NO_SLICE_FIELDS,
    NodeRef,
    SliceFields,
    check_slices,
    plan_slices,
)
from tests.unit.driver import gpu
from tests.unit.driver.test_prepare import NODE, NOW, UID, _claim, _result

DRIVER = "example.kopf-dra.io"
R136, R137 = Release(1, 36), Release(1, 37)
BOTH = SliceFields(partition_type=True, skip_node_operations=True)
SKIPPED = ["NodePrepareResources", "NodeUnprepareResources"]


def _plan(config: Any, fields: SliceFields, node: str = "node-a") -> list[ResourceSlice]:
    inventory = build_inventory(parse_config(config), node)
    return plan_slices(DRIVER, NodeRef(node, "uid"), node, inventory, 1, fields)


def _valid(slices: list[ResourceSlice], release: Release = R137) -> None:
    problems = [str(v) for s in slices for v in validate(s, release)]
    assert problems == []
    check_slices(slices)  # the shared pool checks too


def _attr(device: Device, name: str) -> Any:
    return device.attributes[name].typed_value()


# --- which fields, when ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("release", "gates", "expected"),
    [
        (R136, {"DRAPartitionableDevicesType": True, "DRAOptionalNodeOperations": True}, (0, 0)),
        (R137, {}, (0, 0)),
        (R137, {"DRAPartitionableDevicesType": True}, (1, 0)),
        (R137, {"DRAOptionalNodeOperations": True}, (0, 1)),
        (R137, {"DRAPartitionableDevicesType": True, "DRAOptionalNodeOperations": True}, (1, 1)),
    ],
)
def test_fields_need_1_37_and_their_gate(
    release: Release, gates: dict[str, bool], expected: tuple[int, int]
) -> None:
    fields = SliceFields.at(release, gates)
    assert (fields.partition_type, fields.skip_node_operations) == tuple(map(bool, expected))


def test_settings_choose_the_fields_at_the_clusters_release() -> None:
    on = {
        "DRAPartitionableDevicesType": True,
        "DRAOptionalNodeOperations": True,
        "NodeDeclaredFeatures": True,
        "DRAResourcePoolStatus": True,
    }
    assert slice_fields(DriverSettings(kubernetes_version="1.37", feature_gates=on)) == BOTH
    assert slice_fields(DriverSettings(kubernetes_version="1.37")) == NO_SLICE_FIELDS
    # AllAlpha turns alpha gates on, but 1.36 serves neither field.
    alpha = DriverSettings(kubernetes_version="1.36", feature_gates={"AllAlpha": True})
    assert slice_fields(alpha) == NO_SLICE_FIELDS
    every_alpha = {"AllAlpha": True, "AllBeta": True}
    on_137 = DriverSettings(kubernetes_version="1.37", feature_gates=every_alpha)
    assert slice_fields(on_137) == BOTH


def test_off_publishes_neither_field_on_the_wire() -> None:
    config = {"gpus": [{"partitions": "a100-40gb"}], "nics": [{"skipNodeOperations": True}]}
    slices = _plan(config, NO_SLICE_FIELDS)
    assert [s.metadata.name for s in slices] == [
        "node-a-example.kopf-dra.io-counters-0",
        "node-a-example.kopf-dra.io-devices-0",
    ]
    for s in slices:
        spec = s.dump()["spec"]
        assert "partitionTypeAttribute" not in spec
        assert "skipNodeOperations" not in spec
    # The NIC that could skip the kubelet's calls is an ordinary device then.
    assert "nic-0" in {d.name for d in slices[1].spec.devices}
    _valid(slices, R136)
    _valid(slices, R137)


# --- partitionTypeAttribute --------------------------------------------------------------------


def test_partition_type_on_the_slices_of_counter_consumers() -> None:
    fields = SliceFields(partition_type=True)
    slices = _plan(default_config().model_dump(by_alias=True), fields)
    counters, devices = slices
    assert counters.spec.partition_type_attribute is None  # no devices there
    assert devices.spec.partition_type_attribute == f"{DRIVER}/profile"
    consumers = [d for d in devices.spec.devices if d.consumes_counters]
    assert len(consumers) == 26  # 25 placements of the A100's 7 profiles, and the whole GPU
    kinds = {d.name: _attr(d, "profile") for d in consumers}
    assert kinds["gpu-0"] == "full"
    assert kinds["gpu-0-mig-1g-5gb-3"] == "1g.5gb"
    _valid(slices)


def test_partition_type_not_on_a_slice_without_counter_consumers() -> None:
    # The API refuses the field on a slice none of whose devices consume counters.
    slices = _plan({"gpus": [{"model": "T4"}], "nics": [{}]}, BOTH)
    assert [s.spec.partition_type_attribute for s in slices] == [None]
    _valid(slices)


def test_validation_refuses_a_consumer_without_the_attribute() -> None:
    """The check the published slices pass is a real one: drop ``profile`` and it fails."""
    (_, devices) = _plan({"gpus": [{"partitions": "a100-40gb"}]}, SliceFields(True))
    whole = next(d for d in devices.spec.devices if d.name == "gpu-0")
    del whole.attributes["profile"]
    assert [v.path for v in validate(devices, R137)] == [
        f"spec.devices[{devices.spec.devices.index(whole)}].attributes[{DRIVER}/profile]"
    ]


def test_nvml_slices_name_nvidias_profile_attribute() -> None:
    inventory = gpu.source(mig=True, dynamic=True).inventory(gpu.NODE)
    slices = plan_slices(DRIVER, NodeRef(gpu.NODE, "uid"), gpu.NODE, inventory, 1, BOTH)
    named = {s.spec.partition_type_attribute for s in slices if s.spec.devices}
    assert named == {"gpu.nvidia.com/profile"}
    assert not any(s.spec.skip_node_operations for s in slices)
    _valid(slices)
    # MIG off: the whole GPU consumes nothing, so no slice names a partition type.
    plain = gpu.source().inventory(gpu.NODE)
    whole = plan_slices(DRIVER, NodeRef(gpu.NODE, "uid"), gpu.NODE, plain, 1, BOTH)
    assert [s.spec.partition_type_attribute for s in whole] == [None]


# --- skipNodeOperations ------------------------------------------------------------------------


def test_devices_that_skip_node_operations_get_a_slice_of_their_own() -> None:
    config = {
        "gpus": [{"partitions": "a100-40gb"}, {"model": "T4"}],
        "nics": [{"count": 2, "skipNodeOperations": True}],
    }
    slices = _plan(config, BOTH)
    names = [s.metadata.name for s in slices]
    assert names == [
        "node-a-example.kopf-dra.io-counters-0",
        "node-a-example.kopf-dra.io-devices-0",
        "node-a-example.kopf-dra.io-skipops-0",
    ]
    skipping = slices[2]
    assert skipping.spec.skip_node_operations == SKIPPED
    assert [d.name for d in skipping.spec.devices] == ["nic-0", "nic-1"]
    assert skipping.spec.partition_type_attribute is None  # NICs consume no counters
    assert not {"nic-0", "nic-1"} & {d.name for d in slices[1].spec.devices}
    assert [s.spec.skip_node_operations for s in slices[:2]] == [[], []]
    assert {s.spec.pool.resource_slice_count for s in slices} == {3}
    _valid(slices)


def test_a_skipping_partitionable_gpu_and_an_otherwise_empty_pool() -> None:
    config = {"gpus": [{"partitions": "a100-40gb", "skipNodeOperations": True}]}
    slices = _plan(config, BOTH)
    assert [(s.metadata.name or "").rsplit("-", 2)[-2] for s in slices] == ["counters", "skipops"]
    assert slices[1].spec.partition_type_attribute == f"{DRIVER}/profile"
    assert {s.spec.pool.resource_slice_count for s in slices} == {2}
    _valid(slices)
    only_skipping = _plan({"nics": [{"skipNodeOperations": True}]}, BOTH)
    assert [s.spec.skip_node_operations for s in only_skipping] == [SKIPPED]
    assert only_skipping[0].spec.pool.resource_slice_count == 1


def test_prepare_leaves_a_skipping_device_alone() -> None:
    """The kubelet sends a claim whole when one of our devices in it needs preparing: the
    skipping one gets no CDI device and no status; the other is prepared as always."""
    inventory = build_inventory(parse_config({"gpus": [{"model": "T4"}], "nics": [{}]}), "node-a")
    claim = _claim(
        [
            _result("gpu", "gpu-0"),
            _result("nic", "nic-0", skipNodeOperations=SKIPPED),
        ]
    )
    assert [skips_prepare(r) for r in claim.allocated_results()] == [False, True]
    plan = plan_prepare(
        claim, uid=UID, driver=DRIVER, node=NODE, pool="node-a", inventory=inventory, now=NOW
    )
    assert [d.device for d in plan.claim.devices] == ["gpu-0"]
    assert [d["name"].split("-", 5)[-1] for d in plan.claim.cdi_spec["devices"]] == ["gpu-0"]
    assert [s.device for s in plan.statuses] == ["gpu-0"]


def test_a_claim_of_skipping_devices_only_prepares_nothing() -> None:
    claim: ResourceClaim = _claim([_result("nic", "nic-0", skipNodeOperations=["*"])])
    plan = plan_prepare(
        claim,
        uid=UID,
        driver=DRIVER,
        node=NODE,
        pool="node-a",
        inventory=build_inventory(default_config(), "node-a"),
        now=NOW,
    )
    assert plan.claim.devices == []
    assert plan.statuses == []


def test_unpreparing_only_is_not_skipping_prepare() -> None:
    claim = _claim([_result("nic", "nic-0", skipNodeOperations=[SKIPPED[1]])])
    (result,) = claim.allocated_results()
    assert not skips_prepare(result)


# --- numaNode ----------------------------------------------------------------------------------


def _sysfs(root: Path, bdf: str, text: str | None) -> Path:
    folder = root / "bus" / "pci" / "devices" / bdf
    folder.mkdir(parents=True)
    if text is not None:
        (folder / "numa_node").write_text(text)
    return root


@pytest.mark.parametrize(
    ("text", "expected"), [("1\n", 1), ("0\n", 0), ("-1\n", None), ("x\n", None), ("", None)]
)
def test_numa_node_from_sysfs(tmp_path: Path, text: str, expected: int | None) -> None:
    root = _sysfs(tmp_path, "0000:3b:00.0", text)
    # NVML's bus ID: eight-digit domain, upper case; sysfs: four digits, lower case.
    assert numa_node("00000000:3B:00.0", root) == expected


def test_numa_node_missing_file_or_bad_bus_id(tmp_path: Path) -> None:
    root = _sysfs(tmp_path, "0000:3b:00.0", None)
    assert numa_node("0000:3b:00.0", root) is None
    assert numa_node("0000:3c:00.0", root) is None
    _sysfs(tmp_path, "0001:3b:00.0", "2")
    assert numa_node("0001:3b:00.0", root) == 2
    assert numa_node("00010000:3b:00.0", root) is None  # no four-digit form: not read


def test_profile_numa_node_on_every_device_of_the_group() -> None:
    config = parse_config(
        {"gpus": [{"partitions": "a100-40gb", "numaNode": 1}, {"model": "T4"}], "nics": [{}]}
    )
    inventory = build_inventory(config, "node-a")
    with_numa = {d.name for d in inventory.devices if NUMA_NODE_ATTRIBUTE in d.attributes}
    a100 = {d.name for d in inventory.devices if (d.name or "").startswith("gpu-0")}
    assert with_numa == a100
    assert {_attr(d, NUMA_NODE_ATTRIBUTE) for d in inventory.devices if d.name in a100} == {1}
    _valid(plan_slices(DRIVER, NodeRef("node-a", "uid"), "node-a", inventory, 1, BOTH))


def test_profile_numa_node_must_be_a_node() -> None:
    with pytest.raises(ProfileError, match="numaNode"):
        parse_config({"nics": [{"numaNode": -1}]})
    nic = NicGroup(numa_node=3)
    assert NicGroup.model_validate({"numaNode": 3}) == nic
    assert GpuGroup.model_validate({"skipNodeOperations": True}).skip_node_operations


def test_nvml_gpu_numa_node_attribute() -> None:
    import dataclasses

    from operators.driver import nvidia

    snapshot = gpu.source().backend.snapshot()
    placed = dataclasses.replace(snapshot.gpus[0], numa_node=0)
    device = nvidia.whole_gpu(snapshot, placed)
    assert device.attributes[NUMA_NODE_ATTRIBUTE].typed_value() == 0
    assert NUMA_NODE_ATTRIBUTE not in nvidia.whole_gpu(snapshot, snapshot.gpus[0]).attributes


class _VersionAPI:
    """Answers /version only (all ``Driver._follow_cluster`` asks)."""

    def __init__(self, minor: str) -> None:
        self.minor = minor
        self.calls = 0

    async def version_info(self) -> dict[str, str]:
        self.calls += 1
        return {"major": "1", "minor": self.minor, "gitVersion": f"v1.{self.minor}.2"}


@pytest.mark.parametrize(("minor", "expected"), [("36", NO_SLICE_FIELDS), ("37", BOTH)])
async def test_driver_reads_the_release_when_a_gate_is_on(
    tmp_path: Path, minor: str, expected: SliceFields
) -> None:
    from operators.driver.app import Driver
    from operators.driver.sources import ProfileSource

    gates = {"DRAPartitionableDevicesType": True, "DRAResourcePoolStatus": True}
    gates |= {"DRAOptionalNodeOperations": True, "NodeDeclaredFeatures": True}
    settings = DriverSettings(
        node_name="node-a", feature_gates=gates, state_dir=str(tmp_path), cdi_dir=str(tmp_path)
    )
    api = _VersionAPI(minor)
    driver = Driver(settings, api, ProfileSource(default_config()))  # type: ignore[arg-type]
    if minor == "36":
        # 1.36 knows neither gate: refused as its kube-scheduler refuses them.
        from operators.settings import SettingsError

        with pytest.raises(SettingsError, match="DRAPartitionableDevicesType"):
            await driver._follow_cluster()
        return
    assert await driver._follow_cluster() is True
    assert (driver.service.slice_fields, api.calls) == (expected, 1)
