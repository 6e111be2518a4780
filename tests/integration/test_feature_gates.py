"""The gate table agrees with the pinned release's own kube-apiserver: every gate it serves is
in the table of its version, with the same stage, and Kubernetes' default wherever the local
control plane sets no value; kopf-dra reads that version from the API server's /version."""

from __future__ import annotations

from kubernetes_asyncio import client

from operators.api.features import KubernetesVersion, Release, gates_of
from operators.kube.api import KubeAPI
from operators.localcluster.controlplane import feature_gates, kubernetes_version
from tests.integration.helpers import served_feature_gates


async def test_the_gate_table_is_the_api_servers(api: client.ApiClient) -> None:
    version = KubernetesVersion.from_version_info(await KubeAPI(api).version_info())
    assert version.release == Release.parse(kubernetes_version())
    served = await served_feature_gates(api)
    gates = gates_of(version)
    # The API server registers a few gates kube-scheduler does not (the controller manager's,
    # some of its own); every DRA gate is both's. tests/integration/test_gate_tables.py compares the
    # table with kube-scheduler's own --help.
    dra = {n for n in served if n.startswith("DRA") or n == "DynamicResourceAllocation"}
    assert dra <= set(gates), sorted(dra - set(gates))
    assert len(set(served) & set(gates)) > 200
    for name, (stage, enabled) in served.items():
        if name not in gates:
            continue
        gate = gates[name]
        assert stage == gate.stage, name
        assert enabled == feature_gates().get(name, gate.default), name
