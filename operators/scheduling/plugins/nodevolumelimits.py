"""NodeVolumeLimits (``pkg/scheduler/framework/plugins/nodevolumelimits``, CSILimits, v1.37.2):
how many volumes of each CSI driver a node can attach, from its CSINode's
``drivers[].allocatable.count``.

A volume is a claim (``persistentVolumeClaim`` or generic ephemeral volume) resolved to
(driver, volume handle): through its bound PV's ``csi`` source, else (unbound, or the PV is
missing) through its class's provisioner with a per-claim handle. A node refuses the pod
when the pod's new volumes of a driver (those no pod on the node already uses) plus the
volumes attached there (the node's pods', and VolumeAttachments of PVs none of them uses)
exceed the driver's count. Removing preemption victims from the snapshot frees their slots.

VolumeLimitScaling (beta and on in 1.37, alpha and off in 1.36: ``volume_limit_scaling``):
a driver whose CSIDriver sets ``preventPodSchedulingIfMissing`` must be in the node's
CSINode, else "<driver> CSI driver is not installed on the node".

The CSIDriver and VolumeAttachment objects are not in the Snapshot: the caller passes
``prevents_scheduling_if_missing(driver)`` and ``attachments(node_name)`` (attacher, PV name).

Left out: in-tree volumes migrated to CSI (a gcePersistentDisk/awsElasticBlockStore/... PV or
inline volume, counted upstream under its CSI driver with a translated handle, is not
counted); only an unbound claim whose class names an in-tree provisioner is counted under
the CSI driver it migrated to, as upstream does when the node has a CSINode.

Same in 1.38. ``skip_deferred_resize`` is 1.37's alpha
InPlacePodVerticalScalingSchedulerPreemption (off; not in 1.36): a pod whose resize is
deferred skips the plugin.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Final

from operators.api.core import Node, Pod
from operators.api.storage import CSINode, PersistentVolumeClaim
from operators.scheduling.plugins.volumebinding import (
    claim_class,
    not_for_pod,
    not_found,
    pod_claim,
    resize_deferred,
)
from operators.scheduling.snapshot import Snapshot

ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED: Final = "node(s) exceed max volume count"
_LOOKUP_PREFIX: Final = "looking up PVC "

#: In-tree provisioners whose claims count under a CSI driver once migrated (isCSIMigrationOn).
MIGRATED_PROVISIONERS: Final = {
    "kubernetes.io/aws-ebs": "ebs.csi.aws.com",
    "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
    "kubernetes.io/azure-disk": "disk.csi.azure.com",
    "kubernetes.io/cinder": "cinder.csi.openstack.org",
    "kubernetes.io/portworx-volume": "pxd.portworx.com",
}
#: In-tree provisioners that can migrate but whose migration this plugin does not count.
_UNCOUNTED_PROVISIONERS: Final = ("kubernetes.io/azure-file", "kubernetes.io/vsphere-volume")
#: Prefix of an unbound claim's handle (upstream: a random string per scheduler), so that
#: it never equals a real volume handle.
_PENDING: Final = "\x00pending"

#: (attacher, PV name) of a VolumeAttachment on a node.
Attachment = tuple[str, str | None]


class VolumeLimitsError(Exception):
    """Upstream's Error status from Filter: a claim without a name, a generic ephemeral
    volume's claim that another pod owns."""


def _never(_driver: str) -> bool:
    return False


def _none(_node: str) -> Iterable[Attachment]:
    return ()


@dataclasses.dataclass(frozen=True)
class VolumeLimitsState:
    """The knobs Filter needs (the pod's volumes are resolved per node, as upstream)."""

    volume_limit_scaling: bool = True
    prevents_scheduling_if_missing: Callable[[str], bool] = _never
    attachments: Callable[[str], Iterable[Attachment]] = _none


def pre_filter(
    pod: Pod,
    snapshot: Snapshot,
    *,
    volume_limit_scaling: bool = True,
    prevents_scheduling_if_missing: Callable[[str], bool] = _never,
    attachments: Callable[[str], Iterable[Attachment]] = _none,
    skip_deferred_resize: bool = False,
) -> VolumeLimitsState | None:
    """None (Skip) unless the pod has a claim-backed volume."""
    volumes = pod.spec.volumes
    if not volumes:
        return None
    if skip_deferred_resize and resize_deferred(pod):
        return None
    if not any(v.persistent_volume_claim is not None or v.ephemeral is not None for v in volumes):
        return None
    return VolumeLimitsState(
        volume_limit_scaling=volume_limit_scaling,
        prevents_scheduling_if_missing=prevents_scheduling_if_missing,
        attachments=attachments,
    )


def filter(state: VolumeLimitsState, pod: Pod, node: Node, snapshot: Snapshot) -> str | None:
    """The node's reason: a claim of the pod missing (``looking up PVC ns/x: ...``, which
    no preemption fixes), a required driver missing, or a driver's count exceeded.

    Raises VolumeLimitsError where upstream's Filter returns an Error status.
    """
    if not pod.spec.volumes:
        return None
    node_name = node.metadata.name or ""
    csi_node = snapshot.storage.csi_nodes.get(node_name)
    new: dict[str, str] = {}
    missing = _attachable(pod, csi_node, snapshot, new, new_pod=True)
    if missing is not None:
        return missing
    if not new:
        return None
    if state.volume_limit_scaling:
        for driver in dict.fromkeys(new.values()):
            if not _driver_installed(driver, csi_node, state):
                return f"{driver} CSI driver is not installed on the node"
    limits = volume_limits(csi_node)
    if not limits:
        return None

    attached: dict[str, str] = {}
    for existing in snapshot.pods_on(node_name):
        _attachable(existing, csi_node, snapshot, attached, new_pod=False)
    counts: dict[str, int] = {}
    for unique, driver in attached.items():
        new.pop(unique, None)  # a volume already on the node is not attached again
        counts[driver] = counts.get(driver, 0) + 1
    for unique, driver in _attached_by_api(state, node_name, snapshot).items():
        if unique not in attached:
            counts[driver] = counts.get(driver, 0) + 1

    wanted: dict[str, int] = {}
    for driver in new.values():
        wanted[driver] = wanted.get(driver, 0) + 1
    for driver, count in wanted.items():
        limit = limits.get(driver)
        if limit is not None and counts.get(driver, 0) + count > limit:
            return ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED
    return None


def resolvable(reason: str) -> bool:
    """A missing claim of the pod is UnschedulableAndUnresolvable; a missing driver or an
    exceeded count are not (evicting pods frees slots)."""
    return not reason.startswith(_LOOKUP_PREFIX)


def volume_limits(csi_node: CSINode | None) -> dict[str, int]:
    """getVolumeLimits: the drivers of the CSINode that report a count (others: no limit)."""
    if csi_node is None:
        return {}
    return {
        d.name or "": d.allocatable.count
        for d in csi_node.spec.drivers
        if d.allocatable is not None and d.allocatable.count is not None
    }


def _driver_installed(driver: str, csi_node: CSINode | None, state: VolumeLimitsState) -> bool:
    """checkCSIDriverOnNode: only a driver that opts in must be in the node's CSINode."""
    if not state.prevents_scheduling_if_missing(driver):
        return True
    if csi_node is None:
        return False
    return any(d.name == driver for d in csi_node.spec.drivers)


def _attachable(
    pod: Pod,
    csi_node: CSINode | None,
    snapshot: Snapshot,
    result: dict[str, str],
    *,
    new_pod: bool,
) -> str | None:
    """filterAttachableVolumes: the pod's CSI volumes into ``result`` (unique name ->
    driver); for the pod being scheduled, the reason when one of its claims is missing."""
    namespace = pod.metadata.namespace or ""
    for volume in pod.spec.volumes:
        ref = pod_claim(pod, volume)
        if ref is None:
            continue  # inline volumes: only migrated in-tree ones count upstream (left out)
        name, ephemeral = ref
        if not name:
            raise VolumeLimitsError("PersistentVolumeClaim had no name")
        pvc = snapshot.storage.claims.get(f"{namespace}/{name}")
        if pvc is None:
            if new_pod:
                lookup = not_found("persistentvolumeclaim", name)
                return f"{_LOOKUP_PREFIX}{namespace}/{name}: {lookup}"
            continue  # not counted: it may not belong to the running pod
        if ephemeral and (foreign := not_for_pod(pod, pvc)) is not None:
            raise VolumeLimitsError(foreign)
        driver, handle = _driver_info(pvc, csi_node, snapshot)
        if driver and handle:
            result[f"{driver}/{handle}"] = driver
    return None


def _driver_info(
    pvc: PersistentVolumeClaim, csi_node: CSINode | None, snapshot: Snapshot
) -> tuple[str, str]:
    """getCSIDriverInfo: (driver, handle) of the claim's PV, else of its class."""
    pv_name = pvc.spec.volume_name or ""
    pv = snapshot.storage.volumes.get(pv_name) if pv_name else None
    if pv is None:
        return _driver_info_from_class(pvc, csi_node, snapshot)
    csi = pv.spec.source("csi")
    if csi is None:
        return "", ""  # in-tree PV: counted upstream once migrated (left out)
    return str(csi.get("driver") or ""), str(csi.get("volumeHandle") or "")


def _driver_info_from_class(
    pvc: PersistentVolumeClaim, csi_node: CSINode | None, snapshot: Snapshot
) -> tuple[str, str]:
    """getCSIDriverInfoFromSC: the class's provisioner and a handle unique to the claim."""
    class_name = claim_class(pvc)
    if not class_name:
        return "", ""  # immediate binding: the claim is bound before scheduling
    cls = snapshot.storage.classes.get(class_name)
    if cls is None:
        return "", ""
    handle = f"{_PENDING}-{pvc.metadata.namespace or ''}/{pvc.metadata.name or ''}"
    provisioner = cls.provisioner or ""
    if provisioner in MIGRATED_PROVISIONERS:
        if csi_node is None:
            return "", ""
        return MIGRATED_PROVISIONERS[provisioner], handle
    if provisioner in _UNCOUNTED_PROVISIONERS:
        return "", ""
    return provisioner, handle


def _attached_by_api(
    state: VolumeLimitsState, node_name: str, snapshot: Snapshot
) -> Mapping[str, str]:
    """getNodeVolumeAttachmentInfo: the node's VolumeAttachments of CSI PVs."""
    out: dict[str, str] = {}
    for attacher, pv_name in state.attachments(node_name):
        if not attacher or pv_name is None:
            continue
        pv = snapshot.storage.volumes.get(pv_name)
        csi = pv.spec.source("csi") if pv is not None else None
        if csi is None:
            continue
        out[f"{attacher}/{csi.get('volumeHandle') or ''}"] = attacher
    return out
