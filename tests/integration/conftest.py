"""Integration fixtures: a real kube-apiserver + etcd (never a mock), fresh namespace per test.

By default the session starts the local control plane (built once per version into a user cache).
With KOPF_DRA_USE_EXISTING_CLUSTER=1 and KUBECONFIG set, tests use that cluster instead (kind).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from operators.kube import controlplane
from operators.kube.client import make_api_client

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    if os.environ.get("KOPF_DRA_USE_EXISTING_CLUSTER") == "1":
        existing = os.environ.get("KUBECONFIG")
        if not existing:
            pytest.exit("KOPF_DRA_USE_EXISTING_CLUSTER=1 needs KUBECONFIG", returncode=2)
        yield Path(existing.split(os.pathsep)[0])
        return
    with controlplane.running(tmp_path_factory.mktemp("control-plane")) as cp:
        yield cp.kubeconfig


@pytest.fixture(scope="session")
async def api(kubeconfig: Path) -> AsyncIterator[client.ApiClient]:
    api_client = await make_api_client(kubeconfig)
    async with api_client:
        yield api_client


@pytest.fixture
async def namespace(api: client.ApiClient) -> str:
    """A fresh namespace with its default ServiceAccount (no controller-manager creates it).

    Namespaces never finish deleting without the namespace controller, so none is deleted.
    """
    name = f"t-{uuid.uuid4().hex[:10]}"
    core = client.CoreV1Api(api)
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    await core.create_namespaced_service_account(
        name, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="default"))
    )
    return name
