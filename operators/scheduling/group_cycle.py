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
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Generic, Protocol, TypeVar

from operators.allocator import AllocatedState, Features
from operators.api.core import Pod
from operators.api.groups import PodGroup
from operators.api.keys import ObjectKey
from operators.api.resource import ResourceClaim
from operators.scheduling.attempt import Attempt, Prepared, Ready
from operators.scheduling.cycle import CycleResult, NodeFit, unschedulable_message
from operators.scheduling.group_search import NODE_OPTIONS, restricted, search, variants
from operators.scheduling.groups import (
    UNSCHEDULABLE,
    GroupOutcome,
    cannot_be_satisfied,
    key_of,
    outcome,
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
) -> Placement[A]:
    """The pods in ``order``, each filtered and, when it fits, assumed for the next. ``on`` (a
    preemption's reprieve): only these pods, each on its node, and every one must fit (the pass
    stops at the first that does not). What is assumed stays until ``Placement.undo``; an
    exception undoes it."""
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
) -> Cycle[A]:
    """The group's cycle over its queued pods in ``order`` (``groups.ordered``), with
    ``placed_before`` of its pods bound or binding already."""
    placement = await place(host, group, order, placed_before)
    if placement.waiting is not None:
        return Cycle(placement, None)
    verdict = outcome(group, placed_before, placement.placed, placement.failed, placement.remaining)
    if not verdict.succeeded and placement.assumed and gang_search:
        # Some pods fit: another combination of their choices may fit the whole group.
        placement.undo()
        found = await _search(host, group, order, placed_before, search_timeout)
        if found is not None:
            placement.assumed, placement.failed = found, {}
            searched = outcome(group, placed_before, placement.placed, {}, 0)
            return Cycle(placement, searched, greedy=verdict)
    if verdict.succeeded:
        return Cycle(placement, verdict)
    placement.undo()
    stranded = stranded_group_claims(
        group, list(placement.shared.values()), placement.unavailable, placed_before
    )
    return Cycle(placement, verdict, stranded=tuple(stranded))


async def _search(
    host: Host[A], group: PodGroup, order: Sequence[Pod], placed_before: int, budget: float
) -> list[A] | None:
    """The pods placed by searching their prioritized alternatives and the other nodes that fit
    them (``group_search``), within ``budget`` seconds; None (nothing kept) when no combination
    reaches ``minCount``."""
    deadline = host.monotonic() + budget

    async def options(member: Pod) -> AsyncGenerator[tuple[Attempt, NodeFit], None]:
        prepared = host.prepare(member)
        if not isinstance(prepared, Ready):
            return
        attempt = host.snapshot(prepared)  # assumed with the claims as they are
        for variant in variants(prepared.claims):
            tried = dataclasses.replace(
                prepared, claims=tuple(restricted(prepared.claims, variant))
            )
            filtered = await host.filter(host.snapshot(tried), every_fit=True)
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
