"""Prepare planning: refusals with reasons, opaque configs, CDI content, device status."""

from __future__ import annotations

from typing import Any

import pytest

from operators.api.core import Node, NodeSelector
from operators.api.resource import AllocatedDeviceStatus, ResourceClaim
from operators.api.validation import validate_resource_claim
from operators.driver.cdi import cdi_kind
from operators.driver.opaque import ConfigError, GpuConfig, NicConfig, parse_device_config
from operators.driver.prepare import PrepareError, plan_prepare
from operators.driver.profiles import DriverConfig, build_inventory, default_config

DRIVER = "example.kopf-dra.io"
UID = "6f2a4b8e-3c1d-4e5f-8a9b-0c1d2e3f4a5b"
NODE = Node.load({"metadata": {"name": "node-a", "labels": {"zone": "z1"}}})
INVENTORY = build_inventory(default_config(), "node-a")
NOW = "2026-01-02T03:04:05Z"
SHARE = "1b2c3d4e-5f60-4718-9a0b-1c2d3e4f5a6b"


def _claim(
    results: list[dict[str, Any]],
    *,
    config: list[dict[str, Any]] | None = None,
    node: str = "node-a",
    reserved: bool = True,
    requests: tuple[str, ...] = ("gpu", "nic"),
) -> ResourceClaim:
    allocation: dict[str, Any] = {
        "devices": {"results": results, "config": config or []},
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        },
    }
    status: dict[str, Any] = {"allocation": allocation}
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "u-1"}]
    return ResourceClaim.load(
        {
            "metadata": {"name": "c", "namespace": "ns", "uid": UID, "generation": 1},
            "spec": {
                "devices": {
                    "requests": [{"name": r, "exactly": {"deviceClassName": "x"}} for r in requests]
                }
            },
            "status": status,
        }
    )


def _result(request: str, device: str, pool: str = "node-a", **extra: Any) -> dict[str, Any]:
    return {"request": request, "driver": DRIVER, "pool": pool, "device": device, **extra}


def _gpu_config(strategy: str, requests: list[str], source: str = "FromClaim") -> dict[str, Any]:
    return {
        "source": source,
        "requests": requests,
        "opaque": {
            "driver": DRIVER,
            "parameters": {"kind": "GpuConfig", "sharing": {"strategy": strategy}},
        },
    }


def _plan(claim: ResourceClaim, uid: str = UID) -> Any:
    return plan_prepare(
        claim, uid=uid, driver=DRIVER, node=NODE, pool="node-a", inventory=INVENTORY, now=NOW
    )


def _reason(claim: ResourceClaim, uid: str = UID) -> str:
    with pytest.raises(PrepareError) as info:
        _plan(claim, uid)
    assert info.value.message.startswith("claim ns/c")
    return info.value.reason


def test_prepares_cdi_devices_and_status() -> None:
    claim = _claim(
        [
            _result("gpu", "gpu-0-mig-2g-10gb-2"),
            _result("nic", "nic-0", shareID=SHARE, consumedCapacity={"bandwidth": "10G"}),
            {"request": "gpu", "driver": "other.example.com", "pool": "p", "device": "d"},
        ]
    )
    prep = _plan(claim)
    record = prep.claim
    assert (record.uid, record.namespace, record.name) == (UID, "ns", "c")
    assert [(d.device, d.request_names, d.share_id) for d in record.devices] == [
        ("gpu-0-mig-2g-10gb-2", ["gpu"], None),
        ("nic-0", ["nic"], SHARE),
    ]
    assert record.devices[1].cdi_device_ids == [f"{cdi_kind(DRIVER)}={UID}-nic-0-{SHARE}"]
    spec = record.cdi_spec
    assert spec["kind"] == "example.kopf-dra.io/claim"
    nic = spec["devices"][1]
    env = dict(e.split("=", 1) for e in nic["containerEdits"]["env"])
    prefix = f"KOPF_DRA_DEVICE_NIC_0_{SHARE[:8].upper()}"
    assert env[f"{prefix}_BANDWIDTH"] == "10G"
    assert env[f"{prefix}_INTERFACE"] == "net0"
    assert env[f"{prefix}_CLAIM"] == "ns/c"
    assert env[prefix] == INVENTORY.info["nic-0"].uuid

    statuses = prep.statuses
    assert [(s.device, s.share_id) for s in statuses] == [
        ("gpu-0-mig-2g-10gb-2", None),
        ("nic-0", SHARE),
    ]
    assert statuses[0].conditions[0].last_transition_time == NOW
    assert statuses[0].data["profile"] == "2g.10gb"
    assert statuses[1].network_data is not None
    assert statuses[1].network_data.hardware_address == INVENTORY.info["nic-0"].mac_address
    # The statuses are what the API server accepts for this claim.
    claim.status.devices = statuses
    assert validate_resource_claim(claim) == []


def test_refusals_name_their_reason() -> None:
    assert _reason(_claim([_result("gpu", "gpu-1")]), uid="another-uid") == "ClaimUIDMismatch"
    unallocated = _claim([_result("gpu", "gpu-1")])
    unallocated.status.allocation = None
    assert _reason(unallocated) == "NotAllocated"
    assert _reason(_claim([_result("gpu", "gpu-1")], reserved=False)) == "NotReserved"
    assert _reason(_claim([_result("gpu", "gpu-1")], node="node-b")) == "WrongNode"
    assert _reason(_claim([_result("gpu", "gpu-1", pool="fabric")])) == "WrongPool"
    assert _reason(_claim([_result("gpu", "gpu-9")])) == "UnknownDevice"


def test_allocation_without_node_selector_is_checked_by_pool_only() -> None:
    claim = _claim([_result("gpu", "gpu-1")])
    assert claim.status.allocation is not None
    claim.status.allocation.node_selector = None
    assert [d.device for d in _plan(claim).claim.devices] == ["gpu-1"]


def test_claim_config_overrides_class_config_for_its_requests() -> None:
    claim = _claim(
        [_result("gpu", "gpu-0"), _result("nic", "nic-0")],
        config=[
            _gpu_config("TimeSlicing", ["gpu"]),
            _gpu_config("SpacePartitioning", [], source="FromClass"),
            {
                "source": "FromClaim",
                "requests": [],
                "opaque": {"driver": DRIVER, "parameters": {"kind": "NicConfig", "mtu": 9000}},
            },
            {
                "source": "FromClaim",
                "requests": [],
                "opaque": {"driver": "other", "parameters": {}},
            },
        ],
    )
    entries = _plan(claim).claim.cdi_spec["devices"]
    gpu_env = dict(e.split("=", 1) for e in entries[0]["containerEdits"]["env"])
    nic_env = dict(e.split("=", 1) for e in entries[1]["containerEdits"]["env"])
    assert gpu_env["KOPF_DRA_DEVICE_GPU_0_SHARING_STRATEGY"] == "TimeSlicing"
    assert gpu_env["KOPF_DRA_DEVICE_GPU_0_TIMESLICE_INTERVAL"] == "Default"
    assert nic_env["KOPF_DRA_DEVICE_NIC_0_MTU"] == "9000"
    assert not any("SHARING" in k for k in nic_env)


def test_bad_or_misdirected_config_is_a_claim_error() -> None:
    bad = _claim([_result("gpu", "gpu-0")], config=[_gpu_config("Sometimes", [])])
    with pytest.raises(PrepareError, match=r"FromClaim config #0: GpuConfig: sharing\.strategy"):
        _plan(bad)
    at_nic = _claim([_result("nic", "nic-0")], config=[_gpu_config("TimeSlicing", ["nic"])])
    with pytest.raises(PrepareError, match="GpuConfig cannot configure nic device nic-0"):
        _plan(at_nic)


def test_without_device_node_host_path_only_env_is_injected() -> None:
    inventory = build_inventory(
        DriverConfig.model_validate({"gpus": [{}], "deviceNodeHostPath": ""}), "node-a"
    )
    prep = plan_prepare(
        _claim([_result("gpu", "gpu-0")]),
        uid=UID,
        driver=DRIVER,
        node=NODE,
        pool="node-a",
        inventory=inventory,
        now=NOW,
    )
    assert "deviceNodes" not in prep.claim.cdi_spec["devices"][0]["containerEdits"]


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ([], "parameters must be an object"),
        ({"kind": "TpuConfig"}, "kind 'TpuConfig' is not one of GpuConfig, NicConfig"),
        ({"kind": "NicConfig", "mtu": 100}, "mtu"),
        (
            {"kind": "GpuConfig", "sharing": {"strategy": "Exclusive", "timeSlicing": {}}},
            "timeSlicing is only allowed with strategy TimeSlicing",
        ),
        ({"kind": "GpuConfig", "extra": 1}, "extra"),
    ],
)
def test_opaque_config_errors(parameters: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_device_config(parameters)


def test_opaque_config_env() -> None:
    gpu = parse_device_config(
        {
            "kind": "GpuConfig",
            "sharing": {
                "strategy": "SpacePartitioning",
                "spacePartitioning": {"partitionCount": 4},
            },
        }
    )
    assert isinstance(gpu, GpuConfig)
    assert gpu.env() == {"SHARING_STRATEGY": "SpacePartitioning", "PARTITION_COUNT": "4"}
    nic = parse_device_config({"apiVersion": "example.kopf-dra.io/v1", "kind": "NicConfig"})
    assert isinstance(nic, NicConfig)
    assert nic.env() == {"MTU": "1500"}


def _fabric(conditions: dict[str, bool]) -> ResourceClaim:
    """A claim holding a fabric GPU (another pool of our driver, with binding conditions)."""
    result = _result(
        "gpu",
        "h100-3",
        pool="fabric-h100",
        bindingConditions=["fabric.kopf-dra.io/attached"],
        bindingFailureConditions=["fabric.kopf-dra.io/attach-failed"],
    )
    claim = _claim([result])
    claim.status.devices = [
        AllocatedDeviceStatus.load(
            {
                "driver": DRIVER,
                "pool": "fabric-h100",
                "device": "h100-3",
                "conditions": [
                    {
                        "type": f"fabric.kopf-dra.io/{name}",
                        "status": "True" if value else "False",
                        "reason": "Test",
                        "message": "",
                        "lastTransitionTime": NOW,
                    }
                    for name, value in conditions.items()
                ],
            }
        )
    ]
    return claim


def test_a_fabric_device_attached_to_this_node_is_prepared() -> None:
    prep = _plan(_fabric({"attached": True, "attach-failed": False}))
    [device] = prep.claim.devices
    assert (device.pool, device.device) == ("fabric-h100", "h100-3")
    assert len(prep.claim.cdi_spec["devices"]) == 1
    assert [(s.pool, s.device) for s in prep.statuses] == [("fabric-h100", "h100-3")]


def test_a_fabric_device_not_attached_is_refused() -> None:
    assert _reason(_fabric({})) == "NotAttached"
    assert _reason(_fabric({"attached": False})) == "NotAttached"
    assert _reason(_fabric({"attached": True, "attach-failed": True})) == "NotAttached"


def _linked(
    node_selector: dict[str, Any] | None, config: list[dict[str, Any]] | None = None
) -> ResourceClaim:
    """A claim holding an interconnect: a device of a pool of ours for several nodes."""
    claim = _claim(
        [_result("link", "rack-a-nvlink", pool="nvlink-rack-a")], config=config, requests=("link",)
    )
    assert claim.status.allocation is not None
    claim.status.allocation.node_selector = (
        None if node_selector is None else NodeSelector.load(node_selector)
    )
    return claim


def test_a_multi_host_device_reaching_this_node_is_prepared_without_a_status() -> None:
    rack = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}
        ]
    }
    prep = _plan(_linked(rack))
    [device] = prep.claim.devices
    assert (device.pool, device.device) == ("nvlink-rack-a", "rack-a-nvlink")
    env = dict(e.split("=", 1) for e in prep.claim.cdi_spec["devices"][0]["containerEdits"]["env"])
    assert env["KOPF_DRA_DEVICE_RACK_A_NVLINK_TYPE"] == "interconnect"
    # The same identity on every node it reaches; its status is no one node's to write.
    other = Node.load({"metadata": {"name": "node-b", "labels": {"zone": "z1"}}})
    elsewhere = plan_prepare(
        _linked(rack), uid=UID, driver=DRIVER, node=other, pool="node-b", inventory=INVENTORY,
        now=NOW,
    )  # fmt: skip
    env_b = dict(
        e.split("=", 1) for e in elsewhere.claim.cdi_spec["devices"][0]["containerEdits"]["env"]
    )
    assert env_b["KOPF_DRA_DEVICE_RACK_A_NVLINK"] == env["KOPF_DRA_DEVICE_RACK_A_NVLINK"]
    assert prep.statuses == []


def test_a_device_of_another_pool_pinned_here_or_for_every_node_is_refused() -> None:
    # Pinned to this node by name: a node-local device, of a pool that is not this node's.
    assert _reason(_claim([_result("gpu", "gpu-1", pool="fabric")])) == "WrongPool"
    assert _reason(_linked(None)) == "WrongPool"


def test_a_config_never_applies_to_an_interconnect() -> None:
    rack = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]}
    nic = {"kind": "NicConfig"}
    config = [
        {
            "source": "FromClaim",
            "requests": ["link"],
            "opaque": {"driver": DRIVER, "parameters": nic},
        }
    ]
    assert _reason(_linked(rack, config)) == ConfigError.reason
