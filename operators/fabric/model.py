"""The fabric manager's wire model: devices, operations, errors (JSON over HTTP, camelCase).

Real composable systems (CDI-style fabric managers, CXL switch controllers) expose the same
shape: an inventory of devices that sit behind the switch, and long-running attach/detach
*operations* addressed by an id the client chooses. A client that retries with the same id
gets the same operation back, which is what makes a restarted controller safe.
"""

from __future__ import annotations

import re
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic.alias_generators import to_camel

# Device states.
FREE: Final = "free"
ATTACHING: Final = "attaching"
ATTACHED: Final = "attached"
DETACHING: Final = "detaching"
DeviceState = Literal["free", "attaching", "attached", "detaching"]

# Operation kinds and states.
ATTACH: Final = "attach"
DETACH: Final = "detach"
OperationKind = Literal["attach", "detach"]
RUNNING: Final = "running"
SUCCEEDED: Final = "succeeded"
FAILED: Final = "failed"
OperationState = Literal["running", "succeeded", "failed"]

# Failure reasons of operations (CamelCase, like Kubernetes condition reasons).
DEVICE_TAKEN: Final = "DeviceTaken"  # held by another cluster
DEVICE_BUSY: Final = "DeviceBusy"  # ours, but attached elsewhere or in transition
ATTACH_FAILED: Final = "AttachFailed"  # the hardware said no (injected fault)

# Bounds of what a caller may store in the manager: every byte of a request that is kept is
# kept for every cluster sharing it, so nothing a caller sends grows without a limit.
MAX_BODY_BYTES: Final = 64 * 1024
MAX_LABELS: Final = 16
MAX_LABEL_KEY: Final = 63
MAX_LABEL_VALUE: Final = 512
MAX_MESSAGE: Final = 1024
MAX_DEVICE_ID: Final = 63  # a DNS label: devices are published under their ids
MAX_NODE_NAME: Final = 253

LABEL_KEY: Final = r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$"
LabelKey = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_LABEL_KEY, pattern=LABEL_KEY)
]
LabelValue = Annotated[str, StringConstraints(max_length=MAX_LABEL_VALUE)]
Labels = Annotated[dict[LabelKey, LabelValue], Field(max_length=MAX_LABELS)]


class WireModel(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown keys are kept for newer servers."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    def wire(self) -> dict[str, object]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class FabricDevice(WireModel):
    """A device behind the fabric switch, as the manager reports it."""

    id: str
    model: str
    vendor: str = ""
    memory: str = ""  # a Kubernetes quantity ("80Gi")
    uuid: str = ""
    state: DeviceState = "free"
    cluster: str | None = None  # who holds it (attaching, attached, detaching)
    node: str | None = None
    operation: str | None = None  # the operation that last changed its state
    attach_count: int = 0  # successful attaches over the device's life (double-attach audits)

    def held_by(self, cluster: str, node: str | None = None) -> bool:
        return (
            self.state != FREE and self.cluster == cluster and (node is None or self.node == node)
        )

    def seen_by(self, cluster: str) -> FabricDevice:
        """The device as ``cluster`` may see it: who else holds it, and where, is not its
        business (held or free is all a tenant needs to know)."""
        if self.state == FREE or self.cluster == cluster:
            return self
        return self.model_copy(update={"cluster": None, "node": None, "operation": None})


class Operation(WireModel):
    """One attach or detach, asynchronous: ``running`` until it succeeds or fails."""

    id: str
    kind: OperationKind
    device: str
    cluster: str
    node: str | None = None
    state: OperationState = "running"
    reason: str = ""
    message: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    created: float = 0.0  # seconds since the epoch (the manager's clock)
    deadline: float | None = None  # when a running operation completes
    finished: float | None = None

    @property
    def done(self) -> bool:
        return self.state != RUNNING

    @property
    def duration(self) -> float | None:
        return None if self.finished is None else max(0.0, self.finished - self.created)


class OperationRequest(WireModel):
    """The body of ``POST /v1/operations``. The cluster is the caller's credential, never a
    field: a body naming another cluster is refused."""

    id: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    kind: OperationKind
    device: str = Field(min_length=1, max_length=MAX_DEVICE_ID)
    node: str | None = Field(default=None, min_length=1, max_length=MAX_NODE_NAME)
    labels: Labels = Field(default_factory=dict)


class FaultRequest(WireModel):
    """The body of ``POST /v1/faults``: fail the next ``count`` attaches of a device, or set
    the random failure rate of every attach."""

    device: str | None = Field(default=None, min_length=1, max_length=MAX_DEVICE_ID)
    count: int = Field(default=1, ge=0, le=1000)
    reason: str = Field(default=ATTACH_FAILED, max_length=64, pattern=r"^[A-Z][A-Za-z0-9]*$")
    message: str = Field(default="", max_length=MAX_MESSAGE)
    rate: float | None = Field(default=None, ge=0.0, le=1.0)


class FabricSnapshot(WireModel):
    """``GET /v1/snapshot``: the devices (as the caller may see them) and the caller's
    operations, taken at one instant. Decisions that compare an operation's result with a
    device's state must come from one snapshot: two separate reads can straddle a completion
    (the operation succeeded, the device list read before still says attaching).

    ``revision`` counts the manager's changes, ``epoch`` names its state (a new one when the
    state was lost), so a client can tell an older view from a newer one.
    """

    cluster: str
    epoch: str = ""
    revision: int = 0
    devices: list[FabricDevice] = Field(default_factory=list)
    operations: list[Operation] = Field(default_factory=list)


class FabricError(Exception):
    """The manager refused a request; ``reason`` is CamelCase, ``status`` the HTTP status."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class DeviceNotFoundError(FabricError):
    def __init__(self, device: str) -> None:
        super().__init__(404, "DeviceNotFound", f"device {device}: not in the fabric")


class OperationConflictError(FabricError):
    """An operation id was reused for a different request."""

    def __init__(self, op_id: str, detail: str) -> None:
        super().__init__(409, "OperationConflict", f"operation {op_id}: {detail}")


class ForbiddenError(FabricError):
    """The caller's cluster may not act on this device or operation (another cluster's)."""

    def __init__(self, message: str) -> None:
        super().__init__(403, "Forbidden", message)


class TooManyOperationsError(FabricError):
    """The caller has as many running operations as the manager allows one cluster."""

    def __init__(self, cluster: str, limit: int) -> None:
        super().__init__(
            429,
            "TooManyOperations",
            f"cluster {cluster}: {limit} operations are running, the most one cluster may have",
        )


class FabricUnavailableError(Exception):
    """The manager could not be reached or answered 5xx: transient, retry later."""


def model_slug(model: str) -> str:
    """A DNS-label form of a model name ("A100 80GB" -> "a100-80gb"), for ids and pool names."""
    slug = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")
    return slug[:40].strip("-") or "device"
