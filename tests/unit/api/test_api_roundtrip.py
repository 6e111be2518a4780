"""Every fixture document survives parse -> dump unchanged; unknown fields are kept."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.api.base import KubeModel
from operators.api.core import Event, Node, Pod, PodSpec
from operators.api.quantity import Quantity
from operators.api.resource import (
    KINDS,
    DeviceAttribute,
    ResourceClaim,
    ResourceClaimConsumerReference,
    ResourceSlice,
)

FIXTURES = Path(__file__).parents[2] / "fixtures"
MODELS: dict[str, type[KubeModel]] = {**KINDS, "Pod": Pod, "Node": Node, "Event": Event}


def _documents() -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for path in sorted(FIXTURES.glob("*.yaml")):
        for i, doc in enumerate(yaml.safe_load_all(path.read_text())):
            docs.append((f"{path.name}#{i}:{doc['kind']}/{doc['metadata']['name']}", doc))
    return docs


DOCUMENTS = _documents()


def test_fixtures_exist_for_every_kind() -> None:
    kinds = {doc["kind"] for _, doc in DOCUMENTS}
    assert set(MODELS) <= kinds
    assert len(DOCUMENTS) >= 40


@pytest.mark.parametrize(("name", "doc"), DOCUMENTS, ids=[n for n, _ in DOCUMENTS])
def test_fixture_round_trips_exactly(name: str, doc: dict[str, Any]) -> None:
    model = MODELS.get(doc["kind"], KubeModel)
    original = copy.deepcopy(doc)
    assert model.model_validate(doc).dump() == original
    assert doc == original, "parsing must not mutate its input"


def test_deployment_pod_template_round_trips_through_pod_spec() -> None:
    [doc] = [d for _, d in DOCUMENTS if d["kind"] == "Deployment"]
    template_spec = doc["spec"]["template"]["spec"]
    spec = PodSpec.model_validate(template_spec)
    assert spec.dump() == template_spec
    assert spec.resource_claims[0].resource_claim_name == "tpu-consumer-resource-claim"
    assert spec.affinity is not None
    assert spec.affinity.pod_anti_affinity is not None


def _claim_doc() -> dict[str, Any]:
    [doc] = [d for n, d in DOCUMENTS if "two-shares-of-eth1" in n]
    return copy.deepcopy(doc)


def test_unknown_fields_are_kept_at_every_level() -> None:
    doc = _claim_doc()
    doc["futureTopLevel"] = {"a": [1, 2]}
    doc["metadata"]["futureMeta"] = "x"
    doc["spec"]["devices"]["requests"][0]["exactly"]["futureRequestField"] = True
    doc["spec"]["devices"]["requests"][0]["futureUnion"] = {"k": "v"}
    results = doc["status"]["allocation"]["devices"]["results"]
    results[0]["skipNodeOperations"] = ["NodePrepareResources"]
    doc["status"]["devices"][0]["conditions"][0]["futureConditionField"] = 1
    claim = ResourceClaim.model_validate(doc)
    assert claim.dump() == doc
    assert claim.model_extra == {"futureTopLevel": {"a": [1, 2]}}


def test_unknown_fields_in_slices_are_kept() -> None:
    [doc] = [copy.deepcopy(d) for n, d in DOCUMENTS if "node-1-nics" in n]
    device = doc["spec"]["devices"][0]
    device["nodeAllocatableResources"] = {"cpu": {"mapping": {"deviceMultiplier": "8"}}}
    device["attributes"]["name"]["futureType"] = "x"
    device["capacity"]["bandwidth"]["requestPolicy"]["validRange"]["futureBound"] = "1"
    doc["spec"]["partitionTypeAttribute"] = "example.com/profile"
    assert ResourceSlice.model_validate(doc).dump() == doc


def test_quantities_keep_their_spelling_on_the_wire() -> None:
    [doc] = [copy.deepcopy(d) for n, d in DOCUMENTS if "gpu-node-b-gpus" in n]
    slice_ = ResourceSlice.model_validate(doc)
    power = slice_.spec.devices[0].capacity["power"]
    assert power.value == Quantity("700")
    assert slice_.dump()["spec"]["devices"][0]["capacity"]["power"]["value"] == 700
    doc["spec"]["devices"][0]["capacity"]["memory"]["value"] = "81920Mi"
    dumped = ResourceSlice.model_validate(doc).dump()
    assert dumped["spec"]["devices"][0]["capacity"]["memory"]["value"] == "81920Mi"


def test_in_place_changes_of_defaulted_fields_are_dumped() -> None:
    claim = ResourceClaim()
    assert claim.dump() == {}
    claim.metadata.name = "c"
    claim.metadata.labels["app"] = "x"
    claim.status.reserved_for.append(ResourceClaimConsumerReference(resource="pods", uid="u"))
    assert claim.dump() == {
        "metadata": {"name": "c", "labels": {"app": "x"}},
        "status": {"reservedFor": [{"resource": "pods", "uid": "u"}]},
    }


def test_explicitly_empty_collections_round_trip() -> None:
    doc: dict[str, Any] = {"spec": {"devices": {"requests": [], "constraints": [], "config": []}}}
    assert ResourceClaim.model_validate(doc).dump() == doc


def test_python_names_and_aliases_both_populate() -> None:
    by_alias = DeviceAttribute.model_validate({"int": 3})
    by_name = DeviceAttribute(int_=3)
    assert by_alias == by_name
    assert by_name.dump() == {"int": 3}
    assert DeviceAttribute(bool_=False).dump() == {"bool": False}


def test_a_null_list_or_map_reads_as_an_empty_one_as_go_reads_it() -> None:
    """The API server writes a nil slice as null where the Go field has no omitempty (a
    device status's ``conditions``); a claim like that must not stop a controller's feed."""
    claim = ResourceClaim.load(
        {
            "metadata": {"name": "c", "namespace": "ns", "finalizers": None, "labels": None},
            "status": {
                "reservedFor": None,
                "devices": [{"driver": "d", "pool": "p", "device": "x", "conditions": None}],
            },
        }
    )
    assert claim.status.devices[0].conditions == []
    assert (claim.metadata.finalizers, claim.metadata.labels) == ([], {})
    assert claim.status.reserved_for == []
    assert claim.dump()["status"] == {"devices": [{"driver": "d", "pool": "p", "device": "x"}]}
    # A null scalar stays what it says.
    assert ResourceClaim.load({"metadata": {"name": None}}).metadata.name is None
