"""The scheduling queue: which pods wait, what the scheduler remembers of each between
attempts, and which events bring them back (kube-scheduler's scheduling queue, its
``QueuedPodInfo`` and ``EventsToRegister`` with a queueing hint per event).

``SchedulingQueue`` owns the work queue (one lane per namespace) and one ``PodRecord`` per
pending pod; the claims' specs that fit nowhere (``Unsatisfiable``) are a cache beside them,
shared across pods. Every watch event goes through a hint here (``feeds``): Queue or
QueueSkip, with its reason, logged at debug level and counted in
``kopf_dra_scheduler_queueing_hints_total`` by event and hint, so that "why did my pod not
come back" has an answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import heapq
import json
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Hashable, Iterable, Mapping, Sequence
from typing import Any

import structlog

from operators.api.core import Pod
from operators.api.keys import ObjectKey
from operators.api.names import TERMINAL_PHASES
from operators.api.resource import ResourceClaim
from operators.controllers.scheduler import metrics
from operators.controllers.scheduler.cache import PEER_KINDS, SchedulerCache
from operators.observability import fields
from operators.runtime.clock import Clock
from operators.runtime.informer import EventFeed
from operators.runtime.queue import WorkQueue
from operators.runtime.stores import ModelCache
from operators.runtime.tasks import TaskOwner
from operators.scheduling import composite
from operators.scheduling.cycle import KnownOutcome

log = structlog.get_logger(__name__)

_ACTIONS = {"ADDED": "Add", "MODIFIED": "Update", "DELETED": "Delete", None: "Add"}
INITIAL_BACKOFF = 1.0  # seconds: kube-scheduler's podInitialBackoffSeconds
MAX_BACKOFF = 10.0  # seconds: podMaxBackoffSeconds
REQUEUE_COALESCE = 0.2  # seconds: a burst of room-making events moves the pods back once
MAX_UNSATISFIABLE_SPECS = 1000


class PodState(enum.Enum):
    """Where a pending pod is between attempts."""

    QUEUED = "queued"  # waiting for an attempt, or in one
    UNSCHEDULABLE = "unschedulable"  # fitted nowhere: back on an event that may make room
    WAITING = "waiting"  # reserved, waiting for its claims' binding conditions (KEP-5007)


@dataclasses.dataclass
class PodRecord:
    """What the scheduler remembers of one pending pod between attempts (QueuedPodInfo)."""

    state: PodState = PodState.QUEUED
    attempts: int = 0
    first_attempt: float | None = None  # perf_counter() when its first attempt began
    attempt_started: float | None = None  # ... and its current or last attempt
    # Allocation time used by attempts that gave way to other tenants; None when the next
    # attempt starts afresh rather than continuing one that yielded.
    spent: float | None = None
    # Node of a failed binding attempt (KEP-5007) or of a preemption: the retry prefers it.
    # Kept here as well as in pod.status.nominatedNodeName, because the retry runs before the
    # cache shows it.
    nominated: str | None = None
    last_message: str | None = None  # its PodScheduled=False message, said once
    # When its last attempt found it unschedulable (the clock's monotonic): its backoff runs
    # from there, as from upstream's QueuedPodInfo timestamp.
    unschedulable_at: float | None = None
    # Since when it waits (the clock's monotonic; ``SchedulingQueue.starving_after``): its
    # arrival in this replica's queue, or, for a pod that came before this replica led, when
    # an attempt first found it unschedulable.
    waiting_since: float | None = None

    def begin_attempt(self, now: float) -> None:
        """An attempt begins, unless it continues one that yielded (counted once)."""
        if self.spent is not None:
            return
        self.attempts += 1
        self.attempt_started = now
        if self.first_attempt is None:
            self.first_attempt = now

    def backoff(self) -> float:
        """kube-scheduler's pod backoff after a failed attempt: 1 s, doubled per attempt so far,
        at most 10 s (podInitialBackoffSeconds, podMaxBackoffSeconds)."""
        attempts = max(self.attempts, 1)
        return float(min(MAX_BACKOFF, INITIAL_BACKOFF * 2 ** (attempts - 1)))

    def backoff_left(self, now: float) -> float:
        """Seconds until its backoff since it was found unschedulable ends (0: over)."""
        if self.unschedulable_at is None:
            return 0.0
        return max(0.0, self.unschedulable_at + self.backoff() - now)


class Unsatisfiable:
    """Nodes where claims of given specs did not fit since the last time anything was freed,
    keyed by the specs (and the nominations the attempt left alone), shared across pods:
    allocations only take devices away, so such a node is skipped until something is freed
    there.

    One cycle at a time fills the map ``known`` hands it. A node freed while a cycle runs is
    forgotten at once and again when the next cycle asks: what the running cycle learnt there
    after the free is not kept."""

    def __init__(self) -> None:
        self._by_specs: dict[str, dict[str, KnownOutcome]] = {}
        self._freed: set[str] = set()  # nodes freed since the last ``known``

    def __len__(self) -> int:
        return len(self._by_specs)

    def clear(self, nodes: Collection[str] | None = None) -> None:
        """Forget what was learnt on ``nodes`` (None: on every node; a running cycle keeps
        the maps it was handed, which nothing reads again)."""
        if nodes is None:
            self._by_specs, self._freed = {}, set()
            return
        self._freed.update(nodes)
        self._forget(nodes)

    def _forget(self, nodes: Iterable[str]) -> None:
        for by_node in self._by_specs.values():
            for node in nodes:
                by_node.pop(node, None)

    def known(
        self, claims: Sequence[ResourceClaim], promised: Iterable[ObjectKey]
    ) -> dict[str, KnownOutcome]:
        """The nodes known not to fit ``claims``' unallocated specs (filled by the cycle)."""
        if self._freed:
            self._forget(self._freed)
            self._freed = set()
        specs = (
            "|".join(
                json.dumps(c.spec.dump(), sort_keys=True) for c in claims if not c.is_allocated
            )
            + "|nominated:"
            + ",".join(map(str, promised))
        )
        if len(self._by_specs) > MAX_UNSATISFIABLE_SPECS:
            self._by_specs.clear()
        return self._by_specs.setdefault(specs, {})


class SchedulingQueue:
    """The pending pods of one scheduler replica: the work queue that runs their attempts
    (one lane per namespace, so every tenant gets its turn) and one record per pod."""

    def __init__(
        self,
        attempt: Callable[[ObjectKey], Awaitable[None]],
        *,
        clock: Clock,
        tasks: TaskOwner,
        lane_of: Callable[[ObjectKey], Hashable],
        leading: Callable[[], bool],
        profile_name: str = "kopf-dra",
        backoff_pops: bool = True,
        starving_after: float = 0.0,
    ) -> None:
        self.profile_name = profile_name  # the scheduler's name, as the metrics label it
        self.clock = clock
        # Seconds an unschedulable pod waits before freed devices go to it first (0: never).
        self.starving_after = starving_after
        # ``backoff_pops``: SchedulerPopFromBackoffQ (beta and on since 1.33).
        self.work: WorkQueue[ObjectKey] = WorkQueue(
            attempt,
            name="scheduler",
            workers=1,
            clock=clock,
            lane_of=lane_of,
            backoff_pops=backoff_pops,
        )
        self.tasks = tasks
        self.leading = leading  # moves are flushed only while this replica leads
        self.records: dict[ObjectKey, PodRecord] = {}
        # Bound by this replica; the watch has not shown them bound yet (no attempt meanwhile).
        # Not a record: it outlives the pod's pending life until the watch catches up.
        self.bound_unseen: set[ObjectKey] = set()
        self.unsatisfiable = Unsatisfiable()
        self.moves = 0  # room-making changes so far: an attempt that saw one came in flight
        self._flush: asyncio.Task[None] | None = None
        # Unschedulable pods that another pod's placement may help (required pod affinity, a
        # topology spread): only they come back when a pod is placed.
        self.pod_waiters: set[ObjectKey] = set()

    def attempt_ended(self, key: ObjectKey, result: str) -> None:
        """kube-scheduler's attempt metrics: ``result`` is scheduled, unschedulable or error;
        the duration runs from the attempt's start to its result (the bind, for scheduled),
        and for a scheduled pod, from its first attempt (the SLI)."""
        profile = self.profile_name
        metrics.SCHEDULE_ATTEMPTS.labels(result, profile).inc()
        record = self.records.get(key)
        if record is None:
            return
        now = time.perf_counter()
        if record.attempt_started is not None:
            metrics.ATTEMPT_DURATION.labels(result, profile).observe(now - record.attempt_started)
        if result == "scheduled":
            attempts = max(record.attempts, 1)
            metrics.POD_ATTEMPTS.observe(attempts)
            if record.first_attempt is not None:
                metrics.SCHEDULING_SLI.labels(str(attempts)).observe(now - record.first_attempt)

    # --- the work queue --------------------------------------------------------------------

    def add(self, key: ObjectKey) -> None:
        self.work.add(key)

    def arrived(self, key: ObjectKey) -> None:
        """A pending pod of ours was seen: it waits from its first arrival on (a queue backed
        up with retries may hold its first attempt for seconds)."""
        if key not in self.records and self.leading():
            self.record(key).waiting_since = self.clock.monotonic()

    def add_after(self, key: ObjectKey, delay: float) -> None:
        self.work.add_after(key, delay)

    def backoff(self, key: ObjectKey) -> float:
        """The work queue's retry delay for a failed attempt (not the pod's backoff)."""
        return self.work.backoff(key)

    def yield_turn(self, key: ObjectKey) -> None:
        self.work.yield_turn(key)

    def others_waiting(self, key: ObjectKey) -> bool:
        return self.work.others_waiting(key)

    @property
    def processed(self) -> int:
        return self.work.processed

    def start(self) -> None:
        self.work.start()

    async def stop(self) -> None:
        await self.work.stop()

    def reset(self) -> None:
        """Leadership lost, every task ended: what this replica learnt in flight goes (the
        records stay: a pod's attempts and messages are the pod's, whoever leads)."""
        self.unsatisfiable.clear()
        self.bound_unseen.clear()

    # --- the records -----------------------------------------------------------------------

    def record(self, key: ObjectKey) -> PodRecord:
        record = self.records.get(key)
        if record is None:
            record = self.records[key] = PodRecord()
        return record

    def forget(self, key: ObjectKey) -> None:
        """The pod left the queue (bound, deleted, gated or no longer ours)."""
        self.pod_waiters.discard(key)
        record = self.records.pop(key, None)
        if record is not None and record.state is PodState.WAITING:
            metrics.WAITING_BINDING_CONDITIONS.set(self.count(PodState.WAITING))

    def set_state(self, key: ObjectKey, state: PodState) -> None:
        record = self.records.get(key)
        if record is None:
            if state is PodState.QUEUED:
                return  # nothing to remember of a pod that had no attempt yet
            record = self.record(key)
        was, record.state = record.state, state
        if state is PodState.UNSCHEDULABLE:
            record.unschedulable_at = self.clock.monotonic()
            if record.waiting_since is None:
                record.waiting_since = record.unschedulable_at
        if PodState.WAITING in (was, state):
            metrics.WAITING_BINDING_CONDITIONS.set(self.count(PodState.WAITING))

    def wait_on_conditions(self, key: ObjectKey, waiting: bool) -> None:
        """The pod's claims wait for their binding conditions (KEP-5007), or no longer."""
        if waiting:
            self.set_state(key, PodState.WAITING)
        elif (record := self.records.get(key)) is not None and record.state is PodState.WAITING:
            self.set_state(key, PodState.QUEUED)

    def count(self, state: PodState) -> int:
        return sum(1 for r in self.records.values() if r.state is state)

    def in_state(self, state: PodState) -> list[ObjectKey]:
        return [key for key, r in self.records.items() if r.state is state]

    def nominated_node(self, pod: Pod) -> str | None:
        """The node the pod's next attempt prefers: of a failed binding attempt or a
        preemption, as remembered here (before the cache shows it) or as written on the pod."""
        record = self.records.get(ObjectKey(pod.metadata.namespace or "", pod.metadata.name or ""))
        return (record.nominated if record else None) or pod.status.nominated_node_name

    def nominated(self, key: ObjectKey) -> str | None:
        """The node remembered for the pod (not the one written on it)."""
        record = self.records.get(key)
        return record.nominated if record is not None else None

    def nominate(self, key: ObjectKey, node: str | None) -> None:
        if node is not None:
            self.record(key).nominated = node
        elif key in self.records:
            self.records[key].nominated = None

    def backoff_of(self, key: ObjectKey) -> float:
        record = self.records.get(key)
        return record.backoff() if record is not None else INITIAL_BACKOFF

    def pending_pods(self, gated: int) -> list[tuple[tuple[str, ...], float]]:
        """scheduler_pending_pods by queue, at scrape time: waiting for a worker (active),
        for a retry (backoff), for a change (unschedulable), for their gates (gated)."""
        ready, delayed = self.work.waiting()
        return [
            (("active",), ready),
            (("backoff",), delayed),
            (("unschedulable",), self.count(PodState.UNSCHEDULABLE)),
            (("gated",), gated),
        ]

    # --- moving pods back --------------------------------------------------------------------

    def make_room(
        self,
        event: str,
        reason: str,
        *,
        devices: bool = True,
        freed_on: Collection[str] | None = None,
        offer: int = 0,
    ) -> None:
        """Something that may make room changed (``reason``): try the unschedulable pods again
        soon. Coalesced: a burst of changes (a node's heartbeat, a rollout of slices) moves
        the unschedulable pods back once, not once per event. ``devices``: the change may
        free devices (False: a pod placed, a volume bound: what the cycles learned of devices
        still holds), usable on ``freed_on`` only when given (devices of one node's pools):
        what was learnt on other nodes still holds. ``offer``: devices freed, each offered
        first to a starving pod (``offer_to_starving``)."""
        record(event, Hint(True, reason))
        if devices:
            # Freed devices, counters or capacity may fit claims that did not fit before.
            self.unsatisfiable.clear(freed_on)
        self.moves += 1
        if not self.leading():
            return
        if offer:
            self.offer_to_starving(offer, reason)
        if self._flush is None or self._flush.done():
            self._flush = self.tasks.spawn(self._requeue_later(), name="requeue-unschedulable")

    def offer_to_starving(self, count: int, reason: str) -> None:
        """Freed devices go first to the ``count`` unschedulable pods that have waited
        longest, once they have waited ``starving_after`` seconds: at once, ahead of the pods
        ready now, backoff or not. Without it (upstream's queue), a pod backing off on a full
        cluster loses every freed device to the new pods that arrive meanwhile, for as long as
        they arrive; with it, no pod waits much longer than ``starving_after`` while devices
        it can use are freed."""
        if self.starving_after <= 0:
            return
        cutoff = self.clock.monotonic() - self.starving_after
        starving = heapq.nsmallest(
            count,
            (
                (record.waiting_since, key)
                for key, record in self.records.items()
                if record.state is PodState.UNSCHEDULABLE
                and record.waiting_since is not None
                and record.waiting_since <= cutoff
            ),
        )
        for waiting_since, key in reversed(starving):
            log.debug(
                "freed devices offered first to a starving pod",
                **{fields.POD: str(key), fields.REASON: reason},
                waited_s=round(cutoff + self.starving_after - waiting_since, 1),
            )
            metrics.STARVING_OFFERS.inc()
            self.set_state(key, PodState.QUEUED)  # the next device freed goes to the next pod
            self.work.add_first(key)

    def pod_placed(self, event: str, reason: str) -> None:
        """A pod was placed (upstream's AssignedPod/Add): the unschedulable pods whose pod
        affinity or topology spread it may satisfy come back (no other: it frees nothing)."""
        waiting = any(
            (r := self.records.get(k)) is not None and r.state is PodState.UNSCHEDULABLE
            for k in self.pod_waiters
        )
        if waiting:
            self.make_room(event, reason, devices=False)
        else:
            record(event, Hint(False, "a pod placed: no unschedulable pod waits for one"))

    async def _requeue_later(self) -> None:
        """The unschedulable pods back, as upstream's movePodsToActiveOrBackoffQueue: one
        still backing off waits out its backoff (taken earlier only when no pod is ready), so
        pods that keep failing on a full cluster never go before new ones."""
        await asyncio.sleep(REQUEUE_COALESCE)
        now = self.clock.monotonic()
        for key in self.in_state(PodState.UNSCHEDULABLE):
            self.work.add_backoff(key, self.records[key].backoff_left(now))


@dataclasses.dataclass(frozen=True)
class Hint:
    """A queueing hint: whether the event brings pods back (Queue) or not (QueueSkip), and why."""

    queue: bool
    reason: str

    @property
    def label(self) -> str:
        return "Queue" if self.queue else "QueueSkip"


def event_name(kind: str, event_type: str | None) -> str:
    """Upstream's cluster event name: ``Node/Update``, ``Pod/Delete``, ..."""
    return f"{kind}/{_ACTIONS.get(event_type, 'Update')}"


_COUNTS: dict[tuple[str, str], Any] = {}  # (event, hint) -> its counter, looked up once
_STDLIB = logging.getLogger(__name__)  # structlog's: its level check is the cheap one


def record(event: str, hint: Hint, **context: str) -> Hint:
    """Count the hint and log its reason (debug). Runs on every watch event: a few
    microseconds when debug is off."""
    labels = (event, hint.label)
    counter = _COUNTS.get(labels)
    if counter is None:
        counter = _COUNTS[labels] = metrics.QUEUEING_HINTS.labels(*labels)
    counter.inc()
    if not _STDLIB.isEnabledFor(logging.DEBUG):
        return hint
    log.debug(
        "queueing hint",
        cluster_event=event,
        hint=hint.label,
        **{fields.REASON: hint.reason},
        **context,
    )
    return hint


# --- the hints -------------------------------------------------------------------------------

#: Metadata a pod's update may change without making it worth another attempt (upstream's
#: ``isPodUpdated`` strips these, and the status but its claim statuses).
_INCIDENTAL_METADATA = frozenset({"resourceVersion", "generation", "managedFields", "finalizers"})


def pending_pod_update(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> Hint:
    """A pending pod's own event: not worth an attempt when only its status moved (the
    scheduler's own PodScheduled condition or nomination, say), which would otherwise bring
    it straight back for an attempt that can only repeat the last one."""
    if old is None:
        return Hint(True, "new pending pod")

    def significant(body: Mapping[str, Any]) -> tuple[Any, ...]:
        meta = body.get("metadata") or {}
        status = body.get("status") or {}
        return (
            {k: v for k, v in meta.items() if k not in _INCIDENTAL_METADATA},
            body.get("spec"),
            status.get("resourceClaimStatuses"),
        )

    was, now = significant(old), significant(new)
    if was[1] != now[1]:
        return Hint(True, "its spec changed")
    if was[2] != now[2]:
        return Hint(True, "its claim statuses changed")
    if was[0] != now[0]:
        return Hint(True, "its metadata changed")
    return Hint(False, "only its status or bookkeeping metadata changed")


def node_update(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> Hint:
    """Whether a node's change may fit a pod that fitted nowhere: its labels, spec (taints,
    unschedulable), allocatable or condition statuses changed. Not a status report that only
    renews heartbeat times, images or addresses, which kubelets send all the time and which
    would otherwise bring every unschedulable pod back and drop what the cycles learned (as
    kube-scheduler's queueing hints skip such updates)."""
    if old is None:
        return Hint(True, "node added or deleted")

    def significant(body: Mapping[str, Any]) -> tuple[Any, ...]:
        status = body.get("status") or {}
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        labels = (body.get("metadata") or {}).get("labels")
        return labels, body.get("spec"), status.get("allocatable"), conditions

    names = ("labels", "spec", "allocatable", "conditions")
    changed = [
        n for n, a, b in zip(names, significant(old), significant(new), strict=True) if a != b
    ]
    if changed:
        return Hint(True, f"its {', '.join(changed)} changed")
    return Hint(False, "a status report (heartbeat, images, addresses) frees nothing")


def any_change(kind: str) -> Callable[[Mapping[str, Any] | None, Mapping[str, Any]], Hint]:
    """Slices, device classes and taint rules: any change may fit a claim that did not fit."""

    def hint(_old: Mapping[str, Any] | None, _new: Mapping[str, Any]) -> Hint:
        return Hint(True, f"a {kind} changed: devices, selectors or taints may fit now")

    return hint


def volume_change(kind: str) -> Callable[[Mapping[str, Any] | None, Mapping[str, Any]], Hint]:
    """PVCs, PVs, StorageClasses, CSINodes, CSIDrivers, CSIStorageCapacities: a change may bind,
    provision or make room for a pod's volumes (upstream's volume plugins register each)."""

    def hint(_old: Mapping[str, Any] | None, _new: Mapping[str, Any]) -> Hint:
        return Hint(True, f"a {kind} changed: a pod's volumes may fit now")

    return hint


# (old body or None, new body) -> whether a change of a listed kind may make room, and why.
RoomCheck = Callable[[Mapping[str, Any] | None, Mapping[str, Any]], Hint]


@dataclasses.dataclass(frozen=True)
class Watched:
    """What the hints tell the scheduler's parts beside its cache and queue."""

    #: A pod is gone: the preemptor it was a victim of, if any (``Preemptor.victim_gone``).
    victim_gone: Callable[[str], ObjectKey | None]
    #: A pending pod is bound elsewhere, done or deleted: its nomination goes.
    pod_left: Callable[[ObjectKey], None]
    #: An allocated claim shares a device with another: the repair looks at it.
    repair: Callable[[ObjectKey], None]
    #: A PodGroup or one of its pods changed: pods of it waiting at Permit look again.
    group_changed: Callable[[ObjectKey], None]


def feeds(
    cache: SchedulerCache,
    queue: SchedulingQueue,
    watched: Watched,
    *,
    taint_rules: bool,
    pod_groups: bool = False,
    composites: bool = False,
) -> dict[str, EventFeed]:
    """Every watched kind to its feed (kube-scheduler's EventsToRegister): each event into
    its store, then its hint: the pods it may help, queued. kube-scheduler watches
    DeviceTaintRules only with DRADeviceTaintRules on: off, there are none (the API server
    may not even serve them); PodGroups only with GenericWorkload on (1.37)."""

    def listed(index: str, models: ModelCache[Any], check: RoomCheck | None = None) -> EventFeed:
        return _listed_feed(cache, queue, index, models, check)

    found = {
        "Pod": _pod_feed(cache, queue, watched),
        "ResourceClaim": _claim_feed(cache, queue, watched),
        "Node": listed("nodes", cache.nodes, node_update),
        "ResourceSlice": listed("slices", cache.slices, any_change("ResourceSlice")),
        "DeviceClass": listed("classes", cache.classes, any_change("DeviceClass")),
        # Not registered upstream either: priorities and budgets make no room.
        "PriorityClass": listed("priority_classes", cache.priority_classes),
        "PodDisruptionBudget": listed("pdbs", cache.budgets),
    }
    if taint_rules:
        found["DeviceTaintRule"] = listed(
            "taint_rules", cache.taint_rules, any_change("DeviceTaintRule")
        )
    if pod_groups:
        found["PodGroup"] = _pod_group_feed(cache, queue, watched, composites)
    if composites:
        found["CompositePodGroup"] = _composite_feed(cache, queue)
    # The volume plugins' kinds (VolumeBinding, VolumeZone, NodeVolumeLimits): a volume bound,
    # provisioned or published, a class or a node's CSI drivers changed.
    for index, models in (
        ("pvcs", cache.pvcs),
        ("pvs", cache.pvs),
        ("storage_classes", cache.storage_classes),
        ("csi_nodes", cache.csi_nodes),
        ("csi_drivers", cache.csi_drivers),
        ("capacities", cache.capacities),
    ):
        found[cache.listed[index].kind] = _storage_feed(
            cache,
            _listed_feed(
                cache, queue, index, models, volume_change(cache.listed[index].kind), devices=False
            ),
        )
    # Pod affinity's namespaceSelector reads namespaces' labels (upstream registers no event).
    found["Namespace"] = listed("namespaces", cache.namespaces)
    # PodTopologySpread's system defaults score by them: kept, no pod moved (upstream
    # registers no event for them either).
    for index, kind in PEER_KINDS:
        found[kind] = _kept(cache, index)
    return found


def _kept(cache: SchedulerCache, index: str) -> EventFeed:
    """A kind only kept in its store (its changes make no room for anybody)."""
    store = cache.listed[index]

    def feed(kw: Mapping[str, Any]) -> None:
        store.apply(kw["type"], kw["body"])

    return feed


def _storage_feed(cache: SchedulerCache, feed: EventFeed) -> EventFeed:
    """A storage kind's feed that also wakes the binding cycles waiting for volumes."""

    def storage(kw: Mapping[str, Any]) -> None:
        feed(kw)
        cache.storage_changed()

    return storage


def _pod_group_feed(
    cache: SchedulerCache, queue: SchedulingQueue, watched: Watched, composites: bool
) -> EventFeed:
    """A PodGroup into its store; its pending pods, queued (upstream's PodGroup/Add and, for a
    smaller minCount, PodGroup/Update hints: kopf-dra queues them on any change); with
    CompositePodGroup on, a group with a parent brings back its whole tree's (GangScheduling's
    hint for a group of the same hierarchy)."""
    store = cache.listed["pod_groups"]

    def feed(kw: Mapping[str, Any]) -> None:
        body = kw["body"]
        if not store.apply(kw["type"], body):
            return
        cache.pod_groups.changed()
        key = ObjectKey.of(body)
        event = event_name("PodGroup", kw["type"])
        watched.group_changed(key)
        parent = ((body.get("spec") or {}).get("parentCompositePodGroupName")) or None
        if composites and parent:
            pods = _tree_pending(cache, key.namespace, parent)
        else:
            pods = _pending_members(cache, key)
        record(event, Hint(bool(pods), f"pod group {key} changed: its pending pods"))
        for pod in pods:
            queue.add(pod)

    return feed


def _composite_feed(cache: SchedulerCache, queue: SchedulingQueue) -> EventFeed:
    """A CompositePodGroup into its store; the pending pods of its tree, queued (its Add is
    what a tree waiting for its quorum or its parent needs)."""
    store = cache.listed["composite_groups"]

    def feed(kw: Mapping[str, Any]) -> None:
        body = kw["body"]
        if not store.apply(kw["type"], body):
            return
        cache.composite_groups.changed()
        key = ObjectKey.of(body)
        pods = _tree_pending(cache, key.namespace, key.name)
        event = event_name("CompositePodGroup", kw["type"])
        record(event, Hint(bool(pods), f"composite pod group {key} changed: its tree's pods"))
        for pod in pods:
            queue.add(pod)

    return feed


def _tree_pending(cache: SchedulerCache, namespace: str, start: str) -> list[ObjectKey]:
    """The pending pods of every PodGroup in the tree above and below CompositePodGroup
    ``start`` (its root's tree; only ``start``'s subtree while the root is not known)."""
    composites = cache.composites_in(namespace)
    root, chain = composite.root_name(start, composites)
    top = root or chain[-1]
    below = {top}
    changed = True
    while changed:  # every CompositePodGroup under the top (the parents form a tree)
        grown = below | {
            n for n, c in composites.items() if c.spec.parent_composite_pod_group_name in below
        }
        changed, below = grown != below, grown
    return [
        pod
        for group in cache.pod_groups_in(namespace)
        if group.spec.parent_composite_pod_group_name in below
        for pod in _pending_members(cache, ObjectKey(namespace, group.metadata.name or ""))
    ]


def _pending_members(cache: SchedulerCache, group: ObjectKey) -> list[ObjectKey]:
    """The group's pods this scheduler has yet to place."""
    return [
        ObjectKey(p.metadata.namespace or "", p.metadata.name or "")
        for p in cache.group_pods(group)
        if not p.spec.node_name and p.spec.scheduler_name == cache.scheduler_name
    ]


def _listed_feed(
    cache: SchedulerCache,
    queue: SchedulingQueue,
    index: str,
    models: ModelCache[Any],
    check: RoomCheck | None,
    *,
    devices: bool = True,
) -> EventFeed:
    """A kind that changes rarely, into its store; where a change may make room for the
    unschedulable pods (``check``), they are moved back (``devices``: as ``make_room``)."""
    store = cache.listed[index]

    def feed(kw: Mapping[str, Any]) -> None:
        body = kw["body"]
        old = None
        if check is not None and kw["type"] != "DELETED":
            old = store.indices[index].last(ObjectKey.of(body).name)
        if not store.apply(kw["type"], body):
            return
        models.changed()
        if check is None:
            return
        event, hint = event_name(store.kind, kw["type"]), check(old, body)
        if hint.queue:
            queue.make_room(event, hint.reason, devices=devices)
        else:
            record(event, hint)

    return feed


def _pod_feed(cache: SchedulerCache, queue: SchedulingQueue, watched: Watched) -> EventFeed:
    """A pod into the cache; a pending pod's own change, or what its leaving frees."""

    def feed(kw: Mapping[str, Any]) -> None:
        body = kw["body"]
        key = ObjectKey.of(body)
        event = event_name("Pod", kw["type"])
        before = cache.indices.one("pending", key)
        if not cache.pods.apply(kw["type"], body):
            return
        group = ((body.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
        if group:
            watched.group_changed(ObjectKey(key.namespace, group))
        if cache.is_pending(body) and kw["type"] != "DELETED":
            if record(event, pending_pod_update(before, body), pod=str(key)).queue:
                queue.arrived(key)
                queue.add(key)
            return
        queue.bound_unseen.discard(key)
        node = (body.get("spec") or {}).get("nodeName")
        if group and node and kw["type"] == "ADDED":
            # A pod created bound may complete its gang's minCount (GangScheduling's
            # AssignedPod/Add hint): the group's waiting pods try again.
            members = _pending_members(cache, ObjectKey(key.namespace, group))
            record(event, Hint(bool(members), f"pod {key} of pod group {group} was added bound"))
            for member in members:
                queue.add(member)
        if node and kw["type"] != "DELETED" and (before is not None or kw["type"] == "ADDED"):
            # A pod placed (upstream's AssignedPod/Add): pod affinity or a spread may let a
            # pod that waited go now; its devices are taken, nothing is freed.
            queue.pod_placed(event, f"pod {key} was placed on node {node}")
        # Bound: its record stays until its binding cycle has counted its attempts (the watch
        # may show the binding before the cycle resumes), which then forgets it.
        if kw["type"] == "DELETED" or body.get("status", {}).get("phase") in TERMINAL_PHASES:
            queue.forget(key)
            watched.pod_left(key)
            preemptor = watched.victim_gone((body.get("metadata") or {}).get("uid") or "")
            if preemptor is not None:
                # Its victim is gone: release the claims now.
                record(event, Hint(True, f"a victim of {preemptor} is gone"))
                queue.add(preemptor)
            if node:
                # What it frees is its node's; its claims' devices come free by their events.
                queue.make_room(event, f"pod {key} left node {node}", freed_on=(node,))

    return feed


def _claim_feed(cache: SchedulerCache, queue: SchedulingQueue, watched: Watched) -> EventFeed:
    """A claim into the cache; the pods it names or is reserved for, queued; its freed
    devices make room."""

    def feed(kw: Mapping[str, Any]) -> None:
        body = kw["body"]
        key = ObjectKey.of(body)
        event = event_name("ResourceClaim", kw["type"])
        was_allocated = cache.was_allocated(key)
        held = cache.allocated.holding(key)
        if not cache.observe_claim(kw["type"], body):
            return
        pods = cache.pods_naming(key)
        pods.extend(
            ObjectKey(key.namespace, ref.get("name") or "")
            for ref in (body.get("status") or {}).get("reservedFor") or []
            if ref.get("resource") == "pods"
        )
        for pod in pods:
            queue.add(pod)
        allocated = bool((body.get("status") or {}).get("allocation"))
        if was_allocated and (kw["type"] == "DELETED" or not allocated):
            queue.make_room(
                event,
                f"claim {key} freed its devices",
                freed_on=cache.local_nodes(held.used) if held is not None else None,
                offer=len(held.used) if held is not None else 1,
            )
        elif pods:
            record(event, Hint(True, f"claim {key} changed: the pods it names"))
        else:
            record(event, Hint(False, f"claim {key} freed nothing and names no pod"))
        if allocated and kw["type"] != "DELETED" and cache.conflicts(key):
            watched.repair(key)

    return feed
