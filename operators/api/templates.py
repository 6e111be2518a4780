"""A pod's claim rendered from its ResourceClaimTemplate, as kube-controller-manager creates it.

Pure, so that both the claim-template controller (which creates the claim) and ``simulate``
(which generates it in memory for a pod the controller has not served yet) render the same
object: generateName ``<pod>-<entry>-`` truncated proportionally to 57 characters, the
annotation ``resource.kubernetes.io/pod-claim-name``, and a controlling owner reference to the
pod.
"""

from __future__ import annotations

from typing import Any

from operators.api.core import Pod
from operators.api.names import POD_CLAIM_NAME_ANNOTATION
from operators.api.resource import ResourceClaimTemplate

MAX_GENERATE_NAME_BASE = 57  # 63 minus a hyphen and 5 random characters


def generate_name(pod_name: str, entry: str) -> str:
    """kube-controller-manager's generateName for a pod's claim."""
    base = f"{pod_name}-{entry}-"
    if len(base) <= MAX_GENERATE_NAME_BASE:
        return base
    # Truncate both parts proportionally (the API server would cut the entry name away).
    total = len(base)
    return (
        pod_name[: len(pod_name) * MAX_GENERATE_NAME_BASE // total]
        + "-"
        + entry[: len(entry) * MAX_GENERATE_NAME_BASE // total]
    )


def claim_from_template(pod: Pod, entry: str, template: ResourceClaimTemplate) -> dict[str, Any]:
    """The ResourceClaim body kube-controller-manager would create for this entry."""
    template_meta = template.spec.metadata
    annotations = dict(template_meta.annotations)
    annotations[POD_CLAIM_NAME_ANNOTATION] = entry
    metadata: dict[str, Any] = {
        "generateName": generate_name(pod.metadata.name or "", entry),
        "namespace": pod.metadata.namespace,
        "annotations": annotations,
        "ownerReferences": [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod.metadata.name,
                "uid": pod.metadata.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if template_meta.labels:
        metadata["labels"] = dict(template_meta.labels)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": metadata,
        "spec": template.spec.spec.dump(),
    }
