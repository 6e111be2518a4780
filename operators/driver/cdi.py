"""CDI (Container Device Interface) specs: how the container runtime learns what to inject.

One spec file per prepared claim, kind ``<driver>/claim``, one CDI device per allocated device
named ``<claim UID>-<device>`` (plus the share ID for shared devices), so specs of different
claims never clash and unpreparing a claim is deleting one file. The kubelet passes the returned
fully qualified IDs (``<kind>=<name>``) to the runtime, which applies the device's
``containerEdits`` (environment and device nodes). Files are written atomically: a runtime
scanning the directory never reads half a spec.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CDI_VERSION = "0.5.0"
CDI_CLASS = "claim"
_NOT_ENV = re.compile(r"[^A-Z0-9_]")


def cdi_kind(driver: str) -> str:
    """``<vendor>/<class>``: the driver name is the vendor."""
    return f"{driver}/{CDI_CLASS}"


def cdi_device_name(claim_uid: str, device: str, share_id: str | None = None) -> str:
    return f"{claim_uid}-{device}" + (f"-{share_id}" if share_id else "")


def qualified_id(driver: str, name: str) -> str:
    """The fully qualified CDI device ID the kubelet hands to the runtime."""
    return f"{cdi_kind(driver)}={name}"


def env_name(*parts: str) -> str:
    """``KOPF_DRA_<PARTS>`` in the characters environment variable names allow."""
    return "_".join(["KOPF_DRA", *(_NOT_ENV.sub("_", p.upper()) for p in parts)])


def spec_file_name(driver: str, claim_uid: str) -> str:
    return f"{driver}-{CDI_CLASS}_{claim_uid}.json"


def build_spec(driver: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    """A CDI spec with the given ``devices`` entries ({name, containerEdits})."""
    return {"cdiVersion": CDI_VERSION, "kind": cdi_kind(driver), "devices": devices}


@dataclass(frozen=True, slots=True)
class DeviceEdits:
    """What a real device adds to a container: env, host device nodes, read-only host files
    (driver libraries), each at the same path inside as outside."""

    env: Mapping[str, str] = field(default_factory=dict)
    device_nodes: tuple[str, ...] = ()
    mounts: tuple[str, ...] = ()


#: How nvidia-ctk mounts the driver's libraries.
MOUNT_OPTIONS = ["ro", "nosuid", "nodev", "bind"]


def device_entry(
    name: str,
    env: dict[str, str],
    device_nodes: list[dict[str, str]],
    mounts: tuple[str, ...] = (),
) -> dict[str, Any]:
    edits: dict[str, Any] = {"env": [f"{k}={v}" for k, v in sorted(env.items())]}
    if device_nodes:
        edits["deviceNodes"] = device_nodes
    if mounts:
        edits["mounts"] = [
            {"hostPath": m, "containerPath": m, "options": list(MOUNT_OPTIONS)} for m in mounts
        ]
    return {"name": name, "containerEdits": edits}


class CDIWriter:
    """Writes and removes claim spec files in the CDI directory (``/var/run/cdi``)."""

    def __init__(self, directory: str | Path, driver: str) -> None:
        self.directory = Path(directory)
        self.driver = driver

    def path(self, claim_uid: str) -> Path:
        return self.directory / spec_file_name(self.driver, claim_uid)

    def write(self, claim_uid: str, spec: dict[str, Any]) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        target = self.path(claim_uid)
        write_json_atomically(target, spec)
        return target

    def remove(self, claim_uid: str) -> bool:
        try:
            self.path(claim_uid).unlink()
        except FileNotFoundError:
            return False
        return True

    def exists(self, claim_uid: str) -> bool:
        return self.path(claim_uid).exists()


def write_json_atomically(target: Path, data: Any) -> None:
    """Write to a hidden temporary file in the same directory, fsync, then rename over target."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
