"""Device profiles: which devices the example driver publishes on its node, from a config file.

Three kinds of simulated hardware, each showing one DRA feature:

* partitionable GPUs (KEP-4815): the GPU's resources (memory, memory slices, multiprocessors,
  copy engines, decoders, encoders, JPEG and OFA engines) are a shared counter set; the whole GPU
  and every placement of every MIG profile are devices consuming those counters, so the
  allocator never hands out overlapping partitions;
* plain GPUs: one device each, with a memory capacity;
* shareable NICs (KEP-5075): ``allowMultipleAllocations`` with a ``bandwidth`` capacity and a
  ``requestPolicy``, so many claims share one NIC up to its bandwidth.

Names follow the served API's rules: device and counter names are DNS labels (``1g.5gb`` becomes
``1g-5gb``, ``memorySlice0`` becomes ``memory-slice-0``), capacity names C identifiers
(``copyEngines``). Attributes sit in the driver's domain, except the standard
``resource.kubernetes.io/pcieRoot`` and ``resource.kubernetes.io/numaNode`` (a group's
``numaNode``, as Kubernetes' deviceattribute helpers publish it: an int, left out where the
device has no NUMA affinity). Every device that consumes shared counters carries ``profile``
(the whole partitionable GPU ``full``), the string its slice names as ``partitionTypeAttribute``
(1.37, DRAPartitionableDevicesType). A group with ``skipNodeOperations`` marks devices that need
no kubelet call (1.37, DRAOptionalNodeOperations): ``slices`` publishes them in slices of their
own. Everything here is pure: the same config and node name give the same devices, UUIDs
included, so restarts publish identical slices.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from operators.api.quantity import Quantity
from operators.api.resource import (
    CapacityRequestPolicy,
    CapacityRequestPolicyRange,
    Counter,
    CounterSet,
    Device,
    DeviceAttribute,
    DeviceCapacity,
    DeviceCounterConsumption,
)
from operators.api.validation import dns1123_label_errors
from operators.driver.cdi import DeviceEdits

PCIE_ROOT_ATTRIBUTE = "resource.kubernetes.io/pcieRoot"
#: Kubernetes' standard NUMA attribute (deviceattribute's StandardDeviceAttributeNUMANode).
NUMA_NODE_ATTRIBUTE = "resource.kubernetes.io/numaNode"
#: Linux's MAX_NUMNODES bound that deviceattribute's GetNUMANodeAttribute checks.
MAX_NUMA_NODES = 1024
#: The string attribute naming a counter-consuming device's partition type (bare: the driver's
#: domain); the whole partitionable GPU's value is ``WHOLE_GPU_PROFILE``.
PARTITION_TYPE_ATTRIBUTE = "profile"
WHOLE_GPU_PROFILE = "full"
DRIVER_VERSION = "1.0.0"
DeviceKind = Literal["gpu", "mig", "nic", "interconnect"]


class ProfileError(ValueError):
    """The profile config cannot be used (bad YAML, unknown partition table, bad values)."""


# --- partition tables (KEP-4815, "Dynamic allocation of Multi-Instance GPUs") --------------


@dataclass(frozen=True, slots=True)
class PartitionProfile:
    """One MIG profile: what an instance consumes and where on the memory slices it may start."""

    name: str
    memory: str
    memory_slices: int
    multiprocessors: int
    copy_engines: int
    decoders: int
    encoders: int
    jpeg_engines: int
    ofa_engines: int
    placements: tuple[int, ...]

    @property
    def device_suffix(self) -> str:
        """The profile as a DNS-label fragment: ``1g.5gb+me`` -> ``1g-5gb-me``."""
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")


@dataclass(frozen=True, slots=True)
class PartitionTable:
    """A GPU model's whole resources and its MIG profiles."""

    name: str
    model: str
    memory: str
    memory_slices: int
    multiprocessors: int
    copy_engines: int
    decoders: int
    encoders: int
    jpeg_engines: int
    ofa_engines: int
    profiles: tuple[PartitionProfile, ...]


# The NVIDIA A100 40GB table of KEP-4815; placements are the memory-slice start positions of the
# KEP's layout diagram (a profile of n slices starts at multiples of n, and only where its other
# resources still fit: 4g.20gb once, 2g.10gb three times, 1g.5gb seven times).
A100_40GB = PartitionTable(
    name="a100-40gb",
    model="A100-SXM4-40GB",
    memory="40Gi",
    memory_slices=8,
    multiprocessors=98,
    copy_engines=7,
    decoders=5,
    encoders=0,
    jpeg_engines=1,
    ofa_engines=1,
    profiles=(
        PartitionProfile("7g.40gb", "40192Mi", 8, 98, 7, 5, 0, 1, 1, (0,)),
        PartitionProfile("4g.20gb", "19968Mi", 4, 56, 4, 2, 0, 0, 0, (0,)),
        PartitionProfile("3g.20gb", "19968Mi", 4, 42, 3, 2, 0, 0, 0, (0, 4)),
        PartitionProfile("2g.10gb", "9856Mi", 2, 28, 2, 1, 0, 0, 0, (0, 2, 4)),
        PartitionProfile("1g.10gb", "9856Mi", 2, 14, 1, 1, 0, 0, 0, (0, 2, 4, 6)),
        PartitionProfile("1g.5gb+me", "4864Mi", 1, 14, 1, 1, 0, 1, 1, (0, 1, 2, 3, 4, 5, 6)),
        PartitionProfile("1g.5gb", "4864Mi", 1, 14, 1, 0, 0, 0, 0, (0, 1, 2, 3, 4, 5, 6)),
    ),
)
PARTITION_TABLES: dict[str, PartitionTable] = {A100_40GB.name: A100_40GB}


def _size_key(p: PartitionProfile) -> tuple[int, int, int, int]:
    """Smallest first: memory, then compute, then extra engines (1g.5gb before 1g.5gb+me)."""
    return (
        Quantity(p.memory).as_int(),
        p.multiprocessors,
        p.copy_engines + p.decoders + p.encoders,
        p.jpeg_engines + p.ofa_engines,
    )


# --- the config file -----------------------------------------------------------------------


class ConfigModel(BaseModel):
    """camelCase like every Kubernetes-side file; unknown keys are mistakes, not data."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class GpuGroup(ConfigModel):
    """``count`` identical GPUs; ``partitions`` names a partition table to make them MIG-like.
    ``numaNode``: the NUMA node they sit on; ``skipNodeOperations``: the kubelet need not call
    the driver for them (see ``NicGroup``)."""

    count: int = Field(default=1, ge=0, le=64)
    model: str | None = None
    memory: Quantity | None = None
    partitions: str | None = None
    numa_node: int | None = Field(default=None, ge=0, lt=MAX_NUMA_NODES)
    skip_node_operations: bool = False

    @field_validator("partitions")
    @classmethod
    def _known_table(cls, value: str | None) -> str | None:
        if value is not None and value not in PARTITION_TABLES:
            known = ", ".join(sorted(PARTITION_TABLES))
            raise ValueError(f"unknown partition table {value!r} (known: {known})")
        return value


def _default_nic_policy() -> CapacityRequestPolicy:
    return CapacityRequestPolicy(
        default=Quantity("1G"),
        valid_range=CapacityRequestPolicyRange(min=Quantity("1G"), step=Quantity("1G")),
    )


class NicGroup(ConfigModel):
    """``count`` shareable NICs with a bandwidth that claims consume (KEP-5075).

    ``numaNode`` (optional) is published as ``resource.kubernetes.io/numaNode``, so a
    ``matchAttribute`` constraint can pair a NIC with a GPU on the same NUMA node.
    ``skipNodeOperations: true`` makes them devices nothing has to be set up for on the node
    (KEP-5945): with DRAOptionalNodeOperations on a 1.37 cluster they go into a slice of their
    own that skips NodePrepareResources and NodeUnprepareResources; otherwise they are
    published and prepared like any other device.
    """

    count: int = Field(default=1, ge=0, le=64)
    model: str = "ConnectX-7"
    bandwidth: Quantity = Field(default_factory=lambda: Quantity("100G"))
    request_policy: CapacityRequestPolicy = Field(default_factory=_default_nic_policy)
    numa_node: int | None = Field(default=None, ge=0, lt=MAX_NUMA_NODES)
    skip_node_operations: bool = False


class HotplugDevice(ConfigModel):
    """A device the fabric controller attached to this node (a plain GPU in the node's pool)."""

    name: str
    model: str = "fabric-gpu"
    memory: Quantity | None = None
    uuid: str | None = None


class DriverConfig(ConfigModel):
    """The driver's profile config (the ``profiles.yaml`` key of its ConfigMap)."""

    gpus: list[GpuGroup] = Field(default_factory=list)
    nics: list[NicGroup] = Field(default_factory=list)
    #: Host path behind every simulated device node in CDI specs (``/dev/null`` exists on any
    #: node, so containers really start on kind); empty: no device nodes, env only.
    device_node_host_path: str = "/dev/null"


def default_config() -> DriverConfig:
    """Used without a config file: one partitionable A100, one plain GPU and one NIC."""
    return DriverConfig(
        gpus=[
            GpuGroup(count=1, partitions=A100_40GB.name, numa_node=0),
            GpuGroup(count=1, model="T4", memory=Quantity("16Gi"), numa_node=1),
        ],
        nics=[NicGroup(count=1, numa_node=0)],
    )


def parse_config(data: Any) -> DriverConfig:
    """Validate a parsed YAML document; raises ProfileError with the offending keys."""
    if data is None:
        return DriverConfig()
    try:
        return DriverConfig.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
            for err in e.errors()
        )
        raise ProfileError(f"profile config: {problems}") from None


def load_config(path: str | Path | None) -> DriverConfig:
    """The config from a YAML file, or ``default_config()`` without one."""
    if path is None:
        return default_config()
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ProfileError(f"profile config {path}: {e.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ProfileError(f"profile config {path}: {e}") from None
    return parse_config(data)


def parse_hotplug(raw: str | None) -> tuple[list[HotplugDevice], list[str]]:
    """Devices from the Node annotation (a JSON/YAML list), plus problems with skipped entries.

    A bad entry must not take the node's other devices offline, so it is reported and skipped.
    """
    if not raw:
        return [], []
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as e:
        return [], [f"hot-plug annotation is not JSON: {e}"]
    if not isinstance(data, list):
        return [], ["hot-plug annotation must be a list of devices"]
    devices: list[HotplugDevice] = []
    problems: list[str] = []
    for i, item in enumerate(data):
        try:
            device = HotplugDevice.model_validate(item)
        except ValidationError as e:
            problems.append(f"hot-plug device #{i}: {e.errors()[0]['msg']}")
            continue
        if errors := dns1123_label_errors(device.name):
            problems.append(f"hot-plug device #{i} {device.name!r}: {errors[0]}")
            continue
        devices.append(device)
    return devices, problems


# --- inventory -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """What prepare needs to know about a published device beyond its API form."""

    name: str
    kind: DeviceKind
    uuid: str
    model: str
    profile: str | None = None
    parent: str | None = None
    interface_name: str | None = None
    mac_address: str | None = None
    #: Published in a slice that skips the kubelet's prepare and unprepare calls (when the
    #: cluster serves that): ``slices.plan_slices`` reads it.
    skip_node_operations: bool = False


@dataclass(frozen=True, slots=True)
class Inventory:
    """Every device of the node's pool (API form + prepare info) and its counter sets."""

    devices: tuple[Device, ...] = ()
    counter_sets: tuple[CounterSet, ...] = ()
    info: Mapping[str, DeviceInfo] = field(default_factory=dict)
    device_node_host_path: str = "/dev/null"
    problems: tuple[str, ...] = ()
    #: Real devices' CDI edits (device nodes, libraries, env), by device name.
    edits: Mapping[str, DeviceEdits] = field(default_factory=dict)
    #: The string attribute every counter-consuming device carries as its partition type
    #: (bare: in the driver's domain), for the slices' ``partitionTypeAttribute``.
    partition_type_attribute: str | None = PARTITION_TYPE_ATTRIBUTE


def stable_uuid(node: str, device: str) -> str:
    """The same UUID for the same device on the same node, across restarts."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"kopf-dra://{node}/{device}"))


def _pcie_root(index: int) -> str:
    return f"pci{index:04x}:00"


def _mac(node: str, device: str) -> str:
    raw = uuid.uuid5(uuid.NAMESPACE_URL, f"kopf-dra-mac://{node}/{device}").bytes[:6]
    # Locally administered, unicast.
    first = (raw[0] | 0x02) & 0xFE
    return ":".join(f"{b:02x}" for b in (first, *raw[1:]))


def numa_values(numa_node: int | None) -> dict[str, str | int | bool]:
    """``resource.kubernetes.io/numaNode`` as deviceattribute's scalar form: an int, and
    nothing for a device without NUMA affinity (unknown or -1), which must not publish it: -1
    would match every other device without one under ``matchAttribute``."""
    if numa_node is None or not 0 <= numa_node < MAX_NUMA_NODES:
        return {}
    return {NUMA_NODE_ATTRIBUTE: numa_node}


def _attrs(
    values: Mapping[str, str | int | bool], versions: Iterable[str] = ()
) -> dict[str, DeviceAttribute]:
    out = {name: DeviceAttribute.of(value) for name, value in values.items()}
    for name in versions:
        out[name] = DeviceAttribute(version=str(values[name]))
    return out


def capacities(values: Mapping[str, str | int]) -> dict[str, DeviceCapacity]:
    return {name: DeviceCapacity(value=Quantity(str(value))) for name, value in values.items()}


def consumed_counters(values: Mapping[str, str | int]) -> dict[str, Counter]:
    """Counters with a zero value are left out: consuming nothing needs no entry."""
    return {
        name: Counter(value=Quantity(str(v)))
        for name, v in values.items()
        if Quantity(str(v)).sign()
    }


def memory_slice_counter(i: int) -> str:
    return f"memory-slice-{i}"


def counter_set_name(gpu: str) -> str:
    return f"{gpu}-counters"


def table_counters(table: PartitionTable) -> dict[str, Counter]:
    """The shared counters of one GPU: all of its resources, memory slices one by one."""
    values = engine_consumption(table.memory, table, slices=range(table.memory_slices))
    # A zero counter (the A100 has no encoders) still belongs to the set: KEP-4815 lists it.
    return {name: Counter(value=Quantity(str(v))) for name, v in values.items()}


class Engines(Protocol):
    """A whole GPU's or a partition's engines, by the same names in a partition table, its
    profiles and the MIG profiles NVML reports: one reading of them for every slice."""

    @property
    def multiprocessors(self) -> int: ...
    @property
    def copy_engines(self) -> int: ...
    @property
    def decoders(self) -> int: ...
    @property
    def encoders(self) -> int: ...
    @property
    def jpeg_engines(self) -> int: ...
    @property
    def ofa_engines(self) -> int: ...


def engine_consumption(
    memory: str, engines: Engines, slices: Iterable[int]
) -> dict[str, str | int]:
    """What a partition (or the whole GPU) draws on its GPU's counter set: its engines and
    memory, and one counter per memory slice it covers."""
    values: dict[str, str | int] = {
        "copy-engines": engines.copy_engines,
        "decoders": engines.decoders,
        "encoders": engines.encoders,
        "jpeg-engines": engines.jpeg_engines,
        "memory": memory,
        "multiprocessors": engines.multiprocessors,
        "ofa-engines": engines.ofa_engines,
    }
    for i in slices:
        values[memory_slice_counter(i)] = 1
    return values


def engine_capacity(memory: str, engines: Engines) -> dict[str, str | int]:
    """A partition's (or the whole GPU's) capacities: its memory and engines."""
    return {
        "memory": memory,
        "multiprocessors": engines.multiprocessors,
        "copyEngines": engines.copy_engines,
        "decoders": engines.decoders,
        "encoders": engines.encoders,
        "jpegEngines": engines.jpeg_engines,
        "ofaEngines": engines.ofa_engines,
    }


def partitioned_gpu(
    node: str,
    index: int,
    table: PartitionTable,
    model: str | None = None,
    *,
    numa_node: int | None = None,
    skip_node_operations: bool = False,
) -> tuple[CounterSet, list[Device], list[DeviceInfo]]:
    """One partitionable GPU: its counter set, then partitions smallest first, whole GPU last.
    Each device carries ``profile`` (the whole GPU ``full``): the partition type that a 1.37
    slice names, for which every counter-consuming device must have it as a string."""
    gpu = f"gpu-{index}"
    gpu_uuid = f"GPU-{stable_uuid(node, gpu)}"
    model = model or table.model
    counter_set = CounterSet(name=counter_set_name(gpu), counters=table_counters(table))
    devices: list[Device] = []
    infos: list[DeviceInfo] = []
    for profile in sorted(table.profiles, key=_size_key):
        for start in profile.placements:
            name = f"{gpu}-mig-{profile.device_suffix}-{start}"
            mig_uuid = f"MIG-{stable_uuid(node, name)}"
            devices.append(
                Device(
                    name=name,
                    attributes=_attrs(
                        {
                            "type": "mig",
                            "profile": profile.name,
                            "model": model,
                            "uuid": mig_uuid,
                            "parentUUID": gpu_uuid,
                            "index": index,
                            "memorySliceStart": start,
                            "memorySlices": profile.memory_slices,
                            "driverVersion": DRIVER_VERSION,
                            PCIE_ROOT_ATTRIBUTE: _pcie_root(index),
                            **numa_values(numa_node),
                        },
                        versions=["driverVersion"],
                    ),
                    capacity=capacities(engine_capacity(profile.memory, profile)),
                    consumes_counters=[
                        DeviceCounterConsumption(
                            counter_set=counter_set.name,
                            counters=consumed_counters(
                                engine_consumption(
                                    profile.memory,
                                    profile,
                                    slices=range(start, start + profile.memory_slices),
                                )
                            ),
                        )
                    ],
                )
            )
            infos.append(
                DeviceInfo(
                    name,
                    "mig",
                    mig_uuid,
                    model,
                    profile.name,
                    parent=gpu,
                    skip_node_operations=skip_node_operations,
                )
            )
    devices.append(
        Device(
            name=gpu,
            attributes=_attrs(
                {
                    "type": "gpu",
                    "model": model,
                    "uuid": gpu_uuid,
                    "index": index,
                    "partitionable": True,
                    PARTITION_TYPE_ATTRIBUTE: WHOLE_GPU_PROFILE,
                    "driverVersion": DRIVER_VERSION,
                    PCIE_ROOT_ATTRIBUTE: _pcie_root(index),
                    **numa_values(numa_node),
                },
                versions=["driverVersion"],
            ),
            capacity=capacities(engine_capacity(table.memory, table)),
            consumes_counters=[
                DeviceCounterConsumption(
                    counter_set=counter_set.name,
                    counters=consumed_counters(
                        engine_consumption(table.memory, table, slices=range(table.memory_slices))
                    ),
                )
            ],
        )
    )
    infos.append(DeviceInfo(gpu, "gpu", gpu_uuid, model, skip_node_operations=skip_node_operations))
    return counter_set, devices, infos


def plain_gpu(
    node: str,
    name: str,
    index: int | None,
    model: str,
    memory: Quantity,
    *,
    gpu_uuid: str | None = None,
    hotplugged: bool = False,
    numa_node: int | None = None,
    skip_node_operations: bool = False,
) -> tuple[Device, DeviceInfo]:
    """A whole GPU without partitions (also how hot-plugged fabric GPUs appear)."""
    gpu_uuid = gpu_uuid or f"GPU-{stable_uuid(node, name)}"
    values: dict[str, str | int | bool] = {
        "type": "gpu",
        "model": model,
        "uuid": gpu_uuid,
        "partitionable": False,
        "driverVersion": DRIVER_VERSION,
    }
    if index is not None:
        values["index"] = index
        values[PCIE_ROOT_ATTRIBUTE] = _pcie_root(index)
    if hotplugged:
        values["hotplugged"] = True
    values.update(numa_values(numa_node))
    device = Device(
        name=name,
        attributes=_attrs(values, versions=["driverVersion"]),
        capacity={"memory": DeviceCapacity(value=memory)},
    )
    return device, DeviceInfo(
        name, "gpu", gpu_uuid, model, skip_node_operations=skip_node_operations
    )


def shared_nic(
    node: str, index: int, group: NicGroup, pcie_index: int
) -> tuple[Device, DeviceInfo]:
    """A NIC many claims can share, each consuming part of its bandwidth."""
    name = f"nic-{index}"
    nic_uuid = stable_uuid(node, name)
    interface = f"net{index}"
    mac = _mac(node, name)
    policy = group.request_policy.model_copy(deep=True)
    if policy.valid_range is not None and policy.valid_range.max is None:
        policy.valid_range.max = group.bandwidth
    device = Device(
        name=name,
        attributes=_attrs(
            {
                "type": "nic",
                "model": group.model,
                "uuid": nic_uuid,
                "index": index,
                "interfaceName": interface,
                "macAddress": mac,
                "driverVersion": DRIVER_VERSION,
                PCIE_ROOT_ATTRIBUTE: _pcie_root(pcie_index),
                **numa_values(group.numa_node),
            },
            versions=["driverVersion"],
        ),
        capacity={"bandwidth": DeviceCapacity(value=group.bandwidth, request_policy=policy)},
        allow_multiple_allocations=True,
    )
    return device, DeviceInfo(
        name,
        "nic",
        nic_uuid,
        group.model,
        interface_name=interface,
        mac_address=mac,
        skip_node_operations=group.skip_node_operations,
    )


def build_inventory(
    config: DriverConfig, node: str, hotplugged: Sequence[HotplugDevice] = ()
) -> Inventory:
    """Every device of the node, in publishing order: GPUs (by index), NICs, hot-plugged GPUs.

    GPU and NIC indexes run across groups; PCIe roots pair NIC ``i`` with GPU ``i`` so that a
    ``matchAttribute: resource.kubernetes.io/pcieRoot`` constraint finds aligned pairs.
    """
    devices: list[Device] = []
    infos: list[DeviceInfo] = []
    counter_sets: list[CounterSet] = []
    problems: list[str] = []
    index = 0
    for group in config.gpus:
        for _ in range(group.count):
            if group.partitions is not None:
                table = PARTITION_TABLES[group.partitions]
                counter_set, gpu_devices, gpu_infos = partitioned_gpu(
                    node,
                    index,
                    table,
                    group.model,
                    numa_node=group.numa_node,
                    skip_node_operations=group.skip_node_operations,
                )
                counter_sets.append(counter_set)
                devices.extend(gpu_devices)
                infos.extend(gpu_infos)
            else:
                device, info = plain_gpu(
                    node,
                    f"gpu-{index}",
                    index,
                    group.model or "generic-gpu",
                    group.memory or Quantity("16Gi"),
                    numa_node=group.numa_node,
                    skip_node_operations=group.skip_node_operations,
                )
                devices.append(device)
                infos.append(info)
            index += 1
    nic_index = 0
    for nic_group in config.nics:
        for _ in range(nic_group.count):
            device, info = shared_nic(node, nic_index, nic_group, pcie_index=nic_index)
            devices.append(device)
            infos.append(info)
            nic_index += 1
    taken = {d.name for d in devices}
    for hp in hotplugged:
        if hp.name in taken:
            problems.append(f"hot-plug device {hp.name!r}: a local device has that name")
            continue
        taken.add(hp.name)
        device, info = plain_gpu(
            node,
            hp.name,
            None,
            hp.model,
            hp.memory or Quantity("16Gi"),
            gpu_uuid=hp.uuid,
            hotplugged=True,
        )
        devices.append(device)
        infos.append(info)
    return Inventory(
        devices=tuple(devices),
        counter_sets=tuple(counter_sets),
        info={i.name: i for i in infos},
        device_node_host_path=config.device_node_host_path,
        problems=tuple(problems),
    )
