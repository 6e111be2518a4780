"""Driver fixtures: a Node object per test, a short kubelet directory, claim builders.

There is no kubelet and no garbage collector on the local control plane: tests create the Node
themselves, play kubelet through ``fake_kubelet.FakeKubelet``, and delete what would otherwise be
collected.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from operators.kube.api import KubeAPI

DRIVER = "example.kopf-dra.io"


@pytest.fixture
def kube(api: client.ApiClient) -> KubeAPI:
    return KubeAPI(api)


@pytest.fixture
async def node(kube: KubeAPI) -> AsyncIterator[dict[str, Any]]:
    """A fresh Node; its slices are deleted afterwards (the GC would do it in a cluster)."""
    name = f"node-{uuid.uuid4().hex[:8]}"
    created = await kube.create(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        }
    )
    yield created
    listed = await kube.list("ResourceSlice", field_selector=f"spec.nodeName={name}")
    for item in listed["items"]:
        await kube.delete("ResourceSlice", item["metadata"]["name"])
    await kube.delete("Node", name)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """Unix socket paths must stay under ~100 bytes: pytest's tmp_path can be too long."""
    path = Path(tempfile.mkdtemp(prefix="kd-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def claim_body(
    namespace: str,
    name: str,
    requests: list[str],
    config: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "requests": [
            {"name": r, "exactly": {"deviceClassName": "gpu.example.com"}} for r in requests
        ]
    }
    if config:
        spec["config"] = config
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": spec},
    }


async def allocate(
    kube: KubeAPI,
    claim: dict[str, Any],
    results: list[dict[str, Any]],
    *,
    node: str,
    config: list[dict[str, Any]] | None = None,
    reserved: bool = True,
) -> dict[str, Any]:
    """Write an allocation (and a pod reservation) as the scheduler would."""
    allocation: dict[str, Any] = {
        "devices": {"results": results},
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        },
    }
    if config:
        allocation["devices"]["config"] = config
    status: dict[str, Any] = {"allocation": allocation}
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": "pod", "uid": str(uuid.uuid4())}]
    updated = dict(claim, status=status)
    return await kube.replace_status(updated)


def result(request: str, pool: str, device: str, **extra: Any) -> dict[str, Any]:
    return {"request": request, "driver": DRIVER, "pool": pool, "device": device, **extra}
