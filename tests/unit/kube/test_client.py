"""The API client trusts the environment (proxies, ~/.netrc) only when proxies are configured,
and then leaves every request to aiohttp's session (kopf-dra's transport speaks directly)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiohttp import web
from kubernetes_asyncio import client

from operators.kube.api import ApiTimeouts, KubeAPI
from operators.kube.client import (
    ClientConfigError,
    connection_fields,
    make_api_client,
    make_configuration,
)

KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: secret}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


@pytest.fixture
def kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("https_proxy", "http_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    return path


async def test_no_proxy_variables_no_environment_lookups(kubeconfig: Path) -> None:
    async with await make_api_client(kubeconfig) as api_client:
        assert api_client.rest_client.pool_manager.trust_env is False
        assert getattr(api_client, "transport", None) is not None  # kopf-dra's own
    assert connection_fields(await make_configuration(kubeconfig))["trust_env"] is False


async def test_proxy_variables_are_honoured(
    kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    async with await make_api_client(kubeconfig) as api_client:
        assert api_client.rest_client.pool_manager.trust_env is True
        assert getattr(api_client, "transport", None) is None  # aiohttp's, which proxies
    assert connection_fields(await make_configuration(kubeconfig))["trust_env"] is True


async def test_a_request_waiting_for_a_pooled_connection_is_not_a_connect_timeout() -> None:
    """The connect timeout bounds opening a connection; waiting behind the pool's busy ones is
    bounded by the request's own timeout only (a scheduler's burst of bindings queues there)."""

    async def slow_pod(request: web.Request) -> web.Response:
        await asyncio.sleep(0.5)  # a slow API server: ten connect timeouts long
        name = request.match_info["name"]
        return web.json_response({"kind": "Pod", "metadata": {"name": name}})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/default/pods/{name}", slow_pod)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    configuration = client.Configuration(host=f"http://127.0.0.1:{port}")
    configuration.connection_pool_maxsize = 1
    try:
        async with client.ApiClient(configuration) as api_client:
            api = KubeAPI(api_client, ApiTimeouts(connect=0.05, total=10.0))
            first, second = await asyncio.gather(
                api.get("Pod", "a", "default"), api.get("Pod", "b", "default")
            )
    finally:
        await runner.cleanup()
    assert (first["metadata"]["name"], second["metadata"]["name"]) == ("a", "b")


async def test_a_context_other_than_the_current_one(tmp_path: Path) -> None:
    """kubectl's --context: that context's cluster and user; an unknown one names the file."""
    other = """
apiVersion: v1
kind: Config
clusters:
- {name: a, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}
- {name: b, cluster: {server: "https://127.0.0.2:7443", insecure-skip-tls-verify: true}}
users: [{name: u, user: {token: secret}}]
contexts: [{name: x, context: {cluster: a, user: u}}, {name: y, context: {cluster: b, user: u}}]
current-context: x
"""
    path = tmp_path / "kubeconfig"
    path.write_text(other)
    assert (await make_configuration(path)).host == "https://127.0.0.1:6443"
    assert (await make_configuration(path, context="y")).host == "https://127.0.0.2:7443"
    with pytest.raises(ClientConfigError, match=f"kubeconfig {path}: .*nope"):
        await make_configuration(path, context="nope")
