"""VolumeRestrictions: upstream's volume_restrictions_test.go tables (GCE PD, AWS EBS, RBD,
iSCSI conflicts; ReadWriteOncePod access mode conflicts), then read-only mounts, preemption
by a snapshot without the victims and the deferred-resize switch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from operators.api.core import Pod
from operators.api.storage import PersistentVolumeClaim
from operators.scheduling.plugins import Unresolvable, volumerestrictions
from operators.scheduling.plugins.volumerestrictions import (
    ERR_REASON_DISK_CONFLICT,
    ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,
)
from operators.scheduling.snapshot import Placed, Storage, snapshot_of
from tests.unit.scheduling.builders import node

J = dict[str, Any]
NS = "default"
NODE = "node-1"
SKIP = "skip"

GCE, GCE2 = {"gcePersistentDisk": {"pdName": "foo"}}, {"gcePersistentDisk": {"pdName": "bar"}}
AWS, AWS2 = (
    {"awsElasticBlockStore": {"volumeID": "foo"}},
    {"awsElasticBlockStore": {"volumeID": "bar"}},
)
RBD = {"rbd": {"monitors": ["a", "b"], "pool": "foo", "image": "bar", "fsType": "ext4"}}
RBD2 = {"rbd": {"monitors": ["c", "d"], "pool": "foo", "image": "bar", "fsType": "ext4"}}
ISCSI = {
    "iscsi": {
        "targetPortal": "127.0.0.1:3260",
        "iqn": "iqn.2016-12.server:storage.target01",
        "fsType": "ext4",
        "lun": 0,
    }
}
ISCSI2 = {"iscsi": {**ISCSI["iscsi"], "iqn": "iqn.2017-12.server:storage.target01"}}


def pod(*volumes: J, name: str = "p", conditions: Sequence[J] = ()) -> Pod:
    named = [{"name": f"v{i}", **v} for i, v in enumerate(volumes)]
    return Pod.load(
        {
            "metadata": {"name": name, "namespace": NS, "uid": name},
            "spec": {"volumes": named, "containers": [{"name": "c"}]},
            "status": {"conditions": list(conditions)},
        }
    )


def claim_volume(name: str) -> J:
    return {"persistentVolumeClaim": {"claimName": name}}


def read_only(volume: J) -> J:
    ((kind, source),) = volume.items()
    return {kind: {**source, "readOnly": True}}


def pvc(name: str, *modes: str) -> PersistentVolumeClaim:
    return PersistentVolumeClaim.load(
        {"metadata": {"name": name, "namespace": NS}, "spec": {"accessModes": list(modes)}}
    )


def run(
    incoming: Pod,
    on_node: Sequence[Pod] = (),
    claims: Sequence[PersistentVolumeClaim] = (),
    elsewhere: Sequence[Pod] = (),
) -> str | None:
    """PreFilter then Filter on NODE holding ``on_node``: SKIP, PreFilter's message, or the
    Filter reason (None: fits)."""
    placed: list[Placed] = [(NODE, p) for p in on_node] + [("node-2", p) for p in elsewhere]
    storage = Storage(claims={f"{NS}/{c.metadata.name}": c for c in claims})
    snapshot = snapshot_of([node(NODE), node("node-2")], placed, storage=storage)
    state = volumerestrictions.pre_filter(incoming, snapshot)
    if state is None:
        return SKIP
    if isinstance(state, Unresolvable):
        return state.message
    return volumerestrictions.filter(state, incoming, node(NODE), snapshot)


@pytest.mark.parametrize(
    ("same", "other"),
    [(GCE, GCE2), (AWS, AWS2), (RBD, RBD2), (ISCSI, ISCSI2)],
    ids=["gce", "aws", "rbd", "iscsi"],
)
@pytest.mark.parametrize(
    ("case", "want"),
    [
        ("nothing", SKIP),
        ("one state", SKIP),
        ("same state", ERR_REASON_DISK_CONFLICT),
        ("different state", None),
    ],
)
def test_disk_conflicts(same: J, other: J, case: str, want: str | None) -> None:
    """TestGCEDiskConflicts, TestAWSDiskConflicts, TestRBDDiskConflicts,
    TestISCSIDiskConflicts."""
    incoming, existing = {
        "nothing": (pod(), []),
        "one state": (pod(), [pod(same, name="e")]),
        "same state": (pod(same), [pod(same, name="e")]),
        "different state": (pod(other), [pod(same, name="e")]),
    }[case]
    assert run(incoming, existing) == want


def test_volume_without_restriction_skips() -> None:
    assert run(pod({"emptyDir": {}})) == SKIP


@pytest.mark.parametrize(
    ("mine", "theirs", "want"),
    [
        pytest.param(read_only(GCE), read_only(GCE), None, id="gce both read-only"),
        pytest.param(read_only(GCE), GCE, ERR_REASON_DISK_CONFLICT, id="gce one writer"),
        pytest.param(read_only(AWS), read_only(AWS), ERR_REASON_DISK_CONFLICT, id="aws always"),
        pytest.param(read_only(ISCSI), read_only(ISCSI), None, id="iscsi both read-only"),
        pytest.param(ISCSI, read_only(ISCSI), ERR_REASON_DISK_CONFLICT, id="iscsi one writer"),
        pytest.param(read_only(RBD), read_only(RBD), None, id="rbd both read-only"),
        pytest.param(
            {"rbd": {**RBD["rbd"], "monitors": ["b", "z"]}},
            RBD,
            ERR_REASON_DISK_CONFLICT,
            id="rbd one shared monitor",
        ),
        pytest.param({"rbd": {**RBD["rbd"], "pool": "other"}}, RBD, None, id="rbd another pool"),
        pytest.param(GCE, AWS, None, id="different kinds"),
    ],
)
def test_read_only_mounts(mine: J, theirs: J, want: str | None) -> None:
    assert run(pod(mine), [pod(theirs, name="e")]) == want


def test_disk_on_another_node_does_not_conflict() -> None:
    assert run(pod(GCE), elsewhere=[pod(GCE, name="e")]) is None


RWOP1 = pvc("claim-with-rwop-1", "ReadWriteOncePod")
RWOP2 = pvc("claim-with-rwop-2", "ReadWriteOncePod")
RWX = pvc("claim-with-rwx", "ReadWriteMany")
with_one = pod(claim_volume("claim-with-rwop-1"), name="pod-with-one-pvc")
with_two = pod(claim_volume("claim-with-rwop-1"), claim_volume("claim-with-rwop-2"), name="two")
with_rwx = pod(claim_volume("claim-with-rwx"), name="pod-with-rwx")


@pytest.mark.parametrize(
    ("incoming", "existing", "claims", "want"),
    [
        pytest.param(pod(), [], [], SKIP, id="nothing"),
        pytest.param(
            with_one,
            [],
            [],
            'persistentvolumeclaim "claim-with-rwop-1" not found',
            id="failed to get PVC",
        ),
        pytest.param(with_one, [with_rwx], [RWOP1, RWX], SKIP, id="no access mode conflict"),
        pytest.param(
            pod(claim_volume("claim-with-rwop-1"), name="pod-with-one-conflict"),
            [with_one, with_rwx],
            [RWOP1, RWX],
            ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,
            id="access mode conflict, unschedulable",
        ),
        pytest.param(
            pod(claim_volume("claim-with-rwop-1"), claim_volume("claim-with-rwop-2"), name="c2"),
            [with_two, with_rwx],
            [RWOP1, RWOP2, RWX],
            ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,
            id="two conflicts, unschedulable",
        ),
    ],
)
def test_access_mode_conflicts(
    incoming: Pod, existing: list[Pod], claims: list[PersistentVolumeClaim], want: str | None
) -> None:
    assert run(incoming, existing, claims) == want


def test_read_write_once_pod_in_use_on_another_node_refuses_every_node() -> None:
    """The user may run anywhere: every node refuses, and preemption of it can help."""
    got = run(
        with_one, claims=[RWOP1], elsewhere=[pod(claim_volume("claim-with-rwop-1"), name="u")]
    )
    assert got == ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT
    assert volumerestrictions.resolvable(got)


def test_preemption_frees_read_write_once_pod() -> None:
    """The caller hands a snapshot without the victim: the claim is free again."""
    assert run(with_one, [], [RWOP1]) == SKIP


def test_rwop_claim_of_another_namespace_is_not_in_use() -> None:
    other = Pod.load(
        {
            "metadata": {"name": "o", "namespace": "other"},
            "spec": {"volumes": [{"name": "v", **claim_volume("claim-with-rwop-1")}]},
        }
    )
    assert run(with_one, [other], [RWOP1]) == SKIP


def test_disk_conflict_comes_before_rwop_conflict() -> None:
    incoming = pod(GCE, claim_volume("claim-with-rwop-1"))
    got = run(incoming, [pod(GCE, claim_volume("claim-with-rwop-1"), name="e")], [RWOP1])
    assert got == ERR_REASON_DISK_CONFLICT
    assert run(incoming, [pod(claim_volume("claim-with-rwop-1"), name="e")], [RWOP1]) == (
        ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT
    )


def test_ephemeral_volumes_are_not_looked_up() -> None:
    assert run(pod({"ephemeral": {}})) == SKIP


def test_deferred_resize_skips() -> None:
    deferred = pod(
        GCE, conditions=[{"type": "PodResizePending", "status": "True", "reason": "Deferred"}]
    )
    snapshot = snapshot_of([node(NODE)], [(NODE, pod(GCE, name="e"))])
    assert volumerestrictions.pre_filter(deferred, snapshot, skip_deferred_resize=True) is None
    assert volumerestrictions.pre_filter(deferred, snapshot) is not None
