"""The simulated fabric manager as an HTTP/JSON service (aiohttp), like a real composable
system's REST endpoint.

    GET  /healthz, /readyz                (no credential: probes; 500 once operations no
                                           longer finish)
    GET  /v1/snapshot                     {"cluster", "epoch", "revision", "devices", "operations"}
    GET  /v1/devices                      {"items": [device...]}
    GET  /v1/devices/{id}                 device
    POST /v1/operations                   {"id", "kind": attach|detach, "device",
                                           "node" (attach), "labels"} -> 202 new, 200 existing
    GET  /v1/operations?device=           {"items": [operation...]} (the caller's)
    GET  /v1/operations/{id}?wait=S       operation; with ``wait``, answers once it is done or
                                          after S seconds (long poll, at most 60)
    POST /v1/faults                       {"device", "count", "reason", "message"} or {"rate"}
                                          (only with --enable-faults)

Every ``/v1`` request carries ``Authorization: Bearer <token>``; the token says which cluster
calls (``auth.py``), and that is the cluster every operation is recorded for. Devices held by
another cluster show as held, without that cluster's id, node or operation.

Errors are ``{"reason": CamelCase, "message": ...}``: 400 (the message names the field), 401 (no
or unknown token), 403 (another cluster's device or operation; faults off), 404, 409 (an id
reused for another request), 413 (body over 64 KiB), 429 (too many running operations).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from aiohttp import web
from pydantic import ValidationError

from operators.aio import wait_at_most
from operators.fabric.auth import Authenticator
from operators.fabric.model import (
    MAX_BODY_BYTES,
    FabricError,
    FaultRequest,
    ForbiddenError,
    OperationRequest,
)
from operators.fabric.simulator import FabricSimulator

log = structlog.get_logger(__name__)

MAX_WAIT = 60.0
SIM_KEY = web.AppKey("simulator", FabricSimulator)
CLUSTER_KEY = web.RequestKey("cluster", str)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(status: int, reason: str, message: str) -> web.Response:
    return web.json_response({"reason": reason, "message": message}, status=status)


def _failed(e: FabricError) -> web.Response:
    return _error(e.status, e.reason, e.message)


def _invalid(e: ValidationError) -> web.Response:
    """400 naming every offending field (``labels.claim: ...``)."""
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'body'}: {err['msg']}" for err in e.errors()
    )
    return _error(400, "Invalid", problems)


class _BadBody(Exception):
    def __init__(self, response: web.Response) -> None:
        self.response = response


async def _body(request: web.Request) -> Any:
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise _BadBody(_too_large(request.content_length))
    try:
        return json.loads(await request.read())
    except web.HTTPRequestEntityTooLarge:
        raise _BadBody(_too_large(None)) from None
    except (ValueError, UnicodeDecodeError) as e:
        raise _BadBody(_error(400, "Invalid", f"body: not JSON: {e}")) from None


def _too_large(size: int | None) -> web.Response:
    said = f"{size} bytes" if size is not None else "too long"
    return _error(413, "RequestTooLarge", f"body: {said}, at most {MAX_BODY_BYTES} bytes")


def _caller(request: web.Request) -> str:
    return request[CLUSTER_KEY]


class FabricService:
    """The simulator behind an aiohttp app, with a timer that completes operations on time.

    ``faults``: serve ``POST /v1/faults`` (a test's knob: it lets any caller fail every
    cluster's attaches, so it is off unless asked for).
    """

    def __init__(
        self, simulator: FabricSimulator, tokens: Authenticator, *, faults: bool = False
    ) -> None:
        self.sim = simulator
        self.tokens = tokens
        self.faults = faults
        self._changed = asyncio.Condition()
        self._wakeup = asyncio.Event()
        self._timer: asyncio.Task[None] | None = None
        self._runner: web.AppRunner | None = None
        self.url = ""

    # --- authentication ------------------------------------------------------------------

    @web.middleware
    async def authenticate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Every /v1 request names its cluster with its token; 401 without a known one."""
        if not request.path.startswith("/v1/"):
            return await handler(request)
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        cluster = (
            self.tokens.cluster_of(token.strip()) if scheme.lower() == "bearer" and token else None
        )
        if cluster is None:
            response = _error(
                401,
                "Unauthorized",
                "a bearer token of a known cluster is required"
                if not token
                else "the bearer token is not one of a known cluster",
            )
            response.headers["WWW-Authenticate"] = 'Bearer realm="fabric-manager"'
            log.warning("request refused: no known token", path=request.path, method=request.method)
            return response
        request[CLUSTER_KEY] = cluster
        return await handler(request)

    # --- handlers ----------------------------------------------------------------------------

    async def healthz(self, _: web.Request) -> web.Response:
        """The loop answers, and the timer that finishes operations still runs."""
        timer = self._timer
        if timer is not None and timer.done():
            log.error("operations no longer finish: the timer has ended", task=repr(timer))
            return web.json_response({"status": "failed", "check": "timer"}, status=500)
        return web.json_response({"status": "ok"})

    async def snapshot(self, request: web.Request) -> web.Response:
        return web.json_response(self.sim.snapshot(_caller(request)).wire())

    async def list_devices(self, request: web.Request) -> web.Response:
        devices = self.sim.devices_for(_caller(request))
        return web.json_response({"items": [d.wire() for d in devices]})

    async def get_device(self, request: web.Request) -> web.Response:
        try:
            device = self.sim.device(request.match_info["id"])
        except FabricError as e:
            return _failed(e)
        return web.json_response(device.seen_by(_caller(request)).wire())

    async def submit(self, request: web.Request) -> web.Response:
        cluster = _caller(request)
        try:
            raw = await _body(request)
        except _BadBody as e:
            return e.response
        if isinstance(raw, dict) and raw.get("cluster", cluster) != cluster:
            return _failed(
                ForbiddenError(f"cluster: the credential is cluster {cluster}'s, not another's")
            )
        try:
            op_request = OperationRequest.model_validate(raw)
            op, created = self.sim.submit(op_request, cluster)
        except ValidationError as e:
            return _invalid(e)
        except FabricError as e:
            return _failed(e)
        if created:
            log.info(
                "operation started",
                operation=op.id,
                kind=op.kind,
                device=op.device,
                node=op.node,
                cluster=op.cluster,
                state=op.state,
                reason=op.reason or None,
            )
            self._wakeup.set()
            await self._notify()
        return web.json_response(op.wire(), status=202 if created else 200)

    async def list_operations(self, request: web.Request) -> web.Response:
        cluster = _caller(request)
        if request.query.get("cluster", cluster) != cluster:
            return _failed(ForbiddenError("cluster: only the caller's operations can be listed"))
        ops = self.sim.list_operations(cluster, device=request.query.get("device"))
        return web.json_response({"items": [o.wire() for o in ops]})

    async def get_operation(self, request: web.Request) -> web.Response:
        op_id = request.match_info["id"]
        try:
            wait = min(MAX_WAIT, max(0.0, float(request.query.get("wait", "0"))))
        except ValueError:
            return _error(400, "Invalid", "wait: a number of seconds")
        try:
            op = self.sim.operation(op_id, _caller(request))
        except FabricError as e:
            return _failed(e)
        if op is None:
            return _error(404, "OperationNotFound", f"operation {op_id}: not known")
        if wait and not op.done:
            async with self._changed:
                await wait_at_most(self._changed.wait_for(lambda: op.done), wait)
        return web.json_response(op.wire())

    async def inject(self, request: web.Request) -> web.Response:
        if not self.faults:
            return _failed(
                ForbiddenError("fault injection is off (start the manager with --enable-faults)")
            )
        try:
            fault = FaultRequest.model_validate(await _body(request))
            self.sim.inject(fault)
        except _BadBody as e:
            return e.response
        except ValidationError as e:
            return _invalid(e)
        except FabricError as e:
            return _failed(e)
        log.info("fault injected", cluster=_caller(request), **fault.wire())
        return web.json_response(fault.wire())

    # --- the timer ---------------------------------------------------------------------------

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _tick(self) -> None:
        while True:
            for op in self.sim.complete_due():
                log.info(
                    "operation finished",
                    operation=op.id,
                    kind=op.kind,
                    device=op.device,
                    node=op.node,
                    state=op.state,
                    reason=op.reason or None,
                )
            await self._notify()
            deadline = self.sim.next_deadline()
            timeout = None if deadline is None else max(0.0, deadline - self.sim.clock())
            self._wakeup.clear()
            await wait_at_most(self._wakeup.wait(), timeout)

    # --- lifecycle -----------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self.authenticate], client_max_size=MAX_BODY_BYTES)
        app[SIM_KEY] = self.sim
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/readyz", self.healthz)
        app.router.add_get("/v1/snapshot", self.snapshot)
        app.router.add_get("/v1/devices", self.list_devices)
        app.router.add_get("/v1/devices/{id}", self.get_device)
        app.router.add_post("/v1/operations", self.submit)
        app.router.add_get("/v1/operations", self.list_operations)
        app.router.add_get("/v1/operations/{id}", self.get_operation)
        app.router.add_post("/v1/faults", self.inject)
        return app

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve on ``host:port`` (0: any free port); returns the base URL."""
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server = site._server
        if not isinstance(server, asyncio.Server):
            raise RuntimeError("aiohttp did not start a TCP server")
        bound = server.sockets[0].getsockname()[1]
        self.url = f"http://{host}:{bound}"
        self._timer = asyncio.create_task(self._tick(), name="fabric-sim-timer")
        return self.url

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer
            self._timer = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self.sim.save()
