"""The one key type of objects in caches, queues and ledgers: (namespace, name).

A tuple, so kopf-style index keys and our stores agree; ``str()`` gives the "ns/name" that
messages and logs use (the same as ``ObjectMeta.key``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple


class ObjectKey(NamedTuple):
    """namespace "" for cluster-scoped objects."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> ObjectKey:
        """The key of a raw object (a watch event's body, a listed item)."""
        meta = body.get("metadata") or {}
        return cls(meta.get("namespace") or "", meta.get("name") or "")

    @classmethod
    def parse(cls, text: str) -> ObjectKey:
        """Inverse of ``str()``: "ns/name" or a cluster-scoped "name"."""
        namespace, _, name = text.rpartition("/")
        return cls(namespace, name)


def controller_pod(body: Mapping[str, Any]) -> tuple[str, str] | None:
    """(name, uid) of the pod that controls this object, if any (generated claims)."""
    for ref in (body.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "Pod" and ref.get("apiVersion") == "v1":
            return ref.get("name") or "", ref.get("uid") or ""
    return None


def controller_group(body: Mapping[str, Any]) -> tuple[str, str] | None:
    """(name, uid) of the PodGroup that controls this object, if any (claims generated for a
    PodGroup's template entries): kind PodGroup of any ``scheduling.k8s.io`` version, as
    upstream's claimPodGroupOwnerIndex has it."""
    for ref in (body.get("metadata") or {}).get("ownerReferences") or []:
        if (
            ref.get("controller")
            and ref.get("kind") == "PodGroup"
            and (ref.get("apiVersion") or "").startswith("scheduling.k8s.io/")
        ):
            return ref.get("name") or "", ref.get("uid") or ""
    return None
