"""simulate checks input as the API server of the release it simulates: 1.37's fields are
unknown to 1.36, dropped by 1.37 while their gate is off, and checked (CEL included) when on;
DeviceTaintRule is read in the version the release serves."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

from operators.api.features import KubernetesVersion, parse_feature_gates, resolve
from operators.cel.derived import check_derived_attribute
from operators.simulate.snapshot import Document, Source
from operators.simulate.validate import build
from tests.unit.api.release_cases import GATES_137, claim_137, slice_136, slice_137
from tests.unit.test_simulate import run

V136, V137 = KubernetesVersion.of("1.36"), KubernetesVersion.of("1.37")


def _docs(*bodies: dict[str, Any]) -> list[Document]:
    return [Document(Source("f.yaml", i), copy.deepcopy(b)) for i, b in enumerate(bodies)]


def _gates(overrides: dict[str, bool]) -> dict[str, bool]:
    return resolve(parse_feature_gates(overrides, V137), V137)


def test_137_fields_are_unknown_to_136() -> None:
    _, problems = build(_docs(claim_137(), slice_137()), version=V136)
    assert problems == [
        "f.yaml: document #0: ResourceClaim default/c137: field "
        "spec.devices.requests[0].exactly.derivedAttributes: unknown field",
        "f.yaml: document #0: ResourceClaim default/c137: field "
        "spec.devices.requests[1].firstAvailable[0].derivedAttributes: unknown field",
        "f.yaml: document #1: ResourceSlice s137: field spec.partitionTypeAttribute: unknown field",
        "f.yaml: document #1: ResourceSlice s137: field spec.skipNodeOperations: unknown field",
        "f.yaml: document #1: ResourceSlice s137: field "
        "spec.devices[0].consumesCounters[0].compatibilityGroups: unknown field",
        "f.yaml: document #1: ResourceSlice s137: field "
        "spec.devices[0].nodeAllocatableResources: unknown field",
    ]
    _, problems = build(_docs(slice_136()), version=V137)
    assert problems == [
        "f.yaml: document #0: ResourceSlice s137: field "
        "spec.devices[0].nodeAllocatableResourceMappings: unknown field"
    ]


def test_137_drops_a_field_whose_gate_is_off_before_checking_it() -> None:
    claim = claim_137()
    claim["spec"]["devices"]["requests"][0]["exactly"]["derivedAttributes"][0]["expression"] = "{"
    snapshot, problems = build(_docs(claim, slice_137()), version=V137)  # 1.37's defaults: off
    assert problems == []
    stored = snapshot.bodies[("ResourceClaim", next(iter(snapshot.claims)))]
    assert "derivedAttributes" not in stored["spec"]["devices"]["requests"][0]["exactly"]
    assert "partitionTypeAttribute" not in next(iter(snapshot.slices.values())).dump()["spec"]
    kept, problems = build(_docs(claim_137(), slice_137()), version=V137, gates=_gates(GATES_137))
    assert problems == []
    assert next(iter(kept.claims.values())).spec.devices.requests[0].exactly is not None
    assert (
        next(iter(kept.slices.values())).spec.partition_type_attribute == "gpu.example.com/profile"
    )


def test_what_the_cluster_stored_is_kept_whatever_the_gates() -> None:
    snapshot, problems = build(_docs(claim_137()), strict=False, version=V137, stored=True)
    assert problems == []
    (claim,) = snapshot.claims.values()
    assert claim.spec.devices.requests[0].exactly is not None
    assert claim.spec.devices.requests[0].exactly.derived_attributes


def test_derived_attributes_are_compiled_with_the_claims_budget() -> None:
    gates = _gates(GATES_137)
    claim = claim_137()
    exactly = claim["spec"]["devices"]["requests"][0]["exactly"]
    exactly["derivedAttributes"][0]["expression"] = 'device.capacity["gpu.example.com"].memory'
    _, problems = build(_docs(claim), version=V137, gates=gates)
    assert problems == [
        "f.yaml: document #0: ResourceClaim default/c137: field "
        "spec.devices.requests[0].exactly.derivedAttributes[0].expression: Invalid value: "
        "compilation failed: must evaluate to a primitive scalar (string, integer, boolean, "
        "semver) or a list of these scalars, not kubernetes.Quantity"
    ]
    # Each within a selector's limit, both together over the claim's.
    numbers = ",".join(map(str, range(300)))
    costly = f"[{numbers}].all(x, [{numbers}].all(y, x != y + 1000))"
    cost = check_derived_attribute(costly, list_types=True).cost
    assert 500_000 < cost <= 1_000_000
    claim = claim_137()
    claim["spec"]["devices"]["requests"][0]["exactly"]["derivedAttributes"][0]["expression"] = (
        costly
    )
    sub = claim["spec"]["devices"]["requests"][1]["firstAvailable"][0]
    sub["derivedAttributes"][0]["expression"] = costly
    _, problems = build(_docs(claim), version=V137, gates=gates)
    assert problems == [
        "f.yaml: document #0: ResourceClaim default/c137: field spec.devices: Forbidden: too "
        "complex, total cost of derived attribute CEL expressions in the claim exceeds cost limit"
    ]
    without_lists = _gates({**GATES_137, "DRAListTypeAttributes": False})
    claim = claim_137()
    claim["spec"]["devices"]["requests"][0]["exactly"]["derivedAttributes"][0]["expression"] = "[1]"
    _, problems = build(_docs(claim), version=V137, gates=without_lists)
    assert len(problems) == 1
    assert problems[0].endswith("(string, integer, boolean, semver), not list(int)")


def test_device_taint_rules_are_v1beta2_on_136_and_v1_too_on_137() -> None:
    rule = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "r"},
        "spec": {"taint": {"key": "k", "effect": "NoSchedule"}},
    }
    _, problems = build(_docs(rule), version=V136)
    assert problems == [
        "f.yaml: document #0: DeviceTaintRule r: field apiVersion: 'resource.k8s.io/v1' is not "
        "served for DeviceTaintRule by Kubernetes 1.36 (use resource.k8s.io/v1beta2)"
    ]
    beta = {**rule, "apiVersion": "resource.k8s.io/v1beta2"}
    for version in (V136, V137):
        snapshot, problems = build(_docs(rule if version == V137 else beta, beta), version=version)
        assert problems == []
        assert list(snapshot.taint_rules) == ["r"]


def test_the_cli_validates_for_the_kubernetes_version_it_is_given(tmp_path: Path) -> None:
    path = tmp_path / "claim.yaml"
    path.write_text(yaml.safe_dump(claim_137()))
    args = ["-f", str(path), "--node", "n", "--claim", "default/c137"]
    code, result = run(*args, "--kubernetes-version", "1.36")
    assert code == 2
    assert "derivedAttributes: unknown field" in result["error"]
    gates = ",".join(f"{n}=true" for n in GATES_137)
    claim = claim_137()
    claim["spec"]["devices"]["constraints"][0]["matchAttribute"] = "derived/other"
    path.write_text(json.dumps(claim))
    code, result = run(*args, "--kubernetes-version", "1.37", "--feature-gates", gates)
    assert code == 2
    assert (
        "derivedAttributes[0].name: Invalid value: 'derived/numa': must be referenced"
        in (result["error"])
    )
