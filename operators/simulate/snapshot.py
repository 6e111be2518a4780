"""What ``simulate`` reasons about: the objects of a cluster, from files, a live cluster, or both.

Every object remembers where it came from (file and document, or the cluster), so that a
validation problem names it. Later sources replace earlier objects of the same kind and name:
``--kubeconfig`` then ``-f pod.yaml`` asks "what if I add this pod".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from operators.api.base import KubeModel
from operators.api.core import Node, Pod, PodDisruptionBudget, PriorityClass
from operators.api.features import Release
from operators.api.groups import API_VERSION as GROUP_API_VERSION
from operators.api.groups import CompositePodGroup, PodGroup
from operators.api.keys import ObjectKey
from operators.api.names import TERMINAL_PHASES
from operators.api.resource import (
    SERVED_VERSIONS,
    DeviceClass,
    DeviceTaintRule,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from operators.api.storage import (
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    Namespace,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from operators.api.workloads import ReplicaSet, ReplicationController, Service, StatefulSet
from operators.scheduling import snapshot as plugin_snapshot


class InputError(Exception):
    """Bad input: a file, object or flag that cannot be used (exit code 2)."""


@dataclasses.dataclass(frozen=True)
class Kind:
    name: str
    model: type[KubeModel]
    api_versions: tuple[str, ...]
    namespaced: bool
    #: Our model has every field of the API's (strict unknown-field checks make sense).
    complete: bool = True
    #: The first release that serves the kind at all (None: every supported one).
    since: Release | None = None

    def served(self, release: Release) -> tuple[str, ...]:
        """The apiVersions a cluster of ``release`` serves the kind in (a version a kind moved
        to counts from its release on, ``api.resource.SERVED_VERSIONS``); none before the
        kind's ``since``."""
        if self.since is not None and release < self.since:
            return ()
        since = {v: r for r, v in SERVED_VERSIONS.get(self.name, ())}
        return tuple(v for v in self.api_versions if v not in since or release >= since[v])


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("Node", Node, ("v1",), False, complete=False),
        Kind("Pod", Pod, ("v1",), True, complete=False),
        Kind("DeviceClass", DeviceClass, ("resource.k8s.io/v1",), False),
        Kind("ResourceSlice", ResourceSlice, ("resource.k8s.io/v1",), False),
        Kind("ResourceClaim", ResourceClaim, ("resource.k8s.io/v1",), True),
        Kind("ResourceClaimTemplate", ResourceClaimTemplate, ("resource.k8s.io/v1",), True),
        Kind(
            "DeviceTaintRule",
            DeviceTaintRule,
            ("resource.k8s.io/v1beta2", "resource.k8s.io/v1"),
            False,
        ),
        # What preemption reads: priorities, and disruption budgets.
        Kind("PriorityClass", PriorityClass, ("scheduling.k8s.io/v1",), False, complete=False),
        Kind(
            "PodDisruptionBudget",
            PodDisruptionBudget,
            ("policy/v1",),
            True,
            complete=False,
        ),
        # 1.37's GenericWorkload: the pod groups the scheduler places together (``--pod-group``).
        # Not complete: its alpha disruptionMode is a plain map.
        Kind(
            "PodGroup",
            PodGroup,
            (GROUP_API_VERSION,),
            True,
            complete=False,
            since=Release(1, 37),
        ),
        # CompositePodGroup (1.37 alpha in v1alpha3, 1.38 beta in v1beta1): trees of groups.
        Kind(
            "CompositePodGroup",
            CompositePodGroup,
            ("scheduling.k8s.io/v1alpha3", GROUP_API_VERSION),
            True,
            complete=False,
            since=Release(1, 37),
        ),
        # What the default profile's other plugins read (pod affinity's namespaceSelector,
        # the volume plugins).
        Kind("Namespace", Namespace, ("v1",), False, complete=False),
        Kind("PersistentVolumeClaim", PersistentVolumeClaim, ("v1",), True, complete=False),
        Kind("PersistentVolume", PersistentVolume, ("v1",), False, complete=False),
        Kind("StorageClass", StorageClass, ("storage.k8s.io/v1",), False, complete=False),
        Kind("CSINode", CSINode, ("storage.k8s.io/v1",), False, complete=False),
        Kind("CSIDriver", CSIDriver, ("storage.k8s.io/v1",), False, complete=False),
        Kind(
            "CSIStorageCapacity",
            CSIStorageCapacity,
            ("storage.k8s.io/v1",),
            True,
            complete=False,
        ),
        # What PodTopologySpread's system defaults select a pod's peers by.
        Kind("Service", Service, ("v1",), True, complete=False),
        Kind("ReplicationController", ReplicationController, ("v1",), True, complete=False),
        Kind("ReplicaSet", ReplicaSet, ("apps/v1",), True, complete=False),
        Kind("StatefulSet", StatefulSet, ("apps/v1",), True, complete=False),
    )
}
# The kinds kept in ``Snapshot.others`` (read only by the plugins' snapshot).
PLUGIN_KINDS = (
    "Namespace",
    "PersistentVolumeClaim",
    "PersistentVolume",
    "StorageClass",
    "CSINode",
    "CSIDriver",
    "CSIStorageCapacity",
    "Service",
    "ReplicationController",
    "ReplicaSet",
    "StatefulSet",
)
# Groups whose kinds we know all of: an unknown kind there is a typo, not something to skip.
OUR_GROUPS = ("resource.k8s.io",)


@dataclasses.dataclass(frozen=True)
class Source:
    """Where an object came from: ``file`` and its document index, or the cluster."""

    file: str
    document: int | None = None

    def __str__(self) -> str:
        return self.file if self.document is None else f"{self.file}: document #{self.document}"


@dataclasses.dataclass(frozen=True)
class Document:
    source: Source
    body: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.body.get("kind") or "")

    def describe(self) -> str:
        """ "Kind ns/name" as messages name it."""
        meta = self.body.get("metadata") or {}
        key = ObjectKey(meta.get("namespace") or "", meta.get("name") or "?")
        return f"{self.kind or 'object'} {key}"


def documents_from(paths: Iterable[str]) -> Iterator[Document]:
    """Every object of the files and directories (``List`` objects unpacked)."""
    for raw in paths:
        for file in _files(Path(raw)):
            try:
                loaded = list(yaml.safe_load_all(file.read_text()))
            except (OSError, yaml.YAMLError) as e:
                raise InputError(f"{file}: cannot read: {e}") from None
            index = 0
            for doc in loaded:
                if doc is None:
                    continue
                items = doc.get("items", []) if _is_list(doc) else [doc]
                for item in items:
                    if not isinstance(item, dict):
                        raise InputError(f"{file}: document #{index}: not an object")
                    yield Document(Source(str(file), index), item)
                    index += 1


def _is_list(doc: Any) -> bool:
    return isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List")


def _files(path: Path) -> Iterator[Path]:
    if path.is_dir():
        for child in sorted(path.iterdir()):
            if child.suffix in (".yaml", ".yml", ".json") and child.is_file():
                yield child
    elif path.is_file():
        yield path
    else:
        raise InputError(f"{path}: no such file or directory")


@dataclasses.dataclass
class Snapshot:
    """The objects by kind and key; ``add`` replaces an object of the same kind and key."""

    nodes: dict[str, Node] = dataclasses.field(default_factory=dict)
    pods: dict[ObjectKey, Pod] = dataclasses.field(default_factory=dict)
    classes: dict[str, DeviceClass] = dataclasses.field(default_factory=dict)
    slices: dict[str, ResourceSlice] = dataclasses.field(default_factory=dict)
    claims: dict[ObjectKey, ResourceClaim] = dataclasses.field(default_factory=dict)
    templates: dict[ObjectKey, ResourceClaimTemplate] = dataclasses.field(default_factory=dict)
    taint_rules: dict[str, DeviceTaintRule] = dataclasses.field(default_factory=dict)
    priority_classes: dict[str, PriorityClass] = dataclasses.field(default_factory=dict)
    budgets: dict[ObjectKey, PodDisruptionBudget] = dataclasses.field(default_factory=dict)
    pod_groups: dict[ObjectKey, PodGroup] = dataclasses.field(default_factory=dict)
    composite_groups: dict[ObjectKey, CompositePodGroup] = dataclasses.field(default_factory=dict)
    bodies: dict[tuple[str, ObjectKey], dict[str, Any]] = dataclasses.field(default_factory=dict)
    #: ``PLUGIN_KINDS`` by kind, then key.
    others: dict[str, dict[ObjectKey, Any]] = dataclasses.field(default_factory=dict)

    def add(self, kind: str, body: dict[str, Any]) -> None:
        obj = KINDS[kind].model.load(body)
        key = ObjectKey.of(body)
        self.bodies[(kind, key)] = body
        if isinstance(obj, Node):
            self.nodes[key.name] = obj
        elif isinstance(obj, Pod):
            self.pods[key] = obj
        elif isinstance(obj, DeviceClass):
            self.classes[key.name] = obj
        elif isinstance(obj, ResourceSlice):
            self.slices[key.name] = obj
        elif isinstance(obj, ResourceClaim):
            self.claims[key] = obj
        elif isinstance(obj, ResourceClaimTemplate):
            self.templates[key] = obj
        elif isinstance(obj, DeviceTaintRule):
            self.taint_rules[key.name] = obj
        elif isinstance(obj, PriorityClass):
            self.priority_classes[key.name] = obj
        elif isinstance(obj, PodDisruptionBudget):
            self.budgets[key] = obj
        elif isinstance(obj, PodGroup):
            self.pod_groups[key] = obj
        elif isinstance(obj, CompositePodGroup):
            self.composite_groups[key] = obj
        elif kind in PLUGIN_KINDS:
            self.others.setdefault(kind, {})[key] = obj

    def of_kind(self, kind: str) -> list[Any]:
        """The objects of one of ``PLUGIN_KINDS``, by key."""
        found = self.others.get(kind, {})
        return [found[k] for k in sorted(found, key=str)]

    def plugins(self, leave_out: ObjectKey) -> plugin_snapshot.Snapshot:
        """What the default profile's other plugins see (``scheduling.snapshot``): every node,
        the bound pods that still run (but ``leave_out``), namespaces and storage."""
        placed = [
            (pod.spec.node_name, pod)
            for key, pod in sorted(self.pods.items(), key=lambda kv: str(kv[0]))
            if key != leave_out and pod.spec.node_name and pod.status.phase not in TERMINAL_PHASES
        ]
        storage = plugin_snapshot.Storage(
            claims={c.metadata.key: c for c in self.of_kind("PersistentVolumeClaim")},
            volumes={v.metadata.name or "": v for v in self.of_kind("PersistentVolume")},
            classes={c.metadata.name or "": c for c in self.of_kind("StorageClass")},
            csi_nodes={c.metadata.name or "": c for c in self.of_kind("CSINode")},
            capacities=self.of_kind("CSIStorageCapacity"),
            drivers={d.metadata.name or "": d for d in self.of_kind("CSIDriver")},
        )
        return plugin_snapshot.snapshot_of(
            sorted(self.nodes.values(), key=lambda n: n.metadata.name or ""),
            placed,
            {n.metadata.name or "": n.metadata.labels for n in self.of_kind("Namespace")},
            storage,
            plugin_snapshot.peers_from(
                *(
                    [o.dump() for o in self.of_kind(kind)]
                    for kind in ("Service", "ReplicationController", "ReplicaSet", "StatefulSet")
                )
            ),
        )

    def claim_in(self, namespace: str) -> dict[str, ResourceClaim]:
        """The namespace's claims by name (what ``resolve_claims`` is given)."""
        return {k.name: c for k, c in self.claims.items() if k.namespace == namespace}

    def as_list(self) -> dict[str, Any]:
        """One ``List`` of every object, for ``--save`` (and to load again with ``-f``)."""
        return {
            "apiVersion": "v1",
            "kind": "List",
            "items": [self.bodies[k] for k in sorted(self.bodies, key=lambda k: (k[0], k[1]))],
        }
