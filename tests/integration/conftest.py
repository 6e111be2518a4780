"""Integration fixtures: a real kube-apiserver + etcd (never a mock), fresh namespace per test.

By default the session starts the local control plane (built once per version into a user cache).
With KOPF_DRA_USE_EXISTING_CLUSTER=1 and KUBECONFIG set, tests use that cluster instead (kind).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from operators.controllers.claim_templates import app as templates_app
from operators.controllers.claim_templates.settings import ClaimTemplateSettings
from operators.controllers.reservations import app as reservations_app
from operators.controllers.reservations.settings import ReservationSettings
from operators.kube.api import KubeAPI
from operators.kube.client import make_api_client
from operators.localcluster import controlplane, manifests
from tests.integration.helpers import create_namespace, running_operator, unique

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
IDENTITY_KINDS = {
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "CustomResourceDefinition",
}


@pytest.fixture(scope="session")
async def rbac_applied(api: client.ApiClient) -> list[dict[str, Any]]:
    """The identities of the kustomize base, applied for real (server-side apply)."""
    objects = [o for o in manifests.render(ROOT / "manifests") if o["kind"] in IDENTITY_KINDS]
    return await manifests.apply(KubeAPI(api), objects)


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
    """A fresh namespace with its default ServiceAccount (see ``create_namespace``)."""
    return await create_namespace(api)


@pytest.fixture
def kube(api: client.ApiClient) -> KubeAPI:
    return KubeAPI(api)


@pytest.fixture
def driver() -> str:
    """A driver name of this test alone: devices of other tests never match its classes."""
    return f"{unique('gpu')}.example.com"


@pytest.fixture
async def controllers(kubeconfig: Any) -> AsyncIterator[None]:
    """The claim-template controller and the reservation cleanup, as beside kube-scheduler."""
    ct = ClaimTemplateSettings(kubeconfig=str(kubeconfig), lease_name=unique("claim-templates"))
    rs = ReservationSettings(kubeconfig=str(kubeconfig), lease_name=unique("reservations"))
    async with (
        running_operator(templates_app.APP.build_registry(ct), "claim-templates"),
        running_operator(reservations_app.APP.build_registry(rs), "reservations"),
    ):
        yield
