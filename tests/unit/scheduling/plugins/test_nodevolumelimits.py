"""NodeVolumeLimits: upstream's csi_test.go tables (TestCSILimits without the in-tree
migration cases, TestVolumeLimitScalingGate), then preemption by a snapshot without the
victims, the in-tree provisioner of an unbound claim and the deferred-resize switch."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from operators.api.core import Pod
from operators.api.storage import (
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from operators.scheduling.plugins import nodevolumelimits
from operators.scheduling.plugins.nodevolumelimits import (
    ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,
    Attachment,
    VolumeLimitsError,
)
from operators.scheduling.snapshot import Placed, Storage, snapshot_of
from tests.unit.scheduling.builders import node

J = dict[str, Any]
NS = "test"
NODE = "node-for-max-pd-test-1"
EBS = "ebs.csi.aws.com"
GCE = "pd.csi.storage.gke.io"
SC = "csi-sc"
SKIP = "skip"
EXCEEDED = ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED


def pod(*claims: str, ephemeral: Sequence[str] = (), name: str = "p", uid: str = "u") -> Pod:
    volumes: list[J] = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)
    ]
    volumes += [{"name": e, "ephemeral": {}} for e in ephemeral]
    return Pod.load(
        {
            "metadata": {"name": name, "namespace": NS, "uid": uid},
            "spec": {"volumes": volumes, "containers": [{"name": "c"}]},
        }
    )


def claim(
    name: str, volume: str = "", cls: str | None = None, owner: str | None = None
) -> PersistentVolumeClaim:
    spec: J = {}
    if volume:
        spec["volumeName"] = volume
    if cls is not None:
        spec["storageClassName"] = cls
    meta: J = {"name": name, "namespace": NS}
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "abc", "uid": owner, "controller": True}
        ]
    return PersistentVolumeClaim.load({"metadata": meta, "spec": spec})


def fake_storage(
    drivers: Sequence[str], extra: Sequence[PersistentVolumeClaim] = ()
) -> tuple[dict[str, PersistentVolume], dict[str, PersistentVolumeClaim]]:
    """getFakeCSIPVLister and getFakeCSIPVCLister: csi-<driver>-<0..3> bound PVs, csi-4
    unbound of the class, csi-5 without a class, csi-6 of a missing PV."""
    pvs: dict[str, PersistentVolume] = {}
    pvcs = [*extra]
    for driver in drivers:
        for j in range(4):
            name = f"csi-{driver}-{j}"
            pvs[name] = PersistentVolume.load(
                {
                    "metadata": {"name": name},
                    "spec": {"csi": {"driver": driver, "volumeHandle": name}},
                }
            )
            pvcs.append(claim(name, volume=name))
    pvcs += [claim("csi-4", cls=SC), claim("csi-5"), claim("csi-6", "missing-in-action", SC)]
    return pvs, {f"{NS}/{c.metadata.name}": c for c in pvcs}


def csi_node(source: str, limit: int, drivers: Sequence[str]) -> CSINode | None:
    """getNodeWithPodAndVolumeLimits' CSINode: with counts, without, or without drivers."""
    if source == "":
        return None
    entries: list[J] = []
    if source != "no-csi-driver":
        for driver in drivers:
            entry: J = {"name": driver, "nodeID": NODE}
            if source == "csinode":
                entry["allocatable"] = {"count": limit}
            entries.append(entry)
    return CSINode.load({"metadata": {"name": NODE}, "spec": {"drivers": entries}})


def run(
    incoming: Pod,
    existing: Sequence[Pod] = (),
    *,
    limit: int = 0,
    drivers: Sequence[str] = (EBS,),
    source: str = "csinode",
    extra: Sequence[PersistentVolumeClaim] = (),
    attached: int = 0,
    prevents: bool = False,
    scaling: bool = True,
    elsewhere: Sequence[Pod] = (),
) -> str | None:
    """PreFilter then Filter on the node: SKIP, or Filter's reason (None: fits)."""
    pvs, pvcs = fake_storage(drivers, extra)
    found = csi_node(source, limit, drivers)
    classes = {SC: StorageClass.load({"metadata": {"name": SC}, "provisioner": drivers[0]})}
    storage = Storage(
        claims=pvcs,
        volumes=pvs,
        classes=classes,
        csi_nodes={NODE: found} if found is not None else {},
    )
    placed: list[Placed] = [(NODE, p) for p in existing] + [("other", p) for p in elsewhere]
    snapshot = snapshot_of([node(NODE)], placed, storage=storage)

    def attachments(node_name: str) -> Iterable[Attachment]:
        """buildFakeClientWithVALister: VolumeAttachments of csi-<driver>-<j> on the node."""
        assert node_name == NODE
        return [(d, f"csi-{d}-{j}") for d in drivers for j in range(attached)]

    state = nodevolumelimits.pre_filter(
        incoming,
        snapshot,
        volume_limit_scaling=scaling,
        prevents_scheduling_if_missing=lambda driver: prevents and driver == EBS,
        attachments=attachments,
    )
    if state is None:
        return SKIP
    return nodevolumelimits.filter(state, incoming, node(NODE), snapshot)


running = pod("csi-ebs.csi.aws.com-3", name="running")
pending = pod("csi-4", name="pending")
unbound2 = pod("csi-4", name="unbound2")
missing_pv = pod("csi-6", name="missing-pv")
no_sc = pod("csi-5", name="no-sc")
gce_two = pod("csi-pd.csi.storage.gke.io-1", "csi-pd.csi.storage.gke.io-2", name="gce-two")
ebs_one = pod("csi-ebs.csi.aws.com-0", name="ebs-one")
ebs_two = pod("csi-ebs.csi.aws.com-1", "csi-ebs.csi.aws.com-2", name="ebs-two")
ephemeral_pod = pod(ephemeral=["xyz"], name="abc", uid="12345")
ephemeral_claim = claim("abc-xyz", cls=SC, owner="12345")
conflicting_claim = claim("abc-xyz", cls=SC)
ephemeral_two = pod(ephemeral=["x", "y"], name="abc", uid="12345II")
claim_x = claim("abc-x", cls=SC, owner="12345II")
claim_y = claim("abc-y", cls=SC, owner="12345II")
MISSING = 'looking up PVC test/abc-xyz: persistentvolumeclaim "abc-xyz" not found'
secrets_only = Pod.load(
    {
        "metadata": {"name": "s", "namespace": NS},
        "spec": {"volumes": [{"name": "c", "configMap": {}}, {"name": "s", "secret": {}}]},
    }
)


def with_secrets(volume: J) -> Pod:
    volumes = [{"name": "c", "configMap": {}}, {"name": "s", "secret": {}}, {"name": "v", **volume}]
    return Pod.load({"metadata": {"name": "abc", "namespace": NS}, "spec": {"volumes": volumes}})


CASES: list[tuple[str, Pod, Sequence[Pod], dict[str, Any], str | None]] = [
    (
        "should count VolumeAttachments towards volume limit when no pods exist",
        ebs_one,
        (),
        {"limit": 2, "attached": 2},
        EXCEEDED,
    ),
    (
        "should schedule pod when VolumeAttachments count does not exceed limit",
        ebs_one,
        (),
        {"limit": 2, "attached": 1},
        None,
    ),
    (
        "fits when node volume limit >= new pods CSI volume",
        ebs_one,
        (running, ebs_two),
        {"limit": 4},
        None,
    ),
    (
        "doesn't when node volume limit <= pods CSI volume",
        ebs_one,
        (running, ebs_two),
        {"limit": 2},
        EXCEEDED,
    ),
    (
        "should when driver does not support volume limits",
        ebs_one,
        (running, ebs_two),
        {"limit": 2, "source": "csinode-with-no-limit"},
        None,
    ),
    (
        "count pending PVCs towards volume limit <= pods CSI volume",
        ebs_one,
        (pending, ebs_two),
        {"limit": 2},
        EXCEEDED,
    ),
    (
        "count multiple pending pvcs towards volume limit >= pods CSI volume",
        ebs_one,
        (pending, unbound2, ebs_two),
        {"limit": 4},
        None,
    ),
    (
        "should count PVCs with invalid PV name but valid SC",
        ebs_one,
        (missing_pv, ebs_two),
        {"limit": 2},
        EXCEEDED,
    ),
    (
        "don't count pvcs with missing SC towards volume limit",
        ebs_one,
        (running, no_sc),
        {"limit": 2},
        None,
    ),
    (
        "count pvcs with the same type towards volume limit",
        ebs_one,
        (gce_two, ebs_two),
        {"limit": 2, "drivers": (EBS, GCE)},
        EXCEEDED,
    ),
    (
        "don't count pvcs with different type towards volume limit",
        gce_two,
        (ebs_two, running),
        {"limit": 2, "drivers": (EBS, GCE)},
        None,
    ),
    ("ephemeral volume missing", ephemeral_pod, (), {"source": "csinode-with-no-limit"}, MISSING),
    (
        "ephemeral volume unbound",
        ephemeral_pod,
        (),
        {"source": "csinode-with-no-limit", "extra": (ephemeral_claim,)},
        None,
    ),
    (
        "ephemeral doesn't when node volume limit <= pods CSI volume",
        ephemeral_pod,
        (running, ebs_two),
        {"limit": 2, "extra": (ephemeral_claim,)},
        EXCEEDED,
    ),
    (
        "ephemeral doesn't when node volume limit <= pods ephemeral CSI volume",
        ebs_one,
        (running, ephemeral_two),
        {"limit": 2, "extra": (claim_x, claim_y)},
        EXCEEDED,
    ),
    (
        "persistent doesn't when node volume limit <= pods ephemeral CSI volume + "
        "persistent volume",
        ebs_one,
        (running, ephemeral_pod, ebs_two),
        {"limit": 3, "extra": (ephemeral_claim,)},
        EXCEEDED,
    ),
    (
        "persistent okay when node volume limit > pods ephemeral CSI volume + persistent volume",
        ebs_one,
        (running, ephemeral_pod, ebs_two),
        {"limit": 5, "extra": (ephemeral_claim,)},
        None,
    ),
    (
        "skip Filter when the pod only uses secrets and configmaps",
        secrets_only,
        (),
        {"limit": 2},
        SKIP,
    ),
    (
        "don't skip Filter when the pod has pvcs",
        with_secrets({"persistentVolumeClaim": {"claimName": "csi-ebs.csi.aws.com-0"}}),
        (),
        {"limit": 2},
        None,
    ),
    (
        "don't skip Filter when the pod has ephemeral volumes",
        with_secrets({"name": "xyz", "ephemeral": {}}),
        (),
        {"source": "csinode-with-no-limit"},
        MISSING,
    ),
    # VolumeLimitScaling (TestVolumeLimitScalingGate)
    (
        "gate enabled - allow scheduling when CSIDriver exists but "
        "PreventPodSchedulingIfMissing is not set",
        ebs_one,
        (),
        {"source": "no-csi-driver"},
        None,
    ),
    (
        "gate enabled - fail when driver not installed and PreventPodSchedulingIfMissing is true",
        ebs_one,
        (),
        {"source": "no-csi-driver", "prevents": True},
        f"{EBS} CSI driver is not installed on the node",
    ),
    (
        "gate disabled - skip driver presence check (regardless of CSIDriver presence)",
        ebs_one,
        (),
        {"source": "no-csi-driver", "prevents": True, "scaling": False},
        None,
    ),
    (
        "gate enabled - driver installed within limit",
        ebs_one,
        (),
        {"limit": 2, "prevents": True},
        None,
    ),
    (
        "gate enabled - allow scheduling when CSIDriver object missing",
        ebs_one,
        (),
        {"source": "no-csi-driver"},
        None,
    ),
    # beyond upstream's table
    (
        "no CSINode: the required driver is missing",
        ebs_one,
        (),
        {"source": "", "prevents": True},
        f"{EBS} CSI driver is not installed on the node",
    ),
    ("no CSINode: no limits", ebs_one, (running, ebs_two), {"source": ""}, None),
    (
        "the pod's own volume already on the node is not counted again",
        ebs_one,
        (ebs_one, running),
        {"limit": 2},
        None,
    ),
    (
        "attachments of the pods' volumes count once, of the new pod's volume again",
        ebs_one,
        (ebs_two,),
        {"limit": 3, "attached": 3},
        EXCEEDED,
    ),
    (
        "pods on other nodes do not count",
        ebs_one,
        (),
        {"limit": 1, "elsewhere": (ebs_two, running)},
        None,
    ),
]


@pytest.mark.parametrize(
    ("incoming", "existing", "options", "want"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_csi_limits(
    incoming: Pod, existing: Sequence[Pod], options: dict[str, Any], want: str | None
) -> None:
    assert run(incoming, existing, **options) == want


def test_ephemeral_volume_not_owned_is_an_error() -> None:
    with pytest.raises(
        VolumeLimitsError,
        match=re.escape("PVC test/abc-xyz was not created for pod test/abc (pod is not owner)"),
    ):
        run(ephemeral_pod, source="csinode-with-no-limit", extra=(conflicting_claim,))


def test_missing_claim_is_unresolvable_the_rest_resolvable() -> None:
    assert not nodevolumelimits.resolvable(MISSING)
    assert nodevolumelimits.resolvable(EXCEEDED)
    assert nodevolumelimits.resolvable(f"{EBS} CSI driver is not installed on the node")


def test_preemption_frees_slots() -> None:
    """The caller hands a snapshot without the victims: their volumes no longer count."""
    assert run(ebs_one, (running, ebs_two), limit=2) == EXCEEDED
    assert run(ebs_one, (running,), limit=2) is None


@pytest.mark.parametrize(
    ("provisioner", "source", "want"),
    [
        ("kubernetes.io/aws-ebs", "csinode", EXCEEDED),  # counted under ebs.csi.aws.com
        ("kubernetes.io/aws-ebs", "", None),  # no CSINode: migration is off
        ("kubernetes.io/vsphere-volume", "csinode", None),  # migratable, not counted here
    ],
)
def test_unbound_claim_of_in_tree_provisioner(
    provisioner: str, source: str, want: str | None
) -> None:
    pvs, pvcs = fake_storage([EBS])
    pvcs[f"{NS}/intree"] = claim("intree", cls="intree")
    classes = {
        "intree": StorageClass.load({"metadata": {"name": "intree"}, "provisioner": provisioner})
    }
    found = csi_node(source, 1, [EBS])
    storage = Storage(
        claims=pvcs, volumes=pvs, classes=classes, csi_nodes={NODE: found} if found else {}
    )
    snapshot = snapshot_of([node(NODE)], [(NODE, ebs_one)], storage=storage)
    incoming = pod("intree")
    state = nodevolumelimits.pre_filter(incoming, snapshot)
    assert state is not None
    assert nodevolumelimits.filter(state, incoming, node(NODE), snapshot) == want


def test_deferred_resize_skips() -> None:
    deferred = Pod.load(
        {
            "metadata": {"name": "p", "namespace": NS},
            "spec": {"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "x"}}]},
            "status": {
                "conditions": [{"type": "PodResizePending", "status": "True", "reason": "Deferred"}]
            },
        }
    )
    snapshot = snapshot_of([], [])
    assert nodevolumelimits.pre_filter(deferred, snapshot, skip_deferred_resize=True) is None
    assert nodevolumelimits.pre_filter(deferred, snapshot) is not None


def test_pod_without_volumes_is_skipped() -> None:
    assert nodevolumelimits.pre_filter(pod(), snapshot_of([], [])) is None
