"""A GPU pod with a volume whose StorageClass waits for the first consumer, on real kubelets.

The local volume exists on one node only; the claim names no volume. kopf-dra places the pod
where both its GPU and its volume can be, binds the volume to the claim at PreBind (the PV's
claimRef), kube-controller-manager's PV controller of the control plane's release binds the
claim, and the kubelet mounts the volume: the container reads a file from it and sees its GPU.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from e2e.node.test_real_node import running
from operators.demo.bringup import E2E_NODES, System, ensure_default_service_account
from operators.kube.api import KubeAPI
from operators.localcluster import realnode
from tests.integration.helpers import eventually, unique, upstream

GPU_CLASS = "gpu.example.kopf-dra.io"
HOSTNAME = "kubernetes.io/hostname"


def objects(name: str, node: str, path: Path) -> list[dict[str, Any]]:
    """The namespace, class, volume, claim, GPU template and pod of the scenario."""
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": name},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": name,
                "local": {"path": str(path)},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": HOSTNAME, "operator": "In", "values": [node]}
                                ]
                            }
                        ]
                    }
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "dataset", "namespace": name},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": name,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpu", "namespace": name},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS}}]
                    }
                }
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "trainer", "namespace": name},
            "spec": {
                "schedulerName": "kopf-dra",
                "terminationGracePeriodSeconds": 1,
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox:1.36",
                        "command": [
                            "sh",
                            "-c",
                            "cat /data/hello; env | grep ^KOPF_DRA_DEVICE | sort; exec sleep 86400",
                        ],
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                        "resources": {"claims": [{"name": "gpu"}]},
                    }
                ],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "dataset"}}],
            },
        },
    ]


async def _state(kube: KubeAPI, name: str) -> str:
    """What the pod, the claim, the volume and the namespace's events say (a failure's
    message)."""
    pod = await kube.get("Pod", "trainer", name)
    pvc = await kube.get("PersistentVolumeClaim", "dataset", name)
    pv = await kube.get("PersistentVolume", name)
    events = [
        f"{e.get('reason')}: {e.get('message')}" for e in (await kube.list("Event", name))["items"]
    ]
    return (
        f"pod: node {pod['spec'].get('nodeName')}, status {pod.get('status')}\n"
        f"claim: {pvc['spec'].get('volumeName')} {pvc.get('status')} "
        f"{pvc['metadata'].get('annotations')}\n"
        f"volume: claimRef {pv['spec'].get('claimRef')} {pv.get('status')}\n"
        f"events: {events}"
    )


async def test_a_gpu_pod_with_a_delayed_binding_volume_runs_where_its_volume_is(
    kube: KubeAPI, kubeconfig: Path, system: System, real_nodes: realnode.RealNodes
) -> None:
    node = E2E_NODES[1].name
    name = unique("late-volume")
    path = Path(tempfile.mkdtemp(prefix="kopf-dra-local-volume-"))
    (path / "hello").write_text("hello from the local volume\n")
    created = []
    try:
        with upstream(kubeconfig, None):  # the PV controller
            for body in objects(name, node, path):
                await kube.create(body)
                created.append(body)
                if body["kind"] == "Namespace":  # what kube-controller-manager would add
                    await ensure_default_service_account(kube, name)

            async def runs() -> dict[str, Any] | None:
                pod = await kube.get("Pod", "trainer", name)
                return pod if running(pod) else None

            try:
                pod = await eventually(runs, within=180, what="the trainer running")
            except AssertionError as e:
                raise AssertionError(f"{e}\n{await _state(kube, name)}") from None
            assert pod["spec"]["nodeName"] == node
            pvc = await kube.get("PersistentVolumeClaim", "dataset", name)
            assert (pvc["spec"]["volumeName"], pvc["status"]["phase"]) == (name, "Bound")

            async def logged() -> str | None:
                text = await kube.pod_log(name, "trainer")
                return text if "KOPF_DRA_DEVICE_" in text else None

            log = await eventually(logged, within=60, what="the trainer's log")
            assert "hello from the local volume" in log, log
            print(f"\ndelayed-binding volume: trainer on {node}; log:\n{log}")
    finally:
        for body in reversed(created):
            meta = body["metadata"]
            if body["kind"] in ("Pod", "PersistentVolumeClaim", "PersistentVolume", "StorageClass"):
                await kube.delete(body["kind"], meta["name"], meta.get("namespace"))
        shutil.rmtree(path, ignore_errors=True)
