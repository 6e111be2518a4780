"""Permit for pod groups (GangScheduling's): a gang's pods placed by a cycle wait here, in their
binding task (``binder``), until ``minCount`` pods of the group are placed (bound, or being bound
by this replica), or give up after ``--gang-permit-timeout``. The group's events wake them."""

from __future__ import annotations

import asyncio
from collections.abc import Container
from typing import Protocol

from operators.api.keys import ObjectKey
from operators.controllers.scheduler.protocol import SchedulerIO
from operators.controllers.scheduler.queueing import SchedulingQueue
from operators.controllers.scheduler.settings import SchedulerSettings
from operators.scheduling.groups import key_of


class Scheduler(SchedulerIO, Protocol):
    """What Permit uses of its scheduler (the handlers' ``Scheduler``)."""

    settings: SchedulerSettings
    queue: SchedulingQueue
    binder: Container[ObjectKey]


def go_duration(seconds: float) -> str:
    """Go's ``time.Duration`` spelling of whole seconds ("5m0s"), as upstream's messages."""
    total = int(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


class Permit:
    """The Permit waits of one scheduler replica, by PodGroup."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        #: PodGroup -> an event set when the group or one of its pods changes.
        self.waiters: dict[ObjectKey, asyncio.Event] = {}

    def changed(self, group: ObjectKey) -> None:
        """The PodGroup or one of its pods changed: its waiters look again."""
        event = self.waiters.get(group)
        if event is not None:
            event.set()

    def placed(self, group: ObjectKey) -> int:
        """The group's pods bound, or being bound by this replica (upstream's
        ``ScheduledPodsCount``: assigned and assumed)."""
        s = self.scheduler
        return sum(
            1
            for pod in s.cache.group_pods(group)
            if pod.spec.node_name or (key := key_of(pod)) in s.binder or key in s.queue.bound_unseen
        )

    def placed_on(self, group: ObjectKey) -> dict[ObjectKey, str]:
        """The pods ``placed`` counts, with their nodes (a binding pod's where it is assumed):
        what fixes a topology-constrained group's domain."""
        s = self.scheduler
        out: dict[ObjectKey, str] = {}
        for pod in s.cache.group_pods(group):
            key = key_of(pod)
            node = pod.spec.node_name
            if not node and (key in s.binder or key in s.queue.bound_unseen):
                node = s.cache.usage.node_of(key)
            if node:
                out[key] = node
        return out

    async def wait(self, group: ObjectKey, min_count: int) -> bool:
        """Until ``min_count`` pods of the group are placed; False when the timeout passes
        first."""
        s = self.scheduler
        deadline = s.clock.monotonic() + s.settings.gang_permit_timeout
        while self.placed(group) < min_count:
            left = deadline - s.clock.monotonic()
            if left <= 0:
                return False
            event = self.waiters.setdefault(group, asyncio.Event())
            event.clear()
            try:
                await asyncio.wait_for(event.wait(), left)
            except TimeoutError:
                return False
        return True

    def timeout_message(self) -> str:
        """kube-scheduler's message for a pod rejected at Permit by the timeout."""
        waited = go_duration(self.scheduler.settings.gang_permit_timeout)
        return (
            "0/1 nodes are available: 1 rejected due to timeout after waiting "
            f"{waited} at plugin GangScheduling."
        )
