"""The simulated fabric manager as an HTTP/JSON service (aiohttp), like a real composable
system's REST endpoint.

    GET  /healthz
    GET  /v1/devices                      {"items": [device...]}
    GET  /v1/devices/{id}                 device
    POST /v1/operations                   {"id", "kind": attach|detach, "device", "cluster",
                                           "node" (attach), "labels"} -> 202 new, 200 existing
    GET  /v1/operations?cluster=&device=  {"items": [operation...]}
    GET  /v1/operations/{id}?wait=S       operation; with ``wait``, answers once it is done or
                                          after S seconds (long poll, at most 60)
    POST /v1/faults                       {"device", "count", "reason", "message"} or {"rate"}

Errors are ``{"reason": CamelCase, "message": ...}`` with 400, 404 or 409.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import structlog
from aiohttp import web
from pydantic import ValidationError

from operators.aio import wait_at_most
from operators.fabric.model import FabricError, FaultRequest, OperationRequest
from operators.fabric.simulator import FabricSimulator

log = structlog.get_logger(__name__)

MAX_WAIT = 60.0
SIM_KEY = web.AppKey("simulator", FabricSimulator)


def _error(status: int, reason: str, message: str) -> web.Response:
    return web.json_response({"reason": reason, "message": message}, status=status)


async def _body(request: web.Request) -> Any:
    try:
        return await request.json()
    except json.JSONDecodeError as e:
        raise web.HTTPBadRequest(
            text=json.dumps({"reason": "Invalid", "message": f"body is not JSON: {e}"}),
            content_type="application/json",
        ) from None


class FabricService:
    """The simulator behind an aiohttp app, with a timer that completes operations on time."""

    def __init__(self, simulator: FabricSimulator) -> None:
        self.sim = simulator
        self._changed = asyncio.Condition()
        self._wakeup = asyncio.Event()
        self._timer: asyncio.Task[None] | None = None
        self._runner: web.AppRunner | None = None
        self.url = ""

    # --- handlers ----------------------------------------------------------------------------

    async def healthz(self, _: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def list_devices(self, _: web.Request) -> web.Response:
        return web.json_response({"items": [d.wire() for d in self.sim.devices.values()]})

    async def get_device(self, request: web.Request) -> web.Response:
        try:
            return web.json_response(self.sim.device(request.match_info["id"]).wire())
        except FabricError as e:
            return _error(e.status, e.reason, e.message)

    async def submit(self, request: web.Request) -> web.Response:
        try:
            op_request = OperationRequest.model_validate(await _body(request))
        except ValidationError as e:
            return _error(400, "Invalid", str(e.errors()[0]["msg"]))
        try:
            op, created = self.sim.submit(op_request)
        except FabricError as e:
            return _error(e.status, e.reason, e.message)
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
        ops = self.sim.list_operations(
            cluster=request.query.get("cluster"), device=request.query.get("device")
        )
        return web.json_response({"items": [o.wire() for o in ops]})

    async def get_operation(self, request: web.Request) -> web.Response:
        op_id = request.match_info["id"]
        try:
            wait = min(MAX_WAIT, max(0.0, float(request.query.get("wait", "0"))))
        except ValueError:
            return _error(400, "Invalid", "wait must be a number of seconds")
        op = self.sim.operations.get(op_id)
        if op is None:
            return _error(404, "OperationNotFound", f"operation {op_id}: not known")
        if wait and not op.done:
            async with self._changed:
                await wait_at_most(self._changed.wait_for(lambda: op.done), wait)
        return web.json_response(op.wire())

    async def inject(self, request: web.Request) -> web.Response:
        try:
            fault = FaultRequest.model_validate(await _body(request))
            self.sim.inject(fault)
        except ValidationError as e:
            return _error(400, "Invalid", str(e.errors()[0]["msg"]))
        except FabricError as e:
            return _error(e.status, e.reason, e.message)
        log.info("fault injected", **fault.wire())
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
        app = web.Application()
        app[SIM_KEY] = self.sim
        app.router.add_get("/healthz", self.healthz)
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
