"""Per-object validation: every fixture is valid; each broken object names the exact field."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.api import limits
from operators.api.features import Release
from operators.api.resource import KINDS, ResourceSlice
from operators.api.validation import (
    FieldViolation,
    label_name_errors,
    pool_name_errors,
    qualified_name_errors,
    validate,
    validate_resource_slice,
)

FIXTURES = Path(__file__).parents[2] / "fixtures"
Doc = dict[str, Any]


def _fixture_objects() -> list[tuple[str, Doc]]:
    out = []
    for path in sorted(FIXTURES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc["kind"] in KINDS:
                out.append((f"{path.name}:{doc['metadata']['name']}", doc))
    return out


FIXTURE_OBJECTS = _fixture_objects()


def _check(doc: Doc, release: Release | None = None) -> list[FieldViolation]:
    model = KINDS[doc["kind"]].model_validate(doc)
    return validate(model) if release is None else validate(model, release)


#: Where a row's field differs between the releases: 1.36's path (the row gives 1.37's).
PATH_136: dict[str, str] = {
    # 1.37 blames the default, 1.36 the minimum.
    "policy-default-below-min": "spec.devices[0].capacity[memory].requestPolicy.validRange.min",
}


@pytest.mark.parametrize(("name", "doc"), FIXTURE_OBJECTS, ids=[n for n, _ in FIXTURE_OBJECTS])
def test_fixture_is_valid(name: str, doc: Doc) -> None:
    assert _check(doc) == []


# --- base objects for the invalid cases ----------------------------------------------------


def _slice() -> Doc:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {
            "driver": "gpu.example.com",
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "nodeName": "node-1",
            "devices": [
                {
                    "name": "gpu-0",
                    "attributes": {"model": {"string": "a100"}},
                    "capacity": {"memory": {"value": "40Gi"}},
                }
            ],
        },
    }


def _shared_slice() -> Doc:
    doc = _slice()
    device = doc["spec"]["devices"][0]
    device["allowMultipleAllocations"] = True
    device["capacity"]["memory"]["requestPolicy"] = {
        "default": "10Gi",
        "validRange": {"min": "10Gi", "max": "40Gi", "step": "10Gi"},
    }
    return doc


def _counter_slice() -> Doc:
    doc = _slice()
    del doc["spec"]["devices"]
    doc["spec"]["sharedCounters"] = [{"name": "set-0", "counters": {"memory": {"value": "40Gi"}}}]
    return doc


def _claim() -> Doc:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "nic", "exactly": {"deviceClassName": "nic.example.com"}},
                    {
                        "name": "gpu",
                        "firstAvailable": [
                            {"name": "big", "deviceClassName": "big-gpu"},
                            {"name": "small", "deviceClassName": "small-gpu", "count": 2},
                        ],
                    },
                ],
                "constraints": [{"requests": ["nic", "gpu"], "matchAttribute": "x.com/root"}],
                "config": [
                    {
                        "requests": ["gpu/small"],
                        "opaque": {"driver": "gpu.example.com", "parameters": {"a": 1}},
                    }
                ],
            }
        },
    }


def _allocated_claim() -> Doc:
    doc = _claim()
    doc["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "nic", "driver": "nic.example.com", "pool": "p", "device": "d0"},
                    {
                        "request": "gpu/big",
                        "driver": "gpu.example.com",
                        "pool": "p",
                        "device": "g0",
                    },
                ]
            }
        },
        "reservedFor": [{"resource": "pods", "name": "pod", "uid": "uid-1"}],
        "devices": [{"driver": "nic.example.com", "pool": "p", "device": "d0"}],
    }
    return doc


def _class() -> Doc:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.example.com"},
        "spec": {"selectors": [{"cel": {"expression": "true"}}]},
    }


def _template() -> Doc:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "default"},
        "spec": {
            "metadata": {"labels": {"a": "b"}},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "c"}}]}},
        },
    }


def _taint_rule() -> Doc:
    return {
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "r"},
        "spec": {
            "deviceSelector": {"driver": "gpu.example.com"},
            "taint": {"key": "k", "effect": "NoSchedule"},
        },
    }


BASES: dict[str, Callable[[], Doc]] = {
    "slice": _slice,
    "shared-slice": _shared_slice,
    "counter-slice": _counter_slice,
    "claim": _claim,
    "allocated-claim": _allocated_claim,
    "class": _class,
    "template": _template,
    "taint-rule": _taint_rule,
}


@pytest.mark.parametrize("base", sorted(BASES))
def test_base_objects_are_valid(base: str) -> None:
    assert _check(BASES[base]()) == []


def _dev(doc: Doc) -> Doc:
    device: Doc = doc["spec"]["devices"][0]
    return device


def _req(doc: Doc, i: int = 0) -> Doc:
    request: Doc = doc["spec"]["devices"]["requests"][i]
    return request


def _many_devices(doc: Doc, n: int, *, taint: bool = False) -> None:
    devices = []
    for i in range(n):
        device: Doc = {"name": f"d{i}"}
        if taint:
            device["taints"] = [{"key": "k", "effect": "NoSchedule"}]
        devices.append(device)
    doc["spec"]["devices"] = devices


# (case id, base, mutation, expected path, message fragment)
INVALID: list[tuple[str, str, Callable[[Doc], object], str, str]] = [
    (
        "driver-underscore",
        "slice",
        lambda d: d["spec"].update(driver="gpu_x.com"),
        "spec.driver",
        "RFC 1123",
    ),
    (
        "driver-too-long",
        "slice",
        lambda d: d["spec"].update(driver="a" * 64 + ".com"),
        "spec.driver",
        "no more than 63",
    ),
    ("driver-missing", "slice", lambda d: d["spec"].pop("driver"), "spec.driver", "Required"),
    (
        "pool-name-segment",
        "slice",
        lambda d: d["spec"]["pool"].update(name="a/B"),
        "spec.pool.name",
        "RFC 1123",
    ),
    (
        "pool-slice-count-zero",
        "slice",
        lambda d: d["spec"]["pool"].update(resourceSliceCount=0),
        "spec.pool.resourceSliceCount",
        "greater than zero",
    ),
    (
        "pool-generation-negative",
        "slice",
        lambda d: d["spec"]["pool"].update(generation=-1),
        "spec.pool.generation",
        "greater than or equal",
    ),
    (
        "no-node-selection",
        "slice",
        lambda d: d["spec"].pop("nodeName"),
        "spec",
        "exactly one of `nodeName`",
    ),
    (
        "two-node-selections",
        "slice",
        lambda d: d["spec"].update(allNodes=True),
        "spec",
        "multiple fields are set",
    ),
    (
        "all-nodes-false",
        "slice",
        lambda d: d["spec"].update(allNodes=False),
        "spec.allNodes",
        "unset or set to true",
    ),
    (
        "node-selector-two-terms",
        "slice",
        lambda d: (
            d["spec"].pop("nodeName"),
            d["spec"].update(nodeSelector={"nodeSelectorTerms": [{}, {}]}),
        ),
        "spec.nodeSelector.nodeSelectorTerms",
        "exactly one node selector term",
    ),
    (
        "node-selector-bad-operator",
        "slice",
        lambda d: (
            d["spec"].pop("nodeName"),
            d["spec"].update(
                nodeSelector={
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "k", "operator": "IN", "values": ["a"]}]}
                    ]
                }
            ),
        ),
        "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].operator",
        "Unsupported",
    ),
    (
        "counters-and-devices",
        "counter-slice",
        lambda d: d["spec"].update(devices=[{"name": "x"}]),
        "spec",
        "only one of `sharedCounters` or `devices`",
    ),
    (
        "too-many-devices",
        "slice",
        lambda d: _many_devices(d, limits.ResourceSliceMaxDevices + 1),
        "spec.devices",
        "at most 128",
    ),
    (
        "too-many-tainted-devices",
        "slice",
        lambda d: _many_devices(d, 65, taint=True),
        "spec.devices",
        "at most 64",
    ),
    (
        "duplicate-device",
        "slice",
        lambda d: d["spec"]["devices"].append({"name": "gpu-0"}),
        "spec.devices[1]",
        "Duplicate",
    ),
    (
        "device-name-not-label",
        "slice",
        lambda d: _dev(d).update(name="gpu.0"),
        "spec.devices[0].name",
        "RFC 1123 label",
    ),
    (
        "attribute-name-bad-id",
        "slice",
        lambda d: _dev(d)["attributes"].update({"bad-name": {"int": 1}}),
        "spec.devices[0].attributes[bad-name]",
        "C identifier",
    ),
    (
        "attribute-empty-domain",
        "slice",
        lambda d: _dev(d)["attributes"].update({"/x": {"int": 1}}),
        "spec.devices[0].attributes[/x]",
        "domain must not be empty",
    ),
    (
        "attribute-two-values",
        "slice",
        lambda d: _dev(d)["attributes"].update(model={"string": "a", "int": 1}),
        "spec.devices[0].attributes[model]",
        "exactly one value",
    ),
    (
        "attribute-no-value",
        "slice",
        lambda d: _dev(d)["attributes"].update(model={}),
        "spec.devices[0].attributes[model]",
        "exactly one value",
    ),
    (
        "attribute-string-too-long",
        "slice",
        lambda d: _dev(d)["attributes"].update(model={"string": "x" * 65}),
        "spec.devices[0].attributes[model].string",
        "64",
    ),
    (
        "attribute-bad-version",
        "slice",
        lambda d: _dev(d)["attributes"].update(v={"version": "1.2"}),
        "spec.devices[0].attributes[v].version",
        "semver",
    ),
    (
        "attribute-empty-list",
        "slice",
        lambda d: _dev(d)["attributes"].update(l={"ints": []}),
        "spec.devices[0].attributes[l].ints",
        "must not be empty",
    ),
    (
        "attribute-list-bad-version",
        "slice",
        lambda d: _dev(d)["attributes"].update(l={"versions": ["1.0.0", "x"]}),
        "spec.devices[0].attributes[l].versions[1]",
        "semver",
    ),
    (
        "too-many-attribute-values",
        "slice",
        lambda d: _dev(d)["attributes"].update(l={"ints": list(range(48))}),
        "spec.devices[0].attributes",
        "must not exceed 48",
    ),
    (
        "too-many-attributes-and-capacities",
        "slice",
        lambda d: _dev(d)["attributes"].update({f"a{i}": {"int": i} for i in range(32)}),
        "spec.devices[0]",
        "must not exceed 32",
    ),
    (
        "capacity-without-value",
        "slice",
        lambda d: _dev(d)["capacity"].update(memory={}),
        "spec.devices[0].capacity[memory].value",
        "Required",
    ),
    (
        "request-policy-not-shareable",
        "slice",
        lambda d: _dev(d)["capacity"]["memory"].update(requestPolicy={"default": "1Gi"}),
        "spec.devices[0].capacity[memory].requestPolicy",
        "allowMultipleAllocations must be true",
    ),
    (
        "policy-values-and-range",
        "shared-slice",
        lambda d: _dev(d)["capacity"]["memory"]["requestPolicy"].update(validValues=["10Gi"]),
        "spec.devices[0].capacity[memory].requestPolicy",
        "exactly one policy",
    ),
    (
        "policy-default-off-step",
        "shared-slice",
        lambda d: _dev(d)["capacity"]["memory"]["requestPolicy"].update(default="15Gi"),
        "spec.devices[0].capacity[memory].requestPolicy.validRange.step",
        "not a multiple",
    ),
    (
        "policy-default-below-min",
        "shared-slice",
        lambda d: _dev(d)["capacity"]["memory"]["requestPolicy"].update(default="5Gi"),
        "spec.devices[0].capacity[memory].requestPolicy.validRange.default",
        "default is less than min",
    ),
    (
        "policy-max-above-capacity",
        "shared-slice",
        lambda d: _dev(d)["capacity"]["memory"]["requestPolicy"]["validRange"].update(max="50Gi"),
        "spec.devices[0].capacity[memory].requestPolicy.validRange.max",
        "larger than capacity",
    ),
    (
        "policy-range-without-default",
        "shared-slice",
        lambda d: _dev(d)["capacity"]["memory"]["requestPolicy"].pop("default"),
        "spec.devices[0].capacity[memory].requestPolicy.default",
        "required when validRange",
    ),
    (
        "policy-default-not-a-valid-value",
        "shared-slice",
        lambda d: _dev(d)["capacity"]["memory"].update(
            requestPolicy={"default": "3Gi", "validValues": ["1Gi", "2Gi"]}
        ),
        "spec.devices[0].capacity[memory].requestPolicy.validValues",
        "default value is not valid",
    ),
    (
        "policy-values-unsorted",
        "shared-slice",
        lambda d: _dev(d)["capacity"]["memory"].update(
            requestPolicy={"default": "1Gi", "validValues": ["2Gi", "1Gi"]}
        ),
        "spec.devices[0].capacity[memory].requestPolicy.validValues[1]",
        "ascending",
    ),
    (
        "too-many-taints",
        "slice",
        lambda d: _dev(d).update(taints=[{"key": f"k{i}", "effect": "None"} for i in range(17)]),
        "spec.devices[0].taints",
        "at most 16",
    ),
    (
        "taint-bad-effect",
        "slice",
        lambda d: _dev(d).update(taints=[{"key": "k", "effect": "PreferNoSchedule"}]),
        "spec.devices[0].taints[0].effect",
        "Unsupported",
    ),
    (
        "taint-missing-effect",
        "slice",
        lambda d: _dev(d).update(taints=[{"key": "k"}]),
        "spec.devices[0].taints[0].effect",
        "Required",
    ),
    (
        "too-many-consumptions",
        "slice",
        lambda d: _dev(d).update(
            consumesCounters=[
                {"counterSet": f"s{i}", "counters": {"c": {"value": "1"}}} for i in range(3)
            ]
        ),
        "spec.devices[0].consumesCounters",
        "at most 2",
    ),
    (
        "duplicate-consumption",
        "slice",
        lambda d: _dev(d).update(
            consumesCounters=[{"counterSet": "s", "counters": {"c": {"value": "1"}}}] * 2
        ),
        "spec.devices[0].consumesCounters[1]",
        "Duplicate",
    ),
    (
        "consumption-no-counters",
        "slice",
        lambda d: _dev(d).update(consumesCounters=[{"counterSet": "s"}]),
        "spec.devices[0].consumesCounters[0].counters",
        "Required",
    ),
    (
        "counter-name-not-label",
        "counter-slice",
        lambda d: d["spec"]["sharedCounters"][0]["counters"].update(memorySlice0={"value": "1"}),
        "spec.sharedCounters[0].counters[memorySlice0]",
        "RFC 1123 label",
    ),
    (
        "too-many-counter-sets",
        "counter-slice",
        lambda d: d["spec"].update(
            sharedCounters=[{"name": f"s{i}", "counters": {"c": {"value": "1"}}} for i in range(9)]
        ),
        "spec.sharedCounters",
        "at most 8",
    ),
    (
        "too-many-counters",
        "counter-slice",
        lambda d: d["spec"]["sharedCounters"][0].update(
            counters={f"c{i}": {"value": "1"} for i in range(33)}
        ),
        "spec.sharedCounters[0].counters",
        "at most 32",
    ),
    (
        "device-node-without-per-device",
        "slice",
        lambda d: _dev(d).update(nodeName="node-1"),
        "spec.devices[0]",
        "can only be set if `perDeviceNodeSelection`",
    ),
    (
        "per-device-missing-selection",
        "slice",
        lambda d: (d["spec"].pop("nodeName"), d["spec"].update(perDeviceNodeSelection=True)),
        "spec.devices[0]",
        "exactly one of `nodeName`, `nodeSelector`, or `allNodes`",
    ),
    (
        "binding-conditions-without-failure",
        "slice",
        lambda d: _dev(d).update(bindingConditions=["Attached"]),
        "spec.devices[0].bindingFailureConditions",
        "required to use bindingConditions",
    ),
    (
        "binding-conditions-overlap",
        "slice",
        lambda d: _dev(d).update(bindingConditions=["A"], bindingFailureConditions=["A"]),
        "spec.devices[0].bindingFailureConditions[0]",
        "must not overlap",
    ),
    (
        "too-many-binding-conditions",
        "slice",
        lambda d: _dev(d).update(
            bindingConditions=[f"C{i}" for i in range(5)], bindingFailureConditions=["F"]
        ),
        "spec.devices[0].bindingConditions",
        "at most 4",
    ),
    (
        "request-neither-exactly-nor-first",
        "claim",
        lambda d: _req(d).pop("exactly"),
        "spec.devices.requests[0]",
        "exactly one of `exactly` or `firstAvailable`",
    ),
    (
        "request-both-exactly-and-first",
        "claim",
        lambda d: _req(d).update(firstAvailable=[{"name": "a", "deviceClassName": "c"}]),
        "spec.devices.requests[0]",
        "multiple fields are set",
    ),
    (
        "request-duplicate-name",
        "claim",
        lambda d: _req(d, 1).update(name="nic"),
        "spec.devices.requests[1]",
        "Duplicate",
    ),
    (
        "request-name-not-label",
        "claim",
        lambda d: _req(d).update(name="NIC"),
        "spec.devices.requests[0].name",
        "RFC 1123 label",
    ),
    (
        "request-missing-class",
        "claim",
        lambda d: _req(d)["exactly"].pop("deviceClassName"),
        "spec.devices.requests[0].exactly.deviceClassName",
        "Required",
    ),
    (
        "count-zero",
        "claim",
        lambda d: _req(d)["exactly"].update(count=0),
        "spec.devices.requests[0].exactly.count",
        "greater than zero",
    ),
    (
        "count-with-all",
        "claim",
        lambda d: _req(d)["exactly"].update(allocationMode="All", count=2),
        "spec.devices.requests[0].exactly.count",
        "must not be specified",
    ),
    (
        "unknown-allocation-mode",
        "claim",
        lambda d: _req(d)["exactly"].update(allocationMode="Some"),
        "spec.devices.requests[0].exactly.allocationMode",
        "Unsupported",
    ),
    (
        "selector-without-cel",
        "claim",
        lambda d: _req(d)["exactly"].update(selectors=[{}]),
        "spec.devices.requests[0].exactly.selectors[0].cel",
        "Required",
    ),
    (
        "selector-too-long",
        "claim",
        lambda d: _req(d)["exactly"].update(
            selectors=[{"cel": {"expression": "x" * (10 * 1024 + 1)}}]
        ),
        "spec.devices.requests[0].exactly.selectors[0].cel.expression",
        "10240",
    ),
    (
        "too-many-selectors",
        "claim",
        lambda d: _req(d)["exactly"].update(selectors=[{"cel": {"expression": "true"}}] * 33),
        "spec.devices.requests[0].exactly.selectors",
        "at most 32",
    ),
    (
        "toleration-exists-with-value",
        "claim",
        lambda d: _req(d)["exactly"].update(
            tolerations=[{"key": "k", "operator": "Exists", "value": "v"}]
        ),
        "spec.devices.requests[0].exactly.tolerations[0].value",
        "must be empty",
    ),
    (
        "toleration-bad-operator",
        "claim",
        lambda d: _req(d)["exactly"].update(tolerations=[{"key": "k", "operator": "In"}]),
        "spec.devices.requests[0].exactly.tolerations[0].operator",
        "Unsupported",
    ),
    (
        "capacity-request-bad-name",
        "claim",
        lambda d: _req(d)["exactly"].update(capacity={"requests": {"band-width": "1Gi"}}),
        "spec.devices.requests[0].exactly.capacity.requests[band-width]",
        "C identifier",
    ),
    (
        "too-many-subrequests",
        "claim",
        lambda d: _req(d, 1).update(
            firstAvailable=[{"name": f"s{i}", "deviceClassName": "c"} for i in range(9)]
        ),
        "spec.devices.requests[1].firstAvailable",
        "at most 8",
    ),
    (
        "duplicate-subrequest",
        "claim",
        lambda d: _req(d, 1)["firstAvailable"][1].update(name="big"),
        "spec.devices.requests[1].firstAvailable[1]",
        "Duplicate",
    ),
    (
        "subrequest-count-negative",
        "claim",
        lambda d: _req(d, 1)["firstAvailable"][1].update(count=-1),
        "spec.devices.requests[1].firstAvailable[1].count",
        "greater than zero",
    ),
    (
        "too-many-requests",
        "claim",
        lambda d: d["spec"]["devices"].update(
            requests=[{"name": f"r{i}", "exactly": {"deviceClassName": "c"}} for i in range(33)]
        ),
        "spec.devices.requests",
        "at most 32",
    ),
    (
        "constraint-unknown-request",
        "claim",
        lambda d: d["spec"]["devices"]["constraints"][0].update(requests=["nic", "tpu"]),
        "spec.devices.constraints[0].requests[1]",
        "must be the name of a request",
    ),
    (
        "constraint-unknown-subrequest",
        "claim",
        lambda d: d["spec"]["devices"]["constraints"][0].update(requests=["gpu/medium"]),
        "spec.devices.constraints[0].requests[0]",
        "must be the name of a request",
    ),
    (
        "constraint-no-attribute",
        "claim",
        lambda d: d["spec"]["devices"]["constraints"][0].pop("matchAttribute"),
        "spec.devices.constraints[0]",
        "exactly one of",
    ),
    (
        "constraint-both-attributes",
        "claim",
        lambda d: d["spec"]["devices"]["constraints"][0].update(distinctAttribute="x.com/y"),
        "spec.devices.constraints[0]",
        "multiple fields are set",
    ),
    (
        "constraint-unqualified",
        "claim",
        lambda d: d["spec"]["devices"]["constraints"][0].update(matchAttribute="root"),
        "spec.devices.constraints[0].matchAttribute",
        "fully qualified",
    ),
    (
        "config-without-opaque",
        "claim",
        lambda d: d["spec"]["devices"]["config"][0].pop("opaque"),
        "spec.devices.config[0].opaque",
        "Required",
    ),
    (
        "config-parameters-not-object",
        "claim",
        lambda d: d["spec"]["devices"]["config"][0]["opaque"].update(parameters=[1]),
        "spec.devices.config[0].opaque.parameters",
        "JSON object",
    ),
    (
        "config-parameters-too-long",
        "claim",
        lambda d: d["spec"]["devices"]["config"][0]["opaque"].update(parameters={"x": "y" * 10240}),
        "spec.devices.config[0].opaque.parameters",
        "10240",
    ),
    (
        "claim-name-invalid",
        "claim",
        lambda d: d["metadata"].update(name="Claim"),
        "metadata.name",
        "RFC 1123 subdomain",
    ),
    (
        "claim-name-missing",
        "claim",
        lambda d: d["metadata"].pop("name"),
        "metadata.name",
        "Required",
    ),
    (
        "reserved-without-allocation",
        "allocated-claim",
        lambda d: (d["status"].pop("allocation"), d["status"].pop("devices")),
        "status.reservedFor",
        "may not be specified",
    ),
    (
        "reserved-duplicate-uid",
        "allocated-claim",
        lambda d: d["status"]["reservedFor"].append(
            {"resource": "pods", "name": "x", "uid": "uid-1"}
        ),
        "status.reservedFor[1]",
        "Duplicate",
    ),
    (
        "reserved-missing-uid",
        "allocated-claim",
        lambda d: d["status"]["reservedFor"][0].pop("uid"),
        "status.reservedFor[0].uid",
        "Required",
    ),
    (
        "too-many-reservations",
        "allocated-claim",
        lambda d: d["status"].update(
            reservedFor=[{"resource": "pods", "name": "p", "uid": f"u{i}"} for i in range(257)]
        ),
        "status.reservedFor",
        "at most 256",
    ),
    (
        "result-unknown-request",
        "allocated-claim",
        lambda d: d["status"]["allocation"]["devices"]["results"][1].update(request="gpu/huge"),
        "status.allocation.devices.results[1].request",
        "must be the name of a request",
    ),
    (
        "result-bad-share-id",
        "allocated-claim",
        lambda d: d["status"]["allocation"]["devices"]["results"][0].update(shareID="0d274f"),
        "status.allocation.devices.results[0].shareID",
        "RFC 4122",
    ),
    (
        "result-bad-pool",
        "allocated-claim",
        lambda d: d["status"]["allocation"]["devices"]["results"][0].update(pool="Pool"),
        "status.allocation.devices.results[0].pool",
        "RFC 1123",
    ),
    (
        "device-status-not-allocated",
        "allocated-claim",
        lambda d: d["status"]["devices"][0].update(device="d1"),
        "status.devices[0]",
        "must be an allocated device",
    ),
    (
        "device-status-bad-condition",
        "allocated-claim",
        lambda d: d["status"]["devices"][0].update(
            conditions=[
                {
                    "type": "Ready",
                    "status": "Yes",
                    "reason": "R",
                    "lastTransitionTime": "2025-01-01T00:00:00Z",
                }
            ]
        ),
        "status.devices[0].conditions[0].status",
        "Unsupported",
    ),
    (
        "device-status-bad-ip",
        "allocated-claim",
        lambda d: d["status"]["devices"][0].update(networkData={"ips": ["10.0.0.1"]}),
        "status.devices[0].networkData.ips[0]",
        "CIDR",
    ),
    (
        "allocation-config-bad-source",
        "allocated-claim",
        lambda d: d["status"]["allocation"]["devices"].update(
            config=[{"source": "FromNowhere", "opaque": {"driver": "d.com", "parameters": {}}}]
        ),
        "status.allocation.devices.config[0].source",
        "Unsupported",
    ),
    (
        "class-config-driver",
        "class",
        lambda d: d["spec"].update(config=[{"opaque": {"driver": "", "parameters": {"a": 1}}}]),
        "spec.config[0].opaque.driver",
        "Required",
    ),
    (
        "class-extended-resource",
        "class",
        lambda d: d["spec"].update(extendedResourceName="gpu"),
        "spec.extendedResourceName",
        "extended resource name",
    ),
    (
        "class-namespaced",
        "class",
        lambda d: d["metadata"].update(namespace="default"),
        "metadata.namespace",
        "Forbidden",
    ),
    (
        "template-metadata-name",
        "template",
        lambda d: d["spec"]["metadata"].update(name="x"),
        "spec.metadata.name",
        "only labels and annotations",
    ),
    (
        "template-request",
        "template",
        lambda d: d["spec"]["spec"]["devices"]["requests"][0].update(name="R"),
        "spec.spec.devices.requests[0].name",
        "RFC 1123 label",
    ),
    (
        "template-label-value",
        "template",
        lambda d: d["spec"]["metadata"]["labels"].update(a="-bad-"),
        "spec.metadata.labels[a]",
        "valid label",
    ),
    (
        "taint-rule-effect",
        "taint-rule",
        lambda d: d["spec"]["taint"].update(effect="Evict"),
        "spec.taint.effect",
        "Unsupported",
    ),
    (
        "taint-rule-key",
        "taint-rule",
        lambda d: d["spec"]["taint"].update(key="a/b/c"),
        "spec.taint.key",
        "prefix part",
    ),
    (
        "taint-rule-device",
        "taint-rule",
        lambda d: d["spec"]["deviceSelector"].update(device="GPU"),
        "spec.deviceSelector.device",
        "RFC 1123 label",
    ),
]


@pytest.mark.parametrize("release", [Release(1, 36), Release(1, 37)], ids=str)
@pytest.mark.parametrize(
    ("name", "base", "mutate", "path", "fragment"),
    INVALID,
    ids=[case[0] for case in INVALID],
)
def test_invalid_object_names_the_field(
    name: str,
    base: str,
    mutate: Callable[[Doc], object],
    path: str,
    fragment: str,
    release: Release,
) -> None:
    doc = copy.deepcopy(BASES[base]())
    mutate(doc)
    if release == Release(1, 36):
        path = PATH_136.get(name, path)
    violations = _check(doc, release)
    matching = [v for v in violations if v.path == path]
    assert matching, f"no violation at {path}; got {[str(v) for v in violations]}"
    assert any(fragment in v.message for v in matching), [str(v) for v in matching]


def test_every_violation_is_reported_not_just_the_first() -> None:
    doc = _claim()
    _req(doc).update(name="NIC")
    _req(doc)["exactly"].update(count=0)
    doc["spec"]["devices"]["constraints"][0].update(requests=["tpu"])
    paths = {v.path for v in _check(doc)}
    assert {
        "spec.devices.requests[0].name",
        "spec.devices.requests[0].exactly.count",
        "spec.devices.constraints[0].requests[0]",
    } <= paths


def test_violation_prints_with_its_path() -> None:
    assert str(FieldViolation("spec.driver", "Required value")) == "spec.driver: Required value"


def test_tpu_fixture_dangling_counter_sets_pass_object_validation() -> None:
    [doc] = [d for n, d in FIXTURE_OBJECTS if n.endswith(":tpu-devices")]
    assert _check(doc) == []
    counter_sets = {c["counterSet"] for d in doc["spec"]["devices"] for c in d["consumesCounters"]}
    assert {"tpu-couner-set", "tpu-pool"} <= counter_sets


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("model", True),
        ("_x1", True),
        ("dra.example.com/model", True),
        ("Dra.Example.com/model", True),
        ("1model", False),
        ("a-b", False),
        ("example.com/", False),
        ("a/b/c", False),
        ("x" * 33, False),
    ],
)
def test_qualified_names(name: str, ok: bool) -> None:
    assert (qualified_name_errors(name) == []) == ok


@pytest.mark.parametrize(
    ("name", "ok"),
    [("node-1", True), ("a.b/c-d", True), ("A", False), ("a//b", False), ("x" * 254, False)],
)
def test_pool_names(name: str, ok: bool) -> None:
    assert (pool_name_errors(name) == []) == ok


@pytest.mark.parametrize(
    ("name", "ok"),
    [("Ready", True), ("example.com/Attached", True), ("-x", False), ("a/b/c", False), ("", False)],
)
def test_label_names(name: str, ok: bool) -> None:
    assert (label_name_errors(name) == []) == ok


def test_validate_rejects_other_types() -> None:
    from operators.api.core import Pod

    with pytest.raises(TypeError):
        validate(Pod())


# --- capacity policies in each release's arithmetic ------------------------------------------

Rules = tuple[Release, bool]  # release, DRAFractionalCapacityRange
V136: Rules = (Release(1, 36), False)
V137: Rules = (Release(1, 37), False)
V137_FRACTIONAL: Rules = (Release(1, 37), True)


def _quarters(**policy: Any) -> ResourceSlice:
    """A device shared in quarters of one unit (the fractional-capacity example's shape)."""
    doc = _shared_slice()
    capacity = _dev(doc)["capacity"]["memory"]
    capacity["value"] = "1"
    capacity["requestPolicy"] = {
        "default": "250m",
        "validRange": {"min": "250m", "step": "250m", "max": "1"},
    }
    capacity["requestPolicy"].update(policy)
    return ResourceSlice.model_validate(doc)


def _messages(slice_: ResourceSlice, rules: Rules) -> list[str]:
    release, fractional = rules
    found = validate_resource_slice(slice_, release, fractional_capacity_range=fractional)
    return [f"{v.path}: {v.message}" for v in found]


def test_quarters_are_valid_in_every_release() -> None:
    """Whole units step 250m as 1 (1.36, 1.37 without the gate); milli-units step it exactly."""
    for rules in (V136, V137, V137_FRACTIONAL):
        assert _messages(_quarters(), rules) == []


def test_a_default_off_the_step_only_milli_units_see() -> None:
    off = _quarters(default="300m")
    assert _messages(off, V136) == []
    assert _messages(off, V137) == []
    (problem,) = _messages(off, V137_FRACTIONAL)
    assert problem.endswith("not a multiple of a given step (250m) from (250m)")


def test_a_value_finer_than_a_milli_unit_is_refused_with_the_gate() -> None:
    fine = _quarters(default="2501u")
    assert any(
        "cannot be represented as a milli value" in m for m in _messages(fine, V137_FRACTIONAL)
    )
    assert not any("milli" in m for m in _messages(fine, V137))


def test_whole_unit_valid_values_are_duplicates_without_the_gate() -> None:
    doc = _shared_slice()
    _dev(doc)["capacity"]["memory"]["requestPolicy"] = {
        "default": "500m",
        "validValues": ["500m", "1"],
    }
    values = ResourceSlice.model_validate(doc)
    assert any("Duplicate value" in m for m in _messages(values, V136))
    assert any("Duplicate value" in m for m in _messages(values, V137))
    assert _messages(values, V137_FRACTIONAL) == []


def test_137_bounds_the_integers_it_steps() -> None:
    doc = _shared_slice()
    _dev(doc)["capacity"]["memory"]["value"] = "20E"
    _dev(doc)["capacity"]["memory"]["requestPolicy"] = {
        "default": "10E",
        "validRange": {"min": "10E", "step": "10E"},
    }
    huge = ResourceSlice.model_validate(doc)
    assert not any("9223372036854775807" in m for m in _messages(huge, V136))
    assert any("must not be larger than 9223372036854775807" in m for m in _messages(huge, V137))


@pytest.mark.parametrize(
    ("release", "refused"), [(Release(1, 37), False), (Release(1, 38), True)], ids=str
)
def test_capacity_requests_are_capped_from_1_38(release: Release, refused: bool) -> None:
    """1.38's MaxCapacityRequirements: at most 32 capacity requests per request; 1.37 had no
    limit."""
    doc = _claim()
    _req(doc)["exactly"]["capacity"] = {"requests": {f"c{i}": "1" for i in range(33)}}
    path = "spec.devices.requests[0].exactly.capacity.requests"
    violations = [v for v in _check(doc, release) if v.path == path]
    assert bool(violations) is refused, [str(v) for v in violations]
    if refused:
        assert "at most 32" in violations[0].message
    _req(doc)["exactly"]["capacity"] = {"requests": {f"c{i}": "1" for i in range(32)}}
    assert not [v for v in _check(doc, release) if v.path == path]
