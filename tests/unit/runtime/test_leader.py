"""Leader election and write fencing, on a fake clock and an in-memory Lease.

The elector's rules are what keep two replicas from writing at once; they depend only on the
order of lease reads and writes and on elapsed time, so a Lease store with resourceVersion
preconditions and a clock the test moves are enough to check them exactly. The integration
and chaos suites run the same code against a real API server.
"""

from __future__ import annotations

import copy
import datetime
from typing import Any

import pytest

from operators.kube.api import ConflictError, NotFoundError
from operators.runtime.errors import NotLeaderError
from operators.runtime.leader import LeaderElector, LeaseConfig


class FakeClock:
    def __init__(self) -> None:
        self.seconds = 1000.0
        self.wall = datetime.datetime(2026, 11, 26, tzinfo=datetime.UTC)

    def now(self) -> datetime.datetime:
        return self.wall + datetime.timedelta(seconds=self.seconds)

    def monotonic(self) -> float:
        return self.seconds

    def advance(self, seconds: float) -> None:
        self.seconds += seconds


class LeaseStore:
    """get/create/replace of one Lease with resourceVersion preconditions, as the API server."""

    def __init__(self, clock: FakeClock | None = None, request_seconds: float = 0.0) -> None:
        self.body: dict[str, Any] | None = None
        self.version = 0
        self.clock = clock
        self.request_seconds = request_seconds  # time each write takes (on ``clock``)

    def _took(self) -> None:
        if self.clock is not None:
            self.clock.advance(self.request_seconds)

    async def get(self, kind: str, name: str, namespace: str, **_: Any) -> dict[str, Any]:
        if self.body is None:
            raise NotFoundError(404, "NotFound", "lease", {})
        return copy.deepcopy(self.body)

    async def create(self, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        self._took()
        if self.body is not None:
            raise ConflictError(409, "AlreadyExists", "lease", {})
        return self._store(body)

    async def replace(self, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        self._took()
        assert self.body is not None
        if body["metadata"].get("resourceVersion") != self.body["metadata"]["resourceVersion"]:
            raise ConflictError(409, "Conflict", "lease", {})
        return self._store(body)

    def _store(self, body: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        self.body = copy.deepcopy(body)
        self.body["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(self.body)


CONFIG = LeaseConfig("lease", "ns", "one", lease_duration=15, renew_deadline=10, retry_period=2)


def elector(
    store: LeaseStore, clock: FakeClock, identity: str = "one", **changes: Any
) -> LeaderElector:
    config = LeaseConfig(**{**CONFIG.__dict__, "identity": identity, **changes})

    async def nothing() -> None:
        return None

    return LeaderElector(
        store,  # type: ignore[arg-type]
        config,
        clock=clock,
        on_started=nothing,
        on_stopped=nothing,
    )


async def lead(e: LeaderElector) -> None:
    assert await e.try_acquire_or_renew()
    e.is_leader = True  # what the loop does after a won round


async def test_the_first_candidate_creates_the_lease_and_may_write() -> None:
    clock, store = FakeClock(), LeaseStore()
    one = elector(store, clock)
    await lead(one)
    assert store.body is not None
    assert store.body["spec"]["holderIdentity"] == "one"
    assert store.body["spec"]["leaseDurationSeconds"] == 15
    assert one.fence() == pytest.approx(15)


async def test_a_standby_cannot_write() -> None:
    clock, store = FakeClock(), LeaseStore()
    await lead(elector(store, clock))
    two = elector(store, clock, "two")
    assert not await two.try_acquire_or_renew()
    with pytest.raises(NotLeaderError):
        two.fence()


async def test_takeover_waits_a_lease_duration_on_the_candidates_own_clock() -> None:
    """The holder's renewTime is far in the past by the candidate's wall clock (skew): only
    the time the candidate itself saw the record unchanged counts."""
    clock, store = FakeClock(), LeaseStore()
    await lead(elector(store, clock))
    assert store.body is not None
    store.body["spec"]["renewTime"] = "2000-01-01T00:00:00.000000Z"
    two = elector(store, clock, "two")
    assert not await two.try_acquire_or_renew()  # first sight: the clock starts now
    clock.advance(14.9)
    assert not await two.try_acquire_or_renew()
    clock.advance(0.2)
    assert await two.try_acquire_or_renew()
    assert store.body["spec"]["holderIdentity"] == "two"
    assert store.body["spec"]["leaseTransitions"] == 1


async def test_every_renewal_restarts_the_standbys_wait() -> None:
    clock, store = FakeClock(), LeaseStore()
    one, two = elector(store, clock), elector(store, clock, "two")
    await lead(one)
    assert not await two.try_acquire_or_renew()
    for _ in range(5):
        clock.advance(10)
        assert await one.try_acquire_or_renew()
        assert not await two.try_acquire_or_renew()
    clock.advance(14)
    assert not await two.try_acquire_or_renew()


async def test_a_paused_leader_stops_writing_before_anyone_can_take_over() -> None:
    clock, store = FakeClock(), LeaseStore()
    one, two = elector(store, clock), elector(store, clock, "two")
    await lead(one)
    assert not await two.try_acquire_or_renew()  # the standby saw the renewal
    clock.advance(9.9)
    one.fence()  # still within the renew deadline
    clock.advance(0.2)  # paused past it (SIGSTOP, a stalled loop): no round has run
    with pytest.raises(NotLeaderError):
        one.fence()
    assert not await two.try_acquire_or_renew()  # and nobody else may write yet either
    clock.advance(5)
    assert await two.try_acquire_or_renew()
    with pytest.raises(NotLeaderError):
        one.fence()  # the resumed old leader never writes again
    assert not await one.try_acquire_or_renew()


async def test_the_deadline_counts_from_when_the_renewal_was_sent() -> None:
    """A renewal whose answer took 4 s bought 10 s from its sending, not from its answer."""
    clock = FakeClock()
    store = LeaseStore(clock, request_seconds=4)
    one = elector(store, clock)
    await lead(one)
    assert one.fence() == pytest.approx(15 - 4)
    clock.advance(6.1)
    with pytest.raises(NotLeaderError):
        one.fence()


async def test_a_released_lease_is_taken_at_once() -> None:
    clock, store = FakeClock(), LeaseStore()
    one, two = elector(store, clock), elector(store, clock, "two")
    await lead(one)
    assert not await two.try_acquire_or_renew()
    await one._release()
    assert await two.try_acquire_or_renew()


async def test_a_single_replica_still_needs_the_lease_and_says_why_it_waits(
    capsys: pytest.CaptureFixture[str],
) -> None:
    clock, store = FakeClock(), LeaseStore()
    await lead(elector(store, clock, single_replica=True))
    second = elector(store, clock, "two", single_replica=True)
    assert not await second.try_acquire_or_renew()
    assert not await second.try_acquire_or_renew()
    logged = capsys.readouterr().out
    assert logged.count("started as the single replica") == 1  # once per holder, not per round
    with pytest.raises(NotLeaderError):
        second.fence()


def test_timings_must_leave_the_leader_time_to_stop() -> None:
    with pytest.raises(ValueError, match="renew deadline"):
        LeaseConfig("l", "ns", "i", lease_duration=10, renew_deadline=10, retry_period=2)


async def test_liveness_fails_when_the_election_ends_or_a_leader_outlives_its_lease() -> None:
    """kube's leader-election health check, plus a failed start hook: both need a restart."""
    clock, store = FakeClock(), LeaseStore()

    async def broken() -> None:
        raise RuntimeError("activate failed")

    one = elector(store, clock)
    one.on_started = broken
    assert one.problem() is None
    one.start()
    with pytest.raises(RuntimeError):
        await one._task  # type: ignore[misc]
    assert one.problem() == "the election for ns/lease has ended: RuntimeError('activate failed')"

    two = elector(LeaseStore(), clock, "two")
    await lead(two)
    clock.advance(15 + 20)
    assert two.problem() is None  # expired, but within the tolerated 20 s
    clock.advance(1)
    assert two.problem() == "still leading on the lease ns/lease, expired 21s ago"
