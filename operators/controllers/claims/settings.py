"""Settings of the ``claims`` component: the claim-template controller's, plus the reservation
cleanup's under names of their own."""

from __future__ import annotations

from pydantic import Field

from operators.controllers.claim_templates.settings import ClaimTemplateSettings
from operators.controllers.reservations.settings import ReservationSettings
from operators.settings import CLAIM_CONTROLLER_WORKERS


class ClaimsSettings(ClaimTemplateSettings):
    reservation_workers: int = Field(
        default=CLAIM_CONTROLLER_WORKERS, description="Claims cleaned up concurrently"
    )
    reservations_lease_name: str = Field(
        default="kopf-dra-reservations",
        description="Name of the reservation cleanup's Lease (the same as `run reservations`, so "
        "the two never write at once)",
    )

    def templates(self) -> ClaimTemplateSettings:
        """The claim-template controller's part (this process serves the endpoints)."""
        values = self.model_dump(exclude={"reservation_workers", "reservations_lease_name"})
        return ClaimTemplateSettings(**{**values, "metrics_bind_address": ""})

    def reservations(self) -> ReservationSettings:
        """The reservation cleanup's part."""
        values = self.model_dump(
            exclude={
                "scheduler_names",
                "all_pods",
                "workers",
                "lease_name",
                "reservation_workers",
                "reservations_lease_name",
            }
        )
        return ReservationSettings(
            **{
                **values,
                "metrics_bind_address": "",
                "workers": self.reservation_workers,
                "lease_name": self.reservations_lease_name,
            }
        )
