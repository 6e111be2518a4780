"""``simulate`` predicts what the scheduler does: the same node, the same devices, the same
reasons, on random cluster states on the real API server.

Each seeded state gets nodes (some cordoned, not ready, tainted or busy), slices of a driver of
its own, device classes, claims already allocated to bound pods, and a pod with one or two
claims (selectors, counts, alternatives, a matchAttribute constraint) and a cpu request; in
some states the pod also asks for an extended resource that the plain class backs (KEP-5004),
which a node may advertise as a device plugin would (its draws have their own random stream,
so the other draws of a seed do not move). Once
the running scheduler's cache has caught up with the state, a snapshot is taken (cluster-wide,
as ``simulate --kubeconfig`` takes it), the pod is created, and the scheduler's placement (or
its ``PodScheduled=False`` message) is compared with ``simulate``'s answer from the snapshot.

``KOPF_DRA_SIMULATE_STATES`` sets the number of states (the full run is 200:
``make simulate-differential``); ``make test`` runs a fixed subset.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from operators.api.keys import ObjectKey
from operators.controllers.scheduler.handlers import Scheduler
from operators.kube.api import KubeAPI, NotFoundError
from operators.simulate import cluster_documents, engine
from operators.simulate.validate import build
from tests.integration.helpers import (
    create_node,
    device_class_body,
    eventually,
    pod_body,
    running_operator,
    slice_body,
    start_scheduler,
    unique,
)

pytestmark = pytest.mark.integration

STATES = int(os.environ.get("KOPF_DRA_SIMULATE_STATES", "12"))


def device(name: str, rng: random.Random) -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {
            "model": {"string": rng.choice(["a", "b"])},
            "numa": {"int": rng.randint(0, 1)},
        },
    }


def request(name: str, rng: random.Random, model_class: str, plain_class: str) -> dict[str, Any]:
    shape = rng.randint(0, 3)
    if shape == 0:
        return {
            "name": name,
            "exactly": {"deviceClassName": plain_class, "count": rng.randint(1, 2)},
        }
    if shape == 1:
        return {"name": name, "exactly": {"deviceClassName": model_class}}
    if shape == 2:
        return {
            "name": name,
            "exactly": {
                "deviceClassName": plain_class,
                "selectors": [
                    {
                        "cel": {
                            "expression": f'device.attributes["{{d}}"].numa == {rng.randint(0, 1)}'
                        }
                    }
                ],
            },
        }
    return {
        "name": name,
        "firstAvailable": [
            {"name": "pair", "deviceClassName": model_class, "count": 2},
            {"name": "one", "deviceClassName": plain_class},
        ],
    }


async def build_state(
    kube: KubeAPI, namespace: str, seed: int, cluster_scoped: list[tuple[str, str]]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Create a random state; returns the pod to create and its claims (not created yet), and
    adds what it creates outside the namespace to ``cluster_scoped``."""
    rng = random.Random(seed)
    extended_rng = random.Random(seed + 100_000)
    driver = f"{unique('sim')}.example.com"
    plain = driver
    model_class = f"{driver}-model-a"
    extended = f"{driver}/gpu" if extended_rng.random() < 0.4 else None
    plain_body = device_class_body(plain, driver)
    plain_body["spec"]["extendedResourceName"] = f"{driver}/gpu"
    await kube.create(plain_body)
    await kube.create(
        device_class_body(model_class, driver, f'device.attributes["{driver}"].model == "a"')
    )
    cluster_scoped += [("DeviceClass", plain), ("DeviceClass", model_class)]
    nodes = [unique("sim-node") for _ in range(rng.randint(1, 4))]
    cluster_scoped += [("Node", node) for node in nodes]
    for node in nodes:
        fault = rng.choice(["none", "none", "none", "cordoned", "not-ready", "tainted"])
        await create_node(
            kube,
            node,
            cpu=str(rng.choice([2, 4, 8])),
            ready=fault != "not-ready",
            taints=[{"key": "example.com/t", "effect": "NoSchedule"}]
            if fault == "tainted"
            else None,
        )
        if fault == "cordoned":
            body = await kube.get("Node", node)
            body["spec"]["unschedulable"] = True
            await kube.replace(body)
        if extended is not None and extended_rng.random() < 0.3:  # a device plugin's node
            body = await kube.get("Node", node)
            for field in ("capacity", "allocatable"):
                body["status"][field][extended] = str(extended_rng.randint(0, 2))
            await kube.replace_status(body)
        devices = [device(f"gpu-{i}", rng) for i in range(rng.randint(0, 4))]
        if devices:
            created_slice = await kube.create(
                slice_body(unique("sim-slice"), driver, node, devices)
            )
            cluster_scoped.append(("ResourceSlice", created_slice["metadata"]["name"]))
        for b in range(rng.randint(0, 2)):  # busy nodes: bound pods with cpu and devices
            held = [d["name"] for d in devices if rng.random() < 0.3][:1]
            claims = []
            if held:
                claim = _claim(f"held-{node}-{b}", namespace, [request("gpu", rng, plain, plain)])
                created = await kube.create(claim)
                claims = [{"name": "gpu", "resourceClaimName": claim["metadata"]["name"]}]
            pod = pod_body(f"busy-{node}-{b}", namespace, *claims)
            pod["spec"]["nodeName"] = node
            pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
            pod = await kube.create(pod)
            if held:
                created["status"] = {
                    "allocation": {
                        "devices": {
                            "results": [
                                {
                                    "request": "gpu",
                                    "driver": driver,
                                    "pool": node,
                                    "device": held[0],
                                }
                            ]
                        },
                        "nodeSelector": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {"key": "metadata.name", "operator": "In", "values": [node]}
                                    ]
                                }
                            ]
                        },
                    },
                    "reservedFor": [
                        {
                            "resource": "pods",
                            "name": pod["metadata"]["name"],
                            "uid": pod["metadata"]["uid"],
                        }
                    ],
                }
                await kube.replace_status(created)
    claims = []
    for c in range(rng.randint(1, 2)):
        requests = [request(f"r{i}", rng, model_class, plain) for i in range(rng.randint(1, 2))]
        for r in requests:
            for selector in (r.get("exactly") or {}).get("selectors") or []:
                selector["cel"]["expression"] = selector["cel"]["expression"].replace("{d}", driver)
        claim = _claim(f"c{c}", namespace, requests)
        if len(requests) == 2 and rng.random() < 0.5:
            claim["spec"]["devices"]["constraints"] = [
                {"requests": ["r0", "r1"], "matchAttribute": f"{driver}/numa"}
            ]
        claims.append(claim)
    pod = pod_body(
        "subject",
        namespace,
        *(
            {"name": f"c{i}", "resourceClaimName": c["metadata"]["name"]}
            for i, c in enumerate(claims)
        ),
    )
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": str(rng.randint(0, 3))}}
    if extended is not None:
        count = str(extended_rng.randint(1, 2))
        pod["spec"]["containers"][0]["resources"]["requests"][extended] = count
        pod["spec"]["containers"][0]["resources"]["limits"] = {extended: count}
    return pod, claims


async def extended_state(
    kube: KubeAPI, namespace: str, case: int, cluster_scoped: list[tuple[str, str]]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A pod asking ``<driver>/gpu: 1`` with no claim (KEP-5004): case 0, one node with two
    devices of the class; case 1, that node with one device and a node advertising the
    resource as a device plugin would; case 2, one node with no device at all."""
    driver = f"{unique('ext')}.example.com"
    resource = f"{driver}/gpu"
    body = device_class_body(driver, driver)
    body["spec"]["extendedResourceName"] = resource
    await kube.create(body)
    cluster_scoped.append(("DeviceClass", driver))
    dra_node = unique("ext-node")
    await create_node(kube, dra_node)
    cluster_scoped.append(("Node", dra_node))
    devices = [{"name": f"gpu-{i}"} for i in range((2, 1, 0)[case])]
    if devices:
        created = await kube.create(slice_body(unique("ext-slice"), driver, dra_node, devices))
        cluster_scoped.append(("ResourceSlice", created["metadata"]["name"]))
    if case == 1:
        plugin_node = unique("ext-plugin")
        node = await create_node(kube, plugin_node)
        cluster_scoped.append(("Node", plugin_node))
        for field in ("capacity", "allocatable"):
            node["status"][field][resource] = "1"
        await kube.replace_status(node)
    pod = pod_body("subject", namespace)
    pod["spec"]["containers"][0]["resources"] = {"limits": {resource: "1"}}
    return pod, []


def _claim(name: str, namespace: str, requests: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": requests}},
    }


def caught_up(scheduler: Scheduler, documents: list[Any]) -> bool:
    """The scheduler's caches show every object of the snapshot at its version (or later)."""
    indices = scheduler.cache.indices
    wanted = {"Node": "nodes", "ResourceSlice": "slices", "DeviceClass": "classes"}
    for doc in documents:
        meta = doc.body.get("metadata") or {}
        version = int(meta.get("resourceVersion") or 0)
        if doc.kind in wanted:
            seen = (
                indices.one(wanted[doc.kind], meta["name"])
                if indices.has(wanted[doc.kind])
                else None
            )
        elif doc.kind == "ResourceClaim":
            seen = scheduler.cache.claims.indices["claims"].last(ObjectKey.of(doc.body))
        else:
            continue
        if seen is None or int(seen["metadata"].get("resourceVersion") or 0) < version:
            return False
    return True


def placement(pod: dict[str, Any], claims: list[dict[str, Any]]) -> dict[str, Any]:
    devices = {
        c["metadata"]["name"]: sorted(
            (r["request"], r["pool"], r["device"])
            for r in ((c.get("status") or {}).get("allocation") or {})
            .get("devices", {})
            .get("results", [])
        )
        for c in claims
    }
    return {"node": pod["spec"].get("nodeName"), "devices": devices}


@pytest.fixture(scope="module")
async def scheduler(kubeconfig: Any) -> AsyncIterator[Scheduler]:
    """One scheduler for every state; no retries of unschedulable pods (the first answer is
    the one compared)."""
    # No --filter-timeout: the answers are compared, not time budgets. On a busy machine a
    # budget can run out while the reasons of hundreds of nodes are worked out, and the
    # scheduler then rightly gives upstream's generic "cannot allocate all claims" for the rest.
    scheduler, registry = start_scheduler(kubeconfig, unschedulable_retry=600.0, filter_timeout=0.0)
    async with running_operator(registry, "scheduler"):
        yield scheduler


@pytest.mark.parametrize("seed", range(STATES))
async def test_simulate_predicts_the_scheduler(
    kube: KubeAPI, kubeconfig: Any, namespace: str, scheduler: Scheduler, seed: int
) -> None:
    cluster_scoped: list[tuple[str, str]] = []
    try:
        await _compare(kube, kubeconfig, namespace, scheduler, seed, cluster_scoped)
    finally:  # each state on its own nodes: later states do not pay for earlier ones
        for kind, name in cluster_scoped:
            with contextlib.suppress(NotFoundError):
                await kube.delete(kind, name)


@pytest.mark.parametrize("case", range(3))
async def test_simulate_predicts_the_special_claim(
    kube: KubeAPI, kubeconfig: Any, namespace: str, scheduler: Scheduler, case: int
) -> None:
    cluster_scoped: list[tuple[str, str]] = []
    try:
        extended = await _compare(
            kube, kubeconfig, namespace, scheduler, case, cluster_scoped, extended_state
        )
    finally:
        for kind, name in cluster_scoped:
            with contextlib.suppress(NotFoundError):
                await kube.delete(kind, name)
    # Case 0 proves the special claim's path end to end (not only "both said no").
    assert (case != 0) or extended, "the scheduler made a special claim"


State = Callable[
    [KubeAPI, str, int, list[tuple[str, str]]],
    Awaitable[tuple[dict[str, Any], list[dict[str, Any]]]],
]


async def _compare(
    kube: KubeAPI,
    kubeconfig: Any,
    namespace: str,
    scheduler: Scheduler,
    seed: int,
    cluster_scoped: list[tuple[str, str]],
    state: State = build_state,
) -> bool:
    """Compare the answers; True when the scheduler made a special claim for the pod."""
    pod, claims = await state(kube, namespace, seed, cluster_scoped)
    for claim in claims:
        await kube.create(claim)
    documents, version = await cluster_documents(str(kubeconfig))
    await eventually(lambda: _true(caught_up(scheduler, documents)), what="cache caught up")
    snapshot, problems = build(documents, strict=False)
    assert problems == []
    created = await kube.create(pod)
    snapshot.add("Pod", created)  # the same pod, as the API server stored it
    predicted = engine.pod_answer(
        snapshot,
        ObjectKey(namespace, "subject"),
        engine.Options(feature_gates=scheduler.settings.feature_gates, version=version),
        datetime.datetime.now(datetime.UTC),
    )

    async def decided() -> dict[str, Any] | None:
        now = await kube.get("Pod", "subject", namespace)
        if now["spec"].get("nodeName"):
            return now
        for condition in now.get("status", {}).get("conditions") or []:
            if condition["type"] == "PodScheduled" and condition["status"] == "False":
                return now
        return None

    actual = await eventually(decided, within=60, what="the scheduler's answer")
    if actual["spec"].get("nodeName"):
        fresh = [await kube.get("ResourceClaim", c["metadata"]["name"], namespace) for c in claims]
        assert predicted.outcome == "success", (seed, predicted.reasons, predicted.notes)
        special = (actual.get("status") or {}).get("extendedResourceClaimStatus")
        if predicted.extended is None:
            assert special is None, seed
        else:
            # The special claim under the name simulate shows it by (before its creation).
            assert special is not None, seed
            made = await kube.get("ResourceClaim", special["resourceClaimName"], namespace)
            made["metadata"]["name"] = ObjectKey.parse(predicted.extended.claim).name
            fresh.append(made)
            assert special["requestMappings"] == [m.dump() for m in predicted.extended.mappings], (
                seed
            )
        expected = {
            "node": predicted.node,
            "devices": {
                ObjectKey.parse(k).name: sorted(
                    (r.request or "", r.pool or "", r.device or "") for r in a.devices.results
                )
                for k, a in predicted.allocations.items()
            },
        }
        assert placement(actual, fresh) == expected, seed
        return special is not None
    (condition,) = [c for c in actual["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert predicted.outcome in ("unsatisfiable", "error"), (seed, predicted.node)
    assert predicted.reasons == [condition["message"]] or predicted.error == condition["message"], (
        seed
    )
    return False


async def _true(value: bool) -> bool:
    return value
