"""The fabric controller's decisions (planning.plan and the writes it derives), table by table."""

from __future__ import annotations

import json
from typing import Any

import pytest

from operators.api.resource import API_VERSION, ResourceClaim, ResourceSlice
from operators.api.timestamps import format_epoch
from operators.controllers.fabric import planning
from operators.fabric.model import FabricDevice, FabricSnapshot, Operation
from operators.runtime.actions import Create, Delete, Patch, Replace

DRIVER = "gpu.example.com"
ATTACHED = "fabric.kopf-dra.io/attached"
FAILED = "fabric.kopf-dra.io/attach-failed"
NOW = 1_800_000_000.0
STAMP = format_epoch(NOW - 5)
BIND = planning.FabricConfig(
    driver=DRIVER,
    domain="fabric.kopf-dra.io",
    binding_timeout=60,
    handover_timeout=30,
)
RESCHEDULE = planning.FabricConfig(**{**BIND.__dict__, "after_attach": "reschedule"})


def device(
    id_: str = "a100-0", state: str = "free", node: str | None = None, **kw: Any
) -> FabricDevice:
    held = state != "free"
    return FabricDevice(
        id=id_,
        model="A100",
        memory="80Gi",
        uuid=f"FAB-{id_}",
        state=state,
        cluster=kw.pop("cluster", "c1") if held else None,
        node=node if held else None,
        operation=kw.pop("operation", None),
    )


def claim(
    dev: str = "a100-0",
    node: str | None = "n1",
    conditions: list[dict[str, Any]] | None = None,
    stamp: str = STAMP,
    pool: str = "fabric-a100",
) -> ResourceClaim:
    allocation: dict[str, Any] = {
        "devices": {
            "results": [
                {
                    "request": "gpu",
                    "driver": DRIVER,
                    "pool": pool,
                    "device": dev,
                    "bindingConditions": [ATTACHED],
                    "bindingFailureConditions": [FAILED],
                }
            ]
        },
        "allocationTimestamp": stamp,
    }
    if node:
        allocation["nodeSelector"] = {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        }
    status: dict[str, Any] = {
        "allocation": allocation,
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "pod-uid"}],
    }
    if conditions:
        status["devices"] = [
            {"driver": DRIVER, "pool": pool, "device": dev, "conditions": conditions}
        ]
    return ResourceClaim.load(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "name": "c",
                "namespace": "ns",
                "uid": "claim-uid",
                "resourceVersion": "7",
            },
            "status": status,
        }
    )


def cond(type_: str, status: str = "True", reason: str = "X") -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def op_for(c: ResourceClaim, state: str, node: str = "n1", **kw: Any) -> Operation:
    assert c.status.allocation is not None
    op_id = planning.attach_operation_id(
        c.metadata.uid or "", c.status.allocation.allocation_timestamp, "a100-0", node
    )
    return Operation(
        id=op_id,
        kind="attach",
        device="a100-0",
        cluster="c1",
        node=node,
        state=state,
        created=NOW - 2,
        finished=None if state == "running" else NOW - 1,
        **kw,
    )


def run(
    claims: list[ResourceClaim],
    devices: list[FabricDevice],
    ops: list[Operation] = (),  # type: ignore[assignment]
    config: planning.FabricConfig = BIND,
    annotations: dict[str, str | None] | None = None,
    node_local: dict[tuple[str, str], float] | None = None,
    now: float = NOW,
) -> planning.Plan:
    return planning.plan(
        config,
        claims,
        FabricSnapshot(cluster="c1", devices=devices, operations=list(ops)),
        annotations or {"n1": None, "n2": None},
        node_local or {},
        now,
    )


def reports(p: planning.Plan) -> list[tuple[str, bool, str]]:
    return [(r.type, r.status, r.reason) for r in p.reports]


def test_new_allocation_starts_an_attach_and_says_attaching() -> None:
    p = run([claim()], [device()])
    assert [(a.device, a.node) for a in p.attach] == [("a100-0", "n1")]
    assert reports(p) == [(ATTACHED, False, "Attaching")]
    assert p.waiting
    assert not p.detach


def test_running_operation_is_waited_for_not_restarted() -> None:
    c = claim()
    p = run([c], [device(state="attaching", node="n1")], [op_for(c, "running")])
    assert not p.attach
    assert not p.reports
    assert not p.detach
    assert p.waiting


def test_succeeded_attach_reports_attached_in_bind_mode() -> None:
    c = claim()
    p = run([c], [device(state="attached", node="n1")], [op_for(c, "succeeded")])
    assert reports(p) == [(ATTACHED, True, "Attached")]
    assert not p.detach
    assert [o.state for o in p.finished] == ["succeeded"]


@pytest.mark.parametrize(
    ("reason", "message"),
    [("AttachFailed", "link down"), ("DeviceTaken", "held by cluster other")],
)
def test_failed_attach_reports_the_failure_condition_with_the_managers_reason(
    reason: str, message: str
) -> None:
    c = claim()
    p = run([c], [device()], [op_for(c, "failed", reason=reason, message=message)])
    [report] = p.reports
    assert (report.type, report.status, report.reason) == (FAILED, True, reason)
    assert message in report.message
    assert report.message.startswith("claim ns/c, device gpu.example.com/fabric-a100/a100-0")


def test_settled_claims_are_left_alone() -> None:
    attached = claim(conditions=[cond(ATTACHED)])
    p = run([attached], [device(state="attached", node="n1")])
    assert not p.reports
    assert not p.attach
    assert not p.detach


def test_device_of_a_deallocated_or_deleted_claim_is_detached() -> None:
    p = run([], [device(state="attached", node="n1", operation="att-1")])
    [d] = p.detach
    assert (d.device, d.node, d.reason) == ("a100-0", "n1", "Unused")
    # Deterministic per attachment: a restarted controller sends the same detach.
    assert (
        d.op_id == run([], [device(state="attached", node="n1", operation="att-1")]).detach[0].op_id
    )


def test_device_of_a_failed_binding_is_detached_but_not_before_it_is_attached() -> None:
    failed = claim(conditions=[cond(FAILED, reason="BindingTimeout")])
    attaching = run([failed], [device(state="attaching", node="n1")])
    assert not attaching.detach
    assert attaching.waiting
    attached = run([failed], [device(state="attached", node="n1")])
    assert [d.device for d in attached.detach] == ["a100-0"]


def test_devices_of_other_clusters_are_never_detached() -> None:
    theirs = device(state="attached", node="x", cluster="c2")
    assert not run([], [theirs]).detach
    # As the manager shows them to us: held, by nobody we may know.
    assert not run([], [theirs.seen_by("c1")]).detach
    assert not planning.free_pools([theirs.seen_by("c1")], BIND)["fabric-a100"]


def test_binding_timeout_fails_and_then_the_late_device_is_given_back() -> None:
    c = claim(stamp=format_epoch(NOW - 61))
    p = run([c], [device(state="attaching", node="n1")], [op_for(c, "running")])
    assert reports(p) == [(FAILED, True, "BindingTimeout")]
    assert not p.attach


def test_allocation_not_pinned_to_a_node_cannot_be_attached() -> None:
    p = run([claim(node=None)], [device()])
    assert reports(p) == [(FAILED, True, "NoNode")]
    assert not p.attach


def test_claims_of_other_drivers_or_pools_are_not_ours() -> None:
    assert not run([claim(pool="n1")], [device()]).attach
    assert not run([claim(dev="unknown")], [device()]).attach


def test_attached_device_lost_since_is_a_failure() -> None:
    c = claim()
    p = run([c], [device()], [op_for(c, "succeeded")])
    assert reports(p) == [(FAILED, True, "DeviceLost")]
    elsewhere = run([c], [device(state="attached", node="n2")], [op_for(c, "succeeded")])
    assert reports(elsewhere) == [(FAILED, True, "DeviceLost")]


def test_succeeded_attach_beside_a_device_list_read_before_it_finished_waits() -> None:
    """The demo's DeviceLost: the device list said attaching (read first), the operation said
    succeeded (read a moment later). Nothing was lost: wait for a view that agrees."""
    c = claim()
    stale = run([c], [device(state="attaching", node="n1")], [op_for(c, "succeeded")])
    assert not stale.reports
    assert not stale.attach
    assert not stale.detach
    assert not stale.finished
    assert stale.waiting
    agreed = run([c], [device(state="attached", node="n1")], [op_for(c, "succeeded")])
    assert reports(agreed) == [(ATTACHED, True, "Attached")]


def test_reschedule_hands_over_then_fails_once_the_node_pool_publishes_it() -> None:
    c = claim()
    attached = device(state="attached", node="n1")
    waiting = run([c], [attached], [op_for(c, "succeeded")], config=RESCHEDULE)
    assert [e.name for e in waiting.hand_over["n1"]] == ["a100-0"]
    assert not waiting.reports
    assert waiting.waiting
    assert not waiting.detach
    just_seen = run(
        [c],
        [attached],
        [op_for(c, "succeeded")],
        config=RESCHEDULE,
        node_local={("n1", "a100-0"): NOW},
    )
    assert not just_seen.reports  # the scheduler's cache gets its grace
    assert just_seen.waiting
    published = run(
        [c],
        [attached],
        [op_for(c, "succeeded")],
        config=RESCHEDULE,
        node_local={("n1", "a100-0"): NOW - 1},
    )
    assert reports(published) == [(FAILED, True, "AttachedToNode")]
    assert not published.detach


def test_reschedule_fails_after_the_handover_timeout_even_if_never_published() -> None:
    c = claim()
    p = run(
        [c],
        [device(state="attached", node="n1")],
        [op_for(c, "succeeded")],
        config=RESCHEDULE,
        now=NOW + 31,
    )
    assert reports(p) == [(FAILED, True, "AttachedToNode")]


def test_handed_over_devices_stay_attached_after_the_claim_moved_on() -> None:
    annotation = json.dumps([{"name": "a100-0", "model": "A100"}])
    p = run(
        [], [device(state="attached", node="n1")], config=RESCHEDULE, annotations={"n1": annotation}
    )
    assert not p.detach
    assert not p.take_back


def test_stale_handover_entries_are_taken_back_and_foreign_ones_kept() -> None:
    annotation = json.dumps([{"name": "a100-0"}, {"name": "someone-elses"}])
    p = run([], [device()], annotations={"n1": annotation})
    assert p.take_back == {"n1": {"a100-0"}}
    updated = planning.annotation_after(annotation, [], p.take_back["n1"])
    assert json.loads(updated or "") == [{"name": "someone-elses"}]


def test_annotation_after_adds_once() -> None:
    entry = planning.HotplugEntry("a100-0", "A100", "80Gi", "FAB-1")
    first = planning.annotation_after(None, [entry], set())
    assert json.loads(first or "") == [
        {"name": "a100-0", "model": "A100", "memory": "80Gi", "uuid": "FAB-1"}
    ]
    assert planning.annotation_after(first, [entry], set()) is None


def test_annotation_write_patches_the_node_at_the_version_read_and_only_on_change() -> None:
    entry = planning.HotplugEntry("a100-0", "A100", None, None)
    node = {"metadata": {"name": "n1", "resourceVersion": "4", "annotations": {}}}
    action = planning.annotation_write("n1", node, [entry], set())
    assert isinstance(action, Patch)
    assert (action.kind, action.key, action.resource_version) == ("Node", ("", "n1"), "4")
    written = planning.hotplug_annotation(action.patch)
    assert json.loads(written or "") == [{"name": "a100-0", "model": "A100"}]
    node["metadata"]["annotations"] = {planning.HOTPLUG_ANNOTATION: written}
    assert planning.hotplug_annotation(node) == written
    assert planning.annotation_write("n1", node, [entry], set()) is None


def test_status_patch_applies_all_our_entries_and_skips_no_ops() -> None:
    c = claim(conditions=[cond(ATTACHED, "False", "Attaching")])
    wanted = planning.wanted_devices([c], {"a100-0": device()}, BIND)[0]
    done = planning.Report(wanted, ATTACHED, True, "Attached", "attached")
    patch = planning.status_patch(c, [done], BIND, NOW)
    assert patch is not None
    assert patch["metadata"] == {
        "name": "c",
        "namespace": "ns",
        "uid": "claim-uid",
        "resourceVersion": "7",
    }
    [entry] = patch["status"]["devices"]
    assert (entry["driver"], entry["pool"], entry["device"]) == (DRIVER, "fabric-a100", "a100-0")
    [condition] = entry["conditions"]
    assert (condition["status"], condition["reason"]) == ("True", "Attached")
    assert condition["lastTransitionTime"] == format_epoch(NOW)
    attaching = planning.Report(wanted, ATTACHED, False, "Attaching", "again")
    assert planning.status_patch(c, [attaching], BIND, NOW) is None


def test_status_write_applies_the_patch_as_our_field_manager() -> None:
    c = claim(conditions=[cond(ATTACHED, "False", "Attaching")])
    wanted = planning.wanted_devices([c], {"a100-0": device()}, BIND)[0]
    done = planning.Report(wanted, ATTACHED, True, "Attached", "attached")
    action = planning.status_write(c, [done], BIND, NOW)
    assert isinstance(action, Patch)
    assert action.patch == planning.status_patch(c, [done], BIND, NOW)
    assert (action.kind, action.key, action.subresource) == ("ResourceClaim", ("ns", "c"), "status")
    assert (action.patch_type, action.field_manager) == ("apply", planning.FIELD_MANAGER)
    attaching = planning.Report(wanted, ATTACHED, False, "Attaching", "again")
    assert planning.status_write(c, [attaching], BIND, NOW) is None


def test_free_pools_publish_only_free_devices_one_pool_per_model() -> None:
    devices = [
        device("a100-0"),
        device("a100-1", state="attached", node="n1"),
        device("a100-2", state="attached", node="x", cluster="c2"),
        FabricDevice(id="h100-0", model="H100", state="attaching", cluster="c1", node="n1"),
        FabricDevice(id="Bad_Name", model="A100"),
    ]
    pools = planning.free_pools(devices, BIND)
    assert {k: [d.name for d in v] for k, v in pools.items()} == {
        "fabric-a100": ["a100-0"],
        "fabric-h100": [],
    }
    [d] = pools["fabric-a100"]
    assert d.binds_to_node is True
    assert d.binding_conditions == [ATTACHED]
    assert d.binding_failure_conditions == [FAILED]


def test_desired_slice_bumps_the_generation_only_on_change() -> None:
    free = planning.free_pools([device("a100-0"), device("a100-1")], BIND)["fabric-a100"]
    first = planning.desired_slice(BIND, "fabric-a100", free, None)
    assert first is not None
    assert first.metadata.name == "gpu.example.com-fabric-a100"
    existing = ResourceSlice.load(
        {**first.dump(), "metadata": {**first.dump()["metadata"], "resourceVersion": "3"}}
    )
    assert planning.desired_slice(BIND, "fabric-a100", free, existing) is None
    changed = planning.desired_slice(BIND, "fabric-a100", free[:1], existing)
    assert changed is not None
    assert changed.spec.pool.generation == 2
    assert changed.metadata.resource_version == "3"


def test_slice_write_creates_a_new_pool_and_replaces_a_listed_one_only_on_change() -> None:
    free = planning.free_pools([device("a100-0"), device("a100-1")], BIND)["fabric-a100"]
    created = planning.slice_write(BIND, "fabric-a100", free, None)
    assert isinstance(created, Create)
    assert (created.body["apiVersion"], created.body["kind"]) == (API_VERSION, "ResourceSlice")
    listed = {**created.body, "metadata": {**created.body["metadata"], "resourceVersion": "3"}}
    del listed["kind"]  # listed items carry none: the write names it again
    existing = ResourceSlice.load(listed)
    assert planning.slice_write(BIND, "fabric-a100", free, existing) is None
    replaced = planning.slice_write(BIND, "fabric-a100", free[:1], existing)
    assert isinstance(replaced, Replace)
    assert replaced.body["kind"] == "ResourceSlice"
    assert replaced.body["metadata"]["resourceVersion"] == "3"
    assert replaced.body["spec"]["pool"]["generation"] == 2


def test_slice_removal_deletes_only_our_pools_as_listed() -> None:
    free = planning.free_pools([device("a100-0")], BIND)["fabric-a100"]
    body = planning.desired_slice(BIND, "fabric-a100", free, None)
    assert body is not None
    listed = body.model_copy(deep=True)
    listed.metadata.uid, listed.metadata.resource_version = "slice-uid", "9"
    removal = planning.slice_removal(BIND, "gpu.example.com-fabric-a100", listed)
    assert isinstance(removal, Delete)
    assert (removal.key, removal.uid, removal.resource_version) == (
        ("", "gpu.example.com-fabric-a100"),
        "slice-uid",
        "9",
    )
    assert planning.slice_removal(BIND, "gpu.example.com-node-1", listed) is None
