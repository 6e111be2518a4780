"""The kubelet plugin gRPC servers: registration, the DRA service (v1 and v1beta1) and the DRA
health service (v1 and v1alpha1 DRAResourceHealth, whose stream the kubelet opens on the DRA
socket).

The kubelet's plugin watcher finds ``<kubelet dir>/plugins_registry/<driver>-reg.sock``, asks
``pluginregistration.Registration/GetInfo`` who we are, and reports the outcome through
``NotifyRegistrationStatus``. It then dials the endpoint we named (``<kubelet dir>/plugins/
<driver>/dra.sock``) with the first entry of ``supported_versions`` it knows: v1 first, v1beta1
for older kubelets. Both DRA services share one implementation; their messages are identical and
only the proto package (hence the gRPC service name) differs. So do both health services, which
the kubelets find differently: 1.37 opens the first of v1, v1alpha1 that ``supported_versions``
names, and none if it names neither (``pickHealthService`` in the kubelet's
pkg/kubelet/cm/dra/plugin); 1.36 knows only v1alpha1 and opens it without asking.

Services are wired with generic handlers over the generated message classes, which keeps the
code typed without generated ``*_pb2_grpc`` modules.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import grpc
import grpc.aio
import structlog

from operators.driver.checkpoint import PreparedDevice
from operators.driver.health import HEALTH_TIMEOUT_SECONDS, DeviceHealth
from operators.driver.proto import (
    dra_health_v1_pb2,
    dra_health_v1alpha1_pb2,
    dra_v1_pb2,
    dra_v1beta1_pb2,
    pluginregistration_pb2,
)

PLUGIN_TYPE = "DRAPlugin"
REGISTRATION_SERVICE = "pluginregistration.Registration"
V1 = "v1.DRAPlugin"
V1BETA1 = "v1beta1.DRAPlugin"
#: gRPC service name per supported version (the value announced in supported_versions).
DRA_SERVICES: dict[str, str] = {
    V1: "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin",
    V1BETA1: "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin",
}
DRA_MESSAGES: dict[str, ModuleType] = {V1: dra_v1_pb2, V1BETA1: dra_v1beta1_pb2}
DEFAULT_VERSIONS = (V1, V1BETA1)
HEALTH_V1 = "v1.DRAResourceHealth"
HEALTH_V1ALPHA1 = "v1alpha1.DRAResourceHealth"
#: The DRA health service (KEP-4680) on the DRAPlugin socket, per version; the name announced in
#: supported_versions is also the gRPC service name (the proto packages are plain v1, v1alpha1).
HEALTH_MESSAGES: dict[str, ModuleType] = {
    HEALTH_V1: dra_health_v1_pb2,
    HEALTH_V1ALPHA1: dra_health_v1alpha1_pb2,
}
#: Announced after the DRA versions when health is served, newest first as the kubelet prefers.
HEALTH_VERSIONS = (HEALTH_V1, HEALTH_V1ALPHA1)

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """How the kubelet names a claim."""

    namespace: str
    uid: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PrepareResult:
    devices: Sequence[PreparedDevice] = ()
    error: str = ""


class NodeService(Protocol):
    """What the gRPC layer needs from the driver (DriverService implements it)."""

    async def prepare(self, claims: Sequence[ClaimRef]) -> dict[str, PrepareResult]: ...

    async def unprepare(self, claims: Sequence[ClaimRef]) -> dict[str, str]: ...


class HealthSource(Protocol):
    """What the health stream needs (DriverService implements it)."""

    def health_reports(self, repeat_seconds: float) -> AsyncIterator[list[DeviceHealth]]: ...


def registration_socket(kubelet_dir: str | Path, driver: str) -> Path:
    return Path(kubelet_dir) / "plugins_registry" / f"{driver}-reg.sock"


def dra_socket(kubelet_dir: str | Path, driver: str) -> Path:
    return Path(kubelet_dir) / "plugins" / driver / "dra.sock"


def _claims(request: Any) -> list[ClaimRef]:
    return [ClaimRef(c.namespace, c.uid, c.name) for c in request.claims]


def dra_handler(version: str, service: NodeService) -> grpc.GenericRpcHandler:
    """The DRAPlugin service of one version, delegating to ``service``."""
    pb = DRA_MESSAGES[version]

    async def prepare(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        results = await service.prepare(_claims(request))
        response = pb.NodePrepareResourcesResponse()
        for uid, result in results.items():
            entry = response.claims[uid]
            if result.error:
                entry.error = result.error
                continue
            for device in result.devices:
                entry.devices.add(
                    request_names=device.request_names,
                    pool_name=device.pool,
                    device_name=device.device,
                    cdi_device_ids=device.cdi_device_ids,
                )
        return response

    async def unprepare(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        errors = await service.unprepare(_claims(request))
        response = pb.NodeUnprepareResourcesResponse()
        for uid, error in errors.items():
            response.claims[uid].error = error
        return response

    return grpc.method_handlers_generic_handler(
        DRA_SERVICES[version],
        {
            "NodePrepareResources": grpc.unary_unary_rpc_method_handler(
                prepare,
                request_deserializer=pb.NodePrepareResourcesRequest.FromString,
                response_serializer=pb.NodePrepareResourcesResponse.SerializeToString,
            ),
            "NodeUnprepareResources": grpc.unary_unary_rpc_method_handler(
                unprepare,
                request_deserializer=pb.NodeUnprepareResourcesRequest.FromString,
                response_serializer=pb.NodeUnprepareResourcesResponse.SerializeToString,
            ),
        },
    )


def health_handler(version: str, source: HealthSource) -> grpc.GenericRpcHandler:
    """``NodeWatchResources`` of one version: the full report at once, on change, and well
    before the kubelet's timeout turns it Unknown."""
    pb = HEALTH_MESSAGES[version]

    async def watch(
        request: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[Any]:
        # Which service each kubelet chose (1.36: v1alpha1, 1.37: v1) is in the driver's log.
        log.info("health stream opened", service=version)
        async for report in source.health_reports(HEALTH_TIMEOUT_SECONDS / 3):
            now = int(time.time())
            yield pb.NodeWatchResourcesResponse(
                devices=[
                    pb.DeviceHealth(
                        device=pb.DeviceIdentifier(pool_name=d.pool, device_name=d.device),
                        health=pb.HEALTHY if d.healthy else pb.UNHEALTHY,
                        last_updated_time=now,
                        health_check_timeout_seconds=HEALTH_TIMEOUT_SECONDS,
                        message=d.message,
                    )
                    for d in report
                ]
            )

    return grpc.method_handlers_generic_handler(
        version,
        {
            "NodeWatchResources": grpc.unary_stream_rpc_method_handler(
                watch,
                request_deserializer=pb.NodeWatchResourcesRequest.FromString,
                response_serializer=pb.NodeWatchResourcesResponse.SerializeToString,
            )
        },
    )


@dataclass
class Registration:
    """The plugin-registration side: what we announce and what the kubelet answered."""

    driver: str
    endpoint: str
    versions: tuple[str, ...] = DEFAULT_VERSIONS
    registered: asyncio.Event = field(default_factory=asyncio.Event)
    error: str | None = None

    async def get_info(
        self,
        request: pluginregistration_pb2.InfoRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> pluginregistration_pb2.PluginInfo:
        return pluginregistration_pb2.PluginInfo(
            type=PLUGIN_TYPE,
            name=self.driver,
            endpoint=self.endpoint,
            supported_versions=list(self.versions),
        )

    async def notify(
        self,
        request: pluginregistration_pb2.RegistrationStatus,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> pluginregistration_pb2.RegistrationStatusResponse:
        if request.plugin_registered:
            self.error = None
            self.registered.set()
            log.info("registered with the kubelet", driver=self.driver)
        else:
            self.error = request.error or "the kubelet refused the registration"
            self.registered.clear()
            log.error("kubelet registration failed", driver=self.driver, reason=self.error)
        return pluginregistration_pb2.RegistrationStatusResponse()

    def handler(self) -> grpc.GenericRpcHandler:
        pb = pluginregistration_pb2
        return grpc.method_handlers_generic_handler(
            REGISTRATION_SERVICE,
            {
                "GetInfo": grpc.unary_unary_rpc_method_handler(
                    self.get_info,
                    request_deserializer=pb.InfoRequest.FromString,
                    response_serializer=pb.PluginInfo.SerializeToString,
                ),
                "NotifyRegistrationStatus": grpc.unary_unary_rpc_method_handler(
                    self.notify,
                    request_deserializer=pb.RegistrationStatus.FromString,
                    response_serializer=pb.RegistrationStatusResponse.SerializeToString,
                ),
            },
        )


def _prepare_socket_path(socket: Path) -> None:
    socket.parent.mkdir(parents=True, exist_ok=True)
    socket.unlink(missing_ok=True)  # left over by a previous instance


class PluginServer:
    """Both sockets, started DRA first (the kubelet dials it as soon as it sees the other)."""

    def __init__(
        self,
        driver: str,
        kubelet_dir: str | Path,
        service: NodeService,
        versions: tuple[str, ...] = DEFAULT_VERSIONS,
        health: HealthSource | None = None,
    ) -> None:
        self.driver = driver
        self.health = health
        self.registration_socket = registration_socket(kubelet_dir, driver)
        self.dra_socket = dra_socket(kubelet_dir, driver)
        # The health versions are announced too: a 1.37 kubelet opens no health stream otherwise.
        announced = versions + (HEALTH_VERSIONS if health is not None else ())
        self.registration = Registration(driver, str(self.dra_socket), announced)
        self.service = service
        self.versions = versions
        self._servers: list[grpc.aio.Server] = []

    async def _serve(self, socket: Path, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        _prepare_socket_path(socket)
        server = grpc.aio.server()
        server.add_generic_rpc_handlers(tuple(handlers))
        server.add_insecure_port(f"unix://{socket}")
        await server.start()
        self._servers.append(server)

    async def start(self) -> None:
        handlers = [dra_handler(v, self.service) for v in self.versions]
        if self.health is not None:
            handlers += [health_handler(v, self.health) for v in HEALTH_VERSIONS]
        await self._serve(self.dra_socket, handlers)
        await self._serve(self.registration_socket, [self.registration.handler()])
        log.info(
            "kubelet plugin serving",
            registration=str(self.registration_socket),
            endpoint=str(self.dra_socket),
        )

    async def stop(self, grace: float | None = 5.0) -> None:
        """Registration socket first: the kubelet deregisters when it disappears."""
        for server in reversed(self._servers):
            await server.stop(grace)
        self._servers.clear()
        self.registration_socket.unlink(missing_ok=True)
        self.dra_socket.unlink(missing_ok=True)
