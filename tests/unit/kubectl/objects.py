"""A small cluster as the API server returns it, for the views of ``kubectl dra``."""

from __future__ import annotations

import datetime
from typing import Any

J = dict[str, Any]
NOW = datetime.datetime(2026, 11, 28, 12, 0, 0, tzinfo=datetime.UTC)
CREATED = "2026-11-28T11:55:00Z"  # five minutes before NOW
DRIVER = "gpu.example.com"


def node(name: str, **spec: Any) -> J:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": spec,
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
        },
    }


def device_class(name: str = "gpu") -> J:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }


def resource_slice(node_name: str, devices: list[J], *, pool: str | None = None, **spec: Any) -> J:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{pool or node_name}-{len(devices)}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": pool or node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
            **spec,
        },
    }


def claim(name: str, count: int = 1, namespace: str = "team-a", **status: Any) -> J:
    body: J = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": CREATED},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": count}}]
            }
        },
    }
    if status:
        body["status"] = status
    return body


def allocation(node_name: str, *devices: str, **result: Any) -> J:
    return {
        "devices": {
            "results": [
                {"request": "gpu", "driver": DRIVER, "pool": node_name, "device": d, **result}
                for d in devices
            ]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
            ]
        },
        "allocationTimestamp": CREATED,
    }


def pod(name: str, *claims: str, node_name: str | None = None, **spec: Any) -> J:
    body: J = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": f"uid-{name}",
            "creationTimestamp": CREATED,
        },
        "spec": {
            "schedulerName": "kopf-dra",
            "containers": [{"name": "main", "image": "busybox"}],
            "resourceClaims": [{"name": c, "resourceClaimName": c} for c in claims],
            **spec,
        },
        "status": {"phase": "Pending"},
    }
    if node_name:
        body["spec"]["nodeName"] = node_name
    return body


def gpus(n: int) -> list[J]:
    return [{"name": f"gpu-{i}"} for i in range(n)]


def cluster() -> list[J]:
    """Two nodes with two GPUs each; node-1's gpu-0 held by the bound pod ``runner``."""
    held = claim(
        "held",
        allocation=allocation("node-1", "gpu-0"),
        reservedFor=[{"resource": "pods", "name": "runner", "uid": "uid-runner"}],
    )
    return [
        node("node-1"),
        node("node-2"),
        device_class(),
        resource_slice("node-1", gpus(2)),
        resource_slice("node-2", gpus(2)),
        held,
        pod("runner", "held", node_name="node-1"),
    ]
