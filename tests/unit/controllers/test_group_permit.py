"""Permit for pod groups (GangScheduling's): wait until minCount pods of the group are placed,
or give up after --gang-permit-timeout."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, cast

from operators.api.core import Pod
from operators.api.keys import ObjectKey
from operators.controllers.scheduler.permit import Permit, Scheduler
from operators.runtime.clock import SYSTEM_CLOCK

GROUP = ObjectKey("ns", "job")


def member(name: str, node: str | None = None) -> Pod:
    return Pod.load(
        {
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"schedulingGroup": {"podGroupName": "job"}, "nodeName": node},
        }
    )


@dataclasses.dataclass
class Settings:
    gang_permit_timeout: float


class Cache:
    def __init__(self) -> None:
        self.pods: list[Pod] = []

    def group_pods(self, key: ObjectKey) -> list[Pod]:
        return list(self.pods) if key == GROUP else []


@dataclasses.dataclass
class Queue:
    bound_unseen: set[ObjectKey] = dataclasses.field(default_factory=set)


def scheduler(timeout: float, binding: set[ObjectKey]) -> tuple[Permit, Cache]:
    cache = Cache()
    stub: Any = type(
        "Stub",
        (),
        {
            "cache": cache,
            "binder": binding,
            "queue": Queue(),
            "settings": Settings(timeout),
            "clock": SYSTEM_CLOCK,
        },
    )()
    return Permit(cast(Scheduler, stub)), cache


async def test_permit_allows_at_once_when_min_count_are_placed() -> None:
    permit, cache = scheduler(300.0, {ObjectKey("ns", "b")})
    cache.pods = [member("a", node="n1"), member("b")]
    assert permit.placed(GROUP) == 2
    assert await permit.wait(GROUP, 2)


async def test_permit_waits_for_the_next_pod_of_the_group() -> None:
    permit, cache = scheduler(300.0, {ObjectKey("ns", "b")})
    cache.pods = [member("b")]
    waiting = asyncio.ensure_future(permit.wait(GROUP, 2))
    await asyncio.sleep(0)  # one turn of the loop: it runs until it waits on the group
    assert not waiting.done()
    cache.pods.append(member("c", node="n2"))  # bound: placed
    permit.changed(GROUP)
    assert await asyncio.wait_for(waiting, 5)


async def test_permit_gives_up_after_the_timeout_with_upstreams_message() -> None:
    permit, cache = scheduler(0.01, {ObjectKey("ns", "b")})
    cache.pods = [member("b")]
    assert not await permit.wait(GROUP, 2)
    default, _ = scheduler(300.0, set())
    assert default.timeout_message() == (
        "0/1 nodes are available: 1 rejected due to timeout after waiting 5m0s at plugin "
        "GangScheduling."
    )
