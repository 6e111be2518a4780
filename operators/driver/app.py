"""The example driver process: ``kopf-dra run driver --node-name N`` (one per node, a DaemonSet).

Not a kopf operator: it owns no custom objects and watches nothing cluster-wide. It publishes
its node's pool, serves the kubelet plugin sockets, and every ``--resync-seconds`` re-reads its
Node (hot-plugged devices) and repairs its slices. Everything it needs at start is local or one
GET away, so a restart resumes where it stopped. Before anything else it checks that its
identity cannot write other nodes' claims (``identity.py``), and refuses to start if it can.
With a gate of a 1.37 slice field in ``--feature-gates`` it also learns the cluster's release
(``--kubernetes-version``, else the API server's /version), so that a 1.36 cluster never gets
fields it does not know (``slice_fields``).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

import structlog

from operators.aio import wait_at_most
from operators.api.features import FeatureGateError, KubernetesVersion
from operators.driver import metrics
from operators.driver.cdi import CDIWriter
from operators.driver.checkpoint import Checkpoint
from operators.driver.identity import IdentityError, status_rights
from operators.driver.plugin import PluginServer
from operators.driver.profiles import ProfileError, load_config
from operators.driver.service import DriverService
from operators.driver.settings import DriverSettings
from operators.driver.slices import NO_SLICE_FIELDS, InvalidPoolError, SliceFields
from operators.driver.sources import DeviceSource, NvmlSource, ProfileSource
from operators.kube.api import ApiError, ApiTimeouts, KubeAPI
from operators.kube.client import ClientConfigError, make_api_client
from operators.observability import fields
from operators.observability.logging import configure
from operators.runtime.serving import Endpoints, Server
from operators.settings import SettingsError, env_name, flag_name

COMPONENT = "driver"
log = structlog.get_logger(__name__)
#: The gates of the 1.37 ResourceSlice fields the driver can publish (``slices.SliceFields``).
SLICE_FIELD_GATES = ("DRAPartitionableDevicesType", "DRAOptionalNodeOperations")


def wants_slice_fields(settings: DriverSettings) -> bool:
    """Whether ``--feature-gates`` may turn on a gate of a 1.37 slice field (by name or
    AllAlpha): only then does the driver need the cluster's release and its gates."""
    gates = settings.feature_gates
    return any(gates.get(name, False) for name in (*SLICE_FIELD_GATES, "AllAlpha"))


def slice_fields(settings: DriverSettings) -> SliceFields:
    """The 1.37 slice fields to publish at the release ``settings`` follow, with the gates the
    driver is given (the cluster's); SettingsError for gates that release refuses."""
    if not wants_slice_fields(settings):
        return NO_SLICE_FIELDS
    try:
        return SliceFields.at(settings.version().release, settings.gates())
    except FeatureGateError as e:
        where = f"{flag_name('feature_gates')} / {env_name('feature_gates')}"
        raise SettingsError(f"DriverSettings: {where}: {e}") from None


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
        self.version_known = False

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

    async def _follow_cluster(self) -> bool:
        """Settle which 1.37 slice fields to publish; False to retry (the API server away).
        The release comes from the flags, else (only when a gate of those fields is on) from
        the API server's /version, read once: the driver publishes nothing before this."""
        settings = self.settings
        if settings.kubernetes_version is None and wants_slice_fields(settings):
            try:
                info = await self.service.api.version_info()
            except (ApiError, OSError, TimeoutError) as e:
                log.error(
                    "could not read the API server's /version; retrying",
                    **{fields.NODE: settings.node_name, fields.REASON: type(e).__name__},
                    error=str(e),
                )
                return False
            try:
                version = KubernetesVersion.from_version_info(info)
            except ValueError as e:  # a release kopf-dra does not follow
                raise SettingsError(f"DriverSettings: the cluster's /version: {e}") from None
            settings = settings.with_version(version)
        self.service.slice_fields = slice_fields(settings)
        if wants_slice_fields(settings):
            log.info(
                "following Kubernetes",
                **{fields.NODE: settings.node_name},
                version=str(settings.version()),
                partition_type_attribute=self.service.slice_fields.partition_type,
                skip_node_operations=self.service.slice_fields.skip_node_operations,
            )
        self.version_known = True
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
        while not self.version_known and not stop.is_set():
            if not await self._follow_cluster():
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
