"""``kubectl dra pools``: devices, allocation, counters, shared capacity and taints, counted as
the allocator counts them."""

from __future__ import annotations

import dataclasses
from typing import Any

from operators.allocator.features import V1_38, Features
from operators.api.resource import DeviceTaintRule, ResourceClaim, ResourceSlice
from operators.kubectl import pools
from tests.unit.kubectl.objects import DRIVER, allocation, claim, gpus, resource_slice

FEATURES = Features.all()


def _half(i: int) -> dict[str, Any]:
    return {
        "name": f"gpu-0-half-{i}",
        "consumesCounters": [
            {
                "counterSet": "gpu-0-counters",
                "counters": {"memory": {"value": "20Gi"}, f"memory-slice-{i}": {"value": "1"}},
            }
        ],
    }


def _partitioned() -> list[ResourceSlice]:
    """One pool in two slices: the counter set, and two halves of a GPU and a shared NIC."""
    counters = resource_slice(
        "node-1",
        [],
        pool="node-1",
        sharedCounters=[
            {
                "name": "gpu-0-counters",
                "counters": {
                    "memory": {"value": "40Gi"},
                    "memory-slice-0": {"value": "1"},
                    "memory-slice-1": {"value": "1"},
                },
            }
        ],
    )
    nic = {
        "name": "nic-0",
        "allowMultipleAllocations": True,
        "capacity": {"bandwidth": {"value": "100G"}},
    }
    tainted = {**_half(1), "taints": [{"key": "maintenance", "effect": "NoSchedule"}]}
    devices = resource_slice("node-1", [_half(0), tainted, nic], pool="node-1")
    for s in (counters, devices):
        s["spec"]["pool"]["resourceSliceCount"] = 2
    counters["metadata"]["name"] = "node-1-counters"
    return [ResourceSlice.load(counters), ResourceSlice.load(devices)]


def _claims() -> list[ResourceClaim]:
    half = claim("half", allocation=allocation("node-1", "gpu-0-half-0"))
    shares = [
        claim(
            name,
            namespace=namespace,
            allocation=allocation(
                "node-1", "nic-0", shareID=f"share-{name}", consumedCapacity={"bandwidth": "40G"}
            ),
        )
        for name, namespace in (("ingest", "team-a"), ("sync", "team-b"))
    ]
    return [ResourceClaim.load(c) for c in (half, *shares)]


def test_counters_shared_capacity_and_taints_of_a_partitioned_pool() -> None:
    (view,) = pools.pool_views(_partitioned(), _claims(), [], FEATURES)
    assert (view.pool, view.node, view.devices, view.allocated) == (
        f"{DRIVER}/node-1",
        "node-1",
        3,
        2,
    )
    # gpu-0-half-1 is tainted NoSchedule (and its memory-slice-1 is free, but memory is not:
    # 20Gi of 40Gi are left, it needs 20Gi: it would fit but for the taint).
    assert (view.unavailable, view.available) == (1, 0)
    consumed = {(c.counter, str(c.consumed), str(c.total)) for c in view.counters}
    assert consumed == {
        ("memory", "20Gi", "40Gi"),
        ("memory-slice-0", "1", "1"),
        ("memory-slice-1", "0", "1"),
    }
    (nic,) = view.shared
    assert nic.capacity == {"bandwidth": ("80G", "100G")}
    assert nic.consumers == ("team-a/ingest", "team-b/sync")
    assert [str(t) for t in view.taints] == ["maintenance:NoSchedule"]
    assert view.problems == ()


def test_1_38_counts_shares_under_the_capacity_name_the_device_publishes() -> None:
    """1.38's allocated state keys capacity by fully qualified name; the view still shows it
    under the bare name the NIC publishes."""
    as_138 = dataclasses.replace(FEATURES, kubernetes=V1_38)
    (view,) = pools.pool_views(_partitioned(), _claims(), [], as_138)
    (nic,) = view.shared
    assert nic.capacity == {"bandwidth": ("80G", "100G")}


def test_the_rendered_pools() -> None:
    text = pools.render(pools.pool_views(_partitioned(), _claims(), [], FEATURES))
    assert text.splitlines() == [
        "DRIVER/POOL             NODE    DEVICES  ALLOCATED  AVAILABLE  TAINTED  "
        "COUNTERS (consumed/total)",
        "gpu.example.com/node-1  node-1  3        2          0          1        "
        "gpu-0-counters: memory #####..... 20Gi/40Gi  memory-slice-* 1/2",
        "",
        "SHARED DEVICES  consumable capacity: consumed/total",
        "  DEVICE                        CAPACITY                       SHARES",
        "  gpu.example.com/node-1/nic-0  bandwidth ########.. 80G/100G  team-a/ingest, team-b/sync",
        "",
        "TAINTED DEVICES",
        "  DEVICE                               TAINT",
        "  gpu.example.com/node-1/gpu-0-half-1  maintenance:NoSchedule",
    ]  # fmt: skip


def test_a_device_taint_rule_and_a_shared_device_count_once() -> None:
    """A DeviceTaintRule taints a device as its own taint does; a device two claims share is
    one allocated device."""
    plain = [ResourceSlice.load(resource_slice("node-2", gpus(2)))]
    rule = DeviceTaintRule.load(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceTaintRule",
            "metadata": {"name": "drain-gpu-1"},
            "spec": {
                "deviceSelector": {"driver": DRIVER, "pool": "node-2", "device": "gpu-1"},
                "taint": {"key": "drain", "value": "now", "effect": "NoExecute"},
            },
        }
    )
    (view,) = pools.pool_views(plain, [], [rule], FEATURES)
    assert (view.devices, view.allocated, view.unavailable, view.available) == (2, 0, 1, 1)
    assert [str(t) for t in view.taints] == ["drain=now:NoExecute (DeviceTaintRule drain-gpu-1)"]
    assert view.counters == ()


def test_an_incomplete_pool_says_so_and_counts_nothing_available() -> None:
    body = resource_slice("node-3", gpus(1))
    body["spec"]["pool"]["resourceSliceCount"] = 2
    (view,) = pools.pool_views([ResourceSlice.load(body)], [], [], FEATURES)
    assert view.problems
    assert "incomplete" in view.problems[0]
    assert "PROBLEMS" in pools.render([view])


def test_json_carries_every_part() -> None:
    data = pools.as_json(pools.pool_views(_partitioned(), _claims(), [], FEATURES))
    (pool,) = data["pools"]
    assert pool["sharedDevices"][0]["capacity"] == {
        "bandwidth": {"consumed": "80G", "total": "100G"}
    }
    assert pool["taints"] == [
        {"device": "gpu-0-half-1", "key": "maintenance", "effect": "NoSchedule"}
    ]
    assert {c["counter"] for c in pool["counters"]} == {
        "memory",
        "memory-slice-0",
        "memory-slice-1",
    }
    assert pools.render([]) == "No ResourceSlices found.\n"
