"""The in-flight ledger: allocations chosen or written but not yet visible in the claim cache.

Between a scheduling cycle choosing devices and the watch delivering the claim with its new
status, the cache still shows the claim unallocated; without the ledger the next pod could be
given the same devices, counters or capacity. An entry stays until the cache shows the claim at
or after the version our status write produced (resourceVersions compared as integers, as
kube-scheduler's assume cache does), or until the write failed and the entry is removed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from operators.api.resource import ResourceClaim


def _version(resource_version: str | None) -> int | None:
    try:
        return int(resource_version) if resource_version else None
    except ValueError:
        return None


@dataclasses.dataclass
class _Entry:
    claim: ResourceClaim  # with the status as written (or about to be)
    written: int | None  # resourceVersion our write produced; None while still in flight


K = TypeVar("K", bound=Hashable)


class InFlightLedger(Generic[K]):
    """Claim key -> claim with its in-flight status."""

    def __init__(self, on_change: Callable[[K], None] | None = None) -> None:
        """``on_change(key)`` runs whenever the entry of a claim appears, changes or goes."""
        self._entries: dict[K, _Entry] = {}
        self._on_change = on_change

    def _changed(self, key: K) -> None:
        if self._on_change is not None:
            self._on_change(key)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def reserve(self, key: K, claim: ResourceClaim) -> None:
        """The cycle chose this status for the claim; the write is still to come."""
        self._entries[key] = _Entry(claim, None)
        self._changed(key)

    def written(self, key: K, claim: ResourceClaim) -> None:
        """The write succeeded: ``claim`` is what the API server returned."""
        self._entries[key] = _Entry(claim, _version(claim.metadata.resource_version))
        self._changed(key)

    def clear(self) -> None:
        """Forget every entry (leadership lost: the cache is the truth again)."""
        for key in list(self._entries):
            self.remove(key)

    def remove(self, key: K) -> None:
        if self._entries.pop(key, None) is not None:
            self._changed(key)

    def discard_unwritten(self, key: K) -> None:
        """An attempt ended without writing this claim: its chosen status goes (a status our
        write produced stays until the cache shows it)."""
        entry = self._entries.get(key)
        if entry is not None and entry.written is None:
            self.remove(key)

    def observe(self, key: K, cached: ResourceClaim | None) -> None:
        """The cache now shows ``cached`` for ``key``: drop the entry once it caught up."""
        entry = self._entries.get(key)
        if entry is None:
            return
        # An entry without a uid is a claim this scheduler is creating: the cache's is it.
        uid = entry.claim.metadata.uid
        if cached is None or (uid is not None and cached.metadata.uid != uid):
            self._entries.pop(key)
            self._changed(key)
            return
        seen = _version(cached.metadata.resource_version)
        if entry.written is not None and seen is not None and seen >= entry.written:
            self._entries.pop(key)
            self._changed(key)

    def items(self) -> list[tuple[K, ResourceClaim]]:
        return [(key, entry.claim) for key, entry in self._entries.items()]

    def get(self, key: K) -> ResourceClaim | None:
        entry = self._entries.get(key)
        return entry.claim if entry is not None else None
