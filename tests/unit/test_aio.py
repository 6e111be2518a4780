"""wait_at_most: a loop around it stops when cancelled, even as its event fires."""

from __future__ import annotations

import asyncio

from operators.aio import wait_at_most


async def _stops_when_cancelled_as_the_event_fires() -> bool:
    event = asyncio.Event()

    async def loop() -> None:
        while True:
            event.clear()
            await wait_at_most(event.wait(), 10)

    task = asyncio.create_task(loop())
    for _ in range(2):
        await asyncio.sleep(0)
    event.set()
    await asyncio.sleep(0)  # the wait has completed, its waiter not yet resumed
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=1)
    if not done:
        task.cancel()  # asyncio.wait_for's behaviour on 3.11: the first cancel was swallowed
    return bool(done) and task.cancelled()


async def test_a_cancellation_arriving_as_the_event_fires_is_not_swallowed() -> None:
    assert await _stops_when_cancelled_as_the_event_fires()


async def test_times_out_and_completes() -> None:
    assert await wait_at_most(asyncio.sleep(0), 1) is True
    assert await wait_at_most(asyncio.Event().wait(), 0.01) is False
