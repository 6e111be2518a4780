"""Leader election on a coordination.k8s.io/v1 Lease, with fencing of every write.

The rules are client-go's, as kube-scheduler runs them (lease 15 s, renew deadline 10 s,
retry 2 s):

- A candidate never compares another host's ``renewTime`` with its own clock. It notes, on
  its own monotonic clock, when it last saw the lease record change (client-go's
  observedTime) and takes the lease over only once ``leaseDurationSeconds`` have passed
  since then without a change.
- The holder renews every ``retry_period``. It may write only while its last successful
  renewal was *sent* less than ``renew_deadline`` ago: ``fence()`` checks that right before
  each write. Because ``renew_deadline < lease_duration``, and every other replica waits a full
  lease duration after *seeing* that renewal, a leader that cannot renew in time (a paused
  process, a hung request, a partition) stops writing before anyone else can take over.
- Every lease write is a PUT with the lease's resourceVersion: two candidates never both win.

``single_replica`` is what ``--no-leader-elect`` means: the replica still takes the Lease before
writing (so two such replicas cannot both write), and says loudly why it waits when the Lease is
held by someone else.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Final

import structlog

from operators.api.timestamps import format_micro_time
from operators.kube.api import ApiError, ConflictError, KubeAPI, NotFoundError
from operators.runtime import metrics
from operators.runtime.clock import Clock
from operators.runtime.errors import NotLeaderError

log = structlog.get_logger(__name__)

# Spare time a renewal request needs so that its answer still arrives before the deadline.
MIN_REQUEST_TIMEOUT = 0.5


@dataclasses.dataclass(frozen=True)
class LeaseConfig:
    name: str
    namespace: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    single_replica: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                f"lease {self.namespace}/{self.name}: need 0 < retry period "
                f"({self.retry_period:g}s) < renew deadline ({self.renew_deadline:g}s) < "
                f"lease duration ({self.lease_duration:g}s)"
            )


def default_identity() -> str:
    """Host name plus a random suffix: two replicas on one host, or a restart racing its
    predecessor, never share an identity."""
    return f"{os.uname().nodename}-{uuid.uuid4().hex[:6]}"


def _record(spec: dict[str, Any]) -> tuple[Any, ...]:
    """What must change for a candidate to know the holder is alive."""
    return (
        spec.get("holderIdentity"),
        spec.get("renewTime"),
        spec.get("acquireTime"),
        spec.get("leaseTransitions"),
        spec.get("leaseDurationSeconds"),
    )


TOLERATED_EXPIRY: Final = 20.0


class LeaderElector:
    """Runs ``on_started`` when this replica becomes leader and ``on_stopped`` when it stops."""

    def __init__(
        self,
        api: KubeAPI,
        config: LeaseConfig,
        *,
        clock: Clock,
        on_started: Callable[[], Awaitable[None]],
        on_stopped: Callable[[], Awaitable[None]],
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        self.api = api
        self.config = config
        self.clock = clock
        self.on_started = on_started
        self.on_stopped = on_stopped
        self.on_change = on_change
        self.is_leader = False
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._renewed_at: float | None = None  # when the last successful renewal was sent
        self._reported_holder: str | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def lease(self) -> str:
        return f"{self.config.namespace}/{self.config.name}"

    # --- fencing -------------------------------------------------------------------------

    def holds_lease(self) -> bool:
        """Leader, with a renewal sent less than the renew deadline ago."""
        if not self.is_leader or self._renewed_at is None:
            return False
        return self.clock.monotonic() - self._renewed_at < self.config.renew_deadline

    def fence(self) -> float:
        """Raise NotLeaderError unless this replica may write now.

        Returns the seconds until another replica could take the lease over at the earliest:
        a write must not take longer than that (it is the cap of its timeout).
        """
        if not self.holds_lease():
            raise NotLeaderError(
                f"this replica does not hold the lease {self.lease} (or could not renew it "
                f"within {self.config.renew_deadline:g}s): no writes"
            )
        assert self._renewed_at is not None
        return self._renewed_at + self.config.lease_duration - self.clock.monotonic()

    def problem(self) -> str | None:
        """Liveness, as kube's leader-election health check: the election has stopped (a
        callback raised), or this replica still leads on a lease expired 20 s ago."""
        if self._task is not None and self._task.done() and not self._task.cancelled():
            error = self._task.exception()
            return f"the election for {self.lease} has ended: {error!r}"
        if self.is_leader and self._renewed_at is not None:
            expired = self.clock.monotonic() - self._renewed_at - self.config.lease_duration
            if expired > TOLERATED_EXPIRY:
                return f"still leading on the lease {self.lease}, expired {expired:.0f}s ago"
        return None

    # --- one round -----------------------------------------------------------------------

    def _spec(self, *, acquire_time: str | None, transitions: int) -> dict[str, Any]:
        now = format_micro_time(self.clock.now())
        return {
            "holderIdentity": self.config.identity,
            "leaseDurationSeconds": int(self.config.lease_duration),
            "acquireTime": acquire_time or now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def _observe(self, spec: dict[str, Any]) -> None:
        record = _record(spec)
        if record != self._observed:
            self._observed = record
            self._observed_at = self.clock.monotonic()

    def _held_elsewhere(self, spec: dict[str, Any]) -> str | None:
        """The other holder, while its lease has not expired by our own observation."""
        holder = spec.get("holderIdentity")
        if not holder or holder == self.config.identity:
            return None
        duration = float(spec.get("leaseDurationSeconds") or self.config.lease_duration)
        if self.clock.monotonic() - self._observed_at < duration:
            return str(holder)
        return None

    async def try_acquire_or_renew(self, limit: float | None = None) -> bool:
        """One round of the election; True when this replica holds the lease afterwards.
        ``limit`` bounds each request (a renewal must not outlive the renew deadline)."""
        c = self.config
        try:
            lease = await self.api.get("Lease", c.name, c.namespace, request_timeout=limit)
        except NotFoundError:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": c.name, "namespace": c.namespace},
                "spec": self._spec(acquire_time=None, transitions=0),
            }
            sent = self.clock.monotonic()
            try:
                created = await self.api.create(body, request_timeout=limit)
            except ConflictError:
                return False
            self._won(created, sent)
            return True
        spec = lease.get("spec") or {}
        self._observe(spec)
        other = self._held_elsewhere(spec)
        if other is not None:
            self._report_holder(other)
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        if spec.get("holderIdentity") == c.identity:
            lease["spec"] = {
                **spec,
                **self._spec(acquire_time=spec.get("acquireTime"), transitions=transitions),
            }
        else:
            lease["spec"] = self._spec(acquire_time=None, transitions=transitions + 1)
        sent = self.clock.monotonic()
        try:
            written = await self.api.replace(lease, request_timeout=limit)
        except ConflictError:
            return False
        self._won(written, sent)
        return True

    def _won(self, lease: dict[str, Any], sent: float) -> None:
        self._renewed_at = sent
        self._observe(lease.get("spec") or {})
        self._reported_holder = None

    def _report_holder(self, holder: str) -> None:
        if holder == self._reported_holder:
            return
        self._reported_holder = holder
        if self.config.single_replica:
            log.error(
                "another replica holds the lease; this one was started as the single replica "
                "(leader election off) and does not write while the lease is held elsewhere",
                lease=self.lease,
                holder=holder,
            )
        else:
            log.info("standing by: the lease is held", lease=self.lease, holder=holder)

    # --- the loop ------------------------------------------------------------------------

    async def _round(self, limit: float | None) -> bool:
        try:
            return await self.try_acquire_or_renew(limit)
        except (ApiError, OSError, TimeoutError) as e:
            log.warning("leader election round failed", lease=self.lease, error=str(e))
            return False

    async def _campaign(self) -> None:
        while True:
            if await self._round(self.config.retry_period):
                return
            await asyncio.sleep(self.config.retry_period)

    async def _keep(self) -> None:
        """Renew every retry period until a renewal cannot be made within the deadline."""
        while True:
            await asyncio.sleep(self.config.retry_period)
            while True:
                assert self._renewed_at is not None
                left = self._renewed_at + self.config.renew_deadline - self.clock.monotonic()
                if left <= 0:
                    return
                if await self._round(max(MIN_REQUEST_TIMEOUT, left)):
                    break
                if self.clock.monotonic() - self._renewed_at >= self.config.renew_deadline:
                    return
                await asyncio.sleep(min(self.config.retry_period, max(0.0, left) / 2))

    async def _loop(self) -> None:
        while True:
            await self._campaign()
            self._set_leader(True)
            log.info("became leader", lease=self.lease, identity=self.config.identity)
            await self.on_started()
            await self._keep()
            self._set_leader(False)
            log.warning(
                "lost leadership: could not renew the lease in time; writes stopped",
                lease=self.lease,
                renew_deadline_s=self.config.renew_deadline,
            )
            await self.on_stopped()

    def _set_leader(self, leader: bool) -> None:
        self.is_leader = leader
        metrics.LEADER.labels(self.config.name).set(1 if leader else 0)
        if self.on_change is not None:
            self.on_change(leader)

    def start(self) -> None:
        if self._task is None:
            metrics.LEADER.labels(self.config.name).set(0)
            self._task = asyncio.create_task(self._loop(), name="leader-election")

    async def stop(self, release: bool = True) -> None:
        """Stop campaigning; a leader gives the lease up so a standby takes over at once."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self.is_leader:
            holds = self.holds_lease()
            self._set_leader(False)
            await self.on_stopped()
            if release and holds:
                await self._release()

    async def _release(self) -> None:
        c = self.config
        with contextlib.suppress(ApiError, OSError, TimeoutError):
            lease = await self.api.get("Lease", c.name, c.namespace)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") == c.identity:
                lease["spec"] = {
                    **spec,
                    "holderIdentity": None,
                    "renewTime": format_micro_time(self.clock.now()),
                    "leaseDurationSeconds": 1,
                }
                await self.api.replace(lease)
