"""The simulated fabric manager's state machine: inventory, operations, faults, persistence.

No I/O but the state file: the HTTP service (``service.py``) calls in and drives ``complete_due``
from a timer. Operations carry absolute deadlines on the wall clock, so a manager restarted from
its state file finishes a running attach when it would have finished anyway: a restart loses
nothing. Several clusters share the inventory; the first to attach a device holds it.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from operators.api.quantity import Quantity, QuantityError
from operators.api.validation import dns1123_label_errors
from operators.fabric.model import (
    ATTACH,
    ATTACH_FAILED,
    ATTACHED,
    ATTACHING,
    DETACHING,
    DEVICE_BUSY,
    DEVICE_TAKEN,
    FAILED,
    FREE,
    NOT_OWNER,
    RUNNING,
    SUCCEEDED,
    DeviceNotFoundError,
    FabricDevice,
    FabricError,
    FaultRequest,
    Operation,
    OperationConflictError,
    OperationRequest,
    model_slug,
)

STATE_VERSION = 1
#: Finished operations kept for idempotent retries and audits; running ones are always kept.
KEEP_FINISHED = 2000


class ConfigError(ValueError):
    """The simulator's config file cannot be used."""


class _Config(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class DeviceGroup(_Config):
    """``count`` identical devices; ids are ``<prefix or model slug>-<n>``."""

    model: str
    vendor: str = "example"
    memory: str = "16Gi"
    count: int = Field(default=1, ge=0, le=1024)
    prefix: str | None = None


class SimConfig(_Config):
    """The simulator's config file (YAML)."""

    attach_seconds: float = Field(default=2.0, ge=0)
    detach_seconds: float = Field(default=1.0, ge=0)
    failure_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    seed: int | None = None
    devices: list[DeviceGroup] = Field(default_factory=list)


def load_config(path: str | Path | None) -> SimConfig:
    if path is None:
        return SimConfig(devices=[DeviceGroup(model="A100", vendor="nvidia", memory="80Gi")])
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"fabric config {path}: {e}") from None
    return parse_config(data)


def parse_config(data: Any) -> SimConfig:
    try:
        config = SimConfig.model_validate(data or {})
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
            for err in e.errors()
        )
        raise ConfigError(f"fabric config: {problems}") from None
    for i, group in enumerate(config.devices):
        try:
            Quantity(group.memory)
        except QuantityError as e:
            raise ConfigError(f"fabric config: devices.{i}.memory: {e}") from None
        prefix = group.prefix or model_slug(group.model)
        if errors := dns1123_label_errors(f"{prefix}-{max(group.count - 1, 0)}"):
            raise ConfigError(f"fabric config: devices.{i}.prefix {prefix!r}: {errors[0]}")
    return config


def inventory(config: SimConfig) -> list[FabricDevice]:
    """The devices of a config; numbering runs per prefix across groups."""
    devices: list[FabricDevice] = []
    counters: dict[str, int] = {}
    for group in config.devices:
        prefix = group.prefix or model_slug(group.model)
        for _ in range(group.count):
            n = counters.get(prefix, 0)
            counters[prefix] = n + 1
            device_id = f"{prefix}-{n}"
            devices.append(
                FabricDevice(
                    id=device_id,
                    model=group.model,
                    vendor=group.vendor,
                    memory=group.memory,
                    uuid=f"FAB-{uuid.uuid5(uuid.NAMESPACE_URL, 'fabric:' + device_id)}",
                )
            )
    return devices


class FabricSimulator:
    """The manager's state; every mutation is persisted before the caller sees its result."""

    def __init__(
        self,
        config: SimConfig,
        state_file: str | Path | None = None,
        *,
        clock: Callable[[], float],
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.attach_seconds = config.attach_seconds
        self.detach_seconds = config.detach_seconds
        self.failure_rate = config.failure_rate
        self.clock = clock
        self.rng = rng or random.Random(config.seed)
        self.state_file = Path(state_file) if state_file else None
        self.devices: dict[str, FabricDevice] = {d.id: d for d in inventory(config)}
        self.operations: dict[str, Operation] = {}
        self.faults: dict[str, list[FaultRequest]] = {}
        if self.state_file is not None and self.state_file.exists():
            self._restore(json.loads(self.state_file.read_text()))

    # --- persistence -----------------------------------------------------------------------

    def _restore(self, state: Mapping[str, Any]) -> None:
        """The saved state wins over the config for every device it knows; devices the config
        no longer lists are kept while someone holds them (they are still plugged in)."""
        for raw in state.get("devices", []):
            device = FabricDevice.model_validate(raw)
            if device.id in self.devices or device.state != FREE:
                self.devices[device.id] = device
        for raw in state.get("operations", []):
            op = Operation.model_validate(raw)
            self.operations[op.id] = op
        for device_id, faults in (state.get("faults") or {}).items():
            self.faults[device_id] = [FaultRequest.model_validate(f) for f in faults]
        if "failureRate" in state:
            self.failure_rate = float(state["failureRate"])

    def save(self) -> None:
        """Write the state atomically (temp file + rename): a crash never leaves half a file."""
        if self.state_file is None:
            return
        state = {
            "version": STATE_VERSION,
            "devices": [d.wire() for d in self.devices.values()],
            "operations": [o.wire() for o in self.operations.values()],
            "faults": {k: [f.wire() for f in v] for k, v in self.faults.items() if v},
            "failureRate": self.failure_rate,
        }
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.state_file.parent, prefix=".fabric-state-")
        with os.fdopen(fd, "w") as f:
            json.dump(state, f, indent=1, sort_keys=True)
        os.replace(tmp, self.state_file)

    def _prune(self) -> None:
        finished = sorted(
            (o for o in self.operations.values() if o.done), key=lambda o: o.finished or 0.0
        )
        for op in finished[: max(0, len(finished) - KEEP_FINISHED)]:
            del self.operations[op.id]

    # --- requests --------------------------------------------------------------------------

    def device(self, device_id: str) -> FabricDevice:
        try:
            return self.devices[device_id]
        except KeyError:
            raise DeviceNotFoundError(device_id) from None

    def submit(self, request: OperationRequest) -> tuple[Operation, bool]:
        """Start an operation; (operation, created). The same id again returns the same one."""
        existing = self.operations.get(request.id)
        if existing is not None:
            same = (existing.kind, existing.device, existing.cluster, existing.node) == (
                request.kind,
                request.device,
                request.cluster,
                request.node if request.kind == ATTACH else existing.node,
            )
            if not same:
                raise OperationConflictError(request.id, "the id was used for another request")
            return existing, False
        device = self.device(request.device)
        if request.kind == ATTACH and not request.node:
            raise FabricError(400, "Invalid", f"operation {request.id}: attach needs a node")
        now = self.clock()
        op = Operation(
            id=request.id,
            kind=request.kind,
            device=device.id,
            cluster=request.cluster,
            node=request.node if request.kind == ATTACH else device.node,
            labels=dict(request.labels),
            created=now,
        )
        if request.kind == ATTACH:
            self._start_attach(device, op, now)
        else:
            self._start_detach(device, op, now)
        self.operations[op.id] = op
        self._prune()
        self.save()
        return op, True

    def _fail(self, op: Operation, reason: str, message: str, now: float) -> None:
        op.state, op.reason, op.message, op.finished, op.deadline = (
            FAILED,
            reason,
            message,
            now,
            None,
        )

    def _holder(self, device: FabricDevice) -> str:
        return f"cluster {device.cluster}" + (f", node {device.node}" if device.node else "")

    def _start_attach(self, device: FabricDevice, op: Operation, now: float) -> None:
        if device.state == FREE:
            device.state, device.cluster, device.node = ATTACHING, op.cluster, op.node
            device.operation = op.id
            op.deadline = now + self.attach_seconds
        elif device.cluster != op.cluster:
            self._fail(
                op,
                DEVICE_TAKEN,
                f"device {device.id} is held by another cluster ({self._holder(device)})",
                now,
            )
        elif device.node == op.node and device.state in (ATTACHING, ATTACHED):
            # Idempotent on the target: another attempt to attach where it already goes.
            leader = self.operations.get(device.operation or "")
            if device.state == ATTACHED or leader is None or leader.deadline is None:
                op.state, op.finished = SUCCEEDED, now
                op.reason = "AlreadyAttached"
            else:
                op.deadline = leader.deadline  # completes with the attach in progress
        else:
            self._fail(
                op,
                DEVICE_BUSY,
                f"device {device.id} is {device.state} ({self._holder(device)})",
                now,
            )

    def _start_detach(self, device: FabricDevice, op: Operation, now: float) -> None:
        if device.state == FREE:
            op.state, op.finished, op.reason = SUCCEEDED, now, "AlreadyFree"
        elif device.cluster != op.cluster:
            self._fail(op, NOT_OWNER, f"device {device.id} is held by {self._holder(device)}", now)
        elif device.state == ATTACHING:
            self._fail(op, DEVICE_BUSY, f"device {device.id} is still attaching; retry", now)
        elif device.state == DETACHING:
            leader = self.operations.get(device.operation or "")
            op.deadline = leader.deadline if leader and leader.deadline else now
        else:
            device.state, device.operation = DETACHING, op.id
            op.deadline = now + self.detach_seconds

    def inject(self, fault: FaultRequest) -> None:
        if fault.rate is not None:
            self.failure_rate = fault.rate
        if fault.device is not None:
            self.device(fault.device)
            self.faults[fault.device] = [fault] if fault.count else []
        self.save()

    # --- time --------------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        deadlines = [o.deadline for o in self.operations.values() if o.deadline is not None]
        return min(deadlines) if deadlines else None

    def complete_due(self) -> list[Operation]:
        """Finish every operation whose deadline passed (leaders before followers)."""
        now = self.clock()
        due = sorted(
            (
                o
                for o in self.operations.values()
                if o.state == RUNNING and o.deadline is not None and o.deadline <= now
            ),
            key=lambda o: (o.deadline or 0.0, o.created, o.id),
        )
        for op in due:
            device = self.devices.get(op.device)
            if device is None:
                self._fail(op, "DeviceNotFound", f"device {op.device} left the fabric", now)
            elif op.kind == ATTACH:
                self._finish_attach(device, op, now)
            else:
                self._finish_detach(device, op, now)
        if due:
            self.save()
        return due

    def _finish_attach(self, device: FabricDevice, op: Operation, now: float) -> None:
        if device.operation != op.id:  # a follower: share the leader's outcome
            if device.state == ATTACHED and device.held_by(op.cluster, op.node):
                op.state, op.finished, op.deadline = SUCCEEDED, now, None
            else:
                leader = self.operations.get(device.operation or "")
                reason = leader.reason if leader and leader.reason else ATTACH_FAILED
                self._fail(op, reason, f"device {device.id}: the attach it joined failed", now)
            return
        fault = self._draw_fault(device.id)
        if fault is not None:
            device.state, device.cluster, device.node = FREE, None, None
            self._fail(op, fault[0], fault[1] or f"device {device.id}: attach failed", now)
            return
        device.state = ATTACHED
        device.attach_count += 1
        op.state, op.finished, op.deadline = SUCCEEDED, now, None

    def _finish_detach(self, device: FabricDevice, op: Operation, now: float) -> None:
        if device.operation == op.id:
            device.state, device.cluster, device.node = FREE, None, None
        op.state, op.finished, op.deadline = SUCCEEDED, now, None

    def _draw_fault(self, device_id: str) -> tuple[str, str] | None:
        queued = self.faults.get(device_id)
        if queued:
            fault = queued[0]
            fault.count -= 1
            if fault.count <= 0:
                queued.pop(0)
            return fault.reason, fault.message
        if self.failure_rate and self.rng.random() < self.failure_rate:
            return ATTACH_FAILED, f"device {device_id}: attach failed (injected rate)"
        return None

    # --- views ---------------------------------------------------------------------------

    def list_operations(
        self, cluster: str | None = None, device: str | None = None
    ) -> list[Operation]:
        return [
            o
            for o in self.operations.values()
            if (cluster is None or o.cluster == cluster) and (device is None or o.device == device)
        ]
