"""The driver's manifests on the real API server: accepted as written, and, applied for real,
they let a driver pod's identity write its own node's slices and device status and nothing else."""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from operators import __version__
from operators.driver.app import Driver
from operators.driver.cdi import CDIWriter
from operators.driver.checkpoint import Checkpoint
from operators.driver.identity import status_rights
from operators.driver.plugin import ClaimRef
from operators.driver.profiles import build_inventory, default_config
from operators.driver.service import DriverService
from operators.driver.settings import DriverSettings
from operators.driver.slices import NodeRef, SlicePublisher
from operators.kube.api import ApiError, KubeAPI, Resource, register_resource, resource_of
from tests.integration.driver.conftest import DRIVER, allocate, claim_body, result

MANIFESTS = Path(__file__).resolve().parents[3] / "manifests" / "driver"
for _extra in (
    Resource("rbac.authorization.k8s.io/v1", "clusterroles", False, "ClusterRole"),
    Resource("rbac.authorization.k8s.io/v1", "clusterrolebindings", False, "ClusterRoleBinding"),
    Resource(
        "admissionregistration.k8s.io/v1",
        "validatingadmissionpolicies",
        False,
        "ValidatingAdmissionPolicy",
    ),
    Resource(
        "admissionregistration.k8s.io/v1",
        "validatingadmissionpolicybindings",
        False,
        "ValidatingAdmissionPolicyBinding",
    ),
):
    register_resource(_extra)


def _docs() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def _doc(kind: str) -> dict[str, Any]:
    return copy.deepcopy(next(d for d in _docs() if d["kind"] == kind))


async def test_every_manifest_is_accepted_by_a_server_side_dry_run(
    kube: KubeAPI, namespace: str
) -> None:
    for doc in _docs():
        if resource_of(doc["kind"]).namespaced:
            doc["metadata"]["namespace"] = namespace
        created = await kube.create(doc, dry_run=True)
        assert created["metadata"]["name"] == doc["metadata"]["name"]
        if doc["kind"] == "DeviceClass":
            assert created["spec"] == doc["spec"]


@pytest.fixture
async def driver_identity(
    api: client.ApiClient, kube: KubeAPI, namespace: str, node: dict[str, Any]
) -> AsyncIterator[KubeAPI]:
    """The manifests' ServiceAccount, RBAC and admission policy, for a driver pod on ``node``.

    Cluster-scoped names get the namespace as suffix, so tests never share them.
    """
    suffix = namespace
    sa = _doc("ServiceAccount")
    sa["metadata"]["namespace"] = namespace
    role, binding = _doc("ClusterRole"), _doc("ClusterRoleBinding")
    role["metadata"]["name"] = binding["roleRef"]["name"] = f"kopf-dra-driver-{suffix}"
    binding["metadata"]["name"] = f"kopf-dra-driver-{suffix}"
    binding["subjects"][0]["namespace"] = namespace
    policy, policy_binding = (
        _doc("ValidatingAdmissionPolicy"),
        _doc("ValidatingAdmissionPolicyBinding"),
    )
    policy["metadata"]["name"] = policy_binding["spec"]["policyName"] = f"own-node-{suffix}"
    policy_binding["metadata"]["name"] = f"own-node-{suffix}"
    condition = policy["spec"]["matchConditions"][0]
    condition["expression"] = condition["expression"].replace(
        "system:serviceaccount:kopf-dra:", f"system:serviceaccount:{namespace}:"
    )
    cluster_scoped = [role, binding, policy, policy_binding]
    for doc in [sa, *cluster_scoped]:
        await kube.create(doc)
    pod = await kube.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "driver", "namespace": namespace},
            "spec": {
                "nodeName": node["metadata"]["name"],
                "serviceAccountName": sa["metadata"]["name"],
                "containers": [{"name": "driver", "image": f"kopf-dra:{__version__}"}],
            },
        }
    )
    minted = await kube.post_subresource(
        "ServiceAccount",
        sa["metadata"]["name"],
        namespace,
        "token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "expirationSeconds": 600,
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod["metadata"]["name"],
                    "uid": pod["metadata"]["uid"],
                },
            },
        },
    )
    configuration = client.Configuration()
    configuration.host = api.configuration.host
    configuration.ssl_ca_cert = api.configuration.ssl_ca_cert
    configuration.api_key = {"BearerToken": minted["status"]["token"]}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    try:
        async with client.ApiClient(configuration) as as_driver:
            yield KubeAPI(as_driver)
    finally:
        for doc in reversed(cluster_scoped):
            await kube.delete(doc["kind"], doc["metadata"]["name"])


def _slice(node: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "nodeName": node,
            "devices": [{"name": "dev"}],
        },
    }


async def _eventually_denied(api: KubeAPI, obj: dict[str, Any], within: float = 30) -> ApiError:
    """Dry-run ``obj`` until the admission policy denies it (RBAC and policies load lazily)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    last: ApiError | None = None
    while loop.time() < deadline:
        try:
            await api.create(obj, dry_run=True)
        except ApiError as e:
            if "may not modify" in e.message:
                return e
            last = e
        await asyncio.sleep(0.2)
    raise AssertionError(f"the admission policy never denied a foreign slice (last: {last})")


async def test_driver_pod_identity_writes_only_its_own_node(
    driver_identity: KubeAPI,
    kube: KubeAPI,
    namespace: str,
    node: dict[str, Any],
    short_dir: Path,
) -> None:
    name = node["metadata"]["name"]
    other = f"other-{uuid.uuid4().hex[:8]}"
    await kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": other}})
    try:
        # The admission policy takes effect once the API server has loaded it: poll (dry run).
        denial = await _eventually_denied(driver_identity, _slice(other, f"{other}-probe"))
        assert denial.status in (403, 422)
        assert f"may not modify ResourceSlices of node '{other}'" in denial.message

        publisher = SlicePublisher(driver_identity, DRIVER, NodeRef(name, node["metadata"]["uid"]))
        assert await publisher.sync(build_inventory(default_config(), name)) == 1

        service = DriverService(
            driver_identity,
            driver=DRIVER,
            node_name=name,
            config=default_config(),
            cdi=CDIWriter(short_dir / "cdi", DRIVER),
            checkpoint=Checkpoint(short_dir / "checkpoint.json"),
        )
        await service.refresh()
        created = await kube.create(claim_body(namespace, "c", ["gpu"]))
        allocated = await allocate(kube, created, [result("gpu", name, "gpu-1")], node=name)
        ref = ClaimRef(namespace, allocated["metadata"]["uid"], "c")
        answer = await service.prepare([ref])
        assert answer[ref.uid].error == ""
        stored = await kube.get("ResourceClaim", "c", namespace)
        assert [d["device"] for d in stored["status"]["devices"]] == ["gpu-1"]

        # A claim allocated on another node: the node-bound verbs refuse our status write.
        foreign = await kube.create(claim_body(namespace, "foreign", ["gpu"]))
        foreign = await allocate(kube, foreign, [result("gpu", other, "gpu-1")], node=other)
        with pytest.raises(ApiError) as denied:
            await driver_identity.patch(
                "ResourceClaim",
                "foreign",
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaim",
                    "metadata": {"name": "foreign", "namespace": namespace},
                    "status": {"devices": [{"driver": DRIVER, "pool": other, "device": "gpu-1"}]},
                },
                namespace,
                patch_type="apply",
                subresource="status",
                field_manager="test",
            )
        # The API server reports the missing node-bound verb as a Forbidden field error (422).
        assert denied.value.status == 422
        assert "resourceclaims/driver" in denied.value.message
    finally:
        listed = await kube.list("ResourceSlice", field_selector=f"spec.nodeName={other}")
        for item in listed["items"]:
            await kube.delete("ResourceSlice", item["metadata"]["name"])
        await kube.delete("Node", other)


async def test_driver_pod_identity_passes_the_startup_check_on_its_own(
    driver_identity: KubeAPI, kube: KubeAPI, node: dict[str, Any], short_dir: Path
) -> None:
    """The manifests' identity holds the associated-node: verbs only: the driver starts without
    --allow-arbitrary-node-status. The admin identity does not (test_app.py)."""
    rights = await status_rights(driver_identity, DRIVER)
    assert rights.arbitrary_node == ()
    assert rights.associated_node == ("associated-node:patch", "associated-node:update")
    assert rights.problem() is None
    assert rights.warning() is None
    settings = DriverSettings(
        node_name=node["metadata"]["name"],
        driver_name=DRIVER,
        kubelet_dir=str(short_dir / "kubelet"),
        cdi_dir=str(short_dir / "cdi"),
    )
    assert settings.allow_arbitrary_node_status is False
    assert await Driver(settings, driver_identity)._check_identity() is True
    admin = await status_rights(kube, DRIVER)
    assert admin.problem() is not None
