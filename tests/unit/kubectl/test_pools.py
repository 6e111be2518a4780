"""``kubectl dra pools``: devices, allocation, counters, shared capacity and taints, counted as
the allocator counts them."""

from __future__ import annotations

import dataclasses
from typing import Any

from operators.allocator.features import V1_38, Features
from operators.api.core import Node
from operators.api.features import DEFAULT_VERSION
from operators.api.resource import DeviceTaintRule, ResourceClaim, ResourceSlice
from operators.kubectl import pools
from tests.unit.kubectl.objects import DRIVER, J, allocation, claim, gpus, node, resource_slice

FEATURES = Features.all()
RACK = "topology.example.com/rack"


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


# --- --by: per topology domain ------------------------------------------------------------------


def racked(name: str, rack: str | None) -> J:
    """A Node, in ``rack`` (``""``: labelled with an empty value; None: not labelled)."""
    body = node(name)
    if rack is not None:
        body["metadata"]["labels"][RACK] = rack
    return body


def racks() -> list[J]:
    """Two racks of two nodes with four GPUs each; three GPUs allocated in rack-a (two on
    node-a1, one on node-a2), none in rack-b."""
    nodes = [racked(n, r) for n, r in [("node-a1", "rack-a"), ("node-a2", "rack-a")]]
    nodes += [racked(n, r) for n, r in [("node-b1", "rack-b"), ("node-b2", "rack-b")]]
    slices = [resource_slice(n["metadata"]["name"], gpus(4)) for n in nodes]
    claims = [
        claim("pair", 2, allocation=allocation("node-a1", "gpu-0", "gpu-1")),
        claim("one", allocation=allocation("node-a2", "gpu-3")),
    ]
    return [*nodes, *slices, *claims]


def _everywhere(pool: str, devices: int) -> J:
    """A pool of every node (a fabric), local to none."""
    body = resource_slice(pool, gpus(devices), pool=pool, allNodes=True)
    del body["spec"]["nodeName"]
    return body


def _of(objects: list[J], kind: str) -> list[J]:
    return [o for o in objects if o["kind"] == kind]


def _views(objects: list[J]) -> list[pools.PoolView]:
    slices, claims = _of(objects, "ResourceSlice"), _of(objects, "ResourceClaim")
    return pools.from_objects(slices, claims, [], DEFAULT_VERSION)


def _domains(objects: list[J]) -> list[pools.DomainView]:
    return pools.domains_from_objects(_views(objects), _of(objects, "Node"), RACK)


def _counts(d: pools.DomainView) -> tuple[int, ...]:
    return (d.nodes, d.pools, d.devices, d.allocated, d.unavailable, d.available)


def test_pools_are_summed_per_rack() -> None:
    counts = {d.domain: _counts(d) for d in _domains(racks())}
    assert counts == {"rack-a": (2, 2, 8, 3, 0, 5), "rack-b": (2, 2, 8, 0, 0, 8)}


def test_the_rendered_domains_sorted_by_rack() -> None:
    objects = racks()
    objects.reverse()  # read order does not matter
    views = _views(objects)
    domains = pools.domains_from_objects(views, _of(objects, "Node"), RACK)
    assert pools.render_domains(domains, views, RACK).splitlines() == [
        "DOMAIN (topology.example.com/rack)  NODES  DEVICES  ALLOCATED  UNAVAILABLE  AVAILABLE",
        "rack-a                              2      8        3          0            5",
        "rack-b                              2      8        0          0            8",
    ]  # fmt: skip
    wide = pools.render_domains(domains, views, RACK, wide=True).splitlines()
    assert wide[0].endswith("AVAILABLE  POOLS")
    assert wide[1].endswith("5          2")
    assert pools.render_domains([], [], RACK) == "No ResourceSlices found.\n"


def test_what_is_in_no_rack_is_one_last_row_and_the_totals_add_up() -> None:
    """A node without the label, one labelled with an empty value (a labeling mistake, not a
    domain), a pool of every node and a pool of a node not read all land in <none>."""
    objects = [
        *racks(),
        racked("node-c1", None),
        racked("node-c2", ""),
        resource_slice("node-c1", gpus(2)),
        resource_slice("node-c2", gpus(1)),
        resource_slice("node-gone", gpus(1)),
        _everywhere("fabric", 3),
        claim("nic", allocation=allocation("fabric", "gpu-0")),
    ]
    domains = _domains(objects)
    assert [d.name for d in domains] == ["rack-a", "rack-b", "<none>"]
    assert domains[-1].domain is None
    # node-c1, node-c2, node-gone; their three pools and fabric's; 2 + 1 + 1 + 3 devices.
    assert _counts(domains[-1]) == (3, 4, 7, 1, 0, 6)
    views = _views(objects)
    for field in ("devices", "allocated", "unavailable", "available"):
        assert sum(getattr(d, field) for d in domains) == sum(getattr(v, field) for v in views)
    assert pools.render_domains(domains, views, RACK).splitlines()[-1].split() == [
        "<none>", "3", "7", "1", "0", "6"
    ]  # fmt: skip


def test_a_node_selector_pool_and_a_tainted_device_count_as_their_pool_view() -> None:
    """Only grouping: an unavailable device (tainted) is summed as the pool view counts it; a
    pool chosen by a node selector is in no domain, even one that selects a rack."""
    taint = {"key": "drain", "effect": "NoExecute"}
    tainted = resource_slice("node-a1", [{"name": "gpu-0", "taints": [taint]}, {"name": "gpu-1"}])
    selected = resource_slice("racked", gpus(2), pool="racked")
    del selected["spec"]["nodeName"]
    term = {"matchExpressions": [{"key": RACK, "operator": "In", "values": ["rack-a"]}]}
    selected["spec"]["nodeSelector"] = {"nodeSelectorTerms": [term]}
    slices = [ResourceSlice.load(tainted), ResourceSlice.load(selected)]
    views = pools.pool_views(slices, [], [], FEATURES)
    rack_a, none = pools.domain_views(views, [Node.load(racked("node-a1", "rack-a"))], RACK)
    assert (rack_a.domain, *_counts(rack_a)) == ("rack-a", 1, 1, 2, 0, 1, 1)
    assert (none.domain, *_counts(none)) == (None, 0, 1, 2, 0, 0, 2)


def test_json_has_the_domains_with_the_pools() -> None:
    objects = [*racks(), racked("node-c1", None)]
    views = _views(objects)
    data = pools.as_json(views, pools.domains_from_objects(views, _of(objects, "Node"), RACK))
    assert len(data["pools"]) == 4
    rack_a, rack_b, none = data["domains"]
    assert rack_a == {
        "domain": "rack-a",
        "nodes": 2,
        "pools": 2,
        "devices": 8,
        "allocated": 3,
        "unavailable": 0,
        "available": 5,
    }
    assert (rack_b["domain"], rack_b["available"]) == ("rack-b", 8)
    assert (none["domain"], none["nodes"], none["devices"]) == (None, 1, 0)
    assert "domains" not in pools.as_json(views)


def test_a_domain_keeps_its_pools_problems() -> None:
    """A sum does not say that a pool is still being published: the problems follow it."""
    body = resource_slice("node-a1", gpus(1))
    body["spec"]["pool"]["resourceSliceCount"] = 2
    views = _views([body])
    domains = pools.domains_from_objects(views, [racked("node-a1", "rack-a")], RACK)
    text = pools.render_domains(domains, views, RACK)
    assert "PROBLEMS" in text
    assert f"{DRIVER}/node-a1: " in text
