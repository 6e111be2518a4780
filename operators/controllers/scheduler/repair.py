"""The double-allocation repair: a device in two claims' allocations (two schedulers, a
resumed old leader) is given back by the claim whose pods are not bound.

Runs on its own queue, beside the scheduling cycles, for a claim whose allocation the cache
shows sharing a device; a cycle for a pod of such a claim waits for it rather than bind two
pods to one device. Decided from fresh reads (``planning.double_allocation_victim``), and said
on the claim.
"""

from __future__ import annotations

import structlog

from operators.api.core import Pod
from operators.api.keys import ObjectKey
from operators.api.names import TERMINAL_PHASES
from operators.api.resource import ResourceClaim
from operators.controllers.scheduler import metrics, planning
from operators.controllers.scheduler.protocol import SchedulerIO
from operators.observability import fields
from operators.runtime.errors import Requeue
from operators.runtime.queue import WorkQueue

log = structlog.get_logger(__name__)


class Repair:
    """The repair queue of one scheduler replica."""

    def __init__(self, scheduler: SchedulerIO) -> None:
        self.scheduler = scheduler
        self.queue: WorkQueue[ObjectKey] = WorkQueue(
            self.repair, name="scheduler-repairs", workers=1, clock=scheduler.clock
        )

    def add(self, key: ObjectKey) -> None:
        self.queue.add(key)

    async def repair(self, key: ObjectKey) -> None:
        """Deallocate the claim whose pods are not bound, from fresh reads, and say so on the
        claim."""
        s = self.scheduler
        for device in s.cache.conflicts(key):
            holders = []
            for holder in sorted(s.cache.allocated.users(device)):
                if holder in s.cache.ledger:
                    raise Requeue(1.0, f"claim {holder} is being written")
                body = await s.api.get_or_none("ResourceClaim", holder.name, holder.namespace)
                if body is not None:
                    claim = ResourceClaim.load(body)
                    if device in claim.allocated_device_ids():
                        holders.append(claim)
            if len(holders) < 2:
                continue
            bound = {
                uid: await self._holds(claim, uid)
                for claim in holders
                for uid in claim.reserved_for_uids()
            }
            victim = planning.double_allocation_victim(holders, bound)
            others = [c.key for c in holders if victim is None or c.key != victim.key]
            metrics.DOUBLE_ALLOCATIONS.labels(repaired=str(victim is not None).lower()).inc()
            if victim is None:
                log.error(
                    "device allocated to several claims whose pods are all bound; "
                    "not touching them",
                    **{fields.DEVICE: str(device)},
                    claims=others,
                )
                continue
            await s.write_claim(planning.deallocation(victim))
            log.warning(
                "deallocated a claim that shared a device with another",
                **{fields.CLAIM: victim.key, fields.DEVICE: str(device)},
                others=others,
            )
            await s.post(planning.double_allocation_event(victim, str(device), others))

    async def _holds(self, claim: ResourceClaim, uid: str) -> bool:
        """Whether the consumer ``uid`` of ``claim`` is a pod bound to a node and running."""
        namespace = claim.metadata.namespace or ""
        for ref in claim.status.reserved_for:
            if ref.uid != uid or ref.resource != "pods" or ref.api_group:
                continue
            body = await self.scheduler.api.get_or_none("Pod", ref.name or "", namespace)
            if body is None:
                return False
            pod = Pod.load(body)
            return (
                pod.metadata.uid == uid
                and bool(pod.spec.node_name)
                and pod.status.phase not in TERMINAL_PHASES
            )
        return True  # not a pod: in use, as far as we can tell
