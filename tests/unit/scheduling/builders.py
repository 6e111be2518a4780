"""Pods, nodes and pod-owned claims for the scheduling tests, built as JSON (what a user writes).

Slices, classes, claims and allocation results come from tests/unit/allocator/builders.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from operators.allocator import AllocatedState, Allocator, Features
from operators.api.core import Node, Pod
from operators.api.resource import DeviceClass, ResourceClaim, ResourceSlice
from tests.unit.allocator.builders import FIXED_SHARE_ID
from tests.unit.allocator.engine import engine

J = dict[str, Any]

NS = "ns"
POD_UID = "pod-uid"
CLAIM_UID = "claim-uid"
BIG = {"cpu": "8", "memory": "16Gi", "ephemeral-storage": "100Gi", "pods": "110"}


def node(
    name: str = "node-1",
    *,
    labels: Mapping[str, str] | None = None,
    ready: str | None = "True",
    unschedulable: bool | None = None,
    taints: Sequence[J] = (),
    allocatable: Mapping[str, str] | None = None,
    declared_features: Sequence[str] = (),
) -> Node:
    spec: J = {}
    if unschedulable is not None:
        spec["unschedulable"] = unschedulable
    if taints:
        spec["taints"] = list(taints)
    status: J = {"allocatable": dict(BIG if allocatable is None else allocatable)}
    if ready is not None:
        status["conditions"] = [
            {"type": "MemoryPressure", "status": "False"},
            {"type": "Ready", "status": ready},
        ]
    if declared_features:
        status["declaredFeatures"] = list(declared_features)
    meta: J = {"name": name, "labels": dict(labels or {})}
    return Node.load({"metadata": meta, "spec": spec, "status": status})


def taint(key: str, value: str | None = None, effect: str = "NoSchedule") -> J:
    out: J = {"key": key, "effect": effect}
    if value is not None:
        out["value"] = value
    return out


def container(
    requests: Mapping[str, str] | None = None, *, sidecar: bool = False, name: str = "c"
) -> J:
    out: J = {"name": name, "image": "busybox"}
    if requests is not None:
        out["resources"] = {"requests": dict(requests)}
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


def required(*terms: J) -> J:
    """affinity with requiredDuringSchedulingIgnoredDuringExecution of these terms."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


def expr(key: str, operator: str, *values: str) -> J:
    out: J = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def term(*expressions: J, fields: Sequence[J] = ()) -> J:
    out: J = {}
    if expressions:
        out["matchExpressions"] = list(expressions)
    if fields:
        out["matchFields"] = list(fields)
    return out


def pod(
    name: str = "p",
    *,
    uid: str = POD_UID,
    containers: Sequence[J] = (),
    init_containers: Sequence[J] = (),
    overhead: Mapping[str, str] | None = None,
    pod_requests: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    affinity: J | None = None,
    tolerations: Sequence[J] = (),
    claims: Sequence[J] = (),
    claim_statuses: Sequence[J] = (),
) -> Pod:
    spec: J = {"schedulerName": "kopf-dra", "containers": list(containers) or [container()]}
    if init_containers:
        spec["initContainers"] = list(init_containers)
    if overhead:
        spec["overhead"] = dict(overhead)
    if pod_requests:
        spec["resources"] = {"requests": dict(pod_requests)}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if affinity:
        spec["affinity"] = affinity
    if tolerations:
        spec["tolerations"] = list(tolerations)
    if claims:
        spec["resourceClaims"] = list(claims)
    status: J = {"phase": "Pending"}
    if claim_statuses:
        status["resourceClaimStatuses"] = list(claim_statuses)
    meta = {"name": name, "namespace": NS, "uid": uid}
    return Pod.load({"metadata": meta, "spec": spec, "status": status})


def in_namespace(
    c: ResourceClaim,
    *,
    uid: str = CLAIM_UID,
    resource_version: str | None = None,
    owner: str | None = None,
    controller: bool = True,
    deleting: bool = False,
    allocation: J | None = None,
    reserved_for: Sequence[str] = (),
    devices: Sequence[J] = (),
) -> ResourceClaim:
    """``c`` (from the allocator builders) in namespace NS, with metadata and status."""
    obj = c.dump()
    meta = obj["metadata"]
    meta["namespace"] = NS
    meta["uid"] = uid
    if resource_version is not None:
        meta["resourceVersion"] = resource_version
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner, "controller": controller}
        ]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status: J = {}
    if allocation is not None:
        status["allocation"] = allocation
    if reserved_for:
        status["reservedFor"] = [
            {"resource": "pods", "name": f"pod-{u}", "uid": u} for u in reserved_for
        ]
    if devices:
        status["devices"] = list(devices)
    if status:
        obj["status"] = status
    return ResourceClaim.load(obj)


def allocator(
    classes: Sequence[DeviceClass],
    slices: Sequence[ResourceSlice],
    allocated: Sequence[ResourceClaim] = (),
    features: Features | None = None,
    kind: type[Allocator] = Allocator,
    out_of_time: Callable[[], bool] | None = None,
) -> Allocator:
    features = features or Features.all()
    return kind(
        features,
        AllocatedState.from_claims(allocated, features),
        classes,
        slices,
        engine(),
        share_ids=lambda: FIXED_SHARE_ID,
        out_of_time=out_of_time,
    )
