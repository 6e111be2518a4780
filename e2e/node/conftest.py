"""Real nodes for the e2e scenarios: two kubelets with a containerd each (``make e2e-node``).

The session's control plane and operators are the e2e suite's (``e2e/conftest.py``); only the
nodes differ: ``kopf-dra-worker`` and ``kopf-dra-worker2`` are real kubelets on this machine
(``operators/localcluster/realnode.py``), each with the example driver as a host process on the
kubelet's plugin directory and containerd's CDI directory. Where the machine cannot run them the
session is skipped with what is missing, except under ``CI=true``, where that is a failure. A
host-wide lock keeps two sessions apart; teardown stops everything and restores the host.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from operators.api.core import Node
from operators.demo.bringup import E2E_NODES, System, VirtualNode, start_system
from operators.kube.api import KubeAPI
from operators.localcluster import controlplane, realnode
from tests.integration.helpers import eventually
from tests.requires import unavailable

#: Modules whose real nodes (with gates of their own) live in a module fixture.
OWN_NODES_MODULES = ("test_optional_node_operations.py",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules with real nodes of their own run first: their nodes and the session's
    (``real_nodes``, held to the session's end) each hold the host lock while they run, so a
    module after the session's nodes started would wait for the lock forever."""
    items.sort(key=lambda item: item.path.name not in OWN_NODES_MODULES)


@pytest.fixture(scope="session")
def real_nodes(
    kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[realnode.RealNodes]:
    missing = realnode.missing_prerequisites()
    if missing:
        unavailable("real nodes need: " + "; ".join(missing))
    with contextlib.ExitStack() as stack:
        waited = time.monotonic()
        stack.enter_context(realnode.host_lock())
        waited = time.monotonic() - waited
        host = realnode.HostState.record()
        base = Path(tempfile.mkdtemp(prefix="kdn-"))  # short: unix socket paths live below
        nodes = realnode.start(
            [(n.name, dict(n.labels)) for n in E2E_NODES], kubeconfig, base, host
        )
        nodes.timings["lock wait"] = waited
        try:
            yield nodes
        finally:
            problems = nodes.stop()
            print(f"\nreal nodes: {nodes.timings}; host restored: {problems or 'yes'}")
            assert not problems, problems


@pytest.fixture(scope="session")
async def system(
    kube: KubeAPI,
    kubeconfig: Path,
    real_nodes: realnode.RealNodes,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[System]:
    """The operators, with the example driver on each real node."""
    started = time.monotonic()

    async def all_ready() -> bool:
        real_nodes.check()
        nodes = (await kube.list("Node"))["items"]
        return {n["metadata"]["name"] for n in nodes if Node.load(n).is_ready} >= {
            n.name for n in real_nodes.nodes
        }

    await eventually(all_ready, within=120, what="the real nodes to be Ready")
    real_nodes.timings["ready"] = time.monotonic() - started
    nodes = tuple(
        VirtualNode(n.name, n.labels, kubelet_dir=str(real.kubelet_dir), cdi_dir=str(real.cdi_dir))
        for n in E2E_NODES
        for real in [real_nodes.by_name(n.name)]
    )
    system = await start_system(
        kube,
        kubeconfig,
        nodes=nodes,
        log_dir=tmp_path_factory.mktemp("logs"),
        feature_gates=controlplane.feature_gates(),
    )
    try:
        yield system
    finally:
        system.stop()
