"""Helpers on the models: typed attribute values, IDs, claim and pod conveniences."""

from __future__ import annotations

import pytest

from operators.api.core import Pod
from operators.api.ids import DeviceID, PoolID
from operators.api.meta import ObjectMeta
from operators.api.resource import (
    DeviceAttribute,
    DeviceTaintSelector,
    ResourceClaim,
    ResourceSlice,
)


@pytest.mark.parametrize(
    ("raw", "kind", "typed", "values"),
    [
        ({"int": 7}, "int", 7, [7]),
        ({"bool": False}, "bool", False, [False]),
        ({"string": "a"}, "string", "a", ["a"]),
        ({"version": "1.2.3"}, "version", "1.2.3", ["1.2.3"]),
        ({"ints": [1, 2]}, "ints", [1, 2], [1, 2]),
        ({"bools": [True]}, "bools", [True], [True]),
        ({"strings": ["x", "y"]}, "strings", ["x", "y"], ["x", "y"]),
        ({"versions": ["1.0.0"]}, "versions", ["1.0.0"], ["1.0.0"]),
        ({}, None, None, []),
    ],
)
def test_device_attribute_typed_value(
    raw: dict[str, object], kind: str | None, typed: object, values: list[object]
) -> None:
    attribute = DeviceAttribute.model_validate(raw)
    assert attribute.kind == kind
    assert attribute.typed_value() == typed
    assert attribute.values() == values
    assert attribute.is_list == (kind is not None and kind.endswith("s"))


def test_device_attribute_element_kind_and_builder() -> None:
    assert DeviceAttribute.of([1, 2]).element_kind == "int"
    assert DeviceAttribute.of(True).dump() == {"bool": True}
    assert DeviceAttribute.of("1.0.0", version=True).dump() == {"version": "1.0.0"}
    assert DeviceAttribute.of(["a"]).dump() == {"strings": ["a"]}
    assert DeviceAttribute.model_validate({"int": 1, "string": "x"}).kinds() == ["int", "string"]


def test_ids_print_and_parse() -> None:
    device = DeviceID("gpu.example.com", "node-1/sub", "gpu-0")
    assert str(device) == "gpu.example.com/node-1/sub/gpu-0"
    assert DeviceID.parse(str(device)) == device
    assert device.pool_id == PoolID("gpu.example.com", "node-1/sub")
    assert str(device.pool_id) == "gpu.example.com/node-1/sub"
    assert PoolID("d", "p").device("x") == DeviceID("d", "p", "x")
    assert len({device, DeviceID("gpu.example.com", "node-1/sub", "gpu-0")}) == 1
    with pytest.raises(ValueError, match="driver/pool/device"):
        DeviceID.parse("only/two")
    with pytest.raises(AttributeError):
        device.driver = "x"  # type: ignore[misc]


def test_object_meta_key() -> None:
    assert ObjectMeta(name="a", namespace="ns").key == "ns/a"
    assert ObjectMeta(name="a").key == "a"


def test_claim_helpers() -> None:
    claim = ResourceClaim.model_validate(
        {
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": [{"name": "a"}]}]}},
            "status": {
                "allocation": {
                    "devices": {
                        "results": [{"request": "gpu/a", "driver": "d", "pool": "p", "device": "x"}]
                    }
                },
                "reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}],
            },
        }
    )
    assert claim.key == "ns/c"
    assert claim.is_allocated
    assert claim.reserved_for_uids() == {"u1"}
    assert claim.is_reserved_for("u1")
    assert claim.allocated_device_ids() == [DeviceID("d", "p", "x")]
    assert claim.allocated_results()[0].parent_request == "gpu"
    request = claim.request("gpu/a")
    assert request is not None
    assert request.name == "gpu"
    assert not ResourceClaim().is_allocated
    assert ResourceClaim().allocated_results() == []


def test_slice_and_taint_selector_ids() -> None:
    slice_ = ResourceSlice.model_validate(
        {"spec": {"driver": "d", "pool": {"name": "p"}, "devices": [{"name": "x"}]}}
    )
    assert slice_.pool_id == PoolID("d", "p")
    assert slice_.device_ids() == [DeviceID("d", "p", "x")]
    assert DeviceTaintSelector(driver="d").matches(DeviceID("d", "p", "x"))
    assert not DeviceTaintSelector(driver="d", device="y").matches(DeviceID("d", "p", "x"))


def test_pod_claim_name_resolves_generated_claims() -> None:
    pod = Pod.model_validate(
        {
            "spec": {
                "resourceClaims": [
                    {"name": "direct", "resourceClaimName": "shared"},
                    {"name": "gen", "resourceClaimTemplateName": "t"},
                    {"name": "pending", "resourceClaimTemplateName": "t"},
                ]
            },
            "status": {"resourceClaimStatuses": [{"name": "gen", "resourceClaimName": "p-gen-x"}]},
        }
    )
    names = [pod.claim_name(c) for c in pod.spec.resource_claims]
    assert names == ["shared", "p-gen-x", None]
