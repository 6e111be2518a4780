"""The claim controllers' informer against the real API server: events in order, a watch the
server ends resumed without replay or loss, and a new LIST that reports what went meanwhile."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from kubernetes_asyncio import client

from operators.kube.api import KubeAPI
from operators.runtime.informer import Informer
from tests.integration.helpers import claim_body, create_namespace, eventually

pytestmark = pytest.mark.integration


async def test_events_arrive_once_across_watch_ends_and_a_new_list_reports_deletions(
    api: client.ApiClient,
) -> None:
    kube = KubeAPI(api)
    namespace = await create_namespace(api)
    seen: list[tuple[str, str]] = []

    def feed(kw: Mapping[str, Any]) -> None:
        meta = kw["body"]["metadata"]
        if meta.get("namespace") == namespace:
            seen.append((kw["type"], meta["name"]))

    informer = Informer("ResourceClaim", feed, timeout_seconds=1)
    await kube.create(claim_body("before", namespace))
    await informer.start(kube)
    try:
        assert seen == [("ADDED", "before")]  # the LIST, before start returns
        await kube.create(claim_body("first", namespace))
        await eventually(lambda: _has(seen, ("ADDED", "first")), what="the first claim's event")
        # The server ends each watch after a second: the informer resumes where it was.
        await eventually(lambda: _true(informer.watches >= 3), what="three watches")
        await kube.create(claim_body("second", namespace))
        await kube.delete("ResourceClaim", "first", namespace)
        await eventually(lambda: _has(seen, ("DELETED", "first")), what="the deletion")
        assert seen == [
            ("ADDED", "before"),
            ("ADDED", "first"),
            ("ADDED", "second"),
            ("DELETED", "first"),
        ]
    finally:
        await informer.stop()
    # Stopped, it misses a deletion; the next LIST reports it.
    await kube.delete("ResourceClaim", "second", namespace)
    seen.clear()
    await informer.start(kube)
    await informer.stop()
    assert sorted(seen) == [("ADDED", "before"), ("DELETED", "second")]


async def _has(seen: list[tuple[str, str]], event: tuple[str, str]) -> bool:
    return event in seen


async def _true(value: bool) -> bool:
    return value
