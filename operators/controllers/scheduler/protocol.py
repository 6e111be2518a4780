"""What the scheduler's parts (binder, preemptor, repair) use of the scheduler that owns them.

Each part states its needs as a ``Protocol`` over this one, so that it can be driven by a
test double and never imports the handlers (which import it).
"""

from __future__ import annotations

from typing import Any, Protocol

from operators.api.resource import ResourceClaim
from operators.controllers.scheduler.cache import SchedulerCache
from operators.kube.api import KubeAPI
from operators.runtime.actions import PostEvent, Write
from operators.runtime.clock import Clock


class SchedulerIO(Protocol):
    """Its cache, its clock, and its fenced writes and reads."""

    clock: Clock
    cache: SchedulerCache

    @property
    def api(self) -> KubeAPI: ...

    async def apply(self, action: Write) -> dict[str, Any] | None: ...

    async def post(self, event: PostEvent) -> bool: ...

    async def write_claim(self, action: Write) -> ResourceClaim: ...
