"""The health and metrics endpoints, on a real socket: what the kubelet's probes and a scraper
see (no API server: plain HTTP; the secure mode is proven in tests/integration/test_metrics.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from prometheus_client import Counter

from operators.kube.api import ApiError
from operators.observability.metrics import registry
from operators.runtime.controller import Controller
from operators.runtime.queue import WorkQueue
from operators.runtime.serving import CACHE_SIZE, DelegatedAuth, Endpoints, Server, _TTLCache
from operators.settings import Settings, SettingsError


class Wedged(Controller[Settings]):
    """A controller whose reconcile of ``stuck`` waits until released."""

    component = "wedged"

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.unblock = asyncio.Event()
        self.queue: WorkQueue[str] = WorkQueue(self.reconcile, name="wedged", workers=1)

    async def reconcile(self, key: str) -> None:
        await self.unblock.wait()


async def get(port: int, path: str) -> tuple[int, str]:
    timeout = aiohttp.ClientTimeout(total=10)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.get(f"http://127.0.0.1:{port}{path}") as response,
    ):
        return response.status, await response.text()


async def until_status(port: int, path: str, status: int) -> str:
    """The body once ``path`` answers ``status`` (a deadline, never a fixed sleep)."""
    async with asyncio.timeout(10):
        while True:
            got, body = await get(port, path)
            if got == status:
                return body
            await asyncio.sleep(0.05)


@pytest.fixture
async def wedged() -> AsyncIterator[Wedged]:
    controller = Wedged(Settings(metrics_bind_address="127.0.0.1:0", stuck_reconcile_after=0.3))
    await controller.server.start()
    controller.queue.start()
    try:
        yield controller
    finally:
        controller.unblock.set()
        await controller.queue.stop()
        await controller.server.stop()


async def test_a_wedged_reconcile_fails_liveness_until_it_ends(wedged: Wedged) -> None:
    port = wedged.server.port
    assert port
    assert await get(port, "/healthz") == (200, "ok")
    wedged.queue.add("ns/stuck")
    body = await until_status(port, "/healthz", 500)
    # Which check failed, never why (the key it is stuck on is logged, not served).
    assert "[-]reconcile failed: reason withheld" in body
    assert "ns/stuck" not in body
    assert "[+]leaderElection ok" in body
    wedged.unblock.set()
    assert await until_status(port, "/healthz", 200) == "ok"


async def test_readiness_waits_for_the_start(wedged: Wedged) -> None:
    port = wedged.server.port
    assert port
    status, body = await get(port, "/readyz?verbose")
    assert status == 500
    assert "[-]started failed: reason withheld" in body
    wedged._started = True  # what ``start`` sets once the stores are filled
    status, body = await get(port, "/readyz?verbose")
    assert (status, body.splitlines()[-1]) == (200, "readyz check passed")


async def test_metrics_are_the_components_own_without_created_series() -> None:
    own = registry()
    Counter("demo_total", "A counter of this component", ["result"], registry=own).labels(
        "ok"
    ).inc()
    server = Server(Settings(metrics_bind_address="127.0.0.1:0"), Endpoints([own]))
    await server.start()
    try:
        assert server.port
        status, body = await get(server.port, "/metrics")
    finally:
        await server.stop()
    assert status == 200
    assert 'demo_total{result="ok"} 1.0' in body
    assert "_created" not in body
    assert "workqueue_depth" not in body  # only the registries it was given


async def test_a_taken_address_is_a_settings_error_naming_it() -> None:
    first = Server(Settings(metrics_bind_address="127.0.0.1:0"), Endpoints([]))
    await first.start()
    try:
        taken = f"127.0.0.1:{first.port}"
        second = Server(Settings(metrics_bind_address=taken), Endpoints([]))
        with pytest.raises(SettingsError, match=f"--metrics-bind-address {taken}"):
            await second.start()
    finally:
        await first.stop()


@pytest.mark.parametrize("bad", ["9090", "host:", "host:port", ":70000"])
def test_a_bind_address_that_is_not_host_port_is_refused(bad: str) -> None:
    with pytest.raises(SettingsError, match="--metrics-bind-address"):
        Settings.load(environ={"KOPF_DRA_METRICS_BIND_ADDRESS": bad})


def test_review_answers_are_cached_but_bounded() -> None:
    now = [0.0]
    cache = _TTLCache(lambda: now[0])
    for i in range(CACHE_SIZE + 10):
        cache.put(f"token-{i}", i)
    assert cache.get("token-0") is None  # the oldest went first
    assert cache.get(f"token-{CACHE_SIZE + 9}") == CACHE_SIZE + 9
    now[0] = 11.0
    assert cache.get(f"token-{CACHE_SIZE + 9}") is None  # answers expire after ten seconds


class Reviews:
    """The API server's side of the reviews: each POST takes the next outcome."""

    def __init__(self, *outcomes: BaseException | dict[str, Any]) -> None:
        self.outcomes = list(outcomes)
        self.posts: list[str] = []

    async def call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        self.posts.append(path.rsplit("/", 1)[-1])
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def _auth(reviews: Reviews) -> tuple[DelegatedAuth, list[float]]:
    slept: list[float] = []

    async def api() -> Any:
        return reviews

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    return DelegatedAuth(api, sleep=sleep), slept


ALICE = {"status": {"authenticated": True, "user": {"username": "alice"}}}
DENIED = {"status": {"allowed": False}}


def _failure(status: int, reason: str, details: dict[str, Any] | None = None) -> ApiError:
    return ApiError(status, reason, "", {"reason": reason, "details": details or {}})


async def test_a_review_that_failed_on_the_way_is_sent_again_with_kubes_backoff() -> None:
    reviews = Reviews(
        _failure(500, "InternalError"),
        ConnectionResetError("reset by peer"),
        ALICE,
        _failure(429, "TooManyRequests"),
        _failure(409, "Conflict", {"retryAfterSeconds": 1}),
        DENIED,
    )
    auth, slept = _auth(reviews)
    user = await auth.user("token")
    assert user == {"username": "alice"}
    assert not await auth.allowed(user, "/metrics", "get")
    assert reviews.posts == ["tokenreviews"] * 3 + ["subjectaccessreviews"] * 3
    # 0.5 s, then 1.5 times longer, each up to 20% more.
    assert all(d <= s <= d * 1.2 for s, d in zip(slept, [0.5, 0.75, 0.5, 0.75], strict=True))


async def test_a_review_refused_for_good_or_failing_five_times_is_not_sent_again() -> None:
    forbidden = _failure(403, "Forbidden")
    auth, slept = _auth(Reviews(forbidden))
    with pytest.raises(ApiError) as raised:
        await auth.user("token")
    assert raised.value is forbidden
    assert slept == []
    reviews = Reviews(*[_failure(504, "Timeout") for _ in range(6)])
    auth, slept = _auth(reviews)
    with pytest.raises(ApiError, match="504"):
        await auth.user("token")
    assert len(reviews.posts) == 5
    assert len(slept) == 4
