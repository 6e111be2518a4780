"""The gate table agrees with the pinned release's own kube-apiserver: the same DRA gates, the
same stages, and Kubernetes' default wherever the local control plane sets no value."""

from __future__ import annotations

from kubernetes_asyncio import client

from operators.api.features import GATES
from operators.localcluster.controlplane import feature_gates
from tests.integration.helpers import served_feature_gates


async def test_the_gate_table_is_the_api_servers(api: client.ApiClient) -> None:
    served = await served_feature_gates(api)
    assert set(served) == set(GATES)
    for name, gate in GATES.items():
        stage, enabled = served[name]
        assert stage == gate.stage, name
        assert enabled == feature_gates().get(name, gate.default), name
