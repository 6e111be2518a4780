"""Settings of the reservation cleanup."""

from __future__ import annotations

from pydantic import Field

from operators.settings import LeaderElectionSettings


class ReservationSettings(LeaderElectionSettings):
    workers: int = Field(default=4, description="Claims reconciled concurrently")
    lease_name: str = Field(default="kopf-dra-reservations", description="Name of the Lease")
