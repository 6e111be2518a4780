"""``kopf-dra simulate`` against a running cluster, as a user asks "what if": the cluster's
objects from its API server, the user's files on top, the snapshot saved and replayed."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.kube.api import KubeAPI
from operators.simulate import main
from tests.integration.helpers import claim_body, gpu_cluster, pod_body

pytestmark = pytest.mark.integration


@pytest.fixture
async def cluster(kube: KubeAPI, driver: str, namespace: str) -> dict[str, Any]:
    """One node with two devices of this test's driver; one of them already allocated to a
    pod bound there."""
    (node,) = await gpu_cluster(kube, driver, nodes=1, per_node=2)
    held = claim_body("held", namespace, driver)
    await kube.create(held)
    allocation = {
        "devices": {
            "results": [{"request": "gpu", "driver": driver, "pool": node, "device": "gpu-0"}]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        },
    }
    bound = pod_body("bound", namespace, {"name": "gpu", "resourceClaimName": "held"})
    bound["spec"]["nodeName"] = node
    created = await kube.create(bound)
    reserved = [{"resource": "pods", "name": "bound", "uid": created["metadata"]["uid"]}]
    await kube.patch(
        "ResourceClaim",
        "held",
        {"status": {"allocation": allocation, "reservedFor": reserved}},
        namespace,
        subresource="status",
    )
    return {"node": node, "driver": driver, "namespace": namespace}


def _what_if(tmp_path: Path, namespace: str, driver: str, count: int) -> Path:
    claim = claim_body("new", namespace, driver)
    claim["spec"]["devices"]["requests"][0]["exactly"]["count"] = count
    pod = pod_body("trainer", namespace, {"name": "gpu", "resourceClaimName": "new"})
    path = tmp_path / f"what-if-{count}.yaml"
    path.write_text(yaml.safe_dump_all([claim, pod]))
    return path


def _simulate(*argv: str) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, json.loads(out.getvalue())


def test_what_if_on_a_live_cluster_then_replayed_from_the_saved_snapshot(
    cluster: dict[str, Any], kubeconfig: Path, tmp_path: Path
) -> None:
    ns, driver, node = cluster["namespace"], cluster["driver"], cluster["node"]
    saved = tmp_path / "snapshot.yaml"
    one = _what_if(tmp_path, ns, driver, 1)
    code, answer = _simulate(
        "--kubeconfig", str(kubeconfig), "-f", str(one), "--pod", f"{ns}/trainer",
        "--save", str(saved),
    )  # fmt: skip
    assert (code, answer["outcome"], answer["node"]) == (0, "success", node)
    (allocation,) = answer["allocations"].values()
    # gpu-0 is held by the bound pod, as the cluster says: the new claim gets gpu-1.
    assert [r["device"] for r in allocation["devices"]["results"]] == ["gpu-1"]

    # The saved snapshot holds the cluster and the files: replayed, the same answer.
    kinds = {doc["kind"] for doc in yaml.safe_load(saved.read_text())["items"]}
    assert {"Node", "ResourceSlice", "DeviceClass", "ResourceClaim", "Pod"} <= kinds
    assert _simulate("-f", str(saved), "--pod", f"{ns}/trainer") == (code, answer)

    # Two devices cannot fit beside the held one: exit 1, with the scheduler's reason.
    code, answer = _simulate(
        "--kubeconfig", str(kubeconfig), "-f", str(_what_if(tmp_path, ns, driver, 2)),
        "--pod", f"{ns}/trainer",
    )  # fmt: skip
    assert (code, answer["outcome"], answer["node"]) == (1, "unsatisfiable", None)
    assert answer["nodes"][node]["outcome"] == "unsatisfiable"
    assert answer["nodes"][node]["reason"] == (
        f"cannot allocate claim {ns}/new, request gpu: 2 devices on {node}; 1 allocated; "
        "1 usable, 2 needed"
    )
