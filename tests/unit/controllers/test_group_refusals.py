"""A pod naming a PodGroup where kopf-dra places no groups: told why, on the pod, and retried."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import pytest

from operators.api.core import Pod
from operators.api.features import KubernetesVersion, resolve
from operators.controllers.scheduler.groups import GroupScheduler, Scheduler
from operators.runtime.errors import Requeue
from operators.scheduling.profile import Policies, Profile

POD = Pod.load(
    {
        "metadata": {"name": "trainer-0", "namespace": "ns"},
        "spec": {"schedulingGroup": {"podGroupName": "training"}},
    }
)


@dataclasses.dataclass
class Settings:
    unschedulable_retry: float = 30.0


class Stub:
    def __init__(self, release: str) -> None:
        version = KubernetesVersion.of(release)
        self.profile = Profile.of(Policies(), version, resolve({}, version))
        self.settings = Settings()
        self.told: list[tuple[str, str]] = []

    async def unschedulable(self, pod: Pod, message: str, reason: str = "Unschedulable") -> bool:
        self.told.append((reason, message))
        return True


async def refusal(release: str) -> tuple[list[tuple[str, str]], float]:
    stub: Any = Stub(release)
    with pytest.raises(Requeue) as retried:
        await GroupScheduler(cast(Scheduler, stub)).schedule(POD)
    return stub.told, retried.value.delay


async def test_on_136_the_pod_is_told_gang_scheduling_needs_137() -> None:
    told, delay = await refusal("1.36")
    [(reason, message)] = told
    assert reason == "Unschedulable"
    assert message == (
        "pod ns/trainer-0 names PodGroup 'training': gang scheduling (GenericWorkload) needs "
        "Kubernetes 1.37, and this cluster runs 1.36"
    )
    assert delay == 30.0


async def test_on_137_with_the_gate_off_the_pod_is_told_which_gate() -> None:
    told, _ = await refusal("1.37")
    [(_, message)] = told
    assert "GenericWorkload feature gate off" in message
    assert "--feature-gates GenericWorkload=true" in message
