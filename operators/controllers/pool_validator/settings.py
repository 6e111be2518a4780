"""Settings of the pool validator."""

from __future__ import annotations

from pydantic import Field

from operators.settings import Settings


class PoolValidatorSettings(Settings):
    incomplete_grace_period: float = Field(
        default=60.0,
        ge=0,
        description="Seconds a pool may stay incomplete, or keep slices of an older generation, "
        "before it is reported (drivers publish and retire slices one at a time)",
    )
    max_problems: int = Field(
        default=64, ge=1, description="Problems listed per ResourcePoolStatus (all are counted)"
    )
    workers: int = Field(default=2, description="Pools validated concurrently")
