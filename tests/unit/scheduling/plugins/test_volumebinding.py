"""VolumeBinding: upstream's binder_test.go (FindPodVolumes with and without provisioning,
capacity, assume, checkBindings), volume_binding_test.go (the plugin's PreFilter, Filter and
Score) and scorer_test.go tables, then the release switches and the PreBind writes."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pytest

from operators.api.core import LabelSelector, Node, Pod
from operators.api.storage import (
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from operators.scheduling.plugins import Unresolvable, volumebinding
from operators.scheduling.plugins.volumebinding import (
    BIND_TIMEOUT,
    DEFAULT_SHAPE,
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
    UNBOUND_IMMEDIATE,
    Binding,
    PodVolumes,
    Provision,
    VolumeBindingError,
    VolumeBindingState,
)
from operators.scheduling.snapshot import Snapshot, Storage, snapshot_of

J = dict[str, Any]

NS = "testns"
NODE_KEY = "nodeKey"
HOSTNAME = "kubernetes.io/hostname"
PROVISIONER = "test-provisioner"
WAIT = "waitClass"
IMMEDIATE = "immediateClass"
WAIT_PROVISIONER = "waitClassWithProvisioner"
TOPO_MISMATCH = "topoMismatchClass"
UNBOUND, PREBOUND, BOUND, SELECTED_NODE = range(4)


# --- builders (binder_test.go's makeTestPVC, makeTestPV, makePod, makeNode) -----------------


def make_class(
    name: str,
    mode: str | None,
    provisioner: str | None = None,
    topology: Sequence[str] = (),
) -> StorageClass:
    obj: J = {"metadata": {"name": name}}
    if mode is not None:
        obj["volumeBindingMode"] = mode
    if provisioner is not None:
        obj["provisioner"] = provisioner
    if topology:
        obj["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": NODE_KEY, "values": list(topology)}]}
        ]
    return StorageClass.load(obj)


CLASSES = {
    c.metadata.name or "": c
    for c in (
        make_class(WAIT_PROVISIONER, "WaitForFirstConsumer", PROVISIONER, ("node1", "ref")),
        make_class(IMMEDIATE, "Immediate"),
        make_class(WAIT, "WaitForFirstConsumer", "kubernetes.io/no-provisioner"),
        make_class(TOPO_MISMATCH, "WaitForFirstConsumer", PROVISIONER, ("ref",)),
    )
}


def make_pvc(
    name: str,
    size: str,
    state: int = UNBOUND,
    pv_name: str = "",
    version: str = "1",
    cls: str | None = WAIT,
    node: str = "",
    namespace: str = NS,
) -> PersistentVolumeClaim:
    annotations: dict[str, str] = {}
    spec: J = {"resources": {"requests": {"storage": size}}, "volumeMode": "Filesystem"}
    if cls is not None:
        spec["storageClassName"] = cls
    if state == SELECTED_NODE:
        annotations["volume.kubernetes.io/selected-node"] = node
    if state == BOUND:
        annotations["pv.kubernetes.io/bind-completed"] = "yes"
    if state in (BOUND, PREBOUND):
        spec["volumeName"] = pv_name
    meta: J = {
        "name": name,
        "namespace": namespace,
        "uid": "pvc-uid",
        "resourceVersion": version,
        "annotations": annotations,
    }
    return PersistentVolumeClaim.load({"metadata": meta, "spec": spec})


def make_pv(
    name: str,
    node: str,
    capacity: str,
    version: str = "1",
    bound_to: PersistentVolumeClaim | None = None,
    cls: str = WAIT,
    affinity: Mapping[str, Sequence[str]] | None = None,
) -> PersistentVolume:
    spec: J = {"capacity": {"storage": capacity}, "storageClassName": cls}
    spec["volumeMode"] = "Filesystem"
    meta: J = {"name": name, "resourceVersion": version}
    if node:
        affinity = {NODE_KEY: [node]}
    if affinity is not None:
        exprs = [{"key": k, "operator": "In", "values": list(v)} for k, v in affinity.items()]
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": exprs}]}}
    if bound_to is not None:
        spec["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "apiVersion": "v1",
            "resourceVersion": bound_to.metadata.resource_version,
            "name": bound_to.metadata.name,
            "namespace": bound_to.metadata.namespace,
            "uid": bound_to.metadata.uid,
        }
        meta["annotations"] = {"pv.kubernetes.io/bound-by-controller": "yes"}
    return PersistentVolume.load({"metadata": meta, "spec": spec, "status": {"phase": "Available"}})


def make_pod(
    *claims: str,
    ephemeral: Sequence[str] = (),
    name: str = "test-pod",
    namespace: str = NS,
    uid: str = "pod-uid",
    conditions: Sequence[J] = (),
) -> Pod:
    volumes: list[J] = [
        {"name": f"vol{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)
    ]
    volumes += [{"name": e, "ephemeral": {}} for e in ephemeral]
    return Pod.load(
        {
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "spec": {"nodeName": "node1", "volumes": volumes, "containers": [{"name": "c"}]},
            "status": {"conditions": list(conditions)},
        }
    )


def make_node(name: str, **labels: str) -> Node:
    return Node.load({"metadata": {"name": name, "labels": {HOSTNAME: name, **labels}}})


def make_capacity(
    name: str, cls: str, node: str | None, capacity: str = "", maximum: str = ""
) -> CSIStorageCapacity:
    topology: J = {"matchLabels": {NODE_KEY: node}} if node is not None else {}
    obj: J = {"metadata": {"name": name}, "storageClassName": cls, "nodeTopology": topology}
    if capacity:
        obj["capacity"] = capacity
    if maximum:
        obj["maximumVolumeSize"] = maximum
    return CSIStorageCapacity.load(obj)


def generic_pvc(owned: bool) -> PersistentVolumeClaim:
    pvc = make_pvc("test-pod-test-volume", "1G", BOUND, "pv-bound", cls=IMMEDIATE)
    if owned:
        obj = pvc.dump()
        obj["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": "test-pod",
                "uid": "pod-uid",
                "controller": True,
            }
        ]
        return PersistentVolumeClaim.load(obj)
    return pvc


def storage(
    pvcs: Sequence[PersistentVolumeClaim] = (),
    pvs: Sequence[PersistentVolume] = (),
    capacities: Sequence[CSIStorageCapacity] = (),
    classes: Mapping[str, StorageClass] = CLASSES,
) -> Snapshot:
    return snapshot_of(
        [],
        [],
        storage=Storage(
            claims={f"{c.metadata.namespace}/{c.metadata.name}": c for c in pvcs},
            volumes={v.metadata.name or "": v for v in pvs},
            classes=classes,
            capacities=tuple(capacities),
        ),
    )


# binder_test.go's objects
unbound_pvc = make_pvc("unbound-pvc", "1G")
unbound_pvc2 = make_pvc("unbound-pvc2", "5G")
prebound_pvc = make_pvc("prebound-pvc", "1G", PREBOUND, "pv-node1a")
prebound_pvc_node1a = make_pvc("unbound-pvc", "1G", PREBOUND, "pv-node1a")
bound_pvc = make_pvc("bound-pvc", "1G", BOUND, "pv-bound")
bound_pvc_node1a = make_pvc("unbound-pvc", "1G", BOUND, "pv-node1a")
immediate_unbound_pvc = make_pvc("immediate-unbound-pvc", "1G", cls=IMMEDIATE)
immediate_bound_pvc = make_pvc(
    "immediate-bound-pvc", "1G", BOUND, "pv-bound-immediate", cls=IMMEDIATE
)
provisioned_pvc = make_pvc("provisioned-pvc", "1Gi", cls=WAIT_PROVISIONER)
provisioned_pvc2 = make_pvc("provisioned-pvc2", "1Gi", cls=WAIT_PROVISIONER)
provisioned_pvc_bound = make_pvc("provisioned-pvc", "1Gi", BOUND, "pv-bound", cls=WAIT_PROVISIONER)
no_provisioner_pvc = make_pvc("no-provisioner-pvc", "1Gi")
topo_mismatch_pvc = make_pvc("topo-mismatch-pvc", "1Gi", cls=TOPO_MISMATCH)
selected_node_pvc = make_pvc(
    "provisioned-pvc", "1Gi", SELECTED_NODE, cls=WAIT_PROVISIONER, node="node1"
)

pv_node1a = make_pv("pv-node1a", "node1", "5G")
pv_node1b = make_pv("pv-node1b", "node1", "10G")
pv_node2 = make_pv("pv-node2", "node2", "1G")
pv_bound = make_pv("pv-bound", "node1", "1G", bound_to=bound_pvc)
pv_node1a_bound = make_pv("pv-node1a", "node1", "5G", bound_to=unbound_pvc)
pv_node1b_bound = make_pv("pv-node1b", "node1", "10G", bound_to=unbound_pvc2)
pv_bound_immediate = make_pv(
    "pv-bound-immediate", "node1", "1G", bound_to=immediate_bound_pvc, cls=IMMEDIATE
)
pv_bound_immediate_node2 = make_pv(
    "pv-bound-immediate", "node2", "1G", bound_to=immediate_bound_pvc, cls=IMMEDIATE
)
pv_bound_generic = make_pv("pv-bound", "node1", "1G", bound_to=generic_pvc(True))

node1 = make_node("node1", nodeKey="node1")
node2 = make_node("node2", nodeKey="node2")


def tracked(driver: str) -> bool:
    return driver == PROVISIONER


def untracked(driver: str) -> bool:
    return False


Outcome = str | tuple[tuple[tuple[str, str], ...], tuple[str, ...]]


def find(
    pod: Pod,
    snapshot: Snapshot,
    node: Node = node1,
    capacity_tracked: Callable[[str], bool] = untracked,
) -> Outcome:
    """PreFilter then FindPodVolumes: an Unresolvable's or a conflict's message, else the
    (PVC, PV) bindings and the PVCs to provision."""
    state = volumebinding.pre_filter(pod, snapshot, capacity_tracked=capacity_tracked)
    if isinstance(state, Unresolvable):
        return state.message
    if state is None:
        return (), ()
    found = volumebinding.find(state, pod, node, snapshot)
    if isinstance(found, str):
        return found
    return (
        tuple((b.pvc.metadata.name or "", b.pv.metadata.name or "") for b in found.static_bindings),
        tuple(p.pvc.metadata.name or "" for p in found.dynamic_provisions),
    )


def pod_of(*pvcs: PersistentVolumeClaim) -> Pod:
    return make_pod(*(p.metadata.name or "" for p in pvcs))


# --- TestFindPodVolumesWithoutProvisioning -------------------------------------------------

WITHOUT_PROVISIONING: list[
    tuple[str, Pod, Sequence[PersistentVolumeClaim], Sequence[PersistentVolume], Outcome]
] = [
    ("no-volumes", make_pod(), (), (), ((), ())),
    (
        "no-pvcs",
        Pod.load(
            {
                "metadata": {"name": "p", "namespace": NS},
                "spec": {"volumes": [{"name": "e", "emptyDir": {}}]},
            }
        ),
        (),
        (),
        ((), ()),
    ),
    ("pvc-not-found", pod_of(bound_pvc), (), (), 'persistentvolumeclaim "bound-pvc" not found'),
    ("bound-pvc", pod_of(bound_pvc), (bound_pvc,), (pv_bound,), ((), ())),
    ("bound-pvc,pv-not-exists", pod_of(bound_pvc), (bound_pvc,), (), ERR_REASON_PV_NOT_EXIST),
    ("prebound-pvc", pod_of(prebound_pvc), (prebound_pvc,), (pv_node1a_bound,), UNBOUND_IMMEDIATE),
    (
        "unbound-pvc,pv-same-node",
        pod_of(unbound_pvc),
        (unbound_pvc,),
        (pv_node2, pv_node1a, pv_node1b),
        ((("unbound-pvc", "pv-node1a"),), ()),
    ),
    (
        "unbound-pvc,pv-different-node",
        pod_of(unbound_pvc),
        (unbound_pvc,),
        (pv_node2,),
        ERR_REASON_BIND_CONFLICT,
    ),
    (
        "two-unbound-pvcs",
        pod_of(unbound_pvc, unbound_pvc2),
        (unbound_pvc, unbound_pvc2),
        (pv_node1a, pv_node1b),
        ((("unbound-pvc", "pv-node1a"), ("unbound-pvc2", "pv-node1b")), ()),
    ),
    (
        "two-unbound-pvcs,order-by-size",
        pod_of(unbound_pvc2, unbound_pvc),
        (unbound_pvc2, unbound_pvc),
        (pv_node1a, pv_node1b),
        ((("unbound-pvc", "pv-node1a"), ("unbound-pvc2", "pv-node1b")), ()),
    ),
    (
        "two-unbound-pvcs,partial-match",
        pod_of(unbound_pvc, unbound_pvc2),
        (unbound_pvc, unbound_pvc2),
        (pv_node1a,),
        ERR_REASON_BIND_CONFLICT,
    ),
    (
        "one-bound,one-unbound",
        pod_of(unbound_pvc, bound_pvc),
        (unbound_pvc, bound_pvc),
        (pv_bound, pv_node1a),
        ((("unbound-pvc", "pv-node1a"),), ()),
    ),
    (
        "one-bound,one-unbound,no-match",
        pod_of(unbound_pvc, bound_pvc),
        (unbound_pvc, bound_pvc),
        (pv_bound, pv_node2),
        ERR_REASON_BIND_CONFLICT,
    ),
    (
        "one-prebound,one-unbound",
        pod_of(unbound_pvc, prebound_pvc),
        (unbound_pvc, prebound_pvc),
        (pv_node1a, pv_node1b),
        UNBOUND_IMMEDIATE,
    ),
    (
        "immediate-bound-pvc",
        pod_of(immediate_bound_pvc),
        (immediate_bound_pvc,),
        (pv_bound_immediate,),
        ((), ()),
    ),
    (
        "immediate-bound-pvc-wrong-node",
        pod_of(immediate_bound_pvc),
        (immediate_bound_pvc,),
        (pv_bound_immediate_node2,),
        ERR_REASON_NODE_CONFLICT,
    ),
    (
        "immediate-unbound-pvc",
        pod_of(immediate_unbound_pvc),
        (immediate_unbound_pvc,),
        (),
        UNBOUND_IMMEDIATE,
    ),
    (
        "immediate-unbound-pvc,delayed-mode-bound",
        pod_of(immediate_unbound_pvc, bound_pvc),
        (immediate_unbound_pvc, bound_pvc),
        (pv_bound,),
        UNBOUND_IMMEDIATE,
    ),
    (
        "immediate-unbound-pvc,delayed-mode-unbound",
        pod_of(immediate_unbound_pvc, unbound_pvc),
        (immediate_unbound_pvc, unbound_pvc),
        (),
        UNBOUND_IMMEDIATE,
    ),
    (
        "generic-ephemeral,no-pvc",
        make_pod(ephemeral=["no-such-pvc"]),
        (),
        (),
        "waiting for ephemeral volume controller to create the persistentvolumeclaim "
        '"test-pod-no-such-pvc"',
    ),
    (
        "generic-ephemeral,with-pvc",
        make_pod(ephemeral=["test-volume"]),
        (generic_pvc(True),),
        (pv_bound_generic,),
        ((), ()),
    ),
    (
        "generic-ephemeral,wrong-pvc",
        make_pod(ephemeral=["test-volume"]),
        (generic_pvc(False),),
        (pv_bound_generic,),
        "PVC testns/test-pod-test-volume was not created for pod testns/test-pod "
        "(pod is not owner)",
    ),
]


@pytest.mark.parametrize("capacity_tracked", [untracked, tracked], ids=["untracked", "tracked"])
@pytest.mark.parametrize(
    ("pod", "pvcs", "pvs", "want"),
    [pytest.param(*case[1:], id=case[0]) for case in WITHOUT_PROVISIONING],
)
def test_find_pod_volumes_without_provisioning(
    pod: Pod,
    pvcs: Sequence[PersistentVolumeClaim],
    pvs: Sequence[PersistentVolume],
    want: Outcome,
    capacity_tracked: Callable[[str], bool],
) -> None:
    assert find(pod, storage(pvcs, pvs), capacity_tracked=capacity_tracked) == want


# --- TestFindPodVolumesWithProvisioning ----------------------------------------------------

WITH_PROVISIONING: list[
    tuple[str, Sequence[PersistentVolumeClaim], Sequence[PersistentVolume], Outcome, bool]
] = [
    ("one-provisioned", (provisioned_pvc,), (), ((), ("provisioned-pvc",)), True),
    (
        "two-unbound-pvcs,one-matched,one-provisioned",
        (unbound_pvc, provisioned_pvc),
        (pv_node1a,),
        ((("unbound-pvc", "pv-node1a"),), ("provisioned-pvc",)),
        True,
    ),
    (
        "one-bound,one-provisioned",
        (bound_pvc, provisioned_pvc),
        (pv_bound,),
        ((), ("provisioned-pvc",)),
        True,
    ),
    (
        "one-binding,one-selected-node",
        (bound_pvc, selected_node_pvc),
        (pv_bound,),
        ((), ("provisioned-pvc",)),
        True,
    ),
    ("immediate-unbound-pvc", (immediate_unbound_pvc,), (), UNBOUND_IMMEDIATE, False),
    (
        "one-immediate-bound,one-provisioned",
        (immediate_bound_pvc, provisioned_pvc),
        (pv_bound_immediate,),
        ((), ("provisioned-pvc",)),
        True,
    ),
    ("invalid-provisioner", (no_provisioner_pvc,), (), ERR_REASON_BIND_CONFLICT, False),
    ("volume-topology-unsatisfied", (topo_mismatch_pvc,), (), ERR_REASON_BIND_CONFLICT, False),
]


@pytest.mark.parametrize("capacity_tracked", [untracked, tracked], ids=["untracked", "tracked"])
@pytest.mark.parametrize(
    ("pvcs", "pvs", "want", "needs_capacity"),
    [pytest.param(*case[1:], id=case[0]) for case in WITH_PROVISIONING],
)
def test_find_pod_volumes_with_provisioning(
    pvcs: Sequence[PersistentVolumeClaim],
    pvs: Sequence[PersistentVolume],
    want: Outcome,
    needs_capacity: bool,
    capacity_tracked: Callable[[str], bool],
) -> None:
    if needs_capacity and capacity_tracked is tracked:
        want = ERR_REASON_NOT_ENOUGH_SPACE  # no CSIStorageCapacity: provisioning is blocked
    assert find(pod_of(*pvcs), storage(pvcs, pvs), capacity_tracked=capacity_tracked) == want


def test_selected_node_of_another_node_is_a_bind_conflict() -> None:
    """A claim being provisioned for node1 rules out node2 at once (the fast path)."""
    pod = pod_of(bound_pvc, selected_node_pvc)
    snap = storage((bound_pvc, selected_node_pvc), (pv_bound,))
    assert find(pod, snap, node2) == f"{ERR_REASON_NODE_CONFLICT}, {ERR_REASON_BIND_CONFLICT}"


def test_provisioning_without_class_is_an_error() -> None:
    """A delayed claim can only lack a class through the beta annotation's empty value."""
    pvc = make_pvc("no-class", "1Gi", cls=WAIT_PROVISIONER)
    obj = pvc.dump()
    obj["metadata"]["annotations"]["volume.beta.kubernetes.io/storage-class"] = ""
    pod, snap = pod_of(pvc), storage((PersistentVolumeClaim.load(obj),))
    # "" is no class: not delayed, so the claim waits for the PV controller
    assert volumebinding.pre_filter(pod, snap) == Unresolvable(UNBOUND_IMMEDIATE)
    state = VolumeBindingState(
        bound_claims=(), delayed_claims=(PersistentVolumeClaim.load(obj),), delayed_volumes={}
    )
    with pytest.raises(VolumeBindingError, match=re.escape('no class for claim "testns/no-class"')):
        volumebinding.find(state, pod, node1, snap)
    missing = make_pvc("missing-class", "1Gi", cls="gone")
    state = VolumeBindingState(bound_claims=(), delayed_claims=(missing,), delayed_volumes={})
    with pytest.raises(VolumeBindingError, match=re.escape('failed to find storage class "gone"')):
        volumebinding.find(state, pod, node1, snap)


def test_class_without_binding_mode_is_an_error() -> None:
    classes = {**CLASSES, "nomode": make_class("nomode", None, PROVISIONER)}
    pvc = make_pvc("c", "1Gi", cls="nomode")
    with pytest.raises(
        VolumeBindingError, match='VolumeBindingMode not set for StorageClass "nomode"'
    ):
        volumebinding.pre_filter(pod_of(pvc), storage((pvc,), classes=classes))


# --- TestCapacity --------------------------------------------------------------------------

network = make_capacity("net", WAIT_PROVISIONER, None, "1Gi")
node1_capacity = make_capacity("node1", WAIT_PROVISIONER, "node1", "1Gi")
node2_capacity = make_capacity("node2", WAIT_PROVISIONER, "node2", "1Gi")

CAPACITY: list[tuple[str, Sequence[CSIStorageCapacity], CSIStorageCapacity | None]] = [
    ("network-attached", (network,), network),
    ("local-storage", (node1_capacity,), node1_capacity),
    # upstream's three objects share a name, so its lister keeps node1's; ours are a list
    ("multiple", (node2_capacity, node1_capacity, network), node1_capacity),
    ("no-storage", (), None),
    ("wrong-node", (make_capacity("net", WAIT_PROVISIONER, "node2", "1Gi"),), None),
    ("wrong-storage-class", (make_capacity("net", WAIT, "node1", "1Gi"),), None),
    ("insufficient-storage", (make_capacity("net", WAIT_PROVISIONER, "node1", "1Mi"),), None),
    (
        "insufficient-volume-size",
        (make_capacity("net", WAIT_PROVISIONER, "node1", "1Gi", "1Mi"),),
        None,
    ),
    ("zero-storage", (make_capacity("net", WAIT_PROVISIONER, "node1", "0Mi"),), None),
    ("zero-volume-size", (make_capacity("net", WAIT_PROVISIONER, "node1", "", "0Mi"),), None),
    ("nil-storage", (make_capacity("net", WAIT_PROVISIONER, "node1"),), None),
]


@pytest.mark.parametrize("opt_in", [True, False])
@pytest.mark.parametrize(("capacities", "want"), [pytest.param(*c[1:], id=c[0]) for c in CAPACITY])
def test_capacity(
    capacities: Sequence[CSIStorageCapacity], want: CSIStorageCapacity | None, opt_in: bool
) -> None:
    pod, snap = pod_of(provisioned_pvc), storage((provisioned_pvc,), capacities=capacities)
    state = volumebinding.pre_filter(pod, snap, capacity_tracked=tracked if opt_in else untracked)
    assert isinstance(state, VolumeBindingState)
    found = volumebinding.find(state, pod, node1, snap)
    if opt_in and want is None:
        assert found == ERR_REASON_NOT_ENOUGH_SPACE
        return
    assert found == PodVolumes((), (Provision(provisioned_pvc, want if opt_in else None),))


@pytest.mark.parametrize(
    ("limit", "request_", "exact", "fits"),
    [
        ("2", "1.5", False, True),  # both round up to 2 bytes (1.37)
        ("2", "1.5", True, True),
        ("1.2", "1.5", False, True),
        ("1.2", "1.5", True, False),  # 1.38 compares exactly
    ],
)
def test_capacity_rounding(limit: str, request_: str, exact: bool, fits: bool) -> None:
    pvc = make_pvc("provisioned-pvc", request_, cls=WAIT_PROVISIONER)
    capacity = make_capacity("c", WAIT_PROVISIONER, "node1", limit)
    pod, snap = pod_of(pvc), storage((pvc,), capacities=(capacity,))
    state = volumebinding.pre_filter(pod, snap, capacity_tracked=tracked, exact_capacity=exact)
    assert isinstance(state, VolumeBindingState)
    found = volumebinding.find(state, pod, node1, snap)
    assert (found != ERR_REASON_NOT_ENOUGH_SPACE) is fits


# --- TestVolumeBinding (the plugin: PreFilter, Filter, Score) ------------------------------

V_WAIT, V_WAIT_HDD, V_CAPACITY = "wait-sc", "wait-hdd-sc", "wait-sc-with-storage-capacity"
PLUGIN_CLASSES = {
    c.metadata.name or "": c
    for c in (
        make_class("immediate-sc", "Immediate"),
        make_class(V_WAIT, "WaitForFirstConsumer"),
        make_class(V_WAIT_HDD, "WaitForFirstConsumer"),
        make_class(V_CAPACITY, "WaitForFirstConsumer", "driver-with-storage-capacity"),
    )
}


def pvc_(
    name: str, cls: str, *, bound_pv: str = "", request: str = "", phase: str = ""
) -> PersistentVolumeClaim:
    """volume_binding_test.go's makePVC (namespace default, no access modes)."""
    spec: J = {"storageClassName": cls}
    meta: J = {"name": name, "namespace": "default"}
    if bound_pv:
        spec["volumeName"] = bound_pv
        meta["annotations"] = {"pv.kubernetes.io/bind-completed": "true"}
    if request:
        spec["resources"] = {"requests": {"storage": request}}
    status: J = {"phase": phase} if phase else {}
    return PersistentVolumeClaim.load({"metadata": meta, "spec": spec, "status": status})


def pv_(name: str, cls: str, capacity: str = "", **affinity: list[str]) -> PersistentVolume:
    """makePV(...).withPhase(Available), with a capacity and node affinity."""
    pv = make_pv(name, "", capacity or "0", cls=cls, affinity=affinity or None)
    if not capacity:
        pv.spec.capacity = {}
    return pv


def plugin_pod(*claims: str) -> Pod:
    return make_pod(*claims, name="pod-a", namespace="default")


def zone(region: str, zone: str) -> dict[str, list[str]]:
    return {"topology.kubernetes.io/region": [region], "topology.kubernetes.io/zone": [zone]}


def zonal_node(name: str, region: str, zone: str) -> Node:
    return Node.load(
        {
            "metadata": {
                "name": name,
                "labels": {
                    HOSTNAME: name,
                    "topology.kubernetes.io/region": region,
                    "topology.kubernetes.io/zone": zone,
                },
            }
        }
    )


LOCAL_PVS = [
    pv_("pv-a-0", V_WAIT, "200Gi", **{HOSTNAME: ["node-a"]}),
    pv_("pv-a-1", V_WAIT, "200Gi", **{HOSTNAME: ["node-a"]}),
    pv_("pv-b-0", V_WAIT, "100Gi", **{HOSTNAME: ["node-b"]}),
    pv_("pv-b-1", V_WAIT, "100Gi", **{HOSTNAME: ["node-b"]}),
]
ABC = [make_node("node-a"), make_node("node-b"), make_node("node-c")]
ZONAL_NODES = [
    zonal_node("zone-a-node-a", "region-a", "zone-a"),
    zonal_node("zone-a-node-b", "region-a", "zone-a"),
    zonal_node("zone-b-node-a", "region-b", "zone-b"),
    zonal_node("zone-b-node-b", "region-b", "zone-b"),
    zonal_node("zone-c-node-a", "region-c", "zone-c"),
    zonal_node("zone-c-node-b", "region-c", "zone-c"),
]
ZONAL_PVS = [
    pv_("pv-a-0", V_WAIT, "200Gi", **zone("region-a", "zone-a")),
    pv_("pv-a-1", V_WAIT, "200Gi", **zone("region-a", "zone-a")),
    pv_("pv-b-0", V_WAIT, "100Gi", **zone("region-b", "zone-b")),
    pv_("pv-b-1", V_WAIT, "100Gi", **zone("region-b", "zone-b")),
]
LABELLED = [make_node(n, nodeKey=n) for n in ("node-a", "node-b", "node-c")]


def capacities(*sizes: str) -> list[CSIStorageCapacity]:
    return [
        make_capacity(n, V_CAPACITY, n, size)
        for n, size in zip(("node-a", "node-b", "node-c"), sizes, strict=False)
    ]


BIND = ERR_REASON_BIND_CONFLICT
CUSTOM = ((0, 0), (50, 3), (100, 5))

#: (name, pod, nodes, pvcs, pvs, capacities, scoring, shape args, prefilter, filters, scores)
PLUGIN: list[tuple[Any, ...]] = [
    ("pod has not pvcs", plugin_pod(), ABC[:1], (), (), (), False, None, "skip", [None], None),
    (
        "all bound",
        plugin_pod("pvc-a"),
        ABC[:1],
        [pvc_("pvc-a", V_WAIT, bound_pv="pv-a")],
        [pv_("pv-a", V_WAIT)],
        (),
        False,
        None,
        None,
        [None],
        None,
    ),
    (
        "PVC does not exist",
        plugin_pod("pvc-a"),
        ABC[:1],
        (),
        (),
        (),
        False,
        None,
        'persistentvolumeclaim "pvc-a" not found',
        None,
        None,
    ),
    (
        "Part of PVCs do not exist",
        plugin_pod("pvc-a", "pvc-b"),
        ABC[:1],
        [pvc_("pvc-a", V_WAIT, bound_pv="pv-a")],
        (),
        (),
        False,
        None,
        'persistentvolumeclaim "pvc-b" not found',
        None,
        None,
    ),
    (
        "immediate claims not bound",
        plugin_pod("pvc-a"),
        ABC[:1],
        [pvc_("pvc-a", "immediate-sc")],
        (),
        (),
        False,
        None,
        UNBOUND_IMMEDIATE,
        None,
        None,
    ),
    (
        "unbound claims no matches",
        plugin_pod("pvc-a"),
        ABC[:1],
        [pvc_("pvc-a", V_WAIT)],
        (),
        (),
        False,
        None,
        None,
        [BIND],
        None,
    ),
    (
        "bound and unbound unsatisfied",
        plugin_pod("pvc-a", "pvc-b"),
        [make_node("node-a", foo="barbar")],
        [pvc_("pvc-a", V_WAIT, bound_pv="pv-a"), pvc_("pvc-b", V_WAIT)],
        [pv_("pv-a", V_WAIT, foo=["bar"])],
        (),
        False,
        None,
        None,
        [f"{ERR_REASON_NODE_CONFLICT}, {BIND}"],
        None,
    ),
    (
        "pv not found",
        plugin_pod("pvc-a"),
        ABC[:1],
        [pvc_("pvc-a", V_WAIT, bound_pv="pv-a")],
        (),
        (),
        False,
        None,
        None,
        [ERR_REASON_PV_NOT_EXIST],
        None,
    ),
    (
        "pv not found claim lost",
        plugin_pod("pvc-a"),
        ABC[:1],
        [pvc_("pvc-a", V_WAIT, bound_pv="pv-a", phase="Lost")],
        (),
        (),
        False,
        None,
        'persistentvolumeclaim "pvc-a" bound to non-existent persistentvolume "pv-a"',
        None,
        None,
    ),
    (
        "local volumes with close capacity are preferred",
        plugin_pod("pvc-a"),
        ABC,
        [pvc_("pvc-a", V_WAIT, request="50Gi")],
        LOCAL_PVS,
        (),
        True,
        None,
        None,
        [None, None, BIND],
        [75, 50, 0],
    ),
    (
        "local volumes with close capacity are preferred (StorageCapacityScoring disabled)",
        plugin_pod("pvc-a"),
        ABC,
        [pvc_("pvc-a", V_WAIT, request="50Gi")],
        LOCAL_PVS,
        (),
        False,
        None,
        None,
        [None, None, BIND],
        None,
    ),
    (
        "local volumes with close capacity are preferred (multiple pvcs)",
        plugin_pod("pvc-0", "pvc-1"),
        ABC,
        [pvc_("pvc-0", V_WAIT, request="50Gi"), pvc_("pvc-1", V_WAIT_HDD, request="100Gi")],
        [
            *LOCAL_PVS[:2],
            pv_("pv-a-2", V_WAIT_HDD, "200Gi", **{HOSTNAME: ["node-a"]}),
            pv_("pv-a-3", V_WAIT_HDD, "200Gi", **{HOSTNAME: ["node-a"]}),
            *LOCAL_PVS[2:],
            pv_("pv-b-2", V_WAIT_HDD, "100Gi", **{HOSTNAME: ["node-b"]}),
            pv_("pv-b-3", V_WAIT_HDD, "100Gi", **{HOSTNAME: ["node-b"]}),
        ],
        (),
        True,
        None,
        None,
        [None, None, BIND],
        [63, 25, 0],
    ),
    (
        "zonal volumes with close capacity are preferred",
        plugin_pod("pvc-a"),
        ZONAL_NODES,
        [pvc_("pvc-a", V_WAIT, request="50Gi")],
        ZONAL_PVS,
        (),
        True,
        None,
        None,
        [None, None, None, None, BIND, BIND],
        [75, 75, 50, 50, 0, 0],
    ),
    (
        "zonal volumes with close capacity are preferred (custom shape)",
        plugin_pod("pvc-a"),
        ZONAL_NODES,
        [pvc_("pvc-a", V_WAIT, request="50Gi")],
        ZONAL_PVS,
        (),
        True,
        CUSTOM,
        None,
        [None, None, None, None, BIND, BIND],
        [15, 15, 30, 30, 0, 0],
    ),
    (
        "storage capacity score",
        plugin_pod("pvc-dynamic"),
        LABELLED,
        [pvc_("pvc-dynamic", V_CAPACITY, request="10Gi")],
        (),
        capacities("100Gi", "50Gi", "10Gi"),
        True,
        None,
        None,
        [None, None, None],
        [90, 80, 0],
    ),
    (
        "storage capacity score with static binds",
        plugin_pod("pvc-dynamic", "pvc-static"),
        LABELLED,
        [
            pvc_("pvc-dynamic", V_CAPACITY, request="10Gi"),
            pvc_("pvc-static", V_WAIT, request="50Gi"),
        ],
        [pv_(f"pv-static-{n}", V_WAIT, "100Gi", **{HOSTNAME: [f"node-{n}"]}) for n in "abc"],
        capacities("100Gi", "50Gi", "10Gi"),
        True,
        None,
        None,
        [None, None, None],
        [50, 50, 50],
    ),
    (
        "dynamic provisioning with multiple PVCs of the same StorageClass",
        plugin_pod("pvc-dynamic-0", "pvc-dynamic-1"),
        LABELLED[:1],
        [
            pvc_("pvc-dynamic-0", V_CAPACITY, request="50Gi"),
            pvc_("pvc-dynamic-1", V_CAPACITY, request="50Gi"),
        ],
        (),
        capacities("100Gi"),
        True,
        None,
        None,
        [None],
        [0],
    ),
    (
        "prefer node with least allocatable",
        plugin_pod("pvc-dynamic"),
        LABELLED,
        [pvc_("pvc-dynamic", V_CAPACITY, request="10Gi")],
        (),
        capacities("100Gi", "20Gi", "10Gi"),
        True,
        ((0, 0), (100, 10)),
        None,
        [None, None, None],
        [10, 50, 100],
    ),
    (
        "prefer node with maximum allocatable",
        plugin_pod("pvc-dynamic"),
        LABELLED,
        [pvc_("pvc-dynamic", V_CAPACITY, request="10Gi")],
        (),
        capacities("100Gi", "20Gi", "10Gi"),
        True,
        ((0, 10), (100, 0)),
        None,
        [None, None, None],
        [90, 50, 0],
    ),
]


@pytest.mark.parametrize(
    (
        "pod",
        "nodes",
        "pvcs",
        "pvs",
        "caps",
        "scoring",
        "args",
        "want_pre",
        "want_filters",
        "want_scores",
    ),
    [pytest.param(*case[1:], id=case[0]) for case in PLUGIN],
)
def test_volume_binding(
    pod: Pod,
    nodes: Sequence[Node],
    pvcs: Sequence[PersistentVolumeClaim],
    pvs: Sequence[PersistentVolume],
    caps: Sequence[CSIStorageCapacity],
    scoring: bool,
    args: tuple[tuple[int, int], ...] | None,
    want_pre: str | None,
    want_filters: list[str | None] | None,
    want_scores: list[int] | None,
) -> None:
    snap = storage(pvcs, pvs, caps, PLUGIN_CLASSES)

    def driver_tracks(driver: str) -> bool:
        return driver == "driver-with-storage-capacity"

    state = volumebinding.pre_filter(pod, snap, capacity_tracked=driver_tracks)
    if isinstance(state, Unresolvable):
        assert state.message == want_pre
        return
    if state is None:
        assert want_pre == "skip"
        found: list[PodVolumes | str | None] = [None] * len(nodes)
    else:
        assert want_pre is None
        found = [volumebinding.find(state, pod, n, snap) for n in nodes]
        assert [f if isinstance(f, str) else None for f in found] == want_filters
        assert [volumebinding.filter(state, pod, n, snap) for n in nodes] == want_filters
    shape = DEFAULT_SHAPE if args is None else volumebinding.shape_from_args(args)
    scores = [
        volumebinding.score(
            None if isinstance(f, str) else f, shape=shape, storage_capacity_scoring=scoring
        )
        for f in found
    ]
    if want_scores is None:
        assert scores == [None] * len(nodes)  # PreScore skips: the gate is off
    else:
        # a node that failed Filter is not scored upstream; its entry there reads 0
        assert [
            0 if isinstance(f, str) else s for f, s in zip(found, scores, strict=True)
        ] == want_scores


def test_pod_without_claims_scores_zero_with_the_gate_on() -> None:
    assert volumebinding.score(None) == 0


# --- scorer_test.go ------------------------------------------------------------------------


def static(*classes: tuple[str, int, int]) -> PodVolumes:
    """Static bindings of (class, requested, capacity) in bytes."""
    bindings = []
    for i, (cls, requested, capacity) in enumerate(classes):
        pvc = make_pvc(f"c{i}", str(requested))
        pv = make_pv(f"v{i}", "", str(capacity), cls=cls)
        bindings.append(Binding(pvc=pvc, pv=pv))
    return PodVolumes(static_bindings=tuple(bindings))


@pytest.mark.parametrize(
    ("shape", "classes", "want"),
    [
        (DEFAULT_SHAPE, [("hdd", 0, 100)], 100),
        (DEFAULT_SHAPE, [("hdd", 30, 100)], 70),
        (DEFAULT_SHAPE, [("hdd", 50, 100)], 50),
        (DEFAULT_SHAPE, [("hdd", 100, 100)], 0),
        (DEFAULT_SHAPE, [("hdd", 0, 100), ("ssd", 0, 100)], 100),
        (DEFAULT_SHAPE, [("hdd", 0, 100), ("ssd", 30, 100)], 85),
        (DEFAULT_SHAPE, [("hdd", 30, 100), ("ssd", 30, 100)], 70),
        (DEFAULT_SHAPE, [("hdd", 30, 100), ("ssd", 60, 100)], 55),
        (DEFAULT_SHAPE, [("hdd", 50, 100), ("ssd", 50, 100)], 50),
        (DEFAULT_SHAPE, [("hdd", 50, 100), ("ssd", 100, 100)], 25),
        (DEFAULT_SHAPE, [("hdd", 100, 100), ("ssd", 100, 100)], 0),
        (((50, 0), (80, 30), (100, 50)), [("hdd", 0, 100), ("ssd", 0, 100)], 0),
        (((50, 0), (80, 30), (100, 50)), [("hdd", 0, 100), ("ssd", 30, 100)], 0),
        (((50, 0), (80, 30), (100, 50)), [("hdd", 30, 100), ("ssd", 30, 100)], 0),
        (((50, 0), (80, 30), (100, 50)), [("hdd", 30, 100), ("ssd", 60, 100)], 5),
        (((50, 0), (80, 30), (100, 50)), [("hdd", 50, 100), ("ssd", 100, 100)], 25),
        (((50, 0), (80, 30), (100, 50)), [("hdd", 90, 100), ("ssd", 90, 100)], 40),
        (((50, 0), (80, 30), (100, 50)), [("hdd", 100, 100), ("ssd", 100, 100)], 50),
        # a class over its capacity, or of no capacity, scores as fully used
        (DEFAULT_SHAPE, [("hdd", 200, 100)], 0),
        (DEFAULT_SHAPE, [("hdd", 0, 0)], 0),
    ],
)
def test_score(
    shape: Sequence[tuple[int, int]], classes: list[tuple[str, int, int]], want: int
) -> None:
    assert volumebinding.score(static(*classes), shape=shape) == want


# --- TestAssumePodVolumes ------------------------------------------------------------------


def test_assume_all_bound() -> None:
    snap = storage((bound_pvc,), (pv_bound,))
    assert volumebinding.assume(pod_of(bound_pvc), "node1", PodVolumes(), snap) is None


@pytest.mark.parametrize(
    ("bindings", "want"),
    [
        pytest.param([(unbound_pvc, pv_node1a)], [pv_node1a_bound], id="one-binding"),
        pytest.param(
            [(unbound_pvc, pv_node1a), (unbound_pvc2, pv_node1b)],
            [pv_node1a_bound, pv_node1b_bound],
            id="two-bindings",
        ),
        pytest.param([(unbound_pvc, pv_node1a_bound)], [pv_node1a_bound], id="pv-already-bound"),
    ],
)
def test_assume_bindings(
    bindings: list[tuple[PersistentVolumeClaim, PersistentVolume]], want: list[PersistentVolume]
) -> None:
    pvcs = [c for c, _ in bindings]
    snap = storage(pvcs, [v for _, v in bindings])
    volumes = PodVolumes(static_bindings=tuple(Binding(c, v) for c, v in bindings))
    assumed = volumebinding.assume(pod_of(*pvcs), "node1", volumes, snap)
    assert assumed is not None
    assert [b.pv.dump() for b in assumed.static_bindings] == [pv.dump() for pv in want]
    assert assumed.dynamic_provisions == ()


def test_assume_binding_and_provisioning() -> None:
    snap = storage((unbound_pvc, provisioned_pvc), (pv_node1a,))
    volumes = PodVolumes(
        static_bindings=(Binding(unbound_pvc, pv_node1a),),
        dynamic_provisions=(Provision(provisioned_pvc, node1_capacity),),
    )
    assumed = volumebinding.assume(pod_of(unbound_pvc, provisioned_pvc), "node1", volumes, snap)
    assert assumed is not None
    assert [b.pv.dump() for b in assumed.static_bindings] == [pv_node1a_bound.dump()]
    assert [p.pvc.dump() for p in assumed.dynamic_provisions] == [selected_node_pvc.dump()]
    assert assumed.dynamic_provisions[0].capacity is None
    assert provisioned_pvc.metadata.annotations == {}  # the snapshot's objects are untouched


def test_bind_volume_to_prebound_pv_keeps_user_binding() -> None:
    """A PV the user pre-bound to the claim (no UID) gets the UID but no bound-by-controller."""
    pv = make_pv("pv", "node1", "5G")
    pv.spec.claim_ref = volumebinding.claim_reference(unbound_pvc)
    pv.spec.claim_ref.uid = None
    new, dirty = volumebinding.bind_volume_to_claim(pv, unbound_pvc)
    assert dirty
    assert new.spec.claim_ref is not None
    assert new.spec.claim_ref.uid == "pvc-uid"
    assert "pv.kubernetes.io/bound-by-controller" not in new.metadata.annotations
    same, dirty = volumebinding.bind_volume_to_claim(pv_node1a_bound, unbound_pvc)
    assert not dirty
    assert same.dump() == pv_node1a_bound.dump()


# --- bindAPIUpdate's writes ----------------------------------------------------------------


def test_static_binding_patch() -> None:
    assert volumebinding.static_binding_patch(pv_node1a, unbound_pvc) == {
        "metadata": {
            "resourceVersion": "1",
            "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"},
        },
        "spec": {
            "claimRef": {
                "kind": "PersistentVolumeClaim",
                "namespace": NS,
                "name": "unbound-pvc",
                "uid": "pvc-uid",
                "apiVersion": "v1",
                "resourceVersion": "1",
            }
        },
    }


def test_provisioning_patch() -> None:
    assert volumebinding.provisioning_patch(provisioned_pvc, "node1") == {
        "metadata": {
            "annotations": {"volume.kubernetes.io/selected-node": "node1"},
            "resourceVersion": "1",
        }
    }


# --- TestCheckBindings ---------------------------------------------------------------------


def with_annotations(
    pvc: PersistentVolumeClaim, annotations: dict[str, str]
) -> PersistentVolumeClaim:
    new = pvc.model_copy(deep=True)
    new.metadata.annotations = annotations
    return new


def selected(pvc: PersistentVolumeClaim, node: str = "node1") -> PersistentVolumeClaim:
    return with_annotations(
        pvc, {**pvc.metadata.annotations, "volume.kubernetes.io/selected-node": node}
    )


def without_uid(pv: PersistentVolume) -> PersistentVolume:
    new = pv.model_copy(deep=True)
    assert new.spec.claim_ref is not None
    new.spec.claim_ref.uid = ""
    return new


B = Binding
CHECK: list[
    tuple[
        str,
        Sequence[Binding],
        Sequence[PersistentVolumeClaim],
        Sequence[PersistentVolumeClaim],
        Sequence[PersistentVolume],
        bool | str,
    ]
] = [
    ("nothing-to-bind", (), (), (), (), True),
    (
        "binding-bound",
        (B(unbound_pvc, pv_node1a_bound),),
        (),
        (bound_pvc_node1a,),
        (pv_node1a_bound,),
        True,
    ),
    (
        "binding-prebound",
        (B(unbound_pvc, pv_node1a_bound),),
        (),
        (prebound_pvc_node1a,),
        (pv_node1a_bound,),
        False,
    ),
    (
        "binding-unbound",
        (B(unbound_pvc, pv_node1a_bound),),
        (),
        (unbound_pvc,),
        (pv_node1a_bound,),
        False,
    ),
    (
        "binding-pvc-not-exists",
        (B(unbound_pvc, pv_node1a_bound),),
        (),
        (),
        (pv_node1a_bound,),
        "binding volumes: failed to check binding: "
        'persistentvolumeclaims "testns/unbound-pvc" not found',
    ),
    (
        "binding-pv-not-exists",
        (B(unbound_pvc, pv_node1a_bound),),
        (),
        (bound_pvc_node1a,),
        (),
        'binding volumes: failed to check binding: persistentvolumes "pv-node1a" not found',
    ),
    (
        "binding-claimref-nil",
        (B(unbound_pvc, pv_node1a_bound),),
        (),
        (bound_pvc_node1a,),
        (pv_node1a,),
        'binding volumes: ClaimRef got reset for pv "pv-node1a"',
    ),
    (
        "binding-claimref-uid-empty",
        (B(unbound_pvc, pv_node1a_bound),),
        (),
        (bound_pvc_node1a,),
        (without_uid(pv_node1a_bound),),
        'binding volumes: ClaimRef got reset for pv "pv-node1a"',
    ),
    (
        "binding-one-bound,one-unbound",
        (B(unbound_pvc, pv_node1a_bound), B(unbound_pvc2, pv_node1b_bound)),
        (),
        (bound_pvc_node1a, unbound_pvc2),
        (pv_node1a_bound, pv_node1b_bound),
        False,
    ),
    (
        "binding-api-object-older",
        (B(unbound_pvc, make_pv("pv-node1a", "node1", "5G", "2", bound_to=unbound_pvc)),),
        (),
        (bound_pvc_node1a,),
        (pv_node1a_bound,),
        False,
    ),
    (
        "binding-node-affinity-fails",
        (B(unbound_pvc, pv_node1a_bound),),
        (),
        (bound_pvc_node1a,),
        (make_pv("pv-node1a", "node2", "5G", bound_to=unbound_pvc),),
        'binding volumes: pv "pv-node1a" node affinity doesn\'t match node "node1": '
        "no matching NodeSelectorTerms",
    ),
    (
        "provisioning-pvc-bound",
        (),
        (selected(provisioned_pvc),),
        (selected(provisioned_pvc_bound),),
        (pv_bound,),
        True,
    ),
    (
        "provisioning-pvc-unbound",
        (),
        (selected(provisioned_pvc),),
        (selected(provisioned_pvc),),
        (),
        False,
    ),
    (
        "provisioning-pvc-not-exists",
        (),
        (selected(provisioned_pvc),),
        (),
        (),
        "binding volumes: failed to check provisioning pvc: "
        'persistentvolumeclaims "testns/provisioned-pvc" not found',
    ),
    (
        "provisioning-pvc-annotations-nil",
        (),
        (selected(provisioned_pvc),),
        (provisioned_pvc,),
        (),
        'binding volumes: selectedNode annotation reset for PVC "provisioned-pvc"',
    ),
    (
        "provisioning-pvc-selected-node-wrong-node",
        (),
        (selected(provisioned_pvc),),
        (selected(provisioned_pvc, "wrong-node"),),
        (),
        'binding volumes: provisioning failed for PVC "provisioned-pvc"',
    ),
    (
        "binding-bound-provisioning-unbound",
        (B(unbound_pvc, pv_node1a_bound),),
        (selected(provisioned_pvc),),
        (bound_pvc_node1a, selected(provisioned_pvc)),
        (pv_node1a_bound,),
        False,
    ),
    (
        "tolerate-provisioning-pvc-bound-pv-not-found",
        (),
        (selected(provisioned_pvc),),
        (selected(provisioned_pvc_bound),),
        (),
        False,
    ),
    (
        "node-affinity-fails-dynamic-provisioning",
        (),
        (selected(provisioned_pvc),),
        (selected(provisioned_pvc_bound),),
        (make_pv("pv-bound", "node2", "1G", bound_to=bound_pvc),),
        'binding volumes: pv "pv-bound" node affinity doesn\'t match node "node1": '
        "no matching NodeSelectorTerms",
    ),
]


@pytest.mark.parametrize(
    ("bindings", "provisions", "pvcs", "pvs", "want"),
    [pytest.param(*case[1:], id=case[0]) for case in CHECK],
)
def test_check_bindings(
    bindings: Sequence[Binding],
    provisions: Sequence[PersistentVolumeClaim],
    pvcs: Sequence[PersistentVolumeClaim],
    pvs: Sequence[PersistentVolume],
    want: bool | str,
) -> None:
    volumes = PodVolumes(tuple(bindings), tuple(Provision(p) for p in provisions))
    current = {f"{c.metadata.namespace}/{c.metadata.name}": c for c in pvcs}
    by_name = {v.metadata.name or "": v for v in pvs}
    if isinstance(want, str):
        with pytest.raises(VolumeBindingError) as failed:
            volumebinding.bound(volumes, node1, current, by_name)
        assert str(failed.value) == want
    else:
        assert volumebinding.bound(volumes, node1, current, by_name) is want


def test_bind_timeout_message() -> None:
    assert BIND_TIMEOUT == "binding volumes: context deadline exceeded"


# --- FindMatchingVolume details ------------------------------------------------------------


def rwo(pvc: PersistentVolumeClaim, *modes: str) -> PersistentVolumeClaim:
    new = pvc.model_copy(deep=True)
    new.spec.access_modes = list(modes)
    return new


def pv_with(pv: PersistentVolume, **changes: Any) -> PersistentVolume:
    obj = pv.dump()
    for path, value in changes.items():
        *parents, leaf = path.split("__")
        target = obj
        for p in parents:
            target = target.setdefault(p, {})
        target[leaf] = value
    return PersistentVolume.load(obj)


@pytest.mark.parametrize(
    ("pvc", "pvs", "want"),
    [
        pytest.param(unbound_pvc, [pv_node1b, pv_node1a], "pv-node1a", id="smallest-fitting"),
        pytest.param(
            unbound_pvc,
            [pv_with(pv_node1a, spec__volumeMode="Block"), pv_node1b],
            "pv-node1b",
            id="volume-mode-mismatch",
        ),
        pytest.param(
            rwo(unbound_pvc, "ReadWriteOnce"),
            [pv_node1a, pv_with(pv_node1b, spec__accessModes=["ReadWriteOnce", "ReadOnlyMany"])],
            "pv-node1b",
            id="access-modes",
        ),
        pytest.param(
            unbound_pvc,
            [pv_with(pv_node1a, status__phase="Released"), pv_node1b],
            "pv-node1b",
            id="not-available",
        ),
        pytest.param(
            unbound_pvc,
            [pv_with(pv_node1a, metadata__deletionTimestamp="2026-01-01T00:00:00Z"), pv_node1b],
            "pv-node1b",
            id="deleting",
        ),
        pytest.param(
            unbound_pvc,
            [pv_with(pv_node1a, spec__volumeAttributesClassName="gold"), pv_node1b],
            "pv-node1b",
            id="attributes-class",
        ),
        pytest.param(
            unbound_pvc,
            [pv_node1a, make_pv("pv-prebound", "node1", "10G", bound_to=unbound_pvc)],
            "pv-prebound",
            id="prebound-wins-over-smaller",
        ),
        pytest.param(
            unbound_pvc,
            [pv_node1a, make_pv("pv-prebound", "node2", "10G", bound_to=unbound_pvc)],
            None,
            id="prebound-elsewhere-rules-out-all",
        ),
        pytest.param(
            unbound_pvc,
            [make_pv("pv-other", "node1", "10G", bound_to=unbound_pvc2)],
            None,
            id="claimed-by-another",
        ),
        pytest.param(
            make_pvc("big", "6G"),
            [pv_node1a, pv_node1b],
            "pv-node1b",
            id="too-small",
        ),
    ],
)
def test_find_matching_volume(
    pvc: PersistentVolumeClaim, pvs: list[PersistentVolume], want: str | None
) -> None:
    got = volumebinding.find_matching_volume(pvc, pvs, node1)
    assert (None if got is None else got.metadata.name) == want


def test_find_matching_volume_selector() -> None:
    pvc = make_pvc("sel", "1G")
    pvc.spec.selector = LabelSelector(match_labels={"tier": "gold"})
    gold = pv_with(pv_node1b, metadata__labels={"tier": "gold"})
    assert volumebinding.find_matching_volume(pvc, [pv_node1a, gold], node1) == gold
    pvc.spec.selector = LabelSelector.model_validate(
        {"matchExpressions": [{"key": "tier", "operator": "In"}]}
    )
    with pytest.raises(
        VolumeBindingError,
        match=r"^error creating internal label selector for claim: testns/sel: values: ",
    ):
        volumebinding.find_matching_volume(pvc, [pv_node1a], node1)


def test_same_pv_is_not_chosen_twice() -> None:
    a, b = make_pvc("a", "1G"), make_pvc("b", "1G")
    snap = storage((a, b), (pv_node1a,))
    assert find(pod_of(a, b), snap) == ERR_REASON_BIND_CONFLICT
    snap = storage((a, b), (pv_node1a, pv_node1b))
    assert find(pod_of(a, b), snap) == ((("a", "pv-node1a"), ("b", "pv-node1b")), ())


def test_node_affinity_with_metadata_name_field_never_matches() -> None:
    """CheckNodeAffinity matches a Node of labels only: a matchFields term cannot match."""
    pv = make_pv("pv-bound", "", "1G", bound_to=bound_pvc)
    obj = pv.dump()
    obj["spec"]["nodeAffinity"] = {
        "required": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node1"]}]}
            ]
        }
    }
    snap = storage((bound_pvc,), (PersistentVolume.load(obj),))
    assert find(pod_of(bound_pvc), snap) == ERR_REASON_NODE_CONFLICT


def test_beta_class_annotation_wins() -> None:
    pvc = make_pvc("beta", "1G", cls=IMMEDIATE)
    obj = pvc.dump()
    obj["metadata"]["annotations"]["volume.beta.kubernetes.io/storage-class"] = WAIT
    pvc = PersistentVolumeClaim.load(obj)
    assert find(pod_of(pvc), storage((pvc,), (pv_node1a,))) == ((("beta", "pv-node1a"),), ())


# --- release switches ----------------------------------------------------------------------


def test_deferred_resize_skips() -> None:
    pod = make_pod(
        "unbound-pvc",
        conditions=[{"type": "PodResizePending", "status": "True", "reason": "Deferred"}],
    )
    snap = storage((unbound_pvc,))
    assert volumebinding.pre_filter(pod, snap, skip_deferred_resize=True) is None
    assert volumebinding.pre_filter(pod, snap) is not None


def test_pod_without_volumes_is_skipped_at_once() -> None:
    """O(1) for a pod without volumes: the storage is not even looked at."""
    snap = Snapshot(storage=Storage(claims=Exploding(), volumes=Exploding()))
    assert volumebinding.pre_filter(make_pod(), snap) is None


class Exploding(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise AssertionError("looked up")

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("listed")

    def __len__(self) -> int:
        raise AssertionError("counted")
