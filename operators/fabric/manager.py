"""What the fabric controller needs from a fabric manager (real or simulated).

Operations are asynchronous and idempotent by id: ``attach``/``detach`` return the operation
(new, or the existing one with that id), and the caller polls ``operation`` until it is done.
Every call is scoped to one cluster identity, the one the client's credential names: the
manager is shared by several clusters, and a device held by another one is simply not ours
(nor can we see whose it is).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from operators.fabric.model import FabricDevice, FabricSnapshot, Operation


class FabricManager(Protocol):
    async def snapshot(self) -> FabricSnapshot:
        """Our cluster id, the inventory and our operations, all at one revision: what a
        decision comparing an operation with its device must be made from."""
        ...

    async def devices(self) -> list[FabricDevice]:
        """The whole inventory: every device's state; holder and node only of ours."""
        ...

    async def operations(self) -> list[Operation]:
        """Operations of this cluster the manager still remembers (running ones always)."""
        ...

    async def operation(self, op_id: str, *, wait: float = 0.0) -> Operation | None:
        """One operation, None when the manager does not know the id; with ``wait``, once it
        is done or after ``wait`` seconds (a long poll: attach-to-bind latency without busy
        polling)."""
        ...

    async def attach(
        self, op_id: str, device: str, node: str, labels: Mapping[str, str] | None = None
    ) -> Operation:
        """Start attaching ``device`` to ``node`` (or return the operation of that id)."""
        ...

    async def detach(
        self, op_id: str, device: str, labels: Mapping[str, str] | None = None
    ) -> Operation:
        """Start detaching ``device`` from wherever this cluster attached it."""
        ...
