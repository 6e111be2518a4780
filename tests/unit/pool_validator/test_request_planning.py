"""A ResourcePoolStatusRequest's lifecycle, decided without a cluster: answered once, the
requeue while a pool is incomplete, and the TTLs of kube-controller-manager 1.36."""

from __future__ import annotations

import datetime
from typing import Any

from operators.api.poolstatus import ResourcePoolStatusRequest
from operators.controllers.pool_validator.planning import (
    RequestLifetimes,
    plan_request,
    request_answer,
    request_deletion,
)
from operators.runtime.actions import Delete, ReplaceStatus
from tests.unit.pool_validator.builders import ALL, DRIVER, claim, device, group, result, slice_

CREATED = "2026-01-01T00:00:00Z"
T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
LIFETIMES = RequestLifetimes(
    completed_ttl=3600.0, pending_ttl=86400.0, incomplete_retries=5, incomplete_retry_delay=2.0
)


def request(status: dict[str, Any] | None = None, **spec: Any) -> ResourcePoolStatusRequest:
    body: dict[str, Any] = {
        "metadata": {
            "name": "r",
            "uid": "ru",
            "resourceVersion": "3",
            "creationTimestamp": CREATED,
        },
        "spec": {"driver": DRIVER, **spec},
    }
    if status is not None:
        body["status"] = status
    return ResourcePoolStatusRequest.load(body)


def at(seconds: float) -> datetime.datetime:
    return T0 + datetime.timedelta(seconds=seconds)


COMPLETE = {
    "pools": [],
    "conditions": [
        {"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:10:00Z"}
    ],
}


def test_a_new_request_is_answered_and_looked_at_again_at_its_ttl() -> None:
    pool = group(slice_("s", device("d0"), device("d1")))
    step = plan_request(request(), [pool], [claim("a", result("d0"))], ALL, at(5), 0, LIFETIMES)
    assert step.status is not None
    (answered,) = step.status["pools"]
    assert (answered["totalDevices"], answered["availableDevices"]) == (2, 1)
    assert step.status["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:00:05Z"
    assert (step.delete, step.requeue_after) == (False, 3600.0)


def test_the_answer_is_written_on_the_request_as_read_and_the_deletion_names_its_uid() -> None:
    pool = group(slice_("s", device("d0")))
    r = request()
    step = plan_request(r, [pool], [], ALL, at(5), 0, LIFETIMES)
    assert step.status is not None
    body = r.dump()
    answer = request_answer(body, step.status)
    assert isinstance(answer, ReplaceStatus)
    assert answer.body == {**body, "status": step.status}
    deletion = request_deletion(r)
    assert isinstance(deletion, Delete)
    assert (deletion.kind, deletion.key, deletion.uid) == (
        "ResourcePoolStatusRequest",
        ("", "r"),
        "ru",
    )


def test_an_answered_request_is_never_answered_again_and_goes_an_hour_after() -> None:
    pool = group(slice_("s", device("d0")))
    before = plan_request(request(COMPLETE), [pool], [], ALL, at(600 + 3000), 0, LIFETIMES)
    assert (before.status, before.delete, before.requeue_after) == (None, False, 600.0)
    after = plan_request(request(COMPLETE), [pool], [], ALL, at(600 + 3600), 0, LIFETIMES)
    assert (after.status, after.delete) == (None, True)


def test_an_incomplete_pool_is_waited_for_then_answered_with_its_validation_error() -> None:
    pool = group(slice_("s-0", device("d0"), count=2))
    waiting = plan_request(request(), [pool], [], ALL, at(1), 4, LIFETIMES)
    assert (waiting.status, waiting.requeue_after) == (None, 2.0)
    assert waiting.waiting_for == (f"{DRIVER}/node-1",)
    done = plan_request(request(), [pool], [], ALL, at(9), 5, LIFETIMES)
    assert done.status is not None
    assert "validationError" in done.status["pools"][0]
    assert done.status["conditions"][0]["message"] == "Calculated status for 1 pools (1 incomplete)"


def test_an_unanswered_request_goes_after_a_day() -> None:
    pool = group(slice_("s-0", device("d0"), count=2))
    step = plan_request(request(), [pool], [], ALL, at(86400), 0, LIFETIMES)
    assert (step.status, step.delete) == (None, True)


def test_a_request_it_cannot_answer_fails_naming_the_field() -> None:
    step = plan_request(request(limit=5000), [], [], ALL, at(1), 0, LIFETIMES)
    assert step.status is not None
    (failed,) = step.status["conditions"]
    assert (failed["type"], failed["reason"]) == ("Failed", "CalculationFailed")
    assert failed["message"].startswith("ResourcePoolStatusRequest r: spec.limit")
    assert step.status["poolCount"] == 0


def test_other_drivers_and_pools_are_left_out() -> None:
    mine = group(slice_("s", device("d0")))
    other = group(slice_("o", device("d0"), driver="nic.example.com"))
    step = plan_request(request(poolName="node-1"), [mine, other], [], ALL, at(1), 0, LIFETIMES)
    assert step.status is not None
    assert [p["poolName"] for p in step.status["pools"]] == ["node-1"]
    assert step.status["poolCount"] == 1
