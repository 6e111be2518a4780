"""The controller base: dependencies, leadership with fenced writes, start and stop.

Every kopf-dra controller has the same lifecycle, run by kopf's startup and cleanup
activities:

1. ``start``: the API client (bounded timeouts), the Event recorder and the writer; then
   ``prepare`` (fill the stores, check that CRDs are served) on every replica, so a standby
   is warm when it takes over;
2. the replica campaigns for its Lease (``--no-leader-elect`` still takes it: see
   ``leader``); ``activate`` runs once it leads (start the queues, enqueue everything), and
   ``deactivate`` when it stops leading (stop the queues, drop in-flight state);
3. ``stop`` (idempotent, never raises: kopf would retry a failing cleanup a minute later)
   gives the lease up, then ``release`` and the API client go.

Writes go through ``apply``: the fence is checked right before each one.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import kopf
import structlog
from prometheus_client import CollectorRegistry

from operators.kube.api import KubeAPI
from operators.kube.client import make_api
from operators.runtime import memory
from operators.runtime.actions import PostEvent, Write
from operators.runtime.apply import Applier
from operators.runtime.clock import SYSTEM_CLOCK, Clock
from operators.runtime.errors import NotLeaderError, Requeue
from operators.runtime.events import EventRecorder
from operators.runtime.indices import IndexView
from operators.runtime.leader import LeaderElector, LeaseConfig, default_identity
from operators.runtime.metrics import REGISTRY as RUNTIME_METRICS
from operators.runtime.queue import WorkQueue
from operators.runtime.serving import Endpoints, Server
from operators.settings import LeaderElectionSettings, Settings, SettingsError

log = structlog.get_logger(__name__)

S = TypeVar("S", bound=Settings)


@dataclasses.dataclass(frozen=True)
class Deps:
    """What a started controller writes and reports with."""

    api: KubeAPI
    events: EventRecorder
    applier: Applier


def lease_config(settings: LeaderElectionSettings) -> LeaseConfig:
    return LeaseConfig(
        name=settings.lease_name,
        namespace=settings.lease_namespace,
        identity=settings.identity or default_identity(),
        lease_duration=settings.lease_duration,
        renew_deadline=settings.renew_deadline,
        retry_period=settings.retry_period,
        single_replica=not settings.leader_elect,
    )


class Lifecycle(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...


def register_lifecycle(registry: kopf.OperatorRegistry, target: Lifecycle) -> None:
    """``target.start`` as kopf's startup activity, ``target.stop`` as its cleanup."""

    @kopf.on.startup(registry=registry)
    async def start(**_: Any) -> None:
        await target.start()

    @kopf.on.cleanup(registry=registry)
    async def stop(**_: Any) -> None:
        await target.stop()

    del start, stop


class Controller(Generic[S]):
    """State and lifecycle of one controller replica; subclasses add handlers and work."""

    component: ClassVar[str]
    #: kopf indices a reconcile reads: it waits (a requeue) until kopf has handed them over.
    kopf_indices: ClassVar[tuple[str, ...]] = ()
    #: The component's own metrics, served beside the runtime's (work queues, leadership).
    metrics_registry: ClassVar[CollectorRegistry | None] = None

    def __init__(self, settings: S, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.settings = settings
        self.clock = clock
        self.indices = IndexView()
        self.elector: LeaderElector | None = None
        self.active = False
        self._deps: Deps | None = None
        self._started = False
        self._stopped = False
        self._lifecycle = asyncio.Lock()
        self.server = Server(settings, self.endpoints())

    # --- what subclasses provide ----------------------------------------------------------

    def register_handlers(self, registry: kopf.OperatorRegistry) -> None:
        """kopf indices and event handlers (read, enqueue; no writes)."""

    async def prepare(self) -> None:
        """Before campaigning: fill stores, check CRDs (may raise kopf.TemporaryError)."""

    async def activate(self) -> None:
        """This replica leads now: start the queues, enqueue what changed while it did not."""

    async def deactivate(self) -> None:
        """This replica no longer leads (or stops): stop the queues, forget in-flight work."""

    async def release(self) -> None:
        """Stopping: release what ``prepare`` took (store resyncs, connections)."""

    def require_indices(self) -> None:
        """Requeue until kopf's indices are listed and attached (the first handler call).

        kopf runs no handler before every index has its initial list, but a queue started at
        activation may run before any handler did.
        """
        missing = [name for name in self.kopf_indices if not self.indices.has(name)]
        if missing:
            raise Requeue(0.5, f"kopf's indices {', '.join(missing)} are not listed yet")

    # --- health ---------------------------------------------------------------------------

    def endpoints(self) -> Endpoints:
        registries = [r for r in (self.metrics_registry, RUNTIME_METRICS) if r is not None]
        return Endpoints(
            registries,
            liveness={"reconcile": self._stuck_reconcile, "leaderElection": self._election},
            readiness={"started": self._not_started},
        )

    def queues(self) -> list[WorkQueue[Any]]:
        return [value for value in vars(self).values() if isinstance(value, WorkQueue)]

    def _stuck_reconcile(self) -> str | None:
        """A reconcile that has run for too long: a wedged worker, which a restart clears."""
        limit = self.settings.stuck_reconcile_after
        for queue in self.queues():
            longest = queue.longest_running()
            if longest is not None and longest[1] > limit:
                return f"{queue.name}: {longest[0]} has been reconciled for {longest[1]:.0f}s"
        return None

    def _election(self) -> str | None:
        return self.elector.problem() if self.elector is not None else None

    def _not_started(self) -> str | None:
        return None if self._started else "stores not filled yet (or a CRD not served)"

    # --- dependencies ---------------------------------------------------------------------

    @property
    def deps(self) -> Deps:
        assert self._deps is not None, f"the {self.component} controller has not started"
        return self._deps

    @property
    def api(self) -> KubeAPI:
        return self.deps.api

    @property
    def events(self) -> EventRecorder:
        return self.deps.events

    def fence(self) -> float | None:
        """Raise NotLeaderError unless this replica may write now (see ``leader``)."""
        if self.elector is not None:
            return self.elector.fence()
        if not self.active:
            raise NotLeaderError(f"the {self.component} controller is not active")
        return None

    async def apply(self, action: Write) -> dict[str, Any] | None:
        return await self.deps.applier.apply(action)

    async def post(self, event: PostEvent) -> bool:
        return await self.deps.applier.post(event)

    # --- lifecycle ------------------------------------------------------------------------

    def register(self, registry: kopf.OperatorRegistry) -> None:
        self.register_handlers(registry)
        register_lifecycle(registry, self)

    async def start(self) -> None:
        async with self._lifecycle:
            if self._started or self._stopped:
                return
            try:
                await self.server.start()  # first: probes answer while prepare waits
            except SettingsError as e:
                raise kopf.PermanentError(str(e)) from None
            api = await make_api(self.settings)
            events = EventRecorder(api, self.component, clock=self.clock)
            self._deps = Deps(api, events, Applier(api, events, self.fence))
            try:
                await self.prepare()
            except BaseException:
                # kopf retries a startup handler that raised: start from scratch then.
                await self._close()
                raise
            self._started = True
            memory.listed()
            if isinstance(self.settings, LeaderElectionSettings):
                self.elector = LeaderElector(
                    api,
                    lease_config(self.settings),
                    clock=self.clock,
                    on_started=self._lead,
                    on_stopped=self._follow,
                )
                self.elector.start()
            else:
                await self._lead()

    async def _lead(self) -> None:
        self.active = True
        await self.activate()

    async def _follow(self) -> None:
        self.active = False
        await self.deactivate()

    async def stop(self) -> None:
        """Idempotent and never raises (even when startup never finished)."""
        async with self._lifecycle:
            if self._stopped:
                return
            self._stopped = True
            try:
                if self.elector is not None:
                    await self.elector.stop()
                elif self.active:
                    await self._follow()
                if self._started:
                    await self.release()
            except Exception as e:
                log.error(f"{self.component} stop failed", error=repr(e))
            await self._close()
            await self.server.stop()

    async def _close(self) -> None:
        if self._deps is not None:
            try:
                await self._deps.api.api_client.close()
            except Exception as e:
                log.warning("closing the API client failed", error=repr(e))
            self._deps = None
