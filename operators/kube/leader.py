"""Leader election on a coordination.k8s.io/v1 Lease, as kube-scheduler does it.

kopf's peering only pauses operators by priority and has no leases, so replicas of a component
that must act once (the scheduler) elect a leader here: the holder renews the lease every
``retry_period``; others take it over once it has not been renewed for ``lease_duration``.
Every write is a PUT with the lease's resourceVersion, so two candidates never both win.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import os
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from operators.kube.api import ApiError, ConflictError, KubeAPI, NotFoundError

log = structlog.get_logger(__name__)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _format(t: datetime.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: str | None) -> datetime.datetime | None:
    if not text:
        return None
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclasses.dataclass
class LeaseSettings:
    name: str
    namespace: str
    identity: str
    lease_duration: float = 10.0
    retry_period: float = 2.0


class LeaderElector:
    """Runs ``on_started`` when this replica becomes leader and ``on_stopped`` when it stops."""

    def __init__(
        self,
        api: KubeAPI,
        settings: LeaseSettings,
        on_started: Callable[[], Awaitable[None]],
        on_stopped: Callable[[], Awaitable[None]],
    ) -> None:
        self.api = api
        self.settings = settings
        self.on_started = on_started
        self.on_stopped = on_stopped
        self.is_leader = False
        self._task: asyncio.Task[None] | None = None

    def _spec(self, acquire: bool, transitions: int) -> dict[str, Any]:
        now = _format(_now())
        spec: dict[str, Any] = {
            "holderIdentity": self.settings.identity,
            "leaseDurationSeconds": int(self.settings.lease_duration),
            "renewTime": now,
            "leaseTransitions": transitions,
        }
        if acquire:
            spec["acquireTime"] = now
        return spec

    async def try_acquire_or_renew(self) -> bool:
        """One round of the election; True when this replica holds the lease afterwards."""
        s = self.settings
        try:
            lease = await self.api.get("Lease", s.name, s.namespace)
        except NotFoundError:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": s.name, "namespace": s.namespace},
                "spec": self._spec(acquire=True, transitions=0),
            }
            try:
                await self.api.create(body)
            except ConflictError:
                return False
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder == s.identity:
            lease["spec"] = {**spec, **self._spec(acquire=False, transitions=transitions)}
        else:
            renewed = _parse(spec.get("renewTime")) or _parse(spec.get("acquireTime"))
            duration = float(spec.get("leaseDurationSeconds") or s.lease_duration)
            if holder and renewed is not None and (_now() - renewed).total_seconds() < duration:
                return False
            lease["spec"] = self._spec(acquire=True, transitions=transitions + 1)
        try:
            await self.api.replace(lease)
        except ConflictError:
            return False
        return True

    async def _loop(self) -> None:
        while True:
            try:
                leader = await self.try_acquire_or_renew()
            except (ApiError, OSError) as e:
                log.warning("leader election round failed", error=str(e))
                leader = False
            if leader and not self.is_leader:
                self.is_leader = True
                log.info("became leader", lease=f"{self.settings.namespace}/{self.settings.name}")
                await self.on_started()
            elif not leader and self.is_leader:
                self.is_leader = False
                log.warning("lost leadership")
                await self.on_stopped()
            await asyncio.sleep(self.settings.retry_period)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="leader-election")

    async def stop(self, release: bool = True) -> None:
        """Stop campaigning; a leader gives the lease up so a standby takes over at once."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self.is_leader:
            self.is_leader = False
            await self.on_stopped()
            if release:
                await self._release()

    async def _release(self) -> None:
        s = self.settings
        with contextlib.suppress(ApiError, OSError):
            lease = await self.api.get("Lease", s.name, s.namespace)
            if (lease.get("spec") or {}).get("holderIdentity") == s.identity:
                lease["spec"]["holderIdentity"] = None
                lease["spec"]["renewTime"] = None
                await self.api.replace(lease)


def elector(
    api: KubeAPI,
    *,
    name: str,
    namespace: str,
    identity: str | None,
    lease_duration: float,
    on_started: Callable[[], Awaitable[None]],
    on_stopped: Callable[[], Awaitable[None]],
) -> LeaderElector:
    """An elector with kube-scheduler's proportions: renew every fifth of the lease (>= 1 s).

    Without an explicit identity, the host name plus a random suffix, so that two replicas on
    one host (or a restart that races its predecessor) never share one.
    """
    return LeaderElector(
        api,
        LeaseSettings(
            name,
            namespace,
            identity or f"{os.uname().nodename}-{uuid.uuid4().hex[:6]}",
            lease_duration=lease_duration,
            retry_period=max(1.0, lease_duration / 5),
        ),
        on_started=on_started,
        on_stopped=on_stopped,
    )
