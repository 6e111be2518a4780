"""Preemption for a pod group (PodGroupPostFilter's DefaultPreemption, 1.37), pure: the
scheduler applies what ``preempt`` says (evictions, nominations, releases), ``simulate
--pod-group`` answers it.

kube-scheduler 1.37.2's PodGroupEvaluator, with kopf-dra's release of the victims' devices:

1. Eligibility: the group's preemption policy (``resolvePreemptionPolicy``): with
   PodGroupPreemptionPolicy on, the PodGroup's ``spec.preemptionPolicy`` (PreemptLowerPriority
   when unset); off, Never when any of its pods says Never; 1.38 (no gate), the PodGroup's
   where set, else its pods' (``groups.PolicySource``). Then, as for a single pod, the
   claims of victims already gone are released first, and no new victims are sought while
   earlier ones are still going (``ongoing``).
2. The domain is the whole cluster. Every unit (``preemption.Unit``: a pod, or all bound pods of
   a PodGroup whose ``disruptionMode`` is ``all``) of lower priority than the group's
   (``preemption.group_priority``; a member of another group counts with its group's) is
   removed, with its node usage and the devices of the claims only it holds, and the group's
   cycle (``group_cycle.place``) runs on that state: a ``Trial``. No placement for
   ``minCount`` pods: nobody is evicted.
3. Reprieve (``select_victims``, upstream's selectVictimsOnDomain): units go back one at a
   time, most important first, those whose eviction would violate a PodDisruptionBudget before
   the others; a unit stays when every placed pod still fits on its proposed node, in the
   cycle's order. A unit with no pod on a proposed node changes nothing there and stays
   without a trial.
4. What is left is evicted, whole units only; each pod is nominated to its proposed node.

A topology-constrained group (TopologyAwareWorkloadScheduling) is placed inside one domain, so
its preemption is searched domain by domain (kopf-dra's: upstream's DynamicResources refuses
such groups at PodGroupPostFilter): steps 2 and 3 with the domain's nodes as the only
candidates and the units on them, and the domain whose victims are least important (the most
important victim's priority, then how many pods, then their priorities' sum) wins; ties go to
the first by name.

Upstream's DynamicResources frees no device when a victim is removed (it has no
PreFilterExtensions), so kube-scheduler 1.37.2 never preempts for a group's devices; here a
claim whose every consumer is a victim releases its devices, as single-pod preemption does
(``preemption.release_blocker``: not a PodGroup's claim, not a multi-node device, no binding
conditions).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from decimal import Decimal

from operators.allocator import AllocatedState, Features
from operators.allocator.state import Holding
from operators.api.core import PREEMPT_NEVER, Pod, PriorityClass
from operators.api.features import Release
from operators.api.groups import CompositePodGroup, PodGroup
from operators.api.keys import ObjectKey
from operators.scheduling import preemption
from operators.scheduling.attempt import Attempt
from operators.scheduling.cycle import NodeFit
from operators.scheduling.group_cycle import A, Host, first_status, place, placements_status
from operators.scheduling.groups import UNSCHEDULABLE, PolicySource, key_of, outcome
from operators.scheduling.nodes import NodeUsage, pod_requests
from operators.scheduling.pod_filters import PodFilters
from operators.scheduling.preemption import RunningPod, Unit, priority_of, release_blocker
from operators.scheduling.topology import Domain

#: What kube-scheduler puts before the PodGroupPostFilter's answer in the pods' message.
PREFIX = "pod group preemption: "
NO_VICTIMS = "No preemption victims found for incoming preemptor"
ONGOING = "ongoing preemption on nominated nodes"
RELEASING = "the claims of preempted pods are being released"


def preempts(
    group: PodGroup | CompositePodGroup,
    pods: Sequence[Pod],
    classes: Mapping[str, PriorityClass],
    policy: PolicySource,
) -> bool:
    """resolvePreemptionPolicy: whether the group may preempt at all."""
    if policy == "group" or (policy == "group-else-pods" and group.spec.preemption_policy):
        return group.spec.preemption_policy != PREEMPT_NEVER
    return all(priority_of(p, classes).preempts for p in pods)


def found(victims: int) -> str:
    """Upstream's status when victims were chosen (the group waits for them to go)."""
    return f"found a placement for podgroup, preempting {victims} victims"


def touches(unit: Unit, nodes: frozenset[str]) -> bool:
    """Whether putting ``unit`` back can change what a pod proposed on ``nodes`` needs: a pod
    of it runs there (its node usage, its node-local devices)."""
    return any(p.pod.spec.node_name in nodes for p in unit.pods)


def ongoing(
    order: Sequence[Pod],
    lower: Mapping[str, Sequence[RunningPod]],
    evicting: Collection[ObjectKey],
    nominated: Collection[str],
) -> bool:
    """isOngoingPreemption: the group's victims are not gone yet: a pod of the group waits for
    evictions (``evicting``: the preemptors whose victims the caller waits for), or a pod of
    lower priority on one of its pods' ``nominated`` nodes is terminating by preemption."""
    if any(key_of(m) in evicting for m in order):
        return True
    return any(
        preemption.terminating_by_preemption(r.pod)
        for node in nominated
        for r in lower.get(node, ())
    )


@dataclasses.dataclass(frozen=True)
class Removed:
    """Victims taken out of the cluster's state, for a trial of the group's cycle: their node
    usage, and the devices of the claims that only they hold."""

    pods: tuple[RunningPod, ...] = ()

    @classmethod
    def of(cls, units: Sequence[Unit]) -> Removed:
        return cls(tuple(p for u in units for p in u.pods))

    def released(self, features: Features) -> list[Holding]:
        """What the claims freed by evicting all of ``pods`` hold, each claim once."""
        uids = {p.uid for p in self.pods}
        out: dict[str, Holding] = {}
        for p in self.pods:
            node = p.pod.spec.node_name or ""
            for claim in p.claims:
                if claim.key not in out and release_blocker(claim, node, uids) is None:
                    out[claim.key] = Holding.of(claim, features)
        return list(out.values())

    def usage(self, usage: Mapping[str, NodeUsage]) -> dict[str, NodeUsage]:
        """Node usage with the pods gone."""
        out = dict(usage)
        for p in self.pods:
            node = p.pod.spec.node_name or ""
            before = out.get(node)
            if before is None:
                continue
            requests = dict(before.requests)
            for name, value in pod_requests(p.pod).items():
                requests[name] = requests.get(name, Decimal(0)) - value
            out[node] = NodeUsage(requests, before.pods - 1)
        return out

    def state(self, state: AllocatedState, features: Features) -> AllocatedState:
        return state.without(self.released(features))


@dataclasses.dataclass
class Trial:
    """A trial of the group's cycle (``group_cycle.Trial``) with ``removed`` taken out: the
    allocated state without their devices, taken before the trial assumed anything (``without``
    goes by device, and a device freed may be assumed again), and the devices the trial assumed
    since. Each pod's snapshot keeps the nominations it must leave alone."""

    removed: Removed
    base: AllocatedState
    features: Features
    assumed: list[Holding] = dataclasses.field(default_factory=list)

    @classmethod
    def of(cls, units: Sequence[Unit], state: AllocatedState, features: Features) -> Trial:
        gone = Removed.of(units)
        return cls(gone, gone.state(state, features), features)

    def attempt(self, attempt: Attempt) -> Attempt:
        state = self.base.plus(self.assumed).plus(attempt.promised)
        usage = self.removed.usage(attempt.usage)
        filters = attempt.filters
        if isinstance(filters, PodFilters):
            filters = filters.without([p.uid for p in self.removed.pods])
        return dataclasses.replace(attempt, state=state, usage=usage, what_if=True, filters=filters)

    def took(self, fit: NodeFit) -> None:
        self.assumed.append(preemption.holding(fit.results, self.features))


async def _try(
    host: Host[A],
    group: PodGroup,
    order: Sequence[Pod],
    placed_before: int,
    removed: Sequence[Unit],
    on: Mapping[ObjectKey, str] | None,
    within: Collection[str] | None = None,
    fit_errors: bool = False,
    placements: Release | None = None,
) -> dict[ObjectKey, NodeFit] | str:
    """The group's cycle with the ``removed`` units' pods gone (``on``: each pod on its
    proposed node; ``within``: the only candidate nodes); the pods' fits, or why it fails
    (``placements``: the release whose placement algorithm runs the trial, its one placement
    quoted as upstream's TopologyAwareWorkloadScheduling does). Nothing of it stays assumed."""
    trial = Trial.of(removed, host.state(), host.features)
    placement = await place(host, group, order, placed_before, trial=trial, on=on, within=within)
    fits, placed, failed = placement.fits, placement.placed, placement.failed
    placement.undo()
    if on is not None:
        return fits if len(placed) == len(on) else "a proposed node no longer fits"
    if placement.waiting is not None:
        return "a pod of the group is not ready to be scheduled"
    verdict = outcome(
        group, placed_before, placed, failed, placement.remaining, fit_errors=fit_errors
    )
    if verdict.succeeded:
        return fits
    if placements is not None:
        first = first_status(verdict, bool(placement.evaluated), placements)
        return placements_status(placements, 1, first)
    return verdict.message or UNSCHEDULABLE


async def select_victims(
    host: Host[A],
    group: PodGroup,
    order: Sequence[Pod],
    placed_before: int,
    units: Sequence[Unit],
    budgets: Sequence[preemption.Budget],
    now: datetime.datetime,
    within: Collection[str] | None = None,
    fit_errors: bool = False,
    placements: Release | None = None,
) -> tuple[list[Unit], dict[ObjectKey, NodeFit]] | str:
    """selectVictimsOnDomain: the group's cycle with every lower-priority unit gone, then each
    unit put back when the placement survives it; the units left and each pod's fit (or why
    no placement was found). ``within``: a topology domain's nodes, the only candidates."""

    async def trial(
        removed: Sequence[Unit], on: Mapping[ObjectKey, str] | None
    ) -> dict[ObjectKey, NodeFit] | str:
        quoted = placements if on is None else None
        return await _try(
            host, group, order, placed_before, removed, on, within, fit_errors, quoted
        )

    return await reprieve(units, budgets, now, trial)


#: A trial of a cycle with some units gone (``on``: each pod on its proposed node): the pods'
#: fits, or why it fails.
TrialRun = Callable[
    [Sequence[Unit], Mapping[ObjectKey, str] | None],
    Awaitable[dict[ObjectKey, NodeFit] | str],
]


async def reprieve(
    units: Sequence[Unit],
    budgets: Sequence[preemption.Budget],
    now: datetime.datetime,
    trial: TrialRun,
) -> tuple[list[Unit], dict[ObjectKey, NodeFit]] | str:
    """The trial with every unit gone, then each unit put back, most important first (budget
    violators first), when the placement survives it: the units left and each pod's fit, or
    why no placement was found (a group's, or a tree's: ``trial`` runs its cycle)."""
    fits = await trial(units, None)
    if isinstance(fits, str):
        return fits
    proposed = {k: f.node for k, f in fits.items()}
    nodes = frozenset(proposed.values())
    important = preemption.more_important_units(units, now)
    violating, other = preemption.split_by_budget(important, budgets)
    removed = list(units)
    victims: list[Unit] = []
    for unit in [u for u, _ in violating] + other:
        rest = [u for u in removed if u is not unit]
        if touches(unit, nodes):
            kept = await trial(rest, proposed)
            if isinstance(kept, str):
                victims.append(unit)
                continue
            fits = kept
        removed = rest
    return victims, fits


@dataclasses.dataclass(frozen=True)
class GroupPreemption:
    """What the group's preemption says: ``message``, after "pod group preemption: " in the
    pods' message; ``victims`` to evict and each placed pod's ``fits`` (its nomination) when it
    found a placement; ``release``: the claims of victims already gone are released first;
    ``clear``: the pods' nominations go (preemption no longer helps)."""

    message: str
    victims: tuple[Unit, ...] = ()
    fits: Mapping[ObjectKey, NodeFit] = dataclasses.field(default_factory=dict)
    release: bool = False
    clear: bool = False

    @property
    def evicted(self) -> list[RunningPod]:
        return [p for unit in self.victims for p in unit.pods]


def candidates(
    group: PodGroup | CompositePodGroup,
    pods: Sequence[Pod],
    classes: Mapping[str, PriorityClass],
    policy: PolicySource,
    victims_gone: bool,
    lower: Mapping[str, Sequence[RunningPod]],
    evicting: Collection[ObjectKey],
    nominated: Collection[str],
) -> GroupPreemption | list[Unit]:
    """Steps 1 and 2's start, a PodGroup's or a tree's (``group``: its root; ``pods``: its
    queued pods): the answer when no victims are sought (not eligible, victims' claims to
    release, victims still going), else every unit of lower priority."""
    if not preempts(group, pods, classes, policy):
        return GroupPreemption(preemption.NEVER)
    if victims_gone:
        # Victims gone: their devices are about to be free, no more evictions.
        return GroupPreemption(RELEASING, release=True)
    if ongoing(pods, lower, evicting, nominated):
        return GroupPreemption(ONGOING)
    return preemption.units_of(
        [r for running in lower.values() for r in running], preemption.members(lower)
    )


async def preempt(
    host: Host[A],
    group: PodGroup,
    order: Sequence[Pod],
    placed_before: int,
    *,
    classes: Mapping[str, PriorityClass],
    policy: PolicySource,
    victims_gone: bool,
    lower: Mapping[str, Sequence[RunningPod]],
    evicting: Collection[ObjectKey] = (),
    nominated: Collection[str] = (),
    budgets: Sequence[preemption.Budget] = (),
    now: datetime.datetime,
    placements: Sequence[Domain] | None = None,
    fit_errors: bool = False,
    release: Release | None = None,
) -> GroupPreemption:
    """The group's preemption after a cycle that placed nothing (the host read first what it
    needs): ``victims_gone``, claims on the pods' nominated nodes whose consumers are gone;
    ``lower``, the bound pods of lower priority than the group's, by node
    (``preemption.lower_priority_pods``); ``evicting`` and ``nominated`` as ``ongoing`` takes
    them."""
    units = candidates(group, order, classes, policy, victims_gone, lower, evicting, nominated)
    if isinstance(units, GroupPreemption):
        return units
    if placements is not None:
        chosen = await _in_domains(
            host, group, order, placed_before, units, budgets, now, placements, fit_errors
        )
    elif units:
        chosen = await select_victims(
            host,
            group,
            order,
            placed_before,
            units,
            budgets,
            now,
            fit_errors=fit_errors,
            placements=release,
        )
    else:
        chosen = None
    if not isinstance(chosen, tuple):
        return GroupPreemption(chosen or NO_VICTIMS, clear=True)
    victims, fits = chosen
    return GroupPreemption(found(sum(len(u.pods) for u in victims)), tuple(victims), fits)


def _cost(victims: Sequence[Unit]) -> tuple[int, int, int]:
    """How much a domain's victims matter: the most important's priority, how many pods,
    their priorities' sum (smaller is better)."""
    pods = [p for unit in victims for p in unit.pods]
    return (
        max((p.priority for p in pods), default=-(2**31)),
        len(pods),
        sum(p.priority for p in pods),
    )


async def _in_domains(
    host: Host[A],
    group: PodGroup,
    order: Sequence[Pod],
    placed_before: int,
    units: Sequence[Unit],
    budgets: Sequence[preemption.Budget],
    now: datetime.datetime,
    placements: Sequence[Domain],
    fit_errors: bool,
) -> tuple[list[Unit], dict[ObjectKey, NodeFit]] | str | None:
    """``select_victims`` inside each domain, with the units that have a pod there; the
    domain whose victims cost least (``_cost``), or the first domain's reason."""
    best: tuple[list[Unit], dict[ObjectKey, NodeFit]] | None = None
    first: str | None = None
    for domain in placements:
        inside = [u for u in units if touches(u, domain.nodes)]
        if not inside:
            continue
        chosen = await select_victims(
            host, group, order, placed_before, inside, budgets, now, domain.nodes, fit_errors
        )
        if isinstance(chosen, str):
            first = first or chosen
            continue
        if best is None or _cost(chosen[0]) < _cost(best[0]):
            best = chosen
    return best if best is not None else first
