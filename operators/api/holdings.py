"""Devices held per namespace and per queue: what is actually allocated, beside what a queue
(Kueue) counts, so that an operator can compare the two. A claim's devices count for its
namespace and for the queue label of the first pod (by name) it is reserved for that carries
one; a claim reserved for no pod with the label counts for the namespace alone (queue "").

Kept incrementally (a claim or a pod changed moves its own devices only), for the pool
validator's gauges; ``held`` sums a listing at once, for ``kubectl dra pools --held``."""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from operators.api.keys import ObjectKey

#: Kueue's label on the pods it admits: their ClusterQueue (v0.17's AssignQueueLabelsForPods,
#: beta and on; beside kueue.x-k8s.io/local-queue-name), whose status.flavorsUsage is what
#: Kueue counts.
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/cluster-queue-name"

Label = tuple[str, str]  # namespace, queue ("" where none)


def claim_holding(body: Mapping[str, Any]) -> tuple[tuple[str, ...], int]:
    """The pods a claim is reserved for (by name) and its allocated devices (0: none)."""
    status = body.get("status") or {}
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
    pods = sorted(
        r.get("name") or ""
        for r in status.get("reservedFor") or []
        if r.get("resource") == "pods" and not r.get("apiGroup")
    )
    return tuple(pods), len(results)


@dataclasses.dataclass
class Holdings:
    """Devices held per (namespace, queue), kept as claims and pods change."""

    sums: collections.Counter[Label] = dataclasses.field(default_factory=collections.Counter)
    _claims: dict[ObjectKey, tuple[tuple[str, ...], int, Label]] = dataclasses.field(
        default_factory=dict
    )
    _queues: dict[ObjectKey, str] = dataclasses.field(default_factory=dict)
    _by_pod: dict[ObjectKey, set[ObjectKey]] = dataclasses.field(default_factory=dict)

    def _label(self, namespace: str, pods: tuple[str, ...]) -> Label:
        for name in pods:
            queue = self._queues.get(ObjectKey(namespace, name))
            if queue:
                return namespace, queue
        return namespace, ""

    def set_claim(self, key: ObjectKey, body: Mapping[str, Any] | None) -> set[Label]:
        """A claim changed (``None``: deleted); the labels whose sums moved."""
        moved: set[Label] = set()
        before = self._claims.pop(key, None)
        if before is not None:
            pods, devices, label = before
            self.sums[label] -= devices
            moved.add(label)
            for name in pods:
                self._by_pod.get(ObjectKey(key.namespace, name), set()).discard(key)
        pods, devices = claim_holding(body) if body is not None else ((), 0)
        if devices:
            label = self._label(key.namespace, pods)
            self._claims[key] = (pods, devices, label)
            self.sums[label] += devices
            moved.add(label)
            for name in pods:
                self._by_pod.setdefault(ObjectKey(key.namespace, name), set()).add(key)
        return self._settled(moved)

    def set_pod(self, key: ObjectKey, queue: str | None) -> set[Label]:
        """A pod's queue label (``None``: none, or the pod is gone); the labels that moved."""
        if queue:
            self._queues[key] = queue
        else:
            self._queues.pop(key, None)
        moved: set[Label] = set()
        for claim in sorted(self._by_pod.get(key, set())):
            pods, devices, label = self._claims[claim]
            now = self._label(claim.namespace, pods)
            if now != label:
                self._claims[claim] = (pods, devices, now)
                self.sums[label] -= devices
                self.sums[now] += devices
                moved |= {label, now}
        if not self._by_pod.get(key):
            self._by_pod.pop(key, None)
        return self._settled(moved)

    def label_of(self, claim: ObjectKey) -> Label | None:
        """Where a claim's devices count (None: it holds none)."""
        held = self._claims.get(claim)
        return held[2] if held is not None else None

    def _settled(self, moved: set[Label]) -> set[Label]:
        for label in moved:
            if self.sums[label] <= 0:
                del self.sums[label]
        return moved


def held(
    claims: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]], label: str
) -> dict[Label, tuple[int, int]]:
    """(devices, claims) per (namespace, queue) of a listing: the allocated claims, the pods'
    values of ``label``."""
    holdings = Holdings()
    for pod in pods:
        queue = ((pod.get("metadata") or {}).get("labels") or {}).get(label)
        holdings.set_pod(ObjectKey.of(pod), queue)
    counted: collections.Counter[Label] = collections.Counter()
    for claim in claims:
        key = ObjectKey.of(claim)
        holdings.set_claim(key, claim)
        where = holdings.label_of(key)
        if where is not None:
            counted[where] += 1
    return {k: (holdings.sums[k], counted[k]) for k in sorted(holdings.sums)}
