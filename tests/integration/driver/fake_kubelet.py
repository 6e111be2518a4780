"""A kubelet stand-in: registers a DRA plugin and calls it over its unix sockets.

The integration tests play the kubelet's part with this client: the same wire calls (including
the health stream, as a 1.37 or a 1.36 kubelet opens it), through real gRPC over real sockets.
``make e2e-node`` meets a real kubelet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import grpc
import grpc.aio

from operators.driver.plugin import (
    DRA_MESSAGES,
    DRA_SERVICES,
    HEALTH_MESSAGES,
    HEALTH_V1,
    HEALTH_V1ALPHA1,
    PLUGIN_TYPE,
    REGISTRATION_SERVICE,
    ClaimRef,
)
from operators.driver.proto import pluginregistration_pb2


class RegistrationRefusedError(RuntimeError):
    """The plugin announced something a kubelet would not accept."""


class NoHealthStreamError(RuntimeError):
    """This kubelet would open no health stream on the plugin."""


@dataclass(frozen=True, slots=True)
class HealthPolicy:
    """How a kubelet release picks the health service it opens on a plugin it registered."""

    #: The health services it knows, newest first (healthServicesSupportedByKubelet).
    known: tuple[str, ...]
    #: True: the first known one the plugin announced, none if it announced none (1.37,
    #: pickHealthService in pkg/kubelet/cm/dra/plugin); False: the newest known, unasked (1.36).
    negotiated: bool

    def choose(self, announced: Sequence[str]) -> str:
        if not self.negotiated:
            return self.known[0]
        return next((v for v in self.known if v in announced), "")


KUBELET_1_36_HEALTH = HealthPolicy((HEALTH_V1ALPHA1,), negotiated=False)
KUBELET_1_37_HEALTH = HealthPolicy((HEALTH_V1, HEALTH_V1ALPHA1), negotiated=True)


@dataclass(frozen=True)
class PluginInfo:
    type: str
    name: str
    endpoint: str
    supported_versions: list[str]


@dataclass(frozen=True)
class PreparedDeviceView:
    request_names: list[str]
    pool_name: str
    device_name: str
    cdi_device_ids: list[str]


@dataclass(frozen=True)
class ClaimAnswer:
    devices: list[PreparedDeviceView] = field(default_factory=list)
    error: str = ""


@dataclass(frozen=True, slots=True)
class HealthView:
    """One device of a NodeWatchResources answer."""

    pool: str
    device: str
    health: str
    timeout_seconds: int
    message: str


class FakeKubelet:
    """Registers one plugin (as the kubelet's plugin watcher does) and calls its DRA service;
    ``health`` says which health service it opens (a 1.37 kubelet's choice by default)."""

    def __init__(
        self,
        known_versions: Sequence[str] = tuple(DRA_SERVICES),
        health: HealthPolicy = KUBELET_1_37_HEALTH,
    ) -> None:
        self.known_versions = list(known_versions)
        self.health = health
        #: The health service chosen at registration, per endpoint ("" for none).
        self.health_services: dict[str, str] = {}
        self._channels: list[grpc.aio.Channel] = []

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close()
        self._channels.clear()

    def _channel(self, socket: str | Path) -> grpc.aio.Channel:
        channel = grpc.aio.insecure_channel(f"unix://{socket}")
        self._channels.append(channel)
        return channel

    async def get_info(self, registration_socket: str | Path) -> PluginInfo:
        pb = pluginregistration_pb2
        call = self._channel(registration_socket).unary_unary(
            f"/{REGISTRATION_SERVICE}/GetInfo",
            request_serializer=pb.InfoRequest.SerializeToString,
            response_deserializer=pb.PluginInfo.FromString,
        )
        info: pluginregistration_pb2.PluginInfo = await call(pb.InfoRequest(), timeout=10)
        return PluginInfo(info.type, info.name, info.endpoint, list(info.supported_versions))

    async def notify(
        self, registration_socket: str | Path, registered: bool, error: str = ""
    ) -> None:
        pb = pluginregistration_pb2
        call = self._channel(registration_socket).unary_unary(
            f"/{REGISTRATION_SERVICE}/NotifyRegistrationStatus",
            request_serializer=pb.RegistrationStatus.SerializeToString,
            response_deserializer=pb.RegistrationStatusResponse.FromString,
        )
        await call(pb.RegistrationStatus(plugin_registered=registered, error=error), timeout=10)

    async def register(self, registration_socket: str | Path) -> tuple[PluginInfo, str]:
        """GetInfo, pick the first announced version we know and the health service, report
        success: (info, version)."""
        info = await self.get_info(registration_socket)
        problem = ""
        if info.type != PLUGIN_TYPE:
            problem = f"plugin type {info.type!r}, expected {PLUGIN_TYPE!r}"
        version = next((v for v in info.supported_versions if v in self.known_versions), "")
        if not problem and not version:
            problem = f"none of the versions {info.supported_versions} is supported"
        if problem:
            await self.notify(registration_socket, False, problem)
            raise RegistrationRefusedError(problem)
        await self.notify(registration_socket, True)
        self.health_services[info.endpoint] = self.health.choose(info.supported_versions)
        return info, version

    def _method(self, endpoint: str | Path, version: str, method: str) -> Any:
        pb = DRA_MESSAGES[version]
        request = f"{method}Request"
        response = f"{method}Response"
        return self._channel(endpoint).unary_unary(
            f"/{DRA_SERVICES[version]}/{method}",
            request_serializer=getattr(pb, request).SerializeToString,
            response_deserializer=getattr(pb, response).FromString,
        )

    async def prepare(
        self, endpoint: str | Path, claims: Sequence[ClaimRef], version: str = "v1.DRAPlugin"
    ) -> dict[str, ClaimAnswer]:
        pb = DRA_MESSAGES[version]
        request = pb.NodePrepareResourcesRequest(
            claims=[pb.Claim(namespace=c.namespace, uid=c.uid, name=c.name) for c in claims]
        )
        response = await self._method(endpoint, version, "NodePrepareResources")(
            request, timeout=30
        )
        return {
            uid: ClaimAnswer(
                devices=[
                    PreparedDeviceView(
                        list(d.request_names), d.pool_name, d.device_name, list(d.cdi_device_ids)
                    )
                    for d in answer.devices
                ],
                error=answer.error,
            )
            for uid, answer in response.claims.items()
        }

    async def watch_health(self, endpoint: str | Path, messages: int) -> list[list[HealthView]]:
        """The first ``messages`` answers of the NodeWatchResources stream of the service chosen
        at registration, as the kubelet's health manager reads it."""
        service = self.health_services.get(str(endpoint), "")
        if not service:
            raise NoHealthStreamError(f"no health service chosen for {endpoint}")
        pb = HEALTH_MESSAGES[service]
        call = self._channel(endpoint).unary_stream(
            f"/{service}/NodeWatchResources",
            request_serializer=pb.NodeWatchResourcesRequest.SerializeToString,
            response_deserializer=pb.NodeWatchResourcesResponse.FromString,
        )
        stream = call(pb.NodeWatchResourcesRequest(), timeout=60)
        answers: list[list[HealthView]] = []
        async for response in stream:
            answers.append(
                [
                    HealthView(
                        d.device.pool_name,
                        d.device.device_name,
                        pb.HealthStatus.Name(d.health),
                        d.health_check_timeout_seconds,
                        d.message,
                    )
                    for d in response.devices
                ]
            )
            if len(answers) == messages:
                stream.cancel()
                break
        return answers

    async def unprepare(
        self, endpoint: str | Path, claims: Sequence[ClaimRef], version: str = "v1.DRAPlugin"
    ) -> dict[str, str]:
        pb = DRA_MESSAGES[version]
        request = pb.NodeUnprepareResourcesRequest(
            claims=[pb.Claim(namespace=c.namespace, uid=c.uid, name=c.name) for c in claims]
        )
        response = await self._method(endpoint, version, "NodeUnprepareResources")(
            request, timeout=30
        )
        return {uid: answer.error for uid, answer in response.claims.items()}
