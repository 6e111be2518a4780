"""Settings of the reservation cleanup."""

from __future__ import annotations

from pydantic import Field

from operators.settings import Settings


class ReservationSettings(Settings):
    workers: int = Field(default=4, description="Claims reconciled concurrently")
