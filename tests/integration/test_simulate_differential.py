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

Pod groups (``GROUP_CASES``): a gang's pods are created first and wait for their PodGroup while
the snapshot is taken; the PodGroup comes next, and the scheduler's group cycle (placements and
devices, each pod's message and the PodGroup's condition, the victims it evicts and where it
nominates its pods) is compared with ``simulate --pod-group``'s answer from the snapshot and the
PodGroup as created.
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
from operators.kube.api import KubeAPI, NotFoundError, resource_of
from operators.scheduling import group_cycle
from operators.simulate import cluster_documents, engine
from operators.simulate.group import GroupAnswer, group_answer
from operators.simulate.validate import build
from tests.integration.helpers import (
    bound_node,
    claim_body,
    create_node,
    device_class_body,
    eventually,
    gpus,
    pod_body,
    running_operator,
    slice_body,
    start_scheduler,
    unique,
)
from tests.integration.test_gang_scheduling import _halves
from tests.integration.test_preemption import act_as_kubelet

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


# --- pod groups: the scheduler's group cycle against ``simulate --pod-group`` ----------------

#: A gang that fits (four pods, a GPU each and a link they share), one GPU short (five), one
#: placed only by the search of its pods' alternatives (kubernetes#138765), and one placed only
#: by evicting pods of lower priority.
GROUP_CASES = ("fits", "one-gpu-short", "search", "preemption")
GROUP = "job"


async def _gpu_nodes(
    kube: KubeAPI, driver: str, per_node: int, count: int, cluster_scoped: list[tuple[str, str]]
) -> list[str]:
    """``count`` nodes with ``per_node`` GPUs of the class ``driver`` each, labelled for the
    case's link."""
    names = []
    for _ in range(count):
        name = unique("grp-node")
        await create_node(kube, name, {"group-case.kopf-dra.io/driver": driver})
        created = await kube.create(slice_body(unique("grp-slice"), driver, name, gpus(per_node)))
        cluster_scoped += [("Node", name), ("ResourceSlice", created["metadata"]["name"])]
        names.append(name)
    await kube.create(device_class_body(driver, driver))
    cluster_scoped.append(("DeviceClass", driver))
    return names


async def _link(kube: KubeAPI, driver: str, cluster_scoped: list[tuple[str, str]]) -> str:
    """One link device every node of the case reaches; the class of links."""
    link = f"link-{driver}"
    match = {"key": "group-case.kopf-dra.io/driver", "operator": "In", "values": [driver]}
    created = await kube.create(
        slice_body(
            unique("grp-link"),
            link,
            "",
            [{"name": "link-0"}],
            pool="fabric",
            nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [match]}]},
        )
    )
    await kube.create(device_class_body(link, link))
    cluster_scoped += [("ResourceSlice", created["metadata"]["name"]), ("DeviceClass", link)]
    return link


def _member(name: str, namespace: str, *claims: dict[str, Any]) -> dict[str, Any]:
    body = pod_body(name, namespace, *claims)
    body["spec"]["schedulingGroup"] = {"podGroupName": GROUP}
    return body


def _pod_group(namespace: str, min_count: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": GROUP, "namespace": namespace},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}, **spec},
    }


async def group_state(
    kube: KubeAPI,
    namespace: str,
    scheduler: Scheduler,
    case: str,
    cluster_scoped: list[tuple[str, str]],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The case's devices; for ``preemption``, pods of low priority holding every GPU (bound
    by the scheduler); then the gang's claims and pods, to create before its PodGroup (they
    wait for it), and the PodGroup."""
    driver = f"{unique('grp')}.example.com"
    if case in ("fits", "one-gpu-short"):
        await _gpu_nodes(kube, driver, 2, 2, cluster_scoped)
        link = await _link(kube, driver, cluster_scoped)
        count = 4 if case == "fits" else 5
        shared = {"name": "link", "resourceClaimName": "link"}
        bodies = [claim_body("link", namespace, device_class=link)]
        for i in range(count):
            bodies.append(claim_body(f"worker-{i}-gpu", namespace, device_class=driver))
            own = {"name": "gpu", "resourceClaimName": f"worker-{i}-gpu"}
            bodies.append(_member(f"worker-{i}", namespace, shared, own))
        return bodies, _pod_group(namespace, count, resourceClaims=[shared])
    if case == "search":
        node = unique("grp-node")
        await create_node(kube, node)
        cluster_scoped.append(("Node", node))
        for body in _halves(driver, node):
            created = await kube.create(body)
            cluster_scoped.append(("ResourceSlice", created["metadata"]["name"]))
        for size in ("whole", "half"):
            expression = f'device.attributes["{driver}"].size == "{size}"'
            await kube.create(device_class_body(f"{size}-{driver}", driver, expression))
            cluster_scoped.append(("DeviceClass", f"{size}-{driver}"))
        bodies = []
        for i in range(2):
            claim = claim_body(f"worker-{i}-gpu", namespace)
            claim["spec"]["devices"]["requests"] = [
                {
                    "name": "gpu",
                    "firstAvailable": [
                        {"name": size, "deviceClassName": f"{size}-{driver}"}
                        for size in ("whole", "half")
                    ],
                }
            ]
            own = {"name": "gpu", "resourceClaimName": f"worker-{i}-gpu"}
            bodies += [claim, _member(f"worker-{i}", namespace, own)]
        return bodies, _pod_group(namespace, 2)
    classes = {}
    for role, value in (("low", 10), ("high", 1000)):
        classes[role] = unique(role)
        await kube.create(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": classes[role]},
                "value": value,
            }
        )
        cluster_scoped.append(("PriorityClass", classes[role]))
    nodes = await _gpu_nodes(kube, driver, 1, 2, cluster_scoped)
    for i, node in enumerate(nodes):
        await kube.create(claim_body(f"low-{i}-gpu", namespace, device_class=driver))
        low = pod_body(f"low-{i}", namespace, {"name": "gpu", "resourceClaimName": f"low-{i}-gpu"})
        low["spec"]["priorityClassName"] = classes["low"]
        low["spec"]["terminationGracePeriodSeconds"] = 30
        low["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
        await kube.create(low)
        await eventually(
            _bound_in_cache(scheduler, f"low-{i}", node), what="the low pod bound, as cached"
        )
    bodies = []
    for i in range(2):
        bodies.append(claim_body(f"worker-{i}-gpu", namespace, device_class=driver))
        own = {"name": "gpu", "resourceClaimName": f"worker-{i}-gpu"}
        worker = _member(f"worker-{i}", namespace, own)
        worker["spec"]["priorityClassName"] = classes["high"]
        bodies.append(worker)
    return bodies, _pod_group(namespace, 2, priorityClassName=classes["high"])


def _bound_in_cache(scheduler: Scheduler, name: str, node: str) -> Callable[[], Awaitable[bool]]:
    """The scheduler's cache shows the pod ``name`` bound to ``node`` (its preemption counts
    it there)."""

    async def seen() -> bool:
        bound = scheduler.cache.indices.values("pods_on_node", node)
        return any(b["metadata"]["name"] == name for b in bound)

    return seen


@pytest.mark.parametrize("case", GROUP_CASES)
async def test_simulate_predicts_the_group_cycle(
    kube: KubeAPI, kubeconfig: Any, namespace: str, scheduler: Scheduler, case: str
) -> None:
    """The gang's pods wait for their PodGroup while the snapshot is taken; then the PodGroup
    comes, the scheduler runs the group's cycle, and its placements, devices, messages and
    preemption are simulate's."""
    cluster_scoped: list[tuple[str, str]] = []
    try:
        await _compare_group(kube, kubeconfig, namespace, scheduler, case, cluster_scoped)
    finally:
        options = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
        for pod in (await kube.list("Pod", namespace))["items"]:  # no later test places them
            with contextlib.suppress(NotFoundError):
                path = resource_of("Pod").path(namespace, pod["metadata"]["name"])
                await kube.call("DELETE", path, body=options)
        for kind, name in cluster_scoped:
            with contextlib.suppress(NotFoundError):
                await kube.delete(kind, name)


async def _compare_group(
    kube: KubeAPI,
    kubeconfig: Any,
    namespace: str,
    scheduler: Scheduler,
    case: str,
    cluster_scoped: list[tuple[str, str]],
) -> None:
    bodies, group_body = await group_state(kube, namespace, scheduler, case, cluster_scoped)
    for body in bodies:
        await kube.create(body)
    members = [b["metadata"]["name"] for b in bodies if b["kind"] == "Pod"]
    key = ObjectKey(namespace, GROUP)
    await eventually(
        lambda: _true(len(scheduler.cache.group_pods(key)) == len(members)),
        what="the scheduler's cache shows every pod of the group",
    )
    documents, version = await cluster_documents(str(kubeconfig))
    await eventually(lambda: _true(caught_up(scheduler, documents)), what="cache caught up")
    snapshot, problems = build(documents, strict=False)
    assert problems == []
    snapshot.add("PodGroup", await kube.create(group_body))
    options = engine.Options(feature_gates=scheduler.settings.feature_gates, version=version)
    predicted = group_answer(snapshot, key, options, datetime.datetime.now(datetime.UTC))
    print(f"{case}: simulate --pod-group says {predicted.outcome}: {predicted.message}")
    if predicted.outcome == "success":
        await _placed_as_predicted(kube, namespace, members, predicted)
        return
    assert predicted.outcome == "unsatisfiable", (case, predicted.outcome, predicted.message)
    await _told_as_predicted(kube, namespace, members, predicted, later=case == "preemption")
    if case == "preemption":
        await _preempted_as_predicted(kube, namespace, members, predicted)


async def _placed_as_predicted(
    kube: KubeAPI, namespace: str, members: list[str], predicted: GroupAnswer
) -> None:
    async def all_bound() -> dict[str, str] | None:
        nodes = {n: await bound_node(kube, namespace, n) for n in members}
        return {n: node for n, node in nodes.items() if node} if all(nodes.values()) else None

    bound = await eventually(all_bound, what="the gang bound")
    assert bound == {k.name: m.node for k, m in predicted.members.items()}
    for name in members:
        (key,) = list(predicted.members[ObjectKey(namespace, name)].allocations)
        claim = await kube.get("ResourceClaim", ObjectKey.parse(key).name, namespace)
        allocation = predicted.members[ObjectKey(namespace, name)].allocations[key]
        assert _devices(claim) == sorted(
            (r.request or "", r.pool or "", r.device or "") for r in allocation.devices.results
        ), name
    for key, allocation in predicted.shared.items():
        claim = await kube.get("ResourceClaim", ObjectKey.parse(key).name, namespace)
        assert _devices(claim) == sorted(
            (r.request or "", r.pool or "", r.device or "") for r in allocation.devices.results
        ), key
    print(f"placed as predicted: {bound}")


async def _told_as_predicted(
    kube: KubeAPI, namespace: str, members: list[str], predicted: GroupAnswer, *, later: bool
) -> None:
    """Each pod was told what simulate predicts (a FailedScheduling Event of its own; the
    condition may say more since, when ``later`` cycles run: a group that preempts is told of
    the ongoing preemption next), and so was the PodGroup, unless ``later``."""
    wanted = {k.name: m.message for k, m in predicted.members.items()}

    async def all_told() -> dict[str, list[str]] | None:
        told: dict[str, list[str]] = {name: [] for name in members}
        for event in (await kube.list("Event", namespace))["items"]:
            name = event["involvedObject"]["name"]
            if event["reason"] == "FailedScheduling" and name in told:
                told[name].append(event["message"])
        return told if all(wanted[n] in said for n, said in told.items()) else None

    told = await eventually(all_told, what="every pod of the group told what simulate says")
    if not later:
        # The PodGroup's condition is written after its pods' Events: wait for it to land.
        async def condition() -> dict[str, Any] | None:
            group = await kube.get("PodGroup", GROUP, namespace)
            found = [
                c
                for c in (group.get("status") or {}).get("conditions") or []
                if c["type"] == "PodGroupInitiallyScheduled"
            ]
            assert len(found) <= 1, found
            return found[0] if found else None

        written = await eventually(condition, what="the PodGroup's PodGroupInitiallyScheduled")
        assert written["message"] == group_cycle.condition(predicted.message or "")
    print(f"told as predicted: {told}")


async def _preempted_as_predicted(
    kube: KubeAPI, namespace: str, members: list[str], predicted: GroupAnswer
) -> None:
    assert predicted.preemption is not None
    assert predicted.preemption.outcome == "victims"
    victims = sorted(ObjectKey.parse(pod).name for pod, _, _ in predicted.preemption.victims)

    async def going() -> list[str] | None:
        pods = (await kube.list("Pod", namespace))["items"]
        names = sorted(
            p["metadata"]["name"] for p in pods if p["metadata"].get("deletionTimestamp")
        )
        return names or None

    assert await eventually(going, what="the victims being evicted") == victims
    nominated = {}
    for name in members:
        pod = await kube.get("Pod", name, namespace)
        nominated[f"{namespace}/{name}"] = pod.get("status", {}).get("nominatedNodeName")
    assert nominated == predicted.preemption.nominations
    for name in victims:
        await act_as_kubelet(kube, namespace, name)

    async def all_bound() -> dict[str, str] | None:
        nodes = {f"{namespace}/{n}": await bound_node(kube, namespace, n) for n in members}
        return {n: node for n, node in nodes.items() if node} if all(nodes.values()) else None

    assert await eventually(all_bound, what="the gang bound") == predicted.preemption.nominations
    print(f"preempted as predicted: {victims}, nominated {nominated}")


def _devices(claim: dict[str, Any]) -> list[tuple[str, str, str]]:
    results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {})
    return sorted((r["request"], r["pool"], r["device"]) for r in results.get("results", []))
