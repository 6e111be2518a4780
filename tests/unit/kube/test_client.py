"""The API client trusts the environment (proxies, ~/.netrc) only when proxies are configured."""

from __future__ import annotations

from pathlib import Path

import pytest

from operators.kube.client import connection_fields, make_api_client, make_configuration

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
    assert connection_fields(await make_configuration(kubeconfig))["trust_env"] is False


async def test_proxy_variables_are_honoured(
    kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    async with await make_api_client(kubeconfig) as api_client:
        assert api_client.rest_client.pool_manager.trust_env is True
    assert connection_fields(await make_configuration(kubeconfig))["trust_env"] is True
