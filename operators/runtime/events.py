"""Kubernetes Events for what users must see, posted once per distinct message.

The recorder remembers what it posted per object (uid, reason, message) so that a controller
reconciling the same problem every few seconds does not flood the object's event list; the same
problem is posted again only after ``repeat_after`` seconds.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import structlog

from operators.api.timestamps import format_time
from operators.kube.api import ApiError, KubeAPI
from operators.runtime.clock import Clock

log = structlog.get_logger(__name__)

NORMAL = "Normal"
WARNING = "Warning"


def object_reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    ref = {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
    }
    return {k: v for k, v in ref.items() if v}


def reporting_component(component: str) -> str:
    """The ``source.component`` of every Event a component posts (``kubectl describe``)."""
    return f"kopf-dra-{component}"


class EventRecorder:
    """Posts core/v1 Events as ``kopf-dra-<component>``; failures are logged, never raised."""

    def __init__(
        self, api: KubeAPI, component: str, *, clock: Clock, repeat_after: float = 600.0
    ) -> None:
        self.api = api
        self.component = reporting_component(component)
        self.clock = clock
        self.repeat_after = repeat_after
        self._posted: dict[tuple[str, str, str], float] = {}

    async def post(
        self, obj: Mapping[str, Any], event_type: str, reason: str, message: str
    ) -> bool:
        """Post unless the same (object, reason, message) was posted recently; True if posted."""
        ref = object_reference(obj)
        key = (str(ref.get("uid") or ref.get("name")), reason, message)
        now = self.clock.monotonic()
        last = self._posted.get(key)
        if last is not None and now - last < self.repeat_after:
            return False
        stamp = format_time(self.clock.now())
        namespace = ref.get("namespace") or "default"
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{ref.get('name', 'object')}.{uuid.uuid4().hex[:16]}",
                "namespace": namespace,
            },
            "involvedObject": ref,
            "reason": reason,
            "message": message[:1024],
            "type": event_type,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.component,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            await self.api.create(event)
        except (ApiError, OSError, TimeoutError) as e:
            log.warning("event not posted", reason=reason, error=str(e))
            return False
        self._posted[key] = now
        if len(self._posted) > 10_000:
            self._posted.clear()
        return True
