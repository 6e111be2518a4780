"""Preemption for a pod group (PodGroupPostFilter's DefaultPreemption, 1.37), pure parts.

kube-scheduler 1.37.2's PodGroupEvaluator, with kopf-dra's release of the victims' devices:

1. Eligibility: the group's preemption policy (``resolvePreemptionPolicy``): with
   PodGroupPreemptionPolicy on, the PodGroup's ``spec.preemptionPolicy`` (PreemptLowerPriority
   when unset); off, Never when any of its pods says Never.
2. The domain is the whole cluster. Every unit (``preemption.Unit``: a pod, or all bound pods of
   a PodGroup whose ``disruptionMode`` is ``all``) of lower priority than the group's
   (``preemption.group_priority``; a member of another group counts with its group's) is
   removed, with its node usage and the devices of the claims only it holds (``Removed``), and
   the group's cycle runs on that state. No placement for ``minCount`` pods: nobody is evicted.
3. Reprieve: units go back one at a time, most important first, those whose eviction would
   violate a PodDisruptionBudget before the others; a unit stays when every placed pod still
   fits on its proposed node, in the cycle's order. A unit with no pod on a proposed node
   changes nothing there and stays without a trial.
4. What is left is evicted, whole units only; each pod is nominated to its proposed node.

Upstream's DynamicResources frees no device when a victim is removed (it has no
PreFilterExtensions), so kube-scheduler 1.37.2 never preempts for a group's devices; here a
claim whose every consumer is a victim releases its devices, as single-pod preemption does
(``preemption.release_blocker``: not a PodGroup's claim, not a multi-node device, no binding
conditions).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from decimal import Decimal

from operators.allocator import AllocatedState, Features
from operators.allocator.state import Holding
from operators.api.core import PREEMPT_NEVER, Pod, PriorityClass
from operators.api.groups import PodGroup
from operators.scheduling.nodes import NodeUsage, pod_requests
from operators.scheduling.preemption import RunningPod, Unit, priority_of, release_blocker

#: What kube-scheduler puts before the PodGroupPostFilter's answer in the pods' message.
PREFIX = "pod group preemption: "
NO_VICTIMS = "No preemption victims found for incoming preemptor"
ONGOING = "ongoing preemption on nominated nodes"
RELEASING = "the claims of preempted pods are being released"


def preempts(
    group: PodGroup, pods: Sequence[Pod], classes: Mapping[str, PriorityClass], policy_gate: bool
) -> bool:
    """resolvePreemptionPolicy: whether the group may preempt at all."""
    if policy_gate:
        return group.spec.preemption_policy != PREEMPT_NEVER
    return all(priority_of(p, classes).preempts for p in pods)


def found(victims: int) -> str:
    """Upstream's status when victims were chosen (the group waits for them to go)."""
    return f"found a placement for podgroup, preempting {victims} victims"


def touches(unit: Unit, nodes: frozenset[str]) -> bool:
    """Whether putting ``unit`` back can change what a pod proposed on ``nodes`` needs: a pod
    of it runs there (its node usage, its node-local devices)."""
    return any(p.pod.spec.node_name in nodes for p in unit.pods)


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
