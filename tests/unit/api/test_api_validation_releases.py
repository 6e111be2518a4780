"""Validation per release: 1.37.2's rules for its new fields, 1.36.3's for its own; a field a
release does not serve is unknown there and left unchecked; a gated one is dropped when off."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from operators.api.features import Release
from operators.api.fields import FIELDS, drop_disabled, unserved
from operators.api.groups import PodGroup
from operators.api.resource import (
    KINDS,
    Device,
    DeviceTaintRule,
    ResourceSlice,
    ResourceSliceSpec,
    api_version_of,
)
from operators.api.strict import unknown_fields
from operators.api.validation import FieldViolation, validate
from operators.cel.derived import check_derived_attribute
from tests.unit.api.release_cases import (
    BAD_DERIVED_EXPRESSIONS,
    BASES_137,
    GATES_137,
    INVALID_137,
    Doc,
    claim_137,
    slice_136,
    slice_137,
)

R136, R137, R138 = Release(1, 36), Release(1, 37), Release(1, 38)


def _check(doc: Doc, release: Release) -> list[FieldViolation]:
    return validate(KINDS[doc["kind"]].model_validate(doc), release)


@pytest.mark.parametrize("base", sorted(BASES_137))
def test_the_137_objects_are_valid_on_137(base: str) -> None:
    assert _check(BASES_137[base](), R137) == []


@pytest.mark.parametrize(
    ("base", "mutate", "path", "fragment"),
    [case[1:] for case in INVALID_137],
    ids=[case[0] for case in INVALID_137],
)
def test_137_refuses_at_the_field(
    base: str, mutate: Callable[[Doc], object], path: str, fragment: str
) -> None:
    doc = copy.deepcopy(BASES_137[base]())
    mutate(doc)
    violations = _check(doc, R137)
    matching = [v for v in violations if v.path == path]
    assert matching, f"no violation at {path}; got {[str(v) for v in violations]}"
    assert any(fragment in v.message for v in matching), [str(v) for v in matching]


@pytest.mark.parametrize("case", INVALID_137, ids=[case[0] for case in INVALID_137])
def test_136_checks_none_of_the_137_fields(
    case: tuple[str, str, Callable[[Doc], object], str, str],
) -> None:
    """They are unknown to 1.36 (strict decoding names them; they never reach validation)."""
    _, base, mutate, path, _ = case
    doc = copy.deepcopy(BASES_137[base]())
    mutate(doc)
    assert [v for v in _check(doc, R136) if v.path.startswith(path)] == []


def test_the_137_fields_are_unknown_to_136_and_the_136_mapping_to_137() -> None:
    model = KINDS["ResourceSlice"]
    assert sorted(unknown_fields(model, slice_137(), release=R136)) == [
        "spec.devices[0].consumesCounters[0].compatibilityGroups",
        "spec.devices[0].nodeAllocatableResources",
        "spec.partitionTypeAttribute",
        "spec.skipNodeOperations",
    ]
    assert list(unknown_fields(model, slice_137(), release=R137)) == []
    assert list(unknown_fields(model, slice_136(), release=R136)) == []
    assert list(unknown_fields(model, slice_136(), release=R137)) == [
        "spec.devices[0].nodeAllocatableResourceMappings"
    ]
    claim = KINDS["ResourceClaim"]
    assert sorted(unknown_fields(claim, claim_137(), release=R136)) == [
        "spec.devices.requests[0].exactly.derivedAttributes",
        "spec.devices.requests[1].firstAvailable[0].derivedAttributes",
    ]
    assert list(unknown_fields(claim, claim_137())) == []  # no release: every field is known


def test_every_release_field_is_a_model_field() -> None:
    for field in FIELDS:
        assert field.name in field.model.model_fields, field
    assert unserved(ResourceSliceSpec, R136) == {"partitionTypeAttribute", "skipNodeOperations"}
    assert unserved(Device, R137) == {"nodeAllocatableResourceMappings"}


@pytest.mark.parametrize(
    ("mutate", "path", "fragment"),
    [
        (
            lambda d: d["spec"]["devices"][0]["nodeAllocatableResourceMappings"].update(
                {"example.com/x": {"allocationMultiplier": "1"}}
            ),
            "spec.devices[0].nodeAllocatableResourceMappings[example.com/x]",
            "must be a node allocatable resource name",
        ),
        (
            lambda d: d["spec"]["devices"][0]["nodeAllocatableResourceMappings"].update(memory={}),
            "spec.devices[0].nodeAllocatableResourceMappings[memory]",
            "at least one of allocationMultiplier or capacityKey",
        ),
        (
            lambda d: d["spec"]["devices"][0]["nodeAllocatableResourceMappings"]["cpu"].update(
                capacityKey="threads"
            ),
            "spec.devices[0].nodeAllocatableResourceMappings[cpu].capacityKey",
            "Not found",
        ),
        (
            lambda d: d["spec"]["devices"][0]["nodeAllocatableResourceMappings"]["cpu"].update(
                allocationMultiplier="0"
            ),
            "spec.devices[0].nodeAllocatableResourceMappings[cpu].allocationMultiplier",
            "must be positive",
        ),
    ],
)
def test_136_checks_its_node_allocatable_mappings(
    mutate: Callable[[Doc], object], path: str, fragment: str
) -> None:
    assert _check(slice_136(), R136) == []
    doc = slice_136()
    mutate(doc)
    matching = [v for v in _check(doc, R136) if v.path == path]
    assert any(fragment in v.message for v in matching), [str(v) for v in _check(doc, R136)]
    assert [v for v in _check(doc, R137) if "nodeAllocatableResourceMappings" in v.path] == []


def test_a_bare_partition_type_attribute_in_the_drivers_domain_counts() -> None:
    doc = slice_137()
    assert doc["spec"]["devices"][0]["attributes"]["profile"] == {"string": "full"}
    assert _check(doc, R137) == []
    doc["spec"]["partitionTypeAttribute"] = "other.example.com/profile"
    assert [v.path for v in _check(doc, R137)] == [
        "spec.devices[0].attributes[other.example.com/profile]"
    ]


def test_devices_consuming_no_counters_need_no_partition_type() -> None:
    doc = slice_137()
    doc["spec"]["devices"].append({"name": "plain"})
    assert _check(doc, R137) == []


def test_a_subrequest_is_constrained_through_its_parent_request() -> None:
    doc = claim_137()
    doc["spec"]["devices"]["constraints"][0]["requests"] = ["gpu", "nic/fast"]
    assert _check(doc, R137) == []
    doc["spec"]["devices"]["constraints"][0]["requests"] = ["gpu"]
    assert [v.path for v in _check(doc, R137)] == [
        "spec.devices.requests[1].firstAvailable[0].derivedAttributes[0].name"
    ]
    del doc["spec"]["devices"]["constraints"][0]["requests"]  # a constraint on every request
    assert _check(doc, R137) == []


def test_a_gate_that_is_off_drops_its_field_on_create() -> None:
    doc = slice_137()
    dropped = drop_disabled(
        ResourceSlice, doc, {**GATES_137, "DRADeviceCompatibilityGroups": False}, R137
    )
    assert dropped == ["spec.devices[0].consumesCounters[0].compatibilityGroups"]
    assert "compatibilityGroups" not in doc["spec"]["devices"][0]["consumesCounters"][0]
    assert doc["spec"]["partitionTypeAttribute"] == "gpu.example.com/profile"
    everything = slice_137()
    assert sorted(drop_disabled(ResourceSlice, everything, {}, R137)) == [
        "spec.devices[0].consumesCounters[0].compatibilityGroups",
        "spec.devices[0].nodeAllocatableResources",
        "spec.partitionTypeAttribute",
        "spec.skipNodeOperations",
    ]
    old = slice_136()
    assert drop_disabled(ResourceSlice, old, {}, R136) == [
        "spec.devices[0].nodeAllocatableResourceMappings"
    ]
    kept = slice_137()
    assert drop_disabled(ResourceSlice, kept, GATES_137, R137) == []
    assert kept == slice_137()


def test_a_pod_groups_parent_is_dropped_on_create_with_composite_pod_groups_off() -> None:
    """As 1.37's and 1.38's PodGroup strategy (dropDisabledParentCompositePodGroupNameField)."""

    def group() -> Doc:
        return {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "leaf", "namespace": "team-a"},
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": 2}},
                "schedulingConstraints": {"topology": [{"key": "example.com/rack"}]},
                "parentCompositePodGroupName": "job",
            },
        }

    gates = {"GenericWorkload": True, "TopologyAwareWorkloadScheduling": True}
    off = group()
    assert drop_disabled(PodGroup, off, gates, R137) == ["spec.parentCompositePodGroupName"]
    assert "parentCompositePodGroupName" not in off["spec"]
    assert off["spec"]["schedulingConstraints"] == {"topology": [{"key": "example.com/rack"}]}
    on = group()
    assert drop_disabled(PodGroup, on, {**gates, "CompositePodGroup": True}, R138) == []
    assert on == group()


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [(e, f) for _, e, f in BAD_DERIVED_EXPRESSIONS],
    ids=[i for i, _, _ in BAD_DERIVED_EXPRESSIONS],
)
def test_derived_attribute_expressions_compile_as_upstream(expression: str, fragment: str) -> None:
    verdict = check_derived_attribute(expression, list_types=True)
    assert verdict.error is not None
    assert fragment in str(verdict.error)


def test_a_derived_attribute_is_a_scalar_or_a_list_of_them() -> None:
    for expression in ('device.attributes["a.com"].x', "1", "true", '"s"', 'semver("1.0.0")'):
        assert check_derived_attribute(expression, list_types=False).error is None
    assert check_derived_attribute("[1, 2]", list_types=True).error is None
    refused = check_derived_attribute("[1, 2]", list_types=False).error
    assert refused is not None
    assert "not list(int)" in str(refused)
    assert check_derived_attribute("[[1]]", list_types=True).error is not None
    assert check_derived_attribute('device.attributes["a.com"].x', list_types=True).cost > 0


def test_device_taint_rules_are_read_in_v1beta2_on_136_and_v1_on_137() -> None:
    assert api_version_of("DeviceTaintRule", R136) == "resource.k8s.io/v1beta2"
    assert api_version_of("DeviceTaintRule", R137) == "resource.k8s.io/v1"
    assert api_version_of("ResourceSlice", R137) is None
    rule = DeviceTaintRule.load(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceTaintRule",
            "metadata": {"name": "r"},
            "spec": {"taint": {"key": "k", "effect": "NoExecute"}},
            "status": {
                "conditions": [
                    {
                        "type": "EvictionInProgress",
                        "status": "False",
                        "reason": "Completed",
                        "message": "0 pods to evict",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ]
            },
        }
    )
    condition = rule.status.condition("EvictionInProgress")
    assert condition is not None
    assert condition.status == "False"
    assert validate(rule, R137) == validate(rule, R136) == []
