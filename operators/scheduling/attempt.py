"""One scheduling attempt, prepared once for the scheduler and for ``simulate``.

Everything a pod's attempt decides before Filter, in kube-scheduler's order, from reads the
caller makes (its cache, or ``simulate``'s snapshot):

1. PreEnqueue: the pod's claims exist (``resolve_claims``), else it waits for them;
2. a claim that shares a device with another claim (two schedulers, a resumed old leader)
   waits for the double-allocation repair: binding first would leave two bound pods on one
   device, which nothing can repair;
3. PreFilter for extended resources backed by DRA (KEP-5004): the pod's special claim of an
   earlier attempt is used as it is when allocated and reserved for the pod; any other is
   dropped before the attempt (see ``DropStaleClaim``);
4. binding conditions (KEP-5007) of claims already allocated and reserved for the pod: pending,
   the pod waits; failed or timed out, the allocation is undone and the pod tried again;
5. ready: the claims, the extended resources, and whether the attempt needs an allocator.

``prepare`` returns one typed result; the scheduler applies it (writes, waits) and ``simulate``
answers from it, so neither repeats these steps. ``Attempt`` is the cycle's snapshot after
Filter, for PostFilter (preemption).

A new step of an attempt before Filter goes here, in ``prepare``, with its own result type.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Mapping, Sequence

from operators.allocator import AllocatedState
from operators.allocator.state import Holding
from operators.api.claim_status import edited_status
from operators.api.core import Node, Pod
from operators.api.groups import PodGroup, is_group_claim, is_reserved_for_pod
from operators.api.keys import ObjectKey
from operators.api.resource import ResourceClaim
from operators.api.timestamps import age
from operators.scheduling.binding_conditions import (
    ConditionsState,
    allocated_node,
    binding_verdict,
)
from operators.scheduling.cycle import ClaimsNotReady, resolve_claims
from operators.scheduling.extended import ExtendedResources, extended_resources, makes_claim
from operators.scheduling.nodes import NodeUsage, pod_requests
from operators.scheduling.plugins import Unresolvable
from operators.scheduling.pod_filters import PodFilters
from operators.scheduling.preemption import PodPriority

#: kube-scheduler's filter timeout (DRASchedulerFilterTimeout): how long one pod's allocation
#: may take; the scheduler's ``--filter-timeout`` and ``simulate``'s default.
DEFAULT_FILTER_TIMEOUT = 10.0


def deadline(monotonic: Callable[[], float], limit: float) -> Callable[[], bool] | None:
    """The allocator's ``out_of_time`` for a search of ``limit`` seconds from now, on the
    caller's clock (None: no limit). The scheduler and ``simulate`` measure it alike."""
    if not limit:
        return None
    started = monotonic()
    return lambda: monotonic() - started >= limit


@dataclasses.dataclass(frozen=True)
class Wait:
    """Nothing to try this time: an event of what it waits for brings the pod back (or
    ``retry_after`` seconds, for binding conditions that time out)."""

    reason: str
    retry_after: float | None = None
    on_binding_conditions: bool = False


@dataclasses.dataclass(frozen=True)
class SharedDevice:
    """A claim of the pod has a device that another claim's allocation has too."""

    claims: tuple[ResourceClaim, ...]

    @property
    def reason(self) -> str:
        return f"resourceclaim {self.claims[0].key} shares a device with another claim"


@dataclasses.dataclass(frozen=True)
class DropStaleClaim:
    """The pod's special claim of an earlier attempt is not allocated and reserved for it (its
    allocation write failed, or another consumer took it): it is deleted and the pod tried
    again with a new one. Upstream keeps such a claim into Filter and deletes it at PostFilter
    when no node can use it; a claim not allocated for the pod can never be used as it is, so
    the deletion comes first here, and the next attempt's Filter sees every node."""

    claim: ResourceClaim


@dataclasses.dataclass(frozen=True)
class BindingFailed:
    """Binding conditions failed or timed out (KEP-5007): every claim reserved for the pod
    gives up its reservation (and its allocation when nobody else holds it), the pod is
    tried again, preferring ``node``, where the device now is (the composable flow)."""

    message: str
    node: str | None
    released: tuple[ResourceClaim, ...]  # each claim as it is after the undo
    timed_out: bool = False  # not met within the binding timeout, rather than failed


@dataclasses.dataclass(frozen=True)
class Ready:
    """The attempt goes to Filter with these claims (a reused special claim included).
    ``group``: the pod's PodGroup when its claims may be the group's (DRAWorkloadResourceClaims);
    ``shared``: the keys of the claims that are (reserved for the PodGroup, not the pod)."""

    pod: Pod
    claims: tuple[ResourceClaim, ...]
    extended: ExtendedResources | None = None
    group: PodGroup | None = None
    shared: frozenset[str] = frozenset()

    @property
    def key(self) -> ObjectKey:
        return ObjectKey(self.pod.metadata.namespace or "", self.pod.metadata.name or "")

    @property
    def allocating(self) -> bool:
        """A claim to allocate: one of the pod's, or a new special claim (KEP-5004)."""
        return makes_claim(self.extended) or any(not c.is_allocated for c in self.claims)


Prepared = Wait | SharedDevice | DropStaleClaim | BindingFailed | Ready


def _never(_: ResourceClaim) -> bool:
    return False


def prepare(
    pod: Pod,
    claims: Mapping[str, ResourceClaim],
    *,
    now: datetime.datetime,
    binding_timeout: float,
    extended_classes: Mapping[str, str] | None = None,
    special_claim: Callable[[Pod], ResourceClaim | None] | None = None,
    shares_device: Callable[[ResourceClaim], bool] = _never,
    group: PodGroup | None = None,
) -> Prepared:
    """What the pod's attempt does before Filter.

    ``claims``: the pod namespace's claims by name (with the caller's writes not seen back
    yet). ``extended_classes``: extended resource name -> DeviceClass, None when
    DRAExtendedResource is off; ``special_claim`` finds the pod's special claim of an earlier
    attempt (asked only when the pod asks for a backed resource). ``shares_device``: the
    claim's devices are in another claim's allocation too (the scheduler's; ``simulate``
    knows of none). ``group``: the pod's PodGroup, given when group claims are on
    (DRAWorkloadResourceClaims): claims made for it are the pod's too."""
    resolved = resolve_claims(pod, claims, group_claims=group is not None)
    if isinstance(resolved, ClaimsNotReady):
        return Wait(resolved.reason)
    shared_keys = _shared(pod, group, claims)
    shared = tuple(c for c in resolved if c.is_allocated and shares_device(c))
    if shared:
        return SharedDevice(shared)
    extended = _extended(pod, extended_classes, special_claim)
    if extended is not None and extended.existing is not None:
        if not extended.reusable:
            return DropStaleClaim(extended.existing)
        resolved = [*resolved, extended.existing]
    conditions = _binding_conditions(pod, resolved, now, binding_timeout, group is not None)
    if conditions is not None:
        return conditions
    return Ready(pod, tuple(resolved), extended, group, shared_keys)


def _shared(
    pod: Pod, group: PodGroup | None, claims: Mapping[str, ResourceClaim]
) -> frozenset[str]:
    """The keys of the pod's claims that are its PodGroup's (``groups.is_group_claim``)."""
    if group is None:
        return frozenset()
    keys = set()
    for entry in pod.spec.resource_claims:
        name = pod.claim_name(entry)
        claim = claims.get(name) if name else None
        if claim is not None and is_group_claim(entry, group):
            keys.add(claim.key)
    return frozenset(keys)


def _extended(
    pod: Pod,
    classes: Mapping[str, str] | None,
    special_claim: Callable[[Pod], ResourceClaim | None] | None,
) -> ExtendedResources | None:
    """PreFilter for extended resources: what the pod asks of resources DeviceClasses back
    (None: the gate is off, or it asks for none), with its special claim of an earlier
    attempt."""
    if classes is None:
        return None
    requests = pod_requests(pod)
    if not any(name in classes for name in requests):
        return None
    existing = special_claim(pod) if special_claim is not None else None
    return extended_resources(pod, classes, requests, existing)


def _binding_conditions(
    pod: Pod,
    claims: Sequence[ResourceClaim],
    now: datetime.datetime,
    timeout: float,
    group_claims: bool,
) -> Wait | BindingFailed | None:
    """The binding conditions of the claims reserved for the pod (or its PodGroup), in the
    pod's claim order: the first that fails or waits decides; None when every one is met (or
    none has any)."""
    uid = pod.metadata.uid or ""
    for claim in claims:
        if not (claim.is_allocated and is_reserved_for_pod(claim, pod, group_claims)):
            continue
        allocation = claim.status.allocation
        verdict = binding_verdict(
            claim, age(allocation.allocation_timestamp if allocation else None, now), timeout
        )
        if verdict.state in (ConditionsState.FAILED, ConditionsState.TIMED_OUT):
            released = tuple(
                undone for c in claims if (undone := undo_reservation(c, uid)) is not None
            )
            return BindingFailed(
                verdict.message,
                allocated_node(claim),
                released,
                timed_out=verdict.state is ConditionsState.TIMED_OUT,
            )
        if verdict.state is ConditionsState.PENDING:
            return Wait(verdict.message, verdict.remaining, on_binding_conditions=True)
    return None


def undo_reservation(claim: ResourceClaim, pod_uid: str) -> ResourceClaim | None:
    """``claim`` without the pod's reservation, and without its allocation and device
    statuses when nobody else holds it (None: not reserved for the pod)."""
    if not claim.is_reserved_for(pod_uid):
        return None
    deallocate = not (claim.reserved_for_uids() - {pod_uid})
    return ResourceClaim.load(edited_status(claim, unreserve=(pod_uid,), deallocate=deallocate))


@dataclasses.dataclass(frozen=True)
class Attempt:
    """What one cycle saw, for its PostFilter: the prepared attempt, the pod's priority, the
    nodes, their usage and the allocated state (None: the caller's own; with the nominations it
    had to leave alone, ``promised``, whose devices and node usage count as taken).
    ``releases`` and ``moves``: the caller's counts of freed devices and room-making changes
    when the cycle took its snapshot (a change since means the answer may be stale)."""

    ready: Ready
    priority: PodPriority
    nodes: Sequence[Node]
    usage: Mapping[str, NodeUsage]
    state: AllocatedState | None = None
    releases: int = 0
    moves: int = 0
    left_alone: tuple[ObjectKey, ...] = ()  # preemptors whose nominated devices it left
    promised: tuple[Holding, ...] = ()  # what they hold there
    #: A trial on a state that is not the cluster's (a pod group's preemption took victims
    #: out): what it finds unsatisfiable says nothing about the real state.
    what_if: bool = False
    #: The default profile's other plugins, PreFilter run on the cycle's snapshot
    #: (``pod_filters``; None: the caller checks none).
    filters: PodFilters | Unresolvable | None = None

    @property
    def pod(self) -> Pod:
        return self.ready.pod

    @property
    def key(self) -> ObjectKey:
        return self.ready.key

    @property
    def claims(self) -> tuple[ResourceClaim, ...]:
        return self.ready.claims

    @property
    def extended(self) -> ExtendedResources | None:
        return self.ready.extended

    @property
    def allocating(self) -> bool:
        return self.ready.allocating
