"""HTTP/1.1 requests to the API server on kept-alive connections, without aiohttp's session.

kopf-dra's controllers spend their time on small requests: a claim's status, a pod's binding,
a pod's status patch, each a few kilobytes. aiohttp's ``ClientSession._request`` costs about
as much CPU per request as the TLS and socket work under it (tracing hooks, cookie jars, URL
objects, header multidicts, timer contexts). This transport does what those requests need and
nothing else: a pool of TLS connections to one endpoint, a request written in one piece, a
response read by ``Content-Length`` or chunks, gzip undone. Watches stay on aiohttp (they
stream), and so does everything behind a proxy (``KubeAPI`` falls back).

The outcomes are aiohttp's as ``KubeAPI`` maps them: a connection that cannot be opened raises
``NotSentError`` (nothing left), one lost mid-request ``ConnectionError`` (the outcome is
unknown), a timeout ``TimeoutError``. A kept-alive connection the server closed meanwhile is
retried once on a new one for idempotent methods only, as aiohttp and Go's client do.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ssl
import time
import zlib
from collections.abc import Callable, Mapping
from typing import Final
from urllib.parse import urlsplit

#: Concurrent requests per endpoint (each on its own connection); more wait for one. As
#: kubernetes-asyncio's pool: fewer (16) saved TLS handshakes but cost etcd more than that,
#: since fewer writes in flight are fewer per commit (bench/README.md).
LIMIT: Final = 100
#: The longest status line and header block accepted, as aiohttp's read buffer.
HEADER_LIMIT: Final = 2**21
#: Seconds a connection may sit idle and still be reused, as aiohttp's keep-alive: the
#: API server closes idle connections after 90 s (load balancers often sooner), and a request
#: sent as that close crosses it fails with its outcome unknown. Older ones are closed.
KEEPALIVE: Final = 15.0
IDEMPOTENT: Final = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
_NO_BODY_STATUS: Final = frozenset({204, 304})


class NotSentError(ConnectionError):
    """No connection to the API server could be made: the request never left."""


class _Stale(Exception):
    """A reused connection was closed by the server before any byte of the response."""


@dataclasses.dataclass(frozen=True)
class Response:
    status: int
    headers: tuple[tuple[str, str], ...]  # names lower-case, in the order received
    body: bytes

    def getall(self, name: str) -> list[str]:
        name = name.lower()
        return [v for k, v in self.headers if k == name]


@dataclasses.dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    idle_since: float = 0.0

    def usable(self) -> bool:
        return not self.reader.at_eof() and not self.writer.is_closing()

    def close(self) -> None:
        self.writer.close()


class Transport:
    """Kept-alive connections to one API server (``base``: its URL, as a kubeconfig's
    ``server``, with any path prefix)."""

    def __init__(
        self,
        base: str,
        ssl_context: ssl.SSLContext | None,
        *,
        server_hostname: str | None = None,
        limit: int = LIMIT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        url = urlsplit(base)
        if url.scheme not in ("https", "http") or not url.hostname:
            raise ValueError(f"API server URL {base!r}: want https://host[:port][/prefix]")
        self.host = url.hostname
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self.prefix = url.path.rstrip("/")
        self.ssl = ssl_context if url.scheme == "https" else None
        self.server_hostname = server_hostname if self.ssl is not None else None
        self._host_header = url.netloc.rpartition("@")[2]
        self._idle: list[_Connection] = []
        self._limit = limit
        self._clock = clock
        self._slots: asyncio.Semaphore | None = None
        self._closed = False

    async def request(
        self,
        method: str,
        target: str,
        headers: Mapping[str, str],
        body: bytes | None,
        *,
        connect_timeout: float,
    ) -> Response:
        """``target``: path and query. Bounded by the caller's timeout, except the connect."""
        if self._closed:
            raise NotSentError(f"{method} {target}: the API client is closed")
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._limit)
        head = self._head(method, target, headers, body)
        async with self._slots:
            connection = self._reuse()
            if connection is not None:
                try:
                    return await self._exchange(connection, head, body, method, reused=True)
                except _Stale:
                    if method not in IDEMPOTENT:
                        raise ConnectionError(
                            f"{method} {target}: the API server closed the connection"
                        ) from None
            connection = await self._open(connect_timeout, f"{method} {target}")
            try:
                return await self._exchange(connection, head, body, method, reused=False)
            except _Stale:  # a fresh connection closed unanswered: as aiohttp, a lost one
                raise ConnectionError(
                    f"{method} {target}: the API server closed the connection"
                ) from None

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
        for connection in idle:
            with contextlib.suppress(OSError):  # ssl.SSLError among them
                await connection.writer.wait_closed()

    # --- internals ---------------------------------------------------------------------

    def _head(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes | None
    ) -> bytes:
        lines = [f"{method} {self.prefix}{target} HTTP/1.1", f"Host: {self._host_header}"]
        lines.extend(f"{k}: {v}" for k, v in headers.items())
        lines.append("Accept-Encoding: gzip")
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        lines.append("\r\n")
        return "\r\n".join(lines).encode("latin-1")

    def _reuse(self) -> _Connection | None:
        """The connection idle the shortest, if recent enough; the rest of the pool is older,
        so one too old closes them all."""
        while self._idle:
            connection = self._idle.pop()
            if self._clock() - connection.idle_since > KEEPALIVE:
                for old in [connection, *self._idle]:
                    old.close()
                self._idle.clear()
                return None
            if connection.usable():
                return connection
            connection.close()
        return None

    async def _open(self, connect_timeout: float, what: str) -> _Connection:
        try:
            async with asyncio.timeout(connect_timeout):
                reader, writer = await asyncio.open_connection(
                    self.host,
                    self.port,
                    ssl=self.ssl,
                    server_hostname=self.server_hostname,
                    limit=HEADER_LIMIT,
                )
        except TimeoutError:
            raise TimeoutError(f"{what}: connecting to {self._host_header} timed out") from None
        except OSError as e:  # refused, unreachable, unresolvable, TLS refused (ssl.SSLError)
            raise NotSentError(f"{what}: cannot connect to {self._host_header}: {e}") from None
        return _Connection(reader, writer)

    async def _exchange(
        self,
        connection: _Connection,
        head: bytes,
        body: bytes | None,
        method: str,
        *,
        reused: bool,
    ) -> Response:
        """One request and its response; the connection goes back to the pool only when
        the response was read whole and the server keeps it open."""
        keep = False
        try:
            try:
                connection.writer.write(head + body if body is not None else head)
                await connection.writer.drain()
                raw_head = await connection.reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError as e:
                if reused and not e.partial:
                    raise _Stale from None
                raise ConnectionError("the API server closed the connection mid-response") from None
            except (ConnectionResetError, BrokenPipeError):
                if reused:
                    raise _Stale from None
                raise
            status, headers, persistent = _parse_head(raw_head)
            while 100 <= status < 200:  # informational (none asked for): the answer follows
                raw_head = await connection.reader.readuntil(b"\r\n\r\n")
                status, headers, persistent = _parse_head(raw_head)
            response_body = await _read_body(connection.reader, method, status, headers)
            if response_body is None:  # to the end of the connection
                response_body = await connection.reader.read()
            else:
                keep = persistent
            for name, value in headers:
                if name == "content-encoding" and value.strip().lower() == "gzip":
                    try:
                        response_body = zlib.decompress(response_body, wbits=31)
                    except zlib.error as e:
                        raise ConnectionError(f"a gzip body that does not inflate: {e}") from None
            return Response(status, headers, response_body)
        except asyncio.LimitOverrunError:
            raise ConnectionError("the API server's response header is too long") from None
        except asyncio.IncompleteReadError:
            raise ConnectionError("the API server closed the connection mid-response") from None
        finally:
            if keep and not self._closed:
                connection.idle_since = self._clock()
                self._idle.append(connection)
            else:
                connection.close()


def _parse_head(raw: bytes) -> tuple[int, tuple[tuple[str, str], ...], bool]:
    """Status, headers and whether the connection stays open after this response."""
    lines = raw.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    try:
        status = int(rest[:3])
    except ValueError:
        raise ConnectionError(f"not an HTTP response: {lines[0][:80]!r}") from None
    headers = []
    keep = version == "HTTP/1.1"
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        name = name.strip().lower()
        value = value.strip()
        headers.append((name, value))
        if name == "connection":
            tokens = {t.strip().lower() for t in value.split(",")}
            keep = "close" not in tokens and (keep or "keep-alive" in tokens)
    return status, tuple(headers), keep


async def _read_body(
    reader: asyncio.StreamReader,
    method: str,
    status: int,
    headers: tuple[tuple[str, str], ...],
) -> bytes | None:
    """The body by its framing; None: it runs to the end of the connection."""
    if method == "HEAD" or status in _NO_BODY_STATUS:
        return b""
    length: int | None = None
    chunked = False
    for name, value in headers:
        if name == "transfer-encoding":
            chunked = value.strip().lower().endswith("chunked")
        elif name == "content-length":
            try:
                length = int(value)
            except ValueError:
                raise ConnectionError(f"bad Content-Length {value!r}") from None
    if chunked:
        return await _read_chunks(reader)
    if length is not None:
        return await reader.readexactly(length)
    return None


async def _read_chunks(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        line = await reader.readuntil(b"\r\n")
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise ConnectionError(f"bad chunk size {line[:40]!r}") from None
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                pass
            return b"".join(parts)
        chunk = await reader.readexactly(size + 2)
        if chunk[-2:] != b"\r\n":
            raise ConnectionError("a chunk does not end in CRLF")
        parts.append(chunk[:-2])
