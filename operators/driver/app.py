"""The example driver process: ``kopf-dra run driver --node-name N`` (one per node, a DaemonSet).

Not a kopf operator: it owns no custom objects and watches nothing cluster-wide. It publishes
its node's pool, serves the kubelet plugin sockets, and every ``--resync-seconds`` re-reads its
Node (hot-plugged devices) and repairs its slices. Everything it needs at start is local or one
GET away, so a restart resumes where it stopped. Before anything else it checks that its
identity cannot write other nodes' claims (``identity.py``), and refuses to start if it can.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

import structlog

from operators.aio import wait_at_most
from operators.driver import metrics
from operators.driver.cdi import CDIWriter
from operators.driver.checkpoint import Checkpoint
from operators.driver.identity import IdentityError, status_rights
from operators.driver.plugin import PluginServer
from operators.driver.profiles import ProfileError, load_config
from operators.driver.service import DriverService
from operators.driver.settings import DriverSettings
from operators.driver.slices import InvalidPoolError
from operators.driver.sources import DeviceSource, NvmlSource, ProfileSource
from operators.kube.api import ApiError, ApiTimeouts, KubeAPI
from operators.kube.client import ClientConfigError, make_api_client
from operators.observability import fields
from operators.observability.logging import configure
from operators.runtime.serving import Endpoints, Server
from operators.settings import SettingsError

COMPONENT = "driver"
log = structlog.get_logger(__name__)


def make_source(settings: DriverSettings) -> DeviceSource:
    """The profile source, or NVML (imported only when chosen: it needs kopf-dra[nvidia])."""
    if settings.devices == "nvml":
        from operators.driver.nvml import PynvmlBackend

        backend = PynvmlBackend(settings.driver_root)
        return NvmlSource(backend, dynamic_mig=settings.dynamic_mig)
    if settings.dynamic_mig:
        raise SettingsError("DriverSettings: --dynamic-mig needs --devices nvml")
    return ProfileSource(load_config(settings.profiles))


class Driver:
    """Wires settings, API access, the service and the plugin sockets; ``run`` until stopped."""

    def __init__(
        self, settings: DriverSettings, api: KubeAPI, source: DeviceSource | None = None
    ) -> None:
        if not settings.node_name:
            raise SettingsError("DriverSettings: --node-name / KOPF_DRA_NODE_NAME is required")
        self.settings = settings
        state_dir = Path(
            settings.state_dir or Path(settings.kubelet_dir) / "plugins" / settings.driver_name
        )
        self.service = DriverService(
            api,
            driver=settings.driver_name,
            node_name=settings.node_name,
            source=source or make_source(settings),
            cdi=CDIWriter(settings.cdi_dir, settings.driver_name),
            checkpoint=Checkpoint(state_dir / "checkpoint.json"),
            pool=settings.pool_name,
            unhealthy=settings.unhealthy_devices,
        )
        self.plugin = PluginServer(
            settings.driver_name, settings.kubelet_dir, self.service, health=self.service
        )
        self.started = asyncio.Event()
        self.server = Server(
            settings, Endpoints([metrics.REGISTRY], readiness={"plugin": self.not_serving})
        )
        self.refresh_failures = 0
        self.identity_checked = False

    async def _check_identity(self) -> bool:
        """True once checked; raises IdentityError when the identity may write any node's
        claims and that was not allowed."""
        try:
            rights = await status_rights(self.service.api, self.settings.driver_name)
        except (ApiError, OSError, TimeoutError) as e:
            log.error(
                "could not check what this identity may write; retrying",
                **{fields.NODE: self.settings.node_name, fields.REASON: type(e).__name__},
                error=str(e),
            )
            return False
        context = {fields.NODE: self.settings.node_name}
        if (problem := rights.problem()) is not None:
            if not self.settings.allow_arbitrary_node_status:
                log.error("refusing to start: " + problem, **context)
                raise IdentityError(problem)
            log.warning("started anyway (--allow-arbitrary-node-status): " + problem, **context)
        if (warning := rights.warning()) is not None:
            log.warning(warning, **context)
        self.identity_checked = True
        return True

    async def _refresh(self) -> bool:
        try:
            await self.service.refresh()
        except (ApiError, InvalidPoolError, OSError, TimeoutError) as e:
            # The API server away (a restart, a rollout) is a retry at the next resync, never
            # an exit: the kubelet side keeps serving prepared devices meanwhile.
            self.refresh_failures += 1
            log.error(
                "could not publish the pool",
                **{fields.NODE: self.settings.node_name, fields.REASON: type(e).__name__},
                error=str(e),
            )
            return False
        return True

    def not_serving(self) -> str | None:
        """Readiness: the kubelet may call the plugin (identity checked, Node read)."""
        return None if self.started.is_set() else "the kubelet plugin is not serving yet"

    async def run(self, stop: asyncio.Event) -> None:
        """Serve probes and metrics; publish, serve the kubelet, resync until ``stop`` is set;
        then close the sockets."""
        await self.server.start()
        try:
            await self._run(stop)
        finally:
            await self.server.stop()

    async def _run(self, stop: asyncio.Event) -> None:
        while not self.identity_checked and not stop.is_set():
            if not await self._check_identity():
                await wait_at_most(stop.wait(), self.settings.resync_seconds)
        # The plugin must not answer before it knows its Node: wait for the first read.
        while self.service.node is None and not stop.is_set():
            if not await self._refresh() and self.service.node is None:
                await wait_at_most(stop.wait(), self.settings.resync_seconds)
        if stop.is_set():
            return
        await self.plugin.start()
        self.started.set()
        watcher = asyncio.create_task(
            self.service.source.watch(self.service.report_unhealthy, stop)
        )
        try:
            while not stop.is_set():
                await wait_at_most(stop.wait(), self.settings.resync_seconds)
                if not stop.is_set():
                    await self._refresh()
        finally:
            await self.plugin.stop()
            await watcher


async def _main(settings: DriverSettings) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with await make_api_client(settings.kubeconfig) as api_client:
        timeouts = ApiTimeouts(settings.api_connect_timeout, settings.api_timeout)
        await Driver(settings, KubeAPI(api_client, timeouts)).run(stop)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    DriverSettings.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    try:
        settings = DriverSettings.load(args)
        if not settings.node_name:
            raise SettingsError("DriverSettings: --node-name / KOPF_DRA_NODE_NAME is required")
        if settings.devices == "profiles":
            load_config(settings.profiles)  # fail fast, before connecting anywhere
        if settings.dynamic_mig and settings.devices != "nvml":
            raise SettingsError("DriverSettings: --dynamic-mig needs --devices nvml")
    except (SettingsError, ProfileError) as e:
        print(f"kopf-dra run driver: {e}", file=sys.stderr)
        return 2
    configure(COMPONENT, level=settings.log_level, json_output=settings.log_json)
    try:
        asyncio.run(_main(settings))
    except (IdentityError, SettingsError, ClientConfigError) as e:
        print(f"kopf-dra run driver: {e}", file=sys.stderr)
        return 2
    return 0
