"""The objects PodTopologySpread's system-default constraints select a pod's peers by
(``helper.DefaultSelector``): the pod's Services and its ReplicationController, ReplicaSet or
StatefulSet. Only their selectors are read: the specs stay plain maps."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from operators.api.base import KubeModel
from operators.api.meta import ObjectMeta


class _Selecting(KubeModel):
    """An object whose ``spec.selector`` selects pods."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: dict[str, Any] = Field(default_factory=dict)


class Service(_Selecting):
    """core/v1 Service: ``spec.selector``, a map."""

    api_version: str | None = "v1"
    kind: str | None = "Service"


class ReplicationController(_Selecting):
    """core/v1 ReplicationController: ``spec.selector``, a map."""

    api_version: str | None = "v1"
    kind: str | None = "ReplicationController"


class ReplicaSet(_Selecting):
    """apps/v1 ReplicaSet: ``spec.selector``, a label selector."""

    api_version: str | None = "apps/v1"
    kind: str | None = "ReplicaSet"


class StatefulSet(_Selecting):
    """apps/v1 StatefulSet: ``spec.selector``, a label selector."""

    api_version: str | None = "apps/v1"
    kind: str | None = "StatefulSet"
