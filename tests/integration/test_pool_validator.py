"""The pool validator against the real API server: ResourcePoolStatus follows its pool.

Slices are cluster-scoped, so every test publishes under a driver name of its own and deletes
its slices afterwards; claims live in the test's namespace. Tests play the driver (slices) and
the scheduler (claim allocations).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import json
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml
from kubernetes_asyncio import client

from operators.allocator.pool_availability import PREFIX_INCOMPLETE, VIEWS_SINCE
from operators.api.ids import PoolID
from operators.controllers.pool_validator import metrics as pool_metrics
from operators.controllers.pool_validator.handlers import (
    COMPONENT,
    RESOURCE,
    PoolValidatorController,
)
from operators.controllers.pool_validator.model import KIND
from operators.controllers.pool_validator.planning import status_name, status_object
from operators.controllers.pool_validator.settings import PoolValidatorSettings
from operators.kube.api import (
    ApiError,
    ConflictError,
    KubeAPI,
    NotFoundError,
    Resource,
    register_resource,
    resource_of,
)
from operators.localcluster.controlplane import feature_gates, free_port
from operators.localcluster.manifests import render
from operators.runtime.app import register_login
from tests.integration.helpers import (
    claim_body,
    create_node,
    eventually,
    mint_token,
    pod_body,
    running_operator,
    unique,
)
from tests.requires import require_program

CRD_FILE = Path(__file__).resolve().parents[2] / "crds" / "resourcepoolstatuses.yaml"
POOL = "node-1"

register_resource(RESOURCE)


@pytest.fixture
def kube(api: client.ApiClient) -> KubeAPI:
    return KubeAPI(api)


@pytest.fixture
async def crd(kube: KubeAPI) -> dict[str, Any]:
    """Install the CRD (once per control plane) and wait until it is served."""
    body = yaml.safe_load(CRD_FILE.read_text())
    try:
        await kube.create(body)
    except ConflictError:
        current = await kube.get("CustomResourceDefinition", body["metadata"]["name"])
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        await kube.replace(body)

    async def established() -> dict[str, Any] | None:
        got = await kube.get("CustomResourceDefinition", body["metadata"]["name"])
        conditions = (got.get("status") or {}).get("conditions") or []
        ok = any(c["type"] == "Established" and c["status"] == "True" for c in conditions)
        if not ok:
            return None
        try:  # Established comes a moment before the storage serves requests (429).
            await kube.list(KIND)
        except ApiError:
            return None
        return got

    return await eventually(established, what="ResourcePoolStatus CRD established")


@pytest.fixture
async def driver(kube: KubeAPI) -> AsyncIterator[str]:
    """A driver name of this test's own; its slices and statuses go afterwards."""
    name = f"gpu-{uuid.uuid4().hex[:8]}.example.com"
    yield name
    for s in (await kube.list("ResourceSlice"))["items"]:
        if s["spec"]["driver"] == name:
            await kube.delete("ResourceSlice", s["metadata"]["name"])
    for rps in (await kube.list(KIND))["items"]:
        if rps["spec"]["driver"] == name:
            await kube.delete(KIND, rps["metadata"]["name"])


@contextlib.asynccontextmanager
async def validator(
    kubeconfig: Any, grace: float = 60.0, lease_namespace: str = "kube-system", **overrides: Any
) -> AsyncIterator[PoolValidatorController]:
    """The validator running in a thread of its own, exposed to look at its queue and verdicts."""
    settings = PoolValidatorSettings(
        kubeconfig=str(kubeconfig),
        feature_gates=feature_gates(),
        incomplete_grace_period=grace,
        lease_namespace=lease_namespace,
        lease_name=unique("pool-validator"),
        **overrides,
    )
    registry = kopf.OperatorRegistry()
    register_login(registry, settings.kubeconfig)
    controller = PoolValidatorController(settings)
    controller.register(registry)
    async with running_operator(registry, COMPONENT):
        yield controller


def slice_body(
    name: str,
    driver: str,
    *,
    devices: list[dict[str, Any]] | None = None,
    counters: list[dict[str, Any]] | None = None,
    count: int = 2,
    generation: int = 1,
    node: str = "node-1",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": POOL, "generation": generation, "resourceSliceCount": count},
        "nodeName": node,
    }
    if devices:
        spec["devices"] = devices
    if counters:
        spec["sharedCounters"] = counters
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{driver.split('.')[0]}-{name}"},
        "spec": spec,
    }


def partition(name: str, counter_set: str = "gpu-0", memory: str = "10Gi") -> dict[str, Any]:
    return {
        "name": name,
        "consumesCounters": [
            {"counterSet": counter_set, "counters": {"memory": {"value": memory}}}
        ],
    }


GPU_COUNTERS = [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]


async def pool_status(kube: KubeAPI, driver: str) -> dict[str, Any] | None:
    try:
        return await kube.get(KIND, status_name(PoolID(driver, POOL)))
    except NotFoundError:
        return None


def conditions(body: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (body.get("status") or {}).get("conditions") or []}


async def status_where(
    kube: KubeAPI, driver: str, *, what: str, within: float = 30.0, **expected: str
) -> dict[str, Any]:
    """Wait until the pool's status has the expected condition statuses (Complete=..., ...)."""

    async def probe() -> dict[str, Any] | None:
        body = await pool_status(kube, driver)
        if body is None:
            return None
        have = conditions(body)
        return body if all(have.get(k) == v for k, v in expected.items()) else None

    return await eventually(probe, within=within, what=what)


async def slice_events(kube: KubeAPI, slice_name: str, reason: str) -> list[dict[str, Any]]:
    items = (await kube.list("Event", "default"))["items"]
    return [
        e
        for e in items
        if e["involvedObject"].get("name") == slice_name
        and e["involvedObject"].get("kind") == "ResourceSlice"
        and e["reason"] == reason
    ]


async def judged(controller: PoolValidatorController, pool: tuple[str, str]) -> bool:
    """The validator has finished a reconcile of the pool (written what it had to)."""
    return pool in controller.verdicts


def allocation(driver: str, *devices: str) -> dict[str, Any]:
    return {
        "devices": {
            "results": [
                {"request": "gpu", "driver": driver, "pool": POOL, "device": d} for d in devices
            ]
        }
    }


async def claim_allocated(
    kube: KubeAPI, namespace: str, name: str, allocated: dict[str, Any]
) -> dict[str, Any]:
    """Play the scheduler: a claim (request "gpu") with this allocation in its status."""
    body = await kube.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}
            },
        }
    )
    body["status"] = {"allocation": allocated}
    return await kube.replace_status(body)


async def allocated_claim(
    kube: KubeAPI, namespace: str, name: str, driver: str, *devices: str
) -> dict[str, Any]:
    """Play the scheduler: a claim with an allocation of ``devices``."""
    return await claim_allocated(kube, namespace, name, allocation(driver, *devices))


# --- tests -------------------------------------------------------------------------------


@pytest.mark.usefixtures("crd")
async def test_status_follows_the_pool_from_incomplete_to_invalid_and_back(
    kube: KubeAPI, kubeconfig: Any, driver: str
) -> None:
    async with validator(kubeconfig) as controller:
        counters = await kube.create(slice_body("counters", driver, counters=GPU_COUNTERS))
        body = await status_where(
            kube, driver, Complete="False", Valid="Unknown", what="incomplete pool"
        )
        assert body["spec"] == {"driver": driver, "pool": POOL}
        assert (body["status"]["slices"], body["status"]["expectedSlices"]) == (1, 2)

        devices = await kube.create(
            slice_body("devices", driver, devices=[partition("p0"), partition("p1")])
        )
        body = await status_where(kube, driver, Complete="True", Valid="True", what="complete")
        assert body["status"]["devices"] == {"total": 2, "allocated": 0}
        assert body["status"]["counterSets"][0]["counters"] == [
            {"name": "memory", "consumed": "0", "total": "40Gi"}
        ]

        # The driver breaks a reference.
        devices["spec"]["devices"][1] = partition("p1", counter_set="gpu-9")
        devices = await kube.replace(devices)
        body = await status_where(kube, driver, Valid="False", what="invalid pool")
        valid = next(c for c in body["status"]["conditions"] if c["type"] == "Valid")
        assert valid["reason"] == "CounterSetNotFound"
        assert body["status"]["problems"] == [
            {
                "code": "CounterSetNotFound",
                "severity": "Error",
                "message": "counter set gpu-9 not found",
                "slice": devices["metadata"]["name"],
                "device": "p1",
            }
        ]
        events = await eventually(
            lambda: slice_events(kube, devices["metadata"]["name"], "CounterSetNotFound"),
            what="a Warning event on the offending slice",
        )
        assert events[0]["type"] == "Warning"
        assert events[0]["message"].startswith(
            f"pool {driver}/{POOL}, slice {devices['metadata']['name']}, device p1: "
        )

        # Unrelated changes to the pool (a label on a slice) are no new problem.
        counters = await kube.get("ResourceSlice", counters["metadata"]["name"])
        counters["metadata"]["labels"] = {"touched": "yes"}
        before = controller.reconciled[(driver, POOL)]
        await kube.replace(counters)
        await eventually(
            lambda: _reconciled_since(controller, (driver, POOL), before),
            what="validator saw the change",
        )

        # And fixed again.
        devices["spec"]["devices"][1] = partition("p1")
        await kube.replace(devices)
        body = await status_where(kube, driver, Valid="True", Complete="True", what="fixed")
        assert body["status"]["problems"] == []
        assert body["status"]["problemCount"] == 0
    assert len(await slice_events(kube, devices["metadata"]["name"], "CounterSetNotFound")) == 1


@pytest.mark.usefixtures("crd")
async def test_events_are_not_repeated_by_a_restarted_validator(
    kube: KubeAPI, kubeconfig: Any, driver: str
) -> None:
    await kube.create(slice_body("counters", driver, counters=GPU_COUNTERS))
    devices = await kube.create(
        slice_body("devices", driver, devices=[partition("p0", counter_set="gpu-9")])
    )
    name = devices["metadata"]["name"]
    async with validator(kubeconfig):
        await status_where(kube, driver, Valid="False", what="invalid pool")
        await eventually(lambda: slice_events(kube, name, "CounterSetNotFound"), what="event")
    published = await pool_status(kube, driver)
    assert published is not None
    async with validator(kubeconfig) as controller:
        await eventually(
            lambda: judged(controller, (driver, POOL)), what="restarted validator judged"
        )
        assert controller.verdicts[(driver, POOL)].state == "invalid"
    assert len(await slice_events(kube, name, "CounterSetNotFound")) == 1
    # Nothing changed, so nothing was written: the status round-trips exactly through the CRD.
    after = await pool_status(kube, driver)
    assert after is not None
    assert after["metadata"]["resourceVersion"] == published["metadata"]["resourceVersion"]


@pytest.mark.usefixtures("crd")
async def verdict_counters(
    controller: PoolValidatorController, pool: tuple[str, str], expected: Any
) -> bool:
    verdict = controller.verdicts.get(pool)
    return verdict is not None and verdict.counters == expected


async def test_utilisation_follows_allocations(
    kube: KubeAPI, kubeconfig: Any, driver: str, namespace: str
) -> None:
    await kube.create(slice_body("counters", driver, counters=GPU_COUNTERS))
    await kube.create(
        slice_body(
            "devices",
            driver,
            devices=[partition("whole", memory="40Gi"), partition("p0"), partition("p1")],
        )
    )

    async def usage() -> tuple[int, str, bool] | None:
        body = await pool_status(kube, driver)
        if body is None or "devices" not in body.get("status", {}):
            return None
        s = body["status"]
        return (
            s["devices"]["allocated"],
            s["counterSets"][0]["counters"][0]["consumed"],
            conditions(body).get("Valid") == "True",
        )

    async def usage_is(expected: tuple[int, str, bool]) -> bool:
        return await usage() == expected

    async with validator(kubeconfig) as controller:
        await eventually(lambda: usage_is((0, "0", True)), what="nothing allocated")
        a = await allocated_claim(kube, namespace, "a", driver, "p0")
        await eventually(lambda: usage_is((1, "10Gi", True)), what="one partition allocated")
        await allocated_claim(kube, namespace, "b", driver, "p1")
        await eventually(lambda: usage_is((2, "20Gi", True)), what="two partitions allocated")
        # The verdict (metrics) follows the status write in the same reconcile: the status
        # may already be visible while the verdict is a moment behind.
        await eventually(
            lambda: verdict_counters(controller, (driver, POOL), (("gpu-0", "memory", 0.5),)),
            what="the verdict of two partitions",
        )

        # A second scheduler racing on the same pool: the whole GPU and a partition of it.
        await allocated_claim(kube, namespace, "c", driver, "whole", "p0")
        body = await status_where(kube, driver, Valid="False", what="double allocation found")
        assert sorted(p["code"] for p in body["status"]["problems"]) == [
            "CounterOvercommitted",
            "DoubleAllocation",
        ]

        # Deallocation (what the reservation cleanup does) frees devices and counters.
        await kube.delete("ResourceClaim", "c", namespace)
        await eventually(lambda: usage_is((2, "20Gi", True)), what="race resolved")
        a = await kube.get("ResourceClaim", "a", namespace)
        a["status"] = {}
        await kube.replace_status(a)
        await eventually(lambda: usage_is((1, "10Gi", True)), what="claim a deallocated")


@pytest.mark.usefixtures("crd")
async def test_statuses_follow_pools_that_disappear_and_manual_deletes(
    kube: KubeAPI, kubeconfig: Any, driver: str
) -> None:
    # A status left behind while the validator was down, for a pool that no longer exists.
    orphan = await kube.create(status_object(PoolID(driver, "gone")))
    single = await kube.create(slice_body("only", driver, devices=[{"name": "d0"}], count=1))
    async with validator(kubeconfig):
        first = await status_where(kube, driver, Complete="True", Valid="True", what="pool status")
        await eventually(
            lambda: _gone(kube, orphan["metadata"]["name"]), what="orphaned status deleted"
        )

        # Deleted by hand, it comes back.
        await kube.delete(KIND, first["metadata"]["name"])

        async def recreated() -> dict[str, Any] | None:
            body = await pool_status(kube, driver)
            if body is None or body["metadata"]["uid"] == first["metadata"]["uid"]:
                return None
            return body if conditions(body).get("Valid") == "True" else None

        await eventually(recreated, what="status recreated after a manual delete")
        await kube.delete("ResourceSlice", single["metadata"]["name"])
        await eventually(
            lambda: _gone(kube, status_name(PoolID(driver, POOL))),
            what="status deleted with its pool",
        )


@pytest.mark.usefixtures("crd")
async def test_a_pool_incomplete_for_too_long_is_reported(
    kube: KubeAPI, kubeconfig: Any, driver: str
) -> None:
    first = await kube.create(slice_body("a", driver, devices=[{"name": "d0"}], count=2))
    async with validator(kubeconfig, grace=1.0):
        body = await status_where(kube, driver, Complete="False", what="incomplete pool")

        async def warned() -> list[dict[str, Any]] | None:
            got = await pool_status(kube, driver)
            problems = (got or {}).get("status", {}).get("problems") or []
            return [p for p in problems if p["code"] == "IncompleteTooLong"] or None

        # No change to the pool after this point: the grace period's end wakes the validator.
        (problem,) = await eventually(warned, within=15, what="IncompleteTooLong warning")
        assert problem["severity"] == "Warning"
        assert conditions(body)["Valid"] == "Unknown"
        rps = await pool_status(kube, driver)
        assert rps is not None
        assert rps["metadata"]["name"]
    # The warning is about the pool, not one slice: it goes to the ResourcePoolStatus.
    assert await slice_events(kube, first["metadata"]["name"], "IncompleteTooLong") == []


@pytest.mark.usefixtures("crd")
async def test_kubectl_shows_the_columns(
    kube: KubeAPI, kubeconfig: Any, driver: str, tmp_path: Path
) -> None:
    kubectl = require_program("kubectl", "shows the printer columns as people see them")
    await kube.create(slice_body("counters", driver, counters=GPU_COUNTERS, count=1))
    async with validator(kubeconfig):
        await status_where(kube, driver, Complete="True", Valid="True", what="pool status")
    proc = await asyncio.create_subprocess_exec(
        kubectl,
        "--kubeconfig",
        str(kubeconfig),
        "--cache-dir",
        str(tmp_path / "kube-cache"),  # never the checkout's or the user's
        "get",
        "resourcepoolstatuses",
        status_name(PoolID(driver, POOL)),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    header, row = out.decode().splitlines()
    assert header.split() == [
        "NAME",
        "DRIVER",
        "POOL",
        "COMPLETE",
        "VALID",
        "PROBLEMS",
        "DEVICES",
        "ALLOCATED",
        "AGE",
    ]
    assert row.split()[1:8] == [driver, POOL, "True", "True", "0", "0", "0"]


def _undocumented(schema: dict[str, Any], path: str) -> list[str]:
    """Fields without a description in a published OpenAPI schema (``$ref``s, i.e. ObjectMeta,
    carry Kubernetes' own)."""
    if "allOf" in schema or "$ref" in schema:
        return []
    found = [] if schema.get("description") else [path]
    for name, prop in (schema.get("properties") or {}).items():
        found += _undocumented(prop, f"{path}.{name}")
    if "items" in schema:
        found += _undocumented(schema["items"], f"{path}[]")
    return found


@pytest.mark.usefixtures("crd")
async def test_kubectl_explain_shows_a_description_of_every_field(
    kube: KubeAPI, kubeconfig: Any, tmp_path: Path
) -> None:
    async def published() -> list[str] | None:
        """What kubectl explain reads: the group version's OpenAPI v3 document."""
        try:
            document = await kube.call("GET", "/openapi/v3/apis/dra.kopf-dra.io/v1alpha1")
        except NotFoundError:
            return None  # a just-installed CRD is published a moment later
        schemas = document["components"]["schemas"]
        (name,) = [n for n in schemas if n.endswith(".ResourcePoolStatus")]
        undocumented = _undocumented(schemas[name], "ResourcePoolStatus")
        return None if undocumented else [name]  # an older CRD may still be published

    await eventually(published, what="every field described in the published OpenAPI")
    kubectl = shutil.which("kubectl")
    if kubectl is None:  # the OpenAPI check above is what counts; kubectl shows it to people
        return
    proc = await asyncio.create_subprocess_exec(
        kubectl,
        "--kubeconfig",
        str(kubeconfig),
        "--cache-dir",
        str(tmp_path / "kube-cache"),  # never the checkout's or the user's
        "explain",
        "resourcepoolstatuses.status.problems",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert "<no description>" not in out.decode()
    assert "DuplicateDeviceName" in out.decode()  # the description of problems[].code


async def _gone(kube: KubeAPI, name: str, kind: str = KIND) -> bool:
    try:
        await kube.get(kind, name)
    except NotFoundError:
        return True
    return False


async def _reconciled_since(
    controller: PoolValidatorController, pool: tuple[str, str], before: int
) -> bool:
    return controller.reconciled[pool] > before


# --- the manifests -------------------------------------------------------------------------

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests" / "pool-validator"
for _extra in (
    Resource("rbac.authorization.k8s.io/v1", "clusterroles", False, "ClusterRole"),
    Resource("rbac.authorization.k8s.io/v1", "clusterrolebindings", False, "ClusterRoleBinding"),
    Resource("rbac.authorization.k8s.io/v1", "roles", True, "Role"),
    Resource("rbac.authorization.k8s.io/v1", "rolebindings", True, "RoleBinding"),
):
    register_resource(_extra)


async def test_every_manifest_is_accepted_by_a_server_side_dry_run(
    kube: KubeAPI, namespace: str
) -> None:
    kinds = []
    for doc in render(MANIFESTS):
        if resource_of(doc["kind"]).namespaced and doc["metadata"].get("namespace") == "kopf-dra":
            doc["metadata"]["namespace"] = namespace
        else:  # the rbac_applied fixture may have installed the real ones in this session
            doc["metadata"]["name"] += f"-{namespace}"
        created = await kube.create(doc, dry_run=True)
        assert created["metadata"]["name"] == doc["metadata"]["name"]
        kinds.append(doc["kind"])
    assert sorted(kinds) == [
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "PodDisruptionBudget",
        "Role",
        "Role",
        "RoleBinding",
        "RoleBinding",
        "ServiceAccount",
    ]


@pytest.fixture
async def validator_kubeconfig(
    kube: KubeAPI, kubeconfig: Any, namespace: str, tmp_path: Path
) -> AsyncIterator[Path]:
    """A kubeconfig as the manifests' ServiceAccount, with exactly the manifests' RBAC.

    The ServiceAccount lives in the test's namespace; cluster-scoped names and the Role in
    "default" get the namespace as suffix, so tests never share them.
    """
    workloads = ("Deployment", "PodDisruptionBudget")
    docs = [copy.deepcopy(d) for d in render(MANIFESTS) if d["kind"] not in workloads]
    created: list[dict[str, Any]] = []
    for doc in docs:
        meta = doc["metadata"]
        if doc["kind"] == "ServiceAccount" or meta.get("namespace") == "kopf-dra":
            meta["namespace"] = namespace  # its own SA; the leader Role where its Lease is
        if doc["kind"] != "ServiceAccount":
            meta["name"] += f"-{namespace}"
        if "roleRef" in doc:
            doc["roleRef"]["name"] += f"-{namespace}"
            doc["subjects"][0]["namespace"] = namespace
    order = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    for doc in sorted(docs, key=lambda d: order.index(d["kind"])):
        created.append(await kube.create(doc))
    sa = next(d for d in docs if d["kind"] == "ServiceAccount")
    token = await mint_token(kube.api_client, sa["metadata"]["name"], namespace)
    config = json.loads(await asyncio.to_thread(Path(kubeconfig).read_text))
    config["users"][0]["user"] = {"token": token}
    path = tmp_path / "pool-validator.kubeconfig"
    await asyncio.to_thread(path.write_text, json.dumps(config))
    try:
        yield path
    finally:
        for doc in reversed(created):
            if doc["kind"] != "ServiceAccount":
                await kube.delete(
                    doc["kind"], doc["metadata"]["name"], doc["metadata"].get("namespace")
                )


@pytest.mark.usefixtures("crd")
async def test_the_manifests_rbac_is_all_the_validator_needs(
    kube: KubeAPI, validator_kubeconfig: Path, driver: str, namespace: str
) -> None:
    await kube.create(slice_body("counters", driver, counters=GPU_COUNTERS))
    devices = await kube.create(
        slice_body("devices", driver, devices=[partition("p0", counter_set="gpu-9")])
    )
    await allocated_claim(kube, namespace, "a", driver, "p0")
    async with validator(validator_kubeconfig, lease_namespace=namespace):
        body = await status_where(kube, driver, Valid="False", what="status written as the SA")
        assert body["status"]["devices"] == {"total": 1, "allocated": 1}
        await eventually(
            lambda: slice_events(kube, devices["metadata"]["name"], "CounterSetNotFound"),
            what="event posted as the SA",
        )
        for s in (await kube.list("ResourceSlice"))["items"]:
            if s["spec"]["driver"] == driver:
                await kube.delete("ResourceSlice", s["metadata"]["name"])
        await eventually(
            lambda: _gone(kube, status_name(PoolID(driver, POOL))), what="status deleted as the SA"
        )


async def _webhook_ready(kube: KubeAPI, name: str) -> bool:
    """kopf wrote the managed configuration, with a rule for ResourceSlices."""
    try:
        body = await kube.get("ValidatingWebhookConfiguration", name)
    except NotFoundError:
        return False
    rules = [r for w in body.get("webhooks") or [] for r in w.get("rules") or []]
    return any("resourceslices" in r.get("resources", []) for r in rules)


@pytest.mark.usefixtures("crd")
async def test_the_webhook_refuses_slices_that_break_their_pool_and_fails_open(
    kube: KubeAPI, kubeconfig: Any, driver: str
) -> None:
    name = f"kopf-dra-test-{uuid.uuid4().hex[:8]}.kopf-dra.io"
    settings = PoolValidatorSettings(
        kubeconfig=str(kubeconfig),
        feature_gates=feature_gates(),
        webhook=True,
        webhook_port=free_port(),
        webhook_configuration=name,
    )
    registry = kopf.OperatorRegistry()
    register_login(registry, settings.kubeconfig)
    PoolValidatorController(settings).register(registry)
    first = slice_body("a", driver, devices=[{"name": "gpu-0"}])
    clash = slice_body("b", driver, devices=[{"name": "gpu-0"}])
    try:
        async with running_operator(registry, COMPONENT):
            await eventually(lambda: _webhook_ready(kube, name), what="managed configuration")
            await kube.create(first)
            with pytest.raises(ApiError) as refused:
                await eventually(
                    lambda: _refused(kube, clash), within=30, what="the webhook refusing"
                )
            assert refused.value.status == 422
            assert f"ResourceSlice {clash['metadata']['name']}" in refused.value.message
            assert "DuplicateDeviceName: duplicate device name gpu-0" in refused.value.message
            # A slice that adds nothing wrong is admitted.
            fine = await kube.create(slice_body("c", driver, devices=[{"name": "gpu-1"}]))
            assert fine["metadata"]["name"].endswith("-c")
            config = await kube.get("ValidatingWebhookConfiguration", name)
            assert {w["failurePolicy"] for w in config["webhooks"]} == {"Ignore"}
        # Validator gone, configuration left behind: publishing goes on (fail open).
        assert await kube.create(clash)
    finally:
        with contextlib.suppress(NotFoundError):
            await kube.delete("ValidatingWebhookConfiguration", name)


@pytest.mark.usefixtures("crd")
async def test_two_replicas_both_serve_the_webhook_and_the_standby_takes_over(
    kube: KubeAPI, kubeconfig: Any, namespace: str, driver: str
) -> None:
    """As the manifests run it: two replicas on one Lease, the webhook on in both. The standby
    answers admission reviews from its warm caches; when the leader stops, it publishes."""
    lease = unique("pool-validator")
    name = f"kopf-dra-test-{uuid.uuid4().hex[:8]}.kopf-dra.io"

    def replica(identity: str, configuration: str | None) -> tuple[Any, PoolValidatorController]:
        settings = PoolValidatorSettings(
            kubeconfig=str(kubeconfig),
            lease_name=lease,
            lease_namespace=namespace,
            identity=identity,
            lease_duration=3.0,
            renew_deadline=2.0,
            retry_period=0.5,
            webhook=True,
            webhook_port=free_port(),
            webhook_configuration=configuration,
        )
        registry = kopf.OperatorRegistry()
        register_login(registry, settings.kubeconfig)
        controller = PoolValidatorController(settings)
        controller.register(registry)
        return registry, controller

    # The leader's webhook serves too, but only the standby's is registered with the API server:
    # a refusal below can only be the standby's.
    leader_registry, leader = replica("leader", None)
    standby_registry, standby = replica("standby", name)
    first = slice_body("a", driver, devices=[{"name": "gpu-0"}], count=1)
    clash = slice_body("b", driver, devices=[{"name": "gpu-0"}], count=1)
    leading, standing = contextlib.AsyncExitStack(), contextlib.AsyncExitStack()
    try:
        await leading.enter_async_context(running_operator(leader_registry, COMPONENT))

        async def leads() -> bool:
            try:
                body = await kube.get("Lease", lease, namespace)
            except NotFoundError:
                return False  # no round of the election has run yet
            return leader.active and body["spec"].get("holderIdentity") == "leader"

        await eventually(leads, what="the first replica leading")
        await standing.enter_async_context(running_operator(standby_registry, COMPONENT))
        await eventually(lambda: _webhook_ready(kube, name), what="the standby's configuration")
        await kube.create(first)
        await status_where(kube, driver, Complete="True", Valid="True", what="the leader's verdict")
        with pytest.raises(ApiError) as refused:
            await eventually(lambda: _refused(kube, clash), within=30, what="the standby refusing")
        assert "DuplicateDeviceName: duplicate device name gpu-0" in refused.value.message
        assert not standby.active
        assert standby.queue.processed == 0

        await leading.aclose()  # the leader stops and gives the Lease up
        await kube.delete("ResourceSlice", first["metadata"]["name"])

        async def taken_over() -> bool:
            lease_body = await kube.get("Lease", lease, namespace)
            holder = lease_body["spec"].get("holderIdentity")
            return holder == "standby" and await pool_status(kube, driver) is None

        await eventually(taken_over, within=15, what="the standby deleting the pool's status")
        assert standby.active
        assert standby.queue.processed > 0
    finally:
        await leading.aclose()
        await standing.aclose()
        with contextlib.suppress(NotFoundError):
            await kube.delete("ValidatingWebhookConfiguration", name)


async def _refused(kube: KubeAPI, body: dict[str, Any]) -> bool:
    """Raise the API server's refusal of ``body``; False while it is still admitted (the
    webhook's endpoint may not be called yet). A dry run, which the webhook sees too: a probe
    created and deleted would stay in the validator's cache until its deletion is watched, and
    count against the pool's resourceSliceCount there."""
    await kube.create(body, dry_run=True)
    return False


CERT_SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "webhook-cert.sh"


def _verify(openssl: str, ca: str, cert: str, host: str) -> str:
    """openssl's complaint about ``cert`` (base64 PEM) for ``host`` under ``ca``; "" if none."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "ca.crt").write_bytes(base64.b64decode(ca))
        (Path(tmp) / "tls.crt").write_bytes(base64.b64decode(cert))
        proc = subprocess.run(
            [openssl, "verify", "-CAfile", "ca.crt", "-verify_hostname", host, "tls.crt"],
            cwd=tmp,
            capture_output=True,
            text=True,
            check=False,
        )
    return "" if proc.returncode == 0 else proc.stdout + proc.stderr


def _webhook_manifests(namespace: str, name: str) -> list[dict[str, Any]]:
    """manifests/pool-validator/webhook, moved into ``namespace`` with the configuration
    renamed, so a test never touches a real installation's objects."""
    docs = render(MANIFESTS / "webhook")
    for doc in docs:
        if doc["kind"] == "Service":
            doc["metadata"]["namespace"] = namespace
        else:
            doc["metadata"]["name"] = name
            for webhook in doc["webhooks"]:
                webhook["clientConfig"]["service"]["namespace"] = namespace
    return docs


async def test_the_webhook_manifests_are_accepted_and_the_cert_script_fills_them(
    kube: KubeAPI, kubeconfig: Any, namespace: str, tmp_path: Path
) -> None:
    require_program("kubectl", "hack/webhook-cert.sh applies the certificate with it")
    openssl = require_program("openssl", "hack/webhook-cert.sh makes the certificate with it")
    name = f"kopf-dra-test-{uuid.uuid4().hex[:8]}.kopf-dra.io"
    docs = _webhook_manifests(namespace, name)
    assert sorted(d["kind"] for d in docs) == ["Service", "ValidatingWebhookConfiguration"]
    for doc in docs:
        assert (await kube.create(doc, dry_run=True))["metadata"]["name"] == doc["metadata"]["name"]
    (config,) = [d for d in docs if d["kind"] == "ValidatingWebhookConfiguration"]
    assert config["webhooks"][0]["failurePolicy"] == "Ignore"  # fail open, as documented
    await kube.create(config)
    try:
        proc = await asyncio.create_subprocess_exec(
            "bash",
            str(CERT_SCRIPT),
            env={
                "PATH": os.environ["PATH"],
                "HOME": str(tmp_path),  # kubectl's config and discovery cache: never the user's
                "KUBECACHEDIR": str(tmp_path / "kube-cache"),
                "KUBECONFIG": str(kubeconfig),
                "NAMESPACE": namespace,
                "CONFIGURATION": name,
            },
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
        secret = await kube.get("Secret", "kopf-dra-pool-validator-webhook-tls", namespace)
        assert set(secret["data"]) == {"tls.crt", "tls.key", "ca.crt"}
        filled = await kube.get("ValidatingWebhookConfiguration", name)
        assert filled["webhooks"][0]["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
        # The serving certificate is for the Service's name and signed by that CA.
        host = f"kopf-dra-pool-validator-webhook.{namespace}.svc"
        assert _verify(openssl, secret["data"]["ca.crt"], secret["data"]["tls.crt"], host) == ""
    finally:
        with contextlib.suppress(NotFoundError):
            await kube.delete("ValidatingWebhookConfiguration", name)


# --- ResourcePoolStatusRequests (KEP-5677, resource.k8s.io/v1alpha3) ----------------------------


def pool_slice(driver: str, pool: str, name: str, *, count: int = 1, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{driver.split('.')[0]}-{pool}-{name}"},
        "spec": {
            "driver": driver,
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": count},
            "nodeName": "node-1",
            **spec,
        },
    }


async def claim_with(
    kube: KubeAPI, namespace: str, name: str, results: list[dict[str, Any]]
) -> dict[str, Any]:
    """Play the scheduler: a claim allocated these results (request "gpu")."""
    return await claim_allocated(kube, namespace, name, {"devices": {"results": results}})


def got(driver: str, pool: str, device: str, **extra: Any) -> dict[str, Any]:
    return {"request": "gpu", "driver": driver, "pool": pool, "device": device, **extra}


async def pool_shapes(kube: KubeAPI, namespace: str, driver: str) -> None:
    """One pool of each shape, with its allocations; "publishing" has 1 of its 2 slices."""
    half = {"counterSet": "gpu-0", "counters": {"memory": {"value": "20Gi"}}}
    whole = {"counterSet": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}
    plain = [{"name": f"d{i}"} for i in range(3)]
    slices = [
        pool_slice(driver, "plain", "s", devices=plain),
        pool_slice(driver, "partitions", "counters", count=2, sharedCounters=GPU_COUNTERS),
        pool_slice(
            driver,
            "partitions",
            "devices",
            count=2,
            devices=[
                {"name": "whole", "consumesCounters": [whole]},
                {"name": "half-0", "consumesCounters": [half]},
                {"name": "half-1", "consumesCounters": [half]},
            ],
        ),
        pool_slice(
            driver,
            "shared",
            "s",
            devices=[
                {
                    "name": "nic",
                    "allowMultipleAllocations": True,
                    "capacity": {"bandwidth": {"value": "10Gi"}},
                },
                {"name": "other"},
            ],
        ),
        pool_slice(driver, "admin", "s", devices=[{"name": "d0"}, {"name": "d1"}]),
        pool_slice(
            driver,
            "tainted",
            "s",
            devices=[
                {"name": "ok"},
                {"name": "info", "taints": [{"key": "k", "effect": "None"}]},
                {"name": "drain", "taints": [{"key": "k", "effect": "NoSchedule"}]},
                {"name": "evict", "taints": [{"key": "k", "effect": "NoExecute"}]},
            ],
        ),
        pool_slice(driver, "publishing", "s-0", count=2, devices=[{"name": "d0"}]),
    ]
    for s in slices:
        await kube.create(s)
    await claim_with(kube, namespace, "plain", [got(driver, "plain", "d0")])
    await claim_with(kube, namespace, "whole", [got(driver, "partitions", "whole")])
    for name in ("a", "b", "c"):
        share = {"shareID": str(uuid.uuid4()), "consumedCapacity": {"bandwidth": "1Gi"}}
        await claim_with(kube, namespace, f"nic-{name}", [got(driver, "shared", "nic", **share)])
    # adminAccess results need the namespace's admin-access label (the API server checks it).
    labels = {"metadata": {"labels": {"resource.kubernetes.io/admin-access": "true"}}}
    await kube.patch("Namespace", namespace, labels)
    await claim_with(kube, namespace, "admin", [got(driver, "admin", "d0", adminAccess=True)])
    await claim_with(kube, namespace, "user", [got(driver, "admin", "d0")])


@contextlib.asynccontextmanager
async def _deleted(kube: KubeAPI, body: dict[str, Any]) -> AsyncIterator[None]:
    """Delete a cluster-scoped object the test made, however the test ends."""
    try:
        yield
    finally:
        with contextlib.suppress(NotFoundError):
            await kube.delete(body["kind"], body["metadata"]["name"])


async def ask(kube: KubeAPI, driver: str, **spec: Any) -> dict[str, Any]:
    return await kube.create(
        {
            "apiVersion": "resource.k8s.io/v1alpha3",
            "kind": "ResourcePoolStatusRequest",
            "metadata": {"name": unique("ask")},
            "spec": {"driver": driver, **spec},
        }
    )


async def answered(kube: KubeAPI, name: str, within: float = 30.0) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        body = await kube.get("ResourcePoolStatusRequest", name)
        return body if body.get("status") else None

    return await eventually(probe, within=within, what=f"ResourcePoolStatusRequest {name} answered")


def figures(pool: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(
        pool.get(f)
        for f in ("totalDevices", "allocatedDevices", "unavailableDevices", "availableDevices")
    )


@pytest.mark.usefixtures("crd")
async def test_requests_are_answered_once_with_counts_per_pool_shape(
    kube: KubeAPI, validator_kubeconfig: Path, driver: str, namespace: str
) -> None:
    """As the manifests' ServiceAccount: answered, limited, filtered, and never answered twice."""
    await pool_shapes(kube, namespace, driver)
    rule = await kube.create(
        {
            "apiVersion": "resource.k8s.io/v1beta2",
            "kind": "DeviceTaintRule",
            "metadata": {"name": unique("drain")},
            "spec": {
                "deviceSelector": {"driver": driver, "pool": "tainted", "device": "ok"},
                "taint": {"key": "k", "effect": "NoSchedule"},
            },
        }
    )
    async with (
        _deleted(kube, rule),
        validator(
            validator_kubeconfig,
            lease_namespace=namespace,
            request_incomplete_retries=2,
            request_incomplete_retry_delay=0.2,
        ),
    ):
        request = await ask(kube, driver)
        body = await answered(kube, request["metadata"]["name"])
        status = body["status"]
        pools = {p["poolName"]: p for p in status["pools"]}
        assert status["poolCount"] == 6
        assert list(pools) == sorted(pools)
        assert figures(pools["plain"]) == (3, 1, 0, 2)
        assert figures(pools["partitions"]) == (3, 1, 2, 0)
        assert figures(pools["shared"]) == (2, 1, 0, 1)
        assert figures(pools["admin"]) == (2, 1, 0, 1)
        # NoSchedule and NoExecute on devices, and the DeviceTaintRule's on "ok".
        assert figures(pools["tainted"]) == (4, 0, 3, 1)
        assert figures(pools["publishing"]) == (None, None, None, None)
        incomplete = f"pool {driver}/publishing is incomplete: observed 1/2 slices at generation 1"
        if PoolValidatorSettings().version().release >= VIEWS_SINCE:
            incomplete = f"{PREFIX_INCOMPLETE} {incomplete}"  # 1.37's machine-readable prefix
        assert pools["publishing"]["validationError"] == incomplete
        assert pools["plain"]["nodeName"] == "node-1"
        assert pools["plain"]["resourceSliceCount"] == 1
        (complete,) = status["conditions"]
        assert (complete["type"], complete["status"], complete["reason"]) == (
            "Complete",
            "True",
            "CalculationComplete",
        )
        assert complete["message"] == "Calculated status for 6 pools (1 incomplete)"

        limited = await answered(kube, (await ask(kube, driver, limit=2))["metadata"]["name"])
        assert [p["poolName"] for p in limited["status"]["pools"]] == ["admin", "partitions"]
        assert limited["status"]["poolCount"] == 6
        one = await answered(kube, (await ask(kube, driver, poolName="plain"))["metadata"]["name"])
        assert [p["poolName"] for p in one["status"]["pools"]] == ["plain"]
        assert figures(one["status"]["pools"][0]) == (3, 1, 0, 2)

        # Answered once: a later allocation changes a new request's answer, not the old one.
        await claim_with(kube, namespace, "more", [got(driver, "plain", "d1")])
        again = await answered(
            kube, (await ask(kube, driver, poolName="plain"))["metadata"]["name"]
        )
        assert figures(again["status"]["pools"][0]) == (3, 2, 0, 1)
        old = await kube.get("ResourcePoolStatusRequest", one["metadata"]["name"])
        assert old["metadata"]["resourceVersion"] == one["metadata"]["resourceVersion"]


@pytest.mark.usefixtures("crd")
async def test_requests_wait_for_incomplete_pools_and_go_at_their_ttl(
    kube: KubeAPI, kubeconfig: Any, driver: str
) -> None:
    async with validator(
        kubeconfig,
        request_completed_ttl=2.0,
        request_pending_ttl=4.0,
        request_incomplete_retries=10**6,
        request_incomplete_retry_delay=0.2,
    ):
        await kube.create(pool_slice(driver, "p", "s-0", count=2, devices=[{"name": "d0"}]))
        stuck = await ask(kube, driver)
        seen: list[dict[str, Any]] = []

        async def stuck_gone() -> bool:
            try:
                seen.append(await kube.get("ResourcePoolStatusRequest", stuck["metadata"]["name"]))
            except NotFoundError:
                return True
            return False

        # Never answered while its pool is incomplete; deleted at the pending TTL.
        await eventually(stuck_gone, what="the unanswered request deleted at its pending TTL")
        assert seen
        assert not any(b.get("status") for b in seen)

        waiting = await ask(kube, driver)
        await kube.create(pool_slice(driver, "p", "s-1", count=2, devices=[{"name": "d1"}]))
        body = await answered(kube, waiting["metadata"]["name"])
        (pool,) = body["status"]["pools"]
        assert "validationError" not in pool
        assert figures(pool) == (2, 0, 0, 2)
        await eventually(
            lambda: _gone(kube, waiting["metadata"]["name"], "ResourcePoolStatusRequest"),
            what="the answered request deleted at its completed TTL",
        )


@pytest.mark.usefixtures("crd")
async def test_devices_are_published_per_topology_domain(
    kube: KubeAPI, kubeconfig: Any, driver: str
) -> None:
    """With --domain-key, the devices of the pools local to each rack's nodes, summed per
    rack; a node relabelled moves its pool's devices to its new rack."""
    key = f"topology.example.com/{unique('rack')}"
    nodes = {}
    for rack, devices in (("a", 2), ("a", 2), ("b", 3)):
        name = unique(f"node-{rack}")
        await create_node(kube, name, {key: rack})
        body = slice_body(name, driver, devices=[{"name": f"gpu-{i}"} for i in range(devices)])
        body["spec"]["pool"]["name"] = name
        body["spec"]["pool"]["resourceSliceCount"] = 1
        body["spec"]["nodeName"] = name
        await kube.create(body)
        nodes[name] = rack

    def shown() -> dict[tuple[str, str], float | None]:
        return {
            (domain, state): pool_metrics.REGISTRY.get_sample_value(
                "kopf_dra_topology_domain_devices",
                {"key": key, "domain": domain, "state": state},
            )
            for domain in ("a", "b")
            for state in ("total", "allocated", "free")
        }

    async def published(expected: Mapping[tuple[str, str], float | None]) -> bool:
        return shown() == expected

    async with validator(kubeconfig, domain_key=key):
        first = {
            ("a", "total"): 4.0, ("a", "allocated"): 0.0, ("a", "free"): 4.0,
            ("b", "total"): 3.0, ("b", "allocated"): 0.0, ("b", "free"): 3.0,
        }  # fmt: skip
        await eventually(lambda: published(first), what="devices per rack")
        moved = next(n for n, rack in nodes.items() if rack == "b")
        await kube.patch("Node", moved, {"metadata": {"labels": {key: "a"}}})
        after = {
            ("a", "total"): 7.0, ("a", "allocated"): 0.0, ("a", "free"): 7.0,
            ("b", "total"): None, ("b", "allocated"): None, ("b", "free"): None,
        }  # fmt: skip
        await eventually(lambda: published(after), what="rack b's node moved to rack a")


async def test_devices_held_are_published_per_namespace_and_queue(
    kube: KubeAPI, kubeconfig: Any, driver: str, namespace: str
) -> None:
    """With --queue-label, a claim's devices count for the queue label of the pod it is
    reserved for; the pod relabelled moves them; the claim deallocated leaves no series."""
    label = f"example.com/{unique('queue')}"
    pod = pod_body("trainer", namespace, {"name": "gpu", "resourceClaimName": "gpus"})
    pod["metadata"]["labels"] = {label: "team-a"}
    created = await kube.create(pod)
    await kube.create(claim_body("gpus", namespace, driver))
    results = [
        {"request": "gpu", "driver": driver, "pool": "p", "device": f"gpu-{i}"} for i in range(2)
    ]
    reserved = [{"resource": "pods", "name": "trainer", "uid": created["metadata"]["uid"]}]
    status = {"allocation": {"devices": {"results": results}}, "reservedFor": reserved}

    def shown(queue: str) -> float | None:
        return pool_metrics.REGISTRY.get_sample_value(
            "kopf_dra_namespace_devices", {"namespace": namespace, "queue": queue}
        )

    async def published(expected: Mapping[str, float | None]) -> bool:
        return {q: shown(q) for q in expected} == expected

    async with validator(kubeconfig, queue_label=label):
        await kube.patch(
            "ResourceClaim", "gpus", {"status": status}, namespace, subresource="status"
        )
        await eventually(lambda: published({"team-a": 2.0, "": None}), what="team-a's devices")
        await kube.patch("Pod", "trainer", {"metadata": {"labels": {label: "team-b"}}}, namespace)
        await eventually(
            lambda: published({"team-a": None, "team-b": 2.0}), what="moved to team-b's queue"
        )
        await kube.patch(
            "ResourceClaim", "gpus", {"status": {"allocation": None, "reservedFor": None}},
            namespace, subresource="status",
        )  # fmt: skip
        await eventually(lambda: published({"team-b": None, "": None}), what="no series left")
