"""The local control plane serves what kopf-dra needs, and our API access maps its answers."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from operators.kube.api import ApiError, ConflictError, InvalidError, KubeAPI, NotFoundError
from operators.localcluster.controlplane import kubernetes_version


async def test_server_is_the_pinned_release_with_resource_v1(api: client.ApiClient) -> None:
    kube = KubeAPI(api)
    version = await kube.call("GET", "/version")
    assert version["gitVersion"] == kubernetes_version()
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


async def test_service_account_tokens_are_minted_and_rbac_applies(
    api: client.ApiClient, namespace: str
) -> None:
    """Tests act as a component's ServiceAccount: TokenRequest works and RBAC denies by default."""
    kube = KubeAPI(api)
    await kube.create(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "component", "namespace": namespace},
        }
    )
    token_request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 600},
    }
    minted = await kube.post_subresource(
        "ServiceAccount", "component", namespace, "token", token_request
    )
    token = minted["status"]["token"]
    configuration = client.Configuration()
    configuration.host = api.configuration.host
    configuration.ssl_ca_cert = api.configuration.ssl_ca_cert
    configuration.api_key = {"BearerToken": token}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    async with client.ApiClient(configuration) as as_component:
        component = KubeAPI(as_component)
        review = await component.call(
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
        assert review["status"]["userInfo"]["username"] == (
            f"system:serviceaccount:{namespace}:component"
        )
        with pytest.raises(ApiError) as denied:
            await component.list("ResourceClaim", namespace)
        assert denied.value.status == 403
