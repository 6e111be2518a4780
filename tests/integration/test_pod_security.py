"""Pod Security "restricted": every workload of the kustomize base and of the chart passes it,
except the driver DaemonSet, whose exceptions are exactly the ones its manifest documents.

Each workload is created with a server-side dry run in a namespace that enforces and warns at
``restricted``. The API server returns violations of a workload's pod template as warnings
(``Warning`` headers, which KubeAPI hands to ``on_warning``), and refuses a bare Pod that
violates them: both are checked, the Pod built from the workload's template.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes_asyncio import client

from operators.kube.api import ApiError, KubeAPI
from operators.localcluster.manifests import render
from tests.integration.helpers import ROOT, create_namespace, render_chart

RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
    "pod-security.kubernetes.io/warn": "restricted",
    "pod-security.kubernetes.io/warn-version": "latest",
}


def _workloads(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] in ("Deployment", "DaemonSet")]


def _kustomize() -> list[dict[str, Any]]:
    return _workloads(render(ROOT / "manifests"))


def _chart() -> list[dict[str, Any]]:
    return _workloads(render_chart({"poolValidator": {"webhook": {"enabled": True}}}))


def _pod(workload: dict[str, Any], namespace: str) -> dict[str, Any]:
    template = copy.deepcopy(workload["spec"]["template"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            **template["metadata"],
            "name": workload["metadata"]["name"],
            "namespace": namespace,
        },
        "spec": template["spec"],
    }


@pytest.fixture
async def restricted(api: client.ApiClient) -> str:
    """A namespace enforcing "restricted", with the workloads' ServiceAccounts (a Pod naming a
    missing one is refused before Pod Security looks at it)."""
    namespace = await create_namespace(api, labels=RESTRICTED)
    kube = KubeAPI(api)
    accounts = {w["spec"]["template"]["spec"].get("serviceAccountName") for w in _kustomize()} - {
        None
    }
    for account in sorted(accounts):
        await kube.create(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": account, "namespace": namespace},
            }
        )
    return namespace


@pytest.mark.parametrize("source", ["kustomize", "chart"])
async def test_every_workload_but_the_driver_passes_restricted(
    api: client.ApiClient, restricted: str, source: str
) -> None:
    warnings: list[str] = []
    kube = KubeAPI(api, on_warning=warnings.append)
    workloads = _kustomize() if source == "kustomize" else _chart()
    checked = set()
    for workload in workloads:
        name = workload["metadata"]["name"]
        if name == "kopf-dra-driver":
            continue
        placed = {**workload, "metadata": {**workload["metadata"], "namespace": restricted}}
        await kube.create(placed, dry_run=True)
        await kube.create(_pod(workload, restricted), dry_run=True)
        assert warnings == [], name
        checked.add(name)
    assert {
        "kopf-dra-scheduler",
        "kopf-dra-claim-templates",
        "kopf-dra-reservations",
        "kopf-dra-pool-validator",
        "kopf-dra-fabric",
        "kopf-dra-fabric-manager-sim",
    } == checked


async def test_the_driver_violates_only_what_its_manifest_documents(
    api: client.ApiClient, restricted: str
) -> None:
    warnings: list[str] = []
    kube = KubeAPI(api, on_warning=warnings.append)
    (driver,) = [w for w in _kustomize() if w["metadata"]["name"] == "kopf-dra-driver"]
    placed = {**driver, "metadata": {**driver["metadata"], "namespace": restricted}}
    await kube.create(placed, dry_run=True)
    (warning,) = warnings
    assert warning.startswith('would violate PodSecurity "restricted:latest": ')
    # The checks that fail, by their names in the warning: host directories and root only.
    failed = {check.split(" (")[0].strip() for check in warning.split(": ", 1)[1].split("), ")}
    assert failed == {"restricted volume types", "runAsNonRoot != true", "runAsUser=0"}, warning
    assert 'use restricted volume type "hostPath"' in warning
    with pytest.raises(ApiError) as refused:  # enforced for a bare Pod
        await kube.create(_pod(driver, restricted), dry_run=True)
    assert refused.value.status == 403
    assert "violates PodSecurity" in refused.value.message
    header = (
        (ROOT / "manifests" / "driver" / "daemonset" / "daemonset.yaml")
        .read_text()
        .split("apiVersion")[0]
    )
    for documented in ("hostPath", "runAsUser 0", "runAsNonRoot", "RuntimeDefault"):
        assert documented in header, documented
