"""The binding cycle of one pod: PreBind writes, the bind, and recovery from the truth.

It runs as a task beside the next scheduling cycles (one cycle at a time chooses devices; many
binding cycles write). Every write goes through the controller's fenced ``apply``. On any
failure, nothing is concluded from the error itself: the pod and the claims are read again
from the API server, and ``planning`` decides what to release (a 409 "already assigned" or a
lost answer may mean the bind happened).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol

import structlog

from operators.api.core import Pod
from operators.api.keys import ObjectKey
from operators.api.resource import ResourceClaim
from operators.api.timestamps import age
from operators.controllers.scheduler import metrics, planning
from operators.controllers.scheduler.cache import SchedulerCache
from operators.controllers.scheduler.settings import SchedulerSettings
from operators.kube.api import ApiError, ConflictError, KubeAPI, NotFoundError
from operators.observability import fields
from operators.runtime.actions import PostEvent, Write
from operators.runtime.clock import Clock
from operators.runtime.errors import NotLeaderError, UnknownOutcomeError
from operators.runtime.queue import WorkQueue

log = structlog.get_logger(__name__)

READ_BACKOFF = (0.2, 5.0)  # first and largest pause between failed reads
RELEASE_ATTEMPTS = 5  # conflicting writes (someone else changed the claim) before giving up


class PodStatesLike(Protocol):
    bound: set[ObjectKey]
    nominated: dict[ObjectKey, str]


class Scheduler(Protocol):
    """What a binding task uses of its scheduler (the handlers' ``Scheduler``)."""

    settings: SchedulerSettings
    clock: Clock
    cache: SchedulerCache
    queue: WorkQueue[ObjectKey]

    @property
    def pods(self) -> PodStatesLike: ...

    @property
    def api(self) -> KubeAPI: ...

    def fence(self) -> float | None: ...

    async def apply(self, action: Write) -> dict[str, Any] | None: ...

    async def post(self, event: PostEvent) -> bool: ...

    def requeue_unschedulable(self) -> None: ...

    def attempt_ended(self, key: ObjectKey, result: str) -> None: ...


class ConflictingAllocationError(Exception):
    """Another scheduler allocated a chosen device between our cycle and our write."""


class Binder:
    """Binding tasks of one scheduler replica, by pod."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.tasks: dict[ObjectKey, asyncio.Task[None]] = {}

    def __contains__(self, key: object) -> bool:
        return key in self.tasks

    def start(self, pod: Pod, plan: Sequence[planning.Reservation], node: str) -> None:
        key = planning.pod_key(pod)
        self.tasks[key] = asyncio.create_task(
            self._run(pod, plan, node), name=f"bind-{key.namespace}-{key.name}"
        )

    async def cancel_all(self) -> None:
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.tasks.clear()

    # --- the binding cycle -----------------------------------------------------------------

    async def _run(self, pod: Pod, plan: Sequence[planning.Reservation], node: str) -> None:
        s = self.scheduler
        key = planning.pod_key(pod)
        try:
            for reservation in plan:
                if reservation.allocation is not None:
                    self._check_still_free(reservation.target)
                await self._prebind(reservation)
            if any(r.needs_conditions for r in plan):
                # Wait (without blocking other pods) until the devices are attached. Claim
                # events that came while this task ran were skipped (the pod was in the
                # binder): a cycle right after it looks at the conditions as they are.
                s.queue.add(key)
                s.queue.add_after(key, s.settings.binding_timeout + 0.5)
                return
            await s.apply(planning.bind(pod, node))
            await self._bound(pod, node)
        except NotLeaderError:
            # The new leader continues from the claims as written (or from nothing).
            log.info("binding cycle stopped: not the leader", **{fields.POD: str(key)})
        except (
            ApiError,
            OSError,
            TimeoutError,
            UnknownOutcomeError,
            ConflictingAllocationError,
        ) as e:
            s.attempt_ended(key, "error")
            log.warning(
                "binding cycle failed; deciding from the pod and claims as they are",
                **{fields.POD: str(key), fields.NODE: node},
                error=str(e),
                error_type=type(e).__name__,
            )
            try:
                await self._recover(pod, plan, node)
            except NotLeaderError:
                log.info("recovery stopped: not the leader", **{fields.POD: str(key)})
        finally:
            self.tasks.pop(key, None)

    async def _prebind(self, reservation: planning.Reservation) -> None:
        """Finalizer first, then allocation and reservedFor in one status write."""
        s = self.scheduler
        version = reservation.cached.metadata.resource_version
        patch = planning.finalizer(reservation.cached)
        if patch is not None:
            patched = await s.apply(patch)
            assert patched is not None
            version = patched["metadata"]["resourceVersion"]
        written = await s.apply(planning.status_write(reservation, version))
        assert written is not None
        s.cache.written(ResourceClaim.load(written))

    def _check_still_free(self, target: ResourceClaim) -> None:
        """Re-check right before writing: another scheduler may have given a chosen device
        away since the cycle. The allocation tracker, current with every claim event and
        every in-flight write, answers per device."""
        key = planning.claim_key(target)
        for result in target.allocated_results():
            if result.admin_access or result.share_id is not None:
                continue
            if self.scheduler.cache.allocated.users(result.device_id) - {key}:
                raise ConflictingAllocationError(
                    f"claim {key}: device {result.device_id} was allocated elsewhere meanwhile"
                )

    async def _bound(self, pod: Pod, node: str) -> None:
        s = self.scheduler
        key = planning.pod_key(pod)
        s.pods.bound.add(key)
        s.pods.nominated.pop(key, None)
        s.attempt_ended(key, "scheduled")
        waited = age(pod.metadata.creation_timestamp, s.clock.now())
        if waited is not None:
            metrics.SCHEDULING_LATENCY.observe(max(waited, 0.0))
        log.info("pod bound", **{fields.POD: str(key), fields.NODE: node})
        if s.settings.scheduled_events:
            await s.post(
                PostEvent(
                    obj=pod.dump(),
                    type=planning.NORMAL,
                    reason="Scheduled",
                    message=f"Successfully assigned {key} to {node}",
                )
            )

    # --- recovery --------------------------------------------------------------------------

    async def _recover(self, pod: Pod, plan: Sequence[planning.Reservation], node: str) -> None:
        """After any failure: read the pod, then release only what this attempt wrote."""
        s = self.scheduler
        key = planning.pod_key(pod)
        uid = pod.metadata.uid or ""
        state = planning.after_bind_error(await self._read_pod(key), uid, node)
        if state is planning.PodState.BOUND_HERE:
            log.info("the bind had happened after all", **{fields.POD: str(key)})
            await self._bound(pod, node)
            return
        s.cache.usage.assume(key, None)
        if state is planning.PodState.BOUND_ELSEWHERE:
            # A bound pod holds its claims: never deallocate them, whoever wrote them.
            log.warning(
                "pod was bound to another node meanwhile; its claims are left as they are",
                **{fields.POD: str(key), fields.NODE: node},
            )
            for reservation in plan:
                s.cache.ledger.remove(planning.claim_key(reservation.cached))
            return
        for reservation in plan:
            await self._release(reservation, uid)
        s.requeue_unschedulable()  # the attempt's devices are free again
        if state is planning.PodState.UNBOUND:
            s.queue.add_after(key, s.queue.backoff(key))

    async def _release(self, reservation: planning.Reservation, uid: str) -> None:
        s = self.scheduler
        key = planning.claim_key(reservation.cached)
        for _ in range(RELEASE_ATTEMPTS):
            current = await self._read_claim(key)
            action = (
                None if current is None else planning.release(current, uid, reservation.allocation)
            )
            if action is None:
                s.cache.ledger.remove(key)
                return
            try:
                written = await s.apply(action)
            except ConflictError:
                continue  # changed since the read: decide again on what it is now
            except NotFoundError:
                s.cache.ledger.remove(key)
                return
            assert written is not None
            s.cache.written(ResourceClaim.load(written))
            log.info("released what the failed attempt wrote", **{fields.CLAIM: str(key)})
            return
        # Still changing under us: the reservation cleanup takes stale entries out.
        s.cache.ledger.remove(key)
        log.warning("release gave up after repeated conflicts", **{fields.CLAIM: str(key)})

    async def _read_pod(self, key: ObjectKey) -> Pod | None:
        body = await self._read("Pod", key)
        return None if body is None else Pod.load(body)

    async def _read_claim(self, key: ObjectKey) -> ResourceClaim | None:
        body = await self._read("ResourceClaim", key)
        return None if body is None else ResourceClaim.load(body)

    async def _read(self, kind: str, key: ObjectKey) -> dict[str, object] | None:
        """The object as the API server has it now (None: gone); failed reads are retried,
        never guessed, for as long as this replica leads."""
        s = self.scheduler
        pause, largest = READ_BACKOFF
        while True:
            s.fence()
            try:
                return await s.api.get(kind, key.name, key.namespace)
            except NotFoundError:
                return None
            except (ApiError, OSError, TimeoutError) as e:
                log.warning("read failed; retrying", kind=kind, object=str(key), error=str(e))
            await asyncio.sleep(pause)
            pause = min(largest, pause * 2)
