"""The informer's recovery paths, scripted: an expired watch lists again and reports what went,
a broken watch is retried from where it was, a failing feed stops nobody."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

from operators.kube.api import ApiError, KubeAPI
from operators.runtime.informer import Informer


def claim(name: str, version: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"u-{name}",
            "resourceVersion": str(version),
        }
    }


class ScriptedAPI:
    """LIST answers and watch streams, one per call, in order."""

    def __init__(self, lists: list[list[dict[str, Any]]], watches: list[list[Any]]) -> None:
        self.lists = lists
        self.watches = watches
        self.watched_from: list[str | None] = []
        self.done = asyncio.Event()

    async def list(self, kind: str) -> dict[str, Any]:
        items = self.lists.pop(0)
        version = max((int(i["metadata"]["resourceVersion"]) for i in items), default=1)
        return {
            "apiVersion": "resource.k8s.io/v1",
            "metadata": {"resourceVersion": str(version + 1)},
            "items": items,
        }

    async def watch(
        self, kind: str, *, resource_version: str | None, timeout_seconds: int
    ) -> AsyncIterator[dict[str, Any]]:
        self.watched_from.append(resource_version)
        if not self.watches:
            self.done.set()
            await asyncio.Event().wait()  # quiet from now on
        for step in self.watches.pop(0):
            if isinstance(step, Exception):
                raise step
            yield step


async def run(api: ScriptedAPI, feed: Any) -> Informer:
    informer = Informer("ResourceClaim", feed)
    await informer.start(cast(KubeAPI, api))
    await asyncio.wait_for(api.done.wait(), 10)
    await informer.stop()
    return informer


async def test_an_expired_watch_lists_again_and_reports_what_went_meanwhile() -> None:
    seen: list[tuple[str, str]] = []
    api = ScriptedAPI(
        lists=[[claim("a", 5), claim("b", 6)], [claim("b", 6), claim("c", 9)]],
        watches=[
            [
                {"type": "MODIFIED", "object": claim("a", 7)},
                {"type": "ERROR", "object": {"code": 410}},
            ],
        ],
    )
    await run(api, lambda kw: seen.append((kw["type"], kw["body"]["metadata"]["name"])))
    assert seen == [
        ("ADDED", "a"),
        ("ADDED", "b"),
        ("MODIFIED", "a"),
        ("ADDED", "b"),
        ("ADDED", "c"),
        ("DELETED", "a"),
    ]
    assert api.watched_from == ["7", "10"]  # after the LIST, then after the second LIST


async def test_a_broken_watch_resumes_from_the_last_event_and_a_failing_feed_stops_nobody() -> None:
    seen: list[str] = []

    def feed(kw: Mapping[str, Any]) -> None:
        name = kw["body"]["metadata"]["name"]
        seen.append(name)
        if name == "bad":
            raise RuntimeError("a bug in one controller's feed")

    api = ScriptedAPI(
        lists=[[]],
        watches=[
            [{"type": "ADDED", "object": claim("bad", 3)}, OSError("connection reset")],
            [ApiError(500, "InternalError", "etcd away", {})],
            [
                {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "8"}}},
                {"type": "ADDED", "object": claim("good", 9)},
            ],
        ],
    )
    await run(api, feed)
    assert seen == ["bad", "good"]
    assert api.watched_from == ["2", "3", "3", "9"]
