"""Trees of pod groups (CompositePodGroup): every PodGroup under one root CompositePodGroup
placed in one cycle (``scheduling.composite``, the pure algorithm), against the scheduler's
cache, each leaf's pods through the single pod's steps as a PodGroup's are (``groups._Host``).

- any pod of a PodGroup with a parent runs its root's tree cycle, for every queued pod of it,
  once the tree meets its quorum (until then: the log only, as upstream's PreEnqueue);
- placed: each PodGroup that fits goes to Permit and its binding cycles as a PodGroup does
  (``GroupScheduler.placed``); the others' pods are told why;
- not placed: nothing assumed stays, each pod is told why, each PodGroup's
  PodGroupInitiallyScheduled says so (1.38: each CompositePodGroup's
  CompositePodGroupInitiallyScheduled too).

- not placed and allowed to: tree preemption (``scheduling.tree_preemption``), as a PodGroup's.

Not done for trees yet (the README says so): the deallocation of a tree's claims allocated
where none of its pods can go.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import structlog

from operators.api.core import Pod
from operators.api.groups import (
    COMPOSITE_INITIALLY_SCHEDULED,
    SCHEDULED_REASON,
    CompositePodGroup,
    PodGroup,
)
from operators.api.keys import ObjectKey
from operators.controllers.scheduler import planning
from operators.controllers.scheduler.permit import Permit
from operators.controllers.scheduler.preemptor import Preemptor
from operators.controllers.scheduler.protocol import SchedulerIO
from operators.controllers.scheduler.queueing import PodState, SchedulingQueue
from operators.controllers.scheduler.reserve import Reserved
from operators.controllers.scheduler.settings import SchedulerSettings
from operators.kube.api import NotFoundError
from operators.runtime.errors import Requeue
from operators.scheduling import composite, group_preemption, preemption, tree_preemption
from operators.scheduling.attempt import Prepared, Ready
from operators.scheduling.composite import Composite, Leaf, TreeCycle
from operators.scheduling.group_cycle import Cycle, Host
from operators.scheduling.groups import (
    POD_GROUP_ERROR,
    SCHEDULER_ERROR,
    FailedCycle,
    key_of,
    ordered,
    tried_with_group,
)
from operators.scheduling.profile import Profile
from operators.scheduling.topology import V1_38, DomainError

log = structlog.get_logger(__name__)


class Scheduler(SchedulerIO, Protocol):
    """What a tree's cycle uses of the scheduler (the handlers' ``Scheduler``)."""

    settings: SchedulerSettings
    profile: Profile
    queue: SchedulingQueue
    permit: Permit
    preemptor: Preemptor

    async def prepared(self, key: ObjectKey, pod: Pod, prepared: Prepared) -> Ready | None: ...

    async def unschedulable(self, pod: Pod, message: str, reason: str = ...) -> bool: ...


class Groups(Protocol):
    """What a tree's cycle uses of its replica's ``GroupScheduler``: a leaf that fits is
    placed, and a PodGroup's condition written, as for a PodGroup alone."""

    @property
    def scheduler(self) -> Scheduler: ...

    def queued(self, members: Sequence[Pod]) -> list[Pod]: ...

    def host(self, tree: Mapping[str, PodGroup] | None = None) -> Host[Reserved]: ...

    async def placed(
        self,
        group_key: ObjectKey,
        group: PodGroup,
        order: list[Pod],
        cycle: Cycle[Reserved],
        placed_before: int,
    ) -> None: ...

    async def condition(self, group: PodGroup, status: str, reason: str, message: str) -> None: ...


class TreeScheduler:
    """The tree cycles of one scheduler replica (its GroupScheduler's)."""

    def __init__(self, groups: Groups) -> None:
        self.groups = groups
        #: Root CompositePodGroup -> its tree's last cycle, while that placed nothing.
        self.failed: dict[ObjectKey, FailedCycle] = {}

    def _tree(
        self, namespace: str, root: str, composites: Mapping[str, CompositePodGroup]
    ) -> tuple[Composite, dict[ObjectKey, list[Pod]]]:
        """The tree under ``root`` (of the namespace's ``composites``) from the cache, and
        each PodGroup's bound pods."""
        g = self.groups
        s = g.scheduler
        leaf_of: dict[ObjectKey, Leaf] = {}
        bound: dict[ObjectKey, list[Pod]] = {}
        for group in s.cache.pod_groups_in(namespace):
            if not group.spec.parent_composite_pod_group_name:
                continue
            gkey = ObjectKey(namespace, group.metadata.name or "")
            members = s.cache.group_pods(gkey)
            queued = g.queued(members)
            attempts = {key_of(p): s.queue.record(key_of(p)).attempts for p in queued}
            order = tuple(ordered(queued, attempts))
            leaf_of[gkey] = Leaf(group, order, s.permit.placed_on(gkey), len(members))
            bound[gkey] = [p for p in members if p.spec.node_name]
        return composite.build(composites[root], list(composites.values()), leaf_of), bound

    async def schedule(self, pod: Pod, group: PodGroup) -> None:
        """The cycle of the tree ``group`` is a leaf of, for every queued pod of it."""
        s = self.groups.scheduler
        rules = s.profile.topology
        assert rules is not None, "CompositePodGroup needs TopologyAwareWorkloadScheduling"
        namespace = group.metadata.namespace or ""
        parent = group.spec.parent_composite_pod_group_name or ""
        composites = s.cache.composites_in(namespace)
        root, chain = composite.root_name(parent, composites)
        if root is None:
            log.debug(
                "pod group waits for its parents",
                group=str(group.metadata.key),
                missing=chain[-1],
            )
            return
        tree, bound = self._tree(namespace, root, composites)
        why = composite.waits(tree)
        if why is not None:
            log.debug("composite pod group waits", root=root, why=why)
            return
        queued = [p for leaf in composite.leaves(tree) for p in leaf.order]
        if not queued:
            return
        if any(p.spec.scheduling_gates for p in queued):
            log.debug("composite pod group waits for a pod's scheduling gates", root=root)
            return
        popped, root_key = key_of(pod), ObjectKey(namespace, root)
        versions = ",".join(
            f"{t.key.name}={t.group.metadata.resource_version}" for t in composite.nodes_of(tree)
        )
        if tried_with_group(
            self.failed.get(root_key),
            popped,
            [key_of(p) for p in queued],
            s.queue.moves,
            versions,
            s.clock.monotonic(),
            s.settings.unschedulable_retry,
        ):
            s.queue.set_state(popped, PodState.UNSCHEDULABLE)
            raise Requeue(s.settings.unschedulable_retry, "tried in its tree's last cycle")
        self.failed.pop(root_key, None)
        moves = s.queue.moves
        await self._refuse(tree, bound, queued, popped)
        settings = composite.Settings(
            rules,
            count_devices=s.profile.policies.domain_device_count,
            gang_search=s.profile.gang_search,
            search_timeout=s.profile.search_timeout,
            nominated={n for m in queued if (n := s.queue.nominated_node(m))},
        )
        cycle = await self._run(tree, popped, settings)
        if cycle is None:
            return
        await self._apply(tree, cycle, settings)
        if cycle.succeeded:
            return
        tried = frozenset(key_of(p) for p in queued)
        self.failed[root_key] = FailedCycle(moves, versions, tried, s.clock.monotonic())
        s.queue.set_state(popped, PodState.UNSCHEDULABLE)
        raise Requeue(s.settings.unschedulable_retry, "composite pod group unschedulable")

    async def _refuse(
        self,
        tree: Composite,
        bound: dict[ObjectKey, list[Pod]],
        queued: list[Pod],
        popped: ObjectKey,
    ) -> None:
        """Upstream's validation of the tree: refused, every pod and PodGroup is told."""
        s = self.groups.scheduler
        rules = s.profile.group_rules
        said = composite.refused(
            tree, bound, hierarchy=rules.hierarchy, gated=rules.policy != "pods"
        )
        if said is None:
            return
        reason = POD_GROUP_ERROR if rules.hierarchy else SCHEDULER_ERROR
        for member in queued:
            await s.unschedulable(member, said, reason)
        for leaf in composite.leaves(tree):
            await self.groups.condition(leaf.group, "False", reason, said)
        raise Requeue(s.queue.backoff_of(popped), said)

    async def _run(
        self, tree: Composite, popped: ObjectKey, settings: composite.Settings
    ) -> TreeCycle[Reserved] | None:
        """The tree's cycle; None when a pod of it is not ready (what its preparation says is
        done, and the tree waits)."""
        g = self.groups
        s = g.scheduler
        rules = settings.rules
        leaves = list(composite.leaves(tree))
        host = g.host({leaf.key.name: leaf.group for leaf in leaves})
        try:
            cycle = await composite.run_tree(host, tree, settings)
        except DomainError as e:
            log.info("composite pod group has no single domain", root=tree.key.name, error=str(e))
            for leaf in leaves:
                for member in leaf.order:
                    await s.unschedulable(member, e.told(rules, leaf.key.name), SCHEDULER_ERROR)
                await g.condition(leaf.group, "False", SCHEDULER_ERROR, str(e))
            raise Requeue(s.queue.backoff_of(popped), str(e)) from None
        if cycle.waiting is not None:
            waiting, prepared = cycle.waiting
            await s.prepared(key_of(waiting), waiting, prepared)
            return None
        return cycle

    async def _apply(
        self, tree: Composite, cycle: TreeCycle[Reserved], settings: composite.Settings
    ) -> None:
        """The leaves that fit go to Permit and binding; the tree that is not placed may
        preempt; the others' pods are told why."""
        g = self.groups
        s = g.scheduler
        rules = settings.rules
        placed = cycle.placed()
        for leaf, leaf_cycle in placed:
            await g.placed(leaf.key, leaf.group, list(leaf.order), leaf_cycle, len(leaf.placed_on))
        done = {leaf.key for leaf, _ in placed}
        said = None if cycle.succeeded else await self._preempt(tree, settings)
        told = composite.told(cycle, rules, said)
        for leaf in composite.leaves(tree):
            if leaf.key in done:
                continue
            for member in leaf.order:
                s.queue.attempt_ended(key_of(member), "unschedulable")
                await s.unschedulable(member, told[key_of(member)])
            if leaf.ref in cycle.outcomes:
                message = composite.condition_of(cycle, leaf.ref, rules, said)
                await g.condition(leaf.group, "False", "Unschedulable", message)
        if rules.release >= V1_38:
            await self._composite_conditions(tree, cycle, said)
        root = cycle.outcomes[tree.ref]
        said = "placed" if cycle.succeeded else "unschedulable"
        log.info(
            f"composite pod group {said}",
            root=tree.key.name,
            groups=[str(k) for k in done],
            domain=root.domain,
            reason=root.message,
        )

    async def _preempt(self, tree: Composite, settings: composite.Settings) -> str | None:
        """The tree's PodGroupPostFilter (``scheduling.tree_preemption``): the reads it needs,
        then its writes; what follows "pod group preemption: " (None: preemption is off)."""
        s = self.groups.scheduler
        if s.profile.preemption is None:
            return None
        p = s.preemptor
        queued = [m for leaf in composite.leaves(tree) for m in leaf.order]
        releases = [r for member in queued for r in await p.victim_claims(member)]
        decided = await tree_preemption.preempt(
            self.groups.host({leaf.key.name: leaf.group for leaf in composite.leaves(tree)}),
            tree,
            settings,
            classes=s.cache.classes_by_name(),
            policy=s.profile.group_rules.policy,
            victims_gone=bool(releases),
            lower=p.lower_priority_pods(tree.group.spec.priority or 0),
            evicting=set(p.victims.values()),
            nominated={n for m in queued if (n := s.queue.nominated_node(m))},
            budgets=[preemption.Budget.of(b) for b in s.cache.all_of(s.cache.budgets, "pdbs")],
            now=s.clock.now(),
        )
        await p.carry_out(tree.group, queued, decided, releases)
        return group_preemption.PREFIX + decided.message

    async def _composite_conditions(
        self, tree: Composite, cycle: TreeCycle[Reserved], said: str | None
    ) -> None:
        """1.38's CompositePodGroupInitiallyScheduled on each CompositePodGroup of the tree."""
        s = self.groups.scheduler
        for node in composite.nodes_of(tree):
            rules = s.profile.topology
            outcome = cycle.outcomes.get(node.ref)
            if not isinstance(node, Composite) or outcome is None or rules is None:
                continue
            fits = outcome.fits and cycle.succeeded
            status, reason = ("True", SCHEDULED_REASON) if fits else ("False", "Unschedulable")
            message = "" if fits else composite.condition_of(cycle, node.ref, rules, said)
            patch = planning.group_condition(
                node.group, COMPOSITE_INITIALLY_SCHEDULED, status, reason, message, s.clock.now()
            )
            if patch is None:
                continue
            try:
                await s.apply(patch)
            except NotFoundError:
                continue
