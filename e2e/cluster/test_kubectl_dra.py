"""``kubectl dra`` as users run it: the real kubectl finds the plugin on PATH and asks the
deployed cluster. A bound pod (its devices), a pending one asking for more GPUs than any node
reaches (why, per node; 16, within the claim limit of 32), a pod
kube-scheduler placed (named as its scheduler), and a user allowed one namespace only."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from e2e.cluster.test_operations import workload
from operators.demo.bringup import SCHEDULER_NAME
from operators.kube.api import ConflictError, KubeAPI, NotFoundError
from operators.localcluster import cluster
from tests.integration.helpers import eventually, grant_namespace_reads, token_kubeconfig

NS = "kopf-dra-kubectl"
GPU_CLASS = "gpu.example.kopf-dra.io"


def kubectl_dra(
    c: cluster.Cluster, *args: str, kubeconfig: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``kubectl dra ARGS`` through the cluster's kubectl, the plugin on PATH where
    ``pip install kopf-dra`` puts it (beside this Python)."""
    path = os.pathsep.join(
        [str(c.kubectl.parent), str(Path(sys.executable).parent), os.environ.get("PATH", "")]
    )
    env = {**os.environ, "KUBECONFIG": str(kubeconfig or c.kubeconfig), "PATH": path}
    return subprocess.run(
        ["kubectl", "dra", *args], capture_output=True, text=True, env=env, timeout=120,
        check=False,
    )  # fmt: skip


def _pod(name: str, claim: dict[str, str] | None, scheduler: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {
                "name": "job",
                "image": "docker.io/library/busybox:1.36",
                "imagePullPolicy": "Never",
                "command": ["sleep", "3600"],
            }
        ],
    }
    if scheduler:
        spec["schedulerName"] = scheduler
    if claim:
        spec["resourceClaims"] = [claim]
        spec["containers"][0]["resources"] = {"claims": [{"name": claim["name"]}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": spec}  # fmt: skip


@pytest.fixture(scope="module")
async def scene(installed: cluster.Cluster, kube: KubeAPI) -> AsyncIterator[None]:
    namespace, template, _ = workload("one-gpu", 0)
    namespace["metadata"]["name"] = template["metadata"]["namespace"] = NS
    big = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "too-many-gpus", "namespace": NS},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": 16}}
                ]
            }
        },
    }
    with contextlib.suppress(ConflictError):
        await kube.create(namespace)

    async def account() -> bool:  # pods are refused until the namespace's default is made
        try:
            await kube.get("ServiceAccount", "default", NS)
        except NotFoundError:
            return False
        return True

    await eventually(account, within=60, what=f"{NS}'s default ServiceAccount")
    await kube.create(template)
    await kube.create(big)
    await kube.create(
        _pod("runner", {"name": "gpu", "resourceClaimTemplateName": "one-gpu"}, SCHEDULER_NAME)
    )
    await kube.create(
        _pod("trainer", {"name": "gpu", "resourceClaimName": "too-many-gpus"}, SCHEDULER_NAME)
    )
    await kube.create(_pod("plain", None, None))  # kube-scheduler's

    async def placed() -> bool:
        pods = {p: await kube.get("Pod", p, NS) for p in ("runner", "plain")}
        return all(p["status"].get("phase") == "Running" for p in pods.values())

    async def told() -> bool:
        events = (await kube.list("Event", NS))["items"]
        return any(
            e.get("reason") == "FailedScheduling"
            and (e.get("involvedObject") or {}).get("name") == "trainer"
            for e in events
        )

    await eventually(placed, within=120, what="runner and plain Running")
    await eventually(told, within=60, what="kopf-dra's FailedScheduling for trainer")
    yield
    with contextlib.suppress(NotFoundError):
        await kube.delete("Namespace", NS)


async def test_why_a_bound_pod_holds_its_gpu(installed: cluster.Cluster, scene: None) -> None:
    done = kubectl_dra(installed, "why", "runner", "-n", NS)
    assert done.returncode == 0, done.stderr
    print(done.stdout)
    assert "SCHEDULER  kopf-dra" in done.stdout
    assert "example.kopf-dra.io/" in done.stdout


async def test_why_a_pending_pod_is_pending_per_node(
    installed: cluster.Cluster, scene: None
) -> None:
    done = kubectl_dra(installed, "why", "trainer", "-n", NS, "-o", "wide")
    print(done.stdout)
    assert done.returncode == 1, done.stderr
    assert "ANSWER     does not fit: 0/" in done.stdout
    assert "cannot allocate claim kopf-dra-kubectl/too-many-gpus" in done.stdout
    for node in installed.nodes.nodes if installed.nodes else ():
        assert any(line.startswith(node.name) for line in done.stdout.splitlines()), node.name
    assert "FailedScheduling" in done.stdout, "the pod's own scheduling Events"


async def test_why_names_the_scheduler_of_a_pod_kube_scheduler_placed(
    installed: cluster.Cluster, scene: None
) -> None:
    done = kubectl_dra(installed, "why", "plain", "-n", NS)
    print(done.stdout)
    assert done.returncode == 0, done.stderr
    assert "SCHEDULER  default-scheduler" in done.stdout


async def test_claims_and_pools_of_the_deployed_cluster(
    installed: cluster.Cluster, scene: None
) -> None:
    claims = kubectl_dra(installed, "claims", "runner", "-n", NS)
    print(claims.stdout)
    assert claims.returncode == 0, claims.stderr
    (row,) = claims.stdout.splitlines()[1:]
    assert "allocated,reserved" in row
    assert "pod/runner" in row
    pools = kubectl_dra(installed, "pools")
    print(pools.stdout)
    assert pools.returncode == 0, pools.stderr
    drivers = {line.split("/")[0] for line in pools.stdout.splitlines()[1:] if "/" in line}
    assert "example.kopf-dra.io" in drivers


async def test_a_user_of_one_namespace(
    installed: cluster.Cluster, scene: None, api: client.ApiClient, kube: KubeAPI, tmp_path: Path
) -> None:
    await grant_namespace_reads(kube, NS)
    config = await token_kubeconfig(api, "default", tmp_path, NS)

    async def allowed() -> bool:
        return kubectl_dra(installed, "claims", "-n", NS, kubeconfig=config).returncode == 0

    await eventually(allowed, within=30, what="the RoleBinding to take effect")
    claims = kubectl_dra(installed, "claims", "-A", "-n", NS, kubeconfig=config)
    print(claims.stdout, claims.stderr)
    assert claims.returncode == 0, claims.stderr
    assert f"list resourceclaims cluster-wide is forbidden: showing namespace {NS}" in claims.stderr
    assert "too-many-gpus" in claims.stdout
    why = kubectl_dra(installed, "why", "trainer", "-n", NS, kubeconfig=config)
    print(why.stdout, why.stderr)
    assert why.returncode == 1
    assert "list nodes cluster-wide is forbidden" in why.stderr
    pools = kubectl_dra(installed, "pools", kubeconfig=config)
    assert (pools.returncode, pools.stdout) == (3, ""), pools.stderr
    assert "forbidden: list resourceslices cluster-wide" in pools.stderr
