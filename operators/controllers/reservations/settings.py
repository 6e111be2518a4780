"""Settings of the reservation cleanup."""

from __future__ import annotations

from pydantic import Field

from operators.settings import CLAIM_CONTROLLER_WORKERS, LeaderElectionSettings


class ReservationSettings(LeaderElectionSettings):
    workers: int = Field(
        default=CLAIM_CONTROLLER_WORKERS, description="Claims reconciled concurrently"
    )
    lease_name: str = Field(default="kopf-dra-reservations", description="Name of the Lease")
