"""Where the driver's devices come from: one interface, the profile source and the NVML source.

The service asks a source for the node's inventory at every resync, lets it set up devices at
prepare and tear them down at unprepare (dynamic MIG creates and destroys instances there), and
hears from it which devices turned unhealthy (NVML's critical events). The profile source
invents its devices, so it has nothing to set up and nothing to report.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from operators.driver import nvidia
from operators.driver.cdi import DeviceEdits
from operators.driver.profiles import (
    DeviceInfo,
    DriverConfig,
    HotplugDevice,
    Inventory,
    build_inventory,
)

#: Called with (device name, why) when the source sees a device turn unhealthy.
Report = Callable[[str, str], Awaitable[None]]


class SourceError(Exception):
    """A device could not be set up or torn down (e.g. NVML refused to create an instance)."""


class DeviceSource(Protocol):
    def inventory(self, node: str, hotplugged: Sequence[HotplugDevice]) -> Inventory:
        """The node's devices now."""
        ...

    async def prepare(self, devices: Sequence[DeviceInfo]) -> dict[str, DeviceEdits]:
        """Set up allocated devices; the CDI edits of those that only exist from now on."""
        ...

    async def unprepare(self, devices: Sequence[DeviceInfo]) -> None:
        """Tear down what ``prepare`` set up."""
        ...

    async def watch(self, report: Report, stop: asyncio.Event) -> None:
        """Report devices that turn unhealthy until ``stop`` is set."""
        ...


class ProfileSource:
    """Simulated devices from the profile config (and hot-plugged fabric GPUs)."""

    def __init__(self, config: DriverConfig) -> None:
        self.config = config

    def inventory(self, node: str, hotplugged: Sequence[HotplugDevice]) -> Inventory:
        return build_inventory(self.config, node, hotplugged)

    async def prepare(self, devices: Sequence[DeviceInfo]) -> dict[str, DeviceEdits]:
        return {}

    async def unprepare(self, devices: Sequence[DeviceInfo]) -> None:
        return None

    async def watch(self, report: Report, stop: asyncio.Event) -> None:
        await stop.wait()


class NvmlBackend(Protocol):
    """The NVML calls the NVML source needs (``nvml.PynvmlBackend``, ``nvml_fixture``)."""

    def snapshot(self) -> nvidia.NvmlSnapshot: ...

    def host_files(self, driver_version: str) -> nvidia.HostFiles: ...

    def mig_caps(self, minor: int, gi_id: int, ci_id: int) -> tuple[str, ...]: ...

    def create_mig(self, minor: int, profile_id: int, start: int) -> nvidia.MigInstance: ...

    def destroy_mig(self, minor: int, gi_id: int, ci_id: int) -> None: ...

    def wait_event(self, timeout_ms: int) -> nvidia.HealthEvent | None: ...


def _placement(name: str) -> tuple[int, int, int, int]:
    """``gpu-0-mig-19-3-1`` -> (minor 0, profile id 19, start 3, size 1)."""
    _, minor, _, profile_id, start, size = name.split("-")
    return int(minor), int(profile_id), int(start), int(size)


class NvmlSource:
    """Real NVIDIA GPUs through NVML; never changes MIG mode, persistence or clocks. With
    ``dynamic_mig``, prepare creates the allocated partition's instance and unprepare
    destroys it."""

    def __init__(
        self, backend: NvmlBackend, *, dynamic_mig: bool = False, event_timeout_ms: int = 1000
    ) -> None:
        self.backend = backend
        self.dynamic_mig = dynamic_mig
        self.event_timeout_ms = event_timeout_ms
        self.snapshot: nvidia.NvmlSnapshot | None = None
        self.host: nvidia.HostFiles | None = None

    def _read(self) -> tuple[nvidia.NvmlSnapshot, nvidia.HostFiles]:
        snapshot = self.backend.snapshot()
        if self.host is None or self.snapshot is None:
            self.host = self.backend.host_files(snapshot.driver_version)
        self.snapshot = snapshot
        return snapshot, self.host

    def inventory(self, node: str, hotplugged: Sequence[HotplugDevice] = ()) -> Inventory:
        snapshot, host = self._read()
        caps = {
            (gpu.minor, mig.gi_id): self.backend.mig_caps(gpu.minor, mig.gi_id, mig.ci_id)
            for gpu in snapshot.gpus
            if gpu.mig_enabled and not self.dynamic_mig
            for mig in gpu.mig_devices
        }
        return nvidia.gpu_inventory(snapshot, dynamic_mig=self.dynamic_mig, host=host, gi_caps=caps)

    def _dynamic(self, devices: Sequence[DeviceInfo]) -> list[DeviceInfo]:
        return [d for d in devices if self.dynamic_mig and d.kind == "mig"]

    async def prepare(self, devices: Sequence[DeviceInfo]) -> dict[str, DeviceEdits]:
        snapshot, host = self._read()
        gpus = {g.minor: g for g in snapshot.gpus}
        edits: dict[str, DeviceEdits] = {}
        created: list[tuple[int, nvidia.MigInstance]] = []
        try:
            for info in self._dynamic(devices):
                minor, profile_id, start, _ = _placement(info.name)
                mig = self._instance(snapshot, minor, profile_id, start)
                if mig is None:
                    mig = await asyncio.to_thread(self.backend.create_mig, minor, profile_id, start)
                    created.append((minor, mig))
                caps = self.backend.mig_caps(minor, mig.gi_id, mig.ci_id)
                edits[info.name] = nvidia.device_edits(gpus[minor], mig.uuid, host, caps)
        except Exception as e:
            for minor, mig in created:
                await asyncio.to_thread(self.backend.destroy_mig, minor, mig.gi_id, mig.ci_id)
            raise SourceError(f"could not create the MIG instance: {e}") from e
        return edits

    @staticmethod
    def _instance(
        snapshot: nvidia.NvmlSnapshot, minor: int, profile_id: int, start: int
    ) -> nvidia.MigInstance | None:
        for gpu in snapshot.gpus:
            for mig in gpu.mig_devices if gpu.minor == minor else ():
                if (mig.profile_id, mig.start) == (profile_id, start):
                    return mig
        return None

    async def unprepare(self, devices: Sequence[DeviceInfo]) -> None:
        snapshot, _ = self._read()
        for info in self._dynamic(devices):
            minor, profile_id, start, _ = _placement(info.name)
            mig = self._instance(snapshot, minor, profile_id, start)
            if mig is not None:  # already gone: unprepare is idempotent
                await asyncio.to_thread(self.backend.destroy_mig, minor, mig.gi_id, mig.ci_id)

    async def watch(self, report: Report, stop: asyncio.Event) -> None:
        while not stop.is_set():
            event = await asyncio.to_thread(self.backend.wait_event, self.event_timeout_ms)
            if event is None or (why := nvidia.critical(event)) is None:
                continue
            snapshot = self.snapshot or self.backend.snapshot()
            device = nvidia.device_of(snapshot, event.uuid)
            if device is not None:
                await report(device, why)
