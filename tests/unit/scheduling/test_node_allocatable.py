"""DRANodeAllocatableResources (KEP-5517, 1.37): devices that take the node's cpu, memory, ...

Against kube-scheduler 1.37.2's nodeallocatabledynamicresources.go (gate on) and
component-helpers' resource helpers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import pytest

from operators.api.core import Pod
from operators.api.features import KubernetesVersion, resolve
from operators.api.resource import AllocationResult, ResourceClaim, ResourceSlice
from operators.controllers.scheduler import planning
from operators.runtime.actions import NO_PRECONDITION, Patch
from operators.scheduling.cycle import run_cycle, unschedulable_message
from operators.scheduling.extended import IN_MEMORY_NAME
from operators.scheduling.node_allocatable import (
    NodeAllocatableError,
    NodeAllocatableInput,
    check,
    claim_statuses,
    dump_statuses,
    has_mapped_device,
    insufficient,
    named,
    pod_level_refusal,
    sharing_refusal,
    slices_for_node,
)
from operators.scheduling.nodes import NodeUsage, bound_requests, pod_requests
from operators.scheduling.profile import Policies, Profile
from tests.unit.allocator.builders import claim, device_class, request
from tests.unit.scheduling.builders import NS, POD_UID, allocator, in_namespace, node, pod

J = dict[str, Any]
DRIVER = "cpu.example.com"
POOL = "node-1"


def cpu_slice(*devices: J, node_name: str = "node-1", pool: str = POOL) -> ResourceSlice:
    return ResourceSlice.load(
        {
            "metadata": {"name": f"slice-{node_name}"},
            "spec": {
                "driver": DRIVER,
                "pool": {"name": pool, "resourceSliceCount": 1, "generation": 1},
                "nodeName": node_name,
                "devices": list(devices),
            },
        }
    )


def dev(name: str, resources: Mapping[str, J] | None = None, **extra: Any) -> J:
    out: J = {"name": name, **extra}
    if resources is not None:
        out["nodeAllocatableResources"] = dict(resources)
    return out


def result(name: str, consumed: Mapping[str, str] | None = None, request_: str = "r") -> J:
    out: J = {"request": request_, "driver": DRIVER, "pool": POOL, "device": name}
    if consumed:
        out["consumedCapacity"] = dict(consumed)
    return out


def allocation(*results: J) -> AllocationResult:
    return AllocationResult.load({"devices": {"results": list(results)}})


def allocated_claim(
    name: str, *results: J, reserved_for: Sequence[str] = (), uid: str = "claim-uid"
) -> ResourceClaim:
    return in_namespace(
        claim(name, request("r", "cpu")),
        uid=uid,
        allocation={"devices": {"results": list(results)}},
        reserved_for=reserved_for,
    )


def claim_pod(
    *claims: str,
    containers: Sequence[J] = (),
    init_containers: Sequence[J] = (),
    resources: J | None = None,
    uid: str = POD_UID,
) -> Pod:
    """A pod whose entry ``e-<claim>`` names the claim ``<claim>``."""
    entries = [{"name": f"e-{c}", "resourceClaimName": c} for c in claims]
    spec: J = {
        "schedulerName": "kopf-dra",
        "resourceClaims": entries,
        "containers": list(containers) or [{"name": "c"}],
    }
    if init_containers:
        spec["initContainers"] = list(init_containers)
    if resources is not None:
        spec["resources"] = resources
    return Pod.load(
        {"metadata": {"name": "p", "namespace": NS, "uid": uid}, "spec": spec, "status": {}}
    )


def ctr(name: str, *claims: str, requests: J | None = None, limits: J | None = None) -> J:
    resources: J = {"claims": [{"name": f"e-{c}"} for c in claims]}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": name, "resources": resources}


# --- one claim's share ---------------------------------------------------------------------


def test_device_multiplier_counts_per_device() -> None:
    s = cpu_slice(
        *(dev(f"core-{i}", {"cpu": {"mapping": {"deviceMultiplier": "2"}}}) for i in (0, 1))
    )
    c = allocated_claim("cpus", result("core-0"), result("core-1"))
    p = claim_pod("cpus", containers=[ctr("c", "cpus")])
    (status,) = claim_statuses(p, [(c, c.status.allocation)], [s], node())  # type: ignore[list-item]
    assert dump_statuses((status,)) == [
        {
            "resourceClaimName": "cpus",
            "containers": ["c"],
            "mapping": [{"name": "cpu", "quantity": "4"}],
        }
    ]


def test_capacity_key_times_multiplier() -> None:
    mapping = {"capacityKey": "cpu.example.com/cores", "capacityMultiplier": "2"}
    s = cpu_slice(
        dev(
            "ccx", {"cpu": {"mapping": mapping}}, capacity={"cpu.example.com/cores": {"value": "8"}}
        )
    )
    c = allocated_claim("cpus", result("ccx", {"cpu.example.com/cores": "3"}))
    (status,) = claim_statuses(claim_pod("cpus"), [(c, c.status.allocation)], [s], node())  # type: ignore[list-item]
    assert [(m.name, str(m.quantity)) for m in status.mapping] == [("cpu", "6")]
    assert status.containers == []


def test_capacity_multiplier_unset_counts_once() -> None:
    """The API says capacityMultiplier must be set with capacityKey; 1.37.2's code takes 1."""
    s = cpu_slice(dev("mem", {"memory": {"mapping": {"capacityKey": "m"}}}))
    c = allocated_claim("mem", result("mem", {"m": "4Gi"}))
    (status,) = claim_statuses(claim_pod("mem"), [(c, c.status.allocation)], [s], node())  # type: ignore[list-item]
    assert [(m.name, str(m.quantity)) for m in status.mapping] == [("memory", "4Gi")]


def test_capacity_key_not_consumed_takes_nothing() -> None:
    s = cpu_slice(dev("d", {"cpu": {"mapping": {"capacityKey": "a", "capacityMultiplier": "1"}}}))
    c = allocated_claim("x", result("d", {"b": "1"}))
    assert claim_statuses(claim_pod("x"), [(c, c.status.allocation)], [s], node()) == ()  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("key", "consumed", "v137", "v138"),
    [
        ("cpu.example.com/cores", {"cores": "3"}, None, "3"),  # the driver's domain left out
        ("cores", {"cpu.example.com/cores": "3"}, None, "3"),  # a bare key, qualified there
        ("cores", {"cpu.example.com/cores": "3", "cores": "5"}, "5", "3"),  # qualified first
        ("other.example.com/cores", {"cores": "3"}, None, None),  # another domain: no match
    ],
)
def test_1_38_looks_a_capacity_key_up_by_its_qualified_name(
    key: str, consumed: dict[str, str], v137: str | None, v138: str | None
) -> None:
    s = cpu_slice(dev("d", {"cpu": {"mapping": {"capacityKey": key, "capacityMultiplier": "1"}}}))
    c = allocated_claim("x", result("d", consumed))
    for qualified, expected in ((False, v137), (True, v138)):
        statuses = claim_statuses(
            claim_pod("x"),
            [(c, c.status.allocation)],  # type: ignore[list-item]
            [s],
            node(),
            qualified,
        )
        assert [str(m.quantity) for st in statuses for m in st.mapping] == (
            [expected] if expected else []
        ), (qualified, key)


def test_1_38_refuses_a_negative_consumed_capacity_or_footprint() -> None:
    s = cpu_slice(dev("d", {"cpu": {"mapping": {"capacityKey": "a", "capacityMultiplier": "1"}}}))
    c = allocated_claim("x", result("d", {"a": "-1"}))
    allocations = [(c, c.status.allocation)]
    negative = claim_statuses(claim_pod("x"), allocations, [s], node())  # type: ignore[arg-type]
    assert [str(m.quantity) for st in negative for m in st.mapping] == ["-1"], "1.37 adds it"
    with pytest.raises(NodeAllocatableError) as e:
        claim_statuses(claim_pod("x"), allocations, [s], node(), qualified=True)  # type: ignore[arg-type]
    assert str(e.value) == (
        "claim ns/x, device d: ConsumedCapacity for capacity key 'a' must not be negative, got -1"
    )
    scaled = {"capacityKey": "a", "capacityMultiplier": "-2"}
    s = cpu_slice(dev("d", {"cpu": {"mapping": scaled}}))
    c = allocated_claim("x", result("d", {"a": "1"}))
    with pytest.raises(NodeAllocatableError) as e:
        claim_statuses(claim_pod("x"), [(c, c.status.allocation)], [s], node(), qualified=True)  # type: ignore[list-item]
    assert str(e.value) == (
        "claim ns/x, device d: computed node-allocatable footprint for resource cpu must not "
        "be negative, got -2"
    )


def test_capacity_key_without_consumed_capacity_is_an_error() -> None:
    s = cpu_slice(dev("d", {"cpu": {"mapping": {"capacityKey": "a", "capacityMultiplier": "1"}}}))
    c = allocated_claim("x", result("d"))
    with pytest.raises(NodeAllocatableError) as e:
        claim_statuses(claim_pod("x"), [(c, c.status.allocation)], [s], node())  # type: ignore[list-item]
    assert str(e.value) == (
        "claim ns/x, device d: ConsumedCapacity is nil, but Capacity key 'a' is set in "
        "NodeAllocatableResources for resource cpu"
    )


def test_overhead_per_pod_and_per_container() -> None:
    overhead = {"overhead": {"perPod": "1Gi", "perContainer": "256Mi"}}
    s = cpu_slice(dev("gpu-0", {"memory": overhead}), dev("gpu-1", {"memory": overhead}))
    c = allocated_claim("gpus", result("gpu-0"), result("gpu-1"))
    p = claim_pod(
        "gpus",
        init_containers=[ctr("init", "gpus")],
        containers=[ctr("a", "gpus", requests={"memory": "1Gi"}), ctr("b", "gpus"), ctr("c")],
    )
    statuses = claim_statuses(p, [(c, c.status.allocation)], [s], node())  # type: ignore[list-item]
    # Each device's overhead counts; the containers that reference it, init ones first.
    assert dump_statuses(statuses) == [
        {
            "resourceClaimName": "gpus",
            "containers": ["init", "a", "b"],
            "overhead": [{"name": "memory", "perPod": "2Gi", "perContainer": "512Mi"}],
        }
    ]
    # component-helpers: perPod + perContainer x references, on top of the containers' sum.
    gi = Decimal(2**30)
    assert pod_requests(p, statuses)["memory"] == gi + 2 * gi + 3 * (gi / 2)
    assert pod_requests(p)["memory"] == gi


def test_pod_level_requests_replace_the_sum_with_claims() -> None:
    s = cpu_slice(dev("core", {"cpu": {"mapping": {"deviceMultiplier": "2"}}}))
    c = allocated_claim("cpus", result("core"))
    p = claim_pod(
        "cpus",
        containers=[ctr("c", "cpus", requests={"cpu": "1"})],
        resources={"requests": {"cpu": "4"}},
    )
    statuses = claim_statuses(p, [(c, c.status.allocation)], [s], node())  # type: ignore[list-item]
    assert pod_requests(p, statuses)["cpu"] == 4


def test_statuses_sorted_by_claim_name() -> None:
    s = cpu_slice(
        dev("a", {"cpu": {"mapping": {"deviceMultiplier": "1"}}}),
        dev("b", {"memory": {"overhead": {"perPod": "1Mi"}}}),
        dev("c"),
    )
    cb = allocated_claim("zeta", result("a"))
    ca = allocated_claim("alpha", result("b"))
    cc = allocated_claim("plain", result("c"))
    pairs = [(c, c.status.allocation) for c in (cb, ca, cc)]
    statuses = claim_statuses(claim_pod("zeta", "alpha", "plain"), pairs, [s], node())  # type: ignore[arg-type]
    assert [s.resource_claim_name for s in statuses] == ["alpha", "zeta"]


# --- which claims share -------------------------------------------------------------------


def test_mapped_device_is_not_shared_overhead_is() -> None:
    s = cpu_slice(
        dev("core", {"cpu": {"mapping": {"deviceMultiplier": "1"}}}),
        dev("gpu", {"memory": {"overhead": {"perPod": "1Gi"}}}),
    )
    assert has_mapped_device(allocation(result("core")), [s])
    assert not has_mapped_device(allocation(result("gpu")), [s])
    assert not has_mapped_device(allocation(result("missing")), [s])
    p = claim_pod("cpus")
    other = allocated_claim("cpus", result("core"), reserved_for=["other"])
    mine = allocated_claim("cpus", result("core"), reserved_for=[POD_UID])
    assert sharing_refusal(p, other, False) == (
        "node allocatable resource claim cpus has a mapped device and cannot be shared across pods"
    )
    assert sharing_refusal(p, mine, False) is None


# --- Filter ----------------------------------------------------------------------------------


def test_insufficient_in_node_resources_fit_words() -> None:
    n = node(allocatable={"cpu": "4", "memory": "8Gi"})
    used = NodeUsage({"cpu": Decimal(3)}, 1)
    refusal = insufficient(n, {"cpu": Decimal(2), "memory": Decimal(1)}, used)
    assert refusal is not None
    assert refusal.message == "Insufficient cpu"
    assert not refusal.unresolvable  # evicting the other pod would make room
    refusal = insufficient(n, {"cpu": Decimal(5), "memory": Decimal(9 * 2**30)}, NodeUsage())
    assert refusal is not None
    assert refusal.message == "Insufficient cpu, Insufficient memory"
    assert refusal.unresolvable
    assert insufficient(n, {"cpu": Decimal(1), "nvidia.com/gpu": Decimal(9)}, used) is None


def test_check_counts_the_whole_pod_against_the_node() -> None:
    s = cpu_slice(dev("core", {"cpu": {"mapping": {"deviceMultiplier": "2"}}}))
    c = allocated_claim("cpus", result("core"))
    p = claim_pod("cpus", containers=[ctr("c", "cpus", requests={"cpu": "1"})])
    n = node(allocatable={"cpu": "4"})
    pairs = [(c, c.status.allocation)]
    fits = check(p, pairs, n, NodeUsage({"cpu": Decimal(1)}, 1), [s])  # type: ignore[arg-type]
    assert fits.refusal is None
    assert [x.resource_claim_name for x in fits.statuses] == ["cpus"]
    full = check(p, pairs, n, NodeUsage({"cpu": Decimal(2)}, 1), [s])  # type: ignore[arg-type]
    assert full.refusal is not None
    assert full.refusal.message == "Insufficient cpu"


def test_check_ignores_claims_without_node_resources() -> None:
    s = cpu_slice(dev("plain"))
    c = allocated_claim("x", result("plain"))
    found = check(claim_pod("x"), [(c, c.status.allocation)], node(), NodeUsage(), [s])  # type: ignore[list-item]
    assert found.refusal is None
    assert found.statuses == ()


def test_pod_level_resources_must_cover_the_claims() -> None:
    s = cpu_slice(dev("core", {"cpu": {"mapping": {"deviceMultiplier": "2"}}}))
    c = allocated_claim("cpus", result("core"))
    pairs = [(c, c.status.allocation)]
    p = claim_pod(
        "cpus",
        containers=[ctr("c", "cpus", requests={"cpu": "1"})],
        resources={"requests": {"cpu": "2"}},
    )
    found = check(p, pairs, node(), NodeUsage(), [s])  # type: ignore[arg-type]
    assert found.refusal is not None
    assert found.refusal.unresolvable
    assert found.refusal.message == (
        "pod level request for cpu is insufficient to cover the aggregated container and "
        "node-allocatable DRA requests"
    )
    limited = claim_pod(
        "cpus",
        containers=[ctr("c", "cpus", limits={"cpu": "2"})],
        resources={"limits": {"cpu": "3"}},
    )
    statuses = claim_statuses(limited, pairs, [s], node())  # type: ignore[arg-type]
    body = limited.dump()
    body["status"]["nodeAllocatableResourceClaimStatuses"] = dump_statuses(statuses)
    assert pod_level_refusal(Pod.load(body)) == (
        "pod level limit for cpu is insufficient to cover the limit and DRA overhead for "
        "container c"
    )


def test_slices_for_node() -> None:
    mine, theirs = cpu_slice(node_name="node-1"), cpu_slice(node_name="node-2")
    everywhere = ResourceSlice.load(
        {
            "metadata": {"name": "all"},
            "spec": {"driver": DRIVER, "allNodes": True, "pool": {"name": "x"}},
        }
    )
    assert slices_for_node([mine, theirs, everywhere], node()) == [mine, everywhere]


# --- the cycle ---------------------------------------------------------------------------------


CLASSES = [device_class("cpu", DRIVER)]


def _cycle(
    p: Pod,
    claims: Sequence[ResourceClaim],
    slices: Sequence[ResourceSlice],
    usage: Mapping[str, NodeUsage],
    *,
    gate: bool = True,
    allocatable: Mapping[str, str] | None = None,
) -> Any:
    alloc = allocator(CLASSES, slices) if any(not c.is_allocated for c in claims) else None
    return run_cycle(
        p,
        claims,
        [node(allocatable=allocatable or {"cpu": "4", "memory": "8Gi", "pods": "10"})],
        usage,
        alloc,
        node_allocatable=NodeAllocatableInput(slices) if gate else None,
    )


def test_cycle_allocates_and_counts_the_claim() -> None:
    s = cpu_slice(dev("core", {"cpu": {"mapping": {"deviceMultiplier": "2"}}}))
    c = in_namespace(claim("cpus", request("r", "cpu")))
    p = claim_pod("cpus", containers=[ctr("c", "cpus", requests={"cpu": "1"})])
    result_ = _cycle(p, [c], [s], {"node-1": NodeUsage({"cpu": Decimal(1)}, 1)})
    (fit,) = result_.fits
    assert dump_statuses(fit.node_allocatable) == [
        {
            "resourceClaimName": "cpus",
            "containers": ["c"],
            "mapping": [{"name": "cpu", "quantity": "2"}],
        }
    ]
    full = _cycle(p, [c], [s], {"node-1": NodeUsage({"cpu": Decimal(2)}, 1)})
    assert not full.fits
    assert unschedulable_message(1, full) == "0/1 nodes are available: 1 Insufficient cpu."


def test_gate_off_changes_nothing() -> None:
    s = cpu_slice(dev("core", {"cpu": {"mapping": {"deviceMultiplier": "2"}}}))
    c = in_namespace(claim("cpus", request("r", "cpu")))
    p = claim_pod("cpus", containers=[ctr("c", "cpus", requests={"cpu": "1"})])
    usage = {"node-1": NodeUsage({"cpu": Decimal(2)}, 1)}
    off = _cycle(p, [c], [s], usage, gate=False)
    (fit,) = off.fits
    assert fit.node_allocatable == ()
    plain = run_cycle(
        p,
        [c],
        [node(allocatable={"cpu": "4", "memory": "8Gi", "pods": "10"})],
        usage,
        allocator(CLASSES, [s]),
    )
    assert off == plain


def test_cycle_refuses_a_shared_mapped_claim() -> None:
    s = cpu_slice(dev("core", {"cpu": {"mapping": {"deviceMultiplier": "1"}}}))
    c = allocated_claim("cpus", result("core"), reserved_for=["other"])
    p = claim_pod("cpus")
    refused = _cycle(p, [c], [s], {})
    assert unschedulable_message(1, refused) == (
        "0/1 nodes are available: 1 node allocatable resource claim cpus has a mapped device "
        "and cannot be shared across pods."
    )
    assert _cycle(p, [c], [s], {}, gate=False).fits


def test_cycle_error_for_a_device_not_on_the_node() -> None:
    mapping = {"cpu": {"mapping": {"capacityKey": "a", "capacityMultiplier": "1"}}}
    s = cpu_slice(dev("core", mapping))
    c = allocated_claim("cpus", result("core"))
    found = _cycle(claim_pod("cpus"), [c], [s], {})
    assert found.pod_error == (
        "claim ns/cpus, device core: ConsumedCapacity is nil, but Capacity key 'a' is set in "
        "NodeAllocatableResources for resource cpu"
    )


# --- counting bound pods, and the writes -----------------------------------------------------


def _bound_with(statuses: list[J]) -> Pod:
    p = pod(containers=[{"name": "c", "resources": {"requests": {"cpu": "1"}}}])
    body = p.dump()
    body["status"]["nodeAllocatableResourceClaimStatuses"] = statuses
    return Pod.load(body)


def test_bound_pods_count_their_statuses_only_with_the_gate() -> None:
    p = _bound_with(
        [
            {
                "resourceClaimName": "x",
                "containers": ["c", "d"],
                "mapping": [{"name": "cpu", "quantity": "2"}],
                "overhead": [{"name": "memory", "perPod": "1Gi", "perContainer": "1Mi"}],
            }
        ]
    )
    assert bound_requests(p, False) == pod_requests(
        pod(containers=[{"name": "c", "resources": {"requests": {"cpu": "1"}}}])
    )
    on = bound_requests(p, True)
    assert on["cpu"] == 3
    assert on["memory"] == 2**30 + 2 * 2**20


def test_status_write_and_clear() -> None:
    s = cpu_slice(dev("core", {"cpu": {"mapping": {"deviceMultiplier": "2"}}}))
    c = allocated_claim("cpus", result("core"))
    p = claim_pod("cpus", containers=[ctr("c", "cpus")])
    statuses = claim_statuses(p, [(c, c.status.allocation)], [s], node())  # type: ignore[list-item]
    extended = Patch(
        kind="Pod",
        key=planning.pod_key(p),
        patch={"metadata": {"uid": POD_UID}, "status": {"extendedResourceClaimStatus": {"x": 1}}},
        resource_version=NO_PRECONDITION,
        subresource="status",
    )
    write = planning.node_allocatable_status(p, statuses, extended)
    assert write.patch == {
        "metadata": {"uid": POD_UID},
        "status": {
            "extendedResourceClaimStatus": {"x": 1},
            "nodeAllocatableResourceClaimStatuses": [
                {
                    "resourceClaimName": "cpus",
                    "containers": ["c"],
                    "mapping": [{"name": "cpu", "quantity": "2"}],
                }
            ],
        },
    }
    assert write.subresource == "status"
    assert planning.writes_node_allocatable(write)
    assert not planning.writes_node_allocatable(extended)
    assert not planning.writes_node_allocatable(None)
    assert planning.clear_node_allocatable(p).patch == {
        "metadata": {"uid": POD_UID},
        "status": {"nodeAllocatableResourceClaimStatuses": []},
    }


def test_1_38_names_the_extended_resource_claim_as_it_is_created() -> None:
    """1.37 writes the special claim's in-memory name ("<extended-resources>"); 1.38 replaces it
    with the name the claim is created under, and leaves other claims' statuses alone."""
    s = cpu_slice(dev("core", {"cpu": {"mapping": {"deviceMultiplier": "2"}}}))
    special = allocated_claim(IN_MEMORY_NAME, result("core"))
    other = allocated_claim("cpus", result("core"))
    p = claim_pod("cpus", containers=[ctr("c", "cpus")])
    claims = [(special, special.status.allocation), (other, other.status.allocation)]
    statuses = claim_statuses(p, claims, [s], node())  # type: ignore[arg-type]
    assert [x.resource_claim_name for x in statuses] == [IN_MEMORY_NAME, "cpus"]
    renamed = named(statuses, IN_MEMORY_NAME, "pod-extended-resources-x7k2q")
    assert [x.resource_claim_name for x in renamed] == ["pod-extended-resources-x7k2q", "cpus"]
    assert [x.mapping for x in renamed] == [x.mapping for x in statuses]
    v137 = Profile.of(Policies(), KubernetesVersion.of("1.37"), resolve({}))
    v138 = KubernetesVersion.of("1.38")
    assert not v137.extended_claim_named
    assert Profile.of(Policies(), v138, resolve({}, v138)).extended_claim_named
