"""The cluster as one cycle's pod-level filters see it: kube-scheduler's snapshot of NodeInfos,
for the plugins that look past the node and the pod's devices (ports, volumes, pod affinity,
topology spread).

Pure data handed in by the caller (the scheduler's cache, ``simulate``'s objects, a test): the
plugins read it and never change it. ``pods_on`` is a function so that the scheduler parses a
node's pods only when a plugin asks for them; the lists of pods with affinity terms are kept
by the caller, as upstream's NodeInfo.PodsWithAffinity, so that a pod without terms in a
cluster without them costs nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from operators.api.core import Node, Pod
from operators.api.storage import (
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)

#: (node name, pod bound or assumed there)
Placed = tuple[str, Pod]


@dataclasses.dataclass(frozen=True)
class Peers:
    """What PodTopologySpread's system-default constraints select a pod's peers by
    (``helper.DefaultSelector``): the Services of its namespace, and the ReplicationController,
    ReplicaSet or StatefulSet that may own it, as plain objects."""

    services: Sequence[Mapping[str, Any]] = ()
    replication_controllers: Sequence[Mapping[str, Any]] = ()
    replica_sets: Sequence[Mapping[str, Any]] = ()
    stateful_sets: Sequence[Mapping[str, Any]] = ()


NO_PEERS = Peers()


def _no_peers(_: Pod) -> Peers:
    return NO_PEERS


def peers_from(
    services: Iterable[Mapping[str, Any]] = (),
    replication_controllers: Iterable[Mapping[str, Any]] = (),
    replica_sets: Iterable[Mapping[str, Any]] = (),
    stateful_sets: Iterable[Mapping[str, Any]] = (),
) -> Callable[[Pod], Peers]:
    """``Snapshot.peers_of`` from plain lists of every namespace (``simulate``, tests)."""
    kinds = [list(services), list(replication_controllers), list(replica_sets), list(stateful_sets)]

    def of(pod: Pod) -> Peers:
        namespace = pod.metadata.namespace or ""
        return Peers(
            *(
                [
                    o
                    for o in objects
                    if ((o.get("metadata") or {}).get("namespace") or "") == namespace
                ]
                for objects in kinds
            )
        )

    return of


@dataclasses.dataclass(frozen=True)
class Storage:
    """The storage objects, as the volume plugins' listers give them."""

    claims: Mapping[str, PersistentVolumeClaim] = dataclasses.field(default_factory=dict)
    """PVCs by "namespace/name"."""
    volumes: Mapping[str, PersistentVolume] = dataclasses.field(default_factory=dict)
    """PVs by name."""
    classes: Mapping[str, StorageClass] = dataclasses.field(default_factory=dict)
    csi_nodes: Mapping[str, CSINode] = dataclasses.field(default_factory=dict)
    """CSINodes by name (a node's CSINode has the node's name)."""
    capacities: Sequence[CSIStorageCapacity] = ()
    drivers: Mapping[str, CSIDriver] = dataclasses.field(default_factory=dict)
    """CSIDrivers by name (whether a driver publishes capacity)."""

    def prevents_scheduling_if_missing(self, driver: str) -> bool:
        """The CSIDriver keeps pods needing it off nodes whose CSINode does not list it."""
        found = self.drivers.get(driver)
        return bool(found is not None and found.spec.prevent_pod_scheduling_if_missing)

    def capacity_tracked(self, driver: str) -> bool:
        """The CSIDriver says it publishes CSIStorageCapacity objects."""
        found = self.drivers.get(driver)
        return bool(found is not None and found.spec.storage_capacity)


def _no_pods(_: str) -> Sequence[Pod]:
    return ()


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """Every node, the pods on each (bound, or assumed by this scheduler, and not finished),
    the namespaces' labels and the storage objects."""

    nodes: Sequence[Node] = ()
    pods_on: Callable[[str], Sequence[Pod]] = _no_pods
    """The pods on a node, by node name (empty for a node without pods)."""
    with_affinity: Sequence[Placed] = ()
    """Every placed pod with a pod affinity or anti-affinity term, required or preferred."""
    with_required_anti_affinity: Sequence[Placed] = ()
    """Every placed pod with a required anti-affinity term."""
    with_scoring_affinity: Sequence[Placed] = ()
    """Every placed pod with a term InterPodAffinity's score reads for another pod: required
    affinity or a preferred affinity or anti-affinity term (``has_scoring_affinity``)."""
    namespaces: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    """Labels by namespace name (namespaceSelector)."""
    storage: Storage = dataclasses.field(default_factory=Storage)
    peers_of: Callable[[Pod], Peers] = _no_peers
    """What the system-default spreading selects the pod's peers by (``Peers``)."""

    def node_names(self) -> Sequence[str]:
        return [n.metadata.name or "" for n in self.nodes]

    def placed(self) -> list[Placed]:
        """Every placed pod with its node (O(pods): the plugins that need it say so)."""
        return [(name, pod) for name in self.node_names() for pod in self.pods_on(name)]


def has_affinity(pod: Pod) -> bool:
    """Any pod affinity or anti-affinity term, required or preferred."""
    affinity = pod.spec.affinity
    if affinity is None:
        return False
    return any(
        terms is not None
        and (
            terms.required_during_scheduling_ignored_during_execution
            or terms.preferred_during_scheduling_ignored_during_execution
        )
        for terms in (affinity.pod_affinity, affinity.pod_anti_affinity)
    )


def has_scoring_affinity(pod: Pod) -> bool:
    """A term that scores for other pods (InterPodAffinity's PreScore reads a placed pod's
    required affinity and its preferred terms, not its required anti-affinity)."""
    affinity = pod.spec.affinity
    if affinity is None:
        return False
    terms, anti = affinity.pod_affinity, affinity.pod_anti_affinity
    return bool(
        (
            terms is not None
            and (
                terms.required_during_scheduling_ignored_during_execution
                or terms.preferred_during_scheduling_ignored_during_execution
            )
        )
        or (anti is not None and anti.preferred_during_scheduling_ignored_during_execution)
    )


def has_required_anti_affinity(pod: Pod) -> bool:
    affinity = pod.spec.affinity
    anti = affinity.pod_anti_affinity if affinity is not None else None
    return anti is not None and bool(anti.required_during_scheduling_ignored_during_execution)


def waits_for_pods(pod: Pod) -> bool:
    """Another pod's placement may let this one go: it has required pod affinity, or a
    topology spread (a placed pod moves the skew)."""
    affinity = pod.spec.affinity
    terms = affinity.pod_affinity if affinity is not None else None
    required = terms is not None and bool(terms.required_during_scheduling_ignored_during_execution)
    return required or bool(pod.spec.topology_spread_constraints)


def snapshot_of(
    nodes: Sequence[Node],
    placed: Sequence[Placed],
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    storage: Storage | None = None,
    peers_of: Callable[[Pod], Peers] = _no_peers,
) -> Snapshot:
    """A snapshot from plain lists (``simulate``, tests): the indexes computed here."""
    by_node: dict[str, list[Pod]] = {}
    for name, pod in placed:
        by_node.setdefault(name, []).append(pod)
    return Snapshot(
        nodes=nodes,
        pods_on=lambda name: by_node.get(name, ()),
        with_affinity=[(n, p) for n, p in placed if has_affinity(p)],
        with_required_anti_affinity=[(n, p) for n, p in placed if has_required_anti_affinity(p)],
        with_scoring_affinity=[(n, p) for n, p in placed if has_scoring_affinity(p)],
        namespaces=namespaces or {},
        storage=storage or Storage(),
        peers_of=peers_of,
    )


def without_pods(snapshot: Snapshot, removed: Collection[str]) -> Snapshot:
    """The snapshot with the pods of uids ``removed`` gone (a preemption's victims)."""
    gone = frozenset(removed)

    def kept(pods: Sequence[Pod]) -> Sequence[Pod]:
        return [p for p in pods if (p.metadata.uid or "") not in gone]

    def placed(entries: Sequence[Placed]) -> list[Placed]:
        return [(n, p) for n, p in entries if (p.metadata.uid or "") not in gone]

    pods_on = snapshot.pods_on
    return dataclasses.replace(
        snapshot,
        pods_on=lambda name: kept(pods_on(name)),
        with_affinity=placed(snapshot.with_affinity),
        with_required_anti_affinity=placed(snapshot.with_required_anti_affinity),
        with_scoring_affinity=placed(snapshot.with_scoring_affinity),
    )
