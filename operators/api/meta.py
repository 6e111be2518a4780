"""ObjectMeta and friends (meta/v1), shared by every kind.

Timestamps stay strings: the API server's RFC 3339 spelling round-trips exactly, and the pure
core never needs to do date arithmetic on metadata.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from operators.api.base import KubeModel


class OwnerReference(KubeModel):
    """Points at the object that owns this one (garbage collection, generated claims)."""

    api_version: str | None = None
    kind: str | None = None
    name: str | None = None
    uid: str | None = None
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(KubeModel):
    """metadata of every Kubernetes object; unknown fields (e.g. selfLink) are kept."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    owner_references: list[OwnerReference] = Field(default_factory=list)
    finalizers: list[str] = Field(default_factory=list)
    managed_fields: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def key(self) -> str:
        """ "ns/name" for namespaced objects, "name" for cluster-scoped ones (as kopf and logs)."""
        name = self.name or ""
        return f"{self.namespace}/{name}" if self.namespace else name

    @property
    def is_deleting(self) -> bool:
        """True once the API server has set a deletion timestamp."""
        return self.deletion_timestamp is not None

    def controller_ref(self) -> OwnerReference | None:
        """The owner reference with controller=true, if any (who generated this object)."""
        for ref in self.owner_references:
            if ref.controller:
                return ref
        return None


class Condition(KubeModel):
    """metav1.Condition: used in claim device status and DeviceTaintRule status."""

    type: str | None = None
    status: str | None = None
    observed_generation: int | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None

    @property
    def is_true(self) -> bool:
        return self.status == "True"
