"""Which release serves which field of resource.k8s.io/v1 (and of a PodGroup), and the gate each
new one is under.

The models hold the fields of every supported release (a newer server's must survive a round
trip), but what a given cluster accepts differs: a 1.36 API server does not know 1.37's
``derivedAttributes`` (strict field validation calls it unknown) and 1.37 no longer knows
1.36's ``nodeAllocatableResourceMappings``. A field the cluster serves but whose gate is off is
dropped on create, before validation, as the API server's ``dropDisabledFields`` strategies
do (an update keeps it where the stored object already used it; ``simulate`` only creates).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any, Final, get_args, get_origin

from pydantic import BaseModel

from operators.api.features import Release
from operators.api.groups import PodGroupSpec
from operators.api.resource import (
    Device,
    DeviceCounterConsumption,
    DeviceRequestAllocationResult,
    DeviceSubRequest,
    ExactDeviceRequest,
    ResourceSliceSpec,
)

R136: Final = Release(1, 36)
R137: Final = Release(1, 37)


@dataclasses.dataclass(frozen=True)
class ReleaseField:
    """A field served from ``since`` up to ``until`` (inclusive; None: open), under ``gate``."""

    model: type[BaseModel]
    name: str
    gate: str
    since: Release | None = None
    until: Release | None = None

    @property
    def wire(self) -> str:
        info = self.model.model_fields[self.name]
        return info.alias or self.name

    def served(self, release: Release) -> bool:
        return (self.since is None or release >= self.since) and (
            self.until is None or release <= self.until
        )


#: The fields that differ between the supported releases (1.37's alpha fields, and 1.36's
#: node-allocatable mappings, which 1.37 replaced by ``nodeAllocatableResources``).
FIELDS: Final = (
    ReleaseField(
        ResourceSliceSpec, "partition_type_attribute", "DRAPartitionableDevicesType", R137
    ),
    ReleaseField(ResourceSliceSpec, "skip_node_operations", "DRAOptionalNodeOperations", R137),
    ReleaseField(
        DeviceRequestAllocationResult, "skip_node_operations", "DRAOptionalNodeOperations", R137
    ),
    ReleaseField(
        DeviceCounterConsumption, "compatibility_groups", "DRADeviceCompatibilityGroups", R137
    ),
    ReleaseField(ExactDeviceRequest, "derived_attributes", "DRADerivedAttributes", R137),
    ReleaseField(DeviceSubRequest, "derived_attributes", "DRADerivedAttributes", R137),
    ReleaseField(Device, "node_allocatable_resources", "DRANodeAllocatableResources", R137),
    ReleaseField(PodGroupSpec, "scheduling_constraints", "TopologyAwareWorkloadScheduling", R137),
    ReleaseField(PodGroupSpec, "parent_composite_pod_group_name", "CompositePodGroup", R137),
    ReleaseField(
        Device,
        "node_allocatable_resource_mappings",
        "DRANodeAllocatableResources",
        until=R136,
    ),
)


def unserved(model: type[BaseModel], release: Release) -> frozenset[str]:
    """The wire names of ``model``'s fields that ``release`` does not serve."""
    return frozenset(f.wire for f in FIELDS if f.model is model and not f.served(release))


def drop_disabled(
    model: type[BaseModel], body: Any, gates: Mapping[str, bool], release: Release
) -> list[str]:
    """Remove from ``body`` (in place) every field ``release`` serves whose gate is off, as the
    API server does on create; returns their paths."""
    return list(_drop(model, body, gates, release, ""))


def _drop(
    model: type[BaseModel], body: Any, gates: Mapping[str, bool], release: Release, path: str
) -> Iterator[str]:
    if not isinstance(body, dict):
        return
    gated = {
        f.wire: f
        for f in FIELDS
        if f.model is model and f.served(release) and not gates.get(f.gate, False)
    }
    for name, info in model.model_fields.items():
        key = info.alias or name
        if key not in body:
            continue
        where = f"{path}.{key}" if path else key
        if key in gated:
            value = body.pop(key)
            if value not in (None, [], {}):
                yield where
            continue
        yield from _walk(info.annotation, body[key], gates, release, where)


def _walk(
    annotation: Any, value: Any, gates: Mapping[str, bool], release: Release, path: str
) -> Iterator[str]:
    origin = get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in get_args(annotation) if a is not type(None)]
        if len(options) == 1:
            yield from _walk(options[0], value, gates, release, path)
        return
    if origin is list and isinstance(value, list):
        (item,) = get_args(annotation)[:1] or (Any,)
        for i, element in enumerate(value):
            yield from _walk(item, element, gates, release, f"{path}[{i}]")
        return
    if origin is dict and isinstance(value, dict):
        args = get_args(annotation)
        item = args[1] if len(args) == 2 else Any
        for key, element in value.items():
            yield from _walk(item, element, gates, release, f"{path}[{key}]")
        return
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield from _drop(annotation, value, gates, release, path)
