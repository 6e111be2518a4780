"""The e2e suite: the example scenarios of manifests/examples/, applied unchanged.

Two ways to run it:

* default: a local control plane (built like the integration tests'), two virtual nodes named
  like the kind workers with the example driver running for each (ResourceSlices from the
  DaemonSet's ConfigMap profile), and every operator as a child process (``operators.demo``);
* ``KOPF_DRA_USE_EXISTING_CLUSTER=1 KUBECONFIG=...`` with ``KOPF_DRA_E2E_IN_CLUSTER=1``: a cluster
  where ``kubectl apply -k manifests/`` already runs everything (``make e2e-kind``); the suite
  only applies the scenarios and checks the outcome.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest
from kubernetes_asyncio import client

from operators.api.features import Release, parse_feature_gates
from operators.demo.bringup import (
    E2E_NODES,
    SCHEDULER_NAME,
    System,
    apply_example,
    example_objects,
    serves_groups,
    start_system,
)
from operators.demo.view import allocated_devices, is_settled, pod_claims, scheduled_condition
from operators.kube.api import KubeAPI, NotFoundError, resource_of
from operators.kube.client import make_api_client
from operators.localcluster import controlplane
from tests.integration.helpers import eventually

IN_CLUSTER = os.environ.get("KOPF_DRA_E2E_IN_CLUSTER") == "1"
EXISTING = os.environ.get("KOPF_DRA_USE_EXISTING_CLUSTER") == "1"
# The real-node scenarios (e2e/node/) and the deployed cluster (e2e/cluster/) run in sessions of
# their own: `make e2e-node`, `make e2e-cluster`.
collect_ignore = [
    *([] if os.environ.get("KOPF_DRA_E2E_NODE") == "1" else ["node"]),
    *([] if os.environ.get("KOPF_DRA_E2E_CLUSTER") == "1" else ["cluster"]),
]


def cluster_gates() -> dict[str, bool]:
    """The gates of the cluster the suite runs on: an existing cluster's come from
    KOPF_DRA_FEATURE_GATES, as for any component; the local control plane's from its release."""
    if EXISTING:
        return parse_feature_gates(os.environ.get("KOPF_DRA_FEATURE_GATES", ""))
    return controlplane.feature_gates()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The pod group examples are not collected where the cluster cannot serve PodGroups with
    claims (Kubernetes 1.36, or 1.37 with its gates off): the API server has no such kind.
    Nor are the modules that start a 1.37 control plane of their own with alpha gates on,
    where the release is 1.36 (it has none of their fields) or the cluster an existing one."""
    unavailable = set()
    if not serves_groups(cluster_gates()):
        unavailable.add("pod_groups")
    if EXISTING or Release.parse(controlplane.kubernetes_version()) < Release(1, 37):
        unavailable.add("alpha_137")
    deselected = [i for i in items if any(i.get_closest_marker(m) for m in unavailable)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [i for i in items if i not in deselected]


@pytest.fixture(scope="session")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    if EXISTING:
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


@pytest.fixture(scope="session")
def kube(api: client.ApiClient) -> KubeAPI:
    return KubeAPI(api)


@pytest.fixture(scope="session")
async def system(
    kube: KubeAPI, kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[System | None]:
    """Virtual nodes, their drivers and the operators (nothing when they run in the cluster)."""
    if IN_CLUSTER:
        yield None
        return
    started = await start_system(
        kube,
        kubeconfig,
        nodes=E2E_NODES,
        log_dir=tmp_path_factory.mktemp("logs"),
        feature_gates=cluster_gates(),
    )
    try:
        yield started
    finally:
        started.stop()


class Scenario:
    """One example scenario, applied; ``cleanup`` removes it and waits until devices are free."""

    def __init__(
        self,
        kube: KubeAPI,
        name: str,
        *,
        graceful: bool = IN_CLUSTER,
        objects: list[dict[str, Any]] | None = None,
    ) -> None:
        """``objects``: a variant of the example's objects, applied instead of its files."""
        self.kube = kube
        self.name = name
        self.graceful = graceful
        self.variant = objects
        self.objects = example_objects(name) if objects is None else objects
        self.namespaces = [o["metadata"]["name"] for o in self.objects if o["kind"] == "Namespace"]

    async def apply(self) -> None:
        await apply_example(self.kube, self.name, self.variant)

    async def pods(self) -> list[dict[str, Any]]:
        return [
            p
            for ns in self.namespaces
            for p in (await self.kube.list("Pod", ns))["items"]
            if p["spec"].get("schedulerName") == SCHEDULER_NAME
        ]

    async def claims(self) -> dict[str, dict[str, Any]]:
        return {
            f"{ns}/{c['metadata']['name']}": c
            for ns in self.namespaces
            for c in (await self.kube.list("ResourceClaim", ns))["items"]
        }

    async def settled(self, expected_pods: int, *, bound: int = 0) -> list[dict[str, Any]]:
        """Every pod of the scenario bound or unschedulable with a reason, and at least
        ``bound`` of them bound: a pod the scenario promises a place may first be found
        unschedulable while the devices an earlier test's claims held are still being freed,
        and is then tried again (as kube-scheduler's queue does)."""

        async def probe() -> list[dict[str, Any]] | None:
            pods = await self.pods()
            placed = [p for p in pods if p["spec"].get("nodeName")]
            if len(pods) == expected_pods and all(is_settled(p) for p in pods):
                return pods if len(placed) >= bound else None
            return None

        try:
            return await eventually(
                probe, within=60, what=f"the pods of {self.name} to be scheduled"
            )
        except AssertionError as e:
            reasons = {
                p["metadata"]["name"]: (scheduled_condition(p) or {}).get("message")
                for p in await self.pods()
            }
            raise AssertionError(f"{e}; PodScheduled messages: {reasons}") from None

    async def devices(self, pod: dict[str, Any]) -> list[dict[str, Any]]:
        claims = await self.claims()
        return [r for c in pod_claims(pod, claims) for r in allocated_devices(c)]

    async def _collect_groups(self) -> None:
        """What kube-controller-manager does once a PodGroup is deleted, where none runs (the
        local control plane): its protection finalizer off once its pods are gone, and the
        claims made for it deleted (the garbage collector's part)."""

        async def pods_gone() -> bool:
            return not await self.pods()

        await eventually(pods_gone, within=60, what=f"the pods of {self.name} to be gone")
        for obj in self.objects:
            if obj["kind"] != "PodGroup":
                continue
            meta = obj["metadata"]
            with contextlib.suppress(NotFoundError):
                await self.kube.patch(
                    "PodGroup", meta["name"], {"metadata": {"finalizers": None}}, meta["namespace"]
                )
        for key, claim in (await self.claims()).items():
            owners = claim["metadata"].get("ownerReferences") or []
            if any(o.get("kind") == "PodGroup" for o in owners):
                namespace, name = key.split("/")
                await self.kube.delete("ResourceClaim", name, namespace)

    async def cleanup(self) -> None:
        """Delete the scenario's namespaced objects (not the namespaces: no namespace controller
        runs on the local control plane) and wait until its claims are gone."""
        for pod in await self.pods():
            meta = pod["metadata"]
            path = resource_of("Pod").path(meta["namespace"], meta["name"])
            # No kubelet confirms a graceful deletion on virtual nodes: delete at once there.
            options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
            if not self.graceful:
                options["gracePeriodSeconds"] = 0
            with contextlib.suppress(NotFoundError):
                await self.kube.call("DELETE", path, body=options)
        for obj in self.objects:
            if obj["kind"] not in ("Namespace", "Pod") and resource_of(obj["kind"]).namespaced:
                meta = obj["metadata"]
                await self.kube.delete(obj["kind"], meta["name"], meta["namespace"])
        if any(o["kind"] == "PodGroup" for o in self.objects) and not IN_CLUSTER:
            await self._collect_groups()

        async def gone() -> bool:
            return not await self.pods() and not await self.claims()

        await eventually(gone, within=60, what=f"the pods and claims of {self.name} to be gone")


class VariantApply(Protocol):
    """An example by name, or ``objects``, a variant of its files, applied instead."""

    def __call__(
        self, name: str, objects: list[dict[str, Any]] | None = None
    ) -> Awaitable[Scenario]: ...


@pytest.fixture
async def scenario(kube: KubeAPI, system: System | None) -> AsyncIterator[VariantApply]:
    applied: list[Scenario] = []

    async def apply(name: str, objects: list[dict[str, Any]] | None = None) -> Scenario:
        s = Scenario(
            kube,
            name,
            graceful=IN_CLUSTER or (system is not None and system.real),
            objects=objects,
        )
        await s.apply()
        applied.append(s)
        return s

    yield apply
    for s in applied:
        await s.cleanup()
