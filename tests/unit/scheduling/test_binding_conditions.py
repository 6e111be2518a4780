"""Binding conditions (KEP-5007): when a pod with allocated claims may be bound."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from operators.api.resource import ResourceClaim
from operators.scheduling.binding_conditions import (
    BindingVerdict,
    ConditionsState,
    allocated_node,
    binding_verdict,
)
from tests.unit.allocator.builders import (
    CLAIM0,
    DEVICE1,
    DEVICE2,
    DRIVER_A,
    POOL1,
    REQ0,
    allocation,
    claim,
    local_node_selector,
    node_label_selector,
    request,
    result,
)

from .builders import NS, J, in_namespace

TIMEOUT = 600.0
KEY = f"{NS}/{CLAIM0}"
DEV1, DEV2 = f"{DRIVER_A}/{POOL1}/{DEVICE1}", f"{DRIVER_A}/{POOL1}/{DEVICE2}"
SHARE_A, SHARE_B = "aaaaaaaa-0000-0000-0000-000000000000", "bbbbbbbb-0000-0000-0000-000000000000"


def bound(device: str = DEVICE1, share: str | None = None, *, failure: bool = True) -> J:
    """A result whose device needs "attached" (and fails on "failed")."""
    r = result(REQ0, DRIVER_A, POOL1, device, binding=(["attached"], ["failed"] if failure else []))
    if share is not None:
        r["shareID"] = share
    return r


def plain(device: str = DEVICE1) -> J:
    return result(REQ0, DRIVER_A, POOL1, device)


def status(device: str = DEVICE1, share: str | None = None, **conditions: bool) -> J:
    out: J = {
        "driver": DRIVER_A,
        "pool": POOL1,
        "device": device,
        "conditions": [
            {
                "type": t,
                "status": "True" if v else "False",
                "reason": "Test",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
            for t, v in conditions.items()
        ],
    }
    if share is not None:
        out["shareID"] = share
    return out


def allocated(results: Sequence[J], devices: Sequence[J] = ()) -> ResourceClaim:
    return in_namespace(
        claim(CLAIM0, request(REQ0, "class-a")),
        allocation=allocation(local_node_selector("node-1"), *results),
        devices=devices,
    )


CASES = [
    # (claim, elapsed, expected verdict)
    pytest.param(
        in_namespace(claim(CLAIM0, request(REQ0, "class-a"))),
        0.0,
        BindingVerdict(ConditionsState.NOT_NEEDED),
        id="not-allocated",
    ),
    pytest.param(
        allocated([plain()]), 1e9, BindingVerdict(ConditionsState.NOT_NEEDED), id="no-conditions"
    ),
    pytest.param(
        allocated([bound()]),
        10.0,
        BindingVerdict(ConditionsState.PENDING, f"waiting for {DEV1} attached", 590.0),
        id="pending-no-status",
    ),
    pytest.param(
        allocated([bound()], [status(attached=False)]),
        10.0,
        BindingVerdict(ConditionsState.PENDING, f"waiting for {DEV1} attached", 590.0),
        id="pending-condition-false",
    ),
    pytest.param(
        allocated([bound()], [status(attached=False)]),
        None,
        BindingVerdict(ConditionsState.PENDING, f"waiting for {DEV1} attached", None),
        id="pending-without-timestamp-never-times-out",
    ),
    pytest.param(
        allocated([bound()], [status(DEVICE2, attached=True)]),
        0.0,
        BindingVerdict(ConditionsState.PENDING, f"waiting for {DEV1} attached", 600.0),
        id="status-of-another-device-does-not-count",
    ),
    pytest.param(
        allocated([bound(), bound(DEVICE2)], [status(attached=True)]),
        100.0,
        BindingVerdict(ConditionsState.PENDING, f"waiting for {DEV2} attached", 500.0),
        id="one-of-two-devices-ready",
    ),
    pytest.param(
        allocated([bound(), plain(DEVICE2)], [status(attached=True)]),
        0.0,
        BindingVerdict(ConditionsState.READY),
        id="ready",
    ),
    pytest.param(
        allocated(
            [bound(), bound(DEVICE2)], [status(attached=True), status(DEVICE2, attached=True)]
        ),
        0.0,
        BindingVerdict(ConditionsState.READY),
        id="ready-all-devices",
    ),
    pytest.param(
        allocated([bound()], [status(attached=True)]),
        TIMEOUT * 2,
        BindingVerdict(ConditionsState.READY),
        id="ready-beats-timeout",
    ),
    pytest.param(
        allocated([bound()], [status(attached=False, failed=True)]),
        0.0,
        BindingVerdict(ConditionsState.FAILED, f"claim {KEY}: device {DEV1} reports failed"),
        id="failed",
    ),
    pytest.param(
        allocated([bound()], [status(attached=True, failed=True)]),
        0.0,
        BindingVerdict(ConditionsState.FAILED, f"claim {KEY}: device {DEV1} reports failed"),
        id="failure-beats-ready",
    ),
    pytest.param(
        allocated([bound(), bound(DEVICE2)], [status(DEVICE2, failed=True)]),
        TIMEOUT * 2,
        BindingVerdict(ConditionsState.FAILED, f"claim {KEY}: device {DEV2} reports failed"),
        id="failure-beats-timeout-and-pending",
    ),
    pytest.param(
        allocated([bound(failure=False)], [status(attached=False, failed=True)]),
        0.0,
        BindingVerdict(ConditionsState.PENDING, f"waiting for {DEV1} attached", 600.0),
        id="undeclared-failure-condition-ignored",
    ),
    pytest.param(
        allocated([bound()], [status(attached=False)]),
        TIMEOUT,
        BindingVerdict(
            ConditionsState.TIMED_OUT,
            f"claim {KEY}: binding conditions not met within 600s: {DEV1} attached",
        ),
        id="timed-out-exactly",
    ),
    pytest.param(
        allocated([bound()], [status(attached=False)]),
        TIMEOUT - 0.5,
        BindingVerdict(ConditionsState.PENDING, f"waiting for {DEV1} attached", 0.5),
        id="just-before-timeout",
    ),
    pytest.param(
        allocated([bound(), bound(DEVICE2)]),
        TIMEOUT + 1,
        BindingVerdict(
            ConditionsState.TIMED_OUT,
            f"claim {KEY}: binding conditions not met within 600s: "
            f"{DEV1} attached, {DEV2} attached",
        ),
        id="timed-out-lists-every-pending-condition",
    ),
    # shareID: a status belongs to the share of the result, not just to the device
    pytest.param(
        allocated([bound(share=SHARE_A)], [status(share=SHARE_B, attached=True)]),
        0.0,
        BindingVerdict(ConditionsState.PENDING, f"waiting for {DEV1} attached", 600.0),
        id="share-other-share-ready",
    ),
    pytest.param(
        allocated(
            [bound(share=SHARE_A)],
            [status(share=SHARE_B, attached=True), status(share=SHARE_A, attached=False)],
        ),
        0.0,
        BindingVerdict(ConditionsState.PENDING, f"waiting for {DEV1} attached", 600.0),
        id="share-ours-not-ready",
    ),
    pytest.param(
        allocated(
            [bound(share=SHARE_A)],
            [status(share=SHARE_B, attached=False), status(share=SHARE_A, attached=True)],
        ),
        0.0,
        BindingVerdict(ConditionsState.READY),
        id="share-ours-ready",
    ),
    pytest.param(
        allocated([bound(share=SHARE_A)], [status(attached=True)]),
        0.0,
        BindingVerdict(ConditionsState.PENDING, f"waiting for {DEV1} attached", 600.0),
        id="share-status-without-share-id",
    ),
    pytest.param(
        allocated(
            [bound(share=SHARE_A)],
            [status(share=SHARE_B, failed=True), status(share=SHARE_A, attached=True)],
        ),
        0.0,
        BindingVerdict(ConditionsState.READY),
        id="share-failure-of-other-share-ignored",
    ),
]


@pytest.mark.parametrize(("claim_", "elapsed", "verdict"), CASES)
def test_binding_verdict(
    claim_: ResourceClaim, elapsed: float | None, verdict: BindingVerdict
) -> None:
    assert binding_verdict(claim_, elapsed, TIMEOUT) == verdict


def test_timeout_message_uses_the_configured_timeout() -> None:
    got = binding_verdict(allocated([bound()]), 30.5, 30.5)
    assert got.state is ConditionsState.TIMED_OUT
    assert "not met within 30.5s" in got.message


# --- allocated_node ----------------------------------------------------------------------


def with_selector(selector: J | None) -> ResourceClaim:
    return in_namespace(
        claim(CLAIM0, request(REQ0, "class-a")),
        allocation=allocation(selector, plain()),
    )


def fields(*requirements: J) -> J:
    return {"nodeSelectorTerms": [{"matchFields": list(requirements)}]}


@pytest.mark.parametrize(
    ("claim_", "node"),
    [
        pytest.param(with_selector(local_node_selector("node-7")), "node-7", id="pinned"),
        pytest.param(in_namespace(claim(CLAIM0)), None, id="not-allocated"),
        pytest.param(with_selector(None), None, id="no-selector"),
        pytest.param(with_selector(node_label_selector("rack", "r1")), None, id="labels-only"),
        pytest.param(
            with_selector(fields({"key": "metadata.name", "operator": "In", "values": ["a", "b"]})),
            None,
            id="two-names",
        ),
        pytest.param(
            with_selector(fields({"key": "metadata.name", "operator": "NotIn", "values": ["a"]})),
            None,
            id="notin",
        ),
    ],
)
def test_allocated_node(claim_: ResourceClaim, node: str | None) -> None:
    assert allocated_node(claim_) == node
