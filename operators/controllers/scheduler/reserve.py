"""Reserve: a pod's place taken in the scheduler's cache once a node fits it, before anything is
written. Every later cycle sees it (the claims in the in-flight ledger as they will be
written, the pod's node usage assumed); the binding cycle (``binder``) writes it; ``undo``
gives it back while nothing is written (a pod group that is not placed after all, a gang that
times out at Permit). A pod group's cycle (``scheduling.group_cycle``) assumes its pods here
one by one.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Protocol

from operators.api.core import Pod
from operators.api.keys import ObjectKey
from operators.controllers.scheduler import planning
from operators.controllers.scheduler.preemptor import Preemptor
from operators.controllers.scheduler.protocol import SchedulerIO
from operators.controllers.scheduler.queueing import PodState, SchedulingQueue
from operators.runtime.actions import Patch
from operators.scheduling.attempt import Attempt
from operators.scheduling.cycle import NodeFit
from operators.scheduling.extended import IN_MEMORY_NAME, final_name
from operators.scheduling.node_allocatable import named
from operators.scheduling.nodes import pod_requests
from operators.scheduling.plugins import volumebinding
from operators.scheduling.plugins.volumebinding import PodVolumes
from operators.scheduling.pod_filters import PodFilters
from operators.scheduling.profile import Profile


class Scheduler(SchedulerIO, Protocol):
    """What Reserve uses of its scheduler (the handlers' ``Scheduler``)."""

    queue: SchedulingQueue
    preemptor: Preemptor
    profile: Profile


@dataclasses.dataclass(eq=False)
class Reserved:
    """One pod's Reserve: what its binding cycle writes (the claims, in order, then the pod's
    status patch: its special claim's mappings, its claims' node resources) and the node it
    binds to; and its own undo."""

    pod: Pod
    plan: list[planning.Reservation]
    fit: NodeFit
    status: Patch | None
    scheduler: Scheduler
    #: VolumeBinding's Reserve: the PVs and claims as PreBind writes them (None: nothing to
    #: bind; ``fit.volumes`` has them as the cycle found them).
    volumes: PodVolumes | None = None

    @property
    def key(self) -> ObjectKey:
        return planning.pod_key(self.pod)

    @property
    def node(self) -> str:
        return self.fit.node

    def undo(self) -> None:
        """Nothing of it was written: the ledger and the node usage forget it, and the pod is
        queued again. Devices it took are free again, so outcomes known unsatisfiable
        meanwhile may be wrong now."""
        s = self.scheduler
        for reservation in reversed(self.plan):
            s.cache.ledger.discard_unwritten(planning.claim_key(reservation.target))
        s.cache.assume(self.key, self.pod, None)
        s.cache.assume_volumes(self.key, None)
        s.queue.set_state(self.key, PodState.QUEUED)
        s.queue.unsatisfiable.clear()


def assume(s: Scheduler, attempt: Attempt, fit: NodeFit) -> Reserved:
    """Reserve's bookkeeping: the attempt's claims as they will be written, in the ledger (a
    special claim for extended resources under the name it will be created with), and its node
    usage assumed with its claims' node resources (as upstream's assume)."""
    pod, key = attempt.pod, attempt.key
    s.queue.set_state(key, PodState.QUEUED)
    s.preemptor.nominations.pop(key, None)  # its devices are in the ledger from here on
    claims, results, created = list(attempt.claims), fit.results, None
    node_claim = fit.extended
    if node_claim is None and attempt.extended is not None:
        # The special claim of an earlier attempt, reused: its mappings on this node.
        node = next(n for n in attempt.nodes if n.metadata.name == fit.node)
        node_claim = attempt.extended.for_node(node)
    if fit.extended is not None:
        generate = fit.extended.claim.metadata.generate_name or ""
        created = fit.extended.named(final_name(generate, random.randrange))
        in_memory = fit.extended.claim.key
        results = {(created.key if k == in_memory else k): r for k, r in results.items()}
        claims = [*claims, created]
    plan = planning.reservations(
        pod,
        claims,
        results,
        s.clock.now(),
        creating=created.key if created else None,
        group=attempt.ready.group,
        shared=attempt.ready.shared,
    )
    for reservation in plan:
        s.cache.ledger.reserve(planning.claim_key(reservation.target), reservation.target)
    s.cache.assume(key, pod, (fit.node, pod_requests(pod, fit.node_allocatable)))
    volumes = None
    if fit.volumes is not None and isinstance(attempt.filters, PodFilters):
        volumes = volumebinding.assume(pod, fit.node, fit.volumes, attempt.filters.snapshot)
        s.cache.assume_volumes(key, volumes)
    status = None
    special = created or (attempt.extended.existing if attempt.extended else None)
    if node_claim is not None and special is not None:
        status = planning.extended_status(pod, node_claim.status_patch(special))
    if fit.node_allocatable:
        statuses = fit.node_allocatable
        if special is not None and s.profile.extended_claim_named:
            statuses = named(statuses, IN_MEMORY_NAME, special.metadata.name or "")
        status = planning.node_allocatable_status(pod, statuses, status)
    return Reserved(pod, plan, fit, status, s, volumes)
