"""The local control plane serves what kopf-dra needs, and our API access maps its answers."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from operators.kube.api import ConflictError, InvalidError, KubeAPI, NotFoundError


async def test_server_is_the_pinned_release_with_resource_v1(api: client.ApiClient) -> None:
    kube = KubeAPI(api)
    version = await kube.call("GET", "/version")
    assert version["gitVersion"].startswith("v1.36.")
    group = await kube.call("GET", "/apis/resource.k8s.io")
    served = {v["groupVersion"] for v in group["versions"]}
    assert {"resource.k8s.io/v1", "resource.k8s.io/v1beta2"} <= served


async def test_errors_are_typed(api: client.ApiClient, namespace: str) -> None:
    kube = KubeAPI(api)
    with pytest.raises(NotFoundError):
        await kube.get("ResourceClaim", "missing", namespace)
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": namespace},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]
            }
        },
    }
    created = await kube.create(claim)
    with pytest.raises(ConflictError):
        await kube.create(claim)
    stale = dict(created, metadata=dict(created["metadata"], resourceVersion="1"))
    with pytest.raises(ConflictError):
        await kube.replace(stale)
    bad = dict(claim, metadata={"name": "bad", "namespace": namespace})
    bad["spec"] = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": ""}}]}}
    with pytest.raises(InvalidError) as info:
        await kube.create(bad)
    assert any("deviceClassName" in c.get("field", "") for c in info.value.causes)
    assert await kube.delete("ResourceClaim", "c", namespace) is not None
    assert await kube.delete("ResourceClaim", "c", namespace) is None
