"""The manifests' RBAC, proven: each component runs with a token of its own ServiceAccount and
does its whole job; what it must not do is refused by the API server. All of it with
DRAResourceClaimGranularStatusAuthorization on (1.36's default, the local control plane's), under
which a claim's allocation needs ``resourceclaims/binding`` and its device status the
``resourceclaims/driver`` verbs, ``resourceclaims/status`` alone no longer being enough.

The driver's identity (own node's slices only, device status only through node-bound verbs) is
proven in tests/integration/driver/test_manifests_on_server.py with a pod-bound token; the
fabric controller doing its whole job with its manifests in tests/integration/test_fabric.py.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from operators.api.features import Release
from operators.controllers.claim_templates import app as templates_app
from operators.controllers.claim_templates.settings import ClaimTemplateSettings
from operators.controllers.pool_validator import app as validator_app
from operators.controllers.pool_validator.settings import PoolValidatorSettings
from operators.controllers.reservations import app as reservations_app
from operators.controllers.reservations.settings import ReservationSettings
from operators.controllers.scheduler import app as scheduler_app
from operators.controllers.scheduler.settings import SchedulerSettings
from operators.kube.api import PATCH_TYPES, ApiError, KubeAPI, NotFoundError, resource_of
from operators.localcluster import manifests
from operators.localcluster.controlplane import feature_gates, kubernetes_version
from tests.integration.helpers import (
    ALLOCATION,
    bound_node,
    claim_body,
    claim_of,
    create_node,
    device_class_body,
    devices_of,
    eventually,
    gpu_cluster,
    pod_body,
    running_operator,
    served_feature_gates,
    slice_body,
    template_body,
    token_kubeconfig,
    unique,
)

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "kopf-dra"
GRANULAR = "DRAResourceClaimGranularStatusAuthorization"
EXAMPLE_DRIVER = "example.kopf-dra.io"  # the one driver name the manifests' RBAC names
OTHER_DRIVER = "gpu.example.com"


@pytest.fixture
async def as_account(
    api: client.ApiClient, rbac_applied: list[dict[str, Any]], tmp_path: Path
) -> AsyncIterator[Any]:
    """``await as_account(name[, namespace])``: a KubeAPI authenticated as
    <namespace>/<name> (kopf-dra's own accounts by default)."""
    clients: list[client.ApiClient] = []

    async def make(account: str, namespace: str = NAMESPACE) -> KubeAPI:
        path = await token_kubeconfig(api, account, tmp_path, namespace)
        configuration = client.Configuration()
        token = json.loads(path.read_text())["users"][0]["user"]["token"]
        configuration.host = api.configuration.host
        configuration.ssl_ca_cert = api.configuration.ssl_ca_cert
        configuration.api_key = {"BearerToken": token}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
        clients.append(client.ApiClient(configuration))
        return KubeAPI(clients[-1])

    yield make
    for c in clients:
        await c.close()


async def test_components_do_their_job_with_their_own_identities(
    api: client.ApiClient,
    kube: KubeAPI,
    namespace: str,
    driver: str,
    rbac_applied: list[dict[str, Any]],
    tmp_path: Path,
) -> None:
    """Claim created, allocated, reserved, pod bound, pool status written; then cleaned up. The
    API server enforces DRAResourceClaimGranularStatusAuthorization meanwhile: the scheduler's
    allocation and reservation pass because its account holds ``resourceclaims/binding``.
    A pod asking for an extended resource backed by DRA gets its special claim, which the
    scheduler's account creates (KEP-5004), and the reservation cleanup's deletes."""
    assert (await served_feature_gates(api))[GRANULAR] == ("Beta", True)
    configs = {
        name: str(await token_kubeconfig(api, f"kopf-dra-{name}", tmp_path))
        for name in ("claim-templates", "reservations", "scheduler", "pool-validator")
    }
    (node,) = await gpu_cluster(kube, driver, nodes=1, per_node=2)
    await kube.create(template_body("gpu", namespace, driver))
    extended_class = device_class_body(unique("gpu"), driver)
    extended_class["spec"]["extendedResourceName"] = f"{driver}/gpu"
    await kube.create(extended_class)
    scheduler = SchedulerSettings(
        kubeconfig=configs["scheduler"],
        feature_gates=feature_gates(),
        leader_elect=True,
        lease_namespace=NAMESPACE,
        lease_name=unique("rbac-scheduler"),
    )
    async with (
        running_operator(
            templates_app.APP.build_registry(
                ClaimTemplateSettings(
                    kubeconfig=configs["claim-templates"], lease_namespace=NAMESPACE
                )
            ),
            "claim-templates",
        ),
        running_operator(
            reservations_app.APP.build_registry(
                ReservationSettings(kubeconfig=configs["reservations"], lease_namespace=NAMESPACE)
            ),
            "reservations",
        ),
        running_operator(scheduler_app.APP.build_registry(scheduler), "scheduler"),
        running_operator(
            validator_app.APP.build_registry(
                PoolValidatorSettings(
                    kubeconfig=configs["pool-validator"],
                    lease_namespace=NAMESPACE,
                    feature_gates=feature_gates(),
                )
            ),
            "pool-validator",
        ),
    ):
        await kube.create(
            pod_body("p", namespace, {"name": "gpu", "resourceClaimTemplateName": "gpu"})
        )
        legacy = pod_body("legacy", namespace)
        legacy["spec"]["containers"][0]["resources"] = {"limits": {f"{driver}/gpu": "1"}}
        await kube.create(legacy)

        for name in ("p", "legacy"):
            bound = functools.partial(bound_node, kube, namespace, name)
            assert await eventually(bound, what=f"{name} bound by the scheduler's identity") == node
        claim = await claim_of(kube, namespace, "p")
        assert claim["status"]["reservedFor"][0]["name"] == "p"
        status = (await kube.get("Pod", "legacy", namespace))["status"]
        special = await kube.get(
            "ResourceClaim", status["extendedResourceClaimStatus"]["resourceClaimName"], namespace
        )
        assert special["status"]["reservedFor"][0]["name"] == "legacy"
        assert sorted(devices_of(claim) + devices_of(special)) == [
            f"{node}/gpu-0",
            f"{node}/gpu-1",
        ]
        lease = await kube.get("Lease", scheduler.lease_name, NAMESPACE)
        assert lease["spec"]["holderIdentity"]

        async def pool_status() -> list[dict[str, Any]]:
            items = (await kube.list("ResourcePoolStatus"))["items"]
            return [s for s in items if s["spec"]["driver"] == driver]

        (status,) = await eventually(pool_status, what="the pool validator's status object")
        assert status["spec"]["pool"] == node

        # The pods finish (the test plays kubelet): reservations deletes the claims they own.
        for name in ("p", "legacy"):
            await kube.patch(
                "Pod", name, {"status": {"phase": "Succeeded"}}, namespace, subresource="status"
            )

        async def claims_gone() -> bool:
            for gone in (claim, special):
                try:
                    await kube.get("ResourceClaim", gone["metadata"]["name"], namespace)
                except NotFoundError:
                    continue
                return False
            return True

        await eventually(claims_gone, what="the pods' claims deleted by reservations")


async def test_the_scheduler_may_evict_but_not_create_or_change_pods_nor_touch_slices(
    as_account: Any, kube: KubeAPI, namespace: str
) -> None:
    """Preemption deletes victims (as kube-scheduler may); nothing else about pods changes.
    The pods are another scheduler's: no scheduler of a later test places them."""
    await kube.create(pod_body("bystander", namespace, scheduler="default-scheduler"))
    victim = await kube.create(pod_body("victim", namespace, scheduler="default-scheduler"))
    scheduler: KubeAPI = await as_account("kopf-dra-scheduler")
    await scheduler.get("Pod", "bystander", namespace)  # it may read pods
    await scheduler.list("PriorityClass")  # and what preemption needs to know
    await scheduler.list("PodDisruptionBudget", namespace)
    with pytest.raises(ApiError) as denied:
        await scheduler.patch("Pod", "bystander", {"metadata": {"labels": {"x": "y"}}}, namespace)
    assert denied.value.status == 403
    with pytest.raises(ApiError) as denied:
        await scheduler.create(pod_body("intruder", namespace, scheduler="default-scheduler"))
    assert denied.value.status == 403
    with pytest.raises(ApiError) as denied:
        await scheduler.delete("ResourceSlice", "any-slice")
    assert denied.value.status == 403
    await scheduler.delete("Pod", "victim", namespace, uid=victim["metadata"]["uid"])
    with pytest.raises(NotFoundError):
        await kube.get("Pod", "victim", namespace)
    await kube.get("Pod", "bystander", namespace)


async def test_only_components_with_resourceclaims_binding_write_allocations(
    as_account: Any, kube: KubeAPI, namespace: str
) -> None:
    """The driver may write claim status (device conditions), never an allocation."""
    created = await kube.create(claim_body("c", namespace))
    allocated = dict(created, status={"allocation": ALLOCATION})
    driver: KubeAPI = await as_account("kopf-dra-driver")
    with pytest.raises(ApiError) as denied:
        await driver.replace_status(allocated)
    # RBAC allows resourceclaims/status; the synthetic subresource check refuses the fields.
    assert denied.value.status in (403, 422)
    assert "resourceclaims/binding" in denied.value.message
    templates: KubeAPI = await as_account("kopf-dra-claim-templates")
    with pytest.raises(ApiError) as denied:
        await templates.replace_status(allocated)
    assert denied.value.status == 403
    stored = await kube.get("ResourceClaim", "c", namespace)
    assert "allocation" not in stored.get("status", {})
    # The scheduler, which holds resourceclaims/binding, may.
    scheduler: KubeAPI = await as_account("kopf-dra-scheduler")
    written = await scheduler.replace_status(allocated)
    assert written["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"


async def _status_only_account(kube: KubeAPI, namespace: str) -> str:
    """A throwaway ServiceAccount of ``namespace`` that may read claims and update/patch their
    status, and holds neither ``resourceclaims/binding`` nor any ``resourceclaims/driver`` verb:
    without the gate, enough to write every claim's allocation and device status."""
    name = "status-only"
    await kube.create(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace},
        }
    )
    await kube.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": [
                {
                    "apiGroups": ["resource.k8s.io"],
                    "resources": ["resourceclaims"],
                    "verbs": ["get", "list", "watch"],
                },
                {
                    "apiGroups": ["resource.k8s.io"],
                    "resources": ["resourceclaims/status"],
                    "verbs": ["update", "patch"],
                },
            ],
        }
    )
    await kube.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        }
    )
    return name


def _allocation(driver: str) -> dict[str, Any]:
    result = {"request": "gpu", "driver": driver, "pool": "node-1", "device": "gpu-0"}
    return dict(ALLOCATION, devices={"results": [result]})


def _refused_by_the_gate(error: ApiError, field: str, needed: str) -> None:
    """The API server's refusal of a status write that lacks the gate's finer verb: a Forbidden
    field error (422) naming the field and the synthetic subresource it asks for."""
    assert error.status == 422, error
    assert f"{field}: Forbidden" in error.message, error.message
    assert f'requires resource="{needed}"' in error.message, error.message


def _device_status(driver: str) -> dict[str, Any]:
    return {"status": {"devices": [{"driver": driver, "pool": "node-1", "device": "gpu-0"}]}}


async def test_the_granular_status_gate_asks_more_than_resourceclaims_status(
    api: client.ApiClient, as_account: Any, kube: KubeAPI, namespace: str
) -> None:
    """With DRAResourceClaimGranularStatusAuthorization on (as the API server itself reports):
    ``resourceclaims/status`` alone writes neither an allocation (that needs
    ``resourceclaims/binding``, which the scheduler's account holds) nor device status (that
    needs a ``resourceclaims/driver`` verb for the driver's name, which the fabric controller's
    account holds as ``arbitrary-node:patch``)."""
    assert (await served_feature_gates(api))[GRANULAR] == ("Beta", True)
    status_only: KubeAPI = await as_account(await _status_only_account(kube, namespace), namespace)
    created = await kube.create(claim_body("c", namespace))

    # The Role is in force once the account may write the claim's status at all (a no-op).
    async def status_writable() -> dict[str, Any] | None:
        try:
            return await status_only.replace_status(created)
        except ApiError as e:
            if e.status != 403:
                raise
            return None

    created = await eventually(status_writable, what="the throwaway Role in force")

    # An allocation: refused by the gate, not by RBAC's resourceclaims/status.
    allocated = dict(created, status={"allocation": _allocation(EXAMPLE_DRIVER)})
    with pytest.raises(ApiError) as denied:
        await status_only.replace_status(allocated)
    _refused_by_the_gate(denied.value, "status.allocation", "resourceclaims/binding")
    fabric: KubeAPI = await as_account("kopf-dra-fabric")  # status patch, no binding either
    with pytest.raises(ApiError) as denied:
        await fabric.patch(
            "ResourceClaim", "c", {"status": allocated["status"]}, namespace, subresource="status"
        )
    _refused_by_the_gate(denied.value, "status.allocation", "resourceclaims/binding")
    assert "allocation" not in (await kube.get("ResourceClaim", "c", namespace)).get("status", {})
    scheduler: KubeAPI = await as_account("kopf-dra-scheduler")
    allocated = await scheduler.replace_status(allocated)
    assert allocated["status"]["allocation"]["devices"]["results"][0]["driver"] == EXAMPLE_DRIVER

    # Device status of the allocated claim: refused without a resourceclaims/driver verb for
    # the driver's name; the fabric controller's arbitrary-node:patch for it writes it.
    with pytest.raises(ApiError) as denied:
        await status_only.patch(
            "ResourceClaim", "c", _device_status(EXAMPLE_DRIVER), namespace, subresource="status"
        )
    _refused_by_the_gate(denied.value, "status.devices", "resourceclaims/driver")
    written = await fabric.patch(
        "ResourceClaim", "c", _device_status(EXAMPLE_DRIVER), namespace, subresource="status"
    )
    assert written["status"]["devices"][0]["device"] == "gpu-0"

    # The verb is named by driver: the fabric controller may not write another driver's.
    other = await kube.create(claim_body("other", namespace))
    await kube.replace_status(dict(other, status={"allocation": _allocation(OTHER_DRIVER)}))
    with pytest.raises(ApiError) as denied:
        await fabric.patch(
            "ResourceClaim",
            "other",
            _device_status(OTHER_DRIVER),
            namespace,
            subresource="status",
        )
    _refused_by_the_gate(denied.value, "status.devices", "resourceclaims/driver")
    assert "devices" not in (await kube.get("ResourceClaim", "other", namespace))["status"]


async def test_the_pool_validator_writes_only_its_own_kind(as_account: Any, namespace: str) -> None:
    validator: KubeAPI = await as_account("kopf-dra-pool-validator")
    with pytest.raises(ApiError) as denied:
        await validator.create(claim_body("c", namespace))
    assert denied.value.status == 403
    with pytest.raises(ApiError) as denied:
        await validator.delete("ResourceSlice", "any-slice")
    assert denied.value.status == 403
    # It answers ResourcePoolStatusRequests; it never asks.
    request = {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "ResourcePoolStatusRequest",
        "metadata": {"name": unique("ask")},
        "spec": {"driver": "gpu.example.com"},
    }
    with pytest.raises(ApiError) as denied:
        await validator.create(request)
    assert denied.value.status == 403


async def test_podgroup_claims_with_the_claim_controllers_own_identities(
    api: client.ApiClient,
    as_account: Any,
    kube: KubeAPI,
    namespace: str,
    rbac_applied: list[dict[str, Any]],
    tmp_path: Path,
) -> None:
    """1.37's PodGroup claims (GenericWorkload + DRAWorkloadResourceClaims on): claim-templates
    reads PodGroups and records the group's claim in its status (podgroups/status patch);
    reservations reads them (a PodGroup gone releases its entry) and may not write them; the
    scheduler reads them and patches their status (its PodGroupInitiallyScheduled)."""
    if Release.parse(kubernetes_version()) < Release(1, 37):
        pytest.skip("PodGroups: the local control plane is 1.36")
    configs = {
        name: str(await token_kubeconfig(api, f"kopf-dra-{name}", tmp_path))
        for name in ("claim-templates", "reservations")
    }
    await kube.create(template_body("link", namespace))
    group = await kube.create(
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "job", "namespace": namespace},
            "spec": {
                "schedulingPolicy": {"basic": {}},
                "resourceClaims": [{"name": "link", "resourceClaimTemplateName": "link"}],
            },
        }
    )
    gates = feature_gates()
    async with (
        running_operator(
            templates_app.APP.build_registry(
                ClaimTemplateSettings(
                    kubeconfig=configs["claim-templates"],
                    lease_namespace=NAMESPACE,
                    lease_name=unique("rbac-claim-templates"),
                    feature_gates=gates,
                )
            ),
            "claim-templates",
        ),
        running_operator(
            reservations_app.APP.build_registry(
                ReservationSettings(
                    kubeconfig=configs["reservations"],
                    lease_namespace=NAMESPACE,
                    lease_name=unique("rbac-reservations"),
                    feature_gates=gates,
                )
            ),
            "reservations",
        ),
    ):

        async def recorded() -> str | None:
            body = await kube.get("PodGroup", "job", namespace)
            statuses = (body.get("status") or {}).get("resourceClaimStatuses") or []
            return next((s.get("resourceClaimName") for s in statuses), None)

        name = await eventually(recorded, what="the group's claim in its status")
        claim = await kube.get("ResourceClaim", name, namespace)
        claim["status"] = {
            "allocation": ALLOCATION,
            "reservedFor": [
                {
                    "apiGroup": "scheduling.k8s.io",
                    "resource": "podgroups",
                    "name": "job",
                    "uid": group["metadata"]["uid"],
                }
            ],
        }
        await kube.replace_status(claim)
        await kube.delete("PodGroup", "job", namespace)
        with contextlib.suppress(NotFoundError):  # play podgroup-protection: no active pod
            await kube.patch("PodGroup", "job", {"metadata": {"finalizers": None}}, namespace)

        async def released() -> bool:
            status = (await kube.get("ResourceClaim", name, namespace)).get("status") or {}
            return not status.get("reservedFor") and not status.get("allocation")

        await eventually(released, what="the gone PodGroup's entry released by reservations")

    await kube.create(
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "other", "namespace": namespace},
            "spec": {"schedulingPolicy": {"basic": {}}},
        }
    )
    reservations: KubeAPI = await as_account("kopf-dra-reservations")
    await reservations.get("PodGroup", "other", namespace)
    with pytest.raises(ApiError) as denied:
        await reservations.patch(
            "PodGroup", "other", {"status": {}}, namespace, subresource="status"
        )
    assert denied.value.status == 403
    scheduler: KubeAPI = await as_account("kopf-dra-scheduler")
    await scheduler.list("PodGroup", namespace)
    await scheduler.patch("PodGroup", "other", {"status": {}}, namespace, subresource="status")
    with pytest.raises(ApiError) as denied:
        await scheduler.delete("PodGroup", "other", namespace)
    assert denied.value.status == 403


# --- the fabric controller: nodes and slices, confined by its admission policies --------------

HANDOFF = "resource.kopf-dra.io/attached-devices"


@pytest.fixture(scope="module")
async def fabric_policies(api: client.ApiClient) -> list[dict[str, Any]]:
    """manifests/fabric/admission-policy.yaml, applied for real (it names kopf-dra's own
    ServiceAccount, as the tokens of ``as_account`` do)."""
    objects = manifests.load_documents(ROOT / "manifests" / "fabric" / "admission-policy.yaml")
    return await manifests.apply(KubeAPI(api), objects)


async def _dry_run_patch(api: KubeAPI, kind: str, name: str, patch: dict[str, Any]) -> None:
    await api.call(
        "PATCH",
        resource_of(kind).path(None, name),
        body=patch,
        content_type=PATCH_TYPES["merge"],
        query={"dryRun": "All"},
    )


async def _refusal(api: KubeAPI, kind: str, name: str, patch: dict[str, Any]) -> ApiError:
    try:
        await _dry_run_patch(api, kind, name, patch)
    except ApiError as e:
        return e
    raise AssertionError(f"{kind} {name}: {patch} was allowed")


async def test_the_fabric_controller_may_change_only_the_hot_plug_annotation_of_a_node(
    as_account: Any, kube: KubeAPI, fabric_policies: list[dict[str, Any]]
) -> None:
    name = unique("fabric-node")
    taint = {"key": "dedicated", "value": "fabric", "effect": "NoSchedule"}
    await create_node(kube, name, {"resource.kopf-dra.io/fabric": "fabric1"}, taints=[taint])
    await kube.patch("Node", name, {"metadata": {"annotations": {"team": "infra"}}})
    fabric: KubeAPI = await as_account("kopf-dra-fabric")
    try:
        # The policy takes effect once the API server has loaded it: poll with a dry run.
        async def labels_refused() -> ApiError | None:
            try:
                await _dry_run_patch(fabric, "Node", name, {"metadata": {"labels": {"x": "y"}}})
            except ApiError as e:
                return e if "may not change the labels" in e.message else None
            return None

        denied = await eventually(labels_refused, what="the node policy in force")
        assert denied.status == 403
        assert f"labels of Node {name}" in denied.message
        for patch, said in (
            ({"spec": {"taints": None}}, "may not change the spec"),
            ({"spec": {"unschedulable": True}}, "may not change the spec"),
            ({"metadata": {"labels": {"resource.kopf-dra.io/fabric": None}}}, "labels"),
            ({"metadata": {"annotations": {"team": None}}}, f"no annotation of Node {name}"),
            ({"metadata": {"annotations": {"new": "x"}}}, f"no annotation of Node {name}"),
            ({"metadata": {"finalizers": ["x.io/hold"]}}, "finalizers"),
        ):
            refused = await _refusal(fabric, "Node", name, patch)
            assert (refused.status, said in refused.message) == (403, True), (patch, refused)
        with pytest.raises(ApiError) as delete:
            await fabric.delete("Node", name)
        assert delete.value.status == 403

        # What it is there for: the hand-off annotation, added and removed.
        entry = '[{"name":"a100-0","model":"A100"}]'
        await fabric.patch("Node", name, {"metadata": {"annotations": {HANDOFF: entry}}})
        await fabric.patch("Node", name, {"metadata": {"annotations": {HANDOFF: None}}})
        stored = await kube.get("Node", name)
        assert stored["metadata"]["labels"]["resource.kopf-dra.io/fabric"] == "fabric1"
        assert stored["spec"]["taints"] == [taint]
        assert stored["metadata"]["annotations"] == {"team": "infra"}
    finally:
        await kube.delete("Node", name)


def _slice(
    name: str, *, node: str | None = None, driver: str = "example.kopf-dra.io", ours: bool = True
) -> dict[str, Any]:
    """A fabric pool as the controller publishes it (``ours``), or someone else's slice."""
    where: dict[str, Any] = {} if node else {"allNodes": True}
    body = slice_body(name, driver, node or "fabric-a100", [{"name": "a100-0"}], **where)
    if ours:
        body["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "kopf-dra-fabric"}
    return body


async def test_the_fabric_controller_writes_only_its_own_fabric_pools(
    as_account: Any, kube: KubeAPI, fabric_policies: list[dict[str, Any]]
) -> None:
    fabric: KubeAPI = await as_account("kopf-dra-fabric")
    node_local = _slice(unique("node-slice"), node="some-node")

    async def node_slice_refused() -> ApiError | None:
        try:
            await fabric.create(node_local, dry_run=True)
        except ApiError as e:
            return e if "its own fabric pools" in e.message else None
        return None

    denied = await eventually(node_slice_refused, what="the slice policy in force")
    assert denied.status == 403
    for body in (
        _slice(unique("unlabelled"), ours=False),
        _slice(unique("other-driver"), driver="gpu.vendor.example.com"),
    ):
        with pytest.raises(ApiError) as refused:
            await fabric.create(body, dry_run=True)
        assert refused.value.status == 403
        assert "its own fabric pools" in refused.value.message
    # A node driver's slice can be neither replaced nor deleted by it.
    theirs = await kube.create(_slice(unique("theirs"), node="some-node", ours=False))
    try:
        with pytest.raises(ApiError) as delete:
            await fabric.delete("ResourceSlice", theirs["metadata"]["name"])
        assert delete.value.status == 403
        assert "its own fabric pools" in delete.value.message
        taken_over = dict(theirs, spec={**theirs["spec"], "devices": []})
        taken_over["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "kopf-dra-fabric"}
        with pytest.raises(ApiError) as replace:
            await fabric.replace(taken_over)
        assert replace.value.status == 403
        stored = await kube.get("ResourceSlice", theirs["metadata"]["name"])
        assert stored["spec"]["devices"] == [{"name": "a100-0"}]
    finally:
        await kube.delete("ResourceSlice", theirs["metadata"]["name"])
    created = await fabric.create(_slice(unique("fabric-pool")), dry_run=True)
    assert created["spec"]["driver"] == "example.kopf-dra.io"
