"""VolumeZone: upstream's volume_zone_test.go tables (TestSingleZone, TestMultiZone,
TestWithBinding), then the label parsing and the deferred-resize switch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from operators.api.core import Node, Pod
from operators.api.storage import PersistentVolume, PersistentVolumeClaim, StorageClass
from operators.scheduling.plugins import Unresolvable, volumezone
from operators.scheduling.plugins.volumezone import ERR_REASON_CONFLICT
from operators.scheduling.snapshot import Storage, snapshot_of

J = dict[str, Any]
NS = "default"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
SKIP = "skip"


def pv(name: str, **labels: str) -> PersistentVolume:
    return PersistentVolume.load({"metadata": {"name": name, "labels": labels}})


def pvc(name: str, volume: str = "", cls: str | None = None) -> PersistentVolumeClaim:
    spec: J = {}
    if volume:
        spec["volumeName"] = volume
    if cls is not None:
        spec["storageClassName"] = cls
    return PersistentVolumeClaim.load({"metadata": {"name": name, "namespace": NS}, "spec": spec})


def sc(name: str, mode: str | None) -> StorageClass:
    obj: J = {"metadata": {"name": name}}
    if mode is not None:
        obj["volumeBindingMode"] = mode
    return StorageClass.load(obj)


def pod(*claims: str, conditions: Sequence[J] = ()) -> Pod:
    volumes = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)
    ]
    return Pod.load(
        {
            "metadata": {"name": "pod_1", "namespace": NS},
            "spec": {"volumes": volumes},
            "status": {"conditions": list(conditions)},
        }
    )


def node(**labels: str) -> Node:
    return Node.load({"metadata": {"name": "host1", "labels": labels}})


def run(
    incoming: Pod,
    host: Node,
    pvs: Sequence[PersistentVolume],
    pvcs: Sequence[PersistentVolumeClaim],
    classes: Mapping[str, StorageClass] | None = None,
) -> str | None:
    """PreFilter then Filter: SKIP, PreFilter's message, or Filter's reason (None: fits)."""
    storage = Storage(
        claims={f"{NS}/{c.metadata.name}": c for c in pvcs},
        volumes={v.metadata.name or "": v for v in pvs},
        classes=classes or {},
    )
    snapshot = snapshot_of([host], [], storage=storage)
    state = volumezone.pre_filter(incoming, snapshot)
    if state is None:
        return SKIP
    if isinstance(state, Unresolvable):
        return state.message
    return volumezone.filter(state, incoming, host, snapshot)


SINGLE_PVS = [
    pv("Vol_1", **{BETA_ZONE: "us-west1-a"}),
    pv("Vol_2", **{BETA_REGION: "us-west1", "uselessLabel": "none"}),
    pv("Vol_3", **{BETA_REGION: "us-west1"}),
    pv("Vol_Stable_1", **{ZONE: "us-west1-a"}),
    pv("Vol_Stable_2", **{REGION: "us-west1", "uselessLabel": "none"}),
    pv("Vol_Stable_3", **{ZONE: "us-west1-a", REGION: "us-west1-a"}),
]
SINGLE_PVCS = [
    pvc("PVC_1", "Vol_1"),
    pvc("PVC_2", "Vol_2"),
    pvc("PVC_3", "Vol_3"),
    pvc("PVC_4", "Vol_not_exist"),
    pvc("PVC_Stable_1", "Vol_Stable_1"),
    pvc("PVC_Stable_2", "Vol_Stable_2"),
    pvc("PVC_Stable_3", "Vol_Stable_3"),
]


@pytest.mark.parametrize(
    ("incoming", "host", "want"),
    [
        pytest.param(pod(), node(**{BETA_ZONE: "us-west1-a"}), SKIP, id="pod without volume"),
        pytest.param(pod("PVC_1"), node(), None, id="node without labels"),
        pytest.param(
            pod("PVC_1"),
            node(**{BETA_ZONE: "us-west1-a", "uselessLabel": "none"}),
            None,
            id="beta zone label matched",
        ),
        pytest.param(
            pod("PVC_2"),
            node(**{BETA_REGION: "us-west1", "uselessLabel": "none"}),
            None,
            id="beta region label matched",
        ),
        pytest.param(
            pod("PVC_2"),
            node(**{BETA_REGION: "no_us-west1", "uselessLabel": "none"}),
            ERR_REASON_CONFLICT,
            id="beta region label doesn't match",
        ),
        pytest.param(
            pod("PVC_1"),
            node(**{BETA_ZONE: "no_us-west1-a", "uselessLabel": "none"}),
            ERR_REASON_CONFLICT,
            id="beta zone label doesn't match",
        ),
        pytest.param(
            pod("PVC_Stable_1"),
            node(**{ZONE: "us-west1-a", "uselessLabel": "none"}),
            None,
            id="zone label matched",
        ),
        pytest.param(
            pod("PVC_Stable_2"),
            node(**{REGION: "us-west1", "uselessLabel": "none"}),
            None,
            id="region label matched",
        ),
        pytest.param(
            pod("PVC_Stable_2"),
            node(**{REGION: "no_us-west1", "uselessLabel": "none"}),
            ERR_REASON_CONFLICT,
            id="region label doesn't match",
        ),
        pytest.param(
            pod("PVC_Stable_1"),
            node(**{ZONE: "no_us-west1-a", "uselessLabel": "none"}),
            ERR_REASON_CONFLICT,
            id="zone label doesn't match",
        ),
        pytest.param(
            pod("PVC_Stable_3"),
            node(**{ZONE: "us-west1-a"}),
            ERR_REASON_CONFLICT,
            id="pv with zone and region, node with only zone",
        ),
        pytest.param(
            pod("PVC_Stable_1"),
            node(**{BETA_ZONE: "us-west1-a"}),
            ERR_REASON_CONFLICT,
            id="pv with zone,node with beta zone",
        ),
        pytest.param(
            pod("PVC_1"),
            node(**{ZONE: "us-west1-a"}),
            None,
            id="pv with beta label,node with ga label, matched",
        ),
        pytest.param(
            pod("PVC_1"),
            node(**{ZONE: "us-west1-b"}),
            ERR_REASON_CONFLICT,
            id="pv with beta label,node with ga label, don't match",
        ),
        pytest.param(
            pod("PVC_4"),
            node(**{ZONE: "us-west1-a"}),
            'persistentvolume "Vol_not_exist" not found',
            id="bound pv missing",
        ),
        pytest.param(
            pod("PVC_5"),
            node(),
            'persistentvolumeclaim "PVC_5" not found',
            id="pvc missing",
        ),
        pytest.param(pod(""), node(), "PersistentVolumeClaim had no name", id="pvc without name"),
    ],
)
def test_single_zone(incoming: Pod, host: Node, want: str | None) -> None:
    assert run(incoming, host, SINGLE_PVS, SINGLE_PVCS) == want


MULTI_PVS = [
    pv("Vol_1", **{BETA_ZONE: "us-west1-a"}),
    pv("Vol_2", **{BETA_ZONE: "us-west1-b", "uselessLabel": "none"}),
    pv("Vol_3", **{BETA_ZONE: "us-west1-c__us-west1-a"}),
    pv("Vol_Stable_1", **{ZONE: "us-west1-a"}),
    pv("Vol_Stable_2", **{ZONE: "us-west1-c__us-west1-a"}),
]
MULTI_PVCS = [
    pvc("PVC_1", "Vol_1"),
    pvc("PVC_2", "Vol_2"),
    pvc("PVC_3", "Vol_3"),
    pvc("PVC_4", "Vol_not_exist"),
    pvc("PVC_Stable_1", "Vol_Stable_1"),
    pvc("PVC_Stable_2", "Vol_Stable_2"),
]


@pytest.mark.parametrize(
    ("incoming", "host", "want"),
    [
        pytest.param(pod("PVC_3"), node(), None, id="node without labels"),
        pytest.param(
            pod("PVC_3"),
            node(**{BETA_ZONE: "us-west1-a", "uselessLabel": "none"}),
            None,
            id="beta zone label matched",
        ),
        pytest.param(
            pod("PVC_1"),
            node(**{BETA_ZONE: "us-west1-b", "uselessLabel": "none"}),
            ERR_REASON_CONFLICT,
            id="beta zone label doesn't match",
        ),
        pytest.param(
            pod("PVC_Stable_2"),
            node(**{ZONE: "us-west1-a", "uselessLabel": "none"}),
            None,
            id="zone label matched",
        ),
        pytest.param(
            pod("PVC_Stable_1"),
            node(**{ZONE: "us-west1-b", "uselessLabel": "none"}),
            ERR_REASON_CONFLICT,
            id="zone label doesn't match",
        ),
        pytest.param(
            pod("PVC_1", "PVC_2"),
            node(**{BETA_ZONE: "us-west1-a"}),
            ERR_REASON_CONFLICT,
            id="every pv must match",
        ),
    ],
)
def test_multi_zone(incoming: Pod, host: Node, want: str | None) -> None:
    assert run(incoming, host, MULTI_PVS, MULTI_PVCS) == want


BINDING_CLASSES = {
    "Class_Immediate": sc("Class_Immediate", None),  # upstream's fixture leaves the mode unset
    "Class_Wait": sc("Class_Wait", "WaitForFirstConsumer"),
    "Class_Set_Immediate": sc("Class_Set_Immediate", "Immediate"),
}
BINDING_PVCS = [
    pvc("PVC_1", "Vol_1"),
    pvc("PVC_NoSC", cls="Class_0"),
    pvc("PVC_EmptySC"),
    pvc("PVC_WaitSC", cls="Class_Wait"),
    pvc("PVC_ImmediateSC", cls="Class_Immediate"),
    pvc("PVC_SetImmediateSC", cls="Class_Set_Immediate"),
]


@pytest.mark.parametrize(
    ("claim", "want"),
    [
        pytest.param("PVC_1", None, id="label zone failure domain matched"),
        pytest.param(
            "PVC_EmptySC",
            "PersistentVolumeClaim had no pv name and storageClass name",
            id="unbound volume empty storage class",
        ),
        # the informer lister's singular resource (upstream's fake lister says "storageclasses")
        pytest.param(
            "PVC_NoSC",
            'storageclass.storage.k8s.io "Class_0" not found',
            id="unbound volume no storage class",
        ),
        pytest.param(
            "PVC_ImmediateSC",
            'VolumeBindingMode not set for StorageClass "Class_Immediate"',
            id="unbound volume immediate binding mode",
        ),
        pytest.param("PVC_WaitSC", SKIP, id="unbound volume wait binding mode"),
        pytest.param(
            "PVC_SetImmediateSC", "PersistentVolume had no name", id="unbound immediate claim"
        ),
    ],
)
def test_with_binding(claim: str, want: str | None) -> None:
    host = node(**{BETA_ZONE: "us-west1-a", "uselessLabel": "none"})
    pvs = [pv("Vol_1", **{BETA_ZONE: "us-west1-a"})]
    assert run(pod(claim), host, pvs, BINDING_PVCS, BINDING_CLASSES) == want


def test_unbound_delayed_claim_is_skipped_but_bound_one_checked() -> None:
    host = node(**{BETA_ZONE: "us-west1-b"})
    pvs = [pv("Vol_1", **{BETA_ZONE: "us-west1-a"})]
    got = run(pod("PVC_WaitSC", "PVC_1"), host, pvs, BINDING_PVCS, BINDING_CLASSES)
    assert got == ERR_REASON_CONFLICT


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("us-west1-a", {"us-west1-a"}),
        (" us-west1-a__us-west1-b ", {"us-west1-a", "us-west1-b"}),
        ("us-west1-a__", None),  # an empty zone: the label is ignored
        ("", None),
    ],
)
def test_zone_label_lists(value: str, want: set[str] | None) -> None:
    topologies = volumezone.pv_topologies(pv("v", **{ZONE: value}))
    assert (topologies[0].values if topologies else None) == want


def test_ephemeral_volumes_are_not_checked() -> None:
    incoming = Pod.load(
        {
            "metadata": {"name": "p", "namespace": NS},
            "spec": {"volumes": [{"name": "e", "ephemeral": {}}]},
        }
    )
    assert run(incoming, node(), [], []) == SKIP


def test_deferred_resize_skips() -> None:
    deferred = pod(
        "PVC_1", conditions=[{"type": "PodResizePending", "status": "True", "reason": "Deferred"}]
    )
    snapshot = snapshot_of([], [], storage=Storage(claims={f"{NS}/PVC_1": SINGLE_PVCS[0]}))
    assert volumezone.pre_filter(deferred, snapshot, skip_deferred_resize=True) is None
    assert volumezone.pre_filter(deferred, snapshot) == Unresolvable(
        'persistentvolume "Vol_1" not found'
    )


def test_resolvable() -> None:
    assert not volumezone.resolvable(ERR_REASON_CONFLICT)
