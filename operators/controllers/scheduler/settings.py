"""Settings of the scheduler: its own, and the policies that change where a pod goes
(``scheduling.profile.Policies``, which ``simulate`` and ``kubectl dra why`` take too)."""

from __future__ import annotations

from pydantic import Field

from operators.api.groups import DEFAULT_PERMIT_TIMEOUT
from operators.controllers.scheduler.queueing import MAX_BACKOFF
from operators.scheduling.profile import Policies, Profile
from operators.settings import LeaderElectionSettings


class SchedulerSettings(Policies, LeaderElectionSettings):
    scheduler_name: str = Field(default="kopf-dra", description="spec.schedulerName we serve")
    lease_name: str = Field(default="kopf-dra-scheduler", description="Name of the Lease")
    tenant_slice: float = Field(
        default=0.5,
        gt=0,
        description="Seconds one allocation attempt may run while pods of other namespaces "
        "wait; it then yields and resumes later, keeping what it evaluated",
    )
    unschedulable_retry: float = Field(
        default=30.0, description="Seconds before an unschedulable pod is tried again anyway"
    )
    starving_after: float = Field(
        default=MAX_BACKOFF,
        ge=0,
        description="Seconds a pod waits before devices freed are offered to it first, ahead "
        "of newer pods, once an attempt found it unschedulable (kube-scheduler's queue lets "
        "newer pods take them for as long as they arrive); 0: never, as kube-scheduler",
    )
    gang_permit_timeout: float = Field(
        default=DEFAULT_PERMIT_TIMEOUT,
        gt=0,
        description="Seconds the pods of a gang placed together wait at Permit for the rest of "
        "its minCount before what they hold is released (kube-scheduler 1.37: 5 minutes)",
    )
    scheduled_events: bool = Field(
        default=False, description="Post a Normal 'Scheduled' Event per pod (one more write)"
    )

    def profile(self) -> Profile:
        """The switches and policies every part of the scheduler follows."""
        return Profile.of(
            Policies(**self.model_dump(include=set(Policies.model_fields))),
            self.version(),
            self.gates(),
        )
