"""The scheduler's write decisions, without a cluster: what is written, released, repaired."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from operators.api.consumers import PodInfo
from operators.api.core import Pod
from operators.api.names import DELETE_PROTECTION_FINALIZER
from operators.api.resource import AllocationResult, ResourceClaim
from operators.controllers.scheduler import planning
from operators.controllers.scheduler.planning import PodState
from operators.runtime.actions import ReplaceStatus
from operators.scheduling.attempt import undo_reservation

NOW = datetime.datetime(2026, 11, 26, 12, 0, 0, tzinfo=datetime.UTC)
STAMP = "2026-11-26T12:00:00Z"


def allocation(device: str = "gpu-0", stamp: str | None = STAMP) -> dict[str, Any]:
    body: dict[str, Any] = {
        "devices": {
            "results": [
                {"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": device}
            ]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
            ]
        },
    }
    if stamp:
        body["allocationTimestamp"] = stamp
    return body


def claim(
    name: str = "c",
    *,
    allocated: dict[str, Any] | None = None,
    reserved: tuple[str, ...] = (),
    version: str = "7",
    finalizers: tuple[str, ...] = (),
    devices: bool = False,
) -> ResourceClaim:
    status: dict[str, Any] = {}
    if allocated is not None:
        status["allocation"] = allocated
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": uid, "uid": uid} for uid in reserved]
    if devices:
        status["devices"] = [
            {"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0", "conditions": []}
        ]
    return ResourceClaim.load(
        {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "uid": f"uid-{name}",
                "resourceVersion": version,
                "finalizers": list(finalizers),
            },
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "g"}}]}
            },
            "status": status,
        }
    )


def pod(uid: str = "p", node: str | None = None, phase: str | None = None) -> Pod:
    body: dict[str, Any] = {
        "metadata": {"name": uid, "namespace": "ns", "uid": uid, "resourceVersion": "3"},
        "spec": {"containers": [{"name": "c"}]},
        "status": {},
    }
    if node:
        body["spec"]["nodeName"] = node
    if phase:
        body["status"]["phase"] = phase
    return Pod.load(body)


def status(action: ReplaceStatus | None) -> dict[str, Any]:
    assert action is not None
    result: dict[str, Any] = action.body.get("status") or {}
    return result


# --- Reserve and PreBind -----------------------------------------------------------------------


def test_reservations_write_the_stamped_allocation_and_the_pod_in_one_status() -> None:
    unallocated = claim()
    fresh = AllocationResult.load(allocation(stamp=None))
    (r,) = planning.reservations(pod(), [unallocated], {unallocated.key: fresh}, NOW)
    assert r.cached is unallocated
    assert r.allocation is not None
    assert r.allocation.allocation_timestamp == STAMP
    assert r.target.status.allocation == r.allocation
    assert r.target.reserved_for_uids() == {"p"}
    write = planning.status_write(r, "8")
    assert write.body["metadata"]["resourceVersion"] == "8"  # after the finalizer patch


def test_reservations_skip_claims_already_allocated_and_reserved_for_the_pod() -> None:
    mine = claim(allocated=allocation(), reserved=("p",))
    shared = claim("s", allocated=allocation("gpu-1"), reserved=("other",))
    plan = planning.reservations(pod(), [mine, shared], {}, NOW)
    assert [r.cached.key for r in plan] == ["ns/s"]
    assert plan[0].allocation is None  # reserve only: the allocation is not ours
    assert plan[0].target.reserved_for_uids() == {"other", "p"}


def test_finalizer_is_added_once_with_the_claims_version() -> None:
    patch = planning.finalizer(claim(version="9"))
    assert patch is not None
    assert patch.body()["metadata"] == {
        "finalizers": [DELETE_PROTECTION_FINALIZER],
        "resourceVersion": "9",
    }
    assert planning.finalizer(claim(finalizers=(DELETE_PROTECTION_FINALIZER,))) is None


def test_status_writes_need_a_resource_version() -> None:
    (r,) = planning.reservations(pod(), [claim()], {}, NOW)
    with pytest.raises(ValueError, match="resourceVersion"):
        planning.status_write(r, None)


# --- after a failed bind ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("now", "state"),
    [
        pytest.param(pod(node="node-1"), PodState.BOUND_HERE, id="bound-by-us-after-all"),
        pytest.param(pod(node="node-2"), PodState.BOUND_ELSEWHERE, id="another-scheduler"),
        pytest.param(pod(), PodState.UNBOUND, id="not-bound"),
        pytest.param(None, PodState.GONE, id="deleted"),
        pytest.param(pod(uid="p2", node="node-1"), PodState.GONE, id="replaced"),
    ],
)
def test_after_a_bind_error_the_pod_as_read_decides(now: Pod | None, state: PodState) -> None:
    assert planning.after_bind_error(now, "p", "node-1") is state


def test_release_takes_back_our_reservation_and_our_allocation() -> None:
    ours = AllocationResult.load(allocation())
    current = claim(allocated=allocation(), reserved=("p",), devices=True)
    written = status(planning.release(current, "p", ours))
    assert written == {}  # reservation, allocation and device statuses in one write


def test_release_keeps_an_allocation_that_is_not_ours() -> None:
    """The attempt only reserved; or someone reallocated the claim since."""
    current = claim(allocated=allocation(), reserved=("p",))
    assert status(planning.release(current, "p", None)) == {"allocation": allocation()}
    other = AllocationResult.load(allocation(stamp="2026-11-26T11:00:00Z"))
    assert "allocation" in status(planning.release(current, "p", other))


def test_release_never_deallocates_what_another_consumer_holds() -> None:
    ours = AllocationResult.load(allocation())
    current = claim(allocated=allocation(), reserved=("p", "q"))
    written = status(planning.release(current, "p", ours))
    assert written["allocation"] == allocation()
    assert [r["uid"] for r in written["reservedFor"]] == ["q"]


def test_release_of_nothing_of_ours_writes_nothing() -> None:
    assert planning.release(claim(), "p", None) is None
    assert planning.release(claim(allocated=allocation(), reserved=("q",)), "p", None) is None


def test_release_of_our_allocation_nobody_reserves_any_more() -> None:
    """The pod's entry was already taken out (the reservation cleanup was faster)."""
    ours = AllocationResult.load(allocation())
    assert status(planning.release(claim(allocated=allocation()), "p", ours)) == {}


# --- binding conditions, PostFilter, repair ---------------------------------------------------


def test_binding_failed_deallocates_only_when_nobody_else_holds_the_claim() -> None:
    def failed(reserved: tuple[str, ...]) -> dict[str, Any] | None:
        released = undo_reservation(claim(allocated=allocation(), reserved=reserved), "p")
        return None if released is None else status(planning.binding_failed(released))

    assert failed(("p",)) == {}
    shared = failed(("p", "q"))
    assert shared is not None
    assert shared["allocation"] == allocation()
    assert failed(("q",)) is None


def test_deallocation_clears_everything_at_the_cached_version() -> None:
    action = planning.deallocation(claim(allocated=allocation(), reserved=("p",), devices=True))
    assert status(action) == {}
    assert action.body["metadata"]["resourceVersion"] == "7"


def test_double_allocation_victim_is_the_claim_whose_pods_are_not_bound() -> None:
    older = claim("a", allocated=allocation(stamp="2026-11-26T11:00:00Z"), reserved=("p",))
    newer = claim("b", allocated=allocation(), reserved=("q",))
    assert planning.double_allocation_victim([older, newer], {"p": True, "q": False}) is newer
    assert planning.double_allocation_victim([older, newer], {"p": False, "q": True}) is older
    # Neither bound: the later allocation gives the device back.
    assert planning.double_allocation_victim([older, newer], {"p": False, "q": False}) is newer
    # Both in use by bound pods: no write can fix it safely.
    assert planning.double_allocation_victim([older, newer], {"p": True, "q": True}) is None
    # Reserved by nobody: nothing holds it.
    idle = claim("c", allocated=allocation(stamp="2026-11-26T10:00:00Z"))
    assert planning.double_allocation_victim([older, idle], {"p": True}) is idle


def test_unschedulable_condition_and_event() -> None:
    patch = planning.unschedulable(pod(), "0/1 nodes are available: x.", NOW)
    (condition,) = patch.patch["status"]["conditions"]
    assert condition["reason"] == "Unschedulable"
    assert condition["lastTransitionTime"] == STAMP
    assert patch.subresource == "status"
    event = planning.failed_scheduling(pod(), "why")
    assert (event.type, event.reason, event.message) == ("Warning", "FailedScheduling", "why")


def test_bind_names_the_pod_by_uid() -> None:
    body = planning.bind(pod(), "node-1").body()
    assert body["metadata"] == {"name": "p", "namespace": "ns", "uid": "p"}
    assert body["target"]["name"] == "node-1"


# --- preemption -------------------------------------------------------------------------------


def victim(uid: str = "v", deleting: bool = False) -> Pod:
    meta: dict[str, Any] = {"name": "victim", "namespace": "ns", "uid": uid}
    if deleting:
        meta["deletionTimestamp"] = STAMP
    return Pod.load({"metadata": meta, "spec": {"nodeName": "node-1"}})


def test_a_victim_gets_kube_schedulers_condition_then_a_graceful_deletion() -> None:
    condition = planning.disruption_target(victim(), "kopf-dra", NOW)
    assert condition.subresource == "status"
    assert condition.patch_type == "strategic", "merged by type: writing it again changes nothing"
    assert condition.patch["status"]["conditions"] == [
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": "kopf-dra: preempting to accommodate a higher priority pod",
            "lastTransitionTime": STAMP,
        }
    ]
    eviction = planning.eviction(victim())
    assert (eviction.kind, eviction.uid) == ("Pod", "v"), "this pod only, with its grace period"


def test_a_gone_victims_claim_is_released_by_the_cleanups_rules() -> None:
    held = claim(allocated=allocation(), reserved=("v",))
    gone = planning.victim_claim_release(held, {"v": None})
    assert isinstance(gone, ReplaceStatus)
    assert "allocation" not in gone.body["status"]
    assert "reservedFor" not in gone.body["status"]
    assert gone.body["metadata"]["resourceVersion"] == "7"
    done = PodInfo(uid="v", phase="Failed", node_name="node-1")
    assert planning.victim_claim_release(held, {"v": done}) is not None


def test_a_victim_merely_being_deleted_keeps_its_claim() -> None:
    held = claim(allocated=allocation(), reserved=("v",))
    terminating = PodInfo(uid="v", phase="Running", deleting=True, node_name="node-1")
    assert planning.victim_claim_release(held, {"v": terminating}) is None
    unbound = PodInfo(uid="v", phase="Pending", deleting=True)
    assert planning.victim_claim_release(held, {"v": unbound}) is None, "not the scheduler's rule"


def test_a_claim_shared_with_a_running_pod_is_not_released() -> None:
    shared = claim(allocated=allocation(), reserved=("v", "w"))
    running = PodInfo(uid="w", phase="Running", node_name="node-1")
    assert planning.victim_claim_release(shared, {"v": None, "w": running}) is None


def test_clearing_a_nomination_writes_null() -> None:
    assert planning.nominate(victim(), None).patch == {"status": {"nominatedNodeName": None}}
