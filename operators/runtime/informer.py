"""List-and-watch for the kinds the claim controllers only keep in stores, past kopf's dispatch.

kopf hands every watch event to a per-object worker, detects causes, builds the handler's
keyword arguments and runs it; for pods and claims, whose events the claim controllers only put
in their stores, that dispatch was about a third of their CPU. An informer here does what
client-go's reflector does:

- LIST, then WATCH from the listing's resourceVersion, with bookmarks;
- each event goes to the feed as kopf's handler kwargs would (``{"type", "body"}``), the
  listing's objects as ADDED;
- a watch the server ends resumes from the last version seen;
- 410 Gone (or an ERROR event) means a new LIST, and what it no longer shows is fed as DELETED
  (a minimal body: namespace, name, uid and the listing's version);
- any other failure backs off (0.2 s doubling to 10 s) and never ends the loop; a feed that
  raises is logged and the watch goes on.

The first LIST happens in ``start``, so a controller's stores are filled before it leads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from operators.aio import cancel_and_wait
from operators.api.keys import ObjectKey
from operators.kube.api import ApiError, KubeAPI
from operators.runtime.stores import resource_version

log = structlog.get_logger(__name__)

EventFeed = Callable[[Mapping[str, Any]], None]
BACKOFF = (0.2, 10.0)


class GoneError(Exception):
    """The watch's resourceVersion is too old (410): only a new LIST can go on."""


class Informer:
    """One kind, cluster-wide: its LIST and WATCH, fed to ``feed``."""

    def __init__(self, kind: str, feed: EventFeed, *, timeout_seconds: int = 300) -> None:
        self.kind = kind
        self.feed = feed
        self.timeout_seconds = timeout_seconds
        # What the feed was given last, per object: (resourceVersion, uid).
        self._known: dict[ObjectKey, tuple[int, str]] = {}
        self._resume: str | None = None  # where a new watch starts; None: LIST first
        self.watches = 0  # watch requests made (each server-side end starts another)
        self._task: asyncio.Task[None] | None = None

    async def start(self, api: KubeAPI) -> None:
        """The first LIST (its errors are the caller's), then the watch in the background."""
        self._resume = await self._list(api)
        self._task = asyncio.create_task(self._run(api), name=f"informer-{self.kind}")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    def _deliver(self, event_type: str, body: Mapping[str, Any]) -> None:
        key = ObjectKey.of(body)
        if event_type == "DELETED":
            self._known.pop(key, None)
        else:
            uid = (body.get("metadata") or {}).get("uid") or ""
            self._known[key] = (resource_version(body), uid)
        try:
            self.feed({"type": event_type, "body": body})
        except Exception as e:  # a bug in one feed must not stop everyone's events
            log.error("event feed failed", kind=self.kind, object=str(key), error=repr(e))

    async def _list(self, api: KubeAPI) -> str:
        listing = await api.list(self.kind)
        api_version = listing.get("apiVersion", "v1")
        listed_at = resource_version(listing)
        seen: set[ObjectKey] = set()
        for item in listing.get("items") or []:
            item.setdefault("kind", self.kind)
            item.setdefault("apiVersion", api_version)
            seen.add(ObjectKey.of(item))
            self._deliver("ADDED", item)
        for key, (version, uid) in list(self._known.items()):
            if key not in seen and version < listed_at:
                gone = {"name": key.name, "uid": uid, "resourceVersion": str(listed_at)}
                if key.namespace:
                    gone["namespace"] = key.namespace
                body = {"apiVersion": api_version, "kind": self.kind, "metadata": gone}
                self._deliver("DELETED", body)
        return str((listing.get("metadata") or {}).get("resourceVersion") or "")

    async def _watch(self, api: KubeAPI, version: str) -> None:
        """Until the server ends the watch; ``_resume`` follows every event."""
        self.watches += 1
        try:
            async for event in api.watch(
                self.kind, resource_version=version, timeout_seconds=self.timeout_seconds
            ):
                event_type = event.get("type") or ""
                obj = event.get("object") or {}
                if event_type == "ERROR":
                    if obj.get("code") == 410:
                        raise GoneError(obj.get("message") or "")
                    raise ApiError(
                        int(obj.get("code") or 500),
                        str(obj.get("reason") or "Unknown"),
                        str(obj.get("message") or ""),
                        obj,
                    )
                resumed = (obj.get("metadata") or {}).get("resourceVersion")
                if event_type != "BOOKMARK":
                    self._deliver(event_type, obj)
                if resumed:
                    self._resume = str(resumed)
        except ApiError as e:
            if e.status == 410:
                raise GoneError(e.message) from None
            raise

    async def _run(self, api: KubeAPI) -> None:
        delay = 0.0
        while True:
            try:
                if self._resume is None:
                    self._resume = await self._list(api)
                await self._watch(api, self._resume)
                delay = 0.0
            except asyncio.CancelledError:
                raise
            except GoneError:
                log.info("watch expired; listing again", kind=self.kind)
                self._resume = None
            except Exception as e:  # the API server away, a timeout, a broken stream
                delay = min(BACKOFF[1], max(BACKOFF[0], delay * 2))
                log.warning("watch failed; retrying", kind=self.kind, error=str(e), delay=delay)
                await asyncio.sleep(delay)


class Feeds:
    """The informers of one process, each kind to its feed."""

    def __init__(self, feeds: Mapping[str, EventFeed]) -> None:
        self.informers = [Informer(kind, feed) for kind, feed in feeds.items()]

    async def start(self, api: KubeAPI) -> None:
        started: list[Informer] = []
        try:
            for informer in self.informers:
                await informer.start(api)
                started.append(informer)
        except BaseException:
            for informer in started:
                await informer.stop()
            raise

    async def stop(self) -> None:
        for informer in self.informers:
            await informer.stop()
