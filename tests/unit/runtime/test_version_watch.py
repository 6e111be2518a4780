"""A component follows its cluster's version: the watch reads /version and stops the component
when it changes (a control plane upgraded under it), and waits out an API server that is
being replaced."""

from __future__ import annotations

import asyncio

from operators.api.features import KubernetesVersion
from operators.runtime.app import watch_version
from operators.settings import Settings

V136, V137 = KubernetesVersion.of("1.36"), KubernetesVersion.of("1.37")


async def test_a_new_version_stops_the_component_and_is_returned() -> None:
    answers: list[KubernetesVersion | Exception] = [
        V136,
        ConnectionError("the API server is being replaced"),
        V137,
    ]
    read_from: list[str | None] = []

    async def read(kubeconfig: str | None) -> KubernetesVersion:
        read_from.append(kubeconfig)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    settings = Settings(kubeconfig="kc", version_check_interval=0.01).with_version(V136)
    stop = asyncio.Event()
    assert await asyncio.wait_for(watch_version(settings, stop, read), 10) == V137
    assert stop.is_set()
    assert read_from == ["kc", "kc", "kc"], "the same version, an error waited out, the new one"


async def test_a_stop_ends_the_watch_and_zero_never_reads() -> None:
    async def read(_: str | None) -> KubernetesVersion:
        raise AssertionError("not read")

    stop = asyncio.Event()
    stop.set()
    settings = Settings(version_check_interval=30).with_version(V136)
    assert await asyncio.wait_for(watch_version(settings, stop, read), 10) is None
    never = Settings(version_check_interval=0).with_version(V136)
    assert await asyncio.wait_for(watch_version(never, asyncio.Event(), read), 10) is None
