"""A claim rendered from its ResourceClaimTemplate, as kube-controller-manager creates it, for a
pod's entry or (1.37's DRAWorkloadResourceClaims) a PodGroup's.

Pure, so that both the claim-template controller (which creates the claim) and ``simulate``
(which generates it in memory for a pod the controller has not served yet) render the same
object: generateName ``<owner>-<entry>-`` truncated proportionally to 57 characters, the
annotation ``resource.kubernetes.io/pod-claim-name`` (the same key for a PodGroup's entry), and
a controlling owner reference to the pod or the PodGroup.
"""

from __future__ import annotations

from typing import Any

from operators.api.core import Pod
from operators.api.groups import API_VERSION as GROUP_API_VERSION
from operators.api.groups import PodGroup
from operators.api.names import DELETE_PROTECTION_FINALIZER, POD_CLAIM_NAME_ANNOTATION
from operators.api.resource import ResourceClaimTemplate

MAX_GENERATE_NAME_BASE = 57  # 63 minus a hyphen and 5 random characters


def generate_name(owner_name: str, entry: str) -> str:
    """kube-controller-manager's generateName for a pod's (or a PodGroup's) claim."""
    base = f"{owner_name}-{entry}-"
    if len(base) <= MAX_GENERATE_NAME_BASE:
        return base
    # Truncate both parts proportionally (the API server would cut the entry name away).
    total = len(base)
    return (
        owner_name[: len(owner_name) * MAX_GENERATE_NAME_BASE // total]
        + "-"
        + entry[: len(entry) * MAX_GENERATE_NAME_BASE // total]
    )


def owner_reference(owner: Pod | PodGroup) -> dict[str, Any]:
    """The controlling reference kube-controller-manager sets: a pod blocks its claim's
    deletion in the foreground, a PodGroup does not (upstream leaves blockOwnerDeletion out)."""
    if isinstance(owner, PodGroup):
        return {
            "apiVersion": GROUP_API_VERSION,
            "kind": "PodGroup",
            "name": owner.metadata.name,
            "uid": owner.metadata.uid,
            "controller": True,
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": owner.metadata.name,
        "uid": owner.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def claim_from_template(
    owner: Pod | PodGroup, entry: str, template: ResourceClaimTemplate
) -> dict[str, Any]:
    """The ResourceClaim body kube-controller-manager would create for this entry, with the
    delete-protection finalizer already on. kube-controller-manager leaves it to the scheduler,
    which adds it before its allocation: one more write per bound pod, and one more watch event
    for every watcher of claims. Created with it, the claim is protected the same from the time
    it is allocated, and the reservation cleanup removes it from a claim being deleted that is
    not allocated, as from any other."""
    template_meta = template.spec.metadata
    annotations = dict(template_meta.annotations)
    annotations[POD_CLAIM_NAME_ANNOTATION] = entry
    metadata: dict[str, Any] = {
        "generateName": generate_name(owner.metadata.name or "", entry),
        "namespace": owner.metadata.namespace,
        "annotations": annotations,
        "ownerReferences": [owner_reference(owner)],
        "finalizers": [DELETE_PROTECTION_FINALIZER],
    }
    if template_meta.labels:
        metadata["labels"] = dict(template_meta.labels)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": metadata,
        "spec": template.spec.spec.dump(),
    }
