"""Read access to kopf's in-memory indices from outside a handler (the work-queue reconcile).

kopf hands its indices to handlers as keyword arguments named by the index id; the first
handler call attaches them here. Each index maps a key to a store of values (one per object
that produced the key); ``one`` takes the single value we expect for unique keys.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from typing import Any

# kopf resource specs of the kinds our operators index.
CLAIMS = ("resource.k8s.io", "v1", "resourceclaims")
SLICES = ("resource.k8s.io", "v1", "resourceslices")


class IndexView:
    """The operator's indices: kopf's (once a handler has seen them) and our local ones."""

    def __init__(self) -> None:
        self._indices: dict[str, Mapping[Any, Any]] = {}
        self._kopf_attached = False

    @property
    def ready(self) -> bool:
        return bool(self._indices)

    def has(self, index: str) -> bool:
        return index in self._indices

    def add(self, name: str, index: Mapping[Any, Any]) -> None:
        """An index kept by us (``runtime.stores``), read like kopf's."""
        self._indices[name] = index

    def attach(self, handler_kwargs: Mapping[str, Any]) -> None:
        """Keep the index objects from a handler's kwargs (they are live, not copies)."""
        if self._kopf_attached:
            return
        for name, value in handler_kwargs.items():
            if hasattr(value, "__getitem__") and type(value).__name__ == "Index":
                self._indices[name] = value
                self._kopf_attached = True

    def values(self, index: str, key: Hashable) -> Iterator[Any]:
        store = self._indices[index].get(key)
        if store is not None:
            yield from store

    def one(self, index: str, key: Hashable) -> Any:
        """The last value under ``key``, or None (the hot path of every reconcile: no lists)."""
        source = self._indices[index]
        last = getattr(source, "last", None)
        if last is not None:  # our LocalIndex
            return last(key)
        found = None
        for value in source.get(key) or ():
            found = value
        return found

    def keys(self, index: str) -> Iterator[Any]:
        return iter(self._indices[index])

    def has_key(self, index: str, key: Hashable) -> bool:
        return key in self._indices[index]


class SupersededVersions:
    """resourceVersions our own writes replaced, per object key.

    After a write, the cache may still show the old version for a moment; acting on it would
    repeat the write and earn a 409. A cache entry still at a superseded version is skipped:
    the watch event of our own write enqueues the object again. Several writes in a row (a
    status write, then a delete) supersede every version between them; a version not among
    them is a newer one, which clears the key.
    """

    def __init__(self) -> None:
        self._versions: dict[Hashable, set[str]] = {}

    def is_stale(self, key: Hashable, resource_version: str | None) -> bool:
        if resource_version is not None and resource_version in self._versions.get(key, ()):
            return True
        self._versions.pop(key, None)
        return False

    def forget(self, key: Hashable) -> None:
        """The cache has moved past our writes (their own watch event arrived)."""
        self._versions.pop(key, None)

    def wrote(self, key: Hashable, previous_version: str | None) -> None:
        if previous_version:
            self._versions.setdefault(key, set()).add(previous_version)
