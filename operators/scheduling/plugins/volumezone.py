"""VolumeZone (``pkg/scheduler/framework/plugins/volumezone``, v1.37.2): a pod's bound PVs'
zone and region labels against the node's.

A PV labelled ``topology.kubernetes.io/zone`` (or region, or their beta
``failure-domain.beta.kubernetes.io`` forms; ``a__b`` lists several zones) only fits nodes
whose label of that key (a beta key also tries the GA key on the node) is one of the values.
A node without any of the four labels takes every pod (single-zone clusters). Only
``persistentVolumeClaim`` volumes count: generic ephemeral volumes are not looked at, and
unbound claims of a WaitForFirstConsumer class are skipped (VolumeBinding places them).

Same in 1.36 and 1.38, but for ``skip_deferred_resize`` (1.37's alpha
InPlacePodVerticalScalingSchedulerPreemption, off): a pod whose resize is deferred skips
the plugin.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from operators.api.core import Node, Pod
from operators.api.storage import WAIT_FOR_FIRST_CONSUMER, PersistentVolume
from operators.cel.library.strings import go_quote
from operators.scheduling.plugins import Unresolvable
from operators.scheduling.plugins.volumebinding import claim_class, not_found, resize_deferred
from operators.scheduling.snapshot import Snapshot

ERR_REASON_CONFLICT: Final = "node(s) had no available volume zone"

BETA_ZONE: Final = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION: Final = "failure-domain.beta.kubernetes.io/region"
ZONE: Final = "topology.kubernetes.io/zone"
REGION: Final = "topology.kubernetes.io/region"
#: Upstream's order: a PV's topologies are checked in it.
TOPOLOGY_LABELS: Final = (BETA_ZONE, BETA_REGION, ZONE, REGION)
_GA: Final = {BETA_ZONE: ZONE, BETA_REGION: REGION}
#: cloud-provider's LabelMultiZoneDelimiter.
_ZONE_DELIMITER: Final = "__"


@dataclasses.dataclass(frozen=True)
class PVTopology:
    """One topology label of a bound PV: the key and the zones (or regions) it allows."""

    pv_name: str
    key: str
    values: frozenset[str]


@dataclasses.dataclass(frozen=True)
class VolumeZoneState:
    topologies: tuple[PVTopology, ...]


def pre_filter(
    pod: Pod, snapshot: Snapshot, *, skip_deferred_resize: bool = False
) -> VolumeZoneState | Unresolvable | None:
    """The topologies of the pod's bound PVs; None (Skip) when there are none; Unresolvable
    for a claim, class or PV that is missing, or an unbound claim that is not delayed."""
    volumes = pod.spec.volumes
    if not volumes:
        return None
    if skip_deferred_resize and resize_deferred(pod):
        return None
    storage = snapshot.storage
    namespace = pod.metadata.namespace or ""
    topologies: list[PVTopology] = []
    for volume in volumes:
        if volume.persistent_volume_claim is None:
            continue
        name = volume.persistent_volume_claim.claim_name or ""
        if not name:
            return Unresolvable("PersistentVolumeClaim had no name")
        pvc = storage.claims.get(f"{namespace}/{name}")
        if pvc is None:
            return Unresolvable(not_found("persistentvolumeclaim", name))
        pv_name = pvc.spec.volume_name or ""
        if not pv_name:
            class_name = claim_class(pvc)
            if not class_name:
                return Unresolvable("PersistentVolumeClaim had no pv name and storageClass name")
            cls = storage.classes.get(class_name)
            if cls is None:
                return Unresolvable(not_found("storageclass.storage.k8s.io", class_name))
            if cls.volume_binding_mode is None:
                return Unresolvable(
                    f"VolumeBindingMode not set for StorageClass {go_quote(class_name)}"
                )
            if cls.volume_binding_mode == WAIT_FOR_FIRST_CONSUMER:
                continue
            return Unresolvable("PersistentVolume had no name")
        pv = storage.volumes.get(pv_name)
        if pv is None:
            return Unresolvable(not_found("persistentvolume", pv_name))
        topologies.extend(pv_topologies(pv))
    if not topologies:
        return None
    return VolumeZoneState(topologies=tuple(topologies))


def pv_topologies(pv: PersistentVolume) -> list[PVTopology]:
    """getPVTopologies: the PV's topology labels; one with an empty zone in its list is
    ignored, as upstream logs and skips it."""
    out = []
    for key in TOPOLOGY_LABELS:
        value = pv.metadata.labels.get(key)
        if value is None:
            continue
        zones = [zone.strip() for zone in value.split(_ZONE_DELIMITER)]
        if any(not zone for zone in zones):
            continue
        out.append(PVTopology(pv_name=pv.metadata.name or "", key=key, values=frozenset(zones)))
    return out


def filter(state: VolumeZoneState, pod: Pod, node: Node, snapshot: Snapshot) -> str | None:
    """ERR_REASON_CONFLICT when a PV's topology label is missing on the node or differs."""
    labels = node.metadata.labels
    if not any(key in labels for key in TOPOLOGY_LABELS):
        return None
    for topology in state.topologies:
        value = labels.get(topology.key)
        if value is None:
            value = labels.get(_GA.get(topology.key, topology.key))
        if value is None or value not in topology.values:
            return ERR_REASON_CONFLICT
    return None


def resolvable(reason: str) -> bool:
    """The conflict is UnschedulableAndUnresolvable: preemption cannot help."""
    del reason
    return False
