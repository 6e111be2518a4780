"""The NVML backend: reads real GPUs through ``pynvml`` (the optional extra ``kopf-dra[nvidia]``).

Thin I/O only: every answer becomes ``nvidia`` data at once, and everything else is decided
there. ``pynvml`` is imported when this backend is built (``--devices nvml``), never at import
time, so the driver runs without it on the profile source. Only reads, plus creating and
destroying MIG instances for dynamic MIG: MIG mode, persistence and clocks are never touched.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from operators.driver import nvidia

#: nvmlGpuInstanceProfileInfo's sliceCount -> NVML_COMPUTE_INSTANCE_PROFILE_* of one compute
#: instance that takes the whole GPU instance.
_CI_PROFILE = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}
_PROFILE_COUNT = 16
_MAX_PLACEMENTS = 32
CAPABILITIES = "/proc/driver/nvidia/capabilities"


class NvmlUnavailable(RuntimeError):
    """pynvml is not installed or libnvidia-ml cannot be loaded."""


def load_pynvml() -> Any:
    try:
        return importlib.import_module("pynvml")
    except ImportError as e:
        raise NvmlUnavailable(
            "--devices nvml needs NVIDIA's bindings: pip install 'kopf-dra[nvidia]'"
        ) from e


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def pcie_root(pci_bus_id: str, sysfs: str = "/sys") -> str | None:
    """The PCIe root complex from sysfs (``/sys/devices/pci0000:00/...``), as Kubernetes'
    deviceattribute does; the bus ID rule when sysfs does not say."""
    path = Path(os.path.realpath(f"{sysfs}/bus/pci/devices/{nvidia.bus_id(pci_bus_id)}"))
    for part in path.parts:
        if part.startswith("pci") and ":" in part:
            return part
    return nvidia.pcie_root_from_bus_id(pci_bus_id)


def numa_node(pci_bus_id: str, sysfs: str | Path = "/sys") -> int | None:
    """The NUMA node of a PCI function, as deviceattribute's GetNUMANodeAttributeByPCIBusID
    reads it: the integer in ``<sysfs>/bus/pci/devices/<BDF>/numa_node``. None where the
    attribute must be left out: -1 (the kernel knows no affinity), no such file, no integer,
    or a bus ID that is not a BDF."""
    bdf = nvidia.pci_bdf(pci_bus_id)
    if bdf is None:
        return None
    try:
        text = (Path(sysfs) / "bus" / "pci" / "devices" / bdf / "numa_node").read_text().strip()
    except OSError:
        return None
    if not re.fullmatch(r"-?[0-9]+", text):
        return None
    node = int(text)
    return node if node >= 0 else None


def _access_minor(path: Path) -> int | None:
    try:
        return nvidia.mig_capability_minor(path.read_text())
    except OSError:
        return None


class PynvmlBackend:
    """``sources.NvmlBackend`` over the real library. ``driver_root`` (e.g. /usr/local/nvidia)
    is where the libraries are; without it they are found with ``ldconfig -p``."""

    def __init__(self, driver_root: str | None = None, dev_root: str = "/dev") -> None:
        self.nvml = load_pynvml()
        self.driver_root = driver_root
        self.dev_root = dev_root
        library = self._library_path()
        try:
            if library is not None:
                # pynvml loads libnvidia-ml.so.1 by name; preload the driver root's copy.
                ctypes.CDLL(library)
            self.nvml.nvmlInit()
        except (OSError, self.nvml.NVMLError) as e:
            raise NvmlUnavailable(f"cannot load NVML: {e}") from e
        self._events: Any = None

    def _library_path(self) -> str | None:
        if not self.driver_root:
            return None
        for sub in ("lib64", "lib", "usr/lib64", "usr/lib/x86_64-linux-gnu"):
            candidate = Path(self.driver_root) / sub / "libnvidia-ml.so.1"
            if candidate.exists():
                return str(candidate)
        return None

    def close(self) -> None:
        self.nvml.nvmlShutdown()

    # --- reading -------------------------------------------------------------------------

    def _profiles(self, handle: Any) -> tuple[nvidia.MigProfile, ...]:
        n = self.nvml
        out = []
        for i in range(_PROFILE_COUNT):
            try:
                info = n.nvmlDeviceGetGpuInstanceProfileInfoV(handle, i)
            except n.NVMLError:
                continue  # not supported on this GPU
            count = ctypes.c_uint(_MAX_PLACEMENTS)
            placements = (n.c_nvmlGpuInstancePlacement_t * _MAX_PLACEMENTS)()
            try:
                n.nvmlDeviceGetGpuInstancePossiblePlacements(
                    handle, info.id, placements, ctypes.byref(count)
                )
            except n.NVMLError:
                continue
            out.append(
                nvidia.MigProfile(
                    id=int(info.id),
                    name=nvidia.profile_name(_text(info.name)),
                    slices=int(info.sliceCount),
                    multiprocessors=int(info.multiprocessorCount),
                    copy_engines=int(info.copyEngineCount),
                    decoders=int(info.decoderCount),
                    encoders=int(info.encoderCount),
                    jpeg_engines=int(info.jpegCount),
                    ofa_engines=int(info.ofaCount),
                    memory_mib=int(info.memorySizeMB),
                    instance_count=int(info.instanceCount),
                    placements=tuple(
                        (int(p.start), int(p.size)) for p in placements[: count.value]
                    ),
                )
            )
        return tuple(out)

    def _mig_devices(self, handle: Any) -> tuple[nvidia.MigInstance, ...]:
        n = self.nvml
        out = []
        for j in range(int(n.nvmlDeviceGetMaxMigDeviceCount(handle))):
            try:
                mig = n.nvmlDeviceGetMigDeviceHandleByIndex(handle, j)
            except n.NVMLError:
                continue
            gi_id = int(n.nvmlDeviceGetGpuInstanceId(mig))
            info = n.nvmlGpuInstanceGetInfo(n.nvmlDeviceGetGpuInstanceById(handle, gi_id))
            out.append(
                nvidia.MigInstance(
                    uuid=_text(n.nvmlDeviceGetUUID(mig)),
                    profile_id=int(info.profileId),
                    start=int(info.placement.start),
                    size=int(info.placement.size),
                    gi_id=gi_id,
                    ci_id=int(n.nvmlDeviceGetComputeInstanceId(mig)),
                )
            )
        return tuple(out)

    def _gpu(self, index: int) -> nvidia.Gpu:
        n = self.nvml
        h = n.nvmlDeviceGetHandleByIndex(index)
        try:
            mig_enabled = int(n.nvmlDeviceGetMigMode(h)[0]) == 1
        except n.NVMLError:
            mig_enabled = False  # not MIG-capable
        major, minor = n.nvmlDeviceGetCudaComputeCapability(h)
        pci = _text(n.nvmlDeviceGetPciInfo(h).busId)
        return nvidia.Gpu(
            index=index,
            minor=int(n.nvmlDeviceGetMinorNumber(h)),
            uuid=_text(n.nvmlDeviceGetUUID(h)),
            name=_text(n.nvmlDeviceGetName(h)),
            brand=int(n.nvmlDeviceGetBrand(h)),
            architecture=int(n.nvmlDeviceGetArchitecture(h)),
            compute_capability=(int(major), int(minor)),
            memory_bytes=int(n.nvmlDeviceGetMemoryInfo(h).total),
            pci_bus_id=pci,
            mig_enabled=mig_enabled,
            profiles=self._profiles(h) if mig_enabled else (),
            mig_devices=self._mig_devices(h) if mig_enabled else (),
            pcie_root=pcie_root(pci),
            numa_node=numa_node(pci),
        )

    def snapshot(self) -> nvidia.NvmlSnapshot:
        n = self.nvml
        return nvidia.NvmlSnapshot(
            driver_version=_text(n.nvmlSystemGetDriverVersion()),
            cuda_driver_version=int(n.nvmlSystemGetCudaDriverVersion()),
            gpus=tuple(self._gpu(i) for i in range(int(n.nvmlDeviceGetCount()))),
        )

    def host_files(self, driver_version: str) -> nvidia.HostFiles:
        if self.driver_root:
            for sub in ("lib64", "lib", "usr/lib64", "usr/lib/x86_64-linux-gnu"):
                folder = Path(self.driver_root) / sub
                if (folder / f"libnvidia-ml.so.{driver_version}").exists():
                    names = os.listdir(folder)
                    libs = nvidia.driver_libraries(str(folder), names, driver_version)
                    return nvidia.HostFiles(libs, self.dev_root)
        listing = subprocess.run(
            ["ldconfig", "-p"], capture_output=True, text=True, check=False, timeout=10
        ).stdout
        sonames = nvidia.ldconfig_libraries(listing)
        real = {os.path.realpath(p) for p in sonames}
        return nvidia.HostFiles(tuple(sorted({*sonames, *real})), self.dev_root)

    def mig_caps(self, minor: int, gi_id: int, ci_id: int) -> tuple[str, ...]:
        gi = Path(CAPABILITIES) / f"gpu{minor}" / "mig" / f"gi{gi_id}"
        minors = [_access_minor(gi / "access"), _access_minor(gi / f"ci{ci_id}" / "access")]
        dev = self.dev_root.rstrip("/")
        return tuple(f"{dev}/nvidia-caps/nvidia-cap{m}" for m in minors if m is not None)

    # --- dynamic MIG ---------------------------------------------------------------------

    def _handle(self, minor: int) -> Any:
        n = self.nvml
        for i in range(int(n.nvmlDeviceGetCount())):
            h = n.nvmlDeviceGetHandleByIndex(i)
            if int(n.nvmlDeviceGetMinorNumber(h)) == minor:
                return h
        raise nvidia_error(f"no GPU with minor number {minor}")

    def create_mig(self, minor: int, profile_id: int, start: int) -> nvidia.MigInstance:
        n = self.nvml
        h = self._handle(minor)
        profile = next(p for p in self._profiles(h) if p.id == profile_id)
        size = dict(profile.placements)[start]
        placement = n.c_nvmlGpuInstancePlacement_t()
        placement.start, placement.size = start, size
        gi = n.nvmlDeviceCreateGpuInstanceWithPlacement(h, profile_id, placement)
        gi_id = int(n.nvmlGpuInstanceGetInfo(gi).id)
        ci_profile = n.nvmlGpuInstanceGetComputeInstanceProfileInfo(
            gi, _CI_PROFILE[profile.slices], 0
        )
        ci = n.nvmlGpuInstanceCreateComputeInstance(gi, ci_profile.id)
        ci_id = int(n.nvmlComputeInstanceGetInfo(ci).id)
        for mig in self._mig_devices(h):
            if mig.gi_id == gi_id:
                return nvidia.MigInstance(mig.uuid, profile_id, start, size, gi_id, ci_id)
        raise nvidia_error(f"created GPU instance {gi_id} but NVML shows no MIG device for it")

    def destroy_mig(self, minor: int, gi_id: int, ci_id: int) -> None:
        n = self.nvml
        gi = n.nvmlDeviceGetGpuInstanceById(self._handle(minor), gi_id)
        n.nvmlComputeInstanceDestroy(n.nvmlGpuInstanceGetComputeInstanceById(gi, ci_id))
        n.nvmlGpuInstanceDestroy(gi)

    # --- events --------------------------------------------------------------------------

    def _event_set(self) -> Any:
        n = self.nvml
        if self._events is None:
            self._events = n.nvmlEventSetCreate()
            wanted = nvidia.EVENT_XID_CRITICAL | nvidia.EVENT_GPU_UNAVAILABLE
            for i in range(int(n.nvmlDeviceGetCount())):
                h = n.nvmlDeviceGetHandleByIndex(i)
                supported = int(n.nvmlDeviceGetSupportedEventTypes(h))
                if supported & wanted:
                    n.nvmlDeviceRegisterEvents(h, supported & wanted, self._events)
        return self._events

    def wait_event(self, timeout_ms: int) -> nvidia.HealthEvent | None:
        n = self.nvml
        try:
            data = n.nvmlEventSetWait_v2(self._event_set(), timeout_ms)
        except n.NVMLError_Timeout:
            return None
        return nvidia.HealthEvent(
            event_type=int(data.eventType),
            uuid=_text(n.nvmlDeviceGetUUID(data.device)),
            xid=int(data.eventData),
        )


def nvidia_error(message: str) -> RuntimeError:
    return RuntimeError(message)
