"""Objects using the fields that differ between 1.36 and 1.37, and broken variants of them.

Shared by the unit tests of ``api.validation`` and by the integration test that sends the same
objects to a real 1.37.2 API server (which must refuse each broken one at the same field).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Doc = dict[str, Any]
DRIVER = "gpu.example.com"
#: The gates under which 1.37.2 keeps (and checks) its new fields (DRAPartitionableDevicesType
#: depends on DRAResourcePoolStatus, and DRADerivedAttributes' list results on
#: DRAListTypeAttributes, which the local control plane's gates switch on).
GATES_137 = {
    "DRAResourcePoolStatus": True,
    "DRAListTypeAttributes": True,
    "DRAPartitionableDevicesType": True,
    "DRAOptionalNodeOperations": True,
    "DRADeviceCompatibilityGroups": True,
    "DRADerivedAttributes": True,
    "DRANodeAllocatableResources": True,
}


def slice_137() -> Doc:
    """A partitionable device of a typed partition, with 1.37's slice and device fields."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s137"},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "nodeName": "node-1",
            "partitionTypeAttribute": f"{DRIVER}/profile",
            "skipNodeOperations": ["NodePrepareResources", "NodeUnprepareResources"],
            "devices": [
                {
                    "name": "gpu-0",
                    "attributes": {"profile": {"string": "full"}, "numa": {"int": 0}},
                    "capacity": {"cores": {"value": "4"}},
                    "consumesCounters": [
                        {
                            "counterSet": "set-0",
                            "counters": {"memory": {"value": "40Gi"}},
                            "compatibilityGroups": ["a", "b"],
                        }
                    ],
                    "nodeAllocatableResources": {
                        "cpu": {
                            "mapping": {"capacityKey": "cores", "capacityMultiplier": "1"},
                            "overhead": {"perPod": "100m"},
                        }
                    },
                }
            ],
        },
    }


def slice_136() -> Doc:
    """1.36's node-allocatable mappings."""
    doc = slice_137()
    spec = doc["spec"]
    del spec["partitionTypeAttribute"], spec["skipNodeOperations"]
    device = spec["devices"][0]
    del device["nodeAllocatableResources"], device["consumesCounters"][0]["compatibilityGroups"]
    device["nodeAllocatableResourceMappings"] = {
        "cpu": {"capacityKey": "cores", "allocationMultiplier": "1"}
    }
    return doc


def claim_137() -> Doc:
    """Derived attributes on a request and on a subrequest, each compared by a constraint."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c137", "namespace": "default"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu-class",
                            "derivedAttributes": [
                                {"name": "derived/numa", "expression": _numa()},
                            ],
                        },
                    },
                    {
                        "name": "nic",
                        "firstAvailable": [
                            {
                                "name": "fast",
                                "deviceClassName": "nic-class",
                                "derivedAttributes": [
                                    {"name": "derived/numa", "expression": _numa()},
                                ],
                            }
                        ],
                    },
                ],
                "constraints": [{"requests": ["gpu", "nic"], "matchAttribute": "derived/numa"}],
            }
        },
    }


def allocated_claim_137() -> Doc:
    doc = claim_137()
    doc["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": DRIVER,
                        "pool": "node-1",
                        "device": "gpu-0",
                        "skipNodeOperations": ["*"],
                    }
                ]
            }
        }
    }
    return doc


def _numa() -> str:
    return f'device.attributes["{DRIVER}"].numa'


def _device(doc: Doc) -> Doc:
    device: Doc = doc["spec"]["devices"][0]
    return device


def _exact(doc: Doc) -> Doc:
    exactly: Doc = doc["spec"]["devices"]["requests"][0]["exactly"]
    return exactly


BASES_137: dict[str, Callable[[], Doc]] = {
    "slice": slice_137,
    "claim": claim_137,
    "allocated-claim": allocated_claim_137,
}
# (case id, base, mutation, path, message fragment), as 1.37.2 refuses them.
INVALID_137: list[tuple[str, str, Callable[[Doc], object], str, str]] = [
    (
        "compatibility-groups-too-many",
        "slice",
        lambda d: _device(d)["consumesCounters"][0].update(compatibilityGroups=["a", "b", "c"]),
        "spec.devices[0].consumesCounters[0].compatibilityGroups",
        "Too many",
    ),
    (
        "compatibility-group-name",
        "slice",
        lambda d: _device(d)["consumesCounters"][0].update(compatibilityGroups=["A_b"]),
        "spec.devices[0].consumesCounters[0].compatibilityGroups[0]",
        "RFC 1123",
    ),
    (
        "compatibility-group-duplicate",
        "slice",
        lambda d: _device(d)["consumesCounters"][0].update(compatibilityGroups=["a", "a"]),
        "spec.devices[0].consumesCounters[0].compatibilityGroups[1]",
        "Duplicate",
    ),
    (
        "skip-node-operation-unknown",
        "slice",
        lambda d: d["spec"].update(skipNodeOperations=["NodeReboot"]),
        "spec.skipNodeOperations[0]",
        "Unsupported value",
    ),
    (
        "skip-prepare-only",
        "slice",
        lambda d: d["spec"].update(skipNodeOperations=["NodePrepareResources"]),
        "spec.skipNodeOperations",
        "cannot be skipped unless NodeUnprepareResources",
    ),
    (
        "skip-node-operation-duplicate",
        "slice",
        lambda d: d["spec"].update(skipNodeOperations=["*", "*"]),
        "spec.skipNodeOperations[1]",
        "Duplicate",
    ),
    (
        "partition-type-without-counters",
        "slice",
        lambda d: _device(d).pop("consumesCounters"),
        "spec.partitionTypeAttribute",
        "may only be set on a slice which declares devices that consume counters",
    ),
    (
        "partition-type-attribute-missing",
        "slice",
        lambda d: _device(d)["attributes"].pop("profile"),
        f"spec.devices[0].attributes[{DRIVER}/profile]",
        "must be set",
    ),
    (
        "partition-type-attribute-not-string",
        "slice",
        lambda d: _device(d)["attributes"].update(profile={"int": 1}),
        f"spec.devices[0].attributes[{DRIVER}/profile]",
        "must be a string value",
    ),
    (
        "partition-type-attribute-not-qualified",
        "slice",
        lambda d: d["spec"].update(partitionTypeAttribute="profile"),
        "spec.partitionTypeAttribute",
        "fully qualified name",
    ),
    (
        "node-allocatable-resource-name",
        "slice",
        lambda d: _device(d)["nodeAllocatableResources"].update(
            {"example.com/foo": {"overhead": {"perPod": "1"}}}
        ),
        "spec.devices[0].nodeAllocatableResources[example.com/foo]",
        "must be a node allocatable resource name",
    ),
    (
        "node-allocatable-resource-empty",
        "slice",
        lambda d: _device(d)["nodeAllocatableResources"].update(memory={}),
        "spec.devices[0].nodeAllocatableResources[memory]",
        "at least one of mapping or overhead must be set",
    ),
    (
        "node-allocatable-capacity-key-unknown",
        "slice",
        lambda d: _device(d)["nodeAllocatableResources"]["cpu"]["mapping"].update(
            capacityKey="threads"
        ),
        "spec.devices[0].nodeAllocatableResources[cpu].mapping.capacityKey",
        "Not found",
    ),
    (
        "node-allocatable-multiplier-missing",
        "slice",
        lambda d: _device(d)["nodeAllocatableResources"]["cpu"]["mapping"].pop(
            "capacityMultiplier"
        ),
        "spec.devices[0].nodeAllocatableResources[cpu].mapping.capacityMultiplier",
        "Required value",
    ),
    (
        "node-allocatable-mapping-both",
        "slice",
        lambda d: _device(d)["nodeAllocatableResources"]["cpu"]["mapping"].update(
            deviceMultiplier="1"
        ),
        "spec.devices[0].nodeAllocatableResources[cpu].mapping",
        "exactly one of",
    ),
    (
        "node-allocatable-overhead-negative",
        "slice",
        lambda d: _device(d)["nodeAllocatableResources"]["cpu"]["overhead"].update(perPod="-1"),
        "spec.devices[0].nodeAllocatableResources[cpu].overhead.perPod",
        "must be non-negative",
    ),
    (
        "derived-attribute-unconstrained",
        "claim",
        lambda d: d["spec"]["devices"]["constraints"][0].update(matchAttribute="derived/other"),
        "spec.devices.requests[0].exactly.derivedAttributes[0].name",
        "must be referenced by at least one matchAttribute or distinctAttribute",
    ),
    (
        "derived-attribute-not-qualified",
        "claim",
        lambda d: _exact(d)["derivedAttributes"][0].update(name="numa"),
        "spec.devices.requests[0].exactly.derivedAttributes[0].name",
        "fully qualified name",
    ),
    (
        "derived-attribute-no-expression",
        "claim",
        lambda d: _exact(d)["derivedAttributes"][0].pop("expression"),
        "spec.devices.requests[0].exactly.derivedAttributes[0].expression",
        "Required value",
    ),
    (
        "derived-attribute-duplicate",
        "claim",
        lambda d: _exact(d)["derivedAttributes"].append(
            {"name": "derived/numa", "expression": "1"}
        ),
        "spec.devices.requests[0].exactly.derivedAttributes[1]",
        "Duplicate",
    ),
    (
        "derived-attributes-too-many",
        "claim",
        lambda d: _exact(d).update(
            derivedAttributes=[{"name": "derived/numa", "expression": "1"}] * 33
        ),
        "spec.devices.requests[0].exactly.derivedAttributes",
        "Too many",
    ),
    (
        "result-skip-node-operation-unknown",
        "allocated-claim",
        lambda d: d["status"]["allocation"]["devices"]["results"][0].update(
            skipNodeOperations=["Reboot"]
        ),
        "status.allocation.devices.results[0].skipNodeOperations[0]",
        "Unsupported value",
    ),
]
# Derived attributes whose expression 1.37.2 refuses to compile (simulate compiles them).
BAD_DERIVED_EXPRESSIONS = [
    ("map", "{1: 2}", "must evaluate to a primitive scalar"),
    ("quantity", f'device.capacity["{DRIVER}"].memory', "must evaluate to a primitive scalar"),
    ("syntax", "device.attributes[", "Syntax error"),
]
