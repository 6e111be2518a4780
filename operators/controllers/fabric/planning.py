"""What the fabric controller does, decided from state alone (pure: no I/O, no clock).

One reconcile looks at the whole fabric at once: the claims whose allocations hold fabric
devices, one snapshot of the manager (its devices and our operations at one revision, so an
operation's result is never compared with a device list read before it finished), the devices
handed over to nodes (the Node annotation the node's driver reads) and the node-local pools.
It returns what to attach, what to detach, which binding (failure) conditions to report, and
which annotation entries to add or drop. Level-triggered: the same inputs give the same plan,
so a restarted controller resumes where the last one stopped, and operation ids are derived
from the allocation so a retry (or a restart) finds the operation it started before instead of
starting another. The writes that carry it out are built here too (``annotation_write``,
``status_write``, ``slice_write``, ``slice_removal``): the handlers only apply them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from operators.api.core import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from operators.api.keys import ObjectKey
from operators.api.meta import Condition, ObjectMeta
from operators.api.quantity import Quantity, QuantityError
from operators.api.resource import (
    API_VERSION,
    Device,
    DeviceAttribute,
    DeviceCapacity,
    DeviceRequestAllocationResult,
    ResourceClaim,
    ResourcePool,
    ResourceSlice,
    ResourceSliceSpec,
)
from operators.api.timestamps import epoch, format_epoch
from operators.api.validation import dns1123_label_errors
from operators.fabric.model import (
    ATTACHED,
    ATTACHING,
    DETACHING,
    FAILED,
    FREE,
    RUNNING,
    SUCCEEDED,
    FabricDevice,
    FabricSnapshot,
    Operation,
    model_slug,
)
from operators.runtime.actions import Create, Delete, Patch, Replace
from operators.scheduling.binding_conditions import allocated_node

POOL_PREFIX = "fabric-"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "kopf-dra-fabric"
#: Server-side apply's owner of our device conditions in claim statuses.
FIELD_MANAGER = "kopf-dra-fabric"
#: Node annotation the node's driver reads (operators/driver/service.py HOTPLUG_ANNOTATION).
HOTPLUG_ANNOTATION = "resource.kopf-dra.io/attached-devices"

# Reasons of the conditions we report.
ATTACHING_REASON = "Attaching"
ATTACHED_REASON = "Attached"
HANDED_OVER_REASON = "AttachedToNode"
TIMEOUT_REASON = "BindingTimeout"
NO_NODE_REASON = "NoNode"
DEVICE_LOST_REASON = "DeviceLost"


@dataclasses.dataclass(frozen=True)
class FabricConfig:
    driver: str
    domain: str
    after_attach: Literal["bind", "reschedule"] = "bind"
    binding_timeout: float = 600.0
    handover_timeout: float = 60.0
    handover_grace: float = 0.5
    node_label: str = "resource.kopf-dra.io/fabric"
    fabric_name: str = "fabric1"

    @property
    def attached(self) -> str:
        return f"{self.domain}/attached"

    @property
    def failed(self) -> str:
        return f"{self.domain}/attach-failed"


def pool_name(model: str) -> str:
    return POOL_PREFIX + model_slug(model)


# --- the free-device pools ---------------------------------------------------------------


def node_selector(config: FabricConfig) -> NodeSelector:
    return NodeSelector(
        node_selector_terms=[
            NodeSelectorTerm(
                match_expressions=[
                    NodeSelectorRequirement(
                        key=config.node_label, operator="In", values=[config.fabric_name]
                    )
                ]
            )
        ]
    )


def fabric_device(device: FabricDevice, config: FabricConfig) -> Device:
    """A free device as the scheduler must see it: attach first (binding conditions), then the
    allocation is pinned to the node (bindsToNode)."""
    attributes = {
        "type": DeviceAttribute(string="gpu"),
        "model": DeviceAttribute(string=device.model),
        "fabric": DeviceAttribute(bool_=True),
    }
    if device.vendor:
        attributes["vendor"] = DeviceAttribute(string=device.vendor)
    capacity = {}
    if device.memory:
        capacity["memory"] = DeviceCapacity(value=Quantity(device.memory))
    return Device(
        name=device.id,
        attributes=attributes,
        capacity=capacity,
        binds_to_node=True,
        binding_conditions=[config.attached],
        binding_failure_conditions=[config.failed],
    )


def publishable(device: FabricDevice) -> str | None:
    """Why a device cannot be published (its id is not a device name, bad memory), or None."""
    if errors := dns1123_label_errors(device.id):
        return f"fabric device {device.id!r}: {errors[0]}"
    if device.memory:
        try:
            Quantity(device.memory)
        except QuantityError as e:
            return f"fabric device {device.id}: memory {device.memory!r}: {e}"
    return None


def free_pools(devices: Iterable[FabricDevice], config: FabricConfig) -> dict[str, list[Device]]:
    """Pool name -> free devices, one pool per model; every model keeps a (maybe empty) pool so
    its generation keeps counting. Devices attached, or being attached or detached by anyone,
    are not free."""
    pools: dict[str, list[Device]] = {}
    for device in sorted(devices, key=lambda d: d.id):
        if publishable(device) is not None:
            continue
        free = pools.setdefault(pool_name(device.model), [])
        if device.state == FREE:
            free.append(fabric_device(device, config))
    return pools


def slice_name(config: FabricConfig, pool: str) -> str:
    return f"{config.driver}-{pool}"


def desired_slice(
    config: FabricConfig, pool: str, devices: Sequence[Device], existing: ResourceSlice | None
) -> ResourceSlice | None:
    """The slice to write for ``pool``, or None when ``existing`` already says the same.

    The pool's generation goes up by one on every change, so consumers (the allocator) never
    mix an old and a new view of the pool.
    """
    spec = ResourceSliceSpec(
        driver=config.driver,
        pool=ResourcePool(name=pool, generation=1, resource_slice_count=1),
        node_selector=node_selector(config),
        devices=list(devices),
    )
    if existing is not None:
        old = existing.spec.model_copy(deep=True)
        generation = old.pool.generation or 0
        old.pool.generation = 1
        if _canonical(old.dump()) == _canonical(spec.dump()):
            return None
        spec.pool.generation = generation + 1
        body = existing.model_copy(deep=True)
        body.spec = spec
        return body
    return ResourceSlice(
        api_version=API_VERSION,
        kind="ResourceSlice",
        metadata=ObjectMeta(name=slice_name(config, pool), labels={MANAGED_BY_LABEL: MANAGED_BY}),
        spec=spec,
    )


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, default=str)


def slice_write(
    config: FabricConfig, pool: str, devices: Sequence[Device], existing: ResourceSlice | None
) -> Create | Replace | None:
    """``desired_slice`` as a write: a replace at the version listed, a create when there was
    none (None: the slice says so already)."""
    body = desired_slice(config, pool, devices, existing)
    if body is None:
        return None
    # Listed items carry no kind: name it for the write.
    wire = {**body.dump(), "apiVersion": API_VERSION, "kind": "ResourceSlice"}
    if body.metadata.resource_version:
        return Replace(body=wire)
    return Create(body=wire)


def slice_removal(config: FabricConfig, name: str, existing: ResourceSlice) -> Delete | None:
    """A listed slice of ours whose pool is gone, deleted as listed (its uid and version);
    None for a slice of another pool prefix."""
    if not name.startswith(f"{config.driver}-{POOL_PREFIX}"):
        return None
    return Delete(
        kind="ResourceSlice",
        key=ObjectKey("", name),
        uid=existing.metadata.uid or "",
        resource_version=existing.metadata.resource_version,
    )


# --- attach, detach, report ----------------------------------------------------------------


def attach_operation_id(claim_uid: str, allocated_at: str | None, device: str, node: str) -> str:
    """One id per (allocation, device, node): a retry or a restart finds the same operation."""
    digest = hashlib.sha256(f"{claim_uid}|{allocated_at}|{device}|{node}".encode()).hexdigest()
    return f"attach-{device[:40]}-{digest[:16]}"


def detach_operation_id(device: FabricDevice) -> str:
    """One id per attachment (the operation that attached the device)."""
    digest = hashlib.sha256(f"{device.id}|{device.operation}|{device.node}".encode()).hexdigest()
    return f"detach-{device.id[:40]}-{digest[:16]}"


@dataclasses.dataclass(frozen=True)
class Wanted:
    """One fabric device in one claim's allocation."""

    claim: ResourceClaim
    result: DeviceRequestAllocationResult
    node: str | None
    op_id: str

    @property
    def device(self) -> str:
        return self.result.device or ""

    def conditions(self) -> dict[str, Condition]:
        for status in self.claim.status.devices:
            if (
                status.driver == self.result.driver
                and status.pool == self.result.pool
                and status.device == self.result.device
                and status.share_id == self.result.share_id
            ):
                return {c.type or "": c for c in status.conditions}
        return {}


@dataclasses.dataclass(frozen=True)
class Report:
    """A binding condition to set True (or ``attached`` False while attaching)."""

    wanted: Wanted
    type: str
    status: bool
    reason: str
    message: str


@dataclasses.dataclass(frozen=True)
class Attach:
    wanted: Wanted
    device: str
    node: str


@dataclasses.dataclass(frozen=True)
class Detach:
    device: str
    node: str | None
    op_id: str
    reason: str


@dataclasses.dataclass(frozen=True)
class HotplugEntry:
    """One entry of the Node annotation the node's driver publishes (profiles.HotplugDevice)."""

    name: str
    model: str
    memory: str | None
    uuid: str | None

    def wire(self) -> dict[str, str]:
        entry = {"name": self.name, "model": self.model}
        if self.memory:
            entry["memory"] = self.memory
        if self.uuid:
            entry["uuid"] = self.uuid
        return entry

    @classmethod
    def of(cls, device: FabricDevice) -> HotplugEntry:
        return cls(device.id, device.model, device.memory or None, device.uuid or None)


@dataclasses.dataclass
class Plan:
    attach: list[Attach] = dataclasses.field(default_factory=list)
    detach: list[Detach] = dataclasses.field(default_factory=list)
    reports: list[Report] = dataclasses.field(default_factory=list)
    #: node -> device ids to add to its hot-plug annotation / to drop from it
    hand_over: dict[str, list[HotplugEntry]] = dataclasses.field(default_factory=dict)
    take_back: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    #: something is in flight: reconcile again soon
    waiting: bool = False
    #: attach operations that finished (for metrics and events, counted once by the caller)
    finished: list[Operation] = dataclasses.field(default_factory=list)


def wanted_devices(
    claims: Iterable[ResourceClaim], inventory: Mapping[str, FabricDevice], config: FabricConfig
) -> list[Wanted]:
    """Fabric devices of our driver in allocations that wait for our binding condition."""
    out: list[Wanted] = []
    for claim in claims:
        allocation = claim.status.allocation
        if allocation is None:
            continue
        node = allocated_node(claim)
        for result in allocation.devices.results:
            device = inventory.get(result.device or "")
            if (
                result.driver != config.driver
                or device is None
                or result.pool != pool_name(device.model)
                or config.attached not in result.binding_conditions
            ):
                continue
            op_id = attach_operation_id(
                claim.metadata.uid or "", allocation.allocation_timestamp, device.id, node or ""
            )
            out.append(Wanted(claim, result, node, op_id))
    return out


def annotation_names(annotation: str | None) -> set[str]:
    """Device names listed in a node's hot-plug annotation (unreadable: none)."""
    if not annotation:
        return set()
    try:
        entries = json.loads(annotation)
    except ValueError:
        return set()
    if not isinstance(entries, list):
        return set()
    return {str(e.get("name")) for e in entries if isinstance(e, dict)}


def handed_over(annotation: str | None, inventory: Mapping[str, FabricDevice]) -> set[str]:
    """Fabric device ids in a node's hot-plug annotation (entries of other devices are not
    ours and are never touched)."""
    return {name for name in annotation_names(annotation) if name in inventory}


def plan(
    config: FabricConfig,
    claims: Iterable[ResourceClaim],
    fabric: FabricSnapshot,
    annotations: Mapping[str, str | None],
    node_local: Mapping[tuple[str, str], float],
    now: float,
) -> Plan:
    """The whole fabric's next steps.

    ``fabric``: one snapshot of the manager (``fabric.cluster`` is who we are there);
    ``annotations``: node name -> its hot-plug annotation (nodes wired to the fabric);
    ``node_local``: (node, device name) published in node pools of our driver -> when we first
    saw it there; ``now``: the wall clock (allocation timestamps are wall-clock times).
    """
    cluster = fabric.cluster
    inventory = {d.id: d for d in fabric.devices}
    operations = {o.id: o for o in fabric.operations}
    result = Plan()
    desired: dict[str, str] = {}  # device -> node it must stay attached to
    keep: set[tuple[str, str]] = set()  # (node, device) handed over to the node's pool
    for node, annotation in annotations.items():
        keep.update((node, d) for d in handed_over(annotation, inventory))

    for wanted in wanted_devices(claims, inventory, config):
        device = inventory[wanted.device]
        conditions = wanted.conditions()
        failed = conditions.get(config.failed)
        attached = conditions.get(config.attached)
        if failed is not None and failed.is_true:
            continue  # settled: the scheduler undoes the allocation
        if attached is not None and attached.is_true:
            if wanted.node:
                desired[device.id] = wanted.node
            continue  # settled: bound (or binding)
        _plan_pending(
            config, cluster, wanted, device, operations, node_local, now, result, desired, keep
        )

    for device in inventory.values():
        if device.cluster != cluster or device.state == FREE:
            continue
        node = device.node or ""
        needed = desired.get(device.id) == node or (node, device.id) in keep
        if device.state == ATTACHED and not needed:
            result.detach.append(
                Detach(device.id, device.node, detach_operation_id(device), "Unused")
            )
            result.waiting = True
        elif device.state in (ATTACHING, DETACHING):
            result.waiting = True

    # Annotation entries of devices no longer attached there by us go (an admin detached them,
    # or another cluster holds them now).
    for node, annotation in annotations.items():
        stale = {
            d for d in handed_over(annotation, inventory) if not inventory[d].held_by(cluster, node)
        }
        if stale:
            result.take_back[node] = stale
    return result


def _plan_pending(
    config: FabricConfig,
    cluster: str,
    wanted: Wanted,
    device: FabricDevice,
    operations: Mapping[str, Operation],
    node_local: Mapping[tuple[str, str], float],
    now: float,
    result: Plan,
    desired: dict[str, str],
    keep: set[tuple[str, str]],
) -> None:
    """One device whose binding conditions are not settled yet."""
    claim = wanted.claim
    where = f"claim {claim.key}, device {config.driver}/{wanted.result.pool}/{device.id}"

    def fail(reason: str, message: str) -> None:
        result.reports.append(Report(wanted, config.failed, True, reason, message))

    node = wanted.node
    if not node:
        fail(NO_NODE_REASON, f"{where}: the allocation is not pinned to one node")
        return
    allocation = claim.status.allocation
    allocated_at = epoch(allocation.allocation_timestamp if allocation else None)
    op = operations.get(wanted.op_id)
    if op is None and device.state == ATTACHED and device.held_by(cluster, node):
        # Attached there already (an earlier allocation of ours, its operation forgotten).
        op = Operation(
            id=wanted.op_id,
            kind="attach",
            device=device.id,
            cluster=cluster,
            node=node,
            state=SUCCEEDED,
            created=now,
            finished=now,
        )
    if (
        allocated_at is not None
        and now - allocated_at >= config.binding_timeout
        and (op is None or op.state == RUNNING)
    ):
        fail(
            TIMEOUT_REASON,
            f"{where}: not attached to node {node} within {config.binding_timeout:g}s",
        )
        return
    if op is None:
        result.attach.append(Attach(wanted, device.id, node))
        result.reports.append(
            Report(
                wanted,
                config.attached,
                False,
                ATTACHING_REASON,
                f"{where}: attaching to node {node}",
            )
        )
        desired[device.id] = node
        result.waiting = True
        return
    if op.state == RUNNING:
        desired[device.id] = node
        result.waiting = True
        return
    if op.state == SUCCEEDED and device.state == ATTACHING and device.held_by(cluster, node):
        # The attach succeeded, yet the device still reads as attaching to that very node: a
        # device list older than the operation's result (one snapshot never shows this, a
        # manager that answers from two lists might). Look again rather than call it lost.
        desired[device.id] = node
        result.waiting = True
        return
    result.finished.append(op)
    if op.state == FAILED:
        fail(op.reason or "AttachFailed", f"{where}: {op.message or op.reason}")
        return
    if not device.held_by(cluster, node) or device.state != ATTACHED:
        fail(DEVICE_LOST_REASON, f"{where}: attached to node {node}, but not any more")
        return
    if config.after_attach == "bind":
        desired[device.id] = node
        result.reports.append(
            Report(wanted, config.attached, True, ATTACHED_REASON, f"{where}: attached to {node}")
        )
        return
    # reschedule: hand the device to the node's pool, then fail the binding so the scheduler
    # places the pod again, now onto the node-local device.
    keep.add((node, device.id))
    result.hand_over.setdefault(node, []).append(HotplugEntry.of(device))
    # The scheduler must see the node-local device before it retries, or it takes another
    # fabric device: its slice cache lags ours by a watch event, hence the grace.
    seen = node_local.get((node, device.id))
    published = seen is not None and now - seen >= config.handover_grace
    finished = op.finished if op.finished is not None else now
    if published or now - finished >= config.handover_timeout:
        fail(
            HANDED_OVER_REASON,
            f"{where}: attached to node {node} and "
            + ("published in its pool" if published else "handed to its driver")
            + "; rescheduling onto the node-local device",
        )
    else:
        result.waiting = True


# --- writes --------------------------------------------------------------------------------


def status_patch(
    claim: ResourceClaim,
    reports: Sequence[Report],
    config: FabricConfig,
    now: float,
) -> dict[str, Any] | None:
    """A server-side apply body with all of our entries of ``claim.status.devices``, or None
    when the reports change nothing.

    Our field manager owns only our conditions of our fabric devices: the node driver (which
    applies its own entries) and the scheduler are left alone. An apply must name every entry
    we own, or the ones left out are removed, hence all of them each time. ``resourceVersion``
    and ``uid`` make it a write against exactly the claim we planned for.
    """
    ours = (config.attached, config.failed)
    by_device: dict[tuple[str, str, str, str | None], dict[str, dict[str, Any]]] = {}
    ids: dict[tuple[str, str, str, str | None], dict[str, Any]] = {}
    for result in claim.allocated_results():
        if result.driver != config.driver or not (result.pool or "").startswith(POOL_PREFIX):
            continue
        key = (result.driver or "", result.pool or "", result.device or "", result.share_id)
        ids[key] = {"driver": result.driver, "pool": result.pool, "device": result.device}
        if result.share_id is not None:
            ids[key]["shareID"] = result.share_id
        by_device[key] = {}
    for entry in claim.status.devices:
        key = (entry.driver or "", entry.pool or "", entry.device or "", entry.share_id)
        if key in by_device:
            for c in entry.conditions:
                if c.type in ours:
                    by_device[key][c.type or ""] = c.dump()
    changed = False
    stamp = format_epoch(now)
    for report in reports:
        r = report.wanted.result
        key = (r.driver or "", r.pool or "", r.device or "", r.share_id)
        if key not in by_device:
            continue
        status = "True" if report.status else "False"
        current = by_device[key].get(report.type)
        if (
            current is not None
            and current.get("status") == status
            and current.get("reason") == report.reason
        ):
            continue
        transition = (
            current.get("lastTransitionTime")
            if current is not None and current.get("status") == status
            else stamp
        )
        by_device[key][report.type] = {
            "type": report.type,
            "status": status,
            "reason": report.reason,
            "message": report.message[:1024],
            "lastTransitionTime": transition or stamp,
        }
        changed = True
    if not changed:
        return None
    entries = [
        {**ids[key], "conditions": list(conds.values())}
        for key, conds in by_device.items()
        if conds
    ]
    return {
        "apiVersion": claim.api_version,
        "kind": "ResourceClaim",
        "metadata": {
            "name": claim.metadata.name,
            "namespace": claim.metadata.namespace,
            "uid": claim.metadata.uid,
            "resourceVersion": claim.metadata.resource_version,
        },
        "status": {"devices": entries},
    }


def status_write(
    claim: ResourceClaim,
    reports: Sequence[Report],
    config: FabricConfig,
    now: float,
) -> Patch | None:
    """``status_patch`` as a server-side apply of the conditions our field manager owns; the
    patch names the claim's uid and resourceVersion, so a replaced or changed claim is not
    written (a 409: plan again)."""
    patch = status_patch(claim, reports, config, now)
    if patch is None:
        return None
    return Patch(
        kind="ResourceClaim",
        key=ObjectKey(claim.metadata.namespace or "", claim.metadata.name or ""),
        patch=patch,
        resource_version=claim.metadata.resource_version or "",
        patch_type="apply",
        subresource="status",
        field_manager=FIELD_MANAGER,
    )


def hotplug_annotation(body: Mapping[str, Any]) -> str | None:
    """A Node's hot-plug annotation (or that of a patch of it)."""
    return ((body.get("metadata") or {}).get("annotations") or {}).get(HOTPLUG_ANNOTATION)


def annotation_write(
    node: str, body: Mapping[str, Any], add: Sequence[HotplugEntry], drop: set[str]
) -> Patch | None:
    """The Node's hot-plug annotation with entries added and dropped, at the version of
    ``body`` (None: unchanged)."""
    updated = annotation_after(hotplug_annotation(body), add, drop)
    if updated is None:
        return None
    return Patch(
        kind="Node",
        key=ObjectKey("", node),
        patch={"metadata": {"annotations": {HOTPLUG_ANNOTATION: updated}}},
        resource_version=(body.get("metadata") or {}).get("resourceVersion") or "",
    )


def annotation_after(
    annotation: str | None, add: Sequence[HotplugEntry], drop: set[str]
) -> str | None:
    """The node's hot-plug annotation with entries added and dropped, or None if unchanged.

    Entries of others (names we do not manage) are kept as they are.
    """
    try:
        current = json.loads(annotation) if annotation else []
    except ValueError:
        current = []
    if not isinstance(current, list):
        current = []
    names = {str(e.get("name")) for e in current if isinstance(e, dict)}
    updated = [e for e in current if not (isinstance(e, dict) and str(e.get("name")) in drop)]
    updated.extend(e.wire() for e in add if e.name not in names and e.name not in drop)
    if updated == current:
        return None
    return json.dumps(updated, separators=(",", ":"))
