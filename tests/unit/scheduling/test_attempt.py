"""One attempt's preparation (``scheduling.attempt.prepare``): what the scheduler and
``simulate`` both do before Filter, in kube-scheduler's order, each step's typed result."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from operators.api.core import Pod
from operators.api.names import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from operators.api.resource import ResourceClaim
from operators.scheduling.attempt import (
    BindingFailed,
    DropStaleClaim,
    Ready,
    SharedDevice,
    Wait,
    deadline,
    prepare,
    undo_reservation,
)

NOW = datetime.datetime(2026, 11, 28, 12, 0, 0, tzinfo=datetime.UTC)
UID = "pod-uid"
GPU = "example.com/gpu"
SELECTOR = {
    "nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
    ]
}


def pod(*claims: str, gpus: int = 0) -> Pod:
    requests = {GPU: str(gpus)} if gpus else {}
    return Pod.load(
        {
            "metadata": {"name": "p", "namespace": "ns", "uid": UID},
            "spec": {
                "resourceClaims": [{"name": c, "resourceClaimName": c} for c in claims],
                "containers": [{"name": "c", "resources": {"requests": requests}}],
            },
        }
    )


def claim(
    name: str,
    *,
    allocated: bool = False,
    reserved: tuple[str, ...] = (),
    conditions: dict[str, bool] | None = None,
    allocated_at: str = "2026-11-28T11:59:00Z",
    special: bool = False,
) -> ResourceClaim:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "resourceVersion": "1"}
    if special:
        meta["annotations"] = {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"}
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": UID, "controller": True}
        ]
    status: dict[str, Any] = {}
    if allocated:
        result: dict[str, Any] = {
            "request": "gpu",
            "driver": "gpu.example.com",
            "pool": "node-1",
            "device": "gpu-0",
        }
        if conditions is not None:
            result["bindingConditions"] = ["attached"]
            result["bindingFailureConditions"] = ["failed"]
            status["devices"] = [
                {
                    "driver": "gpu.example.com",
                    "pool": "node-1",
                    "device": "gpu-0",
                    "conditions": [
                        {
                            "type": t,
                            "status": "True" if on else "False",
                            "reason": "Test",
                            "message": "",
                            "lastTransitionTime": "2026-11-28T11:59:00Z",
                        }
                        for t, on in conditions.items()
                    ],
                }
            ]
        status["allocation"] = {
            "devices": {"results": [result]},
            "nodeSelector": SELECTOR,
            "allocationTimestamp": allocated_at,
        }
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": u, "uid": u} for u in reserved]
    return ResourceClaim.load(
        {
            "metadata": meta,
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}
            },
            "status": status,
        }
    )


def run(the_pod: Pod, *claims: ResourceClaim, **kwargs: Any) -> Any:
    return prepare(
        the_pod,
        {c.metadata.name or "": c for c in claims},
        now=NOW,
        binding_timeout=600.0,
        **kwargs,
    )


def test_a_pod_waits_for_its_claims_to_exist() -> None:
    assert run(pod("a")) == Wait("resourceclaim ns/a not found")
    assert run(pod()) == Ready(pod(), ())


def test_a_claim_sharing_a_device_waits_for_the_repair() -> None:
    shared = claim("a", allocated=True)
    prepared = run(pod("a"), shared, shares_device=lambda c: c.key == "ns/a")
    assert prepared == SharedDevice((shared,))
    assert prepared.reason == "resourceclaim ns/a shares a device with another claim"
    unallocated = claim("a")  # only an allocation can share a device
    assert isinstance(run(pod("a"), unallocated, shares_device=lambda c: True), Ready)


def test_an_attempt_allocates_when_a_claim_or_a_new_special_claim_needs_it() -> None:
    assert run(pod("a"), claim("a")).allocating
    held = claim("a", allocated=True, reserved=(UID,))
    assert not run(pod("a"), held).allocating
    backed = run(pod("a", gpus=1), held, extended_classes={GPU: "gpu"})
    assert backed.allocating, "a new special claim is allocated with the pod's claims"
    assert backed.extended.backed == {GPU: "gpu"}
    assert run(pod("a", gpus=1), held, extended_classes=None).extended is None, "gate off"


@pytest.mark.parametrize(
    ("existing", "reused"),
    [
        (claim("special", allocated=True, reserved=(UID,), special=True), True),
        (claim("special", special=True), False),  # its allocation was never written
        (claim("special", allocated=True, reserved=("other",), special=True), False),
    ],
)
def test_a_special_claim_of_an_earlier_attempt_is_reused_or_dropped(
    existing: ResourceClaim, reused: bool
) -> None:
    prepared = run(pod(gpus=1), extended_classes={GPU: "gpu"}, special_claim=lambda _pod: existing)
    if reused:
        assert isinstance(prepared, Ready)
        assert prepared.claims == (existing,)
        assert not prepared.allocating
    else:
        assert prepared == DropStaleClaim(existing)


def test_pending_binding_conditions_wait_until_their_timeout() -> None:
    waiting = claim("a", allocated=True, reserved=(UID,), conditions={"attached": False})
    prepared = run(pod("a"), waiting)
    assert isinstance(prepared, Wait)
    assert prepared.on_binding_conditions
    assert prepared.retry_after == 540.0  # allocated a minute ago, 600 s to go


@pytest.mark.parametrize(
    ("conditions", "allocated_at", "message", "timed_out"),
    [
        ({"attached": False, "failed": True}, "2026-11-28T11:59:00Z", "reports failed", False),
        ({"attached": False}, "2026-11-28T11:40:00Z", "not met within 600s", True),
    ],
)
def test_failed_binding_conditions_undo_every_reservation_of_the_pod(
    conditions: dict[str, bool], allocated_at: str, message: str, timed_out: bool
) -> None:
    failing = claim(
        "a", allocated=True, reserved=(UID,), conditions=conditions, allocated_at=allocated_at
    )
    shared = claim("b", allocated=True, reserved=(UID, "other"))
    prepared = run(pod("a", "b"), failing, shared)
    assert isinstance(prepared, BindingFailed)
    assert message in prepared.message
    assert prepared.timed_out is timed_out  # the scheduler counts timeouts apart
    assert prepared.node == "node-1"
    undone, kept = prepared.released
    assert (undone.is_allocated, undone.status.reserved_for) == (False, [])
    assert not undone.status.devices, "device statuses go with the allocation"
    assert kept.is_allocated
    assert kept.reserved_for_uids() == {"other"}
    assert undo_reservation(claim("c", allocated=True, reserved=("other",)), UID) is None


def test_a_deadline_is_measured_on_the_callers_clock() -> None:
    now = [100.0]
    out_of_time = deadline(lambda: now[0], 10.0)
    assert out_of_time is not None
    assert not out_of_time()
    now[0] = 109.9
    assert not out_of_time()
    now[0] = 110.0
    assert out_of_time()
    assert deadline(lambda: now[0], 0.0) is None
