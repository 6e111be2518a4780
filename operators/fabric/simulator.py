"""The simulated fabric manager's state machine: inventory, operations, faults, persistence.

No I/O but its state files: the HTTP service (``service.py``) authenticates the caller, calls in
with the caller's cluster, and drives ``complete_due`` from a timer. Operations carry absolute
deadlines on the wall clock, so a manager restarted from its state finishes a running attach
when it would have finished anyway: a restart loses nothing. Several clusters share the
inventory; the first to attach a device holds it, and only the holder may detach it or read its
operations. What one cluster can make the manager keep is bounded: finished operations per
cluster (``keep_finished``), running ones per cluster (``max_running``), and the size of every
field (``model.py``).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from operators.api.quantity import Quantity, QuantityError
from operators.api.validation import dns1123_label_errors
from operators.fabric.journal import REVISION, Journal, JournalError
from operators.fabric.model import (
    ATTACH,
    ATTACH_FAILED,
    ATTACHED,
    ATTACHING,
    DETACH,
    DETACHING,
    DEVICE_BUSY,
    DEVICE_TAKEN,
    FAILED,
    FREE,
    RUNNING,
    SUCCEEDED,
    DeviceNotFoundError,
    FabricDevice,
    FabricError,
    FabricSnapshot,
    FaultRequest,
    ForbiddenError,
    Operation,
    OperationConflictError,
    OperationRequest,
    TooManyOperationsError,
    model_slug,
)

STATE_VERSION = 2
#: Finished operations kept per cluster for idempotent retries and audits (running ones are
#: always kept); the ones that finished first go first.
KEEP_FINISHED = 500
#: Running operations one cluster may have (attaches joining one in flight stay running).
MAX_RUNNING = 256


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
    """The manager's state; every change is journaled before the caller sees its result."""

    def __init__(
        self,
        config: SimConfig,
        state_file: str | Path | None = None,
        *,
        clock: Callable[[], float],
        rng: random.Random | None = None,
        keep_finished: int = KEEP_FINISHED,
        max_running: int = MAX_RUNNING,
        compact_bytes: int = 1 << 20,
    ) -> None:
        self.config = config
        self.attach_seconds = config.attach_seconds
        self.detach_seconds = config.detach_seconds
        self.failure_rate = config.failure_rate
        self.clock = clock
        self.rng = rng or random.Random(config.seed)
        self.keep_finished = keep_finished
        self.max_running = max_running
        self.devices: dict[str, FabricDevice] = {d.id: d for d in inventory(config)}
        self._configured = frozenset(self.devices)
        self.operations: dict[str, Operation] = {}
        self.faults: dict[str, list[FaultRequest]] = {}
        self.epoch = uuid.uuid4().hex
        self.revision = 0
        self._changed: _Changes = _Changes()
        self.journal = Journal(state_file, min_compact_bytes=compact_bytes) if state_file else None
        if self.journal is not None:
            snapshot, records = self.journal.load()
            try:
                for state in [snapshot or {}, *records]:
                    self._restore(state)
            except (ValidationError, TypeError, ValueError) as e:
                raise JournalError(f"state file {self.journal.path}: {e}") from None
            # Start from a snapshot of what was restored: a clean journal, any tail gone.
            self.journal.compact(self._state())

    @property
    def state_file(self) -> Path | None:
        return None if self.journal is None else self.journal.path

    # --- persistence -----------------------------------------------------------------------

    def _restore(self, state: Mapping[str, Any]) -> None:
        """Apply a snapshot or a journal record. The saved state wins over the config for every
        device it knows; devices the config no longer lists are kept while someone holds them
        (they are still plugged in)."""
        for raw in state.get("devices", []):
            device = FabricDevice.model_validate(raw)
            if device.id in self._configured or device.state != FREE:
                self.devices[device.id] = device
            else:
                self.devices.pop(device.id, None)
        for raw in state.get("operations", []):
            op = Operation.model_validate(raw)
            self.operations[op.id] = op
        for op_id in state.get("forgotten", []):
            self.operations.pop(op_id, None)
        for device_id, faults in (state.get("faults") or {}).items():
            self.faults[device_id] = [FaultRequest.model_validate(f) for f in faults]
        if "failureRate" in state:
            self.failure_rate = float(state["failureRate"])
        if state.get("epoch"):
            self.epoch = str(state["epoch"])
        self.revision = max(self.revision, int(state.get(REVISION, 0)))

    def _state(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "epoch": self.epoch,
            REVISION: self.revision,
            "devices": [d.wire() for d in self.devices.values()],
            "operations": [o.wire() for o in self.operations.values()],
            "faults": {k: [f.wire() for f in v] for k, v in self.faults.items() if v},
            "failureRate": self.failure_rate,
        }

    def _commit(self) -> None:
        """One revision for the changes made since the last commit, journaled as one line of
        just those objects."""
        changed, self._changed = self._changed, _Changes()
        if not changed:
            return
        self.revision += 1
        if self.journal is None:
            return
        record: dict[str, Any] = {REVISION: self.revision}
        devices = [self.devices[d] for d in sorted(changed.devices) if d in self.devices]
        if devices:
            record["devices"] = [d.wire() for d in devices]
        ops = [self.operations[o] for o in sorted(changed.operations) if o in self.operations]
        if ops:
            record["operations"] = [o.wire() for o in ops]
        if forgotten := sorted(changed.forgotten - set(self.operations)):
            record["forgotten"] = forgotten
        if changed.faults:
            record["faults"] = {
                d: [f.wire() for f in self.faults.get(d, [])] for d in sorted(changed.faults)
            }
        if changed.failure_rate:
            record["failureRate"] = self.failure_rate
        self.journal.append(record)
        if self.journal.due:
            self.journal.compact(self._state())

    def save(self) -> None:
        """Write the whole state as the snapshot (on shutdown): the next start reads one file."""
        self._commit()
        if self.journal is not None:
            self.journal.compact(self._state())
            self.journal.close()

    def _prune(self, clusters: Iterable[str]) -> None:
        """Forget the earliest-finished operations of each cluster beyond ``keep_finished``."""
        for cluster in set(clusters):
            finished = sorted(
                (o for o in self.operations.values() if o.cluster == cluster and o.done),
                key=lambda o: (o.finished or 0.0, o.id),
            )
            for op in finished[: max(0, len(finished) - self.keep_finished)]:
                del self.operations[op.id]
                self._changed.forgotten.add(op.id)

    # --- requests --------------------------------------------------------------------------

    def device(self, device_id: str) -> FabricDevice:
        try:
            return self.devices[device_id]
        except KeyError:
            raise DeviceNotFoundError(device_id) from None

    def operation(self, op_id: str, cluster: str) -> Operation | None:
        """One of ``cluster``'s operations; None when the id is unknown."""
        op = self.operations.get(op_id)
        if op is not None and op.cluster != cluster:
            raise ForbiddenError(f"operation {op_id}: not an operation of cluster {cluster}")
        return op

    def submit(self, request: OperationRequest, cluster: str) -> tuple[Operation, bool]:
        """Start an operation for ``cluster`` (the caller's credential); (operation, created).
        The same id again returns the same one."""
        existing = self.operation(request.id, cluster)
        if existing is not None:
            same = (existing.kind, existing.device, existing.node) == (
                request.kind,
                request.device,
                request.node if request.kind == ATTACH else existing.node,
            )
            if not same:
                raise OperationConflictError(request.id, "the id was used for another request")
            return existing, False
        device = self.device(request.device)
        if request.kind == ATTACH and not request.node:
            raise FabricError(400, "Invalid", f"operation {request.id}: attach needs a node")
        if request.kind == DETACH and device.state != FREE and device.cluster != cluster:
            raise ForbiddenError(f"device {device.id}: held by another cluster")
        running = sum(1 for o in self.operations.values() if o.cluster == cluster and not o.done)
        if running >= self.max_running:
            raise TooManyOperationsError(cluster, self.max_running)
        now = self.clock()
        op = Operation(
            id=request.id,
            kind=request.kind,
            device=device.id,
            cluster=cluster,
            node=request.node if request.kind == ATTACH else device.node,
            labels=dict(request.labels),
            created=now,
        )
        if request.kind == ATTACH:
            self._start_attach(device, op, now)
        else:
            self._start_detach(device, op, now)
        self.operations[op.id] = op
        self._changed.touch(device.id, op.id)
        self._prune([cluster])
        self._commit()
        return op, True

    def _fail(self, op: Operation, reason: str, message: str, now: float) -> None:
        op.state, op.reason, op.message, op.finished, op.deadline = (
            FAILED,
            reason,
            message,
            now,
            None,
        )

    def _where(self, device: FabricDevice) -> str:
        """Where one of the caller's own devices is (never said of another cluster's)."""
        return f"node {device.node}" if device.node else "no node"

    def _start_attach(self, device: FabricDevice, op: Operation, now: float) -> None:
        if device.state == FREE:
            device.state, device.cluster, device.node = ATTACHING, op.cluster, op.node
            device.operation = op.id
            op.deadline = now + self.attach_seconds
        elif device.cluster != op.cluster:
            self._fail(op, DEVICE_TAKEN, f"device {device.id} is held by another cluster", now)
        elif device.node == op.node and device.state in (ATTACHING, ATTACHED):
            # Idempotent on the target: another attempt to attach where it already goes.
            leader = self.operations.get(device.operation or "")
            if device.state == ATTACHED or leader is None or leader.deadline is None:
                op.state, op.finished = SUCCEEDED, now
                op.reason = "AlreadyAttached"
            else:
                op.deadline = leader.deadline  # completes with the attach in progress
        else:
            where = self._where(device)
            self._fail(op, DEVICE_BUSY, f"device {device.id} is {device.state} ({where})", now)

    def _start_detach(self, device: FabricDevice, op: Operation, now: float) -> None:
        if device.state == FREE:
            op.state, op.finished, op.reason = SUCCEEDED, now, "AlreadyFree"
        elif device.state == ATTACHING:
            self._fail(op, DEVICE_BUSY, f"device {device.id} is still attaching; retry", now)
        elif device.state == DETACHING:
            leader = self.operations.get(device.operation or "")
            op.deadline = leader.deadline if leader and leader.deadline else now
        else:
            device.state, device.operation = DETACHING, op.id
            op.deadline = now + self.detach_seconds

    def inject(self, fault: FaultRequest) -> None:
        if fault.device is not None:
            self.device(fault.device)
            self.faults[fault.device] = [fault] if fault.count else []
            self._changed.faults.add(fault.device)
        if fault.rate is not None:
            self.failure_rate = fault.rate
            self._changed.failure_rate = True
        self._commit()

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
            self._changed.touch(op.device, op.id)
        self._prune(o.cluster for o in due)
        self._commit()
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
            self._changed.faults.add(device_id)
            fault = queued[0]
            fault.count -= 1
            if fault.count <= 0:
                queued.pop(0)
            return fault.reason, fault.message
        if self.failure_rate and self.rng.random() < self.failure_rate:
            return ATTACH_FAILED, f"device {device_id}: attach failed (injected rate)"
        return None

    # --- views ---------------------------------------------------------------------------

    def devices_for(self, cluster: str) -> list[FabricDevice]:
        """The inventory as ``cluster`` may see it (others' holdings without their names)."""
        return [d.seen_by(cluster) for d in self.devices.values()]

    def list_operations(self, cluster: str, device: str | None = None) -> list[Operation]:
        return [
            o
            for o in self.operations.values()
            if o.cluster == cluster and (device is None or o.device == device)
        ]

    def snapshot(self, cluster: str) -> FabricSnapshot:
        """Devices and ``cluster``'s operations at one revision (nothing runs in between)."""
        return FabricSnapshot(
            cluster=cluster,
            epoch=self.epoch,
            revision=self.revision,
            devices=self.devices_for(cluster),
            operations=self.list_operations(cluster),
        )


class _Changes:
    """What changed since the last commit: the objects a journal line must hold."""

    def __init__(self) -> None:
        self.devices: set[str] = set()
        self.operations: set[str] = set()
        self.forgotten: set[str] = set()
        self.faults: set[str] = set()
        self.failure_rate = False

    def touch(self, device: str, operation: str) -> None:
        self.devices.add(device)
        self.operations.add(operation)

    def __bool__(self) -> bool:
        return bool(
            self.devices or self.operations or self.forgotten or self.faults or self.failure_rate
        )
