"""The chaos suite's invariant checker, without a cluster: a healthy snapshot passes, and each
invariant catches one broken example."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest

from e2e.chaos import invariants as inv
from e2e.chaos.invariants import ProcessState, Snapshot
from operators.api.core import Pod
from operators.api.names import POD_CLAIM_NAME_ANNOTATION
from operators.api.resource import ResourceClaim, ResourceSlice
from tests.unit.allocator import builders as a
from tests.unit.scheduling import builders as s

J = dict[str, Any]
NS = s.NS


def pod(
    name: str, node: str | None = None, *, phase: str = "Pending", reason: bool = True, **meta: Any
) -> Pod:
    """A pod of the scheduler with one claim from template ``gpu`` (generated: ``<name>-gpu``);
    unbound, it carries the scheduler's reason unless ``reason`` is False."""
    body = s.pod(
        name,
        uid=f"uid-{name}",
        claims=[{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
        claim_statuses=[{"name": "gpu", "resourceClaimName": f"{name}-gpu"}],
    ).dump()
    body["metadata"].update(meta)
    body["status"]["phase"] = phase
    if node:
        body["spec"]["nodeName"] = node
    elif reason:
        body["status"]["conditions"] = [
            {"type": "PodScheduled", "status": "False", "message": "0/2 nodes are available"}
        ]
    return Pod.load(body)


def claim(
    owner: str,
    *results: J,
    node: str | None = None,
    reserved: Sequence[str] = (),
    name: str | None = None,
) -> ResourceClaim:
    """``owner``'s generated claim; allocated with ``results`` on ``node`` when given."""
    body: J = {
        "metadata": {
            "name": name or f"{owner}-gpu",
            "namespace": NS,
            "uid": f"claim-{name or owner}",
            "annotations": {POD_CLAIM_NAME_ANNOTATION: "gpu"},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": owner,
                    "uid": f"uid-{owner}",
                    "controller": True,
                }
            ],
        },
        "spec": {"devices": {"requests": [a.request("gpu", a.CLASS_A)]}},
        "status": {},
    }
    if results:
        selector = a.local_node_selector(node) if node else None
        body["status"]["allocation"] = a.allocation(selector, *results)
    if reserved:
        body["status"]["reservedFor"] = [
            {"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in reserved
        ]
    return ResourceClaim.load(body)


def gpu(node: str, device: str = a.DEVICE0, **kw: Any) -> J:
    return a.result("gpu", a.DRIVER_A, node, device, **kw)


def node_slice(node: str, *devices: J) -> ResourceSlice:
    return a.slice_(f"{node}-slice", node, node, a.DRIVER_A, *(devices or [a.device(a.DEVICE0)]))


# Two nodes with one device each, both taken by bound pods; a third pod waits in vain.
HEALTHY = Snapshot(
    pods=(pod("p1", "node-1"), pod("p2", "node-2"), pod("p3")),
    claims=(
        claim("p1", gpu("node-1"), node="node-1", reserved=["p1"]),
        claim("p2", gpu("node-2"), node="node-2", reserved=["p2"]),
        claim("p3"),
    ),
    slices=(node_slice("node-1"), node_slice("node-2")),
    classes=(a.device_class(a.CLASS_A, a.DRIVER_A),),
    nodes=(s.node("node-1"), s.node("node-2")),
    processes=(ProcessState("scheduler", alive=True),),
)


def replace(snapshot: Snapshot, **fields: Any) -> Snapshot:
    return dataclasses.replace(snapshot, **fields)


def violated(snapshot: Snapshot) -> dict[str, list[str]]:
    """Invariant -> its violations as text, only the violated ones."""
    grouped = inv.by_invariant(inv.check(snapshot))
    return {k: [str(v) for v in vs] for k, vs in grouped.items() if vs}


def test_a_healthy_cluster_holds_every_invariant() -> None:
    assert violated(HEALTHY) == {}
    assert list(inv.by_invariant([])) == list(inv.INVARIANTS)


def test_snapshot_loads_plain_dicts() -> None:
    loaded = Snapshot.load(
        pods=[p.dump() for p in HEALTHY.pods],
        claims=[c.dump() for c in HEALTHY.claims],
        slices=[x.dump() for x in HEALTHY.slices],
        classes=[c.dump() for c in HEALTHY.classes],
        nodes=[n.dump() for n in HEALTHY.nodes],
    )
    assert violated(loaded) == {}


# --- exclusive-devices ---------------------------------------------------------------------


def test_a_device_in_two_allocations() -> None:
    broken = replace(
        HEALTHY,
        pods=(pod("p1", "node-1"), pod("p2", "node-1")),
        claims=(
            claim("p1", gpu("node-1"), node="node-1", reserved=["p1"]),
            claim("p2", gpu("node-1"), node="node-1", reserved=["p2"]),
        ),
    )
    assert violated(broken) == {
        inv.EXCLUSIVE_DEVICES: [
            "device driver-a/node-1/device-0 is allocated 2 times and is not shared "
            "[device driver-a/node-1/device-0, claim ns/p1-gpu, claim ns/p2-gpu]"
        ]
    }


def test_admin_access_does_not_count_and_shares_must_fit_the_capacity() -> None:
    admin = replace(
        HEALTHY,
        pods=(pod("p1", "node-1"), pod("p2", "node-1")),
        claims=(
            claim("p1", gpu("node-1"), node="node-1", reserved=["p1"]),
            claim("p2", gpu("node-1", admin=True), node="node-1", reserved=["p2"]),
        ),
        slices=(node_slice("node-1"),),
        nodes=(s.node("node-1"),),
    )
    assert violated(admin) == {}
    shared = a.device(a.DEVICE0, {"bandwidth": "10"}, multi=True)
    over = replace(
        admin,
        claims=(
            claim("p1", gpu("node-1", share=True, consumed={"bandwidth": "6"}), reserved=["p1"]),
            claim("p2", gpu("node-1", share=True, consumed={"bandwidth": "6"}), reserved=["p2"]),
        ),
        slices=(node_slice("node-1", shared),),
    )
    assert violated(over) == {
        inv.EXCLUSIVE_DEVICES: [
            "device driver-a/node-1/device-0: shares consume 12 of capacity bandwidth, which "
            "is 10 [device driver-a/node-1/device-0, claim ns/p1-gpu, claim ns/p2-gpu]"
        ]
    }


def test_partitions_beyond_their_counter_set() -> None:
    """The counter set sits in a slice of its own (the served layout), the partitions in
    another slice of the same pool."""
    half = a.consumes(a.COUNTER_SET1, {"memory": "6"})
    pool = a.pool("node-1", count=2)
    counters = a.slice_(
        "node-1-counters",
        "node-1",
        pool,
        a.DRIVER_A,
        counter_sets=[a.counter_set(a.COUNTER_SET1, {"memory": "10"})],
    )
    partitions = a.slice_(
        "node-1-partitions",
        "node-1",
        pool,
        a.DRIVER_A,
        a.device(a.DEVICE0, consumes=[half]),
        a.device(a.DEVICE1, consumes=[half]),
    )
    broken = replace(
        HEALTHY,
        pods=(pod("p1", "node-1"), pod("p2", "node-1")),
        claims=(
            claim("p1", gpu("node-1"), node="node-1", reserved=["p1"]),
            claim("p2", gpu("node-1", a.DEVICE1), node="node-1", reserved=["p2"]),
        ),
        slices=(counters, partitions),
        nodes=(s.node("node-1"),),
    )
    assert violated(broken) == {
        inv.EXCLUSIVE_DEVICES: [
            "allocated devices consume 12 of counter memory, which is 10 "
            "[counter set driver-a/node-1/counter-set-1, claim ns/p1-gpu, claim ns/p2-gpu]"
        ]
    }


# --- claims-held ---------------------------------------------------------------------------


def test_a_claim_stranded_on_a_pending_pod() -> None:
    broken = replace(
        HEALTHY,
        pods=(pod("p1"),),
        claims=(claim("p1", gpu("node-1"), node="node-1", reserved=["p1"]),),
        slices=(node_slice("node-1"),),
        nodes=(s.node("node-1", unschedulable=True),),
    )
    assert violated(broken) == {
        inv.CLAIMS_HELD: [
            "stranded: allocated on node-1 and reserved for a pending pod that is neither "
            "bound nor waiting for binding conditions [claim ns/p1-gpu, pod ns/p1]"
        ]
    }


def test_waiting_for_binding_conditions_is_in_flight() -> None:
    waiting = replace(
        HEALTHY,
        pods=(pod("p1"),),
        claims=(
            claim("p1", gpu("node-1", binding=(["attached"], [])), node="node-1", reserved=["p1"]),
        ),
        slices=(node_slice("node-1"),),
        nodes=(s.node("node-1"),),
    )
    assert violated(waiting) == {}


def test_a_claim_reserved_for_a_pod_on_another_node() -> None:
    broken = replace(
        HEALTHY,
        pods=(pod("p1", "node-2"), pod("p2", "node-1")),
        claims=(
            claim("p1", gpu("node-1"), node="node-1", reserved=["p1"]),
            claim("p2", gpu("node-2"), node="node-2", reserved=["p2"]),
        ),
    )
    found = violated(broken)
    assert found[inv.CLAIMS_HELD] == [
        "allocated on node-1 but its pod is bound to node-2 [claim ns/p1-gpu, pod ns/p1]",
        "allocated on node-2 but its pod is bound to node-1 [claim ns/p2-gpu, pod ns/p2]",
    ]
    assert len(found[inv.BOUND_PODS_HOLD_CLAIMS]) == 2


# --- bound-pods-hold-claims ----------------------------------------------------------------


def test_a_bound_pod_whose_claim_was_deallocated() -> None:
    broken = replace(HEALTHY, claims=(claim("p1"), *HEALTHY.claims[1:]))
    assert violated(broken) == {
        inv.BOUND_PODS_HOLD_CLAIMS: [
            "bound, but claim ns/p1-gpu is not allocated [pod ns/p1, claim ns/p1-gpu]"
        ],
        # node-1's device is free now, and p3 waits.
        inv.PENDING_PODS_FIT_NOWHERE: [
            "pending, but fits node node-1 with devices driver-a/node-1/device-0 "
            "[pod ns/p3, node node-1, claim ns/p3-gpu]"
        ],
    }


def test_finished_and_deleting_pods_need_no_claims() -> None:
    done = replace(
        HEALTHY,
        pods=(pod("p1", "node-1", phase="Succeeded"), pod("p2", "node-2", phase="Succeeded")),
        claims=(claim("p1"),),
    )
    assert violated(done) == {
        inv.GENERATED_CLAIMS: ["orphaned: its pod is Succeeded [claim ns/p1-gpu, pod ns/p1]"]
    }
    deleting = replace(
        HEALTHY,
        pods=(pod("p1", "node-1", deletionTimestamp="2026-01-01T00:00:00Z"),),
        claims=(claim("p1"),),
    )
    assert violated(deleting) == {}


# --- pending-pods-fit-nowhere --------------------------------------------------------------


def test_a_pending_pod_that_fits() -> None:
    broken = replace(HEALTHY, nodes=(*HEALTHY.nodes, s.node("node-3")))
    broken = replace(broken, slices=(*broken.slices, node_slice("node-3")))
    assert violated(broken) == {
        inv.PENDING_PODS_FIT_NOWHERE: [
            "pending, but fits node node-3 with devices driver-a/node-3/device-0 "
            "[pod ns/p3, node node-3, claim ns/p3-gpu]"
        ]
    }


def test_a_pending_pod_without_a_reason() -> None:
    broken = replace(HEALTHY, pods=(*HEALTHY.pods[:2], pod("p3", reason=False)))
    assert violated(broken) == {
        inv.PENDING_PODS_FIT_NOWHERE: [
            "pending without the scheduler's reason (no PodScheduled=False) [pod ns/p3]"
        ]
    }


def test_node_checks_come_first() -> None:
    """A free device on a node the pod cannot go to is no fit (cordoned, not ready: tainted
    so by the node lifecycle controller, which is what keeps pods off it)."""
    not_ready = s.taint("node.kubernetes.io/not-ready", None, "NoSchedule")
    for blocked in (
        s.node("node-3", unschedulable=True),
        s.node("node-3", ready="False", taints=[not_ready]),
    ):
        snapshot = replace(
            HEALTHY,
            nodes=(*HEALTHY.nodes, blocked),
            slices=(*HEALTHY.slices, node_slice("node-3")),
        )
        assert violated(snapshot) == {}


def test_a_claim_stranded_on_a_cordoned_node_does_not_hide_a_fit() -> None:
    """p3's claim holds node-1's device while node-1 is cordoned; node-3 is free."""
    broken = replace(
        HEALTHY,
        pods=(pod("p3"),),
        claims=(claim("p3", gpu("node-1"), node="node-1", reserved=["p3"]),),
        nodes=(s.node("node-1", unschedulable=True), s.node("node-3")),
        slices=(node_slice("node-1"), node_slice("node-3")),
    )
    found = violated(broken)
    assert found[inv.PENDING_PODS_FIT_NOWHERE] == [
        "pending, but fits node node-3 with devices driver-a/node-3/device-0 "
        "[pod ns/p3, node node-3, claim ns/p3-gpu]"
    ]
    assert list(found) == [inv.CLAIMS_HELD, inv.PENDING_PODS_FIT_NOWHERE]


# --- unreserved-allocations ----------------------------------------------------------------


@pytest.mark.parametrize(("age", "expected"), [(59.9, False), (60.0, True)])
def test_allocated_without_reservation(age: float, expected: bool) -> None:
    claims = (claim("p3", gpu("node-1", a.DEVICE1), node="node-1"),)
    snapshot = replace(
        HEALTHY,
        pods=(pod("p3"),),
        claims=claims,
        slices=(node_slice("node-1", a.device(a.DEVICE0), a.device(a.DEVICE1)),),
        nodes=(s.node("node-1"),),
        unreserved_for={"ns/p3-gpu": age},
    )
    # The claim holds node-1's second device; the first one is free, so p3 fits there too.
    found = violated(snapshot)
    assert found.pop(inv.PENDING_PODS_FIT_NOWHERE)
    if expected:
        assert found == {
            inv.UNRESERVED_ALLOCATIONS: [
                "allocated on node-1 without a reservation for 60 s [claim ns/p3-gpu]"
            ]
        }
    else:
        assert found == {}


# --- generated-claims ----------------------------------------------------------------------


def test_orphaned_duplicated_and_missing_generated_claims() -> None:
    broken = replace(
        HEALTHY,
        pods=(*HEALTHY.pods[:2], pod("p4")),
        claims=(
            *HEALTHY.claims[:2],
            claim("p3"),
            claim("p4"),
            claim("p4", name="p4-gpu-twin"),
            claim("p2", name="p2-replaced").model_copy(deep=True),
        ),
    )
    twin = broken.claims[5]
    twin.metadata.owner_references[0].uid = "uid-old-p2"
    assert violated(broken) == {
        inv.GENERATED_CLAIMS: [
            "orphaned: its pod p3 (uid-p3) no longer exists [claim ns/p3-gpu, pod ns/p3]",
            "orphaned: its pod p2 (uid-old-p2) no longer exists [claim ns/p2-replaced, pod ns/p2]",
            "2 claims generated for entry gpu of one pod "
            "[claim ns/p4-gpu, claim ns/p4-gpu-twin, pod ns/p4]",
        ]
    }
    missing = pod("p4").model_copy(deep=True)
    missing.status.resource_claim_statuses = []
    gone = replace(HEALTHY, pods=(*HEALTHY.pods[:2], missing, pod("p5")))
    assert violated(gone) == {
        inv.GENERATED_CLAIMS: [
            "orphaned: its pod p3 (uid-p3) no longer exists [claim ns/p3-gpu, pod ns/p3]",
            "no claim generated for entry gpu [pod ns/p4]",
            "its status names claim p5-gpu (entry gpu), which is gone [pod ns/p5, claim ns/p5-gpu]",
        ]
    }


# --- processes -----------------------------------------------------------------------------


def test_dead_processes_and_tracebacks() -> None:
    broken = replace(
        HEALTHY,
        processes=(
            ProcessState("scheduler", alive=False, exit_code=-9),
            ProcessState("reservations", alive=True, tracebacks=("KeyError: 'uid'",)),
        ),
    )
    assert violated(broken) == {
        inv.PROCESSES: [
            "exited with -9 [process scheduler]",
            "traceback in its log: KeyError: 'uid' [process reservations]",
        ]
    }


def member(name: str, node: str | None = None, *, reason: bool = True) -> Pod:
    """A pod of PodGroup ``job`` (see ``pod``)."""
    body = pod(name, node, reason=reason).dump()
    body["spec"]["schedulingGroup"] = {"podGroupName": "job"}
    return Pod.load(body)


def job(min_count: int = 2) -> J:
    return {
        "metadata": {"name": "job", "namespace": NS, "uid": "uid-job"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


def gang(*pods: Pod, claims: Sequence[ResourceClaim], min_count: int = 2) -> Snapshot:
    """HEALTHY's nodes, devices and processes with a gang instead of its pods."""
    return replace(
        Snapshot.load(groups=[job(min_count)]),
        pods=pods,
        claims=tuple(claims),
        slices=HEALTHY.slices,
        classes=HEALTHY.classes,
        nodes=HEALTHY.nodes,
        processes=HEALTHY.processes,
    )


def test_a_whole_gang_holds_and_a_partial_one_does_not() -> None:
    whole = gang(
        member("w1", "node-1"),
        member("w2", "node-2"),
        claims=[
            claim("w1", gpu("node-1"), node="node-1", reserved=["w1"]),
            claim("w2", gpu("node-2"), node="node-2", reserved=["w2"]),
        ],
    )
    assert violated(whole) == {}
    partial = gang(
        member("w1", "node-1"),
        member("w2"),
        claims=[claim("w1", gpu("node-1"), node="node-1", reserved=["w1"]), claim("w2")],
    )
    (problem,) = violated(partial)[inv.GANGS_WHOLE]
    assert "1 of its pods bound, minCount 2" in problem


def test_a_gang_with_none_bound_holds_no_device_and_says_why() -> None:
    # Three pods of a gang of three on two devices: none bound, and none may hold one.
    held = gang(
        member("w1"),
        member("w2"),
        member("w3"),
        claims=[claim("w1", gpu("node-1"), node="node-1", reserved=["w1"]), claim("w2"),
                claim("w3")],
        min_count=3,
    )  # fmt: skip
    problems = violated(held)[inv.GANGS_WHOLE]
    assert any("holds devices" in p and "pod ns/w1" in p for p in problems), problems
    fair = gang(
        member("w1"), member("w2"), member("w3"),
        claims=[claim("w1"), claim("w2"), claim("w3")],
        min_count=3,
    )  # fmt: skip
    assert violated(fair) == {}, "three pods for two devices: the gang fits nowhere"
    silent = gang(member("w1", reason=False), member("w2"), member("w3"),
                  claims=[claim("w1"), claim("w2"), claim("w3")], min_count=3)  # fmt: skip
    (problem,) = violated(silent)[inv.GANGS_WHOLE]
    assert "without the scheduler's reason" in problem
    assert "pod ns/w1" in problem


def test_a_gang_left_pending_where_it_fits() -> None:
    stuck = gang(member("w1"), member("w2"), claims=[claim("w1"), claim("w2")])
    (problem,) = violated(stuck)[inv.GANGS_WHOLE]
    assert "2 of its pods fit together" in problem


def test_a_gang_waiting_for_its_pods_says_nothing() -> None:
    waiting = gang(member("w1", reason=False), claims=[claim("w1")], min_count=2)
    assert violated(waiting) == {}, "fewer pods than minCount: upstream waits silently"


def group_claim(*reserved: J) -> ResourceClaim:
    body = claim("job", name="job-link").dump()
    body["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "name": "job",
            "uid": "uid-job",
            "controller": True,
        }
    ]
    body["metadata"]["annotations"] = {}
    body["status"] = {"reservedFor": list(reserved)} if reserved else {}
    return ResourceClaim.load(body)


def test_a_group_claim_is_reserved_for_its_podgroup_alone() -> None:
    podgroup = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "job"}
    ok = gang(claims=[group_claim({**podgroup, "uid": "uid-job"})])
    assert inv.group_claims(ok) == []
    wrong = gang(claims=[group_claim({"resource": "pods", "name": "w1", "uid": "uid-w1"})])
    (problem,) = [str(v) for v in inv.group_claims(wrong)]
    assert "made for PodGroup job but reserved for pods w1" in problem
    gone = gang(claims=[group_claim({**podgroup, "uid": "uid-old"})])
    problems = [str(v) for v in inv.group_claims(gone)]
    assert any("which no longer exists" in p for p in problems), problems


RACK = "topology.chaos.kopf-dra.io/rack"


def racked(*pods: Pod, claims: Sequence[ResourceClaim]) -> Snapshot:
    """``gang`` with its PodGroup constrained to a rack, and node-1, node-2 in two racks."""
    body = job()
    body["spec"]["schedulingConstraints"] = {"topology": [{"key": RACK}]}
    return replace(
        gang(*pods, claims=claims),
        groups=Snapshot.load(groups=[body]).groups,
        nodes=(s.node("node-1", labels={RACK: "a"}), s.node("node-2", labels={RACK: "b"})),
    )


def test_a_rack_constrained_gang_is_bound_in_one_rack_and_fits_only_in_one() -> None:
    split = racked(
        member("w1", "node-1"),
        member("w2", "node-2"),
        claims=[
            claim("w1", gpu("node-1"), node="node-1", reserved=["w1"]),
            claim("w2", gpu("node-2"), node="node-2", reserved=["w2"]),
        ],
    )
    (problem,) = violated(split)[inv.GANGS_IN_ONE_DOMAIN]
    assert "bound in 2 domains" in problem
    # One device a rack: the two pods fit together across the racks, never in one, so a gang
    # left pending is no violation (without its constraint it would be: see above).
    apart = racked(member("w1"), member("w2"), claims=[claim("w1"), claim("w2")])
    assert violated(apart) == {}
