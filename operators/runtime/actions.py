"""Typed writes that planning returns and the runtime applies, each with its precondition.

Pure data: a planning module builds these without any I/O; ``apply.Applier`` performs them
behind the leader fence. Preconditions are part of the type, so a write cannot forget one:

- ``Replace`` and ``ReplaceStatus`` PUT an object or its status with the resourceVersion it
  was computed from;
- ``Patch`` carries the resourceVersion the patch was computed from, or ``NO_PRECONDITION``
  written out where none applies (a field of our own where the last writer wins), with the
  reason beside it;
- ``Delete`` carries the uid (and optionally the resourceVersion) it means;
- ``Bind`` names the pod by uid.

A missing precondition (None, or empty) raises in ``__post_init__``: an object's uid and
resourceVersion are Optional in the models, so mypy alone cannot see one left out.

Classes are keyword-only so that controllers can subclass them with their own context
(the claim-template controller's ``CreateClaim`` is a ``Create`` with the pod entry).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any, Final

from operators.api.keys import ObjectKey


class NoPrecondition(enum.Enum):
    """The type of ``NO_PRECONDITION``: a patch that takes none says so, never by None."""

    NO_PRECONDITION = "no precondition"


#: A patch sent whatever the object's version (each use says why beside it).
NO_PRECONDITION: Final = NoPrecondition.NO_PRECONDITION


@dataclasses.dataclass(frozen=True, kw_only=True)
class Create:
    body: Mapping[str, Any]

    def describe(self) -> str:
        meta = self.body.get("metadata") or {}
        name = meta.get("name") or f"{meta.get('generateName', '')}*"
        return f"create {self.body.get('kind')} {ObjectKey(meta.get('namespace') or '', name)}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReplaceStatus:
    """PUT of ``body``'s status; its metadata.resourceVersion is the precondition."""

    body: Mapping[str, Any]

    def __post_init__(self) -> None:
        if not (self.body.get("metadata") or {}).get("resourceVersion"):
            raise ValueError(f"{self.describe()}: a status write needs a resourceVersion")

    @property
    def key(self) -> ObjectKey:
        return ObjectKey.of(self.body)

    def describe(self) -> str:
        return f"write status of {self.body.get('kind')} {self.key}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Replace:
    """PUT of the whole object; its metadata.resourceVersion is the precondition."""

    body: Mapping[str, Any]

    def __post_init__(self) -> None:
        if not (self.body.get("metadata") or {}).get("resourceVersion"):
            raise ValueError(f"{self.describe()}: a replace needs a resourceVersion")

    def describe(self) -> str:
        return f"replace {self.body.get('kind')} {ObjectKey.of(self.body)}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Patch:
    """A patch computed from the object at ``resource_version`` (a 409 if it changed since),
    or sent whatever its version with ``NO_PRECONDITION``."""

    kind: str
    key: ObjectKey
    patch: Mapping[str, Any]
    resource_version: str | NoPrecondition
    patch_type: str = "merge"
    subresource: str = ""
    field_manager: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.resource_version, NoPrecondition) and not self.resource_version:
            raise ValueError(
                f"{self.describe()}: a patch needs the resourceVersion it was computed from, "
                "or NO_PRECONDITION"
            )

    def body(self) -> Mapping[str, Any]:
        """The patch with its precondition inline (every patch type reads it there)."""
        if isinstance(self.resource_version, NoPrecondition):
            return self.patch
        metadata = {**(self.patch.get("metadata") or {}), "resourceVersion": self.resource_version}
        return {**self.patch, "metadata": metadata}

    def describe(self) -> str:
        sub = f"/{self.subresource}" if self.subresource else ""
        return f"patch {self.kind}{sub} {self.key}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Delete:
    """The object of this uid only (never a replacement of the same name); with a
    resourceVersion too, only as it was at that version."""

    kind: str
    key: ObjectKey
    uid: str
    resource_version: str | None = None

    def __post_init__(self) -> None:
        if not self.uid:
            raise ValueError(f"{self.describe()}: a delete needs the uid of the object it means")

    def describe(self) -> str:
        return f"delete {self.kind} {self.key}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Bind:
    """pods/binding: the pod (this uid only) goes to ``node``."""

    pod: ObjectKey
    uid: str
    node: str

    def body(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": self.pod.name, "namespace": self.pod.namespace, "uid": self.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": self.node},
        }

    def describe(self) -> str:
        return f"bind pod {self.pod} to {self.node}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class PostEvent:
    """A core/v1 Event on ``obj`` (not fenced: Events are reports, not state)."""

    obj: Mapping[str, Any]
    type: str
    reason: str
    message: str


Write = Create | Replace | ReplaceStatus | Patch | Delete | Bind
