"""The node's resource pool as ResourceSlices: planning (pure) and publishing (API writes).

One pool per node, named after the node. Counter sets sit in their own slices (the API forbids
mixing them with devices), at most 8 per slice; devices go at most 64 per slice when any of
them consumes counters (the API's "advanced features" limit), 128 otherwise. Every change
writes all slices with the next generation, then deletes the ones no longer wanted: consumers
take only the newest generation and treat it as incomplete until ``resourceSliceCount`` slices
of it exist, so they never mix an old and a new layout. Each slice is owned by the Node, so
the garbage collector removes them with it.

Two 1.37 alpha fields are set only where the cluster serves them and their gate is on
(``SliceFields``; a 1.36 API server does not know them): ``partitionTypeAttribute`` on the
device slices whose devices consume counters, and ``skipNodeOperations`` on slices of their
own (the field is per slice) holding the devices the kubelet need not call the driver for.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from operators.allocator.features import Features
from operators.allocator.pools import build_pool
from operators.api import limits
from operators.api.features import Release
from operators.api.fields import FIELDS
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
from operators.api.validation import SKIP_NODE_PREPARE, SKIP_NODE_UNPREPARE, validate
from operators.driver.profiles import Inventory

if TYPE_CHECKING:  # the pure half (plan_slices) runs without the client: hack/gpu/check.py
    from operators.kube.api import KubeAPI

#: Slices are named ``<node>-<driver>-<counters|devices|skipops>-<i>``, shortened with a hash
#: if long.
_NAME_BUDGET = limits.DNS1123SubdomainMaxLength - len("-counters-999")
#: What a slice of devices that need no kubelet call skips: both calls (preparing may only be
#: skipped together with unpreparing).
SKIPPED_NODE_OPERATIONS = (SKIP_NODE_PREPARE, SKIP_NODE_UNPREPARE)


@dataclass(frozen=True, slots=True)
class SliceFields:
    """Which 1.37 alpha ResourceSlice fields the driver publishes: each only where the cluster's
    release serves it and the gate the driver is given (the cluster's) is on; with the gate off
    the API server would drop it anyway, and a 1.36 one calls it an unknown field."""

    partition_type: bool = False
    skip_node_operations: bool = False

    @classmethod
    def at(cls, release: Release, gates: Mapping[str, bool]) -> SliceFields:
        def on(name: str) -> bool:
            (spec,) = (f for f in FIELDS if f.model is ResourceSliceSpec and f.name == name)
            return spec.served(release) and gates.get(spec.gate, False)

        return cls(on("partition_type_attribute"), on("skip_node_operations"))


#: Neither field: a 1.36 cluster, or the gates off.
NO_SLICE_FIELDS = SliceFields()


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


def partition_type_attribute(driver: str, attribute: str) -> str:
    """The fully qualified name a slice must give (a bare attribute is in the driver's domain)."""
    return attribute if "/" in attribute else f"{driver}/{attribute}"


def plan_slices(
    driver: str,
    node: NodeRef,
    pool: str,
    inventory: Inventory,
    generation: int,
    fields: SliceFields = NO_SLICE_FIELDS,
) -> list[ResourceSlice]:
    """The slices of the pool at ``generation``: counter slices first, then device slices, then
    (``fields.skip_node_operations``) the slices of devices that skip the kubelet's calls;
    ``resourceSliceCount`` counts them all."""
    prefix = slice_prefix(node.name, driver)
    owner = OwnerReference(
        api_version="v1", kind="Node", name=node.name, uid=node.uid, controller=True
    )
    counter_chunks = chunk_counter_sets(inventory.counter_sets)

    def skips(device: Device) -> bool:
        info = inventory.info.get(device.name or "")
        return fields.skip_node_operations and info is not None and info.skip_node_operations

    device_chunks = chunk_devices([d for d in inventory.devices if not skips(d)])
    skip_chunks = chunk_devices([d for d in inventory.devices if skips(d)])
    total = len(counter_chunks) + len(device_chunks) + len(skip_chunks)
    if total == 0:
        # An empty pool is still published, so consumers see "no devices" rather than nothing.
        device_chunks = [[]]
        total = 1
    partition_type = (
        partition_type_attribute(driver, inventory.partition_type_attribute)
        if fields.partition_type and inventory.partition_type_attribute
        else None
    )
    slices: list[ResourceSlice] = []

    def make(
        name: str,
        devices: list[Device],
        counter_sets: list[CounterSet],
        skip: Sequence[str] = (),
    ) -> ResourceSlice:
        spec = ResourceSliceSpec(
            driver=driver,
            pool=ResourcePool(name=pool, generation=generation, resource_slice_count=total),
            node_name=node.name,
        )
        if devices:
            spec.devices = [d.model_copy(deep=True) for d in devices]
            if partition_type is not None and any(d.consumes_counters for d in devices):
                # Only where some device consumes counters: elsewhere the API refuses it.
                spec.partition_type_attribute = partition_type
        if counter_sets:
            spec.shared_counters = [c.model_copy(deep=True) for c in counter_sets]
        if skip:
            spec.skip_node_operations = list(skip)
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
    for i, skip_chunk in enumerate(skip_chunks):
        slices.append(make(f"{prefix}-skipops-{i}", skip_chunk, [], SKIPPED_NODE_OPERATIONS))
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

    def __init__(
        self,
        api: KubeAPI,
        driver: str,
        node: NodeRef,
        pool: str | None = None,
        fields: SliceFields = NO_SLICE_FIELDS,
    ) -> None:
        self.api = api
        self.driver = driver
        self.node = node
        self.pool = pool or node.name
        self.fields = fields

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

        check_slices(plan_slices(self.driver, self.node, self.pool, inventory, 1, self.fields))
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
        wanted = plan_slices(self.driver, self.node, self.pool, inventory, current, self.fields)
        if len(newest) == len(existing) and up_to_date(newest, wanted):
            return None
        generation = current + 1
        wanted = plan_slices(self.driver, self.node, self.pool, inventory, generation, self.fields)
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
