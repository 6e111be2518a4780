"""Queueing: which events bring a pod back for an attempt, and why (kube-scheduler's
``EventsToRegister`` with a queueing hint per event).

Runs on every watch event, before any cycle. Each check answers a ``Hint``: Queue or
QueueSkip, with its reason. The reason is logged at debug level and counted in
``kopf_dra_scheduler_queueing_hints_total`` by event and hint, so that "why did my pod not
come back" has an answer. ``PendingPods`` is what the scheduler remembers per pending pod
between attempts (its scheduling queue's state beside the work queue).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from operators.api.core import Pod
from operators.api.keys import ObjectKey
from operators.controllers.scheduler import metrics
from operators.controllers.scheduler.cache import ModelCache, SchedulerCache
from operators.observability import fields
from operators.runtime.informer import EventFeed
from operators.scheduling.cycle import KnownOutcome

log = structlog.get_logger(__name__)

_ACTIONS = {"ADDED": "Add", "MODIFIED": "Update", "DELETED": "Delete", None: "Add"}
INITIAL_BACKOFF = 1.0  # seconds: kube-scheduler's podInitialBackoffSeconds
MAX_BACKOFF = 10.0  # seconds: podMaxBackoffSeconds


@dataclasses.dataclass
class PendingPods:
    """What the scheduler remembers per pending pod between attempts."""

    unschedulable: set[ObjectKey] = dataclasses.field(default_factory=set)
    waiting: set[ObjectKey] = dataclasses.field(default_factory=set)  # on binding conditions
    # Bound by this replica; the watch has not shown them bound yet (no attempt meanwhile).
    bound_unseen: set[ObjectKey] = dataclasses.field(default_factory=set)
    last_message: dict[ObjectKey, str] = dataclasses.field(default_factory=dict)
    # Node of a failed binding attempt (KEP-5007): the retry prefers it. Kept here as well as
    # in pod.status.nominatedNodeName, because the retry runs before the cache shows it.
    nominated: dict[ObjectKey, str] = dataclasses.field(default_factory=dict)
    # claim specs -> nodes where they did not fit since the last time anything was freed
    unsatisfiable: dict[str, dict[str, KnownOutcome]] = dataclasses.field(default_factory=dict)
    # Allocation time a pod has used in attempts that yielded to other tenants.
    spent: dict[ObjectKey, float] = dataclasses.field(default_factory=dict)
    # Scheduling attempts so far, and when the last one began (scheduler_pod_scheduling_*).
    attempts: dict[ObjectKey, int] = dataclasses.field(default_factory=dict)
    attempt_started: dict[ObjectKey, float] = dataclasses.field(default_factory=dict)

    def nominated_node(self, pod: Pod) -> str | None:
        """The node the pod's next attempt prefers: of a failed binding attempt or a
        preemption, as remembered here (before the cache shows it) or as written on the pod."""
        key = ObjectKey(pod.metadata.namespace or "", pod.metadata.name or "")
        return self.nominated.get(key) or pod.status.nominated_node_name

    def backoff(self, key: ObjectKey) -> float:
        """kube-scheduler's pod backoff after a failed attempt: 1 s, doubled per attempt so far,
        at most 10 s (podInitialBackoffSeconds, podMaxBackoffSeconds)."""
        attempts = max(self.attempts.get(key, 1), 1)
        return float(min(MAX_BACKOFF, INITIAL_BACKOFF * 2 ** (attempts - 1)))

    def forget(self, key: ObjectKey) -> None:
        self.spent.pop(key, None)
        self.attempts.pop(key, None)
        self.attempt_started.pop(key, None)
        self.unschedulable.discard(key)
        self.waiting.discard(key)
        self.last_message.pop(key, None)
        self.nominated.pop(key, None)


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


# (old body or None, new body) -> whether a change of a listed kind may make room, and why.
RoomCheck = Callable[[Mapping[str, Any] | None, Mapping[str, Any]], Hint]


def listed_feeds(
    cache: SchedulerCache,
    make_room: Callable[[str, Hint], None],
    *,
    taint_rules: bool,
) -> dict[str, EventFeed]:
    """The kinds that change rarely, into their stores; where a change may make room for the
    unschedulable pods, ``make_room(event, hint)`` is told (with the hint either way).
    kube-scheduler watches DeviceTaintRules only with DRADeviceTaintRules on: off, there are
    none (the API server may not even serve them)."""

    def listed(index: str, models: ModelCache[Any], room: RoomCheck | None = None) -> EventFeed:
        store = cache.listed[index]

        def feed(kw: Mapping[str, Any]) -> None:
            body = kw["body"]
            old = None
            if room is not None and kw["type"] != "DELETED":
                old = store.indices[index].last(ObjectKey.of(body).name)
            if store.apply(kw["type"], body):
                models.changed()
                if room is not None:
                    make_room(event_name(store.kind, kw["type"]), room(old, body))

        return feed

    feeds = {
        "Node": listed("nodes", cache.nodes, node_update),
        "ResourceSlice": listed("slices", cache.slices, any_change("ResourceSlice")),
        "DeviceClass": listed("classes", cache.classes, any_change("DeviceClass")),
        # Not registered upstream either: priorities and budgets make no room.
        "PriorityClass": listed("priority_classes", cache.priority_classes),
        "PodDisruptionBudget": listed("pdbs", cache.budgets),
    }
    if taint_rules:
        feeds["DeviceTaintRule"] = listed(
            "taint_rules", cache.taint_rules, any_change("DeviceTaintRule")
        )
    return feeds
