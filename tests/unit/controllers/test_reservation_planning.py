"""Pure decisions of the reservation cleanup (kube-controller-manager's behaviour): its rules
(``api.consumers``), their writes (``runtime.claim_writes``) and what brings a reconcile."""

from __future__ import annotations

from typing import Any

import pytest

from operators.api import consumers
from operators.api.consumers import PodInfo
from operators.api.keys import ObjectKey
from operators.api.names import DELETE_PROTECTION_FINALIZER, POD_CLAIM_NAME_ANNOTATION
from operators.api.resource import ResourceClaim
from operators.controllers.reservations.handlers import ReservationController
from operators.controllers.reservations.settings import ReservationSettings
from operators.runtime import claim_writes

ALLOCATION = {
    "devices": {
        "results": [
            {"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}
        ]
    }
}


def claim(
    *reserved: tuple[str, str],
    allocated: bool = True,
    deleting: bool = False,
    generated_for: tuple[str, str] | None = None,
    finalizer: bool = True,
    other_consumer: bool = False,
) -> ResourceClaim:
    meta: dict[str, Any] = {
        "name": "c",
        "namespace": "ns",
        "uid": "claim-uid",
        "resourceVersion": "11",
    }
    if finalizer:
        meta["finalizers"] = [DELETE_PROTECTION_FINALIZER]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if generated_for:
        meta["annotations"] = {POD_CLAIM_NAME_ANNOTATION: "gpu"}
        meta["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": generated_for[0],
                "uid": generated_for[1],
                "controller": True,
            }
        ]
    status: dict[str, Any] = {}
    refs = [{"resource": "pods", "name": n, "uid": u} for n, u in reserved]
    if other_consumer:
        refs.append({"apiGroup": "example.com", "resource": "jobsets", "name": "js", "uid": "j"})
    if refs:
        status["reservedFor"] = refs
    if allocated:
        status["allocation"] = ALLOCATION
        status["devices"] = [
            {
                "driver": "gpu.example.com",
                "pool": "node-1",
                "device": "gpu-0",
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                        "reason": "R",
                        "message": "",
                    }
                ],
            }
        ]
    return ResourceClaim.load({"metadata": meta, "spec": {"devices": {}}, "status": status})


RUNNING = PodInfo(uid="u1", phase="Running", node_name="node-1")


@pytest.mark.parametrize(
    ("pod", "reason"),
    [
        (None, "PodNotFound"),
        (PodInfo(uid="other", phase="Running", node_name="n"), "PodReplaced"),
        (PodInfo(uid="u1", phase="Succeeded", node_name="n"), "PodDone"),
        (PodInfo(uid="u1", phase="Failed", node_name="n"), "PodDone"),
        (PodInfo(uid="u1", phase="Pending", deleting=True), "PodDeletedUnscheduled"),
    ],
)
def test_stale_pod_reservation_is_removed_and_last_removal_deallocates(
    pod: PodInfo | None, reason: str
) -> None:
    c = claim(("p1", "u1"))
    plan = consumers.plan_claim(c, {"p1": pod})
    assert [r.reason for r in plan.removals] == [reason]
    assert plan.deallocate
    body = claim_writes.status_write(c, plan).body
    assert "reservedFor" not in body["status"]
    assert "allocation" not in body["status"]
    assert "devices" not in body["status"]  # cleared in the same write
    assert body["metadata"]["resourceVersion"] == "11"  # the precondition


@pytest.mark.parametrize(
    "pod",
    [
        RUNNING,
        PodInfo(uid="u1", phase="Running", deleting=True, node_name="node-1"),
        PodInfo(uid="u1", phase="Pending"),
    ],
)
def test_live_pods_keep_their_reservation(pod: PodInfo) -> None:
    plan = consumers.plan_claim(claim(("p1", "u1")), {"p1": pod})
    assert plan.idle


def test_shared_claim_is_deallocated_only_after_the_last_pod() -> None:
    c = claim(("p1", "u1"), ("p2", "u2"))
    plan = consumers.plan_claim(c, {"p1": None, "p2": PodInfo(uid="u2", phase="Running")})
    assert [r.consumer.name for r in plan.removals] == ["p1"]
    assert not plan.deallocate
    body = claim_writes.status_write(c, plan).body
    assert [r["name"] for r in body["status"]["reservedFor"]] == ["p2"]
    assert body["status"]["allocation"] == ALLOCATION


def test_other_consumer_kinds_are_left_alone() -> None:
    c = claim(("p1", "u1"), other_consumer=True)
    plan = consumers.plan_claim(c, {"p1": None})
    assert [r.consumer.name for r in plan.removals] == ["p1"]
    assert not plan.deallocate  # the jobset still holds it
    assert claim_writes.status_write(c, plan).body["status"]["reservedFor"] == [
        {"apiGroup": "example.com", "resource": "jobsets", "name": "js", "uid": "j"}
    ]


def test_allocated_but_unreserved_claim_is_left_to_the_scheduler() -> None:
    assert consumers.plan_claim(claim(), {}).idle


def test_deleted_unreserved_claim_is_deallocated_and_its_finalizer_removed() -> None:
    plan = consumers.plan_claim(claim(deleting=True), {})
    assert (plan.deallocate, plan.remove_finalizer, plan.delete) == (True, True, False)


def test_deleted_claim_in_use_keeps_allocation_and_finalizer() -> None:
    plan = consumers.plan_claim(claim(("p1", "u1"), deleting=True), {"p1": RUNNING})
    assert plan.idle


def test_deleted_unallocated_claim_only_loses_its_finalizer() -> None:
    plan = consumers.plan_claim(claim(allocated=False, deleting=True), {})
    assert (plan.status_write, plan.remove_finalizer) == (False, True)


@pytest.mark.parametrize(
    ("owner", "expected"),
    [
        (None, True),
        (PodInfo(uid="other"), True),
        (PodInfo(uid="u1", phase="Succeeded"), True),
        (PodInfo(uid="u1", phase="Running", node_name="n"), False),
    ],
)
def test_generated_claim_is_deleted_when_its_pod_is_gone_or_done(
    owner: PodInfo | None, expected: bool
) -> None:
    c = claim(allocated=False, generated_for=("p1", "u1"))
    assert consumers.plan_claim(c, {"p1": owner}).delete is expected


def test_generated_claim_of_a_done_pod_is_unreserved_deallocated_and_deleted() -> None:
    c = claim(("p1", "u1"), generated_for=("p1", "u1"))
    plan = consumers.plan_claim(c, {"p1": PodInfo(uid="u1", phase="Succeeded")})
    assert (bool(plan.removals), plan.deallocate, plan.delete) == (True, True, True)


def test_pods_to_look_up_names_consumers_and_owner() -> None:
    c = claim(("p1", "u1"), generated_for=("p0", "u0"), other_consumer=True)
    assert consumers.pods_to_look_up(c) == {"p0", "p1"}


def _watching_claim_of_pod_p(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[ReservationController, list[ObjectKey]]:
    """A controller whose store holds claim ns/c reserved for pod p (uid pu), and the keys it
    queues from then on."""
    controller = ReservationController(ReservationSettings())
    added: list[ObjectKey] = []
    monkeypatch.setattr(controller.queue, "add", added.append)
    claim = {
        "metadata": {"name": "c", "namespace": "ns", "uid": "cu", "resourceVersion": "1"},
        "status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "pu"}]},
    }
    controller.on_claim({"type": "ADDED", "body": claim})
    return controller, added


async def test_a_pods_update_queues_its_claims_only_when_the_plan_reads_what_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Status churn of a running pod (conditions, container states) queues nothing; its
    phase, deletion or removal queue the claims it reserves."""
    controller, added = _watching_claim_of_pod_p(monkeypatch)
    pod: dict[str, Any] = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "pu", "resourceVersion": "2"},
        "spec": {"nodeName": "n"},
        "status": {"phase": "Running"},
    }

    def update(version: str, status: dict[str, Any], kind: str = "MODIFIED") -> list[ObjectKey]:
        added.clear()
        body = {**pod, "metadata": {**pod["metadata"], "resourceVersion": version}}
        controller.on_pod({"type": kind, "body": {**body, "status": status}})
        return list(added)

    claim_key = [ObjectKey("ns", "c")]
    assert update("2", {"phase": "Running"}, "ADDED") == claim_key
    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    assert update("3", ready) == []
    assert update("4", {"phase": "Succeeded"}) == claim_key
    assert update("5", {"phase": "Succeeded"}, "DELETED") == claim_key


def test_a_pods_binding_queues_nothing_its_node_counts_only_while_it_is_deleted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pending pod bound decides nothing for its claims (the commonest pod change); a
    deleted pod's node does (deleted before it was bound: PodDeletedUnscheduled)."""
    controller, added = _watching_claim_of_pod_p(monkeypatch)

    def event(version: str, spec: dict[str, Any], meta: dict[str, Any] | None = None) -> bool:
        added.clear()
        metadata = {"name": "p", "namespace": "ns", "uid": "pu", "resourceVersion": version}
        body = {"metadata": {**metadata, **(meta or {})}, "spec": spec, "status": {}}
        controller.on_pod({"type": "MODIFIED", "body": body})
        return added == [ObjectKey("ns", "c")]

    deleted = {"deletionTimestamp": "2026-12-06T00:00:00Z"}
    assert event("2", {})
    assert not event("3", {"nodeName": "n"}), "bound: nothing to decide"
    assert event("4", {"nodeName": "n"}, deleted)
    assert not event("5", {"nodeName": "n"}, deleted)
    assert event("6", {}, deleted), "deleted and without a node: PodDeletedUnscheduled"


def test_a_claims_update_is_reconciled_only_when_the_plan_reads_what_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The scheduler's finalizer on a claim that is not being deleted, or its device
    statuses, queue nothing; reservations, allocation and deletion do."""
    controller = ReservationController(ReservationSettings())
    added: list[ObjectKey] = []
    monkeypatch.setattr(controller.queue, "add", added.append)
    body = claim(generated_for=("p0", "u0"), allocated=False, finalizer=False).dump()
    version = 11

    def event(kind: str = "MODIFIED", **changes: Any) -> bool:
        nonlocal body, version
        version += 1
        meta = {**body["metadata"], "resourceVersion": str(version)}
        meta.update(changes.pop("metadata", {}))
        body = {**body, "metadata": meta, **changes}
        added.clear()
        controller.on_claim({"type": kind, "body": body})
        return added == [ObjectKey("ns", "c")]

    assert event("ADDED")
    assert not event(metadata={"finalizers": [DELETE_PROTECTION_FINALIZER]})
    reserved = {"reservedFor": [{"resource": "pods", "name": "p0", "uid": "u0"}]}
    assert event(status={**reserved, "allocation": ALLOCATION})
    assert not event(status={**reserved, "allocation": ALLOCATION, "devices": []})
    assert event(status={"allocation": ALLOCATION})  # unreserved
    assert event(metadata={"deletionTimestamp": "2026-01-01T00:00:00Z"})
    assert event(metadata={"finalizers": []})  # a deleting claim's finalizer is read
    assert event("DELETED")


@pytest.mark.parametrize("deleting", [False, True])
@pytest.mark.parametrize("generated", [False, True])
def test_the_facts_of_a_raw_claim_are_those_of_the_parsed_one(
    deleting: bool, generated: bool
) -> None:
    """The cleanup decides on the raw body (ClaimFacts) and parses only to write: both must
    read the same claim."""
    parsed = claim(
        ("p1", "u1"),
        deleting=deleting,
        generated_for=("p0", "u0") if generated else None,
        other_consumer=True,
    )
    raw = parsed.dump()
    assert consumers.ClaimFacts.of(raw) == consumers.ClaimFacts.of(parsed)
    facts = consumers.ClaimFacts.of(raw)
    assert facts.consumers[0] == consumers.Consumer("", "pods", "p1", "u1")
    assert (facts.allocated, facts.deleting, facts.protected) == (True, deleting, True)
    assert facts.owner == (("p0", "u0") if generated else None)
    unallocated = {**raw, "status": {}}
    assert not consumers.ClaimFacts.of(unallocated).allocated


# --- PodGroup entries (1.37's DRAWorkloadResourceClaims) ----------------------------------------

GROUP_GATES = {"GenericWorkload": True, "DRAWorkloadResourceClaims": True}


def group_claim(
    *pods: tuple[str, str], group_uid: str = "g1", owned_by_group: bool = False
) -> ResourceClaim:
    """A claim reserved for PodGroup ``job`` (uid ``group_uid``) and ``pods``."""
    body = claim(*pods).dump()
    body["status"]["reservedFor"] = [
        {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "job", "uid": group_uid},
        *body["status"].get("reservedFor", []),
    ]
    if owned_by_group:
        body["metadata"]["annotations"] = {POD_CLAIM_NAME_ANNOTATION: "link"}
        body["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "scheduling.k8s.io/v1beta1",
                "kind": "PodGroup",
                "name": "job",
                "uid": group_uid,
                "controller": True,
            }
        ]
    return ResourceClaim.load(body)


@pytest.mark.parametrize(
    ("group", "reason"),
    [(None, "PodGroupNotFound"), (consumers.GroupInfo(uid="another"), "PodGroupReplaced")],
)
def test_a_podgroup_entry_leaves_when_its_group_is_gone_or_replaced_and_deallocates_last(
    group: consumers.GroupInfo | None, reason: str
) -> None:
    c = group_claim()
    assert consumers.ClaimFacts.of(c).groups_to_look_up() == {"job"}
    plan = consumers.plan_claim(c, {}, {"job": group})
    assert [(r.consumer.resource, r.consumer.name, r.reason) for r in plan.removals] == [
        ("podgroups", "job", reason)
    ]
    assert plan.deallocate
    assert not plan.delete
    status = claim_writes.status_write(c, plan).body["status"]
    assert "reservedFor" not in status
    assert "allocation" not in status


def test_a_podgroup_entry_stays_while_its_group_exists_whatever_its_pods_do() -> None:
    """Pod completion never removes the group's entry: only the group's own fate does."""
    c = group_claim(("p1", "u1"))
    done = PodInfo(uid="u1", phase="Succeeded", node_name="n")
    plan = consumers.plan_claim(c, {"p1": done}, {"job": consumers.GroupInfo(uid="g1")})
    assert [r.reason for r in plan.removals] == ["PodDone"]
    assert not plan.deallocate  # the PodGroup still holds it
    status = claim_writes.status_write(c, plan).body["status"]
    assert [r["resource"] for r in status["reservedFor"]] == ["podgroups"]
    assert status["allocation"]


def test_with_podgroup_claims_off_a_podgroup_entry_is_an_unknown_consumer_kept() -> None:
    assert consumers.plan_claim(group_claim(), {}).idle
    assert consumers.plan_claim(group_claim(), {}, None).idle


@pytest.mark.parametrize("group", [None, consumers.GroupInfo(uid="g1")])
def test_a_claim_a_podgroup_owns_is_never_deleted_by_the_cleanup(
    group: consumers.GroupInfo | None,
) -> None:
    """The garbage collector follows its owner reference; the cleanup only unreserves."""
    c = group_claim(owned_by_group=True)
    assert consumers.ClaimFacts.of(c).owner is None
    assert consumers.pods_to_look_up(c) == set()
    plan = consumers.plan_claim(c, {}, {"job": group})
    assert not plan.delete
    assert plan.deallocate is (group is None)


def test_podgroups_are_watched_only_with_both_gates_on_1_37() -> None:
    on = ReservationController(ReservationSettings(feature_gates=GROUP_GATES))
    assert on.group_claims
    assert on.groups is not None
    off = ReservationController(ReservationSettings())
    assert not off.group_claims
    assert off.groups is None
    on_1_36 = ReservationController(
        ReservationSettings(kubernetes_version="1.36", feature_gates=GROUP_GATES)
    )
    assert not on_1_36.group_claims
    for controller, kinds in (
        (on, ["Pod", "ResourceClaim", "PodGroup"]),
        (off, ["Pod", "ResourceClaim"]),
        (on_1_36, ["Pod", "ResourceClaim"]),
    ):
        controller.register_handlers(None)  # type: ignore[arg-type]
        assert controller.feeds is not None
        assert [i.kind for i in controller.feeds.informers] == kinds


def test_a_podgroup_going_or_replaced_queues_the_claims_it_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    controller = ReservationController(ReservationSettings(feature_gates=GROUP_GATES))
    added: list[ObjectKey] = []
    monkeypatch.setattr(controller.queue, "add", added.append)
    controller.on_claim({"type": "ADDED", "body": group_claim().dump()})
    group: dict[str, Any] = {
        "metadata": {"name": "job", "namespace": "ns", "uid": "g1", "resourceVersion": "20"}
    }

    def event(kind: str, version: str, uid: str = "g1", **status: Any) -> list[ObjectKey]:
        added.clear()
        meta = {**group["metadata"], "resourceVersion": version, "uid": uid}
        controller.on_podgroup({"type": kind, "body": {**group, "metadata": meta, **status}})
        return list(added)

    assert event("ADDED", "20") == [ObjectKey("ns", "c")]
    assert event("MODIFIED", "21", status={"conditions": []}) == []  # the scheduler's
    assert event("DELETED", "22") == [ObjectKey("ns", "c")]
    assert event("ADDED", "23", uid="g2") == [ObjectKey("ns", "c")]
