"""What a pod gets after its filter cycle, decided once for the scheduler and for ``simulate``.

kube-scheduler's order, after Filter:

1. a node fits: Reserve it, unless ``rank-first`` preemption wants a better alternative than
   the best that fits (then look for victims first, and Reserve the fit if there are none);
2. nothing fits, and one of the pod's own claims is allocated where no node can use it, held by
   nobody else: deallocate it (upstream's DynamicResources PostFilter);
3. the pod preempted before and its victims are gone: release their claims now rather than at
   the reservation cleanup's next pass, and seek no new victims;
4. preemption (DefaultPreemption's PostFilter), unless it is off, the pod's input is bad, the
   allocator ran out of time (no victims for nodes it did not decide), or devices were freed
   since the cycle's snapshot (a new cycle may find room without evicting anybody);
5. give up: the pod is unschedulable.

The function reads nothing: every fact that needs an API read or the scheduler's in-flight
state (claims being written, victims' claims ready to release, devices freed meanwhile) is
read first and passed in. ``simulate`` passes what its snapshot says.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence

from operators.api.core import Pod
from operators.api.resource import ResourceClaim
from operators.scheduling.cycle import CycleResult, NodeFit
from operators.scheduling.preemption import AlternativesPolicy, wanted

FREED_MEANWHILE = "preemption: not attempted, devices were freed meanwhile."
RELEASING_VICTIMS = "preemption: the claims of preempted pods are being released."


@dataclasses.dataclass(frozen=True)
class Reserve:
    """Take ``fit``: its node and the allocations the cycle found there."""

    fit: NodeFit


@dataclasses.dataclass(frozen=True)
class Deallocate:
    """The pod's own stranded claim: deallocated, the pod tried again."""

    claim: ResourceClaim


@dataclasses.dataclass(frozen=True)
class ReleaseVictimClaims:
    """Claims of the pod's preemption victims, every consumer gone: released now."""

    claims: tuple[ResourceClaim, ...]
    note: str = RELEASING_VICTIMS


@dataclasses.dataclass(frozen=True)
class Preempt:
    """Look for victims. ``better_than``: the rank of the fit that exists (rank-first), whose
    ``fallback`` is reserved when no eviction finds a better alternative; None: nothing fits."""

    better_than: int | None = None
    fallback: NodeFit | None = None


@dataclasses.dataclass(frozen=True)
class Unschedulable:
    """Nothing to do but wait for a change; ``note`` says why preemption was not tried."""

    note: str | None = None


Decision = Reserve | Deallocate | ReleaseVictimClaims | Preempt | Unschedulable


def decide(
    pod: Pod,
    claims: Sequence[ResourceClaim],
    result: CycleResult,
    fit: NodeFit | None,
    *,
    preemption: AlternativesPolicy | None,
    freed: bool = False,
    in_flight: Collection[str] = (),
    victim_claims: Sequence[ResourceClaim] = (),
) -> Decision:
    """The next step for ``pod`` after a cycle that found ``fit`` (None: no node fits).

    ``preemption``: the alternatives policy, None when preemption is off. ``freed``: devices
    were freed since the cycle's snapshot. ``in_flight``: keys of claims with a write of the
    scheduler's not seen back yet (not to be deallocated under it). ``victim_claims``: claims on
    the pod's nominated node whose consumers are all gone (its victims).
    """
    if fit is not None:
        if preemption is not None and wanted(fit.score.rank, preemption) and not freed:
            return Preempt(better_than=fit.score.rank, fallback=fit)
        return Reserve(fit)
    stranded = stranded_claim(pod, claims, result.unavailable)
    if stranded is not None and stranded.key not in in_flight:
        return Deallocate(stranded)
    if victim_claims:
        return ReleaseVictimClaims(tuple(victim_claims))
    if preemption is None or result.pod_error is not None or result.timed_out:
        return Unschedulable()
    if freed:
        return Unschedulable(FREED_MEANWHILE)
    return Preempt()


def stranded_claim(
    pod: Pod, claims: Sequence[ResourceClaim], unavailable: Sequence[str]
) -> ResourceClaim | None:
    """One allocated claim to deallocate so that the pod can be placed again.

    Upstream's rule: among the claims whose allocation a node could not use (the cycle's
    ``unavailable``), one that is reserved for nobody or for this pod alone; nothing that
    another consumer holds. Upstream picks at random; the pod's own claim order here.
    """
    uid = pod.metadata.uid or ""
    wanted_keys = set(unavailable)
    for claim in claims:
        if claim.key not in wanted_keys or not claim.is_allocated:
            continue
        if claim.reserved_for_uids() <= {uid}:
            return claim
    return None
