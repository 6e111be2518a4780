"""The gate table agrees with the pinned release's own kube-apiserver: the same DRA gates, the
same stages, and Kubernetes' default wherever the local control plane sets no value."""

from __future__ import annotations

from kubernetes_asyncio import client
from prometheus_client.parser import text_string_to_metric_families

from operators.api.features import GATES
from operators.kube.controlplane import FEATURE_GATES

STAGES = {"ALPHA": "Alpha", "BETA": "Beta", "": "GA"}


async def test_the_gate_table_is_the_api_servers(api: client.ApiClient) -> None:
    response = await api.call_api(
        "/metrics", "GET", auth_settings=["BearerToken"], _preload_content=False
    )
    text = (await response.read()).decode()
    served = {
        s.labels["name"]: (STAGES[s.labels["stage"]], bool(s.value))
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "kubernetes_feature_enabled"
        and (s.labels["name"].startswith("DRA") or s.labels["name"] == "DynamicResourceAllocation")
    }
    assert set(served) == set(GATES)
    for name, gate in GATES.items():
        stage, enabled = served[name]
        assert stage == gate.stage, name
        assert enabled == FEATURE_GATES.get(name, gate.default), name
