"""A component started on one Kubernetes version stops when the API server reports another
(the control plane upgraded under it), releasing its Lease so that it (or a standby) starts
again at once with the new version's defaults."""

from __future__ import annotations

import asyncio
from pathlib import Path

from operators.api.features import KubernetesVersion
from operators.kube.api import KubeAPI
from operators.localcluster.controlplane import feature_gates
from operators.runtime.app import run_following_version
from tests.integration.helpers import eventually, start_scheduler, unique

V136, V137 = KubernetesVersion.of("1.36"), KubernetesVersion.of("1.37")


async def test_a_new_version_stops_the_scheduler_and_releases_its_lease(
    kube: KubeAPI, kubeconfig: Path, namespace: str
) -> None:
    lease = unique("follow")
    scheduler, registry = start_scheduler(
        kubeconfig,
        lease_name=lease,
        lease_namespace=namespace,
        kubernetes_version="1.36",
        feature_gates=feature_gates("v1.36.3"),  # the gates of the release it starts on
        version_check_interval=0.2,
    )
    upgraded = asyncio.Event()

    async def read(_: str | None) -> KubernetesVersion:
        return V137 if upgraded.is_set() else V136

    def run() -> KubernetesVersion | None:
        return asyncio.run(
            run_following_version("scheduler", registry, scheduler.settings, read=read)
        )

    running = asyncio.create_task(asyncio.to_thread(run))

    async def holder() -> str | None:
        spec = (await kube.get_or_none("Lease", lease, namespace) or {}).get("spec") or {}
        return spec.get("holderIdentity")

    assert await eventually(holder, what="the scheduler leads")
    assert not running.done(), "the same version read again changes nothing"
    upgraded.set()
    assert await asyncio.wait_for(running, 60) == V137
    assert await holder() is None, "the Lease is released for the restart"
