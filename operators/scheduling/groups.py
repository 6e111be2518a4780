"""Pod groups (1.37's GenericWorkload), decided without I/O: when a group may be tried, in which
order its pods are placed, whether a placement of some of them is enough, and what each pod and
the PodGroup are told. kube-scheduler 1.37.2's rules (``schedule_one_podgroup.go`` and the
GangScheduling plugin):

- a pod whose PodGroup does not exist yet, or a gang with fewer than ``minCount`` pods, waits
  without a word (no condition, no Event: upstream's PreEnqueue);
- every queued pod of the group is tried in one cycle, by priority (high first), attempts (most
  first), then the time it was queued and its name; each placement is assumed for the pods after
  it, so they see its node usage and its devices, and a claim the group shares is allocated once;
- the group succeeds when the pods already placed (bound or binding) and those placed now reach
  ``minCount`` (1 for ``basic``) and at least one was placed now; the cycle stops as soon as
  that cannot happen any more. Otherwise nothing it placed is kept.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import Literal

from operators.api.core import PREEMPT_LOWER_PRIORITY, Pod
from operators.api.groups import CompositePodGroup, PodGroup
from operators.api.keys import ObjectKey
from operators.api.resource import ResourceClaim
from operators.cel.library.strings import go_quote

UNSCHEDULABLE = "pod group is unschedulable"
#: The PodGroupInitiallyScheduled reasons of a group that is not tried.
SCHEDULER_ERROR = "SchedulerError"
POD_GROUP_ERROR = "PodGroupError"


def key_of(pod: Pod) -> ObjectKey:
    return ObjectKey(pod.metadata.namespace or "", pod.metadata.name or "")


def waits(group: PodGroup | None, group_key: ObjectKey, members: int) -> str | None:
    """Why the group's pods are not tried yet (None: they are); said in the log only, as
    upstream's PreEnqueue. ``members``: the group's pods that exist and are not finished."""
    if group is None:
        return f"waiting for pods's pod group {str(group_key)!r} to appear in scheduling queue"
    if group.is_gang and members < group.min_count:
        return "waiting for minCount pods from a gang to appear in scheduling queue"
    return None


#: Whose preemption policy a group has (``resolvePreemptionPolicy``): ``pods``: Never when any of
#: its pods says Never (1.37, PodGroupPreemptionPolicy off); ``group``: the PodGroup's
#: ``spec.preemptionPolicy``, PreemptLowerPriority when unset (1.37, on); ``group-else-pods``:
#: the PodGroup's where set, else its pods' (1.38, where the gate is gone and the field ungated).
PolicySource = Literal["pods", "group", "group-else-pods"]


@dataclasses.dataclass(frozen=True)
class GroupRules:
    """What a release checks of a group before its cycle (``validatePodGroup``)."""

    policy: PolicySource = "pods"
    #: 1.38's ``validatePodGroupHierarchy``: messages that name the pods, and the reason
    #: PodGroupError (1.37: SchedulerError) on the PodGroup and its pods.
    hierarchy: bool = False
    #: 1.38's podGroupFitError: the scheduling policy's "minimum threshold" wording, "no pods
    #: were schedulable", and a pod that fits told only that its parent group is unschedulable.
    fit_errors: bool = False


@dataclasses.dataclass(frozen=True)
class Refusal:
    """Why a group is not tried, and the reason its condition and pods are given."""

    message: str
    reason: str


def refused(
    group: PodGroup, queued: Sequence[Pod], placed: Sequence[Pod], rules: GroupRules
) -> Refusal | None:
    """Upstream's validation over the group's pods, the queued ones first, then those already
    placed, each checked for its scheduler name (the first queued pod's), its priority (the
    PodGroup's) and its preemption policy (``rules.policy``); and a group with a parent where
    kopf-dra runs with CompositePodGroup off (the caller places trees where it is on). None:
    nothing to refuse."""
    if group.spec.parent_composite_pod_group_name:
        return Refusal(
            f"PodGroup {group.metadata.key} is part of CompositePodGroup "
            f"{group.spec.parent_composite_pod_group_name!r}: kopf-dra runs with the "
            "CompositePodGroup feature gate off, so it places no composite pod groups "
            "(--feature-gates CompositePodGroup=true)",
            SCHEDULER_ERROR,
        )
    if not queued:
        return None
    message = (_hierarchy if rules.hierarchy else single_group_refusal)(
        group, queued, placed, rules.policy
    )
    if message is None:
        return None
    return Refusal(message, POD_GROUP_ERROR if rules.hierarchy else SCHEDULER_ERROR)


def policy_of(pod: Pod) -> str:
    return pod.spec.preemption_policy or PREEMPT_LOWER_PRIORITY


def scheduler_of(pod: Pod) -> str:
    return pod.spec.scheduler_name or "default-scheduler"


def single_group_refusal(
    group: PodGroup | CompositePodGroup,
    queued: Sequence[Pod],
    placed: Sequence[Pod],
    policy: PolicySource,
) -> str | None:
    """1.37.2's ``validatePodGroup``: the first pod that breaks a rule, its first rule
    (``group``: the root of the pods' hierarchy, whose priority and policy they must have)."""
    first = scheduler_of(queued[0])
    priority = group.spec.priority or 0
    gated = policy != "pods"
    expected = (group.spec.preemption_policy or PREEMPT_LOWER_PRIORITY) if gated else ""
    for pod in (*queued, *placed):
        if scheduler_of(pod) != first:
            return (
                "all pods in a single pod group should have the same .spec.schedulerName set, "
                f"got: {go_quote(scheduler_of(pod))} and {go_quote(first)}"
            )
        if (pod.spec.priority or 0) != priority:
            return (
                "all pods in a single pod group should have the same priority as the pod "
                f"group's priority, got {pod.spec.priority or 0} and {priority}"
            )
        if gated and policy_of(pod) != expected:
            return (
                "all pods in a single pod group should have the same preemption policy as the "
                f"pod group's preemption policy, got {policy_of(pod)} and {expected}"
            )
        if not expected:
            expected = policy_of(pod)
        elif policy_of(pod) != expected:
            return (
                "all pods in a single pod group should have the same preemption policy, "
                f"got {policy_of(pod)} and {expected}"
            )
    return None


def _hierarchy(
    group: PodGroup, queued: Sequence[Pod], placed: Sequence[Pod], policy: PolicySource
) -> str | None:
    """1.38's ``validatePodGroupHierarchy`` for a group without a parent: the pods named."""
    first = queued[0]
    ref = f"podgroup/{group.metadata.namespace or ''}/{group.metadata.name or ''}"
    return hierarchy_pods((*queued, *placed), first, group, ref)


def hierarchy_pods(
    pods: Sequence[Pod], first: Pod, root: PodGroup | CompositePodGroup, root_ref: str
) -> str | None:
    """1.38's pod checks of a hierarchy (``validatePod``): the scheduler name of ``first``
    (the first queued pod), the root's priority, and its preemption policy (else the first
    pod's), each pod named."""
    priority = root.spec.priority or 0
    expected = root.spec.preemption_policy or policy_of(first)
    quoted = go_quote(root_ref)
    for pod in pods:
        name = go_quote(pod.metadata.name or "")
        if scheduler_of(pod) != scheduler_of(first):
            return (
                "all pods in a pod group hierarchy should have the same .spec.schedulerName "
                f"set, got: {go_quote(scheduler_of(pod))} ({name}) and "
                f"{go_quote(scheduler_of(first))} ({go_quote(first.metadata.name or '')})"
            )
        if (pod.spec.priority or 0) != priority:
            return (
                "all pods in a pod group hierarchy should have the same priority as the root "
                f"pod group's priority, got {pod.spec.priority or 0} ({name}) and {priority} "
                f"({quoted})"
            )
        if policy_of(pod) != expected:
            return (
                "all pods in a pod group hierarchy should have the same preemption policy, "
                f"got {policy_of(pod)} ({name}) and {expected}"
            )
    return None


def ordered(pods: Sequence[Pod], attempts: Mapping[ObjectKey, int]) -> list[Pod]:
    """The order the cycle tries the group's pods in (``PodGroupMemberPodsOrderingFunc``):
    priority, then attempts, high first; then creation time and name (kopf-dra's stand-in for
    the time each was queued, which its queue does not keep per group)."""
    return sorted(
        pods,
        key=lambda p: (
            -(p.spec.priority or 0),
            -attempts.get(key_of(p), 0),
            p.metadata.creation_timestamp or "",
            p.metadata.name or "",
        ),
    )


def cannot_be_satisfied(
    min_count: int,
    scheduled: int,
    remaining: int,
    unschedulable: int = 0,
    *,
    fit_errors: bool = False,
) -> str | None:
    """GangScheduling's PlacementFeasible: the message once ``minCount`` is out of reach (1.38,
    ``fit_errors``: the scheduling policy's minimum threshold, the pods that fit nowhere
    counted)."""
    if remaining + scheduled >= min_count:
        return None
    if fit_errors:
        return (
            f"scheduling policy's minimum threshold ({min_count}) cannot be satisfied: "
            f"{scheduled} scheduled, {unschedulable} unschedulable, {remaining} not-evaluated"
        )
    return (
        f"minCount ({min_count}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining"
    )


def not_yet_satisfied(
    min_count: int, scheduled: int, remaining: int, unschedulable: int, *, fit_errors: bool
) -> str:
    """PlacementFeasible's Wait: ``minCount`` still in reach but not reached."""
    if fit_errors:
        return (
            f"scheduling policy's minimum threshold ({min_count}) is not yet satisfied: "
            f"{scheduled} scheduled, {unschedulable} unschedulable, {remaining} not-evaluated"
        )
    return (
        f"minCount ({min_count}) is not yet satisfied: {scheduled} scheduled, {remaining} remaining"
    )


#: 1.38's reason when nothing was placed although the pods already scheduled reach minCount.
NO_PODS_SCHEDULABLE = "no pods were schedulable"


def parent_unschedulable(group: PodGroup) -> str:
    """What 1.38 tells a pod of a group that is not placed, where the pod itself fits."""
    return f"parent pod group {go_quote(group.metadata.name or '')} is unschedulable"


@dataclasses.dataclass(frozen=True)
class GroupOutcome:
    """How one cycle of a group ended: ``placed`` the pods it placed (kept only on success);
    ``failed`` each pod that fits nowhere, with its own message; ``message`` the group's
    (None on success); ``parent`` what a pod that fits is told instead of the group's message
    (1.38); ``minimum_met`` the scheduled pods reach ``minCount`` (nothing placed now: to a
    topology search, a domain that fits)."""

    placed: tuple[ObjectKey, ...]
    failed: Mapping[ObjectKey, str]
    message: str | None
    parent: str | None = None
    minimum_met: bool = False

    @property
    def succeeded(self) -> bool:
        return self.message is None


def outcome(
    group: PodGroup,
    scheduled_before: int,
    placed: Sequence[ObjectKey],
    failed: Mapping[ObjectKey, str],
    remaining: int,
    *,
    fit_errors: bool = False,
) -> GroupOutcome:
    """The group's verdict after its cycle (``remaining``: the pods it did not get to;
    ``fit_errors``: 1.38's wording, ``GroupRules``)."""
    scheduled = scheduled_before + len(placed)
    count = (group.min_count, scheduled, remaining, len(failed))
    reason = cannot_be_satisfied(*count, fit_errors=fit_errors)
    if reason is None and scheduled < group.min_count:
        reason = not_yet_satisfied(*count, fit_errors=fit_errors)
    parent = parent_unschedulable(group) if fit_errors else None
    if reason is not None:
        return GroupOutcome(tuple(placed), dict(failed), f"{UNSCHEDULABLE}, {reason}", parent)
    if not placed:
        message = f"{UNSCHEDULABLE}, {NO_PODS_SCHEDULABLE}" if fit_errors else UNSCHEDULABLE
        return GroupOutcome((), dict(failed), message, parent, minimum_met=True)
    return GroupOutcome(tuple(placed), dict(failed), None, minimum_met=True)


@dataclasses.dataclass(frozen=True)
class FailedCycle:
    """A group's last cycle that placed nothing: what it saw (the queue's count of room-making
    changes, the PodGroup's version) and the pods it tried."""

    moves: int
    group_version: str | None
    tried: frozenset[ObjectKey]
    at: float  # monotonic seconds


def tried_with_group(
    last: FailedCycle | None,
    key: ObjectKey,
    queued: Collection[ObjectKey],
    moves: int,
    group_version: str | None,
    now: float,
    retry: float,
) -> bool:
    """The pod popped was tried in its group's last cycle, which placed nothing, less than
    ``retry`` seconds ago, and nothing that could change the verdict came since (no room made,
    the PodGroup unchanged, no new pod queued): another cycle would repeat it. Upstream pops a
    group's pods together, once; here each pod has its queue entry, and the group's other pods,
    popped after the cycle, ride on it (the periodic retry still runs the group's cycle)."""
    return (
        last is not None
        and now - last.at < retry
        and last.moves == moves
        and last.group_version == group_version
        and key in last.tried
        and set(queued) <= last.tried
    )


def stranded_group_claims(
    group: PodGroup,
    claims: Sequence[ResourceClaim],
    unavailable: Collection[str],
    placed_before: int,
) -> list[ResourceClaim]:
    """The group's claims to deallocate after a cycle that placed nothing (upstream's
    DynamicResources PodGroupPostFilter): allocated where none of the group's pods could use
    them (a pod's cycle found them unavailable), held by nobody or by this PodGroup alone, and
    only while no pod of the group is placed (a placed pod holds them)."""
    if placed_before:
        return []
    uid = group.metadata.uid or ""
    return [
        c
        for c in claims
        if c.is_allocated and c.key in unavailable and c.reserved_for_uids() <= {uid}
    ]


def pod_message(result: GroupOutcome, key: ObjectKey, evaluated: bool) -> str:
    """What a pod of a group that was not placed is told: its own reason when it fits nowhere;
    1.38's parent message, or the group's, otherwise (it fits, or was not tried once the gang
    was out of reach). Upstream prefixes a fitting pod's copy with "pod group is
    unschedulable, " a second time."""
    own = result.failed.get(key)
    if own is not None and evaluated:
        return own
    return result.parent or result.message or UNSCHEDULABLE


def not_placed(pod: Pod, why: str) -> str:
    """What a pod naming a PodGroup is told where the scheduler places no groups
    (``Profile.groups_off`` says why)."""
    group = pod.spec.scheduling_group
    name = group.pod_group_name if group is not None else None
    return f"pod {pod.metadata.key} names PodGroup {name!r}: {why}"
