"""DRANodeAllocatableResources (KEP-5517, 1.37 alpha): devices that take node resources.

A device may say, in its slice's ``nodeAllocatableResources``, that allocating it takes some
of the node's cpu, memory, ephemeral storage or hugepages: a ``mapping`` (the device *is* that
resource, e.g. CPUs of a CPU driver: per device, or per unit of a consumed capacity) and an
``overhead`` (host memory a GPU needs: per pod, and per container that references the claim).
kube-scheduler 1.37.2 (gate on) then, in its DynamicResources plugin:

- PreFilter: notes which of the pod's allocated claims have a mapped device;
- Filter: refuses a claim with a mapped device that is reserved for another consumer
  (mapped devices are not shared); after allocating, adds what the claims take to the pod's
  requests and checks that against the node's room (NodeResourcesFit's words), and that the
  pod-level resources cover it;
- Reserve and PreBind: writes the claims' shares in ``pod.status.
  nodeAllocatableResourceClaimStatuses``, which the scheduler counts for the bound pod from
  then on; Unreserve clears it.

The pure parts, mirroring upstream's ``nodeallocatabledynamicresources.go``, are here; the
cycle (``cycle``), the scheduler (``controllers.scheduler``) and ``simulate`` call them. The
1.36 shape (``nodeAllocatableResourceMappings``) is not supported: with it nothing changes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal

from operators.allocator.errors import InvalidNodeSelectorError
from operators.allocator.nodes import selector_matches
from operators.api.core import (
    Container,
    Node,
    NodeAllocatableMappedResources,
    NodeAllocatableOverheadResources,
    NodeAllocatableResourceClaimStatus,
    NodeSelector,
    Pod,
)
from operators.api.groups import is_reserved_for_pod
from operators.api.quantity import Quantity
from operators.api.resource import (
    AllocationResult,
    Device,
    DeviceRequestAllocationResult,
    NodeAllocatableMapping,
    NodeAllocatableOverhead,
    ResourceClaim,
    ResourceSlice,
)
from operators.scheduling.nodes import (
    NodeUsage,
    aggregate_containers,
    claim_status_resources,
    pod_level_resource,
    pod_requests,
)

#: The pod status field the claims' shares go to.
NODE_ALLOCATABLE_FIELD = "nodeAllocatableResourceClaimStatuses"
#: The resources upstream's nodeFitsResources checks (hugepages-* too); others pass.
_FIT_CHECKED = ("cpu", "memory", "ephemeral-storage")

Statuses = tuple[NodeAllocatableResourceClaimStatus, ...]
#: A claim's overhead for one resource so far: (per pod, per container).
Overhead = tuple[Quantity | None, Quantity | None]


class NodeAllocatableError(Exception):
    """What upstream returns as an Error status from Filter (a device of a claim is not in
    the node's slices, a mapping's capacity was not consumed): the attempt fails, whatever
    the node."""


@dataclasses.dataclass(frozen=True)
class NodeAllocatableInput:
    """What the cycle needs with the gate on: every ResourceSlice (upstream's
    ``ListWithDeviceTaintRules``), and whether the pod's PodGroup claims count as its own
    (DRAWorkloadResourceClaims, for the sharing rule)."""

    slices: Sequence[ResourceSlice]
    group_claims: bool = False
    #: 1.38: a mapping's capacity key is looked up by its fully qualified name
    #: (``LookupByQualifiedName``), and a negative consumed capacity or footprint is an error.
    qualified: bool = False


@dataclasses.dataclass(frozen=True)
class Refusal:
    """A node refused: ``reasons`` in kube-scheduler's words; ``unresolvable`` as upstream's
    status code (UnschedulableAndUnresolvable: no eviction would help)."""

    reasons: tuple[str, ...]
    unresolvable: bool

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)


# --- devices -------------------------------------------------------------------------------


def _matches(node: Node, selector: NodeSelector) -> bool:
    try:
        return selector_matches(selector, node)
    except InvalidNodeSelectorError:
        return False  # upstream: a selector that does not parse matches nothing


def slices_for_node(slices: Iterable[ResourceSlice], node: Node | None) -> list[ResourceSlice]:
    """Upstream's filterSlicesForNode: the slices whose devices may be on ``node`` (all of
    them when None)."""
    if node is None:
        return list(slices)
    name = node.metadata.name
    out = []
    for s in slices:
        spec = s.spec
        if (spec.node_name is not None and spec.node_name == name) or spec.all_nodes:
            out.append(s)
        elif spec.node_selector is not None:
            if _matches(node, spec.node_selector):
                out.append(s)
        elif spec.per_device_node_selection:
            out.append(s)
    return out


def _device_on_node(device: Device, node: Node | None) -> bool:
    """Upstream's deviceMatchesNode (per-device node selection)."""
    if node is None:
        return True
    if device.node_name is not None and device.node_name == node.metadata.name:
        return True
    if device.all_nodes:
        return True
    return device.node_selector is not None and _matches(node, device.node_selector)


def device_of(
    slices: Iterable[ResourceSlice], result: DeviceRequestAllocationResult, node: Node | None
) -> Device:
    """Upstream's getDeviceFromSlices: the allocated device, from the first slice of its
    driver and pool that lists it; raises NodeAllocatableError when none does (or, with
    per-device node selection, the device is not on ``node``)."""
    for s in slices:
        if s.spec.driver != result.driver or s.spec.pool.name != result.pool:
            continue
        for device in s.spec.devices:
            if device.name != result.device:
                continue
            if s.spec.per_device_node_selection and not _device_on_node(device, node):
                raise NodeAllocatableError(f"device {result.device} does not match node")
            return device
    raise NodeAllocatableError(
        f"device {result.device} not found in pool {result.pool} for driver {result.driver}"
    )


def has_mapped_device(allocation: AllocationResult | None, slices: Sequence[ResourceSlice]) -> bool:
    """PreFilter's claimHasNodeAllocatableMappedDevice: a device of the allocation (looked up
    in every slice) maps a node resource. Devices not found do not count."""
    if allocation is None:
        return False
    for result in allocation.devices.results:
        try:
            device = device_of(slices, result, None)
        except NodeAllocatableError:
            continue
        if any(r.mapping is not None for r in device.node_allocatable_resources.values()):
            return True
    return False


# --- one claim's share -----------------------------------------------------------------------


def add_mapping(
    name: str,
    mapping: NodeAllocatableMapping,
    result: DeviceRequestAllocationResult,
    claim: ResourceClaim,
    totals: dict[str, Quantity],
    qualified: bool = False,
) -> None:
    """Upstream's addDeviceMapping: with ``capacityKey``, the capacity the result consumed
    times ``capacityMultiplier`` (1 when unset; nothing when that capacity was not consumed);
    else ``deviceMultiplier`` per device. ``qualified``: 1.38's lookup and sign checks."""
    key = mapping.capacity_key
    if key:
        if not result.consumed_capacity:
            raise NodeAllocatableError(
                f"claim {claim.metadata.namespace}/{claim.metadata.name}, device "
                f"{result.device}: ConsumedCapacity is nil, but Capacity key '{key}' is set in "
                f"NodeAllocatableResources for resource {name}"
            )
        where = f"claim {claim.metadata.namespace}/{claim.metadata.name}, device {result.device}"
        if qualified:
            consumed = lookup_qualified(result.consumed_capacity, key, result.driver or "")
            if consumed is not None and consumed.value < 0:
                raise NodeAllocatableError(
                    f"{where}: ConsumedCapacity for capacity key '{key}' must not be negative, "
                    f"got {consumed}"
                )
        else:
            consumed = result.consumed_capacity.get(key)
        if consumed is None:
            return
        multiplier = mapping.capacity_multiplier
        if multiplier is not None and multiplier.value != 1:
            consumed = Quantity.from_decimal(consumed.value * multiplier.value, consumed.format)
        if qualified and consumed.value < 0:
            raise NodeAllocatableError(
                f"{where}: computed node-allocatable footprint for resource {name} must not be "
                f"negative, got {consumed}"
            )
        totals[name] = totals[name] + consumed if name in totals else consumed
        return
    if mapping.device_multiplier is not None:
        each = mapping.device_multiplier
        totals[name] = totals[name] + each if name in totals else each


def add_overhead(
    name: str,
    overhead: NodeAllocatableOverhead,
    totals: dict[str, Overhead],
) -> None:
    """Upstream's addDeviceOverhead: per-pod and per-container overheads add up over the
    claim's devices (each device's overhead counts)."""
    if overhead.per_pod is None and overhead.per_container is None:
        return
    per_pod, per_container = totals.get(name, (None, None))
    if overhead.per_pod is not None:
        per_pod = overhead.per_pod if per_pod is None else per_pod + overhead.per_pod
    if overhead.per_container is not None:
        per_container = (
            overhead.per_container
            if per_container is None
            else per_container + overhead.per_container
        )
    totals[name] = (per_pod, per_container)


def claim_statuses(
    pod: Pod,
    allocations: Sequence[tuple[ResourceClaim, AllocationResult]],
    slices: Sequence[ResourceSlice],
    node: Node,
    qualified: bool = False,
) -> Statuses:
    """Upstream's buildNodeAllocatableDRAInfo: one status per claim that takes anything,
    naming the containers (init containers first) that reference it, sorted by claim name;
    ``slices``: the node's (``slices_for_node``)."""
    shares: dict[str, tuple[ResourceClaim, dict[str, Quantity], dict[str, Overhead]]] = {}
    for claim, allocation in allocations:
        mapped: dict[str, Quantity] = {}
        overheads: dict[str, Overhead] = {}
        for result in allocation.devices.results:
            try:
                device = device_of(slices, result, node)
            except NodeAllocatableError as e:
                raise NodeAllocatableError(
                    f"claim {claim.metadata.namespace}/{claim.metadata.name}, device "
                    f"{result.device}, driver {result.driver}: {e}"
                ) from None
            # Sorted: when two resources fail, upstream's (random) map order names either.
            for name, resource in sorted(device.node_allocatable_resources.items()):
                if resource.mapping is not None:
                    add_mapping(name, resource.mapping, result, claim, mapped, qualified)
                if resource.overhead is not None:
                    add_overhead(name, resource.overhead, overheads)
        if mapped or overheads:
            shares[claim.key] = (claim, mapped, overheads)
    if not shares:
        return ()
    namespace = pod.metadata.namespace or ""
    entry_to_key: dict[str, str] = {}
    for entry in pod.spec.resource_claims:
        claim_name = pod.claim_name(entry)
        if claim_name and entry.name:
            entry_to_key[entry.name] = f"{namespace}/{claim_name}"
    containers: dict[str, list[str]] = {key: [] for key in shares}
    for container in (*pod.spec.init_containers, *pod.spec.containers):
        if container.resources is None:
            continue
        for ref in container.resources.claims:
            key = entry_to_key.get(ref.name or "")
            if key is not None and key in containers:
                containers[key].append(container.name or "")
    statuses = [
        NodeAllocatableResourceClaimStatus(
            resource_claim_name=claim.metadata.name,
            containers=containers[key],
            mapping=[
                NodeAllocatableMappedResources(name=n, quantity=q)
                for n, q in sorted(mapped.items())
            ],
            overhead=[
                NodeAllocatableOverheadResources(name=n, per_pod=o[0], per_container=o[1])
                for n, o in sorted(overheads.items())
            ],
        )
        for key, (claim, mapped, overheads) in shares.items()
    ]
    return tuple(sorted(statuses, key=lambda s: s.resource_claim_name or ""))


# --- Filter ------------------------------------------------------------------------------------


def sharing_refusal(pod: Pod, claim: ResourceClaim, group_claims: bool) -> str | None:
    """Upstream's validateNodeAllocatableDRAClaimSharing, for a claim with a mapped device:
    reserved for another consumer than the pod (or its PodGroup), it cannot be the pod's."""
    if claim.status.reserved_for and not is_reserved_for_pod(claim, pod, group_claims):
        return (
            f"node allocatable resource claim {claim.metadata.name} has a mapped device and "
            "cannot be shared across pods"
        )
    return None


def container_claim_resources(pod: Pod, container: str) -> dict[str, Decimal]:
    """component-helpers' GetContainerDRAAllocations: what the claims a container references
    add to its limits (each mapping, each per-pod overhead and one per-container overhead)."""
    return claim_status_resources(pod.status.node_allocatable_resource_claim_statuses, container)


def _hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def _limits(container: Container) -> Mapping[str, Quantity]:
    return container.resources.limits if container.resources is not None else {}


def pod_level_refusal(pod: Pod) -> str | None:
    """Upstream's validatePodLevelResourcesCoverDRA (PodLevelResources on, as kopf-dra
    always has it), on the pod with its claims' statuses: pod-level requests must cover the
    containers' aggregate plus the claims; pod-level hugepages limits the containers' limits
    plus the claims; every other pod-level limit each container's limit plus what its claims
    add. Resources are visited by name (upstream's map order is random)."""
    resources = pod.spec.resources
    statuses = pod.status.node_allocatable_resource_claim_statuses
    if resources is None or not statuses:
        return None
    if resources.requests:
        aggregate = aggregate_containers(pod)
        for name, amount in claim_status_resources(statuses).items():
            aggregate[name] = aggregate.get(name, Decimal(0)) + amount
        for name, budget in sorted(resources.requests.items()):
            if not pod_level_resource(name) or name not in aggregate:
                continue
            if aggregate[name] > budget.value:
                return (
                    f"pod level request for {name} is insufficient to cover the aggregated "
                    "container and node-allocatable DRA requests"
                )
    if resources.limits:
        limits = aggregate_containers(pod, _limits)
        for name, amount in claim_status_resources(statuses).items():
            # component-helpers' addDRANodeAllocatableLimits: only on declared limits, and
            # always on hugepages.
            if name in limits or _hugepages(name):
                limits[name] = limits.get(name, Decimal(0)) + amount
        for name, total in sorted(limits.items()):
            if not _hugepages(name) or name not in resources.limits:
                continue
            if total > resources.limits[name].value:
                return (
                    f"pod level limit for {name} is insufficient to cover the aggregated "
                    "container and node-allocatable DRA limits"
                )
        for container in pod.spec.containers:
            extra = container_claim_resources(pod, container.name or "")
            for name, limit in sorted(_limits(container).items()):
                if _hugepages(name) or name not in resources.limits:
                    continue
                if limit.value + extra.get(name, Decimal(0)) > resources.limits[name].value:
                    return (
                        f"pod level limit for {name} is insufficient to cover the limit and "
                        f"DRA overhead for container {container.name}"
                    )
    return None


def insufficient(node: Node, demand: Mapping[str, Decimal], usage: NodeUsage) -> Refusal | None:
    """Upstream's nodeFitsResources: the pod's whole demand (its containers and its claims)
    against the node's allocatable less what its pods take, for cpu, memory,
    ephemeral-storage and hugepages; unresolvable when the demand exceeds the node itself."""
    allocatable = node.status.allocatable
    huge = sorted(n for n in demand if _hugepages(n))
    reasons: list[str] = []
    unresolvable = False
    for name in (*_FIT_CHECKED, *huge):
        want = demand.get(name, Decimal(0))
        if want <= 0 and not _hugepages(name):
            continue
        have = allocatable.get(name)
        capacity = have.value if have is not None else Decimal(0)
        if want > capacity - usage.requests.get(name, Decimal(0)):
            reasons.append(f"Insufficient {name}")
            unresolvable = unresolvable or want > capacity
    if not reasons:
        return None
    return Refusal(tuple(reasons), unresolvable)


@dataclasses.dataclass(frozen=True)
class Footprint:
    """The pod's claims' shares on a node (``statuses``, empty when its claims take no node
    resource) or why the node cannot take it (``refusal``)."""

    statuses: Statuses = ()
    refusal: Refusal | None = None


def check(
    pod: Pod,
    allocations: Sequence[tuple[ResourceClaim, AllocationResult]],
    node: Node,
    usage: NodeUsage,
    slices: Sequence[ResourceSlice],
    qualified: bool = False,
) -> Footprint:
    """Upstream's calculateAndCheckNodeAllocatableResources with
    getPodNodeAllocatableResourceFootprint: ``allocations`` are the pod's claims with their
    allocations (as they are, or as this cycle made them on ``node``). Only claims with a
    device on the node that has ``nodeAllocatableResources`` count; for those, every device
    must be in the node's slices (else NodeAllocatableError)."""
    here = slices_for_node(slices, node)
    counted = []
    for claim, allocation in allocations:
        for result in allocation.devices.results:
            try:
                device = device_of(here, result, node)
            except NodeAllocatableError:
                continue  # upstream logs it and looks at the claim's next device
            if device.node_allocatable_resources:
                counted.append((claim, allocation))
                break
    if not counted:
        return Footprint()
    statuses = claim_statuses(pod, counted, here, node, qualified)
    with_statuses = pod.model_copy(
        update={
            "status": pod.status.model_copy(
                update={"node_allocatable_resource_claim_statuses": list(statuses)}
            )
        }
    )
    demand = pod_requests(pod, statuses)
    refused = pod_level_refusal(with_statuses)
    if refused is not None:
        return Footprint(refusal=Refusal((refused,), unresolvable=True))
    refusal = insufficient(node, demand, usage)
    if refusal is not None:
        return Footprint(refusal=refusal)
    return Footprint(statuses)


def lookup_qualified(consumed: Mapping[str, Quantity], key: str, driver: str) -> Quantity | None:
    """dynamic-resource-allocation v0.38's LookupByQualifiedName: ``key`` as written, or with
    its domain left out where that domain is the driver's (a bare key: the driver's domain
    first, then bare)."""
    domain, slash, name = key.partition("/")
    if slash:
        found = consumed.get(key)
        return found if found is not None or domain != driver else consumed.get(name)
    found = consumed.get(f"{driver}/{key}")
    return found if found is not None else consumed.get(key)


def named(statuses: Statuses, in_memory: str, name: str) -> Statuses:
    """1.38's PreBind (``replaceSpecialClaimNameInStatus``): the extended-resource claim's
    status under the name it is created with; 1.37 writes its in-memory name."""
    return tuple(
        s.model_copy(update={"resource_claim_name": name})
        if s.resource_claim_name == in_memory
        else s
        for s in statuses
    )


def dump_statuses(statuses: Statuses) -> list[dict[str, object]]:
    """The statuses as PreBind writes them (upstream's JSON: empty lists left out)."""
    out: list[dict[str, object]] = []
    for status in statuses:
        body: dict[str, object] = {"resourceClaimName": status.resource_claim_name or ""}
        if status.containers:
            body["containers"] = list(status.containers)
        if status.mapping:
            body["mapping"] = [
                {"name": m.name, "quantity": str(m.quantity)} for m in status.mapping
            ]
        if status.overhead:
            overheads = []
            for o in status.overhead:
                item: dict[str, object] = {"name": o.name}
                if o.per_pod is not None:
                    item["perPod"] = str(o.per_pod)
                if o.per_container is not None:
                    item["perContainer"] = str(o.per_container)
                overheads.append(item)
            body["overhead"] = overheads
        out.append(body)
    return out
