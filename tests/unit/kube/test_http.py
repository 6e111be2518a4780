"""kopf-dra's transport for plain requests (``kube.http``): framing, keep-alive, the failures
``KubeAPI`` maps, against servers on this host (the real API server: every integration test)."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiohttp import web

from operators.kube.api import ApiTimeouts, KubeAPI, NotFoundError, NotSentError
from operators.kube.client import make_api_client
from operators.kube.http import KEEPALIVE, Transport

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


class RawServer:
    """A TCP server whose handler writes whatever bytes a test needs; counts connections."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.requests: list[bytes] = []

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.handler(reader, writer, self.connections)
        finally:
            writer.close()

    async def read_request(self, reader: asyncio.StreamReader) -> bytes | None:
        """One request (head and Content-Length body), or None at the end of the connection."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        request = head + await reader.readexactly(length)
        self.requests.append(request)
        return request


@asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[tuple[RawServer, Transport]]:
    server = RawServer(handler)
    listening = await asyncio.start_server(server._serve, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    transport = Transport(f"http://127.0.0.1:{port}", None)
    try:
        yield server, transport
    finally:
        await transport.close()
        listening.close()
        await listening.wait_closed()


def reply(body: bytes, *headers: str, status: str = "200 OK") -> bytes:
    head = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def request(transport: Transport, method: str = "GET", body: bytes | None = None) -> bytes:
    response = await transport.request(method, "/x", {}, body, connect_timeout=5)
    return response.body


async def test_kept_alive_one_connection_for_sequential_and_limited_requests() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        while await server.read_request(reader) is not None:
            await asyncio.sleep(0.01)  # a slow answer: the second request waits for the slot
            writer.write(reply(b"{}"))

    async with raw_server(handler) as (server, transport):
        transport._limit = 1
        assert await request(transport) == b"{}"
        assert await request(transport) == b"{}"
        assert list(await asyncio.gather(request(transport), request(transport))) == [b"{}"] * 2
    assert server.connections == 1
    assert len(server.requests) == 4


async def test_a_connection_idle_past_the_keep_alive_is_closed_not_reused() -> None:
    """The API server closes idle connections after 90 s: a write sent on one as it closes
    would be lost, its outcome unknown. An old connection is never reused."""
    now = [0.0]

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        while await server.read_request(reader) is not None:
            writer.write(reply(b"{}"))

    async with raw_server(handler) as (server, transport):
        transport._clock = lambda: now[0]
        assert await request(transport) == b"{}"
        now[0] += KEEPALIVE - 1
        assert await request(transport, "POST", b"{}") == b"{}"  # still fresh: reused
        assert server.connections == 1
        now[0] += KEEPALIVE + 1
        assert await request(transport, "POST", b"{}") == b"{}"
    assert server.connections == 2


async def test_chunked_and_gzip_bodies_and_connection_close() -> None:
    payload = json.dumps({"items": ["x" * 100] * 50}).encode()
    packed = gzip.compress(payload)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await server.read_request(reader)
        chunks = [packed[i : i + 500] for i in range(0, len(packed), 500)]
        body = (
            b"".join(b"%x;ext=1\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\nX-T: 1\r\n\r\n"
        )
        head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Encoding: gzip\r\n"
        writer.write(head.encode() + b"Connection: close\r\n\r\n" + body)

    async with raw_server(handler) as (server, transport):
        assert await request(transport) == payload
        assert await request(transport) == payload
    assert b"Accept-Encoding: gzip" in server.requests[0]
    assert server.connections == 2  # "Connection: close" is not reused


async def test_an_informational_answer_is_skipped_and_a_broken_gzip_body_is_an_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + reply(b"{}"))
        await server.read_request(reader)
        writer.write(reply(b"not gzip", "Content-Encoding: gzip"))

    async with raw_server(handler) as (server, transport):
        assert await request(transport) == b"{}"
        with pytest.raises(ConnectionError, match="gzip"):
            await request(transport)
    assert server.connections == 1


async def test_a_kept_alive_connection_closed_unanswered_retries_idempotent_methods_only() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        if await server.read_request(reader) is None:
            return
        writer.write(reply(b'"first"' if n == 1 else b'"again"'))
        await writer.drain()
        await server.read_request(reader)  # the next request on this connection: no answer

    async with raw_server(handler) as (server, transport):
        assert await request(transport) == b'"first"'
        assert await request(transport, "GET") == b'"again"'  # retried on a new connection
        with pytest.raises(ConnectionError, match="closed the connection"):
            await request(transport, "POST", b"{}")  # maybe applied: the caller re-reads
    assert server.connections == 2


async def test_a_timeout_mid_response_drops_the_connection() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while await server.read_request(reader) is not None:
            if n == 1:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{")  # and no more
            else:
                writer.write(reply(b"{}"))

    async with raw_server(handler) as (server, transport):
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await request(transport)
        assert await request(transport) == b"{}"
    assert server.connections == 2


async def test_nothing_listening_is_not_sent() -> None:
    listening = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    listening.close()
    await listening.wait_closed()
    transport = Transport(f"http://127.0.0.1:{port}", None)
    with pytest.raises(NotSentError, match="cannot connect"):
        await request(transport)
    await transport.close()
    with pytest.raises(NotSentError, match="closed"):
        await request(transport)


def test_an_api_server_url_of_another_scheme_is_refused() -> None:
    with pytest.raises(ValueError, match="ftp://h"):
        Transport("ftp://h", None)


async def test_kube_api_on_the_transport(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``KubeAPI`` sends and makes of the answers: credentials, body, path prefix,
    warnings, errors; a request waiting for a slot is not a connect timeout."""
    for name in ("https_proxy", "http_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    seen: list[web.Request] = []

    async def pod(request: web.Request) -> web.Response:
        seen.append(request)
        await asyncio.sleep(0.2)  # slow: the second request waits longer than connect=0.05
        name = request.match_info["name"]
        if name == "gone":
            return web.json_response(
                {"kind": "Status", "reason": "NotFound", "message": "pods gone"}, status=404
            )
        body = await request.json() if request.can_read_body else {}
        return web.json_response(
            {"kind": "Pod", "metadata": {"name": name}, "sent": body},
            headers={"Warning": '299 - "deprecated \\"thing\\""'},
        )

    app = web.Application()
    app.router.add_route("*", "/prefix/api/v1/namespaces/default/pods/{name}", pod)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    path = tmp_path / "kubeconfig"
    path.write_text(f"""
apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{port}/prefix"}}}}]
users: [{{name: u, user: {{token: secret}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
""")
    warnings: list[str] = []
    try:
        async with await make_api_client(path) as api_client:
            assert api_client.transport is not None
            api_client.transport._limit = 1
            api = KubeAPI(
                api_client, ApiTimeouts(connect=0.05, total=10.0), on_warning=warnings.append
            )
            first, second = await asyncio.gather(
                api.get("Pod", "a", "default"),
                api.request("PUT", "/api/v1/namespaces/default/pods/b", body={"spec": {}}),
            )
            with pytest.raises(NotFoundError, match="pods gone"):
                await api.get("Pod", "gone", "default")
    finally:
        await runner.cleanup()
    assert (first["metadata"]["name"], second["sent"]) == ("a", {"spec": {}})
    assert warnings == ['deprecated "thing"'] * 2
    assert {r.headers["Authorization"] for r in seen} == {"Bearer secret"}
