"""The driver's opaque configuration: parameters users pass in DeviceClasses and claims.

``spec.devices.config[].opaque`` with ``driver: <our driver>`` carries one of these objects
(by ``kind``). The API server stores them unchecked, so the driver is where a typo surfaces;
an invalid one fails that claim's preparation with a message, never the driver.

    kind: GpuConfig                       kind: NicConfig
    sharing:                              mtu: 9000
      strategy: TimeSlicing
      timeSlicing: {interval: Short}
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel


class ConfigError(ValueError):
    """An opaque config of our driver is invalid (a per-claim error)."""

    reason = "InvalidDeviceConfig"


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class TimeSlicing(_Model):
    interval: Literal["Default", "Short", "Medium", "Long"] = "Default"


class SpacePartitioning(_Model):
    partition_count: int = Field(default=1, ge=1, le=16)


class GpuSharing(_Model):
    strategy: Literal["Exclusive", "TimeSlicing", "SpacePartitioning"] = "Exclusive"
    time_slicing: TimeSlicing | None = None
    space_partitioning: SpacePartitioning | None = None

    @model_validator(mode="after")
    def _settings_match_strategy(self) -> GpuSharing:
        if self.time_slicing is not None and self.strategy != "TimeSlicing":
            raise ValueError("timeSlicing is only allowed with strategy TimeSlicing")
        if self.space_partitioning is not None and self.strategy != "SpacePartitioning":
            raise ValueError("spacePartitioning is only allowed with strategy SpacePartitioning")
        return self


class GpuConfig(_Model):
    """Applies to GPUs and their partitions."""

    api_version: str | None = None
    kind: Literal["GpuConfig"]
    sharing: GpuSharing = Field(default_factory=GpuSharing)

    def env(self) -> dict[str, str]:
        out: dict[str, str] = {"SHARING_STRATEGY": self.sharing.strategy}
        if self.sharing.strategy == "TimeSlicing":
            out["TIMESLICE_INTERVAL"] = (self.sharing.time_slicing or TimeSlicing()).interval
        if self.sharing.strategy == "SpacePartitioning":
            count = (self.sharing.space_partitioning or SpacePartitioning()).partition_count
            out["PARTITION_COUNT"] = str(count)
        return out


class NicConfig(_Model):
    """Applies to NICs."""

    api_version: str | None = None
    kind: Literal["NicConfig"]
    mtu: int = Field(default=1500, ge=576, le=9216)

    def env(self) -> dict[str, str]:
        return {"MTU": str(self.mtu)}


DeviceConfig = GpuConfig | NicConfig
_KINDS: dict[str, type[GpuConfig] | type[NicConfig]] = {
    "GpuConfig": GpuConfig,
    "NicConfig": NicConfig,
}


def parse_device_config(parameters: Any) -> DeviceConfig:
    """Parse one opaque ``parameters`` object; raises ConfigError saying what is wrong."""
    if not isinstance(parameters, dict):
        raise ConfigError("parameters must be an object")
    kind = parameters.get("kind")
    model = _KINDS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise ConfigError(f"kind {kind!r} is not one of {', '.join(sorted(_KINDS))}")
    try:
        return model.model_validate(parameters)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or kind}: {err['msg']}" for err in e.errors()
        )
        raise ConfigError(f"{kind}: {problems}") from None
