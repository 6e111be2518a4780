"""The driver's checkpoint: which claims are prepared, with everything needed to answer again.

The kubelet may repeat NodePrepareResources (after its own restart, or when it did not see the
answer) and calls NodeUnprepareResources after the claim may already be gone from the API.
Recording each prepared claim (devices, CDI IDs, the CDI spec itself) in a file makes both
idempotent across driver restarts, without reading the API again: a repeated prepare answers
from here and rewrites the CDI spec if a reboot emptied ``/var/run/cdi``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from operators.driver.cdi import write_json_atomically

CHECKPOINT_VERSION = 1


class CheckpointError(RuntimeError):
    """The checkpoint file exists but cannot be read: refuse to guess what is prepared."""


class PreparedDevice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    request_names: list[str] = Field(default_factory=list)
    pool: str
    device: str
    share_id: str | None = None
    cdi_device_ids: list[str] = Field(default_factory=list)


class PreparedClaim(BaseModel):
    """One prepared claim, as the kubelet identified it plus what we answered."""

    model_config = ConfigDict(extra="forbid")

    uid: str
    namespace: str
    name: str
    devices: list[PreparedDevice] = Field(default_factory=list)
    cdi_spec: dict[str, Any] = Field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class CheckpointData(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = CHECKPOINT_VERSION
    claims: dict[str, PreparedClaim] = Field(default_factory=dict)


class Checkpoint:
    """A JSON file, rewritten atomically on every change (claims per node are few)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.data = self._read()

    def _read(self) -> CheckpointData:
        try:
            raw = self.path.read_text()
        except FileNotFoundError:
            return CheckpointData()
        try:
            data = CheckpointData.model_validate(json.loads(raw))
        except (ValueError, ValidationError) as e:
            raise CheckpointError(f"checkpoint {self.path}: unreadable: {e}") from None
        if data.version != CHECKPOINT_VERSION:
            raise CheckpointError(
                f"checkpoint {self.path}: version {data.version}, expected {CHECKPOINT_VERSION}"
            )
        return data

    def get(self, uid: str) -> PreparedClaim | None:
        return self.data.claims.get(uid)

    def claims(self) -> list[PreparedClaim]:
        return list(self.data.claims.values())

    def add(self, claim: PreparedClaim) -> None:
        self.data.claims[claim.uid] = claim
        self._write()

    def remove(self, uid: str) -> bool:
        if self.data.claims.pop(uid, None) is None:
            return False
        self._write()
        return True

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomically(self.path, self.data.model_dump(mode="json"))
