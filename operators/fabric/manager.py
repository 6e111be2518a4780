"""What the fabric controller needs from a fabric manager (real or simulated).

Operations are asynchronous and idempotent by id: ``attach``/``detach`` return the operation
(new, or the existing one with that id), and the caller polls ``operation`` until it is done.
Every call is scoped to one cluster identity: the manager is shared by several clusters, and
a device held by another one is simply not ours.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from operators.fabric.model import FabricDevice, Operation


class FabricManager(Protocol):
    @property
    def cluster(self) -> str:
        """This client's cluster identity."""
        ...

    async def devices(self) -> list[FabricDevice]:
        """The whole inventory, with the state and holder of every device."""
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
