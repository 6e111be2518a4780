"""The scheduler's cache: what it knows of the cluster, parsed once, with derived totals.

The stores hold raw dicts; parsing every slice for every pod would dominate the cycle, and
the allocator's per-node view cache is keyed by the identity of slice objects. So each kind is
parsed once per resourceVersion (``ModelCache``), and lists are rebuilt only when something of
that kind changed (the event handlers bump a version per kind).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any, TypeVar

from operators.allocator import AllocatedState, Allocator, Features, NodeViewCache
from operators.allocator.allocator import Policy
from operators.allocator.selectors import CelSelectorEngine
from operators.allocator.state import AllocatedTracker, Holding
from operators.api.base import KubeModel
from operators.api.consumers import pod_summary
from operators.api.core import Node, Pod, PodDisruptionBudget, PriorityClass
from operators.api.groups import CompositePodGroup, PodGroup
from operators.api.ids import DeviceID, PoolID
from operators.api.keys import ObjectKey, controller_pod
from operators.api.names import EXTENDED_RESOURCE_CLAIM_ANNOTATION, TERMINAL_PHASES
from operators.api.resource import DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice
from operators.api.storage import (
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    Namespace,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from operators.api.timestamps import age
from operators.cel import DEFAULT_KUBERNETES, CELEnvironment
from operators.runtime.indices import IndexView
from operators.runtime.stores import LocalStore, ModelCache, Stores, by_key
from operators.scheduling.extended import class_mapping, is_special_claim
from operators.scheduling.ledger import InFlightLedger
from operators.scheduling.nodes import UsageTracker, bound_requests, pool_nodes
from operators.scheduling.plugins.scores import counted_placement
from operators.scheduling.plugins.volumebinding import PodVolumes
from operators.scheduling.score import NodeOrder
from operators.scheduling.snapshot import (
    Peers,
    Placed,
    Snapshot,
    Storage,
    has_affinity,
    has_required_anti_affinity,
    has_scoring_affinity,
)

M = TypeVar("M", bound=KubeModel)
#: (store, kind) of what the system-default spreading reads (``peers_of``).
PEER_KINDS = (
    ("services", "Service"),
    ("replication_controllers", "ReplicationController"),
    ("replica_sets", "ReplicaSet"),
    ("stateful_sets", "StatefulSet"),
)


class SchedulerCache:
    """Everything the scheduler knows, and nothing it must ask the API server during a cycle.

    Every kind is a store (``runtime.stores``) fed by an informer (``runtime.informer``). On
    top: the in-flight ledger (allocations written, or about to be, that the claim store has
    not shown yet, as kube-scheduler's assume cache), the devices
    every claim holds (``AllocatedTracker``) and what bound pods request per node
    (``UsageTracker``), both kept as running totals so that a cycle never walks all claims or
    all pods.
    """

    def __init__(
        self,
        scheduler_name: str,
        features: Features,
        kubernetes: str = DEFAULT_KUBERNETES,
        *,
        node_allocatable: bool = False,
    ) -> None:
        """``kubernetes``: the minor whose CEL the cluster's selectors are evaluated in.
        ``node_allocatable`` (DRANodeAllocatableResources, 1.37): a bound pod's
        ``nodeAllocatableResourceClaimStatuses`` count on its node."""
        self.scheduler_name = scheduler_name
        self.features = features
        self.node_allocatable = node_allocatable
        self.indices = IndexView()
        self.pods = LocalStore(
            "Pod",
            {
                "pending": self._pending_index,
                "pods_by_claim": self._pods_by_claim_index,
                "pods_on_node": _on_node,
                "pod_info": pod_summary,
                "group_members": _group_member,
            },
            on_change=self._pod_placement,
        )
        self.claims = LocalStore(
            "ResourceClaim",
            {"claims": by_key, "allocated_claims": _allocated, "extended_claims": _extended},
            on_change=lambda key, _body: self.track(key),
        )
        # The kinds that change rarely: cluster-scoped ones by name, PDBs by namespace/name.
        self.listed = {
            index: LocalStore(kind, {index: key_of})
            for index, kind, key_of in (
                ("nodes", "Node", by_name),
                ("slices", "ResourceSlice", by_name),
                ("classes", "DeviceClass", by_name),
                ("taint_rules", "DeviceTaintRule", by_name),
                ("priority_classes", "PriorityClass", by_name),
                ("pdbs", "PodDisruptionBudget", by_key),
                ("pod_groups", "PodGroup", by_key),
                ("composite_groups", "CompositePodGroup", by_key),
                # What the volume plugins and pod affinity's namespaceSelector read.
                ("pvcs", "PersistentVolumeClaim", by_key),
                ("pvs", "PersistentVolume", by_name),
                ("storage_classes", "StorageClass", by_name),
                ("csi_nodes", "CSINode", by_name),
                ("csi_drivers", "CSIDriver", by_name),
                ("capacities", "CSIStorageCapacity", by_key),
                ("namespaces", "Namespace", by_name),
            )
        }
        # What PodTopologySpread's system defaults select a pod's peers by: kept as plain
        # objects, read by the cycle's worker thread from maps replaced entry by entry.
        self._peers: dict[str, dict[ObjectKey, Mapping[str, Any]]] = {}
        self._services: dict[str, tuple[Mapping[str, Any], ...]] = {}
        for index, kind in PEER_KINDS:
            self._peers[index] = {}
            self.listed[index] = LocalStore(
                kind,
                {index: by_key},
                on_change=functools.partial(self._peer_changed, index),
            )
        # Registered in the view only: the scheduler's informers fill and keep them (their
        # re-list on an expired watch reports deletions), so ``Stores.start`` never runs here.
        self.stores = Stores(self.indices, self.pods, self.claims, *self.listed.values())
        self.ledger: InFlightLedger[ObjectKey] = InFlightLedger(on_change=self.track)
        self.allocated: AllocatedTracker[ObjectKey] = AllocatedTracker(features)
        self.usage = UsageTracker()
        self.nodes: ModelCache[Node] = ModelCache(Node)
        self.slices: ModelCache[ResourceSlice] = ModelCache(ResourceSlice)
        self.classes: ModelCache[DeviceClass] = ModelCache(DeviceClass)
        self.taint_rules: ModelCache[DeviceTaintRule] = ModelCache(DeviceTaintRule)
        self.claim_models: ModelCache[ResourceClaim] = ModelCache(ResourceClaim)
        self.pod_models: ModelCache[Pod] = ModelCache(Pod)
        self.priority_classes: ModelCache[PriorityClass] = ModelCache(PriorityClass)
        self.budgets: ModelCache[PodDisruptionBudget] = ModelCache(PodDisruptionBudget)
        self.pod_groups: ModelCache[PodGroup] = ModelCache(PodGroup)
        self.composite_groups: ModelCache[CompositePodGroup] = ModelCache(CompositePodGroup)
        self.pvcs: ModelCache[PersistentVolumeClaim] = ModelCache(PersistentVolumeClaim)
        self.pvs: ModelCache[PersistentVolume] = ModelCache(PersistentVolume)
        self.storage_classes: ModelCache[StorageClass] = ModelCache(StorageClass)
        self.csi_nodes: ModelCache[CSINode] = ModelCache(CSINode)
        self.csi_drivers: ModelCache[CSIDriver] = ModelCache(CSIDriver)
        self.capacities: ModelCache[CSIStorageCapacity] = ModelCache(CSIStorageCapacity)
        self.namespaces: ModelCache[Namespace] = ModelCache(Namespace)
        # Pods this scheduler placed that the pod store does not show bound yet: the
        # snapshot's plugins see them on their node (upstream's assumed pods).
        self.assumed: dict[ObjectKey, Placed] = {}
        # ... those with pod (anti-)affinity terms: the snapshot reads them per cycle.
        self._assumed_affinity: dict[ObjectKey, Placed] = {}
        # The plugins' view of each node's pods (``pods_on``): tuples replaced whole on change.
        self._pods_by_node: dict[str, tuple[Pod, ...]] = {}
        self._pod_node: dict[ObjectKey, str] = {}
        self._assumed_on: dict[str, tuple[Pod, ...]] = {}
        # Bound pods with pod (anti-)affinity terms, and those with required anti-affinity.
        self._with_affinity: dict[ObjectKey, Placed] = {}
        self._with_anti: dict[ObjectKey, Placed] = {}
        self._with_scoring: dict[ObjectKey, Placed] = {}
        self._storage: tuple[tuple[int, ...], Storage] | None = None
        # VolumeBinding's Reserve, by pod (``assume_volumes``).
        self.assumed_volumes: dict[ObjectKey, PodVolumes] = {}
        self._volumes_version = 0
        self._storage_event = asyncio.Event()
        self._namespace_labels: tuple[int, dict[str, Mapping[str, str]]] | None = None
        self.views = NodeViewCache()
        self.order = NodeOrder()  # one cycle at a time ranks with it, as with ``views``
        self.selectors = CelSelectorEngine(CELEnvironment(kubernetes=kubernetes))
        self._mapping: tuple[list[DeviceClass], dict[str, str]] | None = None
        self._pools: tuple[list[ResourceSlice], dict[PoolID, str | None]] | None = None

    # --- reads ---------------------------------------------------------------------------

    def is_pending(self, body: Mapping[str, Any]) -> bool:
        """Ours and not bound (gated and deleting pods too: the cycle looks at those)."""
        spec = body.get("spec") or {}
        return spec.get("schedulerName") == self.scheduler_name and not spec.get("nodeName")

    def pending(self, key: ObjectKey) -> Pod | None:
        body = self.indices.one("pending", key)
        return None if body is None else Pod.load(body)

    def pending_keys(self) -> list[ObjectKey]:
        return list(self.indices.keys("pending"))

    def gated(self) -> int:
        """Pending pods held by scheduling gates (a scrape's count: a pass over the index)."""
        if not self.indices.has("pending"):
            return 0
        return sum(
            1
            for key in self.indices.keys("pending")
            if ((self.indices.one("pending", key) or {}).get("spec") or {}).get("schedulingGates")
        )

    def oldest_pending_age(self, now: datetime.datetime) -> float:
        """Seconds the oldest pod this scheduler should place has waited since its creation
        (a scrape's gauge, one pass over the index): gated pods wait for their gates, deleting
        and finished ones for nothing, so they would only make the alert cry wolf."""
        if not self.indices.has("pending"):
            return 0.0
        oldest = 0.0
        for key in self.indices.keys("pending"):
            body = self.indices.one("pending", key) or {}
            meta, spec = body.get("metadata") or {}, body.get("spec") or {}
            if (
                spec.get("schedulingGates")
                or meta.get("deletionTimestamp")
                or (body.get("status") or {}).get("phase") in TERMINAL_PHASES
            ):
                continue
            waited = age(meta.get("creationTimestamp"), now)
            if waited is not None:
                oldest = max(oldest, waited)
        return oldest

    def claim(self, key: ObjectKey) -> ResourceClaim | None:
        """In flight (our write, not yet seen), else as cached."""
        in_flight = self.ledger.get(key)
        if in_flight is not None:
            return in_flight
        body = self.claims.indices["claims"].last(key)
        return None if body is None else self.claim_models.parse(key, body)

    def extended_claim(self, pod: Pod) -> ResourceClaim | None:
        """The pod's special claim for extended resources (KEP-5004), ours in flight too."""
        namespace = pod.metadata.namespace or ""
        names = set(
            self.indices.values("extended_claims", ObjectKey(namespace, pod.metadata.name or ""))
        )
        names.update(
            key.name
            for key, claim in self.ledger.items()
            if key.namespace == namespace and is_special_claim(claim, pod)
        )
        for name in sorted(names):
            claim = self.claim(ObjectKey(namespace, name))
            if claim is not None and is_special_claim(claim, pod):
                return claim
        return None

    def extended_resource_classes(self) -> dict[str, str]:
        """Extended resource name -> DeviceClass name (KEP-5004)."""
        classes = self.all_of(self.classes, "classes")
        if self._mapping is None or self._mapping[0] is not classes:
            self._mapping = (classes, class_mapping(classes))
        return self._mapping[1]

    def local_nodes(self, devices: Iterable[DeviceID]) -> frozenset[str] | None:
        """The nodes where ``devices`` may be allocated, when the pool of each is one node's
        (``pool_nodes``); None: any node."""
        slices = self.all_of(self.slices, "slices")
        if self._pools is None or self._pools[0] is not slices:
            self._pools = (slices, pool_nodes(slices))
        pools = self._pools[1]
        nodes = set()
        for device in devices:
            node = pools.get(device.pool_id)
            if node is None:
                return None
            nodes.add(node)
        return frozenset(nodes)

    def claims_of(self, pod: Pod) -> dict[str, ResourceClaim]:
        """The claims a pod names (directly or through its status), by name."""
        namespace = pod.metadata.namespace or ""
        found: dict[str, ResourceClaim] = {}
        for name in pod.claim_names():
            claim = self.claim(ObjectKey(namespace, name))
            if claim is not None:
                found[name] = claim
        return found

    def pods_naming(self, claim: ObjectKey) -> list[ObjectKey]:
        """Pending pods that name ``claim`` (a claim event brings them back)."""
        return [ObjectKey(claim.namespace, p) for p in self.indices.values("pods_by_claim", claim)]

    def was_allocated(self, claim: ObjectKey) -> bool:
        return self.indices.has_key("allocated_claims", claim)

    def all_of(self, cache: ModelCache[M], index: str) -> list[M]:
        return cache.all(
            (k, b) for k in self.indices.keys(index) if (b := self.indices.one(index, k))
        )

    def all_nodes(self) -> list[Node]:
        return self.all_of(self.nodes, "nodes")

    def node(self, name: str) -> Node | None:
        body = self.indices.one("nodes", name)
        return None if body is None else self.nodes.parse(name, body)

    def all_slices(self) -> list[ResourceSlice]:
        return self.all_of(self.slices, "slices")

    def classes_by_name(self) -> dict[str, PriorityClass]:
        return {
            c.metadata.name or "": c for c in self.all_of(self.priority_classes, "priority_classes")
        }

    def pod_group(self, key: ObjectKey) -> PodGroup | None:
        body = self.indices.one("pod_groups", key) if self.indices.has("pod_groups") else None
        return None if body is None else self.pod_groups.parse(key, body)

    def composites_in(self, namespace: str) -> dict[str, CompositePodGroup]:
        """The namespace's CompositePodGroups by name (none where the gate is off)."""
        if not self.indices.has("composite_groups"):
            return {}
        found = self.all_of(self.composite_groups, "composite_groups")
        return {c.metadata.name or "": c for c in found if c.metadata.namespace == namespace}

    def pod_groups_in(self, namespace: str) -> list[PodGroup]:
        return [
            g
            for g in self.all_of(self.pod_groups, "pod_groups")
            if g.metadata.namespace == namespace
        ]

    def group_pods(self, key: ObjectKey) -> list[Pod]:
        """The pods that name PodGroup ``key`` and are not finished, any scheduler's, bound or
        not (upstream's PodGroupState counts them all)."""
        return [
            self.pod_models.parse(ObjectKey.of(body), body)
            for body in self.indices.values("group_members", key)
        ]

    def running_on(
        self, node: str, unless: Callable[[Mapping[str, Any]], bool] | None = None
    ) -> list[Pod]:
        """Pods bound to ``node`` and not finished (parsed once per resourceVersion), but
        those whose raw object ``unless`` rules out (never parsed: a pod that cannot fit,
        tried against every node with pods, would parse each of them again)."""
        return [
            self.pod_models.parse(ObjectKey.of(body), body)
            for body in self.indices.values("pods_on_node", node)
            if unless is None or not unless(body)
        ]

    def pods_on(self, node: str) -> Sequence[Pod]:
        """The pods on ``node`` as the plugins see it: bound and not finished, and those this
        scheduler assumed there. Called from the cycle's worker thread while the event loop
        applies watch events: it reads only tuples the loop replaces whole (one dict lookup
        each, atomic), never a structure the loop changes in place."""
        pods = self._pods_by_node.get(node, ())
        assumed = self._assumed_on.get(node, ())
        if not assumed:
            return pods
        bound = {(p.metadata.namespace, p.metadata.name) for p in pods}
        return pods + tuple(
            p for p in assumed if (p.metadata.namespace, p.metadata.name) not in bound
        )

    def cluster(self) -> Snapshot:
        """The snapshot the pod-level plugins filter against (``scheduling.snapshot``)."""
        with_affinity = list(self._with_affinity.values())
        with_anti = list(self._with_anti.values())
        with_scoring = list(self._with_scoring.values())
        for key, (node, pod) in self._assumed_affinity.items():
            if key not in self._with_affinity:
                with_affinity.append((node, pod))
                if has_required_anti_affinity(pod):
                    with_anti.append((node, pod))
                if has_scoring_affinity(pod):
                    with_scoring.append((node, pod))
        return Snapshot(
            nodes=self.all_nodes(),
            pods_on=self.pods_on,
            with_affinity=with_affinity,
            with_required_anti_affinity=with_anti,
            with_scoring_affinity=with_scoring,
            namespaces=self.namespace_labels(),
            storage=self.storage(),
            peers_of=self.peers_of,
        )

    def _peer_changed(self, index: str, key: ObjectKey, body: Mapping[str, Any] | None) -> None:
        kept = self._peers[index]
        if body is None:
            kept.pop(key, None)
        else:
            kept[key] = body
        if index == "services":
            self._services[key.namespace] = tuple(
                b for k, b in list(kept.items()) if k.namespace == key.namespace
            )

    def peers_of(self, pod: Pod) -> Peers:
        """The Services of the pod's namespace and the controller that may own it
        (``snapshot.Peers``)."""
        namespace = pod.metadata.namespace or ""
        services = self._services.get(namespace, ())
        owner = pod.metadata.controller_ref()
        if owner is None:
            return Peers(services)
        key = ObjectKey(namespace, owner.name or "")

        def owned(index: str) -> tuple[Mapping[str, Any], ...]:
            found = self._peers[index].get(key)
            return (found,) if found is not None else ()

        return Peers(
            services,
            owned("replication_controllers"),
            owned("replica_sets"),
            owned("stateful_sets"),
        )

    def namespace_labels(self) -> dict[str, Mapping[str, str]]:
        """Labels by namespace name, rebuilt only when a namespace changed."""
        version = self.namespaces.version
        if self._namespace_labels is None or self._namespace_labels[0] != version:
            labels: dict[str, Mapping[str, str]] = {
                n.metadata.name or "": n.metadata.labels
                for n in self.all_of(self.namespaces, "namespaces")
            }
            self._namespace_labels = (version, labels)
        return self._namespace_labels[1]

    def storage(self) -> Storage:
        """The storage objects, rebuilt only when one of their kinds changed."""
        kinds = (
            (self.pvcs, "pvcs"),
            (self.pvs, "pvs"),
            (self.storage_classes, "storage_classes"),
            (self.csi_nodes, "csi_nodes"),
            (self.csi_drivers, "csi_drivers"),
            (self.capacities, "capacities"),
        )
        versions = (*(models.version for models, _ in kinds), self._volumes_version)
        if self._storage is None or self._storage[0] != versions:
            claims = {c.metadata.key: c for c in self.all_of(self.pvcs, "pvcs")}
            volumes = {v.metadata.name or "": v for v in self.all_of(self.pvs, "pvs")}
            for assumed in self.assumed_volumes.values():
                _overlay(claims, volumes, assumed)
            self._storage = (
                versions,
                Storage(
                    claims=claims,
                    volumes=volumes,
                    classes={
                        c.metadata.name or "": c
                        for c in self.all_of(self.storage_classes, "storage_classes")
                    },
                    csi_nodes={
                        c.metadata.name or "": c for c in self.all_of(self.csi_nodes, "csi_nodes")
                    },
                    capacities=self.all_of(self.capacities, "capacities"),
                    drivers={
                        d.metadata.name or "": d
                        for d in self.all_of(self.csi_drivers, "csi_drivers")
                    },
                ),
            )
        return self._storage[1]

    def assume_volumes(self, key: ObjectKey, volumes: PodVolumes | None) -> None:
        """VolumeBinding's Reserve (upstream's assume caches): the PVs ``volumes`` binds and
        the claims it provisions, as PreBind will write them, seen by every later cycle until
        the stores show them written (None: forgotten, the pod bound or its attempt undone)."""
        if volumes is None:
            if self.assumed_volumes.pop(key, None) is None:
                return
        else:
            self.assumed_volumes[key] = volumes
        self._volumes_version += 1

    def storage_changed(self) -> None:
        """A storage object changed: a PreBind waiting for its volumes looks again."""
        changed, self._storage_event = self._storage_event, asyncio.Event()
        changed.set()

    async def storage_change(self, seconds: float) -> None:
        """Until the next change of a storage object, or ``seconds``."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._storage_event.wait(), seconds)

    def assume(
        self, key: ObjectKey, pod: Pod, placement: tuple[str, Mapping[str, Decimal]] | None
    ) -> None:
        """This scheduler placed ``pod`` on a node with its requests (None: the placement was
        undone): its node usage, and the pod on its node for the snapshot's plugins."""
        self.usage.assume(
            key,
            None
            if placement is None
            else counted_placement(pod, *placement, node_allocatable=self.node_allocatable),
        )
        if placement is None:
            self._unassume(key)
        elif self.usage.node_of(key) == placement[0]:
            self._unassume(key)
            self.assumed[key] = (placement[0], pod)
            self._assumed_on[placement[0]] = (*self._assumed_on.get(placement[0], ()), pod)
            if has_affinity(pod):
                self._assumed_affinity[key] = (placement[0], pod)

    def _unassume(self, key: ObjectKey) -> None:
        found = self.assumed.pop(key, None)
        if found is None:
            return
        self._assumed_affinity.pop(key, None)
        node = found[0]
        left = tuple(
            p
            for p in self._assumed_on.get(node, ())
            if (p.metadata.namespace or "", p.metadata.name or "") != key
        )
        if left:
            self._assumed_on[node] = left
        else:
            self._assumed_on.pop(node, None)

    def _place(self, key: ObjectKey, node: str | None, pod: Pod | None) -> None:
        """The plugins' view of ``key``: on ``node`` (None: on no node), replacing its tuple."""
        for at in {self._pod_node.pop(key, None), node}:
            if at is None:
                continue
            kept = tuple(
                p
                for p in self._pods_by_node.get(at, ())
                if (p.metadata.namespace, p.metadata.name) != (key.namespace, key.name)
            )
            if at == node and pod is not None:
                kept = (*kept, pod)
            if kept:
                self._pods_by_node[at] = kept
            else:
                self._pods_by_node.pop(at, None)
        if node is not None and pod is not None:
            self._pod_node[key] = node

    def nodes_with_pods(self) -> list[str]:
        return list(self.indices.keys("pods_on_node"))

    def held_by(self, pod: Pod) -> tuple[ResourceClaim, ...]:
        """The pod's allocated claims that are reserved for it."""
        namespace = pod.metadata.namespace or ""
        uid = pod.metadata.uid or ""
        held = []
        for name in sorted(pod.claim_names()):
            claim = self.claim(ObjectKey(namespace, name))
            if claim is not None and claim.is_allocated and claim.is_reserved_for(uid):
                held.append(claim)
        return tuple(held)

    def allocated_keys(self) -> list[ObjectKey]:
        return list(self.indices.keys("allocated_claims"))

    def allocator(
        self,
        policy: Policy,
        share_ids: Callable[[], str],
        out_of_time: Callable[[], bool] | None = None,
        kind: type[Allocator] = Allocator,
        allocated: AllocatedState | None = None,
    ) -> Allocator:
        """``allocated``: the state to allocate against (default: every allocated and
        in-flight claim; the scheduler adds the devices nominated for other pods)."""
        return kind(
            self.features,
            allocated if allocated is not None else self.allocated.state(),
            self.all_of(self.classes, "classes"),
            self.all_of(self.slices, "slices"),
            self.selectors,
            share_ids=share_ids,
            taint_rules=self.all_of(self.taint_rules, "taint_rules"),
            policy=policy,
            view_cache=self.views,
            out_of_time=out_of_time,
        )

    def conflicts(self, key: ObjectKey) -> list[DeviceID]:
        """Devices ``key`` holds exclusively that another claim's allocation uses as well."""
        claim = self.claim(key)
        if claim is None:
            return []
        return [
            d for d in Holding.of(claim, self.features).devices if self.allocated.users(d) - {key}
        ]

    # --- derived state -------------------------------------------------------------------

    def track(self, key: ObjectKey) -> None:
        """Hand the allocation tracker what the claim holds now: in flight, else cached."""
        claim = self.ledger.get(key)
        if claim is None:
            body = self.claims.indices["claims"].last(key)
            if body and (body.get("status") or {}).get("allocation"):
                claim = self.claim_models.parse(key, body)
        self.allocated.track(key, claim)

    def written(self, claim: ResourceClaim) -> None:
        """Our status write succeeded: keep ``claim`` in the ledger until the store shows it.

        The watch event may have beaten the write's answer; then no later event would drop
        the entry, so compare with the store right away.
        """
        key = ObjectKey(claim.metadata.namespace or "", claim.metadata.name or "")
        self.ledger.written(key, claim)
        body = self.claims.indices["claims"].last(key)
        if body is not None:
            self.ledger.observe(key, self.claim_models.parse(key, body))
        self.claim_models.seed(key, claim.metadata.resource_version, claim)

    def observe_claim(self, event: str | None, body: Mapping[str, Any]) -> bool:
        """A claim watch event; False when it is older than what the store has."""
        key = ObjectKey.of(body)
        if not self.claims.apply(event, body):
            return False
        if event == "DELETED":
            self.claim_models.forget(key)
            self.ledger.observe(key, None)
        else:
            self.ledger.observe(key, self.claim_models.parse(key, body))
        return True

    def forget_in_flight(self) -> None:
        """Leadership lost: the stores are the truth again."""
        self.ledger.clear()
        self.usage.forget_assumed()
        self.assumed.clear()
        self._assumed_affinity.clear()
        self._assumed_on.clear()
        self.assumed_volumes.clear()
        self._volumes_version += 1

    def _pending_index(self, body: Mapping[str, Any]) -> dict[Any, Any]:
        return {ObjectKey.of(body): dict(body)} if self.is_pending(body) else {}

    def _pods_by_claim_index(self, body: Mapping[str, Any]) -> dict[Any, Any]:
        """Pending pods by the claims they name: a claim event requeues them."""
        if not self.is_pending(body):
            return {}
        namespace, name = ObjectKey.of(body)
        names = {
            c.get("resourceClaimName") for c in (body.get("spec") or {}).get("resourceClaims") or []
        }
        names.update(
            c.get("resourceClaimName")
            for c in (body.get("status") or {}).get("resourceClaimStatuses") or []
        )
        return {ObjectKey(namespace, c): name for c in names if c}

    def _pod_placement(self, key: ObjectKey, body: Mapping[str, Any] | None) -> None:
        """Keep node usage current with the pod store (bound pods count on their node)."""
        if body is None or (body.get("status") or {}).get("phase") in TERMINAL_PHASES:
            self.usage.forget(key)
            self.pod_models.forget(key)
            self._unassume(key)
            self._place(key, None, None)
            self._with_affinity.pop(key, None)
            self._with_anti.pop(key, None)
            self._with_scoring.pop(key, None)
            return
        node = (body.get("spec") or {}).get("nodeName")
        if not node:
            self.usage.observe(key, None)
            return
        self._unassume(key)  # the store shows it bound: no longer assumed
        pod = self.pod_models.parse(key, body)
        self.usage.observe(
            key,
            counted_placement(
                pod,
                node,
                bound_requests(pod, self.node_allocatable),
                node_allocatable=self.node_allocatable,
            ),
        )
        self._place(key, node, pod)
        # Upstream's NodeInfo.PodsWithAffinity and PodsWithRequiredAntiAffinity, kept here
        # so that a cycle never walks every pod to find them.
        if has_affinity(pod):
            self._with_affinity[key] = (node, pod)
        else:
            self._with_affinity.pop(key, None)
        if has_required_anti_affinity(pod):
            self._with_anti[key] = (node, pod)
        else:
            self._with_anti.pop(key, None)
        if has_scoring_affinity(pod):
            self._with_scoring[key] = (node, pod)
        else:
            self._with_scoring.pop(key, None)


def _on_node(body: Mapping[str, Any]) -> dict[Any, Any]:
    """Bound pods that still run (preemption's candidates), by node."""
    node = (body.get("spec") or {}).get("nodeName")
    if not node or (body.get("status") or {}).get("phase") in TERMINAL_PHASES:
        return {}
    return {node: body}


def _overlay(
    claims: dict[str, PersistentVolumeClaim],
    volumes: dict[str, PersistentVolume],
    assumed: PodVolumes,
) -> None:
    """An assumed binding replaces the object it was made from; once the store holds a newer
    version (the write, or someone else's), the store's is the truth."""
    for binding in assumed.static_bindings:
        name = binding.pv.metadata.name or ""
        known = volumes.get(name)
        if known is None or known.metadata.resource_version == binding.pv.metadata.resource_version:
            volumes[name] = binding.pv
    for provision in assumed.dynamic_provisions:
        key = provision.pvc.metadata.key
        known_claim = claims.get(key)
        if (
            known_claim is None
            or known_claim.metadata.resource_version == provision.pvc.metadata.resource_version
        ):
            claims[key] = provision.pvc


def _group_member(body: Mapping[str, Any]) -> dict[Any, Any]:
    """Pods by the PodGroup they name (1.37's spec.schedulingGroup), while not finished."""
    group = ((body.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    if not group or (body.get("status") or {}).get("phase") in TERMINAL_PHASES:
        return {}
    return {ObjectKey(ObjectKey.of(body).namespace, group): dict(body)}


def by_name(body: Mapping[str, Any]) -> dict[Any, Any]:
    return {ObjectKey.of(body).name: dict(body)}


def _extended(body: Mapping[str, Any]) -> dict[Any, Any]:
    """Special claims for extended resources, by (namespace, name of the pod they are for)."""
    meta = body.get("metadata") or {}
    if (meta.get("annotations") or {}).get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) != "true":
        return {}
    owner = controller_pod(body)
    if owner is None:
        return {}
    key = ObjectKey.of(body)
    return {ObjectKey(key.namespace, owner[0]): key.name}


def _allocated(body: Mapping[str, Any]) -> dict[Any, Any]:
    return {ObjectKey.of(body): True} if (body.get("status") or {}).get("allocation") else {}
