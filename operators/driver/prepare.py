"""Deciding how to prepare a claim on this node (pure: the claim and node in, a plan out).

The kubelet only sends namespace, name and UID; the driver reads the claim itself and must not
trust that it fits: the claim has to be the same object (UID), allocated, reserved for a pod,
allocated for this node, and its devices of our driver must be devices of this node's pool, or
fabric devices whose binding conditions say they were attached to it (KEP-5007).
Anything else is a per-claim error the kubelet reports on the pod, not a driver failure.
A device whose allocation skips NodePrepareResources (1.37, DRAOptionalNodeOperations) is left
alone: see ``skips_prepare``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from operators.allocator.errors import InvalidNodeSelectorError
from operators.allocator.nodes import selector_matches
from operators.api.core import Node, NodeSelector
from operators.api.meta import Condition
from operators.api.resource import (
    ALLOCATION_CONFIG_SOURCE_CLASS,
    AllocatedDeviceStatus,
    DeviceAllocationConfiguration,
    DeviceRequestAllocationResult,
    NetworkDeviceData,
    ResourceClaim,
)
from operators.api.validation import SKIP_NODE_ALL, SKIP_NODE_PREPARE
from operators.driver import cdi
from operators.driver.checkpoint import PreparedClaim, PreparedDevice
from operators.driver.opaque import (
    ConfigError,
    DeviceConfig,
    GpuConfig,
    NicConfig,
    parse_device_config,
)
from operators.driver.profiles import DeviceInfo, Inventory, stable_uuid
from operators.scheduling.binding_conditions import device_conditions

READY_CONDITION = "Ready"
DEVICE_NODE_DIR = "/dev/kopf-dra"


def skips_prepare(result: DeviceRequestAllocationResult) -> bool:
    """The allocation says this device needs no NodePrepareResources (copied from its slice's
    ``skipNodeOperations``): preparing it is a no-op, never an error.

    The kubelet (1.37.2, ``computeDriverStates``) skips the call per claim and driver, only
    when every device of the driver in the claim skips it; a claim that also holds one of our
    devices that does need preparing is sent to us whole, with this device in it. Preparing the
    others and giving this one nothing (no CDI device, no status entry) gives the container the
    same as a claim whose call was skipped; refusing would fail claims the API allows.
    """
    return bool({SKIP_NODE_PREPARE, SKIP_NODE_ALL} & set(result.skip_node_operations))


class PrepareError(Exception):
    """This claim cannot be prepared here; ``reason`` is CamelCase, the message has coordinates."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message

    def __str__(self) -> str:
        return f"{self.reason}: {self.message}"


@dataclass(frozen=True)
class Preparation:
    """What to write (CDI spec, checkpoint record) and to report (device status)."""

    claim: PreparedClaim
    statuses: list[AllocatedDeviceStatus] = field(default_factory=list)


@dataclass(frozen=True)
class _Configs:
    gpu: GpuConfig | None = None
    nic: NicConfig | None = None


def _ordered_configs(
    configs: list[DeviceAllocationConfiguration], driver: str, where: str
) -> list[tuple[list[str], DeviceConfig]]:
    """Our driver's configs, class configs before claim configs (later ones win), parsed."""
    ours = [
        (i, c) for i, c in enumerate(configs) if c.opaque is not None and c.opaque.driver == driver
    ]
    ours.sort(key=lambda ic: 0 if ic[1].source == ALLOCATION_CONFIG_SOURCE_CLASS else 1)
    parsed: list[tuple[list[str], DeviceConfig]] = []
    for i, config in ours:
        assert config.opaque is not None
        try:
            parsed.append((config.requests, parse_device_config(config.opaque.parameters)))
        except ConfigError as e:
            source = config.source or "config"
            raise PrepareError(ConfigError.reason, f"{where}, {source} config #{i}: {e}") from None
    return parsed


def _configs_for(
    result: DeviceRequestAllocationResult,
    info: DeviceInfo,
    configs: list[tuple[list[str], DeviceConfig]],
    where: str,
) -> _Configs:
    gpu: GpuConfig | None = None
    nic: NicConfig | None = None
    for requests, config in configs:
        named = bool(requests) and (result.request in requests or result.parent_request in requests)
        if requests and not named:
            continue
        fits = info.kind in (("gpu", "mig") if isinstance(config, GpuConfig) else ("nic",))
        if not fits:
            if named:
                raise PrepareError(
                    ConfigError.reason,
                    f"{where}, request {result.request}: {config.kind} cannot configure "
                    f"{info.kind} device {info.name}",
                )
            continue
        if isinstance(config, GpuConfig):
            gpu = config
        else:
            nic = config
    return _Configs(gpu, nic)


def check_claim(claim: ResourceClaim, uid: str, node: Node) -> None:
    """The claim is the one the kubelet means, allocated, reserved, and for this node."""
    where = f"claim {claim.key}"
    if claim.metadata.uid != uid:
        raise PrepareError(
            "ClaimUIDMismatch",
            f"{where}: has UID {claim.metadata.uid}, the kubelet asked for {uid} "
            "(the claim was deleted and recreated)",
        )
    allocation = claim.status.allocation
    if allocation is None:
        raise PrepareError("NotAllocated", f"{where}: not allocated")
    if not claim.status.reserved_for:
        raise PrepareError("NotReserved", f"{where}: not reserved for any pod")
    if allocation.node_selector is not None:
        try:
            matches = selector_matches(allocation.node_selector, node)
        except InvalidNodeSelectorError as e:
            raise PrepareError("InvalidNodeSelector", f"{where}: allocation: {e}") from None
        if not matches:
            raise PrepareError(
                "WrongNode",
                f"{where}: allocated for other nodes than {node.metadata.name} "
                "(its pods cannot run here)",
            )


def attached_device(
    claim: ResourceClaim, result: DeviceRequestAllocationResult, node: Node
) -> DeviceInfo:
    """A device of another pool of ours that was attached to this node for this claim.

    The composable flow of KEP-5007: the fabric controller publishes its free devices under
    our driver name in pools of its own, with binding conditions, and attaches the chosen
    one to the allocated node before the pod is bound. It reaches the node by hot-plug,
    so the kubelet asks us to prepare it; the claim's own device status says it arrived.
    """
    where = f"claim {claim.key}"
    conditions = device_conditions(claim, result)
    failed = [c for c in result.binding_failure_conditions if conditions.get(c)]
    missing = [c for c in result.binding_conditions if not conditions.get(c)]
    if failed or missing:
        state = f"reports {', '.join(failed)}" if failed else f"lacks {', '.join(missing)}"
        raise PrepareError(
            "NotAttached",
            f"{where}: device {result.device_id} is not attached to {node.metadata.name}: "
            f"its status {state}",
        )
    name = result.device or ""
    return DeviceInfo(
        name, "gpu", stable_uuid(node.metadata.name or "", f"{result.pool}/{name}"), "fabric-gpu"
    )


def pinned_to(selector: NodeSelector | None, node: str) -> bool:
    """The allocation names this one node (``metadata.name In [node]`` in every term), as an
    allocation of a node's own devices does."""
    if selector is None or not selector.node_selector_terms:
        return False
    return all(
        any(
            f.key == "metadata.name" and f.operator == "In" and f.values == [node]
            for f in term.match_fields
        )
        for term in selector.node_selector_terms
    )


def multi_host_device(
    claim: ResourceClaim, result: DeviceRequestAllocationResult, node: Node, pool: str
) -> DeviceInfo:
    """A device of another pool of ours that several nodes reach (perDeviceNodeSelection or a
    pool for all nodes matching a selector): an interconnect the pods of a job share, on every
    node the allocation's selector admits (``check_claim`` proved this one is). Nothing moves
    to the node: the container gets the device's identity, the same on every node."""
    allocation = claim.status.allocation
    assert allocation is not None
    if allocation.node_selector is None or pinned_to(
        allocation.node_selector, node.metadata.name or ""
    ):
        raise PrepareError(
            "WrongPool",
            f"claim {claim.key}: device {result.device_id} is not in pool {pool} of this node",
        )
    name = result.device or ""
    return DeviceInfo(
        name,
        "interconnect",
        stable_uuid(result.driver or "", f"{result.pool}/{name}"),
        "interconnect",
    )


def plan_prepare(
    claim: ResourceClaim,
    *,
    uid: str,
    driver: str,
    node: Node,
    pool: str,
    inventory: Inventory,
    now: str,
) -> Preparation:
    """The CDI spec, kubelet answer and device statuses for ``claim``, or PrepareError."""
    check_claim(claim, uid, node)
    assert claim.status.allocation is not None
    where = f"claim {claim.key}"
    configs = _ordered_configs(claim.status.allocation.devices.config, driver, where)
    devices: list[PreparedDevice] = []
    entries: list[dict[str, Any]] = []
    statuses: list[AllocatedDeviceStatus] = []
    seen: dict[tuple[str, str, str | None], PreparedDevice] = {}
    for result in claim.allocated_results():
        if result.driver != driver:
            continue
        device_id = result.device_id
        if skips_prepare(result):
            continue  # the service logs it
        if result.pool != pool:
            info: DeviceInfo | None = (
                attached_device(claim, result, node)
                if result.binding_conditions
                else multi_host_device(claim, result, node, pool)
            )
        else:
            info = inventory.info.get(result.device or "")
        if info is None:
            raise PrepareError("UnknownDevice", f"{where}: device {device_id} is not on this node")
        key = (result.pool or "", info.name, result.share_id)
        if key in seen:
            seen[key].request_names.append(result.request or "")
            continue
        chosen = _configs_for(result, info, configs, where)
        name = cdi.cdi_device_name(uid, info.name, result.share_id)
        env = device_env(claim, result, info, chosen)
        real = inventory.edits.get(info.name)
        if real is not None:
            env.update(real.env)
            nodes = [{"path": n, "hostPath": n} for n in real.device_nodes]
        elif inventory.device_node_host_path:
            nodes = [
                {
                    "path": f"{DEVICE_NODE_DIR}/{info.name}",
                    "hostPath": inventory.device_node_host_path,
                }
            ]
        else:
            nodes = []
        entries.append(cdi.device_entry(name, env, nodes, real.mounts if real else ()))
        prepared = PreparedDevice(
            request_names=[result.request or ""],
            pool=result.pool or "",
            device=info.name,
            share_id=result.share_id,
            cdi_device_ids=[cdi.qualified_id(driver, name)],
        )
        seen[key] = prepared
        devices.append(prepared)
        if info.kind != "interconnect":  # shared by nodes: its status is not one node's to write
            statuses.append(device_status(claim, result, info, chosen, node, now))
    record = PreparedClaim(
        uid=uid,
        namespace=claim.metadata.namespace or "",
        name=claim.metadata.name or "",
        devices=devices,
        cdi_spec=cdi.build_spec(driver, entries),
    )
    return Preparation(record, statuses)


def _env_key(info: DeviceInfo, share_id: str | None) -> str:
    return info.name + (f"_{share_id[:8]}" if share_id else "")


def device_env(
    claim: ResourceClaim,
    result: DeviceRequestAllocationResult,
    info: DeviceInfo,
    configs: _Configs,
) -> dict[str, str]:
    """What the container sees of one device: ``KOPF_DRA_DEVICE_<DEVICE>[_<WHAT>]``."""
    key = _env_key(info, result.share_id)
    env = {
        cdi.env_name("DEVICE", key): info.uuid,
        cdi.env_name("DEVICE", key, "TYPE"): info.kind,
        cdi.env_name("DEVICE", key, "MODEL"): info.model,
        cdi.env_name("DEVICE", key, "CLAIM"): claim.key,
        cdi.env_name("DEVICE", key, "REQUEST"): result.request or "",
    }
    if info.profile:
        env[cdi.env_name("DEVICE", key, "PROFILE")] = info.profile
    if info.interface_name:
        env[cdi.env_name("DEVICE", key, "INTERFACE")] = info.interface_name
    for name, quantity in sorted(result.consumed_capacity.items()):
        env[cdi.env_name("DEVICE", key, name)] = str(quantity)
    config = configs.gpu if info.kind in ("gpu", "mig") else configs.nic
    if config is not None:
        for what, value in config.env().items():
            env[cdi.env_name("DEVICE", key, what)] = value
    return env


def device_status(
    claim: ResourceClaim,
    result: DeviceRequestAllocationResult,
    info: DeviceInfo,
    configs: _Configs,
    node: Node,
    now: str,
) -> AllocatedDeviceStatus:
    """The device's entry in ``status.devices``: Ready, plus its identity as data."""
    data: dict[str, Any] = {"uuid": info.uuid, "model": info.model, "type": info.kind}
    if info.profile:
        data["profile"] = info.profile
    if info.parent:
        data["parent"] = info.parent
    config = configs.gpu if info.kind in ("gpu", "mig") else configs.nic
    if isinstance(config, GpuConfig):
        data["sharing"] = config.sharing.strategy
    status = AllocatedDeviceStatus(
        driver=result.driver,
        pool=result.pool,
        device=result.device,
        share_id=result.share_id,
        conditions=[
            Condition(
                type=READY_CONDITION,
                status="True",
                observed_generation=claim.metadata.generation,
                last_transition_time=now,
                reason="Prepared",
                message=f"prepared on node {node.metadata.name}",
            )
        ],
        data=data,
    )
    if info.kind == "nic":
        status.network_data = NetworkDeviceData(
            interface_name=info.interface_name, hardware_address=info.mac_address
        )
    return status
