"""Kubernetes 1.37's API against a real 1.37.2 API server: every new field is refused where
kopf-dra's validation refuses it, and kept by every write kopf-dra makes; DeviceTaintRules are
read from v1; ResourcePoolStatusRequests get 1.37's views.

The new fields are alpha: the release's default gates drop them, so these tests start a control
plane of their own, of the release the tests run against (KOPF_DRA_KUBERNETES_VERSION), with
their gates on, and run the components in process against it with the same gates. On 1.36 they
are skipped: 1.36 knows none of these fields (the unit tests show they are unknown there). The
last test runs on the session's control plane of either release: the views are 1.37's only.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml
from kubernetes_asyncio import client

from operators.api.features import Release, format_feature_gates
from operators.api.resource import KINDS
from operators.controllers.claim_templates import app as templates_app
from operators.controllers.claim_templates.settings import ClaimTemplateSettings
from operators.controllers.pool_validator.handlers import COMPONENT, PoolValidatorController
from operators.controllers.pool_validator.settings import PoolValidatorSettings
from operators.controllers.reservations import app as reservations_app
from operators.controllers.reservations.settings import ReservationSettings
from operators.kube.api import ConflictError, InvalidError, KubeAPI
from operators.kube.client import make_api_client
from operators.localcluster import controlplane
from operators.runtime.app import register_login
from tests.integration.helpers import (
    create_namespace,
    create_node,
    device_class_body,
    eventually,
    missing_fields,
    pod_body,
    running_operator,
    slice_body,
    start_scheduler,
    unique,
)
from tests.unit.api.release_cases import (
    BAD_DERIVED_EXPRESSIONS,
    BASES_137,
    GATES_137,
    INVALID_137,
    Doc,
)

pytestmark = pytest.mark.integration

VERSION = controlplane.kubernetes_version()
RELEASE = Release.parse(VERSION)
R137 = Release(1, 37)
ROOT = Path(__file__).resolve().parents[2]
CRD_FILE = ROOT / "crds" / "resourcepoolstatuses.yaml"
needs_137 = pytest.mark.skipif(
    RELEASE < R137 or os.environ.get("KOPF_DRA_USE_EXISTING_CLUSTER") == "1",
    reason=f"Kubernetes 1.37's fields: the local control plane is {VERSION} (run with "
    "KOPF_DRA_KUBERNETES_VERSION=v1.37.2; not with KOPF_DRA_USE_EXISTING_CLUSTER)",
)


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.ControlPlane]:
    """A control plane of the release under test with the new fields' gates on, serving
    DeviceTaintRule in v1 only, as a stock 1.37 does (v1beta2 is off by default)."""
    if RELEASE < R137 or os.environ.get("KOPF_DRA_USE_EXISTING_CLUSTER") == "1":
        pytest.skip(f"Kubernetes 1.37's fields: the local control plane is {VERSION}")
    with controlplane.running(
        tmp_path_factory.mktemp("gated-control-plane"),
        extra_gates=GATES_137,
        # PodGroups and CompositePodGroups too (the local control plane's scheduling.k8s.io
        # versions): the 1.37 gates have GenericWorkload and CompositePodGroup on, and a
        # scheduler with them on watches them (as kube-scheduler, it does not start where they
        # are not served).
        runtime_config=",".join(
            item
            for item in controlplane.runtime_config(VERSION).split(",")
            if item != "resource.k8s.io/v1beta2=true"
        ),
    ) as cp:
        yield cp


@pytest.fixture(scope="module")
async def gated_kube(gated: controlplane.ControlPlane) -> AsyncIterator[KubeAPI]:
    async with await make_api_client(gated.kubeconfig) as api_client:
        yield KubeAPI(api_client, release=R137)


def _settings(gated: controlplane.ControlPlane, component: str) -> dict[str, Any]:
    """What every component gets on the gated control plane: its gates and release."""
    return {
        "kubeconfig": str(gated.kubeconfig),
        "feature_gates": gated.gates,
        "kubernetes_version": str(RELEASE),
        "lease_name": unique(component),
    }


@pytest.fixture(scope="module")
async def components(gated: controlplane.ControlPlane) -> AsyncIterator[None]:
    """The scheduler, the claim-template controller and the reservation cleanup."""
    settings = _settings(gated, "scheduler")
    del settings["kubeconfig"]
    _, scheduler_registry = start_scheduler(gated.kubeconfig, **settings)
    templates = ClaimTemplateSettings(**_settings(gated, "claim-templates"))
    reservations = ReservationSettings(**_settings(gated, "reservations"))
    async with (
        running_operator(scheduler_registry, "scheduler"),
        running_operator(templates_app.APP.build_registry(templates), "claim-templates"),
        running_operator(reservations_app.APP.build_registry(reservations), "reservations"),
    ):
        yield


async def _namespace(kube: KubeAPI) -> str:
    """A fresh namespace; also the node the cases' slices name, which 1.37's NodeDeclaredFeatures
    admission requires, declaring DRANodeAllocatableResources, for a slice whose devices have
    nodeAllocatableResources."""
    with contextlib.suppress(ConflictError):
        node = await create_node(kube, "node-1")
        node["status"]["declaredFeatures"] = ["DRANodeAllocatableResources"]
        await kube.replace_status(node)
    return await create_namespace(kube.api_client)


def _placed(doc: Doc, namespace: str) -> Doc:
    obj = copy.deepcopy(doc)
    if obj["kind"] == "ResourceClaim":
        obj["metadata"]["namespace"] = namespace
    else:
        obj["metadata"]["name"] = unique(obj["metadata"]["name"])
    return obj


# --- validation ------------------------------------------------------------------------------


@needs_137
@pytest.mark.parametrize("base", ["slice", "claim"])
async def test_the_137_objects_are_accepted_and_kept_whole(gated_kube: KubeAPI, base: str) -> None:
    obj = _placed(BASES_137[base](), await _namespace(gated_kube))
    created = await gated_kube.create(obj)
    assert missing_fields(obj["spec"], created["spec"]) == []
    assert KINDS[obj["kind"]].load(created).dump() == created


SPEC_CASES = [case for case in INVALID_137 if case[1] != "allocated-claim"]


@needs_137
@pytest.mark.parametrize(
    ("base", "mutate", "path"),
    [case[1:4] for case in SPEC_CASES],
    ids=[case[0] for case in SPEC_CASES],
)
async def test_the_api_server_refuses_at_the_field_validation_names(
    gated_kube: KubeAPI, base: str, mutate: Callable[[Doc], object], path: str
) -> None:
    obj = _placed(BASES_137[base](), await _namespace(gated_kube))
    mutate(obj)
    with pytest.raises(InvalidError) as refused:
        await gated_kube.create(obj, dry_run=True)
    fields = [c.get("field") for c in refused.value.causes]
    assert path in fields, refused.value.causes


@needs_137
@pytest.mark.parametrize(
    "expression",
    [e for _, e, _ in BAD_DERIVED_EXPRESSIONS],
    ids=[i for i, _, _ in BAD_DERIVED_EXPRESSIONS],
)
async def test_the_api_server_refuses_the_derived_expressions_simulate_refuses(
    gated_kube: KubeAPI, expression: str
) -> None:
    obj = _placed(BASES_137["claim"](), await _namespace(gated_kube))
    exactly = obj["spec"]["devices"]["requests"][0]["exactly"]
    exactly["derivedAttributes"][0]["expression"] = expression
    with pytest.raises(InvalidError) as refused:
        await gated_kube.create(obj, dry_run=True)
    fields = [c.get("field") for c in refused.value.causes]
    assert "spec.devices.requests[0].exactly.derivedAttributes[0].expression" in fields


# --- kept by every write -----------------------------------------------------------------------


async def _gpus(kube: KubeAPI, driver: str, declared: tuple[str, ...] = (), **spec: Any) -> str:
    """A node with two devices of ``driver`` (numa 0 and 1) and a class for them; the node
    declares ``declared`` (status.declaredFeatures)."""
    node = unique("node")
    body = await create_node(kube, node)
    if declared:
        body["status"]["declaredFeatures"] = list(declared)
        await kube.replace_status(body)
    devices = [
        {"name": f"gpu-{i}", "attributes": {"numa": {"int": i}, "model": {"string": "a100"}}}
        for i in range(2)
    ]
    await kube.create(slice_body(unique("slice"), driver, node, devices, **spec))
    await kube.create(device_class_body(driver, driver))
    return node


async def _bound(kube: KubeAPI, namespace: str, name: str) -> str:
    async def probe() -> str | None:
        node: str | None = (await kube.get("Pod", name, namespace))["spec"].get("nodeName")
        return node

    return await eventually(probe, within=60, what=f"pod {namespace}/{name} bound")


@needs_137
@pytest.mark.usefixtures("components")
async def test_derived_attributes_survive_the_template_controller_and_the_scheduler(
    gated_kube: KubeAPI,
) -> None:
    """The claim-template controller creates the claim with them, the scheduler (gates on)
    allocates by them and leaves the claim's spec whole; its informer reads the v1 taint rule,
    so the claim gets the untainted device."""
    kube, namespace, driver = (
        gated_kube,
        await _namespace(gated_kube),
        f"{unique('gpu')}.example.com",
    )
    node = await _gpus(kube, driver)
    rule = await kube.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceTaintRule",
            "metadata": {"name": unique("drain")},
            "spec": {
                "deviceSelector": {"driver": driver, "device": "gpu-0"},
                "taint": {"key": "maintenance", "effect": "NoSchedule"},
            },
        }
    )
    assert rule["apiVersion"] == "resource.k8s.io/v1"
    derived = [{"name": f"{driver}/numa", "expression": f'device.attributes["{driver}"].numa'}]
    exactly: dict[str, Any] = {"deviceClassName": driver, "derivedAttributes": derived}
    template: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gpu-template", "namespace": namespace},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": exactly}],
                    "constraints": [{"requests": ["gpu"], "matchAttribute": f"{driver}/numa"}],
                }
            }
        },
    }
    created = await kube.create(template)
    assert created["spec"]["spec"]["devices"]["requests"][0]["exactly"]["derivedAttributes"]
    entry = {"name": "gpu", "resourceClaimTemplateName": "gpu-template"}
    await kube.create(pod_body("trainer", namespace, entry))

    assert await _bound(kube, namespace, "trainer") == node
    (claim,) = (await kube.list("ResourceClaim", namespace))["items"]
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["derivedAttributes"] == derived
    results = claim["status"]["allocation"]["devices"]["results"]
    assert [r["device"] for r in results] == ["gpu-1"]  # gpu-0 is tainted by the v1 rule
    assert claim["status"]["reservedFor"][0]["name"] == "trainer"


@needs_137
@pytest.mark.usefixtures("components")
async def test_skip_node_operations_survive_the_scheduler_and_the_reservation_cleanup(
    gated_kube: KubeAPI,
) -> None:
    """A claim allocated elsewhere with skipNodeOperations (copied from its slice, as 1.37's
    scheduler does): the scheduler's reservedFor writes and the cleanup's keep them. The node
    declares DRAOptionalNodeOperations, without which no pod of the claim may go there."""
    kube, namespace, driver = (
        gated_kube,
        await _namespace(gated_kube),
        f"{unique('gpu')}.example.com",
    )
    node = await _gpus(kube, driver, ("DRAOptionalNodeOperations",), skipNodeOperations=["*"])
    claim = await kube.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "shared", "namespace": namespace},
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": driver}}]}
            },
        }
    )
    result = {
        "request": "gpu",
        "driver": driver,
        "pool": node,
        "device": "gpu-0",
        "skipNodeOperations": ["*"],
    }
    claim["status"] = {
        "allocation": {
            "devices": {"results": [result]},
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            },
        }
    }
    claim = await kube.replace_status(claim)
    assert claim["status"]["allocation"]["devices"]["results"] == [result]
    entry = {"name": "gpu", "resourceClaimName": "shared"}
    for name in ("a", "b"):
        await kube.create(pod_body(name, namespace, entry))
        assert await _bound(kube, namespace, name) == node

    async def reserved(*names: str) -> dict[str, Any] | None:
        body = await kube.get("ResourceClaim", "shared", namespace)
        holders = sorted(r["name"] for r in body["status"].get("reservedFor") or [])
        return body if holders == sorted(names) else None

    both = await eventually(lambda: reserved("a", "b"), what="both pods reserve the claim")
    assert both["status"]["allocation"]["devices"]["results"] == [result]
    pod = await kube.get("Pod", "a", namespace)
    pod["status"]["phase"] = "Failed"  # play kubelet
    await kube.replace_status(pod)
    left = await eventually(lambda: reserved("b"), what="the cleanup drops a's reservation")
    assert left["status"]["allocation"]["devices"]["results"] == [result]


# --- ResourcePoolStatusRequests ----------------------------------------------------------------


async def _install_crd(kube: KubeAPI) -> None:
    body = yaml.safe_load(CRD_FILE.read_text())
    try:
        await kube.create(body)
    except ConflictError:
        return

    async def established() -> bool:
        got = await kube.get("CustomResourceDefinition", body["metadata"]["name"])
        conditions = (got.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    await eventually(established, what="ResourcePoolStatus CRD established")


def _validator(kubeconfig: Path | str, **settings: Any) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    register_login(registry, str(kubeconfig))
    PoolValidatorController(PoolValidatorSettings(kubeconfig=str(kubeconfig), **settings)).register(
        registry
    )
    return registry


async def _answer(kube: KubeAPI, driver: str, **spec: Any) -> dict[str, Any]:
    request = await kube.create(
        {
            "apiVersion": "resource.k8s.io/v1alpha3",
            "kind": "ResourcePoolStatusRequest",
            "metadata": {"name": unique("ask")},
            "spec": {"driver": driver, **spec},
        }
    )

    async def answered() -> dict[str, Any] | None:
        body = await kube.get("ResourcePoolStatusRequest", request["metadata"]["name"])
        return body if body.get("status") else None

    return await eventually(answered, within=60, what="the request answered")


def _partitioned_pool(driver: str, attribute: str | None) -> list[Doc]:
    """A 40Gi GPU whole or as two halves, their type in ``profile``; a shareable NIC."""

    def part(name: str, profile: str, memory: str, **extra: Any) -> Doc:
        uses = {"counterSet": "gpu-0", "counters": {"memory": {"value": memory}}}
        return {
            "name": name,
            "attributes": {"profile": {"string": profile}},
            "consumesCounters": [uses],
            **extra,
        }

    devices = slice_body(
        unique("devices"),
        driver,
        "node-1",
        [
            part("whole", "full", "40Gi"),
            part("half-0", "half", "20Gi"),
            part("half-1", "half", "20Gi"),
        ],
        pool="gpus",
        count=2,
    )
    if attribute is not None:
        devices["spec"]["partitionTypeAttribute"] = attribute
    counters = slice_body(unique("counters"), driver, "node-1", [], pool="gpus", count=2)
    del counters["spec"]["devices"]
    counters["spec"]["sharedCounters"] = [
        {"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}
    ]
    nic = {
        "name": "nic",
        "allowMultipleAllocations": True,
        "capacity": {"bandwidth": {"value": "100G"}},
    }
    nics = slice_body(unique("nics"), driver, "node-1", [nic], pool="nics")
    return [counters, devices, nics]


async def _share(kube: KubeAPI, namespace: str, driver: str, amount: str) -> None:
    claim = await kube.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": unique("share"), "namespace": namespace},
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "x"}}]}
            },
        }
    )
    result = {
        "request": "gpu",
        "driver": driver,
        "pool": "nics",
        "device": "nic",
        "shareID": str(uuid.uuid4()),
        "consumedCapacity": {"bandwidth": amount},
    }
    claim["status"] = {"allocation": {"devices": {"results": [result]}}}
    await kube.replace_status(claim)


@needs_137
async def test_pool_status_requests_get_137s_views(
    gated: controlplane.ControlPlane, gated_kube: KubeAPI
) -> None:
    """Partition types by the slices' attribute (a half tainted by a v1 rule is not one more),
    shareable capacity summed; the API server takes the answer and keeps the request's default."""
    kube, driver = gated_kube, f"{unique('gpu')}.example.com"
    namespace = await _namespace(kube)
    await _install_crd(kube)
    for body in _partitioned_pool(driver, f"{driver}/profile"):
        await kube.create(body)
    await kube.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceTaintRule",
            "metadata": {"name": unique("drain")},
            "spec": {
                "deviceSelector": {"driver": driver, "pool": "gpus", "device": "half-1"},
                "taint": {"key": "maintenance", "effect": "NoSchedule"},
            },
        }
    )
    await _share(kube, namespace, driver, "30G")
    settings = _settings(gated, "pool-validator")
    async with running_operator(_validator(**settings), COMPONENT):
        body = await _answer(kube, driver, defaultPartitionTypeAttribute=f"{driver}/other")
    assert body["spec"]["defaultPartitionTypeAttribute"] == f"{driver}/other"
    gpus, nics = body["status"]["pools"]
    assert gpus["partitionSummary"] == [
        {"attribute": f"{driver}/profile", "type": "full", "total": 1, "allocatable": 1},
        {"attribute": f"{driver}/profile", "type": "half", "total": 2, "allocatable": 1},
    ]
    assert "shareableSummary" not in gpus
    assert nics["shareableSummary"] == {
        "fullyAvailableDevices": 0,
        "partiallyAvailableDevices": 1,
        "capacity": [{"name": "bandwidth", "total": "100G", "consumed": "30G", "available": "70G"}],
    }


async def test_pool_status_views_are_137s_only(kubeconfig: Path, api: client.ApiClient) -> None:
    """On the session's control plane, of either release and its default gates: the shareable
    view (consumable capacity is on in both) is answered on 1.37, left out on 1.36."""
    kube, driver = KubeAPI(api, release=RELEASE), f"{unique('gpu')}.example.com"
    namespace = await create_namespace(api)
    await _install_crd(kube)
    for body in _partitioned_pool(driver, None):
        await kube.create(body)
    await _share(kube, namespace, driver, "30G")
    settings = {
        "feature_gates": controlplane.feature_gates(),
        "kubernetes_version": str(RELEASE),
        "lease_name": unique("pool-validator"),
    }
    async with running_operator(_validator(kubeconfig, **settings), COMPONENT):
        body = await _answer(kube, driver)
    gpus, nics = body["status"]["pools"]
    assert "partitionSummary" not in gpus  # no slice names a partition type attribute
    if RELEASE >= R137:
        assert nics["shareableSummary"]["partiallyAvailableDevices"] == 1
    else:
        assert "shareableSummary" not in nics


def _differences(theirs: Any, ours: Any, path: str = "") -> dict[str, tuple[Any, Any]]:
    """Every leaf where two answers differ, by its path."""
    if isinstance(theirs, dict) and isinstance(ours, dict):
        out: dict[str, tuple[Any, Any]] = {}
        for key in sorted(set(theirs) | set(ours)):
            out |= _differences(theirs.get(key), ours.get(key), f"{path}.{key}")
        return out
    if isinstance(theirs, list) and isinstance(ours, list) and len(theirs) == len(ours):
        out = {}
        for i, (a, b) in enumerate(zip(theirs, ours, strict=True)):
            out |= _differences(a, b, f"{path}[{i}]")
        return out
    return {} if theirs == ours else {path: (theirs, ours)}


@pytest.fixture(scope="module")
def kube_controller_manager() -> Path:
    """kube-controller-manager of the release under test (built once into the cache)."""
    built = subprocess.run(
        ["bash", str(ROOT / "hack" / "controlplane" / "build-upstream.sh")],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(built.stdout.strip().splitlines()[-1]) / "kube-controller-manager"


def _start_controller(binary: Path, cp: controlplane.ControlPlane) -> subprocess.Popen[bytes]:
    """Its resourcepoolstatusrequest-controller alone, with the control plane's gates."""
    with open(cp.state_dir / "kube-controller-manager.log", "ab") as log:
        return subprocess.Popen(
            [
                str(binary),
                f"--kubeconfig={cp.kubeconfig}",
                "--controllers=resourcepoolstatusrequest-controller",
                f"--feature-gates={format_feature_gates(cp.gates)}",
                "--leader-elect=false",
                "--secure-port=0",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    process.wait(30)


@needs_137
async def test_the_answer_is_kube_controller_managers_but_where_the_readme_says(
    gated: controlplane.ControlPlane, gated_kube: KubeAPI, kube_controller_manager: Path
) -> None:
    """kube-controller-manager 1.37.2's resourcepoolstatusrequest-controller and the pool
    validator answer the same pools: partitions by the slices' attribute and by the request's
    default, a half allocated and one tainted by a v1 rule; three shareable NICs, one used up,
    one tainted (the default also reaches the NICs' pool, which has no counters: both say so).
    They differ only in the README's rows."""
    kube, driver = gated_kube, f"{unique('gpu')}.example.com"
    namespace = await _namespace(kube)
    await _install_crd(kube)
    docs = _partitioned_pool(driver, f"{driver}/profile")
    for body in copy.deepcopy(docs[:2]):  # the same GPU whose slices name no attribute
        body["metadata"]["name"] = unique("untyped")
        body["spec"]["pool"]["name"] = "untyped"
        body["spec"].pop("partitionTypeAttribute", None)
        docs.append(body)
    nic = docs[2]["spec"]["devices"][0]
    docs[2]["spec"]["devices"] += [{**nic, "name": "nic-1"}, {**nic, "name": "nic-2"}]
    for body in docs:
        await kube.create(body)
    for pool, device in (("gpus", "half-1"), ("nics", "nic-1")):
        await kube.create(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceTaintRule",
                "metadata": {"name": unique("drain")},
                "spec": {
                    "deviceSelector": {"driver": driver, "pool": pool, "device": device},
                    "taint": {"key": "maintenance", "effect": "NoSchedule"},
                },
            }
        )
    await _share(kube, namespace, driver, "100G")
    claim = await kube.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "half", "namespace": namespace},
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "x"}}]}
            },
        }
    )
    half = {"request": "gpu", "driver": driver, "pool": "gpus", "device": "half-0"}
    claim["status"] = {"allocation": {"devices": {"results": [half]}}}
    await kube.replace_status(claim)
    spec = {"defaultPartitionTypeAttribute": f"{driver}/profile"}
    upstream = await asyncio.to_thread(_start_controller, kube_controller_manager, gated)
    try:
        theirs = await _answer(kube, driver, **spec)
    finally:
        await asyncio.to_thread(_stop, upstream)
    async with running_operator(_validator(**_settings(gated, "pool-validator")), COMPONENT):
        ours = await _answer(kube, driver, **spec)
    pools = [p["poolName"] for p in ours["status"]["pools"]]
    assert (
        pools == [p["poolName"] for p in theirs["status"]["pools"]] == ["gpus", "nics", "untyped"]
    )
    differences = _differences(theirs["status"]["pools"], ours["status"]["pools"])
    assert differences == {
        # whole no longer fits beside the allocated half: unavailable, not available
        "[0].availableDevices": (1, 0),
        "[0].unavailableDevices": (1, 2),
        # the other half is tainted: never one more
        "[0].partitionSummary[1].allocatable": (1, 0),
        # a used-up NIC has no room, a tainted one takes no share, nor its bandwidth
        "[1].shareableSummary.fullyAvailableDevices": (2, 1),
        "[1].shareableSummary.partiallyAvailableDevices": (1, 0),
        "[1].shareableSummary.capacity[0].available": ("200G", "100G"),
    }
    assert ours["status"]["pools"][1]["validationError"].startswith("PartitionTypeMissing: pool")
