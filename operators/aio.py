"""asyncio helpers that the standard library gets subtly wrong on Python 3.11."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable


async def wait_at_most(awaitable: Awaitable[object], seconds: float | None) -> bool:
    """Await for at most ``seconds`` (None: no limit); False when the time ran out.

    Not ``asyncio.wait_for``: on Python 3.11 it returns normally when a cancellation arrives
    just as the awaited thing completes, so a ``while True`` loop around it never stops. That
    hung the scheduler's shutdown now and then (its work queue's delay loop).
    """
    try:
        async with asyncio.timeout(seconds):
            await awaitable
    except TimeoutError:
        return False
    return True


async def cancel_and_wait(task: asyncio.Task[None] | None) -> None:
    """Cancel a background task and wait until it has ended (None: nothing to stop)."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
