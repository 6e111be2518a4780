"""What the pool validator publishes for one pool: pure decisions, no I/O.

The checks themselves are in ``operators.allocator.pool_checks`` (shared with the allocator
through ``pools.pool_problems``). This module adds what depends on time (a pool incomplete,
or keeping old slices, for longer than the grace period), turns a report into the
ResourcePoolStatus status, and decides which problems are new (an Event each) by comparing
with the status published before, so a restarted validator does not repeat its Events. The
writes (the status object created, its status replaced, deleted; a request answered or
deleted) are built here too: the handlers only apply them.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from operators.allocator.features import Features
from operators.allocator.pool_availability import (
    answer,
    failed,
    pool_status,
    spec_problem,
    wanted,
)
from operators.allocator.pool_checks import (
    ERROR,
    INCOMPLETE_TOO_LONG,
    STALE_GENERATION,
    PoolReport,
    check_pool,
    severity_of,
)
from operators.allocator.pools import PoolGeneration, PoolProblem
from operators.api import limits
from operators.api.ids import PoolID
from operators.api.keys import ObjectKey
from operators.api.meta import Condition, ObjectMeta
from operators.api.poolstatus import CONDITION_COMPLETE as REQUEST_COMPLETE
from operators.api.poolstatus import CONDITION_FAILED as REQUEST_FAILED
from operators.api.poolstatus import KIND as REQUEST_KIND
from operators.api.poolstatus import ResourcePoolStatusRequest, ResourcePoolStatusRequestStatus
from operators.api.resource import DeviceTaintRule, ResourceClaim
from operators.api.timestamps import age, format_time
from operators.controllers.pool_validator.model import (
    API_VERSION,
    CONDITION_COMPLETE,
    CONDITION_VALID,
    KIND,
    CounterEntry,
    CounterSetEntry,
    DeviceCounts,
    PoolStatusSpec,
    PoolStatusStatus,
    ProblemEntry,
    ResourcePoolStatus,
)
from operators.runtime.actions import Create, Delete, PostEvent, ReplaceStatus

MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
MANAGED_BY: Final = "kopf-dra-pool-validator"
DRIVER_LABEL: Final = "dra.kopf-dra.io/driver"

STATE_VALID: Final = "valid"
STATE_INVALID: Final = "invalid"
STATE_INCOMPLETE: Final = "incomplete"
STATES: Final = (STATE_VALID, STATE_INVALID, STATE_INCOMPLETE)

_MESSAGE_MAX = 1024
_NOT_NAME = re.compile(r"[^a-z0-9.-]+")


def status_name(pool: PoolID) -> str:
    """A DNS subdomain naming the pool's ResourcePoolStatus, unique per (driver, pool).

    Readable part from both names (pool names may hold slashes and capitals are folded), then
    a hash of the exact pair: two pools whose readable parts coincide still get two objects.
    """
    digest = hashlib.sha256(f"{pool.driver}\0{pool.pool}".encode()).hexdigest()[:10]
    readable = _NOT_NAME.sub("-", f"{pool.driver}.{pool.pool}".lower())
    labels = [label.strip("-") for label in readable.split(".")]
    readable = ".".join(label for label in labels if label)
    readable = readable[: limits.DNS1123SubdomainMaxLength - len(digest) - 1].rstrip(".-")
    return f"{readable}-{digest}" if readable else f"pool-{digest}"


def status_object(pool: PoolID) -> dict[str, Any]:
    """The object to create for a pool seen for the first time (status is written after)."""
    labels = {MANAGED_BY_LABEL: MANAGED_BY}
    if len(pool.driver) <= limits.LabelValueMaxLength:
        labels[DRIVER_LABEL] = pool.driver
    return ResourcePoolStatus(
        api_version=API_VERSION,
        kind=KIND,
        metadata=ObjectMeta(name=status_name(pool), labels=labels),
        spec=PoolStatusSpec(driver=pool.driver, pool=pool.pool),
    ).dump()


def creation(pool: PoolID) -> Create:
    """The ResourcePoolStatus of a pool seen for the first time (a 409: it exists already)."""
    return Create(body=status_object(pool))


def status_write(current: Mapping[str, Any], status: dict[str, Any]) -> ReplaceStatus | None:
    """``status`` on the object as last read or written, at its version (None: it says so
    already)."""
    if current.get("status") == status:
        return None
    return ReplaceStatus(body={**current, "status": status})


def deletion(current: Mapping[str, Any]) -> Delete:
    """The status of a pool that has no slices any more: this object only (its uid)."""
    meta = current["metadata"]
    return Delete(kind=KIND, key=ObjectKey("", meta["name"]), uid=meta.get("uid"))


@dataclasses.dataclass(frozen=True)
class Timing:
    """For how long (seconds) the pool has been incomplete / kept older slices; None: not."""

    incomplete_for: float | None = None
    stale_for: float | None = None


@dataclasses.dataclass(frozen=True)
class PoolPlan:
    status: dict[str, Any]
    #: Problems not in the previously published status: one Warning Event each.
    new_problems: tuple[PoolProblem, ...]
    #: Look again after this many seconds (a grace period will end), or None.
    requeue_after: float | None
    state: str
    #: The code of every problem (the status may list fewer).
    codes: tuple[str, ...] = ()


def timed_problems(
    report: PoolReport, timing: Timing, grace: float
) -> tuple[list[PoolProblem], float | None]:
    """Problems that exist once a grace period has passed, and when the next one ends."""
    problems: list[PoolProblem] = []
    waits: list[float] = []
    if timing.incomplete_for is not None:
        if timing.incomplete_for >= grace:
            problems.append(
                PoolProblem(
                    INCOMPLETE_TOO_LONG,
                    f"only {report.slices} of {report.expected_slices} slices of generation "
                    f"{report.generation} published for more than {grace:g}s",
                )
            )
        else:
            waits.append(grace - timing.incomplete_for)
    if timing.stale_for is not None and report.stale_slices:
        if timing.stale_for >= grace:
            problems.extend(
                PoolProblem(
                    STALE_GENERATION,
                    f"slice of an older generation still present for more than {grace:g}s "
                    f"(the pool is at generation {report.generation})",
                    name,
                )
                for name in report.stale_slices
            )
        else:
            waits.append(grace - timing.stale_for)
    return problems, (min(waits) if waits else None)


def _problem_key(code: str, slice_: str, device: str, message: str) -> tuple[str, ...]:
    return (code, slice_, device, message)


def _entry(problem: PoolProblem) -> ProblemEntry:
    entry = ProblemEntry(
        code=problem.code,
        severity=severity_of(problem.code),
        message=problem.message[:_MESSAGE_MAX],
    )
    if problem.slice:
        entry.slice = problem.slice
    if problem.device:
        entry.device = problem.device
    return entry


def describe(pool: PoolID, problem: PoolProblem) -> str:
    """The problem with its coordinates first, for Events and condition messages."""
    where = [f"pool {pool}"]
    if problem.slice:
        where.append(f"slice {problem.slice}")
    if problem.device:
        where.append(f"device {problem.device}")
    return f"{', '.join(where)}: {problem.message}"


def _condition(
    type_: str, status: str, reason: str, message: str, previous: Condition | None, now: str
) -> Condition:
    """A condition that keeps its lastTransitionTime while its status stays the same."""
    since = (
        previous.last_transition_time
        if previous is not None and previous.status == status and previous.last_transition_time
        else now
    )
    return Condition(
        type=type_,
        status=status,
        reason=reason,
        message=message[:_MESSAGE_MAX],
        last_transition_time=since,
    )


def _complete_condition(report: PoolReport, previous: Condition | None, now: str) -> Condition:
    counted = (
        f"{report.slices} of {report.expected_slices} slices of generation {report.generation}"
    )
    if report.complete:
        return _condition(CONDITION_COMPLETE, "True", "AllSlicesPublished", counted, previous, now)
    reason = "TooManySlices" if report.slices > report.expected_slices else "SlicesMissing"
    return _condition(CONDITION_COMPLETE, "False", reason, counted, previous, now)


def _valid_condition(
    report: PoolReport, problems: list[PoolProblem], previous: Condition | None, now: str
) -> Condition:
    errors = [p for p in problems if severity_of(p.code) == ERROR]
    if errors:
        first = describe(report.id, errors[0])
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return _condition(CONDITION_VALID, "False", errors[0].code, first + more, previous, now)
    if not report.complete:
        return _condition(
            CONDITION_VALID,
            "Unknown",
            "Incomplete",
            "no problem found so far; references are checked once all slices are published",
            previous,
            now,
        )
    warnings = len(problems)
    message = "all checks passed" + (f" ({warnings} warnings)" if warnings else "")
    return _condition(CONDITION_VALID, "True", "Valid", message, previous, now)


def state_of(status: PoolStatusStatus) -> str:
    """valid / invalid / incomplete, for metrics: invalid wins over incomplete."""
    valid = status.condition(CONDITION_VALID)
    complete = status.condition(CONDITION_COMPLETE)
    if valid is not None and valid.status == "False":
        return STATE_INVALID
    if complete is None or complete.status != "True":
        return STATE_INCOMPLETE
    return STATE_VALID


def plan_pool(
    report: PoolReport,
    previous: PoolStatusStatus | None,
    timing: Timing,
    *,
    grace: float,
    now: str,
    max_problems: int = 64,
) -> PoolPlan:
    """The status to publish for ``report`` and the problems to announce.

    ``now`` is the RFC 3339 time for conditions that change; ``previous`` the status as
    published (None for a pool seen for the first time).
    """
    extra, requeue_after = timed_problems(report, timing, grace)
    problems = [*report.problems, *extra]
    before = previous or PoolStatusStatus()
    status = PoolStatusStatus(
        conditions=[
            _complete_condition(report, before.condition(CONDITION_COMPLETE), now),
            _valid_condition(report, problems, before.condition(CONDITION_VALID), now),
        ],
        generation=report.generation,
        slices=report.slices,
        expected_slices=report.expected_slices,
        stale_slices=list(report.stale_slices),
        devices=DeviceCounts(total=report.devices, allocated=report.allocated_devices),
        counter_sets=_counter_sets(report),
        problem_count=len(problems),
        problems=[_entry(p) for p in problems[:max_problems]],
    )
    published = {
        _problem_key(e.code, e.slice or "", e.device or "", e.message) for e in before.problems
    }
    new = tuple(
        p
        for p in problems
        if _problem_key(p.code, p.slice, p.device, p.message[:_MESSAGE_MAX]) not in published
    )
    return PoolPlan(
        status.dump(), new, requeue_after, state_of(status), tuple(p.code for p in problems)
    )


def _counter_sets(report: PoolReport) -> list[CounterSetEntry]:
    sets: dict[str, CounterSetEntry] = {}
    for usage in report.counters:
        entry = sets.get(usage.counter_set)
        if entry is None:
            entry = sets[usage.counter_set] = CounterSetEntry(name=usage.counter_set)
            if usage.slice:
                entry.slice = usage.slice
        entry.counters.append(
            CounterEntry(name=usage.counter, consumed=str(usage.consumed), total=str(usage.total))
        )
    return list(sets.values())


def double_allocation_events(
    pool: PoolID, problem: PoolProblem, claims: Sequence[ResourceClaim]
) -> list[PostEvent]:
    """A Warning on every claim that holds the device twice allocated: the users who own the
    claims see it with ``kubectl describe resourceclaim`` (the scheduler repairs it)."""
    device = pool.device(problem.device)
    holders = [c for c in claims if device in c.allocated_device_ids()]
    return [
        PostEvent(
            obj=claim.dump(),
            type="Warning",
            reason=problem.code,
            message=f"device {device} is also allocated to "
            + ", ".join(sorted(other.key for other in holders if other is not claim)),
        )
        for claim in holders
    ]


# --- ResourcePoolStatusRequests (KEP-5677) ----------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RequestLifetimes:
    """kube-controller-manager's TTLs and the requeue while a pool is incomplete."""

    completed_ttl: float
    pending_ttl: float
    incomplete_retries: int
    incomplete_retry_delay: float


@dataclasses.dataclass(frozen=True)
class RequestStep:
    """What to do with one request now: write ``status``, delete it, and/or look again later."""

    status: dict[str, Any] | None = None
    delete: bool = False
    requeue_after: float | None = None
    #: The incomplete pools that made this step wait instead of answering.
    waiting_for: tuple[str, ...] = ()


def request_answer(body: Mapping[str, Any], status: dict[str, Any]) -> ReplaceStatus:
    """The request as read, with its answer, at the version read (answered once: a 409 when
    someone else answered meanwhile)."""
    return ReplaceStatus(body={**body, "status": status})


def request_deletion(request: ResourcePoolStatusRequest) -> Delete:
    """A request past its TTL: this one only (its uid)."""
    return Delete(
        kind=REQUEST_KIND,
        key=ObjectKey("", request.metadata.name or ""),
        uid=request.metadata.uid or "",
    )


def _finished_at(status: ResourcePoolStatusRequestStatus) -> str | None:
    for type_ in (REQUEST_COMPLETE, REQUEST_FAILED):
        cond = status.condition(type_)
        if cond is not None and cond.last_transition_time:
            return cond.last_transition_time
    return None


def plan_request(
    request: ResourcePoolStatusRequest,
    groups: Sequence[PoolGeneration],
    claims: Sequence[ResourceClaim],
    features: Features,
    now: datetime.datetime,
    attempts: int,
    lifetimes: RequestLifetimes,
    taint_rules: Sequence[DeviceTaintRule] = (),
) -> RequestStep:
    """Answer once; delete an answered request ``completed_ttl`` after it finished and an
    unanswered one ``pending_ttl`` after it was made (a stuck request must not stay for
    ever); while a pool it asks about is still being published, look again up to
    ``incomplete_retries`` times, then answer with that pool's validationError (1.36 drops
    such a request instead and leaves it unanswered until its pending TTL).

    ``groups`` are the newest generations of every pool of the request's driver; ``attempts``
    the times this request already waited for incomplete pools.
    """
    created = age(request.metadata.creation_timestamp, now)
    if request.status is not None:
        finished = age(_finished_at(request.status), now)
        elapsed = finished if finished is not None else created
        left = lifetimes.completed_ttl - (elapsed or 0.0)
        return RequestStep(delete=True) if left <= 0 else RequestStep(requeue_after=left)
    pending_left = lifetimes.pending_ttl - (created or 0.0)
    if pending_left <= 0:
        return RequestStep(delete=True)
    stamp = format_time(now)
    problem = spec_problem(request.spec)
    if problem is not None:
        failed_status = failed(
            f"ResourcePoolStatusRequest {request.metadata.name}: {problem}", stamp
        )
        return RequestStep(status=_dump(failed_status), requeue_after=lifetimes.completed_ttl)
    chosen = [g for g in groups if wanted(request.spec, g)]
    incomplete = tuple(sorted(str(g.id) for g in chosen if not g.complete))
    if incomplete and attempts < lifetimes.incomplete_retries:
        delay = min(lifetimes.incomplete_retry_delay, pending_left)
        return RequestStep(requeue_after=delay, waiting_for=incomplete)
    pools = [
        pool_status(
            g,
            check_pool(g, claims, features),
            claims,
            features,
            taint_rules,
            request.spec.default_partition_type_attribute,
        )
        for g in chosen
    ]
    answered = answer(request.spec, pools, stamp)
    return RequestStep(status=_dump(answered), requeue_after=lifetimes.completed_ttl)


def _dump(status: ResourcePoolStatusRequestStatus) -> dict[str, Any]:
    return status.model_dump(mode="json", by_alias=True, exclude_unset=True)


def domain_devices(
    pools: Mapping[tuple[str, str], tuple[str | None, int, int]],
    domain_of: Mapping[str, str],
) -> dict[str, tuple[int, int]]:
    """Devices (total, allocated) per topology domain: the pools (each with the node it is
    local to, if one, and its devices) summed by the domain of their node (``domain_of``:
    node -> its label's value, nodes without one left out, as a pool not local to one node)."""
    out: dict[str, tuple[int, int]] = {}
    for node, total, allocated in pools.values():
        domain = domain_of.get(node or "")
        if not domain:
            continue
        have = out.get(domain, (0, 0))
        out[domain] = (have[0] + total, have[1] + allocated)
    return dict(sorted(out.items()))
