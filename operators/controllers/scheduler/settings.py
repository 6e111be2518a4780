"""Settings of the scheduler."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from operators.settings import Settings


class SchedulerSettings(Settings):
    scheduler_name: str = Field(default="kopf-dra", description="spec.schedulerName we serve")
    binding_timeout: float = Field(
        default=600.0,
        description="Seconds from allocationTimestamp until unmet binding conditions give up",
    )
    score_policy: Literal["least-allocated", "most-allocated"] = Field(
        default="least-allocated", description="Spread (least) or pack (most) pods over nodes"
    )
    allocation_policy: Literal["first-fit", "best-fit"] = Field(
        default="first-fit",
        description="first-fit gives upstream's devices; best-fit prefers small partitions",
    )
    leader_elect: bool = Field(
        default=False, description="Elect a leader through a Lease (run with 2+ replicas)"
    )
    lease_name: str = Field(default="kopf-dra-scheduler", description="Name of the Lease")
    lease_namespace: str = Field(default="kube-system", description="Namespace of the Lease")
    lease_duration: float = Field(default=10.0, description="Seconds a lease stays valid")
    identity: str | None = Field(
        default=None, description="This replica's identity (default: hostname + random suffix)"
    )
    unschedulable_retry: float = Field(
        default=30.0, description="Seconds before an unschedulable pod is tried again anyway"
    )
    scheduled_events: bool = Field(
        default=False, description="Post a Normal 'Scheduled' Event per pod (one more write)"
    )
