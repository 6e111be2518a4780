"""The demo's live view is a pure function of a snapshot; example selection."""

from __future__ import annotations

import dataclasses
import io
from typing import Any

import pytest

from operators.demo.bringup import DRIVER
from operators.demo.command import selected_examples
from operators.demo.supervision import DemoError
from operators.demo.view import (
    Snapshot,
    container_view,
    human,
    is_settled,
    output_width,
    pools_reported,
    render_view,
)


def _pod(name: str, ns: str, node: str | None, claim: str, message: str = "") -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Pending"}
    if message:
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
            }
        ]
    return {
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "schedulerName": "kopf-dra",
            **({"nodeName": node} if node else {}),
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
        },
        "status": status,
    }


def _claim(name: str, ns: str, *results: dict[str, Any]) -> dict[str, Any]:
    status = {"allocation": {"devices": {"results": list(results)}}} if results else {}
    return {"metadata": {"name": name, "namespace": ns}, "status": status}


def _result(device: str, pool: str = "node-1", **extra: Any) -> dict[str, Any]:
    return {"request": "gpu", "driver": DRIVER, "pool": pool, "device": device, **extra}


SNAPSHOT = Snapshot(
    pods=[
        _pod("a", "ns", "node-1", "ca"),
        _pod("b", "ns", None, "cb", "0/2 nodes are available: no T4 left\nmore detail"),
        _pod("c", "ns2", "node-1", "cc"),
    ],
    claims=[
        _claim("ca", "ns", _result("gpu-0-mig-1g-5gb-0")),
        _claim("cb", "ns"),
        _claim("cc", "ns2", _result("nic-0", consumedCapacity={"bandwidth": "58593750Ki"})),
    ],
    pool_statuses=[
        {
            "spec": {"driver": DRIVER, "pool": "node-1"},
            "status": {
                "devices": {"total": 28, "allocated": 2},
                "counterSets": [
                    {
                        "name": "gpu-0-counters",
                        "counters": [
                            {"name": "memory", "consumed": "4864Mi", "total": "40Gi"},
                            {"name": "multiprocessors", "consumed": "14", "total": "98"},
                            {"name": "memory-slice-0", "consumed": "1", "total": "1"},
                            {"name": "memory-slice-1", "consumed": "0", "total": "1"},
                        ],
                    }
                ],
            },
        }
    ],
    slices=[
        {
            "spec": {
                "driver": DRIVER,
                "pool": {"name": "node-1"},
                "devices": [
                    {
                        "name": "nic-0",
                        "allowMultipleAllocations": True,
                        "capacity": {"bandwidth": {"value": "100G"}},
                    }
                ],
            }
        }
    ],
)


def test_the_view_shows_bound_pods_with_devices_pools_and_pending_reasons() -> None:
    view = render_view(SNAPSHOT, header="HEADER")
    lines = view.splitlines()
    assert lines[0] == "HEADER"
    assert "PODS  2 bound, 1 pending" in view
    (row,) = [line for line in lines if line.strip().startswith("ns/a ")]
    assert "node-1" in row
    assert "node-1/gpu-0-mig-1g-5gb-0" in row
    (nic_row,) = [line for line in lines if line.strip().startswith("ns2/c ")]
    assert "node-1/nic-0 (bandwidth 60G)" in nic_row
    (pool,) = [line for line in lines if "gpu-0-counters" in line]
    assert "2/28 used" in pool
    assert "4.8Gi/40Gi" in pool
    assert "14/98" in pool
    assert "slices 1/2" in pool
    (shared,) = [line for line in lines if line.strip().startswith("node-1/nic-0 ")]
    assert "60G/100G" in shared
    assert "ns2" in shared
    assert "  ns/b: 0/2 nodes are available: no T4 left" in lines
    assert "more detail" not in view


def test_the_view_is_a_function_of_the_snapshot() -> None:
    assert render_view(SNAPSHOT) == render_view(SNAPSHOT)


def test_settled_means_bound_or_explained() -> None:
    bound, explained, fresh = SNAPSHOT.pods[0], SNAPSHOT.pods[1], _pod("d", "ns", None, "x")
    assert is_settled(bound)
    assert is_settled(explained)
    assert not is_settled(fresh)


@pytest.mark.parametrize(
    ("quantity", "like", "shown"),
    [
        ("58593750Ki", "100G", "60G"),
        ("4864Mi", "40Gi", "4.8Gi"),
        ("84", "98", "84"),
        ("0", "100G", "0G"),
    ],
)
def test_quantities_are_shown_in_the_unit_of_their_total(
    quantity: str, like: str, shown: str
) -> None:
    assert human(quantity, like) == shown


def test_examples_are_selected_by_name_and_fabric_ones_need_the_fabric() -> None:
    assert "fabric-gpu" not in selected_examples("all", fabric=False)
    assert "fabric-gpu" in selected_examples("all", fabric=True)
    assert selected_examples("none", fabric=True) == []
    assert selected_examples("mig-partitions", fabric=False) == ["mig-partitions"]
    with pytest.raises(DemoError, match="fabric-gpu"):
        selected_examples("fabric-gpu", fabric=False)


def test_alpha_examples_need_their_gate_and_numa_alignment_is_run_alone() -> None:
    assert "derived-attributes" not in selected_examples("all", fabric=True)
    on = {"DRADerivedAttributes": True}
    assert "derived-attributes" in selected_examples("all", fabric=True, gates=on)
    with pytest.raises(DemoError, match="node-allocatable"):
        selected_examples("node-allocatable", fabric=True, gates=on)
    assert "numa-alignment" not in selected_examples("all", fabric=True)
    assert selected_examples("numa-alignment", fabric=True) == ["numa-alignment"]


def test_pools_are_reported_once_every_pool_with_slices_has_a_status() -> None:
    assert pools_reported(SNAPSHOT)
    assert not pools_reported(dataclasses.replace(SNAPSHOT, pool_statuses=[]))


def test_output_that_is_not_a_terminal_keeps_whole_reasons() -> None:
    """``demo --once > file`` (CI logs, bug reports) must not cut a pod's reason at 80 columns."""
    long_reason = "0/2 nodes are available: " + "cannot allocate all claims; " * 10
    pod = _pod("long", "ns", None, "x", long_reason)
    snapshot = dataclasses.replace(SNAPSHOT, pods=[pod])
    width = output_width(io.StringIO())
    assert f"  ns/long: {long_reason}" in render_view(snapshot, width=width)
    assert long_reason not in render_view(snapshot, width=80)


def test_container_view_sums_up_what_the_example_pods_print() -> None:
    log = (
        "KOPF_DRA_DEVICE_GPU_0_MIG_1G_5GB_5=MIG-f23b\n"
        "KOPF_DRA_DEVICE_GPU_0_MIG_1G_5GB_5_MODEL=A100-SXM4-40GB\n"
        "KOPF_DRA_DEVICE_GPU_0_MIG_1G_5GB_5_PROFILE=1g.5gb\n"
        "KOPF_DRA_DEVICE_NIC_0_F1837A12_BANDWIDTH=58593750Ki\n"
        "total 0\n"
        "crw-rw-rw-    1 0        0           1,   3 Nov 26 13:36 gpu-0-mig-1g-5gb-5\n"
    )
    assert container_view(log) == (
        "gpu_0_mig_1g_5gb_5 model=A100-SXM4-40GB profile=1g.5gb; nic_0_f1837a12 bandwidth=60G; "
        "/dev/kopf-dra/gpu-0-mig-1g-5gb-5"
    )
    assert container_view("hello\n") == "(no device variables)"


def test_the_view_shows_the_newest_answered_pool_status_request_beside_the_pools() -> None:
    def request(name: str, created: str, available: int) -> dict[str, Any]:
        pool = {
            "driver": DRIVER,
            "poolName": "node-1",
            "generation": 1,
            "totalDevices": 28,
            "allocatedDevices": 2,
            "unavailableDevices": 26 - available,
            "availableDevices": available,
        }
        return {
            "metadata": {"name": name, "creationTimestamp": created},
            "status": {
                "poolCount": 1,
                "pools": [pool],
                "conditions": [{"type": "Complete", "message": "Calculated status for 1 pools"}],
            },
        }

    unanswered = {"metadata": {"name": "later", "creationTimestamp": "2026-01-01T00:09:00Z"}}
    snap = dataclasses.replace(
        SNAPSHOT,
        requests=[
            request("old", "2026-01-01T00:00:00Z", 9),
            request("new", "2026-01-01T00:05:00Z", 7),
            unanswered,
        ],
    )
    lines = render_view(snap).splitlines()
    assert "REQUESTED  ResourcePoolStatusRequest new: Calculated status for 1 pools" in lines
    (row,) = [line for line in lines if line.strip().startswith(f"{DRIVER}/node-1  28")]
    assert row.split() == [f"{DRIVER}/node-1", "28", "2", "19", "7"]
    assert "REQUESTED" not in render_view(SNAPSHOT)


def test_a_pod_s_special_claim_for_extended_resources_lists_its_devices() -> None:
    """KEP-5004: a pod asking ``example.kopf-dra.io/gpu: 1`` has no resourceClaims entry;
    its devices come from the claim ``status.extendedResourceClaimStatus`` names."""
    pod = _pod("x", "ns", "node-1", "unused")
    pod["spec"]["resourceClaims"] = []
    pod["status"]["extendedResourceClaimStatus"] = {
        "resourceClaimName": "x-extended-resources-k7b2q",
        "requestMappings": [
            {
                "containerName": "c",
                "resourceName": "example.kopf-dra.io/gpu",
                "requestName": "container-0-request-0",
            }
        ],
    }
    special = _claim("x-extended-resources-k7b2q", "ns", _result("gpu-3"))
    snap = dataclasses.replace(SNAPSHOT, pods=[pod], claims=[special])
    (row,) = [line for line in render_view(snap).splitlines() if line.strip().startswith("ns/x ")]
    assert "node-1/gpu-3" in row


def test_the_view_shows_pod_groups_their_bound_pods_and_shared_claims() -> None:
    members = [_pod(f"t-{i}", "gang", "node-1" if i < 2 else None, f"t-{i}-gpu") for i in range(3)]
    for pod in members:
        pod["spec"]["schedulingGroup"] = {"podGroupName": "training"}
    group = {
        "metadata": {"name": "training", "namespace": "gang"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
        "status": {
            "resourceClaimStatuses": [
                {"name": "interconnect", "resourceClaimName": "training-link"}
            ],
            "conditions": [
                {"type": "PodGroupInitiallyScheduled", "status": "False", "reason": "Unschedulable"}
            ],
        },
    }
    snap = Snapshot(
        pods=members,
        claims=[_claim("training-link", "gang", _result("rack-a-nvlink", pool="rack-a"))],
        pool_statuses=[],
        slices=[],
        groups=[group, {"metadata": {"name": "solo", "namespace": "gang"}, "spec": {}}],
    )
    lines = render_view(snap).splitlines()
    assert "POD GROUPS  2" in lines
    (row,) = [line for line in lines if line.strip().startswith("gang/training ")]
    assert row.split()[1:5] == ["gang,", "minCount", "3", "2/3"], row
    assert "interconnect: rack-a/rack-a-nvlink" in row, row
    assert row.rstrip().endswith("False Unschedulable"), row
    (solo,) = [line for line in lines if line.strip().startswith("gang/solo ")]
    assert solo.split()[1:3] == ["basic", "0/0"], solo
    assert "POD GROUPS" not in render_view(SNAPSHOT)
