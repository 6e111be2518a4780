"""Preemption's I/O (DefaultPreemption's PostFilter): evict the victims ``scheduling.preemption``
chose, keep what each preemptor was promised, and release its victims' claims once they are gone.

Runs inside the scheduling cycle of a pod that fits nowhere (or, with ``rank-first``, fits only
with a worse alternative), after ``scheduling.decision`` said Preempt or ReleaseVictimClaims.
The search itself is pure and runs off the event loop; every write here is safe to repeat.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import structlog

from operators.allocator import AllocatedState, Allocator, OutOfTimeError
from operators.api.consumers import PodInfo, pods_to_look_up
from operators.api.core import Node, Pod
from operators.api.groups import CompositePodGroup, PodGroup, group_name
from operators.api.keys import ObjectKey
from operators.api.names import TERMINAL_PHASES
from operators.api.resource import ResourceClaim
from operators.controllers.scheduler import metrics, planning
from operators.controllers.scheduler.protocol import SchedulerIO
from operators.controllers.scheduler.queueing import SchedulingQueue
from operators.controllers.scheduler.settings import SchedulerSettings
from operators.kube.api import ConflictError, NotFoundError
from operators.observability import fields
from operators.runtime.actions import PostEvent, ReplaceStatus
from operators.runtime.errors import NotLeaderError
from operators.scheduling import preemption
from operators.scheduling.attempt import Attempt, deadline
from operators.scheduling.binding_conditions import allocated_node
from operators.scheduling.cycle import NodeFit
from operators.scheduling.group_preemption import GroupPreemption
from operators.scheduling.nodes import pod_requests
from operators.scheduling.preemption import Nomination, PodPriority, RunningPod
from operators.scheduling.profile import Profile

log = structlog.get_logger(__name__)


class Scheduler(SchedulerIO, Protocol):
    """What preemption uses of its scheduler (the handlers' ``Scheduler``)."""

    settings: SchedulerSettings
    profile: Profile
    queue: SchedulingQueue

    def allocator(
        self, state: AllocatedState | None, out_of_time: Callable[[], bool] | None
    ) -> Allocator: ...


class Preemptor:
    """Preemption of one scheduler replica: its nominations and the victims it waits for."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        # What each preemptor was promised on its nominated node, and whose victim each
        # evicted pod is (its disappearance brings the preemptor back at once).
        self.nominations: dict[ObjectKey, Nomination] = {}
        self.victims: dict[str, ObjectKey] = {}

    def clear(self) -> None:
        self.nominations.clear()
        self.victims.clear()

    def promised(self, key: ObjectKey, priority: int) -> dict[ObjectKey, Nomination]:
        """Devices nominated for preemptors of higher or equal priority: not ``key``'s."""
        keys = preemption.protected(self.nominations, key, priority)
        return {k: self.nominations[k] for k in keys}

    def victim_gone(self, uid: str) -> ObjectKey | None:
        """A pod is gone: the preemptor it was a victim of, if any."""
        return self.victims.pop(uid, None)

    # --- PostFilter: the search and the evictions ----------------------------------------------

    async def preempt(self, attempt: Attempt, *, better_than: int | None = None) -> str | None:
        """Find victims for the pod and evict them; the explanation for the pod's message, or
        None when no preemption happened and the pod has a fit to bind (rank-first)."""
        s = self.scheduler
        metrics.PREEMPTION_ATTEMPTS.inc()
        pod, priority, key = attempt.pod, attempt.priority, attempt.key
        nominated = s.queue.nominated_node(pod)
        lower = self.lower_priority_pods(priority.value)
        reason = preemption.eligibility(
            priority,
            nominated,
            lower.get(nominated, ()) if nominated else (),
            evicting=key in self.victims.values(),
        )
        if reason == preemption.TERMINATING and nominated and key not in self.nominations:
            await self._renominate(attempt, nominated, lower.get(nominated, ()))
        if reason is not None:
            return reason if better_than is None else None
        budgets = [preemption.Budget.of(b) for b in s.cache.all_of(s.cache.budgets, "pdbs")]
        try:
            result = await self._search(
                attempt,
                attempt.nodes,
                lower,
                budgets=budgets,
                better_than=better_than,
                members=preemption.members(lower) if s.profile.groups else None,
            )
        except OutOfTimeError as e:
            return f"{e.message} while looking for victims"
        candidate = result.candidate
        if candidate is None:
            if better_than is None and nominated:
                await self.clear_nomination(pod)
            return result.message(len(attempt.nodes)) if better_than is None else None
        await self._evict(pod, priority, candidate)
        return result.message(len(attempt.nodes))

    async def _search(
        self,
        attempt: Attempt,
        nodes: Sequence[Node],
        on_node: dict[str, list[RunningPod]],
        *,
        budgets: Sequence[preemption.Budget] = (),
        better_than: int | None = None,
        members: Mapping[str, Sequence[RunningPod]] | None = None,
    ) -> preemption.Preemption:
        """The pure search, off the event loop, with a filter timeout of its own (none without
        DRASchedulerFilterTimeout) on the state the cycle allocated against."""
        s = self.scheduler
        allocator = s.allocator(
            attempt.state, deadline(s.clock.monotonic, s.profile.filter_timeout)
        )
        return await asyncio.to_thread(
            lambda: preemption.preempt(
                attempt.pod,
                priority=attempt.priority,
                claims=attempt.claims,
                nodes=nodes,
                usage=attempt.usage,
                on_node=on_node,
                allocator=allocator if attempt.allocating else None,
                budgets=budgets,
                now=s.clock.now(),
                features=s.profile.features,
                alternatives=s.profile.policies.preemption_alternatives,
                better_than=better_than,
                extended=attempt.extended,
                members=members,
                filters=attempt.filters,
            )
        )

    def lower_priority_pods(self, priority: int) -> dict[str, list[RunningPod]]:
        """Pods bound to each node with a priority below ``priority``, with their claims
        (``preemption.lower_priority_pods``); those surely not below it are never parsed."""
        s = self.scheduler
        cache = s.cache
        find = self.pod_group if s.profile.groups else None
        bound = (
            pod
            for node in cache.nodes_with_pods()
            for pod in cache.running_on(node, lambda body: _not_below(body, priority, find))
        )
        return preemption.lower_priority_pods(
            bound, priority, cache.classes_by_name(), find, cache.held_by
        )

    def pod_group(self, pod: Pod) -> PodGroup | None:
        key = ObjectKey(pod.metadata.namespace or "", group_name(pod) or "")
        return self.scheduler.cache.pod_group(key)

    async def _evict(
        self, pod: Pod, priority: PodPriority, candidate: preemption.Candidate
    ) -> None:
        """The writes, in order, each safe to repeat: nominate the preemptor, then per victim
        the DisruptionTarget condition and the deletion with its grace period; lower-priority
        pods nominated to the node lose their nomination."""
        s = self.scheduler
        key = planning.pod_key(pod)
        node = candidate.node
        self.nominations[key] = Nomination.of(pod, priority.value, candidate, s.profile.features)
        s.queue.nominate(key, node)
        description = candidate.describe()
        log.info("preempting", **{fields.POD: str(key), fields.NODE: node}, victims=description)
        if not await self._nominate(pod, node):
            self.nominations.pop(key, None)
            return
        await self._evict_pods(
            candidate.victims,
            key,
            lambda victim: planning.preempted_event(victim, f"pod {pod.metadata.uid}", node),
        )
        await self._clear_lower_nominations(node, priority.value, key)
        await s.post(planning.preempting_event(pod.dump(), description))

    async def evict_group(
        self,
        group: PodGroup | CompositePodGroup,
        pods: Sequence[Pod],
        fits: Mapping[ObjectKey, NodeFit],
        victims: Sequence[RunningPod],
    ) -> None:
        """A pod group's preemption (``scheduling.group_preemption``): each placed pod
        nominated to its node with the devices it would get there, then the victims evicted
        as ``_evict`` does; their going brings the group back."""
        s = self.scheduler
        classes = s.cache.classes_by_name()
        nominated: list[ObjectKey] = []
        for pod in pods:
            key = planning.pod_key(pod)
            fit = fits.get(key)
            if fit is None:
                continue
            self.nominations[key] = Nomination(
                fit.node,
                preemption.priority_of(pod, classes).value,
                preemption.holding(fit.results, s.profile.features),
                pod_requests(pod),
            )
            s.queue.nominate(key, fit.node)
            if await self._nominate(pod, fit.node):
                nominated.append(key)
            else:
                self.nominations.pop(key, None)
        if not nominated:
            return
        description = "preempting " + ", ".join(
            f"{v.key} on node {v.pod.spec.node_name}" for v in victims
        )
        group_key = f"{group.metadata.namespace}/{group.metadata.name}"
        log.info("preempting for a pod group", group=group_key, victims=description)
        body = group.dump()
        await self._evict_pods(
            victims,
            nominated[0],
            lambda victim: planning.preempted_event(
                victim, f"{(group.kind or 'PodGroup').lower()} {group.metadata.uid}", "cluster"
            ),
        )
        await s.post(planning.preempting_event(body, description))

    async def _evict_pods(
        self,
        victims: Sequence[RunningPod],
        preemptor: ObjectKey,
        event: Callable[[Pod], PostEvent],
    ) -> None:
        """Per victim, each write safe to repeat: the DisruptionTarget condition, the deletion
        with its grace period, the Preempted event. ``preemptor`` is brought back when the
        victim is gone."""
        s = self.scheduler
        metrics.PREEMPTION_VICTIMS.observe(len(victims))
        now = s.clock.now()
        for victim in victims:
            self.victims[victim.uid] = preemptor
            if victim.pod.metadata.is_deleting:
                continue  # its graceful deletion runs already
            try:
                await s.apply(
                    planning.disruption_target(victim.pod, s.settings.scheduler_name, now)
                )
                await s.apply(planning.eviction(victim.pod))
            except (NotFoundError, ConflictError):
                # Gone, or replaced by another pod of that name: not ours to delete, nor to
                # wait for.
                self.victims.pop(victim.uid, None)
                continue
            except NotLeaderError:
                # Not evicted: the retry must not wait for it (the evicted ones it waits for).
                self.victims.pop(victim.uid, None)
                raise
            await s.post(event(victim.pod))

    async def _renominate(self, attempt: Attempt, node: str, on_node: Sequence[RunningPod]) -> None:
        """After a restart: the devices a nominated preemptor waits for, from its victims
        still terminating, are protected again."""
        terminating = [p for p in on_node if p.pod.metadata.is_deleting]
        chosen = [n for n in attempt.nodes if n.metadata.name == node]
        if not terminating or not chosen:
            return
        try:
            result = await self._search(attempt, chosen, {node: terminating})
        except OutOfTimeError:
            return
        if result.candidate is not None:
            features = self.scheduler.profile.features
            self.nominations[attempt.key] = Nomination.of(
                attempt.pod, attempt.priority.value, result.candidate, features
            )
            for victim in result.candidate.victims:
                self.victims[victim.uid] = attempt.key

    # --- nominations ---------------------------------------------------------------------------

    async def _nominate(self, pod: Pod, node: str | None) -> bool:
        """Write (or clear) the pod's nominatedNodeName; False when the pod is gone."""
        try:
            await self.scheduler.apply(planning.nominate(pod, node))
        except NotFoundError:
            return False
        return True

    async def clear_nomination(self, pod: Pod) -> None:
        """Preemption no longer helps: the nomination goes (upstream), unless it is the node of
        a failed binding attempt (KEP-5007), which is not preemption's to take back."""
        key = planning.pod_key(pod)
        if self.scheduler.queue.nominated(key) and key not in self.nominations:
            return
        self.drop_nomination(key)
        await self._nominate(pod, None)

    def drop_nomination(self, key: ObjectKey) -> None:
        self.scheduler.queue.nominate(key, None)
        if self.nominations.pop(key, None) is not None:
            self.scheduler.queue.make_room(
                "Pod/Delete", f"the devices nominated for {key} are free"
            )

    async def _clear_lower_nominations(
        self, node: str, priority: int, preemptor: ObjectKey
    ) -> None:
        """Pods of lower priority nominated to the node may no longer fit there (upstream)."""
        s = self.scheduler
        classes = s.cache.classes_by_name()
        for key in s.cache.pending_keys():
            other = None if key == preemptor else s.cache.pending(key)
            if other is None:
                continue
            if s.queue.nominated_node(other) != node:
                continue
            if preemption.priority_of(other, classes).value >= priority:
                continue
            s.queue.nominate(key, None)
            self.nominations.pop(key, None)
            if await self._nominate(other, None):
                s.queue.add(key)

    # --- the victims' claims -------------------------------------------------------------------

    async def victim_claims(self, pod: Pod) -> list[tuple[ResourceClaim, ReplaceStatus]]:
        """Claims on the pod's nominated node whose consumers are all gone (its victims,
        deleted or finished), with the reservation cleanup's write for each: the reads that
        ``scheduling.decision`` needs, done before it decides."""
        s = self.scheduler
        node = s.queue.nominated_node(pod)
        if not node:
            return []
        found = []
        for claim_key in s.cache.allocated_keys():
            claim = s.cache.claim(claim_key)
            if (
                claim is None
                or claim_key in s.cache.ledger
                or not claim.status.reserved_for
                or allocated_node(claim) != node
            ):
                continue
            pods = await self._consumers(claim)
            action = None if pods is None else planning.victim_claim_release(claim, pods)
            if action is not None:
                found.append((claim, action))
        return found

    async def carry_out(
        self,
        group: PodGroup | CompositePodGroup,
        pods: Sequence[Pod],
        decided: GroupPreemption,
        releases: Sequence[tuple[ResourceClaim, ReplaceStatus]],
    ) -> None:
        """What a group's or a tree's preemption decided (``group``: the PodGroup, or the
        tree's root; ``pods``: its queued pods): the victims' claims released, the victims
        evicted, or the pods' nominations dropped."""
        if decided.release:
            await self.release_victim_claims(pods[0], releases)
        elif decided.victims:
            await self.evict_group(group, pods, decided.fits, decided.evicted)
        elif decided.clear:
            for member in pods:
                if self.scheduler.queue.nominated_node(member):
                    await self.clear_nomination(member)

    async def release_victim_claims(
        self, pod: Pod, releases: Sequence[tuple[ResourceClaim, ReplaceStatus]]
    ) -> None:
        """Being released (by this write, or by the reservation cleanup's if it came first):
        their devices are about to be free, so evicting more pods would be one too many."""
        s = self.scheduler
        for claim, action in releases:
            try:
                await s.write_claim(action)
            except (ConflictError, NotFoundError):
                continue  # changed meanwhile: its event brings the pod back
            s.queue.unsatisfiable.clear()
            log.info(
                "released the claim of a preemption victim",
                **{fields.POD: pod.key, fields.CLAIM: claim.key},
            )

    async def _consumers(self, claim: ResourceClaim) -> dict[str, PodInfo | None] | None:
        """The pods the claim's release depends on, or None while one of its consumers is
        cached as running (no reads then). Pods missing from the cache are read: one created a
        moment ago may hold the claim already (as the reservation cleanup checks)."""
        s = self.scheduler
        namespace = claim.metadata.namespace or ""
        for ref in claim.status.reserved_for:
            body = s.cache.indices.one("pod_info", ObjectKey(namespace, ref.name or ""))
            info = None if body is None else PodInfo.from_body(body)
            if info is not None and info.uid == ref.uid and info.phase not in TERMINAL_PHASES:
                return None
        found: dict[str, PodInfo | None] = {}
        for name in sorted(pods_to_look_up(claim)):
            body = s.cache.indices.one("pod_info", ObjectKey(namespace, name))
            if body is None:
                body = await s.api.get_or_none("Pod", name, namespace)
            found[name] = None if body is None else PodInfo.from_body(body)
        return found


def _not_below(
    body: Mapping[str, Any], priority: int, groups: Callable[[Pod], PodGroup | None] | None
) -> bool:
    """Surely not a victim, from the raw pod: its own ``spec.priority`` (set by admission) at
    least ``priority``, and no PodGroup whose priority it would take (``groups``: None while
    GenericWorkload is off). Anything else is parsed and ranked by ``running_pod``."""
    spec = body.get("spec") or {}
    value = spec.get("priority")
    if groups is not None and spec.get("schedulingGroup") is not None:
        return False
    return isinstance(value, int) and value >= priority
