"""A component's HTTP endpoints: ``/metrics``, ``/healthz`` and ``/readyz``, as kube-scheduler has.

One server per process on ``--metrics-bind-address`` (off when empty), run on the event loop:
a loop that no longer turns (a handler blocking it) answers no probe, which is the point of a
liveness probe. With ``--metrics-secure`` it speaks HTTPS (the certificate of
``--metrics-cert-dir``, else a self-signed one made at start, as kube-scheduler does) and
``/metrics`` needs a bearer token that the API server authenticates (TokenReview) and
authorizes for ``get`` on the path (SubjectAccessReview): kube-scheduler's delegated
authentication and authorization, with answers cached ten seconds and a review that failed
on the way tried again as it does. ``/healthz``, ``/livez``
and ``/readyz`` stay open (its ``--authorization-always-allow-paths``), and tell which check
failed but not why (the why is logged).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import random
import ssl
import tempfile
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from operators.kube import certs
from operators.kube.api import ApiError, KubeAPI
from operators.kube.client import make_api
from operators.settings import Settings, SettingsError, bind_address

log = structlog.get_logger(__name__)

#: A check: None when fine, else what is wrong (logged, never served).
Check = Callable[[], str | None]
ALWAYS_ALLOWED: Final = frozenset({"/healthz", "/livez", "/readyz"})
CACHE_TTL: Final = 10.0
CACHE_SIZE: Final = 1024
TOKEN_REVIEWS: Final = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS: Final = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
#: kube's DefaultAuthWebhookRetryBackoff: 0.5 s, times 1.5 each try, 20% jitter, five tries.
REVIEW_DELAY: Final = 0.5
REVIEW_FACTOR: Final = 1.5
REVIEW_JITTER: Final = 0.2
REVIEW_TRIES: Final = 5


def transient(error: BaseException) -> bool:
    """A review worth sending again, as kube's webhook.DefaultShouldRetry judges it: an
    internal error, a timeout, too many requests or a Retry-After from the API server, or a
    connection that broke (or never opened: a review changes nothing, so resending is safe)."""
    if isinstance(error, ApiError):
        details = error.body.get("details") or {}
        return error.status in (429, 500, 504) or bool(details.get("retryAfterSeconds"))
    return isinstance(error, ConnectionError)


@dataclasses.dataclass
class Endpoints:
    """What a component serves: its metrics and its health checks by name."""

    registries: Sequence[CollectorRegistry]
    liveness: Mapping[str, Check] = dataclasses.field(default_factory=dict)
    readiness: Mapping[str, Check] = dataclasses.field(default_factory=dict)


class _TTLCache:
    """Review answers by request, bounded (a flood of made-up tokens cannot grow it)."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self._entries: OrderedDict[str, tuple[float, Any]] = OrderedDict()

    def get(self, key: str) -> Any:
        entry = self._entries.get(key)
        if entry is None or entry[0] < self._now():
            self._entries.pop(key, None)
            return None
        return entry[1]

    def put(self, key: str, value: Any) -> None:
        self._entries[key] = (self._now() + CACHE_TTL, value)
        self._entries.move_to_end(key)
        while len(self._entries) > CACHE_SIZE:
            self._entries.popitem(last=False)


class DelegatedAuth:
    """TokenReview then SubjectAccessReview for a request, as kube-scheduler delegates them."""

    def __init__(
        self,
        api: Callable[[], Awaitable[KubeAPI]],
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._api = api
        self._sleep = sleep
        now = asyncio.get_running_loop().time
        self._users = _TTLCache(now)
        self._decisions = _TTLCache(now)

    async def _review(self, path: str, review: Mapping[str, Any]) -> Mapping[str, Any]:
        """The review's status, tried again with backoff while the failure is transient."""
        delay = REVIEW_DELAY
        for tries in range(1, REVIEW_TRIES + 1):
            try:
                answer = await (await self._api()).call("POST", path, body=review)
                status: Mapping[str, Any] = answer.get("status") or {}
                return status
            except (ApiError, OSError) as e:
                if tries == REVIEW_TRIES or not transient(e):
                    raise
                log.info("a metrics request's review failed; trying again", error=str(e))
            await self._sleep(delay * (1 + REVIEW_JITTER * random.random()))
            delay *= REVIEW_FACTOR
        raise AssertionError("unreachable: the last try returns or raises")

    async def user(self, token: str) -> dict[str, Any] | None:
        """The authenticated user of ``token``, or None."""
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = self._users.get(key)
        if cached is not None:
            return cached or None
        review = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        status = await self._review(TOKEN_REVIEWS, review)
        user: dict[str, Any] = status.get("user") or {} if status.get("authenticated") else {}
        self._users.put(key, user)
        return user or None

    async def allowed(self, user: Mapping[str, Any], path: str, verb: str) -> bool:
        key = repr((user.get("username"), user.get("uid"), user.get("groups"), path, verb))
        cached = self._decisions.get(key)
        if cached is not None:
            return bool(cached)
        spec: dict[str, Any] = {
            "user": user.get("username", ""),
            "groups": user.get("groups") or [],
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.get("uid"):
            spec["uid"] = user["uid"]
        if user.get("extra"):
            spec["extra"] = user["extra"]
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": spec,
        }
        allowed = bool((await self._review(ACCESS_REVIEWS, review)).get("allowed"))
        self._decisions.put(key, allowed)
        return allowed

    async def check(self, request: web.Request) -> web.Response | None:
        """None when the request may go on; else the 401/403/503 to answer."""
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return web.Response(status=401, text="Unauthorized: a bearer token is required\n")
        try:
            user = await self.user(token.strip())
            if user is None:
                return web.Response(status=401, text="Unauthorized\n")
            if not await self.allowed(user, request.path, request.method.lower()):
                return web.Response(
                    status=403,
                    text=f'Forbidden: user "{user.get("username", "")}" may not get '
                    f"{request.path}\n",
                )
        except (ApiError, OSError, TimeoutError) as e:
            log.warning("could not review a metrics request", path=request.path, error=str(e))
            return web.Response(status=503, text="the API server did not answer the review\n")
        return None


def _report(kind: str, checks: Mapping[str, Check], verbose: bool) -> web.Response:
    """kube's health report: one ``[+]``/``[-]`` line per check, reasons withheld."""
    lines, failed = [], False
    for name, check in checks.items():
        try:
            problem = check()
        except Exception as e:  # a broken check is a failed check, never a 500 with a trace
            problem = f"the check raised {e!r}"
        if problem is None:
            lines.append(f"[+]{name} ok")
        else:
            failed = True
            lines.append(f"[-]{name} failed: reason withheld")
            log.warning(f"{kind} check failed", check=name, problem=problem)
    if failed:
        return web.Response(status=500, text="\n".join([*lines, f"{kind} check failed"]) + "\n")
    return web.Response(
        text="\n".join([*lines, f"{kind} check passed"]) + "\n" if verbose else "ok"
    )


def tls_context(cert_dir: str | None) -> ssl.SSLContext:
    """The certificate of ``cert_dir`` (tls.crt, tls.key), else a self-signed one."""
    if cert_dir:
        directory = Path(cert_dir)
        cert, key = directory / "tls.crt", directory / "tls.key"
        if not (cert.is_file() and key.is_file()):
            raise SettingsError(f"--metrics-cert-dir {cert_dir}: no tls.crt and tls.key in it")
    else:
        directory = Path(tempfile.mkdtemp(prefix="kopf-dra-metrics-"))
        try:
            cert, key = certs.self_signed(directory, ["localhost", "127.0.0.1"])
        except certs.CertificateError as e:
            raise SettingsError(f"--metrics-secure without --metrics-cert-dir: {e}") from None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(str(cert), str(key))
    return context


class Server:
    """The endpoints of one process; ``start`` and ``stop`` are idempotent."""

    def __init__(self, settings: Settings, endpoints: Endpoints) -> None:
        self.settings = settings
        self.endpoints = endpoints
        self._api: KubeAPI | None = None
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    async def _review_api(self) -> KubeAPI:
        if self._api is None:
            self._api = await make_api(self.settings)
        return self._api

    async def start(self) -> None:
        address = bind_address(self.settings.metrics_bind_address)
        if address is None or self._runner is not None:
            return
        context = (
            tls_context(self.settings.metrics_cert_dir) if self.settings.metrics_secure else None
        )
        auth = DelegatedAuth(self._review_api) if self.settings.metrics_secure else None
        endpoints = self.endpoints

        @web.middleware
        async def authorize(
            request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
        ) -> web.StreamResponse:
            if auth is not None and request.path not in ALWAYS_ALLOWED:
                refusal = await auth.check(request)
                if refusal is not None:
                    return refusal
            return await handler(request)

        async def metrics(_: web.Request) -> web.Response:
            body = b"".join(generate_latest(r) for r in endpoints.registries)
            return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

        async def healthz(request: web.Request) -> web.Response:
            return _report("healthz", endpoints.liveness, "verbose" in request.query)

        async def readyz(request: web.Request) -> web.Response:
            checks = {**endpoints.liveness, **endpoints.readiness}
            return _report("readyz", checks, "verbose" in request.query)

        app = web.Application(middlewares=[authorize])
        app.router.add_get("/metrics", metrics)
        app.router.add_get("/healthz", healthz)
        app.router.add_get("/livez", healthz)
        app.router.add_get("/readyz", readyz)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, address[0], address[1], ssl_context=context)
        try:
            await site.start()
        except OSError as e:
            await runner.cleanup()
            raise SettingsError(
                f"--metrics-bind-address {self.settings.metrics_bind_address}: {e.strerror}"
            ) from None
        self._runner = runner
        server = site._server  # the bound port when the address asked for port 0
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else address[1]
        log.info(
            "serving metrics and health",
            address=f"{address[0]}:{self.port}",
            secure=self.settings.metrics_secure,
        )

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        api, self._api = self._api, None
        if api is not None:
            await api.api_client.close()
