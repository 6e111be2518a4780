"""Watch-fed stores, without kopf's indices.

kopf gates every event of an indexed kind on a global readiness toggle set, and while objects
keep arriving (a burst of pod creations, many nodes joining) each new object adds a toggle and
wakes every waiting worker: quadratic work, a large share of the scheduler's CPU
(bench/README.md). So the kinds a reconcile reads are kept here instead: filled by one LIST at
startup (no reconcile runs before that), then kept current by watch events
(``runtime.informer``), never letting an older resourceVersion overwrite a newer one. Derived
indices have kopf's shape (key -> values) and are read through the same ``IndexView`` as kopf's
own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

import structlog

from operators.aio import cancel_and_wait
from operators.api.base import KubeModel
from operators.api.keys import ObjectKey
from operators.kube.api import ApiError, KubeAPI
from operators.runtime.indices import IndexView

log = structlog.get_logger(__name__)

Body = Mapping[str, Any]
IndexFn = Callable[[Body], Mapping[Hashable, Any]]
M = TypeVar("M", bound=KubeModel)


def by_key(body: Body) -> dict[Hashable, Any]:
    """The index of the objects themselves by (namespace, name)."""
    return {ObjectKey.of(body): dict(body)}


def resource_version(body: Body) -> int:
    """The object's (or a listing's) resourceVersion as a number; 0 when absent."""
    try:
        return int((body.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


class LocalIndex(Mapping[Hashable, list[Any]]):
    """key -> values contributed by objects, read like a kopf index (``get``, iteration)."""

    def __init__(self) -> None:
        self._values: dict[Hashable, dict[ObjectKey, Any]] = {}
        self._keys_of: dict[ObjectKey, tuple[Hashable, ...]] = {}

    def __getitem__(self, key: Hashable) -> list[Any]:
        values = self._values.get(key)
        if not values:
            raise KeyError(key)
        return list(values.values())

    def last(self, key: Hashable) -> Any:
        """The value the last contributing object gave ``key``, or None."""
        values = self._values.get(key)
        return next(reversed(values.values())) if values else None

    def __iter__(self) -> Iterator[Hashable]:
        return iter(list(self._values))

    def __contains__(self, key: object) -> bool:
        return bool(self._values.get(key))

    def __len__(self) -> int:
        return len(self._values)

    def set(self, obj: ObjectKey, contributions: Mapping[Hashable, Any]) -> None:
        """Replace what ``obj`` contributes (an empty mapping removes it)."""
        for key in self._keys_of.pop(obj, ()):
            values = self._values.get(key)
            if values is not None:
                values.pop(obj, None)
                if not values:
                    del self._values[key]
        if contributions:
            self._keys_of[obj] = tuple(contributions)
            for key, value in contributions.items():
                self._values.setdefault(key, {})[obj] = value


class LocalStore:
    """The latest body per object of one kind, and indices derived from the bodies."""

    def __init__(
        self,
        kind: str,
        indices: Mapping[str, IndexFn],
        *,
        when: Callable[[Body], bool] | None = None,
        on_change: Callable[[ObjectKey, Body | None], None] | None = None,
    ) -> None:
        """``on_change(key, body)`` runs after every change the store took (body None: gone)."""
        self.kind = kind
        self.index_fns = dict(indices)
        self.indices = {name: LocalIndex() for name in indices}
        self.when = when
        self.on_change = on_change
        self._versions: dict[ObjectKey, int] = {}

    def apply(self, event_type: str | None, body: Body) -> bool:
        """Take a watch event; False when it is older than what the store has."""
        key = ObjectKey.of(body)
        version = resource_version(body)
        if version and version < self._versions.get(key, 0):
            return False
        if event_type == "DELETED" or (self.when is not None and not self.when(body)):
            self._remove(key)
            return True
        self._versions[key] = version
        for name, fn in self.index_fns.items():
            self.indices[name].set(key, fn(body))
        if self.on_change is not None:
            self.on_change(key, body)
        return True

    def _remove(self, key: ObjectKey) -> None:
        self._versions.pop(key, None)
        for index in self.indices.values():
            index.set(key, {})
        if self.on_change is not None:
            self.on_change(key, None)

    async def prefill(self, api: KubeAPI) -> int:
        """A LIST, before any reconcile and again now and then; returns the number of objects.

        An object deleted between this LIST and kopf's own initial listing would never get a
        DELETED event; a later LIST removes whatever it no longer shows (if the store's version
        is older than the listing), so such a ghost lives until the next resync at most.
        """
        listing = await api.list(self.kind)
        items = listing.get("items") or []
        api_version = listing.get("apiVersion", "v1")
        seen = set()
        for item in items:
            item.setdefault("kind", self.kind)
            item.setdefault("apiVersion", api_version)
            self.apply("ADDED", item)
            seen.add(ObjectKey.of(item))
        listed_at = resource_version(listing)
        for key, version in list(self._versions.items()):
            if key not in seen and version < listed_at:
                self._remove(key)
        return len(items)


class Stores:
    """The local stores of one operator: filled before its queue starts, resynced now and then."""

    def __init__(
        self,
        view: IndexView,
        *stores: LocalStore,
        resync_every: float = 300.0,
        on_resync: Callable[[], None] | None = None,
    ) -> None:
        """``on_resync`` runs after every periodic re-list: a controller re-queues its keys
        there, so that an event it missed (a DELETED lost in a watch restart) is acted on
        within one resync period."""
        self.view = view
        self.stores = stores
        self.resync_every = resync_every
        self.on_resync = on_resync
        self._task: asyncio.Task[None] | None = None
        for store in stores:  # readable (empty) at once; filled by ``start``
            for name, index in store.indices.items():
                view.add(name, index)

    async def start(self, api: KubeAPI, *, prefill: bool = True) -> None:
        """``prefill=False``: informers list the kinds themselves (``runtime.informer``);
        only the periodic resync starts here."""
        if prefill:
            for store in self.stores:
                await store.prefill(api)
        self._task = asyncio.create_task(self._resync(api), name="store-resync")

    async def _resync(self, api: KubeAPI) -> None:
        while True:
            await asyncio.sleep(self.resync_every)
            for store in self.stores:
                try:
                    await store.prefill(api)
                except (ApiError, OSError, TimeoutError) as e:
                    log.warning("store resync failed", kind=store.kind, error=str(e))
            if self.on_resync is not None:
                self.on_resync()

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None


class ModelCache(Generic[M]):
    """key -> parsed model, re-parsed only when the object's resourceVersion changes."""

    def __init__(self, model: type[M]) -> None:
        self.model = model
        self._items: dict[Hashable, tuple[str | None, M]] = {}
        self.version = 0  # bumped on every change of the kind
        self._list_version = -1
        self._list: list[M] = []

    def parse(self, key: Hashable, body: Mapping[str, Any]) -> M:
        rv = (body.get("metadata") or {}).get("resourceVersion")
        hit = self._items.get(key)
        if hit is not None and hit[0] == rv and rv is not None:
            return hit[1]
        model = self.model.load(body)
        self._items[key] = (rv, model)
        return model

    def seed(self, key: Hashable, version: str | None, model: M) -> None:
        """``model`` is the object at ``version`` (a write's answer): its watch event, of the
        same version, is not parsed again."""
        if version is not None:
            self._items[key] = (version, model)

    def forget(self, key: Hashable) -> None:
        self._items.pop(key, None)

    def changed(self) -> None:
        self.version += 1

    def all(self, bodies: Iterable[tuple[Hashable, Mapping[str, Any]]]) -> list[M]:
        """Every object of the kind, the same list object while nothing changed."""
        if self._list_version != self.version:
            keys = set()
            items = []
            for key, body in sorted(bodies, key=lambda kv: str(kv[0])):
                keys.add(key)
                items.append(self.parse(key, body))
            for stale in set(self._items) - keys:
                self._items.pop(stale, None)
            self._list, self._list_version = items, self.version
        return self._list
