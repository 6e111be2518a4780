"""NVIDIA GPUs as DRA devices (pure: what NVML reported in, devices, counters and CDI edits out).

What NVML says about a node is a ``NvmlSnapshot``; the NVML source reads it (``nvml.py``) and a
fixture can stand in for it (``nvml_fixture.py``). From it this module builds what the driver
publishes, shaped as NVIDIA's own DRA driver (NVIDIA/k8s-dra-driver-gpu) shapes it, so that a
selector written for that driver selects the same devices here:

* device names ``gpu-<minor>`` and ``gpu-<minor>-mig-<profile id>-<start>-<size>``;
* attributes in the ``gpu.nvidia.com`` domain with NVIDIA's names (``ATTRIBUTES``), versions as
  semver (``semver``), plus the standard ``resource.kubernetes.io/pcieRoot`` and, where the
  kernel knows it, ``resource.kubernetes.io/numaNode``; ``profile`` is the partition type a
  1.37 slice names (``partitionTypeAttribute``);
* MIG mode off: the whole GPU only (``migEnabled: false``); MIG mode on: the MIG devices that
  exist; dynamic MIG: every profile at every placement NVML allows. Partitions consume one
  shared counter set per GPU built from the placement rules (one counter per memory slice, the
  compute slices, multiprocessors and engines), so the allocator never hands out overlapping
  instances and the full-GPU profile conflicts with every other.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from operators.api.quantity import Quantity
from operators.api.resource import (
    Counter,
    CounterSet,
    Device,
    DeviceAttribute,
    DeviceCapacity,
    DeviceCounterConsumption,
)
from operators.driver.cdi import DeviceEdits
from operators.driver.profiles import (
    PCIE_ROOT_ATTRIBUTE,
    DeviceInfo,
    Inventory,
    capacities,
    consumed_counters,
    counter_set_name,
    engine_capacity,
    engine_consumption,
    numa_values,
)

DOMAIN = "gpu.nvidia.com"
#: The attributes every device carries (MIG devices add parentUUID, profile and placement).
ATTRIBUTES = (
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
    "migEnabled",
)
COMPUTE_SLICES = "compute-slices"
#: NVML's nvmlBrandType_t and nvmlDeviceArchitecture_t, named as go-nvlib names them.
BRANDS = {
    0: "Unknown",
    1: "Quadro",
    2: "Tesla",
    3: "NVS",
    4: "Grid",
    5: "GeForce",
    6: "Titan",
    7: "NvidiaVApps",
    8: "NvidiaVPC",
    9: "NvidiaVCS",
    10: "NvidiaVWS",
    11: "NvidiaCloudGaming",
    12: "QuadroRTX",
    13: "NvidiaRTX",
    14: "Nvidia",
    15: "GeForceRTX",
    16: "TitanRTX",
}
ARCHITECTURES = {
    2: "Kepler",
    3: "Maxwell",
    4: "Pascal",
    5: "Volta",
    6: "Turing",
    7: "Ampere",
    8: "Ada Lovelace",
    9: "Hopper",
    10: "Blackwell",
}
#: Xids that report an application's fault, not the GPU's (NVIDIA's driver skips them too).
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})
EVENT_XID_CRITICAL = 0x8
EVENT_GPU_UNAVAILABLE = 0x4000
CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
_NVIDIA_LIBRARY = re.compile(
    r"^lib(cuda|cudadebugger|nvidia-[a-z0-9-]+|nvcuvid|nvoptix|EGL_nvidia|GLX_nvidia|"
    r"GLESv1_CM_nvidia|GLESv2_nvidia|vdpau_nvidia)\.so\.[0-9.]+$"
)


# --- what NVML reports -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MigProfile:
    """One GPU instance profile (nvmlGpuInstanceProfileInfo) and its placements."""

    id: int
    name: str
    slices: int
    multiprocessors: int
    copy_engines: int
    decoders: int
    encoders: int
    jpeg_engines: int
    ofa_engines: int
    memory_mib: int
    instance_count: int
    #: (start, size) in memory slices, from nvmlDeviceGetGpuInstancePossiblePlacements.
    placements: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class MigInstance:
    """A MIG device that exists: its GPU and compute instance and where it sits."""

    uuid: str
    profile_id: int
    start: int
    size: int
    gi_id: int = 0
    ci_id: int = 0


@dataclass(frozen=True, slots=True)
class Gpu:
    """One physical GPU as NVML reports it."""

    index: int
    minor: int
    uuid: str
    name: str
    brand: int
    architecture: int
    compute_capability: tuple[int, int]
    memory_bytes: int
    pci_bus_id: str
    mig_enabled: bool = False
    profiles: tuple[MigProfile, ...] = ()
    mig_devices: tuple[MigInstance, ...] = ()
    pcie_root: str | None = None
    #: The PCI function's NUMA node from sysfs (``nvml.numa_node``); None: no affinity known.
    numa_node: int | None = None


@dataclass(frozen=True, slots=True)
class NvmlSnapshot:
    """Everything the driver publishes comes from here."""

    driver_version: str
    cuda_driver_version: int
    gpus: tuple[Gpu, ...] = ()


@dataclass(frozen=True, slots=True)
class HostFiles:
    """What a container needs from the host besides the GPU's own node: libraries, dev root."""

    libraries: tuple[str, ...] = ()
    dev_root: str = "/dev"


# --- formatting ------------------------------------------------------------------------------


def semver(version: str) -> str:
    """NVIDIA's numbers as semver: numeric parts without leading zeros, padded to three
    (``580.159.04`` -> ``580.159.4``, ``9.0`` -> ``9.0.0``); a fourth part is dropped."""
    parts = version.strip().split(".")
    if not all(p.isdigit() for p in parts):
        raise ValueError(f"not a numeric version: {version!r}")
    numbers = [int(p) for p in parts[:3]] + [0] * (3 - min(len(parts), 3))
    return ".".join(str(n) for n in numbers)


def cuda_version(raw: int) -> str:
    """nvmlSystemGetCudaDriverVersion's integer (13000) as ``13.0``."""
    return f"{raw // 1000}.{raw % 1000 // 10}"


def bus_id(nvml_bus_id: str) -> str:
    """NVML's ``00000000:00:06.0`` as Linux (and NVIDIA's driver) spell it: ``0000:00:06.0``."""
    value = nvml_bus_id.strip().lower()
    if len(value.split(":")[0]) == 8 and value.startswith("0000"):
        value = value[4:]
    return value


#: Extended BDF notation as Kubernetes' deviceattribute accepts it (and sysfs names devices).
_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$")


def pci_bdf(nvml_bus_id: str) -> str | None:
    """The bus ID as ``<domain>:<bus>:<device>.<function>`` with a four-digit domain, the form
    deviceattribute's helpers insist on and ``/sys/bus/pci/devices`` uses; None when NVML's
    answer does not reduce to it (a domain above ffff)."""
    value = bus_id(nvml_bus_id)
    return value if _BDF.match(value) else None


def pcie_root_from_bus_id(pci_bus_id: str) -> str | None:
    """A device on bus 0 sits on its root complex (``pci<domain>:00``); deeper ones need sysfs."""
    domain, bus, _ = bus_id(pci_bus_id).split(":", 2)
    return f"pci{domain}:{bus}" if int(bus, 16) == 0 else None


def profile_name(nvml_name: str) -> str:
    """``MIG 1g.10gb+me`` -> ``1g.10gb+me``."""
    return nvml_name.removeprefix("MIG ").strip()


def mig_device_name(gpu: Gpu, profile_id: int, start: int, size: int) -> str:
    return f"gpu-{gpu.minor}-mig-{profile_id}-{start}-{size}"


def gpu_device_name(gpu: Gpu) -> str:
    return f"gpu-{gpu.minor}"


# --- devices ---------------------------------------------------------------------------------


def _attr(name: str) -> str:
    return f"{DOMAIN}/{name}"


def _common(snapshot: NvmlSnapshot, gpu: Gpu) -> dict[str, DeviceAttribute]:
    major, minor = gpu.compute_capability
    values: dict[str, DeviceAttribute] = {
        _attr("productName"): DeviceAttribute.of(gpu.name),
        _attr("brand"): DeviceAttribute.of(BRANDS.get(gpu.brand, "Unknown")),
        _attr("architecture"): DeviceAttribute.of(ARCHITECTURES.get(gpu.architecture, "Unknown")),
        _attr("cudaComputeCapability"): DeviceAttribute(version=semver(f"{major}.{minor}")),
        _attr("driverVersion"): DeviceAttribute(version=semver(snapshot.driver_version)),
        _attr("cudaDriverVersion"): DeviceAttribute(
            version=semver(cuda_version(snapshot.cuda_driver_version))
        ),
        _attr("pcieBusID"): DeviceAttribute.of(bus_id(gpu.pci_bus_id)),
        _attr("index"): DeviceAttribute.of(gpu.index),
        _attr("minor"): DeviceAttribute.of(gpu.minor),
        _attr("migEnabled"): DeviceAttribute.of(gpu.mig_enabled),
    }
    root = gpu.pcie_root or pcie_root_from_bus_id(gpu.pci_bus_id)
    if root:
        values[PCIE_ROOT_ATTRIBUTE] = DeviceAttribute.of(root)
    for name, value in numa_values(gpu.numa_node).items():
        values[name] = DeviceAttribute.of(value)
    return values


def whole_gpu(snapshot: NvmlSnapshot, gpu: Gpu) -> Device:
    """MIG mode off: the GPU as one device, its memory as capacity."""
    attributes = {
        _attr("type"): DeviceAttribute.of("gpu"),
        _attr("uuid"): DeviceAttribute.of(gpu.uuid),
        **_common(snapshot, gpu),
    }
    return Device(
        name=gpu_device_name(gpu),
        attributes=dict(sorted(attributes.items())),
        capacity={"memory": DeviceCapacity(value=Quantity(str(gpu.memory_bytes)))},
    )


def full_profile(gpu: Gpu) -> MigProfile:
    """The profile that takes the whole GPU (most memory slices, then most compute)."""
    return max(gpu.profiles, key=lambda p: (max(s for _, s in p.placements), p.slices))


def memory_slices(gpu: Gpu) -> int:
    return max(start + size for p in gpu.profiles for start, size in p.placements)


def _counter_values(p: MigProfile, slices: Iterable[int]) -> dict[str, str | int]:
    """What ``p`` placed on ``slices`` draws: the profile counters, plus compute slices."""
    values = engine_consumption(f"{p.memory_mib}Mi", p, slices=slices)
    return dict(sorted({COMPUTE_SLICES: p.slices, **values}.items()))


def gpu_counters(gpu: Gpu) -> CounterSet:
    """The GPU's shared counters: the full profile's resources, memory slices one by one."""
    values = _counter_values(full_profile(gpu), range(memory_slices(gpu)))
    return CounterSet(
        name=counter_set_name(gpu_device_name(gpu)),
        counters={k: Counter(value=Quantity(str(v))) for k, v in values.items()},
    )


def _consumption(gpu: Gpu, p: MigProfile, start: int, size: int) -> DeviceCounterConsumption:
    return DeviceCounterConsumption(
        counter_set=counter_set_name(gpu_device_name(gpu)),
        counters=consumed_counters(_counter_values(p, range(start, start + size))),
    )


def mig_device(
    snapshot: NvmlSnapshot, gpu: Gpu, p: MigProfile, start: int, size: int, uuid: str | None
) -> Device:
    """One partition: NVIDIA's MIG attributes and capacities, plus its counter consumption."""
    attributes: dict[str, DeviceAttribute] = {
        _attr("type"): DeviceAttribute.of("mig"),
        _attr("parentUUID"): DeviceAttribute.of(gpu.uuid),
        _attr("profile"): DeviceAttribute.of(p.name),
        _attr("memorySliceStart"): DeviceAttribute.of(start),
        _attr("memorySlices"): DeviceAttribute.of(size),
        **_common(snapshot, gpu),
    }
    if uuid:
        attributes[_attr("uuid")] = DeviceAttribute.of(uuid)
    return Device(
        name=mig_device_name(gpu, p.id, start, size),
        attributes=dict(sorted(attributes.items())),
        capacity=capacities(engine_capacity(f"{p.memory_mib}Mi", p)),
        consumes_counters=[_consumption(gpu, p, start, size)],
    )


def _placements(gpu: Gpu) -> list[tuple[MigProfile, int, int]]:
    """Every (profile, start, size), smallest profile first (the allocator's first fit then
    leaves big placements free), the full-GPU profile last."""
    rows = [(p, start, size) for p in gpu.profiles for start, size in p.placements]
    return sorted(rows, key=lambda r: (r[2], r[0].slices, r[0].memory_mib, r[0].id, r[1]))


def gpu_inventory(
    snapshot: NvmlSnapshot,
    *,
    dynamic_mig: bool = False,
    host: HostFiles | None = None,
    gi_caps: Mapping[tuple[int, int], tuple[str, ...]] | None = None,
) -> Inventory:
    """The node's devices: per GPU the whole GPU (MIG off), its MIG devices (MIG on), or every
    possible partition (MIG on, ``dynamic_mig``); ``gi_caps`` maps (minor, GI id) to the
    capability device nodes of an existing MIG device."""
    host = host or HostFiles()
    devices: list[Device] = []
    counter_sets: list[CounterSet] = []
    infos: list[DeviceInfo] = []
    edits: dict[str, DeviceEdits] = {}
    for gpu in snapshot.gpus:
        gpu_name = gpu_device_name(gpu)
        if not gpu.mig_enabled or not gpu.profiles:
            devices.append(whole_gpu(snapshot, gpu))
            infos.append(DeviceInfo(gpu_name, "gpu", gpu.uuid, gpu.name))
            edits[gpu_name] = device_edits(gpu, gpu.uuid, host)
            continue
        counter_sets.append(gpu_counters(gpu))
        profiles = {p.id: p for p in gpu.profiles}
        if dynamic_mig:
            for p, start, size in _placements(gpu):
                device = mig_device(snapshot, gpu, p, start, size, None)
                name = device.name or ""
                devices.append(device)
                infos.append(DeviceInfo(name, "mig", "", gpu.name, p.name, parent=gpu_name))
            continue
        for mig in sorted(gpu.mig_devices, key=lambda m: (m.start, m.size)):
            p = profiles[mig.profile_id]
            device = mig_device(snapshot, gpu, p, mig.start, mig.size, mig.uuid)
            name = device.name or ""
            devices.append(device)
            infos.append(DeviceInfo(name, "mig", mig.uuid, gpu.name, p.name, parent=gpu_name))
            caps = (gi_caps or {}).get((gpu.minor, mig.gi_id), ())
            edits[name] = device_edits(gpu, mig.uuid, host, caps)
    return Inventory(
        devices=tuple(devices),
        counter_sets=tuple(counter_sets),
        info={i.name: i for i in infos},
        device_node_host_path="",
        edits=edits,
        partition_type_attribute=_attr("profile"),
    )


# --- what a container gets (CDI) -------------------------------------------------------------


def device_edits(gpu: Gpu, uuid: str, host: HostFiles, mig_caps: Iterable[str] = ()) -> DeviceEdits:
    """The GPU's node, the control nodes, the MIG capability nodes and the driver libraries,
    as ``nvidia-ctk cdi generate`` gives them; ``NVIDIA_VISIBLE_DEVICES`` names the device."""
    dev = host.dev_root.rstrip("/") or ""
    nodes = [f"{dev}/nvidia{gpu.minor}", *(n.replace("/dev", dev, 1) for n in CONTROL_NODES)]
    nodes.extend(mig_caps)
    lib_dirs = sorted({lib.rsplit("/", 1)[0] for lib in host.libraries})
    env = {"NVIDIA_VISIBLE_DEVICES": uuid}
    if lib_dirs:
        env["LD_LIBRARY_PATH"] = ":".join(lib_dirs)
    return DeviceEdits(env=env, device_nodes=tuple(nodes), mounts=host.libraries)


def driver_libraries(lib_dir: str, names: Iterable[str], driver_version: str) -> tuple[str, ...]:
    """The driver's user-space libraries in one directory: each ``lib*.so.<driver version>``
    and its soname links (``libcuda.so.1``); the development links (``libcuda.so``) are not."""
    names = set(names)
    versioned = {n.removesuffix(f".{driver_version}") for n in names if n.endswith(driver_version)}
    chosen = {
        n
        for n in names
        if _NVIDIA_LIBRARY.match(n)
        and (n.endswith(driver_version) or n.rsplit(".so.", 1)[0] + ".so" in versioned)
    }
    return tuple(f"{lib_dir.rstrip('/')}/{n}" for n in sorted(chosen))


def ldconfig_libraries(ldconfig_output: str) -> tuple[str, ...]:
    """The driver's libraries from ``ldconfig -p``: the first path of each NVIDIA soname."""
    seen: dict[str, str] = {}
    for line in ldconfig_output.splitlines():
        name, sep, path = line.strip().partition(" => ")
        soname = name.split(" ", 1)[0]
        if sep and _NVIDIA_LIBRARY.match(soname) and soname not in seen:
            seen[soname] = path.strip()
    return tuple(seen[n] for n in sorted(seen))


def mig_capability_minor(access_file_text: str) -> int | None:
    """``DeviceFileMinor: 12`` in /proc/driver/nvidia/capabilities/.../access."""
    match = re.search(r"DeviceFileMinor:\s*(\d+)", access_file_text)
    return int(match.group(1)) if match else None


# --- health ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HealthEvent:
    """One NVML event: its type bit, the Xid (event data) and the GPU (or MIG device) UUID."""

    event_type: int
    uuid: str
    xid: int = 0
    extra: Mapping[str, str] = field(default_factory=dict)


def critical(event: HealthEvent) -> str | None:
    """Why the event makes the device unhealthy, or None (application Xids, other events)."""
    if event.event_type & EVENT_GPU_UNAVAILABLE or event.xid == 79:
        return f"NVML: the GPU fell off the bus (Xid {event.xid or 79})"
    if event.event_type & EVENT_XID_CRITICAL and event.xid not in APPLICATION_XIDS:
        return f"NVML: critical Xid {event.xid}"
    return None


def device_of(snapshot: NvmlSnapshot, uuid: str) -> str | None:
    """The GPU's device name for a GPU or MIG UUID (a GPU's name covers its partitions)."""
    for gpu in snapshot.gpus:
        if gpu.uuid == uuid or any(m.uuid == uuid for m in gpu.mig_devices):
            return gpu_device_name(gpu)
    return None
