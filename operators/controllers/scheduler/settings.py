"""Settings of the scheduler."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from operators.api.groups import DEFAULT_PERMIT_TIMEOUT
from operators.scheduling.attempt import DEFAULT_FILTER_TIMEOUT
from operators.settings import LeaderElectionSettings


class SchedulerSettings(LeaderElectionSettings):
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
    lease_name: str = Field(default="kopf-dra-scheduler", description="Name of the Lease")
    filter_timeout: float = Field(
        default=DEFAULT_FILTER_TIMEOUT,
        ge=0,
        description="Seconds one pod's device allocation may take in all; past it the pod is "
        "unschedulable and retried with backoff (kube-scheduler's DRA filter timeout); 0: none",
    )
    tenant_slice: float = Field(
        default=0.5,
        gt=0,
        description="Seconds one allocation attempt may run while pods of other namespaces "
        "wait; it then yields and resumes later, keeping what it evaluated",
    )
    unschedulable_retry: float = Field(
        default=30.0, description="Seconds before an unschedulable pod is tried again anyway"
    )
    preemption: bool = Field(
        default=True,
        description="Evict pods of lower priority for a pod that fits nowhere, as "
        "kube-scheduler's DefaultPreemption, devices included (KEP-5690)",
    )
    preemption_alternatives: Literal["no-preemption-first", "rank-first"] = Field(
        default="no-preemption-first",
        description="Prioritized alternatives (KEP-4816) and preemption: no-preemption-first: "
        "an alternative that fits without evicting anybody beats a higher-ranked one that needs "
        "an eviction; rank-first: evict lower-priority pods for a higher-ranked alternative",
    )
    gang_permit_timeout: float = Field(
        default=DEFAULT_PERMIT_TIMEOUT,
        gt=0,
        description="Seconds the pods of a gang placed together wait at Permit for the rest of "
        "its minCount before what they hold is released (kube-scheduler 1.37: 5 minutes)",
    )
    gang_search: bool = Field(
        default=True,
        description="When a pod group's cycle fails, search its pods' prioritized alternatives "
        "and other nodes for a placement of the whole group, within the filter timeout "
        "(kube-scheduler 1.37 takes each pod's first choice; false: as it does)",
    )
    scheduled_events: bool = Field(
        default=False, description="Post a Normal 'Scheduled' Event per pod (one more write)"
    )
