"""Run one controller's kopf registry: kopf's settings, login, and the command-line entry.

kopf's defaults suit objects an operator owns; ours watch Pods and ResourceClaims that several
controllers (and Kubernetes itself) act on. So: no kopf finalizers, no progress annotations
(only event and index handlers), a persistence prefix per operator in case a handler ever
stores anything, no kopf-posted Events, standalone (no peering objects).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import dataclasses
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Generic, Protocol, TypeVar, cast

import kopf
import structlog

from operators.api.features import FeatureGateError, KubernetesVersion, not_implemented
from operators.kube.api import ApiError, KubeAPI
from operators.kube.client import (
    ClientConfigError,
    connection_fields,
    make_api_client,
    make_configuration,
)
from operators.observability.logging import configure
from operators.runtime import memory
from operators.runtime.leader import default_identity
from operators.settings import LeaderElectionSettings, Settings

PERSISTENCE_DOMAIN = "kopf-dra.io"
#: How long a component waits at start for the API server to say its version.
VERSION_ATTEMPTS, VERSION_PAUSE = 15, 2.0

log = structlog.get_logger(__name__)


class NoDiffBase(kopf.DiffBaseStorage):
    """No "last handled" essence: only change handlers (on.create/update/...) would read it.

    kopf builds the essence, a deep copy of the body, on every watch event whatever handlers
    are registered; for Pods and claims that was the largest single cost of the reservation
    controller. Our operators register event, index and activity handlers only (a unit test
    keeps it so).
    """

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None
    ) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


def configure_kopf(
    settings: kopf.OperatorSettings, component: str, ours: Settings | None = None
) -> None:
    """The kopf settings every kopf-dra operator shares.

    Handlers must be ``async def``: kopf runs plain functions in a thread pool, where they
    would race the event loop on the work queue, the indices and the scheduler's ledger.
    """
    prefix = f"{component}.{PERSISTENCE_DOMAIN}"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=prefix)
    settings.persistence.diffbase_storage = NoDiffBase()
    settings.persistence.finalizer = f"{prefix}/kopf-finalizer"
    settings.posting.enabled = False
    settings.peering.standalone = True
    settings.scanning.disabled = True
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.request_timeout = ours.api_timeout if ours is not None else 60
    settings.networking.connect_timeout = ours.api_connect_timeout if ours is not None else 5


def register_login(registry: kopf.OperatorRegistry, kubeconfig: str | None) -> None:
    """Log kopf in with the same configuration our own client uses.

    kopf's built-in login does not know kubernetes-asyncio; without this it would guess.
    """

    @kopf.on.login(registry=registry)
    async def login(**_: Any) -> kopf.ConnectionInfo:
        configuration = await make_configuration(kubeconfig)
        return kopf.ConnectionInfo(**connection_fields(configuration))  # type: ignore[arg-type]


def operator_identity(settings: Settings | None) -> str:
    """kopf's name for this process: the replica's identity (``KOPF_DRA_IDENTITY``, the pod's
    name in the manifests) or the Lease's default form, never kopf's own default, which asks
    the passwd database (``getpass.getuser()``) and crashes for a uid without an entry, as
    65532 has none in most images."""
    if isinstance(settings, LeaderElectionSettings) and settings.identity:
        return settings.identity
    return default_identity()


async def run_operator(
    *,
    registry: kopf.OperatorRegistry,
    component: str,
    settings: Settings | None = None,
    stop_flag: asyncio.Event | threading.Event | None = None,
    ready_flag: asyncio.Event | threading.Event | None = None,
) -> None:
    """Run kopf on ``registry`` until stopped (in-process in tests, from ``main_for`` else)."""
    kopf_settings = kopf.OperatorSettings()
    configure_kopf(kopf_settings, component, settings)
    await kopf.operator(
        registry=registry,
        settings=kopf_settings,
        identity=cast("Any", operator_identity(settings)),
        clusterwide=True,
        stop_flag=stop_flag,
        ready_flag=ready_flag,
    )


async def read_version(kubeconfig: str | None) -> KubernetesVersion:
    """The cluster's version from its API server's /version, waiting a while for an API
    server that is not up yet."""
    for attempt in range(VERSION_ATTEMPTS):
        try:
            async with await make_api_client(kubeconfig) as api_client:
                return KubernetesVersion.from_version_info(await KubeAPI(api_client).version_info())
        except (ApiError, OSError, TimeoutError) as e:
            if attempt + 1 == VERSION_ATTEMPTS:
                raise ConnectionError(f"reading the API server's /version: {e}") from None
            log.info("waiting for the API server's /version", error=str(e))
            await asyncio.sleep(VERSION_PAUSE)
    raise AssertionError("unreachable")  # pragma: no cover


def at_cluster_version(settings: S) -> S:
    """``settings`` at the cluster's version (read from the API server unless the flags name
    one), with the gates checked as that version's kube-scheduler checks them; what is set and
    not implemented is said once. Blocking: before the component's event loop starts."""
    if settings.kubernetes_version is None:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:  # a loop may already run here
            version = pool.submit(asyncio.run, read_version(settings.kubeconfig)).result()
        settings = settings.with_version(version)
    settings.gates()  # FeatureGateError for what this version refuses
    log.info("following Kubernetes", version=str(settings.version()))
    ignored = not_implemented(settings.feature_gates)
    if ignored:
        log.info(
            "feature gates set that kopf-dra does not implement (accepted, as kube-scheduler "
            "accepts them; kopf-dra behaves as before)",
            gates=",".join(ignored),
        )
    return settings


async def watch_version(
    settings: Settings,
    stop: asyncio.Event,
    read: Callable[[str | None], Awaitable[KubernetesVersion]] = read_version,
) -> KubernetesVersion | None:
    """Until ``stop``: the API server's /version every ``--version-check-interval``; a version
    other than the one the component follows sets ``stop`` and is returned (a control plane
    upgraded under a running component). Errors are waited out: an API server being replaced
    answers again, with its new version."""
    following = settings.version()
    interval = settings.version_check_interval
    while interval > 0:
        try:
            await asyncio.wait_for(stop.wait(), interval)
            return None
        except TimeoutError:
            pass
        try:
            now = await read(settings.kubeconfig)
        except (ConnectionError, ValueError) as e:
            log.info("reading the API server's /version failed; trying again", error=str(e))
            continue
        if now != following:
            log.info(
                "the API server reports another Kubernetes version: restarting the component "
                "in place to follow its defaults",
                following=str(following),
                now=str(now),
            )
            stop.set()
            return now
    return None


async def run_following_version(
    component: str,
    registry: kopf.OperatorRegistry,
    settings: Settings,
    *,
    follow: bool = True,
    read: Callable[[str | None], Awaitable[KubernetesVersion]] = read_version,
) -> KubernetesVersion | None:
    """Run the operator until it stops; the new version if it stopped for one (only when it
    ``follow``s the API server's: not when --kubernetes-version named one)."""
    stop = asyncio.Event()
    watch = watch_version(settings, stop, read) if follow else _never(stop)
    watcher = asyncio.create_task(watch, name="version-watch")
    try:
        await run_operator(
            registry=registry, component=component, settings=settings, stop_flag=stop
        )
    finally:
        if not watcher.done():
            watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    return watcher.result() if not watcher.cancelled() else None


async def _never(stop: asyncio.Event) -> None:
    await stop.wait()


def main_for(
    component: str,
    build_registry: Callable[[Settings], kopf.OperatorRegistry],
    settings: Settings,
) -> int:
    """The blocking entry point behind ``kopf-dra run <component>``. The component follows the
    cluster's version: when the API server reports another one (a control plane upgrade), it
    stops (releasing its Lease) and starts again in this process with that version's
    defaults."""
    try:  # kopf would retry a login that no retry can fix
        asyncio.run(make_configuration(settings.kubeconfig))
    except ClientConfigError as e:
        print(f"kopf-dra run {component}: {e}", file=sys.stderr)
        return 2
    configure(component, level=settings.log_level, json_output=settings.log_json)
    memory.tune()
    given = settings
    try:
        settings = at_cluster_version(given)
        while True:
            follow = given.kubernetes_version is None
            registry = build_registry(settings)
            now = asyncio.run(run_following_version(component, registry, settings, follow=follow))
            if now is None:
                return 0
            settings = at_cluster_version(given.with_version(now))
    except FeatureGateError as e:
        print(f"kopf-dra run {component}: --feature-gates: {e}", file=sys.stderr)
        return 2
    except (ConnectionError, ValueError) as e:  # unreachable, or a version not supported
        print(f"kopf-dra run {component}: {e}", file=sys.stderr)
        return 1


class Registering(Protocol):
    def register(self, registry: kopf.OperatorRegistry) -> None: ...


S = TypeVar("S", bound=Settings)


@dataclasses.dataclass(frozen=True)
class OperatorApp(Generic[S]):
    """What every operator's app.py offers: ``kopf-dra run <component>`` and ``kopf run -m``."""

    component: str
    settings_class: type[S]
    controller: Callable[[S], Registering]

    def build(self, settings: Settings) -> tuple[kopf.OperatorRegistry, Registering]:
        """The operator's own registry (never kopf's global one: several operators may run in
        one process, as in the integration tests), and the fresh controller behind it."""
        assert isinstance(settings, self.settings_class)
        registry = kopf.OperatorRegistry()
        register_login(registry, settings.kubeconfig)
        controller = self.controller(settings)
        controller.register(registry)
        return registry, controller

    def build_registry(self, settings: Settings) -> kopf.OperatorRegistry:
        return self.build(settings)[0]

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        self.settings_class.add_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        return main_for(self.component, self.build_registry, self.settings_class.load(args))

    def install_as_kopf_default(self) -> None:
        """``kopf run -m`` runs kopf's default registry: point it at this operator's (called
        by each controller's ``main`` module, the one ``kopf run -m`` imports)."""
        memory.tune()
        settings = at_cluster_version(self.settings_class.load())
        kopf.set_default_registry(self.build_registry(settings))
