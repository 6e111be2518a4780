"""A fake NVML that answers from a fixture directory (what NVML and nvidia-smi read on a real GPU).

Tests and ``hack/gpu/check.sh --fake`` use it in place of ``libnvidia-ml``: the snapshot is the
fixture's GPU (optionally switched to MIG mode with given instances), MIG instances are created
and destroyed in memory under NVML's placement rules, and events are whatever was injected. It
ships in the package, not under tests/, because ``check.sh --fake`` runs from a wheel too.
"""

from __future__ import annotations

import json
import queue
import re
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from operators.driver import nvidia

LIB_DIR = "/usr/local/nvidia/lib64"


class FixtureError(RuntimeError):
    """What NVML would refuse (NVML_ERROR_INSUFFICIENT_RESOURCES and the like)."""


def _profiles(nvml: dict[str, Any], placements: dict[str, Any]) -> tuple[nvidia.MigProfile, ...]:
    out = []
    for entry in nvml["gpu_instance_profiles_v"]:
        info = entry["info"]
        if "error" in info:
            continue
        out.append(
            nvidia.MigProfile(
                id=info["id"],
                name=nvidia.profile_name(info["name"]),
                slices=info["sliceCount"],
                multiprocessors=info["multiprocessorCount"],
                copy_engines=info["copyEngineCount"],
                decoders=info["decoderCount"],
                encoders=info["encoderCount"],
                jpeg_engines=info["jpegCount"],
                ofa_engines=info["ofaCount"],
                memory_mib=info["memorySizeMB"],
                instance_count=info["instanceCount"],
                placements=tuple(
                    (int(s), int(n))
                    for s, n in placements["placements_by_profile_id"][str(info["id"])]
                ),
            )
        )
    return tuple(out)


def load_snapshot(directory: str | Path) -> nvidia.NvmlSnapshot:
    """The fixture's GPUs as NVML reported them (MIG mode as read)."""
    root = Path(directory)
    nvml = json.loads((root / "nvml.json").read_text())
    extra = json.loads((root / "nvml-placements-events.json").read_text())
    gpus = []
    for g in nvml["gpus"]:
        major, minor = g["CudaComputeCapability"]
        gpus.append(
            nvidia.Gpu(
                index=g["index"],
                minor=g["MinorNumber"],
                uuid=g["UUID"],
                name=g["Name"],
                brand=g["Brand"],
                architecture=g["Architecture"],
                compute_capability=(major, minor),
                memory_bytes=g["Memory"]["total"],
                pci_bus_id=g["PciInfo"]["busId"],
                mig_enabled=bool(g["MigMode"][0]),
                profiles=_profiles(g, extra),
            )
        )
    return nvidia.NvmlSnapshot(nvml["driver"], nvml["cuda_driver"], tuple(gpus))


def fixture_libraries(directory: str | Path) -> list[str]:
    """Every file the fixture lists in the driver's lib64."""
    extra = json.loads((Path(directory) / "nvml-placements-events.json").read_text())
    return list(extra["lib64"])


def fixture_device_nodes(directory: str | Path) -> list[str]:
    """The character devices of the fixture's ``dev-nodes.txt`` (``/dev`` and nvidia-caps)."""
    nodes: list[str] = []
    folder = ""
    for line in (Path(directory) / "dev-nodes.txt").read_text().splitlines():
        if line.startswith("/dev") and line.endswith(":"):
            folder = line[:-1]
        elif line.startswith("== /dev"):
            folder = "/dev"
        elif re.match(r"^c[rwx-]{9}", line):
            nodes.append(f"{folder}/{line.split()[-1]}")
    return nodes


class FixtureNvml:
    """An ``NvmlBackend`` over a fixture; ``mig=True`` is the same GPU in MIG mode."""

    def __init__(
        self,
        directory: str | Path,
        *,
        mig: bool = False,
        instances: tuple[tuple[int, int], ...] = (),
    ) -> None:
        self.directory = Path(directory)
        base = load_snapshot(directory)
        self.base = nvidia.NvmlSnapshot(
            base.driver_version,
            base.cuda_driver_version,
            tuple(replace(g, mig_enabled=mig) for g in base.gpus),
        )
        self.instances: dict[int, list[nvidia.MigInstance]] = {g.minor: [] for g in base.gpus}
        self.events: queue.Queue[nvidia.HealthEvent] = queue.Queue()
        self.created = 0
        self.destroyed = 0
        for profile_id, start in instances:
            self.create_mig(base.gpus[0].minor, profile_id, start)

    def snapshot(self) -> nvidia.NvmlSnapshot:
        return nvidia.NvmlSnapshot(
            self.base.driver_version,
            self.base.cuda_driver_version,
            tuple(replace(g, mig_devices=tuple(self.instances[g.minor])) for g in self.base.gpus),
        )

    def host_files(self, driver_version: str) -> nvidia.HostFiles:
        names = fixture_libraries(self.directory)
        return nvidia.HostFiles(nvidia.driver_libraries(LIB_DIR, names, driver_version))

    def mig_caps(self, minor: int, gi_id: int, ci_id: int) -> tuple[str, ...]:
        # Made-up minors, distinct per instance; a real GPU reads them from /proc.
        gi = 10 * (gi_id + 1) + 2
        return (f"/dev/nvidia-caps/nvidia-cap{gi}", f"/dev/nvidia-caps/nvidia-cap{gi + 1 + ci_id}")

    def create_mig(self, minor: int, profile_id: int, start: int) -> nvidia.MigInstance:
        gpu = next(g for g in self.base.gpus if g.minor == minor)
        if not gpu.mig_enabled:
            raise FixtureError("MIG mode is disabled")
        profile = next((p for p in gpu.profiles if p.id == profile_id), None)
        sizes = dict(profile.placements) if profile else {}
        if profile is None or start not in sizes:
            raise FixtureError(f"profile {profile_id} cannot start at memory slice {start}")
        taken = {i for m in self.instances[minor] for i in range(m.start, m.start + m.size)}
        if taken & set(range(start, start + sizes[start])):
            raise FixtureError("insufficient resources: the placement overlaps an instance")
        used = [
            next(p for p in gpu.profiles if p.id == m.profile_id) for m in self.instances[minor]
        ]
        if sum(p.slices for p in used) + profile.slices > nvidia.full_profile(gpu).slices:
            raise FixtureError("insufficient resources: no compute slices left")
        gi_id = 1 + max((m.gi_id for m in self.instances[minor]), default=0)
        mig_uuid = f"MIG-{uuid.uuid5(uuid.NAMESPACE_URL, f'{gpu.uuid}/{gi_id}/{self.created}')}"
        mig = nvidia.MigInstance(mig_uuid, profile_id, start, sizes[start], gi_id, 0)
        self.instances[minor].append(mig)
        self.created += 1
        return mig

    def destroy_mig(self, minor: int, gi_id: int, ci_id: int) -> None:
        before = len(self.instances[minor])
        self.instances[minor] = [m for m in self.instances[minor] if m.gi_id != gi_id]
        if len(self.instances[minor]) == before:
            raise FixtureError(f"no GPU instance {gi_id}")
        self.destroyed += 1

    def inject(self, event: nvidia.HealthEvent) -> None:
        self.events.put(event)

    def wait_event(self, timeout_ms: int) -> nvidia.HealthEvent | None:
        try:
            return self.events.get(timeout=timeout_ms / 1000)
        except queue.Empty:
            return None
