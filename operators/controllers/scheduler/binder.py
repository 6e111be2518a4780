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
from operators.api.names import DELETE_PROTECTION_FINALIZER
from operators.api.resource import ResourceClaim
from operators.api.storage import PersistentVolume, PersistentVolumeClaim
from operators.api.timestamps import age
from operators.controllers.scheduler import metrics, planning
from operators.controllers.scheduler.permit import Permit
from operators.controllers.scheduler.protocol import SchedulerIO
from operators.controllers.scheduler.queueing import SchedulingQueue
from operators.controllers.scheduler.reserve import Reserved
from operators.controllers.scheduler.settings import SchedulerSettings
from operators.kube.api import ApiError, ConflictError, NotFoundError
from operators.observability import fields
from operators.runtime import claim_writes
from operators.runtime.actions import PostEvent
from operators.runtime.errors import NotLeaderError, UnknownOutcomeError
from operators.runtime.tasks import TaskOwner
from operators.scheduling import extended
from operators.scheduling.attempt import BindingFailed
from operators.scheduling.plugins import volumebinding

log = structlog.get_logger(__name__)

#: Longest wait between looks at a PreBind's volumes (a storage event wakes it sooner).
VOLUME_POLL = 1.0
READ_BACKOFF = (0.2, 5.0)  # first and largest pause between failed reads
RELEASE_ATTEMPTS = 5  # conflicting writes (someone else changed the claim) before giving up


class Scheduler(SchedulerIO, Protocol):
    """What a binding task uses of its scheduler (the handlers' ``Scheduler``)."""

    settings: SchedulerSettings
    queue: SchedulingQueue
    tasks: TaskOwner

    def fence(self) -> float | None: ...

    async def unschedulable(
        self, pod: Pod, message: str, reason: str = "Unschedulable"
    ) -> bool: ...


class ConflictingAllocationError(Exception):
    """Another scheduler allocated a chosen device between our cycle and our write."""


#: Failures of a binding cycle that are the cluster's doing, not a bug of ours.
EXPECTED_FAILURES = (
    ApiError,
    OSError,
    TimeoutError,
    UnknownOutcomeError,
    ConflictingAllocationError,
    volumebinding.VolumeBindingError,
)


class Binder:
    """Binding tasks of one scheduler replica, by pod."""

    def __init__(self, scheduler: Scheduler, permit: Permit) -> None:
        self.scheduler = scheduler
        self.permit = permit
        self.tasks: dict[ObjectKey, asyncio.Task[Any]] = {}

    def __contains__(self, key: object) -> bool:
        return key in self.tasks

    def start(self, reserved: Reserved) -> None:
        """Runs right after Reserve: the binding cycle, as a task the scheduler owns."""
        key = reserved.key
        self.tasks[key] = self.scheduler.tasks.spawn(
            self._binding_cycle(reserved), name=f"bind-{key.namespace}-{key.name}"
        )

    def start_group(self, group: ObjectKey, min_count: int, members: Sequence[Reserved]) -> None:
        """Runs after a pod group's Reserve: Permit (until ``min_count`` of the group are
        placed), then each pod's binding cycle in turn, so that the claims the group shares
        are written, by the first, before any pod is bound with them. A pod whose binding
        fails stops the pods after it (released and tried again): none is bound with a
        shared claim that was not written."""
        task = self.scheduler.tasks.spawn(
            self._group_binding(group, min_count, members),
            name=f"bind-group-{group.namespace}-{group.name}",
        )
        for reserved in members:
            self.tasks[reserved.key] = task

    async def _group_binding(
        self, group: ObjectKey, min_count: int, members: Sequence[Reserved]
    ) -> None:
        s = self.scheduler
        try:
            if not await self.permit.wait(group, min_count):
                message = self.permit.timeout_message()
                log.info("pod group timed out at Permit", group=str(group), reason=message)
                for reserved in members:
                    reserved.undo()
                    s.queue.attempt_ended(reserved.key, "unschedulable")
                    self.tasks.pop(reserved.key, None)
                    await s.unschedulable(reserved.pod, message)
                    s.queue.add_after(reserved.key, s.queue.backoff_of(reserved.key))
                return
            for at, reserved in enumerate(members):
                if not await self._binding_cycle(reserved):
                    for rest in members[at + 1 :]:
                        self.tasks.pop(rest.key, None)
                        self._abandon(rest.pod, rest.plan)
                    return
        finally:
            for reserved in members:
                if self.tasks.get(reserved.key) is asyncio.current_task():
                    self.tasks.pop(reserved.key, None)

    def forget(self) -> None:
        """Leadership lost: the scheduler has cancelled every task (one cancelled before it
        began never ran its ``finally``)."""
        self.tasks.clear()

    # --- the binding cycle -----------------------------------------------------------------

    async def _binding_cycle(self, reserved: Reserved) -> bool:
        """PreBind and Bind of one pod, then (its status patch: the special claim's mappings,
        its claims' node resources) after the claims; False when it failed (what it wrote is
        released)."""
        s = self.scheduler
        pod, plan, node, status = reserved.pod, reserved.plan, reserved.node, reserved.status
        key = reserved.key
        try:
            if reserved.volumes is not None:
                # VolumeBinding's PreBind comes before DynamicResources' (the plugins' order).
                await self.bind_volumes(reserved)
            for reservation in plan:
                if reservation.allocation is not None:
                    self._check_still_free(reservation.target)
                await self.pre_bind(reservation)
            if status is not None:
                await s.apply(status)
            if any(r.needs_conditions for r in plan):
                # Wait (without blocking other pods) until the devices are attached. Claim
                # events that came while this task ran were skipped (the pod was in the
                # binder): a cycle right after it looks at the conditions as they are.
                s.queue.add(key)
                s.queue.add_after(key, s.settings.binding_timeout + 0.5)
                return True
            await self.bind(pod, node)
            return True
        except NotLeaderError:
            # The fence refused a write (nothing was sent). Leadership may be lost (then the
            # new leader continues from the claims as written) or only the renewal late.
            log.info("binding cycle stopped: not the leader", **{fields.POD: str(key)})
            self._abandon(pod, plan)
            return False
        except Exception as e:  # whatever failed, the truth decides
            s.queue.attempt_ended(key, "error")
            expected = isinstance(e, EXPECTED_FAILURES)
            # A failure of the API is expected; anything else is a bug, logged with its
            # traceback, but the pod's devices are released all the same.
            (log.warning if expected else log.exception)(
                "binding cycle failed; deciding from the pod and claims as they are",
                **{fields.POD: str(key), fields.NODE: node},
                error=str(e),
                error_type=type(e).__name__,
            )
            try:
                await self.unreserve(
                    pod,
                    plan,
                    node,
                    f"binding to node {node} failed: {e}",
                    clear=planning.writes_node_allocatable(status),
                )
            except NotLeaderError:
                log.info("recovery stopped: not the leader", **{fields.POD: str(key)})
                self._abandon(pod, plan)
            return False
        finally:
            self.tasks.pop(key, None)
            s.cache.assume_volumes(key, None)  # bound (the stores show it) or given up

    def _abandon(self, pod: Pod, plan: Sequence[planning.Reservation]) -> None:
        """An attempt the fence stopped. The lease's renewal may only be late: this replica
        then goes on leading with no deactivate to clear its in-flight state, so what the
        attempt chose but did not write leaves the ledger now (a later cycle would take it
        as written and bind the pod with no allocation), and the pod comes back."""
        s = self.scheduler
        key = planning.pod_key(pod)
        for reservation in plan:
            s.cache.ledger.discard_unwritten(planning.claim_key(reservation.target))
        s.cache.assume(key, pod, None)
        s.queue.add_after(key, s.queue.backoff(key))

    async def pre_bind(self, reservation: planning.Reservation) -> None:
        """PreBind, per claim of the attempt: finalizer first, then allocation and reservedFor
        in one status write."""
        s = self.scheduler
        version = reservation.cached.metadata.resource_version
        if reservation.create:  # the special claim for extended resources: created first
            created = await s.apply(planning.creation(reservation.cached))
            assert created is not None
            version = created["metadata"]["resourceVersion"]
            patch = None
        else:
            patch = planning.finalizer(reservation.cached)
        if patch is not None:
            patched = await s.apply(patch)
            assert patched is not None
            version = patched["metadata"]["resourceVersion"]
        await s.write_claim(planning.status_write(reservation, version))

    async def bind_volumes(self, reserved: Reserved) -> None:
        """VolumeBinding's PreBind (BindPodVolumes): every PV the cycle matched gets its
        claimRef, every claim to provision the node it is for, each write conditional on the
        version the cycle saw; then the wait until the PV controller (or the provisioner)
        has bound them all, up to the bind timeout. A binding that failed (a claimRef reset,
        provisioning given up) raises with upstream's message: the attempt is undone and the
        pod tried again."""
        s = self.scheduler
        found = reserved.fit.volumes
        assert found is not None
        written = await self._write_volumes(found, reserved.node)
        deadline = s.clock.monotonic() + volumebinding.DEFAULT_BIND_TIMEOUT_SECONDS
        while True:
            node = s.cache.node(reserved.node)
            storage = s.cache.storage()
            if node is None:
                raise volumebinding.VolumeBindingError(f"node {reserved.node} is gone")
            if volumebinding.bound(written, node, storage.claims, storage.volumes):
                return
            left = deadline - s.clock.monotonic()
            if left <= 0:
                raise TimeoutError(volumebinding.BIND_TIMEOUT)
            await s.cache.storage_change(min(left, VOLUME_POLL))

    async def _write_volumes(
        self, found: volumebinding.PodVolumes, node: str
    ) -> volumebinding.PodVolumes:
        """PreBind's writes, the PVs first: the objects as the API server answered."""
        s = self.scheduler
        bindings = []
        for binding in found.static_bindings:
            answer = await s.apply(planning.volume_binding(binding))
            assert answer is not None
            bindings.append(volumebinding.Binding(binding.pvc, PersistentVolume.load(answer)))
        provisions = []
        for provision in found.dynamic_provisions:
            answer = await s.apply(planning.volume_provisioning(provision, node))
            assert answer is not None
            provisions.append(
                volumebinding.Provision(PersistentVolumeClaim.load(answer), provision.capacity)
            )
        return volumebinding.PodVolumes(tuple(bindings), tuple(provisions))

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

    async def bind(self, pod: Pod, node: str) -> None:
        """Bind, once every claim is written and no binding condition is pending."""
        await self.scheduler.apply(planning.bind(pod, node))
        await self._bound(pod, node)

    async def _bound(self, pod: Pod, node: str) -> None:
        s = self.scheduler
        key = planning.pod_key(pod)
        s.queue.bound_unseen.add(key)
        s.queue.attempt_ended(key, "scheduled")
        s.queue.forget(key)
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

    # --- PreBind, continued: binding conditions (KEP-5007) --------------------------------

    async def binding_failed(self, pod: Pod, failed: BindingFailed) -> None:
        """Binding conditions failed or timed out (found by the attempt's preparation):
        deallocate (one write per claim) and nominate the node of the attempt: in the
        composable flow the device is there now."""
        s = self.scheduler
        log.warning("binding conditions failed; deallocating", pod=pod.key, reason=failed.message)
        if failed.timed_out:
            metrics.BINDING_CONDITIONS_TIMEOUTS.inc()
        await s.post(
            PostEvent(
                obj=pod.dump(),
                type=planning.WARNING,
                reason="BindingConditionsFailed",
                message=failed.message,
            )
        )
        key = planning.pod_key(pod)
        s.queue.unsatisfiable.clear()  # the failed allocation's devices are free again
        s.queue.nominate(key, failed.node)
        for released in failed.released:
            s.cache.ledger.remove(planning.claim_key(released))
            # The retry follows at once: until the cache shows this write, the ledger does,
            # so the retry neither sees the failed allocation again nor counts its devices.
            await s.write_claim(planning.binding_failed(released))
        if failed.node:
            try:
                await s.apply(planning.nominate(pod, failed.node))
            except NotFoundError:
                return

    # --- Unreserve -------------------------------------------------------------------------

    async def unreserve(
        self,
        pod: Pod,
        plan: Sequence[planning.Reservation],
        node: str,
        error: str,
        *,
        clear: bool = False,
    ) -> None:
        """Unreserve, after any failure of PreBind or Bind: read the pod, then release only
        what this attempt wrote. A pod still unbound is told why (PodScheduled=False, reason
        SchedulerError, and a FailedScheduling Event, as kube-scheduler) and tried again after
        its backoff. ``clear``: the attempt computed nodeAllocatableResourceClaimStatuses,
        which a pod still unbound loses again (upstream clears them whether or not PreBind
        got to write them)."""
        s = self.scheduler
        key = planning.pod_key(pod)
        uid = pod.metadata.uid or ""
        state = planning.after_bind_error(await self._read_pod(key), uid, node)
        if state is planning.PodState.BOUND_HERE:
            log.info("the bind had happened after all", **{fields.POD: str(key)})
            await self._bound(pod, node)
            return
        s.cache.assume(key, pod, None)
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
        if clear and state is planning.PodState.UNBOUND:
            await self._clear_node_allocatable(pod)
        s.queue.make_room(
            "ResourceClaim/Update", f"a failed binding attempt of {key} released its devices"
        )
        if state is planning.PodState.UNBOUND:
            await self._report(pod, error)
            s.queue.add_after(key, s.queue.backoff_of(key))

    async def _clear_node_allocatable(self, pod: Pod) -> None:
        """Upstream's clearNodeAllocatableResourceClaimStatus: a failure is logged, not
        retried (the next successful attempt writes the field anew)."""
        key = planning.pod_key(pod)
        try:
            await self.scheduler.apply(planning.clear_node_allocatable(pod))
        except EXPECTED_FAILURES as e:
            log.warning(
                "failed to clear nodeAllocatableResourceClaimStatuses on Unreserve",
                **{fields.POD: str(key)},
                error=str(e),
            )

    async def _report(self, pod: Pod, error: str) -> None:
        s = self.scheduler
        s.queue.record(planning.pod_key(pod)).last_message = None  # the next answer is news
        try:
            await s.apply(planning.unschedulable(pod, error, s.clock.now(), "SchedulerError"))
        except NotFoundError:
            return
        await s.post(planning.failed_scheduling(pod, error))

    async def _release(self, reservation: planning.Reservation, uid: str) -> None:
        s = self.scheduler
        key = planning.claim_key(reservation.cached)
        for _ in range(RELEASE_ATTEMPTS):
            current = await self._read_claim(key)
            if reservation.create:
                # The special claim this attempt created: deleted, so that none is left
                # behind (another of the pod's attempts makes its own).
                if current is not None and extended.special_claim_of(current, uid):
                    try:
                        await self.delete_special_claim(current)
                    except ConflictError:
                        continue
                    except NotFoundError:
                        pass
                s.cache.ledger.remove(key)
                return
            action = (
                None if current is None else planning.release(current, uid, reservation.allocation)
            )
            if action is None:
                s.cache.ledger.remove(key)
                return
            try:
                await s.write_claim(action)
            except ConflictError:
                continue  # changed since the read: decide again on what it is now
            except NotFoundError:
                s.cache.ledger.remove(key)
                return
            log.info("released what the failed attempt wrote", **{fields.CLAIM: str(key)})
            return
        # Still changing under us: the reservation cleanup takes stale entries out.
        s.cache.ledger.remove(key)
        log.warning("release gave up after repeated conflicts", **{fields.CLAIM: str(key)})

    async def drop_stale_claim(self, pod: Pod, claim: ResourceClaim) -> None:
        """A special claim of an earlier attempt that cannot be used as it is (not allocated
        for the pod): deleted before the attempt (``attempt.DropStaleClaim`` says why not at
        PostFilter, as upstream); its event brings the pod back."""
        try:
            await self.delete_special_claim(claim)
        except (ConflictError, NotFoundError):
            return
        log.info(
            "deleted a stale claim for extended resources",
            **{fields.POD: pod.key, fields.CLAIM: claim.key},
        )

    async def delete_special_claim(self, claim: ResourceClaim) -> None:
        """A special claim deleted as upstream deletes it: its finalizer off first (it is
        the scheduler's own), then the claim, both at the version and uid read."""
        s = self.scheduler
        if DELETE_PROTECTION_FINALIZER in claim.metadata.finalizers:
            version = claim.metadata.resource_version or ""
            patched = await s.apply(claim_writes.finalizer_removal(claim, version))
            assert patched is not None
        await s.apply(claim_writes.deletion(claim))

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
