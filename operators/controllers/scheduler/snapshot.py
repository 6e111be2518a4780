"""Parsed objects of the scheduler's caches, with stable identities across cycles.

kopf's indices hold raw dicts; parsing every slice for every pod would dominate the cycle, and
the allocator's per-node view cache is keyed by the identity of slice objects. So each kind is
parsed once per resourceVersion, and lists are rebuilt only when something of that kind
changed (the event handlers bump a version per kind).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any, Generic, TypeVar

from operators.api.base import KubeModel

M = TypeVar("M", bound=KubeModel)


class ModelCache(Generic[M]):
    """key -> parsed model, re-parsed only when the object's resourceVersion changes."""

    def __init__(self, model: type[M]) -> None:
        self.model = model
        self._items: dict[Hashable, tuple[str | None, M]] = {}
        self.version = 0  # bumped on every change of the kind
        self._list_version = -1
        self._list: list[M] = []

    def parse(self, key: Hashable, body: Mapping[str, Any]) -> M:
        rv = (body.get("metadata") or {}).get("resourceVersion")
        hit = self._items.get(key)
        if hit is not None and hit[0] == rv and rv is not None:
            return hit[1]
        model = self.model.load(body)
        self._items[key] = (rv, model)
        return model

    def forget(self, key: Hashable) -> None:
        self._items.pop(key, None)

    def changed(self) -> None:
        self.version += 1

    def all(self, bodies: Iterable[tuple[Hashable, Mapping[str, Any]]]) -> list[M]:
        """Every object of the kind, the same list object while nothing changed."""
        if self._list_version != self.version:
            keys = set()
            items = []
            for key, body in sorted(bodies, key=lambda kv: str(kv[0])):
                keys.add(key)
                items.append(self.parse(key, body))
            for stale in set(self._items) - keys:
                self._items.pop(stale, None)
            self._list, self._list_version = items, self.version
        return self._list
