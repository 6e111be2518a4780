"""Preemption for a tree of groups (CompositePodGroup), pure: kube-scheduler 1.37.2's
PodGroupEvaluator with a CompositePodGroup as the preemptor (``podgrouppreemption.go``,
``types.go``'s ``newPodGroupPreemptor``): the root's priority and preemption policy, every
lower-priority unit of the cluster taken out, the whole tree's cycle run on that state
(``podGroupSchedulingFunc`` is ``runRootSchedulingAlgorithm``), then the units put back most
important first while the tree still fits with every placed pod on its proposed node
(``group_preemption.reprieve``, the same loop as a PodGroup's). What is left is evicted, whole
units only; the placed pods are nominated to their nodes.

A trial runs ``composite.run_tree`` through a host (``_TrialHost``) that sees the cluster
without the removed units (``group_preemption.Trial``), with neither the gang search nor
kopf-dra's device count per domain (the count reads the allocator as it is, victims included).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Collection, Mapping, Sequence
from typing import Generic

from operators.allocator import AllocatedState, Allocator, Features
from operators.allocator.state import Holding
from operators.api.core import Node, Pod, PriorityClass
from operators.api.keys import ObjectKey
from operators.scheduling import composite, group_preemption, preemption
from operators.scheduling.attempt import Attempt, Prepared, Ready
from operators.scheduling.composite import Composite
from operators.scheduling.cycle import NodeFit
from operators.scheduling.group_cycle import A, Filtered, Host
from operators.scheduling.group_preemption import GroupPreemption, Trial
from operators.scheduling.groups import UNSCHEDULABLE, PolicySource
from operators.scheduling.preemption import RunningPod, Unit


@dataclasses.dataclass(eq=False)
class _Taken(Generic[A]):
    """A placement in a trial (``group_cycle.Assumed``): undone, its devices leave the trial
    too (the tree tries one placement after another within one trial, undoing each)."""

    assumed: A
    trial: Trial
    holding: Holding

    @property
    def key(self) -> ObjectKey:
        return self.assumed.key

    @property
    def fit(self) -> NodeFit:
        return self.assumed.fit

    def undo(self) -> None:
        self.assumed.undo()
        self.trial.assumed = [h for h in self.trial.assumed if h is not self.holding]


@dataclasses.dataclass
class _TrialHost(Generic[A]):
    """``host`` with the trial's units gone (``Trial.attempt``), each placement counted in the
    trial (``Trial.took``); ``on``: each pod only on its proposed node (a pod without one on
    none). No attempt is recorded as begun."""

    host: Host[A]
    trial: Trial
    on: Mapping[ObjectKey, str] | None

    @property
    def features(self) -> Features:
        return self.host.features

    def prepare(self, pod: Pod) -> Prepared:
        return self.host.prepare(pod)

    def snapshot(self, ready: Ready) -> Attempt:
        attempt = self.trial.attempt(self.host.snapshot(ready))
        if self.on is None:
            return attempt
        node = self.on.get(ready.key)
        return dataclasses.replace(
            attempt, nodes=[n for n in attempt.nodes if n.metadata.name == node]
        )

    def state(self) -> AllocatedState:
        return self.host.state()

    async def filter(self, attempt: Attempt, *, every_fit: bool = False) -> Filtered | None:
        return await self.host.filter(attempt, every_fit=every_fit)

    def assume(self, attempt: Attempt, fit: NodeFit) -> _Taken[A]:
        assumed = self.host.assume(attempt, fit)
        self.trial.took(fit)
        return _Taken(assumed, self.trial, self.trial.assumed[-1])

    def began(self, key: ObjectKey) -> None:
        pass

    def nodes(self) -> Sequence[Node]:
        return self.host.nodes()

    def allocator(self) -> Allocator:
        return self.host.allocator()

    def monotonic(self) -> float:
        return self.host.monotonic()


async def _try(
    host: Host[A],
    tree: Composite,
    settings: composite.Settings,
    removed: Sequence[Unit],
    on: Mapping[ObjectKey, str] | None,
) -> dict[ObjectKey, NodeFit] | str:
    """The tree's cycle with the ``removed`` units' pods gone: the placed pods' fits, or why
    it fails. Nothing of it stays assumed."""
    trial = Trial.of(removed, host.state(), host.features)
    cycle = await composite.run_tree(_TrialHost(host, trial, on), tree, settings)
    fits = {a.key: a.fit for _, c in cycle.placed() for a in c.placement.assumed}
    cycle.undo()
    if cycle.waiting is not None:
        return "a pod of the group is not ready to be scheduled"
    if on is not None:
        return fits if set(fits) == set(on) else "a proposed node no longer fits"
    if cycle.succeeded:
        return fits
    return cycle.outcomes[tree.ref].message or UNSCHEDULABLE


async def preempt(
    host: Host[A],
    tree: Composite,
    settings: composite.Settings,
    *,
    classes: Mapping[str, PriorityClass],
    policy: PolicySource,
    victims_gone: bool,
    lower: Mapping[str, Sequence[RunningPod]],
    evicting: Collection[ObjectKey] = (),
    nominated: Collection[str] = (),
    budgets: Sequence[preemption.Budget] = (),
    now: datetime.datetime,
) -> GroupPreemption:
    """The tree's preemption after a cycle that placed nothing, as ``group_preemption.preempt``
    for a PodGroup (the host read first what it needs; ``lower``: the bound pods of lower
    priority than the root's, by node)."""
    queued = [p for leaf in composite.leaves(tree) for p in leaf.order]
    units = group_preemption.candidates(
        tree.group, queued, classes, policy, victims_gone, lower, evicting, nominated
    )
    if isinstance(units, GroupPreemption):
        return units
    if not units:
        return GroupPreemption(group_preemption.NO_VICTIMS, clear=True)
    trial_settings = dataclasses.replace(settings, gang_search=False, count_devices=False)

    async def trial(
        removed: Sequence[Unit], on: Mapping[ObjectKey, str] | None
    ) -> dict[ObjectKey, NodeFit] | str:
        return await _try(host, tree, trial_settings, removed, on)

    chosen = await group_preemption.reprieve(units, budgets, now, trial)
    if isinstance(chosen, str):
        return GroupPreemption(chosen, clear=True)
    victims, fits = chosen
    count = sum(len(u.pods) for u in victims)
    return GroupPreemption(group_preemption.found(count), tuple(victims), fits)
