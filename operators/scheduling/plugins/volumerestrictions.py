"""VolumeRestrictions (``pkg/scheduler/framework/plugins/volumerestrictions``, v1.37.2): disks
that only one pod of a node may mount, and ReadWriteOncePod claims.

In-tree inline disks conflict with a pod already on the node: the same GCE PD unless both
mount it read-only, the same AWS EBS volume ID always, the same iSCSI IQN unless both are
read-only, the same RBD image (a shared Ceph monitor, same pool and image) unless both are
read-only.

A ``persistentVolumeClaim`` volume whose claim has the ReadWriteOncePod access mode, while
any placed pod (on any node) refers to that claim, makes every node refuse the pod with a
plain Unschedulable: preemption of the user frees it. Upstream counts the RWOP claims in
use at PreFilter and adjusts the count as preemption removes pods; here the caller passes a
snapshot without the victims and the count is taken from it (the same, but where two placed
pods share an RWOP claim: upstream's count drops to 0 once one of them is a victim, here the
claim stays in use). Generic ephemeral volumes are not checked. Every
``persistentVolumeClaim`` volume's claim must exist (PreFilter).

Same in 1.36 and 1.38, but for ``skip_deferred_resize`` (1.37's alpha
InPlacePodVerticalScalingSchedulerPreemption, off): a pod whose resize is deferred skips
the plugin.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Final

from operators.api.core import Node, Pod, Volume
from operators.scheduling.plugins import Unresolvable
from operators.scheduling.plugins.volumebinding import (
    READ_WRITE_ONCE_POD,
    not_found,
    resize_deferred,
)
from operators.scheduling.snapshot import Snapshot

ERR_REASON_DISK_CONFLICT: Final = "node(s) had no available disk"
ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT: Final = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
    "already in-use by another pod"
)

#: The in-tree sources a node can mount for one pod only (needsRestrictionsCheck).
_RESTRICTED: Final = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi")


@dataclasses.dataclass(frozen=True)
class VolumeRestrictionsState:
    """The pod's restricted inline disks and how many of its RWOP claims are in use."""

    disks: tuple[Volume, ...]
    rwop_claims: frozenset[str]
    """Names of the pod's claims with the ReadWriteOncePod access mode."""
    conflicting: int
    """How many of them a placed pod refers to."""


def _restricted(volume: Volume) -> bool:
    return any(volume.source(kind) is not None for kind in _RESTRICTED)


def pre_filter(
    pod: Pod, snapshot: Snapshot, *, skip_deferred_resize: bool = False
) -> VolumeRestrictionsState | Unresolvable | None:
    """The pod's restricted disks and RWOP claims in use; None (Skip) when it has neither;
    Unresolvable when a claim of a ``persistentVolumeClaim`` volume does not exist."""
    volumes = pod.spec.volumes
    if not volumes:
        return None
    if skip_deferred_resize and resize_deferred(pod):
        return None
    disks = tuple(v for v in volumes if _restricted(v))
    namespace = pod.metadata.namespace or ""
    rwop: set[str] = set()
    for volume in volumes:
        if volume.persistent_volume_claim is None:
            continue
        name = volume.persistent_volume_claim.claim_name or ""
        pvc = snapshot.storage.claims.get(f"{namespace}/{name}")
        if pvc is None:
            return Unresolvable(not_found("persistentvolumeclaim", name))
        if READ_WRITE_ONCE_POD in pvc.spec.access_modes:
            rwop.add(pvc.metadata.name or "")
    conflicting = _in_use(rwop, namespace, snapshot) if rwop else 0
    if not disks and conflicting == 0:
        return None
    return VolumeRestrictionsState(
        disks=disks, rwop_claims=frozenset(rwop), conflicting=conflicting
    )


def _in_use(names: set[str], namespace: str, snapshot: Snapshot) -> int:
    """How many of the claims a placed pod refers to (the snapshot's IsPVCUsedByPods)."""
    used: set[str] = set()
    for _, placed in snapshot.placed():
        if placed.metadata.namespace != namespace:
            continue
        for volume in placed.spec.volumes:
            claim = volume.persistent_volume_claim
            if claim is not None and (claim.claim_name or "") in names:
                used.add(claim.claim_name or "")
    return len(used)


def filter(state: VolumeRestrictionsState, pod: Pod, node: Node, snapshot: Snapshot) -> str | None:
    """A disk conflict with a pod on the node first, then the RWOP conflict."""
    if state.disks:
        existing = snapshot.pods_on(node.metadata.name or "")
        for disk in state.disks:
            if any(_conflicts(disk, other.spec.volumes) for other in existing):
                return ERR_REASON_DISK_CONFLICT
    if state.conflicting > 0:
        return ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT
    return None


def resolvable(reason: str) -> bool:
    """Both conflicts are plain Unschedulable: evicting the other pod helps."""
    return reason in (ERR_REASON_DISK_CONFLICT, ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT)


def _conflicts(volume: Volume, existing: Sequence[Volume]) -> bool:
    """isVolumeConflict: the disk against every volume of a pod on the node."""
    for other in existing:
        gce, other_gce = volume.source("gcePersistentDisk"), other.source("gcePersistentDisk")
        if gce is not None and other_gce is not None:
            same = gce.get("pdName", "") == other_gce.get("pdName", "")
            if same and not (_read_only(gce) and _read_only(other_gce)):
                return True
        ebs, other_ebs = volume.source("awsElasticBlockStore"), other.source("awsElasticBlockStore")
        if (
            ebs is not None
            and other_ebs is not None
            and ebs.get("volumeID", "") == other_ebs.get("volumeID", "")
        ):
            return True
        iscsi, other_iscsi = volume.source("iscsi"), other.source("iscsi")
        if iscsi is not None and other_iscsi is not None:
            same = iscsi.get("iqn", "") == other_iscsi.get("iqn", "")
            if same and not (_read_only(iscsi) and _read_only(other_iscsi)):
                return True
        rbd, other_rbd = volume.source("rbd"), other.source("rbd")
        if (
            rbd is not None
            and other_rbd is not None
            and set(rbd.get("monitors") or ()) & set(other_rbd.get("monitors") or ())
            and rbd.get("pool", "") == other_rbd.get("pool", "")
            and rbd.get("image", "") == other_rbd.get("image", "")
            and not (_read_only(rbd) and _read_only(other_rbd))
        ):
            return True
    return False


def _read_only(source: dict[str, Any]) -> bool:
    return bool(source.get("readOnly", False))
