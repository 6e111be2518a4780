"""VolumeBinding (``pkg/scheduler/framework/plugins/volumebinding``, v1.37.2): a pod's PVCs
against a node, and the writes that bind or provision them once a node is chosen.

PreFilter sorts the pod's claims into bound, unbound with delayed binding
(WaitForFirstConsumer) and unbound immediate ones (the PV controller's job: the pod waits).
Filter (``find``) checks the bound PVs' node affinity, matches each delayed claim to the
smallest fitting available PV that the node can reach (never the same PV twice for one pod),
and otherwise checks that the class can provision there (provisioner, allowedTopologies,
CSIStorageCapacity). The result, ``PodVolumes``, is what Reserve assumes (``assume``) and
PreBind writes (``static_binding_patch``, ``provisioning_patch``) and then waits on
(``bound``). Score (StorageCapacityScoring, beta and on in 1.37) rates the utilisation of the
matched PVs, or of the provisioning capacity.

Everything is pure: the caller's Snapshot is upstream's informer caches *and* assume caches
(PVs and PVCs written by an earlier pod's Reserve must be in it), CSIDriver objects come in as
``capacity_tracked``, and nothing is cached across snapshots.

Also the storage helpers the other volume plugins share (``component-helpers/storage/volume``).

Release differences (keyword flags, 1.37 defaults):

* ``storage_capacity_scoring`` (score): StorageCapacityScoring is beta and on in 1.37; in
  1.36 it is alpha and off, and VolumeBinding does not score at all.
* ``exact_capacity`` (pre_filter): 1.38 compares a claim's request with a CSIStorageCapacity
  exactly; 1.36/1.37 compare both rounded up to whole bytes (``Quantity.Value()``).
* ``skip_deferred_resize`` (pre_filter): 1.37's alpha
  InPlacePodVerticalScalingSchedulerPreemption (off): a pod whose resize is deferred skips
  the plugin. Not in 1.36.

Left out: in-tree PVs migrated to CSI (``tryTranslatePVToCSI``: a gcePersistentDisk or EBS PV
on a node whose CSINode lists the plugin as migrated is checked against the CSI driver's
topology labels); such PVs are checked with their own node affinity.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Final

from operators.allocator.errors import InvalidNodeSelectorError
from operators.allocator.nodes import selector_matches
from operators.api.core import (
    LabelSelector,
    Node,
    NodeSelector,
    ObjectReference,
    Pod,
    Volume,
)
from operators.api.meta import ObjectMeta
from operators.api.quantity import Quantity
from operators.api.storage import (
    NO_PROVISIONER,
    SELECTED_NODE_ANNOTATION,
    WAIT_FOR_FIRST_CONSUMER,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    TopologySelectorTerm,
)
from operators.cel.library.strings import go_quote
from operators.scheduling.plugins import Unresolvable
from operators.scheduling.snapshot import Snapshot

ERR_REASON_NODE_CONFLICT: Final = "node(s) didn't match PersistentVolume's node affinity"
ERR_REASON_BIND_CONFLICT: Final = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NOT_ENOUGH_SPACE: Final = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST: Final = (
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
)
UNBOUND_IMMEDIATE: Final = "pod has unbound immediate PersistentVolumeClaims"
#: What PreBind reports when the PV controller has not finished within the bind timeout.
BIND_TIMEOUT: Final = "binding volumes: context deadline exceeded"
#: VolumeBindingArgs.bindTimeoutSeconds' default.
DEFAULT_BIND_TIMEOUT_SECONDS: Final = 600

ANN_BIND_COMPLETED: Final = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER: Final = "pv.kubernetes.io/bound-by-controller"
BETA_STORAGE_CLASS_ANNOTATION: Final = "volume.beta.kubernetes.io/storage-class"
READ_WRITE_ONCE_POD: Final = "ReadWriteOncePod"

#: Score shape points (utilization %, node score 0..100), as the plugin uses them once
#: VolumeBindingArgs' points (score 0..10) are scaled by MaxNodeScore / MaxCustomPriorityScore.
Shape = Sequence[tuple[int, int]]
#: 1.37's default VolumeBindingArgs.shape ({0, 10}, {100, 0}), scaled: the least utilised
#: static PVs (or provisioning capacity) score highest.
DEFAULT_SHAPE: Final[Shape] = ((0, 100), (100, 0))
_MAX_UTILIZATION = 100
_SCORE_SCALE = 10  # MaxNodeScore (100) / MaxCustomPriorityScore (10)


class VolumeBindingError(Exception):
    """Upstream's Error status (not a node's rejection): a claim without a class, a class
    without a binding mode, an unusable selector. The attempt fails, whatever the node."""


# --- shared storage helpers (component-helpers/storage/volume, ephemeral) ------------------


def claim_class(pvc: PersistentVolumeClaim) -> str:
    """GetPersistentVolumeClaimClass: the beta annotation wins over spec.storageClassName."""
    annotated = pvc.metadata.annotations.get(BETA_STORAGE_CLASS_ANNOTATION)
    if annotated is not None:
        return annotated
    return pvc.spec.storage_class_name or ""


def volume_class(pv: PersistentVolume) -> str:
    """GetPersistentVolumeClass: the beta annotation wins over spec.storageClassName."""
    annotated = pv.metadata.annotations.get(BETA_STORAGE_CLASS_ANNOTATION)
    if annotated is not None:
        return annotated
    return pv.spec.storage_class_name or ""


def not_found(resource: str, name: str) -> str:
    """An informer lister's NotFound message (``persistentvolumeclaim "x" not found``)."""
    return f"{resource} {go_quote(name)} not found"


def resize_deferred(pod: Pod) -> bool:
    """IsPodResizeDeferred: the first PodResizePending condition says Deferred."""
    for condition in pod.status.conditions:
        if condition.type == "PodResizePending":
            return condition.reason == "Deferred"
    return False


def pod_claim(pod: Pod, volume: Volume) -> tuple[str, bool] | None:
    """(PVC name, generic ephemeral?) of a claim-backed volume, None for other sources."""
    if volume.persistent_volume_claim is not None:
        return volume.persistent_volume_claim.claim_name or "", False
    if volume.ephemeral is not None:
        return f"{pod.metadata.name or ''}-{volume.name or ''}", True
    return None


def not_for_pod(pod: Pod, pvc: PersistentVolumeClaim) -> str | None:
    """ephemeral.VolumeIsForPod: why a generic ephemeral volume's PVC is not the pod's."""
    ref = pvc.metadata.controller_ref()
    if (
        pvc.metadata.namespace != pod.metadata.namespace
        or ref is None
        or ref.uid != pod.metadata.uid
    ):
        return (
            f"PVC {pvc.metadata.namespace or ''}/{pvc.metadata.name or ''} was not created for"
            f" pod {pod.metadata.namespace or ''}/{pod.metadata.name or ''} (pod is not owner)"
        )
    return None


def fully_bound(pvc: PersistentVolumeClaim) -> bool:
    """The PV controller has finished binding: a volume name and bind-completed."""
    return bool(pvc.spec.volume_name) and ANN_BIND_COMPLETED in pvc.metadata.annotations


def node_affinity_matches(pv: PersistentVolume, labels: Mapping[str, str]) -> bool:
    """CheckNodeAffinity: the PV's required node affinity against the node's labels only.

    Upstream matches a Node built from the labels alone, so a ``metadata.name`` field
    requirement never matches; a term that does not parse is skipped, as
    LazyErrorNodeSelector does.
    """
    affinity = pv.spec.node_affinity
    if affinity is None or affinity.required is None:
        return True
    labelled = Node(metadata=ObjectMeta(labels=dict(labels)))
    for term in affinity.required.node_selector_terms:
        try:
            if selector_matches(NodeSelector(node_selector_terms=[term]), labelled):
                return True
        except InvalidNodeSelectorError:
            continue
    return False


def selector_error(selector: LabelSelector) -> str | None:
    """Why LabelSelectorAsSelector would refuse a selector (None: it converts)."""
    for r in selector.match_expressions:
        if r.operator in ("In", "NotIn"):
            if not r.values:
                return (
                    "values: Invalid value: []string(nil): "
                    "for 'in', 'notin' operators, values set can't be empty"
                )
        elif r.operator in ("Exists", "DoesNotExist"):
            if r.values:
                values = ", ".join(go_quote(v) for v in r.values)
                return (
                    f"values: Invalid value: []string{{{values}}}: "
                    "values set must be empty for exists and does not exist"
                )
        else:
            return f"{go_quote(r.operator or '')} is not a valid label selector operator"
    return None


def label_selector_matches(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    """A LabelSelector that converts, matched against labels (an empty one matches all)."""
    return selector_error(selector) is None and selector.matches(dict(labels))


def _whole(quantity: Quantity | None) -> int:
    """resource.Quantity.Value(): the value rounded up to an integer (0 when missing)."""
    return 0 if quantity is None else math.ceil(quantity.value)


def _storage(requests: Mapping[str, Quantity]) -> Quantity:
    return requests.get("storage") or Quantity(0)


# --- matching a claim to a PV (pkg/controller/volume/persistentvolume/util) ----------------


def bound_to_claim(pv: PersistentVolume, pvc: PersistentVolumeClaim) -> bool:
    """IsVolumeBoundToClaim: the PV's claimRef names the claim (and its UID, when set)."""
    ref = pv.spec.claim_ref
    if ref is None:
        return False
    if (ref.name or "") != (pvc.metadata.name or "") or (ref.namespace or "") != (
        pvc.metadata.namespace or ""
    ):
        return False
    return not ref.uid or ref.uid == (pvc.metadata.uid or "")


def volume_mode_mismatch(pvc: PersistentVolumeClaim, pv: PersistentVolume) -> bool:
    """CheckVolumeModeMismatches: an unset mode is Filesystem on either side."""
    return (pvc.spec.volume_mode or "Filesystem") != (pv.spec.volume_mode or "Filesystem")


def access_modes_satisfied(pvc: PersistentVolumeClaim, pv: PersistentVolume) -> bool:
    """CheckAccessModes: the PV offers every access mode the claim asks for."""
    offered = set(pv.spec.access_modes)
    return all(mode in offered for mode in pvc.spec.access_modes)


def find_matching_volume(
    pvc: PersistentVolumeClaim,
    volumes: Iterable[PersistentVolume],
    node: Node,
    excluded: Iterable[str] = (),
) -> PersistentVolume | None:
    """FindMatchingVolume on the scheduler's path (a node, delayed binding, VAC on): the PV
    pre-bound to the claim if the node can reach it, else the smallest available PV of the
    claim's class that fits (size, volume mode, attributes class, selector, access modes,
    node affinity); the first of equal sizes wins."""
    skip = set(excluded)
    requested = _storage(pvc.spec.resources.requests)
    requested_class = claim_class(pvc)
    selector = pvc.spec.selector
    if selector is not None and (err := selector_error(selector)) is not None:
        key = f"{pvc.metadata.namespace or ''}/{pvc.metadata.name or ''}"
        raise VolumeBindingError(f"error creating internal label selector for claim: {key}: {err}")
    claim_vac = pvc.spec.volume_attributes_class_name or ""
    labels = node.metadata.labels
    smallest: PersistentVolume | None = None
    smallest_size = Quantity(0)
    for pv in volumes:
        if (pv.metadata.name or "") in skip:
            continue
        if pv.spec.claim_ref is not None and not bound_to_claim(pv, pvc):
            continue
        size = _storage(pv.spec.capacity)
        if size < requested:
            continue
        if volume_mode_mismatch(pvc, pv):
            continue
        if claim_vac != (pv.spec.volume_attributes_class_name or ""):
            continue
        if pv.metadata.deletion_timestamp is not None:
            continue
        reachable = node_affinity_matches(pv, labels)
        if bound_to_claim(pv, pvc):
            return pv if reachable else None
        if pv.status.phase != "Available":
            continue
        if selector is not None and not selector.matches(pv.metadata.labels):
            continue
        if volume_class(pv) != requested_class:
            continue
        if not reachable or not access_modes_satisfied(pvc, pv):
            continue
        if smallest is None or size < smallest_size:
            smallest, smallest_size = pv, size
    return smallest


# --- state and results ---------------------------------------------------------------------


def _untracked(_driver: str) -> bool:
    return False


@dataclasses.dataclass(frozen=True)
class VolumeBindingState:
    """PreFilter's sorting of the pod's claims (upstream's PodVolumeClaims), with the PVs
    of each delayed claim's class, and the knobs Filter needs."""

    bound_claims: tuple[PersistentVolumeClaim, ...]
    delayed_claims: tuple[PersistentVolumeClaim, ...]
    delayed_volumes: Mapping[str, tuple[PersistentVolume, ...]]
    """PVs by class, for the classes of the delayed claims."""
    capacity_tracked: Callable[[str], bool] = _untracked
    exact_capacity: bool = False


@dataclasses.dataclass(frozen=True)
class Binding:
    """A delayed claim matched to an existing PV (upstream's BindingInfo)."""

    pvc: PersistentVolumeClaim
    pv: PersistentVolume


@dataclasses.dataclass(frozen=True)
class Provision:
    """A delayed claim to provision on the node (DynamicProvision); ``capacity`` is the
    CSIStorageCapacity that admitted it, when the driver tracks capacity."""

    pvc: PersistentVolumeClaim
    capacity: CSIStorageCapacity | None = None


@dataclasses.dataclass(frozen=True)
class PodVolumes:
    """What a node needs done for the pod's delayed claims (upstream's PodVolumes)."""

    static_bindings: tuple[Binding, ...] = ()
    dynamic_provisions: tuple[Provision, ...] = ()


# --- PreFilter -----------------------------------------------------------------------------


def pre_filter(
    pod: Pod,
    snapshot: Snapshot,
    *,
    capacity_tracked: Callable[[str], bool] = _untracked,
    exact_capacity: bool = False,
    skip_deferred_resize: bool = False,
) -> VolumeBindingState | Unresolvable | None:
    """Sort the pod's claims; Unresolvable for a missing, lost, deleted or foreign claim, or
    an unbound immediate one; None (Skip) for a pod without claims.

    ``capacity_tracked(driver)``: whether that CSIDriver has ``storageCapacity: true`` (the
    CSIDriver objects are not in the Snapshot). Raises VolumeBindingError where upstream
    returns an Error status (a claim's class without volumeBindingMode).
    """
    volumes = pod.spec.volumes
    if not volumes:
        return None
    if skip_deferred_resize and resize_deferred(pod):
        return None
    storage = snapshot.storage
    namespace = pod.metadata.namespace or ""
    claims: list[PersistentVolumeClaim] = []
    for volume in volumes:
        ref = pod_claim(pod, volume)
        if ref is None:
            continue
        name, ephemeral = ref
        pvc = storage.claims.get(f"{namespace}/{name}")
        if pvc is None:
            if ephemeral:
                return Unresolvable(
                    "waiting for ephemeral volume controller to create the "
                    f"persistentvolumeclaim {go_quote(name)}"
                )
            return Unresolvable(not_found("persistentvolumeclaim", name))
        pvc_name = go_quote(pvc.metadata.name or "")
        if pvc.status.phase == "Lost":
            return Unresolvable(
                f"persistentvolumeclaim {pvc_name} bound to non-existent persistentvolume "
                f"{go_quote(pvc.spec.volume_name or '')}"
            )
        if pvc.metadata.deletion_timestamp is not None:
            return Unresolvable(f"persistentvolumeclaim {pvc_name} is being deleted")
        if ephemeral and (foreign := not_for_pod(pod, pvc)) is not None:
            return Unresolvable(foreign)
        claims.append(pvc)
    if not claims:
        return None

    bound: list[PersistentVolumeClaim] = []
    delayed: list[PersistentVolumeClaim] = []
    immediate = False
    for pvc in claims:
        if fully_bound(pvc):
            bound.append(pvc)
        elif _delayed(pvc, storage.classes) and not pvc.spec.volume_name:
            delayed.append(pvc)
        else:
            immediate = True  # pre-bound claims too: the PV controller finishes them
    if immediate:
        return Unresolvable(UNBOUND_IMMEDIATE)
    by_class: dict[str, tuple[PersistentVolume, ...]] = {}
    for pvc in delayed:
        cls = claim_class(pvc)
        if cls not in by_class:
            by_class[cls] = tuple(pv for pv in storage.volumes.values() if volume_class(pv) == cls)
    return VolumeBindingState(
        bound_claims=tuple(bound),
        delayed_claims=tuple(delayed),
        delayed_volumes=by_class,
        capacity_tracked=capacity_tracked,
        exact_capacity=exact_capacity,
    )


def _delayed(pvc: PersistentVolumeClaim, classes: Mapping[str, StorageClass]) -> bool:
    """IsDelayBindingMode: the claim's class exists and waits for the first consumer."""
    name = claim_class(pvc)
    if not name:
        return False
    cls = classes.get(name)
    if cls is None:
        return False
    if cls.volume_binding_mode is None:
        raise VolumeBindingError(f"VolumeBindingMode not set for StorageClass {go_quote(name)}")
    return cls.volume_binding_mode == WAIT_FOR_FIRST_CONSUMER


# --- Filter --------------------------------------------------------------------------------


def filter(state: VolumeBindingState, pod: Pod, node: Node, snapshot: Snapshot) -> str | None:
    """Upstream's Filter: the node's reasons, joined with ", " in upstream's order."""
    found = find(state, pod, node, snapshot)
    return found if isinstance(found, str) else None


def resolvable(reason: str) -> bool:
    """Every reason of this Filter is UnschedulableAndUnresolvable: preemption cannot help."""
    del reason
    return False


def find(state: VolumeBindingState, pod: Pod, node: Node, snapshot: Snapshot) -> PodVolumes | str:
    """FindPodVolumes: what the node needs done for the pod's claims, or why it cannot.

    Raises VolumeBindingError where upstream returns an Error status (a claim to provision
    without a class or with a missing one).
    """
    node_ok, bound_found = True, True
    if state.bound_claims:
        node_ok, bound_found = _check_bound(state.bound_claims, node, snapshot)
    unbound_ok, enough, volumes = True, True, PodVolumes()
    if state.delayed_claims:
        unbound_ok, enough, volumes = _find_unbound(state, node, snapshot)
    reasons = [
        reason
        for reason, failed in (
            (ERR_REASON_NODE_CONFLICT, not node_ok),
            (ERR_REASON_BIND_CONFLICT, not unbound_ok),
            (ERR_REASON_NOT_ENOUGH_SPACE, not enough),
            (ERR_REASON_PV_NOT_EXIST, not bound_found),
        )
        if failed
    ]
    return ", ".join(reasons) if reasons else volumes


def _check_bound(
    claims: Sequence[PersistentVolumeClaim], node: Node, snapshot: Snapshot
) -> tuple[bool, bool]:
    """checkBoundClaims: (node affinity satisfied, PVs found), stopping at the first miss."""
    for pvc in claims:
        pv = snapshot.storage.volumes.get(pvc.spec.volume_name or "")
        if pv is None:
            return True, False
        if not node_affinity_matches(pv, node.metadata.labels):
            return False, True
    return True, True


def _find_unbound(
    state: VolumeBindingState, node: Node, snapshot: Snapshot
) -> tuple[bool, bool, PodVolumes]:
    """(satisfied, enough storage, volumes) for the delayed claims on the node."""
    to_match: list[PersistentVolumeClaim] = []
    to_provision: list[PersistentVolumeClaim] = []
    for pvc in state.delayed_claims:
        selected = pvc.metadata.annotations.get(SELECTED_NODE_ANNOTATION)
        if selected is None:
            to_match.append(pvc)
        elif selected != node.metadata.name:
            return False, True, PodVolumes()  # already being provisioned for another node
        else:
            to_provision.append(pvc)
    satisfied, enough = True, True
    bindings: tuple[Binding, ...] = ()
    provisions: tuple[Provision, ...] = ()
    if to_match:
        satisfied, bindings, unmatched = _match(to_match, state.delayed_volumes, node)
        to_provision.extend(unmatched)
    if to_provision:
        satisfied, enough, provisions = _check_provisions(to_provision, node, snapshot, state)
    return satisfied, enough, PodVolumes(bindings, provisions)


def _match(
    claims: Sequence[PersistentVolumeClaim],
    volumes: Mapping[str, Sequence[PersistentVolume]],
    node: Node,
) -> tuple[bool, tuple[Binding, ...], list[PersistentVolumeClaim]]:
    """findMatchingVolumes: smallest claims first, each PV chosen at most once."""
    chosen: set[str] = set()
    bindings: list[Binding] = []
    unmatched: list[PersistentVolumeClaim] = []
    for pvc in sorted(claims, key=lambda c: _storage(c.spec.resources.requests).value):
        pv = find_matching_volume(pvc, volumes.get(claim_class(pvc), ()), node, chosen)
        if pv is None:
            unmatched.append(pvc)
            continue
        chosen.add(pv.metadata.name or "")
        bindings.append(Binding(pvc=pvc, pv=pv))
    return not unmatched, tuple(bindings), unmatched


def _check_provisions(
    claims: Sequence[PersistentVolumeClaim],
    node: Node,
    snapshot: Snapshot,
    state: VolumeBindingState,
) -> tuple[bool, bool, tuple[Provision, ...]]:
    """checkVolumeProvisions: (provisionable, enough storage, provisions), stopping at the
    first claim that fails."""
    provisions: list[Provision] = []
    for pvc in claims:
        name = claim_class(pvc)
        if not name:
            key = f"{pvc.metadata.namespace or ''}/{pvc.metadata.name or ''}"
            raise VolumeBindingError(f"no class for claim {go_quote(key)}")
        cls = snapshot.storage.classes.get(name)
        if cls is None:
            raise VolumeBindingError(f"failed to find storage class {go_quote(name)}")
        provisioner = cls.provisioner or ""
        if not provisioner or provisioner == NO_PROVISIONER:
            return False, True, ()
        if not topology_matches(cls.allowed_topologies, node.metadata.labels):
            return False, True, ()
        sufficient, capacity = _capacity_for(provisioner, pvc, cls, node, snapshot, state)
        if not sufficient:
            return True, False, ()
        provisions.append(Provision(pvc=pvc, capacity=capacity))
    return True, True, tuple(provisions)


def topology_matches(terms: Sequence[TopologySelectorTerm], labels: Mapping[str, str]) -> bool:
    """MatchTopologySelectorTerms: no terms match every node; an empty term (or one whose
    requirement has no values) matches none; terms are ORed, expressions ANDed (In)."""
    if not terms:
        return True
    for term in terms:
        exprs = term.match_label_expressions
        if not exprs or any(not r.values for r in exprs):
            continue
        if all((r.key or "") in labels and labels[r.key or ""] in r.values for r in exprs):
            return True
    return False


def _capacity_for(
    provisioner: str,
    pvc: PersistentVolumeClaim,
    cls: StorageClass,
    node: Node,
    snapshot: Snapshot,
    state: VolumeBindingState,
) -> tuple[bool, CSIStorageCapacity | None]:
    """hasEnoughCapacity: the first CSIStorageCapacity of the class, reachable from the node,
    whose maximumVolumeSize (else capacity) holds the request; only for drivers that track
    capacity, and only when the claim requests storage."""
    requested = pvc.spec.resources.requests.get("storage")
    if requested is None or not state.capacity_tracked(provisioner):
        return True, None
    labels = node.metadata.labels
    for capacity in snapshot.storage.capacities:
        if (
            capacity.storage_class_name == cls.metadata.name
            and _holds(capacity, requested, exact=state.exact_capacity)
            and capacity.node_topology is not None
            and label_selector_matches(capacity.node_topology, labels)
        ):
            return True, capacity
    return False, None


def _holds(capacity: CSIStorageCapacity, requested: Quantity, *, exact: bool) -> bool:
    limit = capacity.maximum_volume_size
    if limit is None:
        limit = capacity.capacity
    if limit is None:
        return False
    if exact:
        return not limit < requested
    return _whole(limit) >= _whole(requested)


# --- Score ---------------------------------------------------------------------------------


def shape_from_args(points: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """VolumeBindingArgs.shape points (utilization, score 0..10) in node-score units."""
    return tuple((utilization, score * _SCORE_SCALE) for utilization, score in points)


def score(
    volumes: PodVolumes | None,
    *,
    shape: Shape = DEFAULT_SHAPE,
    storage_capacity_scoring: bool = True,
) -> int | None:
    """Score for a node given what ``find`` returned there (None: the pod has no claims or
    nothing to bind). None when the plugin does not score (StorageCapacityScoring off).

    Static bindings are scored by requested/capacity of the matched PVs per class; without
    any, the provisions admitted by a CSIStorageCapacity by requested/capacity of the
    class's capacity on the node. Classes weigh the same; the mean is rounded half up.
    """
    if not storage_capacity_scoring:
        return None
    if volumes is None:
        return 0
    by_class: dict[str, list[int]] = {}  # class -> [requested, capacity]
    if volumes.static_bindings:
        for binding in volumes.static_bindings:
            entry = by_class.setdefault(binding.pv.spec.storage_class_name or "", [0, 0])
            entry[0] += _whole(binding.pvc.spec.resources.requests.get("storage"))
            entry[1] += _whole(binding.pv.spec.capacity.get("storage"))
    else:
        for provision in volumes.dynamic_provisions:
            if provision.capacity is None:
                continue
            entry = by_class.setdefault(provision.pvc.spec.storage_class_name or "", [0, 0])
            # assigned, not added: two claims of a class share the class's capacity
            entry[1] = _whole(provision.capacity.capacity)
            entry[0] += _whole(provision.pvc.spec.resources.requests.get("storage"))
    return _score_classes(by_class.values(), shape)


def _score_classes(resources: Iterable[Sequence[int]], shape: Shape) -> int:
    scores = [_class_score(requested, capacity, shape) for requested, capacity in resources]
    if not scores:
        return 0
    mean = Decimal(sum(scores)) / Decimal(len(scores))
    return int(mean.to_integral_value(rounding=ROUND_HALF_UP))  # Go's math.Round


def _class_score(requested: int, capacity: int, shape: Shape) -> int:
    if capacity == 0 or requested > capacity:
        return broken_linear(_MAX_UTILIZATION, shape)
    return broken_linear(go_div(requested * _MAX_UTILIZATION, capacity), shape)


def broken_linear(p: int, shape: Shape) -> int:
    """helper.BuildBrokenLinearFunction with Go's integer division."""
    for i, (utilization, value) in enumerate(shape):
        if p <= utilization:
            if i == 0:
                return value
            prev_utilization, prev_value = shape[i - 1]
            return prev_value + go_div(
                (value - prev_value) * (p - prev_utilization), utilization - prev_utilization
            )
    return shape[-1][1]


def go_div(a: int, b: int) -> int:
    """Integer division truncating toward zero, as Go's."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


# --- Reserve and PreBind -------------------------------------------------------------------


def all_bound(pod: Pod, snapshot: Snapshot) -> bool:
    """arePodVolumesBound: every claim of the pod is fully bound (a missing or foreign one
    is not)."""
    namespace = pod.metadata.namespace or ""
    for volume in pod.spec.volumes:
        ref = pod_claim(pod, volume)
        if ref is None:
            continue
        pvc = snapshot.storage.claims.get(f"{namespace}/{ref[0]}")
        if pvc is None or (ref[1] and not_for_pod(pod, pvc) is not None):
            return False
        if not fully_bound(pvc):
            return False
    return True


def bind_volume_to_claim(
    pv: PersistentVolume, pvc: PersistentVolumeClaim
) -> tuple[PersistentVolume, bool]:
    """GetBindVolumeToClaim: a copy of the PV with its claimRef on the claim (and
    bound-by-controller unless the user pre-bound it), and whether anything changed."""
    new = pv.model_copy(deep=True)
    dirty = False
    ref = pv.spec.claim_ref
    if (
        ref is None
        or (ref.name or "") != (pvc.metadata.name or "")
        or (ref.namespace or "") != (pvc.metadata.namespace or "")
        or (ref.uid or "") != (pvc.metadata.uid or "")
    ):
        new.spec.claim_ref = claim_reference(pvc)
        dirty = True
    if not bound_to_claim(pv, pvc) and ANN_BOUND_BY_CONTROLLER not in new.metadata.annotations:
        new.metadata.annotations[ANN_BOUND_BY_CONTROLLER] = "yes"
        dirty = True
    return new, dirty


def claim_reference(pvc: PersistentVolumeClaim) -> ObjectReference:
    """reference.GetReference for a claim: kind, apiVersion, namespace, name, uid and
    resourceVersion, the empty ones omitted."""
    fields = {
        "kind": "PersistentVolumeClaim",
        "namespace": pvc.metadata.namespace,
        "name": pvc.metadata.name,
        "uid": pvc.metadata.uid,
        "apiVersion": "v1",
        "resourceVersion": pvc.metadata.resource_version,
    }
    return ObjectReference.load({k: v for k, v in fields.items() if v})


def assume(pod: Pod, node_name: str, volumes: PodVolumes, snapshot: Snapshot) -> PodVolumes | None:
    """AssumePodVolumes (Reserve): the PVs bound to their claims and the claims annotated
    with the node, as the assume caches (the caller's next snapshots) and PreBind need them;
    None when every claim of the pod is already fully bound (PreBind has nothing to do)."""
    if all_bound(pod, snapshot):
        return None
    bindings = tuple(
        Binding(pvc=b.pvc, pv=bind_volume_to_claim(b.pv, b.pvc)[0]) for b in volumes.static_bindings
    )
    provisions = tuple(
        Provision(pvc=_selected(p.pvc, node_name)) for p in volumes.dynamic_provisions
    )
    return PodVolumes(static_bindings=bindings, dynamic_provisions=provisions)


def _selected(pvc: PersistentVolumeClaim, node_name: str) -> PersistentVolumeClaim:
    new = pvc.model_copy(deep=True)
    new.metadata.annotations[SELECTED_NODE_ANNOTATION] = node_name
    return new


def static_binding_patch(pv: PersistentVolume, pvc: PersistentVolumeClaim) -> dict[str, Any]:
    """The merge patch of PreBind's PV update (bindAPIUpdate): the claimRef, the
    bound-by-controller annotation where it is added, and the PV's resourceVersion as the
    precondition upstream's Update carries. PreBind writes every PV before any claim."""
    new, _ = bind_volume_to_claim(pv, pvc)
    assert new.spec.claim_ref is not None
    metadata: dict[str, Any] = {}
    if pv.metadata.resource_version:
        metadata["resourceVersion"] = pv.metadata.resource_version
    added = new.metadata.annotations.get(ANN_BOUND_BY_CONTROLLER)
    if added is not None and ANN_BOUND_BY_CONTROLLER not in pv.metadata.annotations:
        metadata["annotations"] = {ANN_BOUND_BY_CONTROLLER: added}
    patch: dict[str, Any] = {"spec": {"claimRef": new.spec.claim_ref.dump()}}
    if metadata:
        patch["metadata"] = metadata
    return patch


def provisioning_patch(pvc: PersistentVolumeClaim, node_name: str) -> dict[str, Any]:
    """The merge patch of PreBind's PVC update: the selected-node annotation the external
    provisioner acts on, with the claim's resourceVersion as precondition."""
    metadata: dict[str, Any] = {"annotations": {SELECTED_NODE_ANNOTATION: node_name}}
    if pvc.metadata.resource_version:
        metadata["resourceVersion"] = pvc.metadata.resource_version
    return {"metadata": metadata}


def bound(
    volumes: PodVolumes,
    node: Node,
    pvcs: Mapping[str, PersistentVolumeClaim],
    pvs: Mapping[str, PersistentVolume],
) -> bool:
    """checkBindings: whether the PV controller (and provisioners) finished what PreBind
    wrote. ``volumes`` holds the objects as written (the API server's replies), ``pvcs``
    ("ns/name") and ``pvs`` the current ones, ``node`` the pod's node.

    False: not yet (poll again, up to the bind timeout, then ``BIND_TIMEOUT``). Raises
    VolumeBindingError with PreBind's message when binding failed and the pod must be
    scheduled again (claimRef dropped, provisioning given up, node affinity broken). That the
    pod still exists is the caller's check.
    """
    labels = node.metadata.labels
    node_name = node.metadata.name or ""
    for binding in volumes.static_bindings:
        pv_name = binding.pv.metadata.name or ""
        pv = pvs.get(pv_name)
        if pv is None:
            raise _bind_failed(
                f"failed to check binding: {not_found('persistentvolumes', pv_name)}"
            )
        key = _key(binding.pvc)
        pvc = pvcs.get(key)
        if pvc is None:
            raise _bind_failed(
                f"failed to check binding: {not_found('persistentvolumeclaims', key)}"
            )
        if _version(binding.pv) > _version(pv):
            return False  # our write has not reached the cache yet
        if not node_affinity_matches(pv, labels):
            raise _affinity_broken(pv, node_name)
        if pv.spec.claim_ref is None or not pv.spec.claim_ref.uid:
            raise _bind_failed(f"ClaimRef got reset for pv {go_quote(pv_name)}")
        if not fully_bound(pvc):
            return False
    for provision in volumes.dynamic_provisions:
        key = _key(provision.pvc)
        pvc = pvcs.get(key)
        if pvc is None:
            raise _bind_failed(
                f"failed to check provisioning pvc: {not_found('persistentvolumeclaims', key)}"
            )
        if _version(provision.pvc) > _version(pvc):
            return False
        name = go_quote(pvc.metadata.name or "")
        if not pvc.metadata.annotations:
            raise _bind_failed(f"selectedNode annotation reset for PVC {name}")
        if pvc.metadata.annotations.get(SELECTED_NODE_ANNOTATION, "") != node_name:
            raise _bind_failed(f"provisioning failed for PVC {name}")
        if pvc.spec.volume_name:
            pv = pvs.get(pvc.spec.volume_name)
            if pv is None:
                return False  # tolerated: the PV may not have reached the cache yet
            if not node_affinity_matches(pv, labels):
                raise _affinity_broken(pv, node_name)
        if not fully_bound(pvc):
            return False
    return True


def _key(pvc: PersistentVolumeClaim) -> str:
    return f"{pvc.metadata.namespace or ''}/{pvc.metadata.name or ''}"


def _version(obj: PersistentVolume | PersistentVolumeClaim) -> int:
    try:
        return int(obj.metadata.resource_version or 0)
    except ValueError:
        return 0


def _bind_failed(message: str) -> VolumeBindingError:
    return VolumeBindingError(f"binding volumes: {message}")


def _affinity_broken(pv: PersistentVolume, node_name: str) -> VolumeBindingError:
    return _bind_failed(
        f"pv {go_quote(pv.metadata.name or '')} node affinity doesn't match node "
        f"{go_quote(node_name)}: no matching NodeSelectorTerms"
    )
