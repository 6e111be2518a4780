"""Settings of the claim-template controller."""

from __future__ import annotations

from pydantic import Field

from operators.settings import CLAIM_CONTROLLER_WORKERS, LeaderElectionSettings


class ClaimTemplateSettings(LeaderElectionSettings):
    scheduler_names: list[str] = Field(
        default=["kopf-dra"],
        description="Act on pods with one of these spec.schedulerName values",
    )
    all_pods: bool = Field(
        default=False,
        description="Act on every pod (when kube-controller-manager runs with "
        "--controllers=*,-resourceclaim-controller)",
    )
    workers: int = Field(
        default=CLAIM_CONTROLLER_WORKERS, description="Pods reconciled concurrently"
    )
    lease_name: str = Field(default="kopf-dra-claim-templates", description="Name of the Lease")
