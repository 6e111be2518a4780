"""Applies typed writes (``actions``) behind the leader fence, with bounded time.

Right before every write, ``fence()`` must say this replica may write; it also says how long
the lease surely stays ours, which caps the request's timeout. A write whose request was sent
but not answered (a timeout, a dropped connection) raises ``UnknownOutcomeError``: it may have
happened, so the caller re-reads before deciding anything. A write that was never sent
(connection refused) raises the OSError itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from operators.kube.api import KubeAPI, NotSentError
from operators.runtime.actions import (
    Bind,
    Create,
    Delete,
    Patch,
    PostEvent,
    Replace,
    ReplaceStatus,
    Write,
)
from operators.runtime.errors import UnknownOutcomeError
from operators.runtime.events import EventRecorder

Fence = Callable[[], float | None]


class Applier:
    def __init__(self, api: KubeAPI, events: EventRecorder, fence: Fence) -> None:
        self.api = api
        self.events = events
        self.fence = fence

    async def apply(self, action: Write) -> dict[str, Any] | None:
        """Perform ``action``; the API server's answer (None for a delete of nothing)."""
        timeout = self.fence()
        try:
            return await self._send(action, timeout)
        except NotSentError:
            raise
        except (TimeoutError, OSError) as e:
            raise UnknownOutcomeError(f"{action.describe()}: {e}") from e

    async def _send(self, action: Write, limit: float | None) -> dict[str, Any] | None:
        api = self.api
        if isinstance(action, ReplaceStatus):
            return await api.replace_status(action.body, request_timeout=limit)
        if isinstance(action, Patch):
            return await api.patch(
                action.kind,
                action.key.name,
                action.body(),
                action.key.namespace or None,
                patch_type=action.patch_type,
                subresource=action.subresource,
                field_manager=action.field_manager,
                request_timeout=limit,
            )
        if isinstance(action, Bind):
            return await api.post_subresource(
                "Pod",
                action.pod.name,
                action.pod.namespace,
                "binding",
                action.body(),
                request_timeout=limit,
            )
        if isinstance(action, Replace):
            return await api.replace(action.body, request_timeout=limit)
        if isinstance(action, Create):
            return await api.create(action.body, request_timeout=limit)
        if isinstance(action, Delete):
            return await api.delete(
                action.kind,
                action.key.name,
                action.key.namespace or None,
                uid=action.uid,
                resource_version=action.resource_version,
                request_timeout=limit,
            )
        raise TypeError(f"not a write: {action!r}")

    async def post(self, event: PostEvent) -> bool:
        """Post an Event; never raises (see ``EventRecorder``)."""
        return await self.events.post(event.obj, event.type, event.reason, event.message)
