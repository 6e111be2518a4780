"""``kopf-dra simulate`` end to end on snapshot files: outcomes, output shape, exit codes."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.simulate import main

SNAPSHOT = """
apiVersion: v1
kind: Node
metadata: {name: node-1, labels: {region: r1}}
---
apiVersion: v1
kind: Node
metadata: {name: node-2, labels: {region: r2}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-2-gpus}
spec:
  driver: gpu.example.com
  nodeName: node-2
  pool: {name: node-2, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes: {model: {string: a100}}
  - name: gpu-1
    attributes: {model: {string: h100}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: h100, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu
        selectors:
        - cel: {expression: 'device.attributes["gpu.example.com"].model == "h100"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: three, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu, count: 3}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: tmpl, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu}
---
apiVersion: v1
kind: Pod
metadata: {name: pod, namespace: default}
spec:
  resourceClaims:
  - {name: gpu, resourceClaimTemplateName: tmpl}
  containers: [{name: c, image: busybox}]
"""


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    path = tmp_path / "snapshot.yaml"
    path.write_text(SNAPSHOT)
    return path


def run(*argv: str) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, json.loads(out.getvalue())


def test_node_success(snapshot: Path) -> None:
    code, result = run("-f", str(snapshot), "--node", "node-2", "--claim", "default/h100")
    assert code == 0
    assert set(result) == {"outcome", "error", "allocations", "reasons", "nodes"}
    assert result["outcome"] == "success"
    devices = result["allocations"]["default/h100"]["devices"]["results"]
    assert [(d["request"], d["device"]) for d in devices] == [("gpu", "gpu-1")]
    selector = result["allocations"]["default/h100"]["nodeSelector"]
    assert selector["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["node-2"]


def test_node_without_claims_is_success(snapshot: Path) -> None:
    code, result = run("-f", str(snapshot), "--node", "node-1")
    assert (code, result["outcome"], result["allocations"]) == (0, "success", {})


def test_node_unsatisfiable_explains(snapshot: Path) -> None:
    code, result = run("-f", str(snapshot), "--node", "node-2", "--claim", "default/three")
    assert code == 1
    assert result["outcome"] == "unsatisfiable"
    assert "2 devices on node-2" in result["reasons"][0]
    assert "3 needed" in result["reasons"][0]


def test_claims_allocated_together(snapshot: Path) -> None:
    code, result = run(
        "-f", str(snapshot), "--node", "node-2", "--claim", "default/one", "--claim", "default/h100"
    )
    assert code == 0
    picked = {k: v["devices"]["results"][0]["device"] for k, v in result["allocations"].items()}
    assert picked == {"default/one": "gpu-0", "default/h100": "gpu-1"}


def test_pod_picks_the_feasible_node(snapshot: Path) -> None:
    code, result = run("-f", str(snapshot), "--pod", "default/pod")
    assert code == 0
    assert result["nodes"]["node-2"]["chosen"] is True
    assert result["nodes"]["node-1"]["outcome"] == "unsatisfiable"
    assert "default/pod-gpu" in result["allocations"]


def test_directory_and_yaml_output(snapshot: Path) -> None:
    out = io.StringIO()
    code = main(
        ["-f", str(snapshot.parent), "--node", "node-2", "--claim", "default/one", "-o", "yaml"],
        out=out,
    )
    assert code == 0
    assert yaml.safe_load(out.getvalue())["outcome"] == "success"


def test_table_output(snapshot: Path) -> None:
    out = io.StringIO()
    code = main(["-f", str(snapshot), "--pod", "default/pod", "-o", "table"], out=out)
    assert code == 0
    assert "node-2  success (chosen)" in out.getvalue()


def test_bad_input_names_file_object_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "kind: ResourceSlice\nmetadata: {name: s}\nspec: {driver: d, pool: {generation: x}}\n"
    )
    code, result = run("-f", str(bad), "--node", "n")
    assert code == 2
    assert result["outcome"] == "error"
    assert "bad.yaml: ResourceSlice s: field spec.pool.generation" in result["error"]


def test_unknown_claim_is_an_error(snapshot: Path) -> None:
    code, result = run("-f", str(snapshot), "--node", "node-2", "--claim", "default/nope")
    assert code == 2
    assert "claim default/nope not found" in result["error"]


def test_invalid_pool_is_a_node_error(tmp_path: Path) -> None:
    docs = yaml.safe_load_all(SNAPSHOT)
    kept = [d for d in docs if d["kind"] != "ResourceSlice"]
    dup = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "dup"},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": "node-2",
            "pool": {"name": "node-2", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}, {"name": "gpu-0"}],
        },
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump_all([*kept, dup]))
    code, result = run("-f", str(path), "--node", "node-2", "--claim", "default/one")
    assert code == 2
    assert result["outcome"] == "error"
    assert "duplicate device name gpu-0" in result["error"]
