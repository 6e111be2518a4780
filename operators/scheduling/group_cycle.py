"""A pod group's cycle (1.37's GenericWorkload), written once: the scheduler runs it against its
cache, ``simulate --pod-group`` against its working copy of a snapshot, each through a small
``Host``. The rules it follows are ``groups`` (when a group is tried, its pods' order, the
verdict, what each pod is told); its search is ``group_search``; its preemption, which runs this
cycle on trials, is ``group_preemption``.

kube-scheduler 1.37.2's ``podGroupSchedulingDefaultAlgorithm`` (``schedule_one_podgroup.go``),
with kopf-dra's search added:

1. ``place``: each pod in the cycle's order goes through the single pod's steps (the host's
   ``prepare``, ``snapshot`` and ``filter``: PreFilter and Filter), and a pod that fits is
   assumed at once (the host's ``assume``, upstream's ``assumeAndReserveWithRevert``, which
   returns its own undo), so the pods after it see its node usage and devices, and a claim the
   group shares is allocated once. The loop stops as soon as ``minCount`` is out of reach
   (GangScheduling's PlacementFeasible). A pod that is not ready (its claims not there yet,
   binding conditions pending) stops the cycle: the whole group waits for it, as upstream's
   PreEnqueue gates a group on any of its pods, and nothing stays assumed.
2. ``run``: the verdict (``groups.outcome``); when it fails although some pods fit, the
   search of the pods' prioritized alternatives and other nodes (``--gang-search``); when
   nothing is placed, every assumption undone, last first, and the group's claims allocated
   where none of its pods can go (DynamicResources' PodGroupPostFilter) named for
   deallocation.

The host applies what the cycle says: the scheduler binds (Permit, then each pod's binding
cycle) or writes; simulate answers. Neither repeats a step of it (a test checks).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, Collection, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

from operators.allocator import AllocatedState, Allocator, Features
from operators.api.core import Node, Pod
from operators.api.features import Release
from operators.api.groups import PodGroup
from operators.api.keys import ObjectKey
from operators.api.resource import ResourceClaim
from operators.scheduling import topology
from operators.scheduling.attempt import Attempt, Prepared, Ready
from operators.scheduling.cycle import CycleResult, NodeFit, unschedulable_message
from operators.scheduling.group_search import NODE_OPTIONS, restricted, search, variants
from operators.scheduling.groups import (
    UNSCHEDULABLE,
    GroupOutcome,
    cannot_be_satisfied,
    key_of,
    outcome,
    parent_unschedulable,
    pod_message,
    stranded_group_claims,
)

#: What a pod whose allocation gave way to other tenants' pods is told (the scheduler's only).
GAVE_WAY = "the pod's allocation gave way to other tenants' pods"

#: Filter's answer for one pod: the cycle's result and the node chosen (None: none fits).
Filtered = tuple[CycleResult, NodeFit | None]


class Assumed(Protocol):
    """One pod's Reserve, as its host made it: the pod's key, where it goes, and its undo."""

    @property
    def key(self) -> ObjectKey: ...

    @property
    def fit(self) -> NodeFit: ...

    def undo(self) -> None:
        """Everything the assumption took, given back (nothing of it was written)."""


A = TypeVar("A", bound=Assumed)
A_co = TypeVar("A_co", bound=Assumed, covariant=True)


class Host(Protocol[A_co]):
    """What the cycle needs of its caller: a pod's attempt (prepared, its snapshot, filtered),
    a placement assumed with its undo, the allocated state and a clock."""

    @property
    def features(self) -> Features: ...

    def prepare(self, pod: Pod) -> Prepared:
        """PreEnqueue and PreFilter (``attempt.prepare``), with the PodGroup where its claims
        are the pods' (DRAWorkloadResourceClaims)."""

    def snapshot(self, ready: Ready) -> Attempt:
        """The nodes, their usage and the allocated state the pod's Filter runs on, with what
        the cycle assumed so far."""

    def state(self) -> AllocatedState:
        """Every device allocated, in flight or assumed now (a preemption trial's start)."""

    async def filter(self, attempt: Attempt, *, every_fit: bool = False) -> Filtered | None:
        """Filter (``cycle.run_cycle``); every node that fits with ``every_fit``, else at least
        the best. None: the attempt gave way to other tenants (the scheduler's only)."""

    def assume(self, attempt: Attempt, fit: NodeFit) -> A_co:
        """Reserve's bookkeeping: the pod on ``fit``'s node, its claims allocated and reserved
        as they will be written, seen by every later attempt until undone."""

    def began(self, key: ObjectKey) -> None:
        """A pod's attempt begins (not in a preemption's trials): the host's metrics."""

    def nodes(self) -> Sequence[Node]:
        """Every node of the snapshot (a topology key's domains are made of them)."""

    def allocator(self) -> Allocator:
        """An allocator on the allocated state with what the cycle assumed so far (no time
        limit): what a domain's nodes can still give."""

    def monotonic(self) -> float: ...


class Trial(Protocol):
    """A cycle on a state that is not the cluster's (``group_preemption``'s trials)."""

    def attempt(self, attempt: Attempt) -> Attempt:
        """The pod's snapshot as the trial sees it."""

    def took(self, fit: NodeFit) -> None:
        """A pod of the trial assumed ``fit``."""


@dataclasses.dataclass
class Placement(Generic[A]):
    """One pass over the group's pods: what it assumed (in order), the pods that fit nowhere
    with their messages, those evaluated, the claims a pod found no node could use, the group's
    claims as the pass first saw them, how many pods it did not get to, and the pod that is
    not ready with what its preparation said (the group waits; nothing stays assumed)."""

    assumed: list[A] = dataclasses.field(default_factory=list)
    failed: dict[ObjectKey, str] = dataclasses.field(default_factory=dict)
    evaluated: list[ObjectKey] = dataclasses.field(default_factory=list)
    unavailable: set[str] = dataclasses.field(default_factory=set)
    shared: dict[str, ResourceClaim] = dataclasses.field(default_factory=dict)
    remaining: int = 0
    waiting: tuple[Pod, Prepared] | None = None

    @property
    def placed(self) -> list[ObjectKey]:
        return [a.key for a in self.assumed]

    @property
    def fits(self) -> dict[ObjectKey, NodeFit]:
        return {a.key: a.fit for a in self.assumed}

    def undo(self) -> None:
        """Every assumption undone, last first (upstream runs the reverts it collected)."""
        for assumed in reversed(self.assumed):
            assumed.undo()
        self.assumed.clear()


async def place(
    host: Host[A],
    group: PodGroup,
    order: Sequence[Pod],
    placed_before: int,
    *,
    trial: Trial | None = None,
    on: Mapping[ObjectKey, str] | None = None,
    within: Collection[str] | None = None,
) -> Placement[A]:
    """The pods in ``order``, each filtered and, when it fits, assumed for the next. ``on`` (a
    preemption's reprieve): only these pods, each on its node, and every one must fit (the pass
    stops at the first that does not). ``within``: the only candidate nodes (a topology
    domain's; a pod's "0/N nodes" counts them). What is assumed stays until
    ``Placement.undo``; an exception undoes it."""
    out: Placement[A] = Placement(remaining=len(order))
    try:
        for member in order:
            key = key_of(member)
            if on is None and cannot_be_satisfied(
                group.min_count, placed_before + len(out.assumed), out.remaining
            ):
                break
            if on is not None and key not in on:
                continue
            prepared = host.prepare(member)
            if not isinstance(prepared, Ready):
                out.undo()
                out.waiting = (member, prepared)
                return out
            if trial is None:
                host.began(key)
            attempt = host.snapshot(prepared)
            if trial is not None:
                attempt = trial.attempt(attempt)
            if on is not None:
                nodes = [n for n in attempt.nodes if n.metadata.name == on[key]]
                attempt = dataclasses.replace(attempt, nodes=nodes)
            attempt = inside(attempt, within)
            if not out.assumed:  # before the pass assumed any: as the host has them
                out.shared.update({c.key: c for c in prepared.claims if c.key in prepared.shared})
            filtered = await host.filter(attempt)
            out.remaining -= 1
            out.evaluated.append(key)
            if filtered is not None:
                out.unavailable.update(filtered[0].unavailable)
            if filtered is None or filtered[1] is None:
                out.failed[key] = (
                    unschedulable_message(len(attempt.nodes), filtered[0])
                    if filtered is not None
                    else GAVE_WAY
                )
                if on is not None:
                    return out
                continue
            out.assumed.append(host.assume(attempt, filtered[1]))
            if trial is not None:
                trial.took(filtered[1])
    except BaseException:
        out.undo()
        raise
    return out


def inside(attempt: Attempt, within: Collection[str] | None) -> Attempt:
    """The attempt with only the nodes of ``within`` as candidates (None: all of them)."""
    if within is None:
        return attempt
    return dataclasses.replace(
        attempt, nodes=[n for n in attempt.nodes if n.metadata.name in within]
    )


@dataclasses.dataclass
class Cycle(Generic[A]):
    """How the group's cycle ended. ``verdict`` is None while a pod is not ready
    (``placement.waiting``). On success ``placement.assumed`` holds every pod placed, still
    assumed (the host binds or answers); otherwise nothing is. ``greedy``: the verdict of the
    pass before the search placed the group (None: the pass did). ``stranded``: the group's
    claims to deallocate (nothing placed, allocated where none of its pods can go)."""

    placement: Placement[A]
    verdict: GroupOutcome | None
    greedy: GroupOutcome | None = None
    stranded: tuple[ResourceClaim, ...] = ()
    #: A topology-constrained group's: each domain tried, in order, the one chosen, and those
    #: the search did not get to (1.38's percentageOfPlacementsToScore).
    domains: tuple[DomainTry, ...] = ()
    domain: str | None = None
    untried: tuple[topology.Domain, ...] = ()

    @property
    def succeeded(self) -> bool:
        return self.verdict is not None and self.verdict.succeeded

    def told(
        self, keys: Sequence[ObjectKey], preemption: str | None = None
    ) -> tuple[str, dict[ObjectKey, str]]:
        """After a cycle that failed: the group's message, with what its preemption said
        (upstream appends the PodGroupPostFilter's answer), and what each pod of ``keys`` is
        told (its own reason where it was tried and fits nowhere, the group's otherwise)."""
        verdict = self.verdict
        assert verdict is not None
        assert not verdict.succeeded
        message = verdict.message or UNSCHEDULABLE
        if preemption is not None:
            message = f"{message}, {preemption}"
        evaluated = set(self.placement.evaluated)
        told = {}
        for key in keys:
            own = pod_message(verdict, key, key in evaluated)
            told[key] = message if own == verdict.message else own
        return message, told


@dataclasses.dataclass(frozen=True)
class DomainTry:
    """One domain of a topology-constrained group: its cycle, undone (None when kopf-dra's
    device count ruled it out first, ``ruled_out`` saying why), and the group's pods it would
    hold (scheduled and placed now) when it fits."""

    domain: topology.Domain
    cycle: Cycle[Any] | None = None
    ruled_out: str | None = None
    pods: int | None = None

    @property
    def fits(self) -> bool:
        return self.pods is not None

    def status(self, release: Release) -> str:
        """Its reason, as "first placement status" quotes it (``first_status``)."""
        if self.ruled_out is not None:
            return self.ruled_out
        assert self.cycle is not None
        return first_status(self.cycle.verdict, bool(self.cycle.placement.evaluated), release)


def first_status(verdict: GroupOutcome | None, evaluated: bool, release: Release) -> str:
    """A failed placement's reason as "first placement status" quotes it: 1.37 the status's
    error (the group's own, "pod group is unschedulable", unless the gang's minimum went out
    of reach after a pod was evaluated), 1.38 its message."""
    message = (verdict.message if verdict is not None else None) or UNSCHEDULABLE
    reason = message.removeprefix(f"{UNSCHEDULABLE}, ")
    if release >= topology.V1_38:
        return reason
    if "cannot be satisfied" in reason and evaluated:
        return reason
    return UNSCHEDULABLE


def placements_status(release: Release, placements: int, first: str) -> str:
    """The group's status message when no placement fits (the PodGroup's condition; what
    a preemption's trial says): 1.37's carries "pod group is unschedulable" as its error,
    1.38's the placements' fit error alone."""
    said = topology.unavailable(placements, first)
    return said if release >= topology.V1_38 else f"{UNSCHEDULABLE}, {said}"


def condition(message: str) -> str:
    """The PodGroup's condition message: the group's (``Cycle.told``) without the pods'
    prefix."""
    return message.removeprefix(f"{UNSCHEDULABLE}, ")


async def run(
    host: Host[A],
    group: PodGroup,
    order: Sequence[Pod],
    placed_before: int,
    *,
    gang_search: bool,
    search_timeout: float,
    within: Collection[str] | None = None,
    fit_errors: bool = False,
) -> Cycle[A]:
    """The group's cycle over its queued pods in ``order`` (``groups.ordered``), with
    ``placed_before`` of its pods bound or binding already; ``within``: the only candidate
    nodes (a topology domain's); ``fit_errors``: 1.38's wording (``GroupRules``)."""
    placement = await place(host, group, order, placed_before, within=within)
    if placement.waiting is not None:
        return Cycle(placement, None)
    verdict = outcome(
        group,
        placed_before,
        placement.placed,
        placement.failed,
        placement.remaining,
        fit_errors=fit_errors,
    )
    if not verdict.succeeded and placement.assumed and gang_search:
        # Some pods fit: another combination of their choices may fit the whole group.
        placement.undo()
        found = await _search(host, group, order, placed_before, search_timeout, within)
        if found is not None:
            placement.assumed, placement.failed = found, {}
            searched = outcome(group, placed_before, placement.placed, {}, 0, fit_errors=fit_errors)
            return Cycle(placement, searched, greedy=verdict)
    if verdict.succeeded:
        return Cycle(placement, verdict)
    placement.undo()
    stranded = stranded_group_claims(
        group, list(placement.shared.values()), placement.unavailable, placed_before
    )
    return Cycle(placement, verdict, stranded=tuple(stranded))


async def _search(
    host: Host[A],
    group: PodGroup,
    order: Sequence[Pod],
    placed_before: int,
    budget: float,
    within: Collection[str] | None,
) -> list[A] | None:
    """The pods placed by searching their prioritized alternatives and the other nodes that fit
    them (``group_search``), within ``budget`` seconds; None (nothing kept) when no combination
    reaches ``minCount``."""
    deadline = host.monotonic() + budget

    async def options(member: Pod) -> AsyncGenerator[tuple[Attempt, NodeFit], None]:
        prepared = host.prepare(member)
        if not isinstance(prepared, Ready):
            return
        attempt = inside(host.snapshot(prepared), within)  # assumed with the claims as they are
        for variant in variants(prepared.claims):
            tried = dataclasses.replace(
                prepared, claims=tuple(restricted(prepared.claims, variant))
            )
            filtered = await host.filter(inside(host.snapshot(tried), within), every_fit=True)
            if filtered is None:
                continue
            for fit in filtered[0].fits[:NODE_OPTIONS]:
                yield attempt, fit

    def undo(assumed: A) -> None:
        assumed.undo()

    return await search(
        order,
        group.min_count,
        placed_before,
        options,
        lambda option: host.assume(*option),
        undo,
        lambda: host.monotonic() > deadline,
    )


def _feasible(cycle: Cycle[A], placed_before: int) -> int | None:
    """The group's pods a domain holds when its cycle is a success to the placement search
    (its verdict, or nothing placed now while the scheduled pods reach ``minCount``); None
    when it is not."""
    verdict = cycle.verdict
    if verdict is None:
        return None
    if verdict.succeeded:
        return placed_before + len(cycle.placement.placed)
    return placed_before if verdict.minimum_met else None


def _needs(
    host: Host[A], group: PodGroup, order: Sequence[Pod], placed_before: int
) -> Mapping[topology.Need, int] | None:
    """What the group's pods still to place take from a domain at least, by DeviceClass and
    selectors (None: a pod is not ready; its cycle says so)."""
    claims: dict[ObjectKey, Sequence[ResourceClaim]] = {}
    for member in order:
        prepared = host.prepare(member)
        if not isinstance(prepared, Ready):
            return None
        claims[prepared.key] = prepared.claims
    return topology.group_needs(claims, max(1, group.min_count - placed_before))


async def run_in_domains(
    host: Host[A],
    group: PodGroup,
    order: Sequence[Pod],
    placed_before: int,
    placements: Sequence[topology.Domain],
    rules: topology.TopologyRules,
    *,
    nominated: Collection[str] = (),
    count_devices: bool = True,
    gang_search: bool,
    search_timeout: float,
) -> Cycle[A]:
    """The cycle of a group with TopologyAwareWorkloadScheduling on (``topology``): ``run``
    inside each domain in turn, each undone before the next is tried, and the one with the
    most pods kept (run again unless it was the last tried), its assumptions as ``run`` leaves
    them; the gang search's ``search_timeout`` is for all the domains together. With
    ``count_devices`` (kopf-dra's), a domain whose free devices cannot hold the group's claims
    is not tried. When none fits: the first domain's reasons, the group's claims
    that pin it where it cannot go named for deallocation."""
    if not placements:
        return Cycle(Placement(remaining=len(order)), GroupOutcome((), {}, topology.NO_PLACEMENTS))
    first = topology.nominated_domain(placements, nominated) if rules.nominated_first else None
    sequence = [first, *(d for d in placements if d is not first)] if first else placements
    to_find = topology.feasible_to_find(rules, placements)
    needs = _needs(host, group, order, placed_before) if count_devices else None
    # One search budget for the whole cycle: each domain's search gets what the ones before
    # it left (a gang that fits nowhere would otherwise search every rack to its timeout).
    deadline = host.monotonic() + search_timeout
    tries: list[DomainTry] = []
    kept: tuple[topology.Domain, Cycle[A]] | None = None  # the last try, still assumed
    # Each domain is counted on the state before the cycle (every try is undone before the
    # next is counted): one allocator and one node list serve them all.
    allocator, nodes = (host.allocator(), host.nodes()) if needs else (None, ())
    for domain in sequence:
        if kept is not None:
            kept[1].placement.undo()
            kept = None
        if needs and allocator is not None:
            members = [n for n in nodes if n.metadata.name in domain.nodes]
            why = topology.short_of(needs, topology.free_devices(allocator, members, needs))
            if why is not None:
                tries.append(DomainTry(domain, ruled_out=why))
                continue
        budget = max(0.0, deadline - host.monotonic())
        cycle = await _run_in(host, group, order, placed_before, domain, rules, gang_search, budget)
        if cycle.placement.waiting is not None:
            return cycle
        pods = _feasible(cycle, placed_before)
        tries.append(DomainTry(domain, cycle, pods=pods))
        if cycle.succeeded:
            kept = (domain, cycle)
        fits = sum(1 for t in tries if t.fits)
        if (domain is first and pods is not None and pods > placed_before) or fits >= to_find:
            break
    feasible = [(t.domain, t.pods) for t in tries if t.pods is not None]
    untried = tuple(sequence[len(tries) :])
    if not feasible:
        return _none_fits(group, order, placed_before, len(placements), tries, rules)
    chosen = topology.best(feasible)
    if kept is not None and kept[0] is chosen:
        cycle = kept[1]
    else:
        if kept is not None:
            kept[1].placement.undo()
        # Its own budget again: a placement the search found is found again the same way.
        cycle = await _run_in(
            host, group, order, placed_before, chosen, rules, gang_search, search_timeout
        )
    return dataclasses.replace(cycle, domains=tuple(tries), domain=chosen.name, untried=untried)


async def _run_in(
    host: Host[A],
    group: PodGroup,
    order: Sequence[Pod],
    placed_before: int,
    domain: topology.Domain,
    rules: topology.TopologyRules,
    gang_search: bool,
    budget: float,
) -> Cycle[A]:
    """``run`` with the domain's nodes as the only candidates."""
    return await run(
        host,
        group,
        order,
        placed_before,
        gang_search=gang_search,
        search_timeout=budget,
        within=domain.within,
        fit_errors=rules.fit_errors,
    )


def _none_fits(
    group: PodGroup,
    order: Sequence[Pod],
    placed_before: int,
    placements: int,
    tries: Sequence[DomainTry],
    rules: topology.TopologyRules,
) -> Cycle[Any]:
    """Every domain failed: the pods are told what the first one said (a pod that fits
    nowhere there, its own reason), the group "0/N placements are available"."""
    first = tries[0]
    shown: Placement[Any] = (
        first.cycle.placement if first.cycle is not None else Placement(remaining=len(order))
    )
    # What a pod that fits is told: the status's message after the group's error (1.37 thus
    # says "pod group is unschedulable" twice; 1.38 tells it of its parent, below).
    status = placements_status(rules.release, placements, first.status(rules.release))
    message = f"{UNSCHEDULABLE}, {status}"
    parent = parent_unschedulable(group) if rules.fit_errors else None
    verdict = GroupOutcome((), dict(shown.failed), message, parent)
    tried = [t.cycle.placement for t in tries if t.cycle is not None]
    shared = {k: c for p in reversed(tried) for k, c in p.shared.items()}
    unavailable = {k for p in tried for k in p.unavailable}
    stranded = stranded_group_claims(group, list(shared.values()), unavailable, placed_before)
    return Cycle(shown, verdict, stranded=tuple(stranded), domains=tuple(tries))


async def run_group(
    host: Host[A],
    group: PodGroup,
    order: Sequence[Pod],
    placed_before: Mapping[ObjectKey, str],
    *,
    rules: topology.TopologyRules | None,
    nominated: Collection[str] = (),
    count_devices: bool = True,
    gang_search: bool,
    search_timeout: float,
    fit_errors: bool = False,
    parent: topology.Domain | None = None,
) -> Cycle[A]:
    """The group's cycle as its release and gates have it (``fit_errors``: 1.38's wording,
    which ``rules`` carry too where given): with TopologyAwareWorkloadScheduling
    on (``rules``), inside the domains of its topology constraint, or in one placement of every
    node without one; with the gate off, ``run`` (the constraint is not read).
    ``placed_before``: its pods bound or binding, with their nodes. ``parent``: the placement
    of the CompositePodGroup it is a child of (its domains are among those nodes). Raises
    ``topology.DomainError`` when those pods fix no single domain."""
    if rules is None:
        return await run(
            host,
            group,
            order,
            len(placed_before),
            gang_search=gang_search,
            search_timeout=search_timeout,
            fit_errors=fit_errors,
        )
    key = group.topology_key
    if key is None:
        # The gate on, no constraint: upstream's placement algorithm with one placement, its
        # parent's or every node (its messages say "0/1 placements"), no domain to count
        # devices in.
        cycle = await run_in_domains(
            host,
            group,
            order,
            len(placed_before),
            [parent or topology.everywhere(host.nodes())],
            rules,
            count_devices=False,
            gang_search=gang_search,
            search_timeout=search_timeout,
        )
        return dataclasses.replace(cycle, domains=(), domain=None, untried=())
    placements = topology.domains(key, topology.among(host.nodes(), parent), placed_before, rules)
    return await run_in_domains(
        host,
        group,
        order,
        len(placed_before),
        placements,
        rules,
        nominated=nominated,
        count_devices=count_devices,
        gang_search=gang_search,
        search_timeout=search_timeout,
    )
