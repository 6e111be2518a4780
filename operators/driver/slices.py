"""The node's resource pool as ResourceSlices: planning (pure) and publishing (API writes).

One pool per node, named after the node. Counter sets sit in their own slices (the API forbids
mixing them with devices), at most 8 per slice; devices go at most 64 per slice when any of
them consumes counters (the API's "advanced features" limit), 128 otherwise. Every change
writes all slices with the next generation, then deletes the ones no longer wanted: consumers
take only the newest generation and treat it as incomplete until ``resourceSliceCount`` slices
of it exist, so they never mix an old and a new layout. Each slice is owned by the Node, so
the garbage collector removes them with it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from operators.allocator.features import Features
from operators.allocator.pools import build_pool
from operators.api import limits
from operators.api.ids import PoolID
from operators.api.meta import ObjectMeta, OwnerReference
from operators.api.resource import (
    API_VERSION,
    CounterSet,
    Device,
    ResourcePool,
    ResourceSlice,
    ResourceSliceSpec,
)
from operators.api.validation import validate
from operators.driver.profiles import Inventory

if TYPE_CHECKING:  # the pure half (plan_slices) runs without the client: hack/gpu/check.py
    from operators.kube.api import KubeAPI

#: Slices are named ``<node>-<driver>-<counters|devices>-<i>``, shortened with a hash if long.
_NAME_BUDGET = limits.DNS1123SubdomainMaxLength - len("-counters-999")


class InvalidPoolError(ValueError):
    """The planned slices break the API's rules: a bug or a bad config, never published."""

    reason = "InvalidPool"


def slice_prefix(node: str, driver: str) -> str:
    prefix = re.sub(r"[^a-z0-9.-]+", "-", f"{node}-{driver}".lower()).strip("-.")
    if len(prefix) <= _NAME_BUDGET:
        return prefix
    digest = hashlib.sha256(prefix.encode()).hexdigest()[:10]
    return f"{prefix[: _NAME_BUDGET - 11].rstrip('-.')}-{digest}"


def _advanced(device: Device) -> bool:
    return bool(
        device.taints
        or device.consumes_counters
        or any(a.is_list for a in device.attributes.values())
    )


def chunk_devices(devices: Sequence[Device]) -> list[list[Device]]:
    """Greedy split in order, each chunk within the limit its own devices impose."""
    chunks: list[list[Device]] = []
    current: list[Device] = []
    advanced = False
    for device in devices:
        would_be_advanced = advanced or _advanced(device)
        limit = (
            limits.ResourceSliceMaxDevicesWithAdvancedFeatures
            if would_be_advanced
            else limits.ResourceSliceMaxDevices
        )
        if current and len(current) + 1 > limit:
            chunks.append(current)
            current, would_be_advanced = [], _advanced(device)
        current.append(device)
        advanced = would_be_advanced
    if current:
        chunks.append(current)
    return chunks


def chunk_counter_sets(counter_sets: Sequence[CounterSet]) -> list[list[CounterSet]]:
    size = limits.ResourceSliceMaxCounterSets
    return [list(counter_sets[i : i + size]) for i in range(0, len(counter_sets), size)]


@dataclass(frozen=True, slots=True)
class NodeRef:
    """The Node that owns the slices (its UID makes the owner reference exact)."""

    name: str
    uid: str


def plan_slices(
    driver: str, node: NodeRef, pool: str, inventory: Inventory, generation: int
) -> list[ResourceSlice]:
    """The slices of the pool at ``generation``: counter slices first, then device slices."""
    prefix = slice_prefix(node.name, driver)
    owner = OwnerReference(
        api_version="v1", kind="Node", name=node.name, uid=node.uid, controller=True
    )
    counter_chunks = chunk_counter_sets(inventory.counter_sets)
    device_chunks = chunk_devices(inventory.devices)
    total = len(counter_chunks) + len(device_chunks)
    if total == 0:
        # An empty pool is still published, so consumers see "no devices" rather than nothing.
        device_chunks = [[]]
        total = 1
    slices: list[ResourceSlice] = []

    def make(name: str, devices: list[Device], counter_sets: list[CounterSet]) -> ResourceSlice:
        spec = ResourceSliceSpec(
            driver=driver,
            pool=ResourcePool(name=pool, generation=generation, resource_slice_count=total),
            node_name=node.name,
        )
        if devices:
            spec.devices = [d.model_copy(deep=True) for d in devices]
        if counter_sets:
            spec.shared_counters = [c.model_copy(deep=True) for c in counter_sets]
        return ResourceSlice(
            api_version=API_VERSION,
            kind="ResourceSlice",
            metadata=ObjectMeta(name=name, owner_references=[owner]),
            spec=spec,
        )

    for i, counter_chunk in enumerate(counter_chunks):
        slices.append(make(f"{prefix}-counters-{i}", [], counter_chunk))
    for i, device_chunk in enumerate(device_chunks):
        slices.append(make(f"{prefix}-devices-{i}", device_chunk, []))
    return slices


def check_slices(slices: Sequence[ResourceSlice]) -> None:
    """Per-object validation plus the shared pool checks; raises InvalidPoolError."""
    problems = [
        f"slice {s.metadata.name}: {violation}" for s in slices for violation in validate(s)
    ]
    if slices and not problems:
        pool = build_pool(slices[0].pool_id, slices, Features.all())
        if pool.invalid_reason is not None:
            problems.append(f"pool {pool.id}: {pool.invalid_reason}")
    if problems:
        raise InvalidPoolError("; ".join(problems))


def same_content(existing: ResourceSlice, wanted: ResourceSlice) -> bool:
    """Equal spec (ignoring the generation) and owners, compared as parsed models."""
    have = existing.spec.model_copy(deep=True)
    have.pool.generation = wanted.spec.pool.generation
    owners = [(o.kind, o.name, o.uid) for o in existing.metadata.owner_references]
    wanted_owners = [(o.kind, o.name, o.uid) for o in wanted.metadata.owner_references]
    return have == wanted.spec and owners == wanted_owners


def up_to_date(existing: Sequence[ResourceSlice], wanted: Sequence[ResourceSlice]) -> bool:
    """Whether the API already holds exactly ``wanted`` in one generation."""
    by_name = {s.metadata.name: s for s in existing}
    if set(by_name) != {s.metadata.name for s in wanted}:
        return False
    if len({s.spec.pool.generation for s in existing}) > 1:
        return False
    return all(same_content(by_name[w.metadata.name], w) for w in wanted)


class SlicePublisher:
    """Keeps the node's slices equal to an inventory; safe to call repeatedly (level-based)."""

    def __init__(self, api: KubeAPI, driver: str, node: NodeRef, pool: str | None = None) -> None:
        self.api = api
        self.driver = driver
        self.node = node
        self.pool = pool or node.name

    @property
    def pool_id(self) -> PoolID:
        return PoolID(self.driver, self.pool)

    async def existing(self) -> list[ResourceSlice]:
        """Our driver's slices for this node (any pool name: old pools count as stale)."""
        listed = await self.api.list(
            "ResourceSlice",
            field_selector=f"spec.nodeName={self.node.name},spec.driver={self.driver}",
        )
        return [ResourceSlice.load(item) for item in listed.get("items") or []]

    async def sync(self, inventory: Inventory, *, attempts: int = 5) -> int | None:
        """Publish ``inventory``; returns the new generation, or None when nothing changed."""
        from operators.kube.api import ConflictError

        check_slices(plan_slices(self.driver, self.node, self.pool, inventory, 1))
        for attempt in range(attempts):
            try:
                return await self._sync_once(inventory)
            except ConflictError:
                # Someone else wrote one of our slices between list and write: re-read.
                if attempt == attempts - 1:
                    raise
        return None  # pragma: no cover - the loop returns or raises

    async def _sync_once(self, inventory: Inventory) -> int | None:
        existing = await self.existing()
        current = max((s.spec.pool.generation or 0 for s in existing), default=0)
        ours = [s for s in existing if s.spec.pool.name == self.pool]
        newest = [s for s in ours if (s.spec.pool.generation or 0) == current]
        wanted = plan_slices(self.driver, self.node, self.pool, inventory, current)
        if len(newest) == len(existing) and up_to_date(newest, wanted):
            return None
        generation = current + 1
        wanted = plan_slices(self.driver, self.node, self.pool, inventory, generation)
        by_name = {s.metadata.name: s for s in existing}
        for s in wanted:
            old = by_name.get(s.metadata.name)
            if old is None:
                await self.api.create(s.dump())
            else:
                s.metadata.resource_version = old.metadata.resource_version
                await self.api.replace(s.dump())
        keep = {s.metadata.name for s in wanted}
        for s in existing:
            if s.metadata.name not in keep:
                # Preconditions: never delete a slice someone rewrote since we listed it.
                await self.api.delete(
                    "ResourceSlice",
                    s.metadata.name or "",
                    uid=s.metadata.uid,
                    resource_version=s.metadata.resource_version,
                )
        return generation
