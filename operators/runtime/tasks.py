"""The tasks a controller starts while it leads, owned in one place.

A controller's side tasks (binding cycles, a coalesced requeue, a wait on a remote operation)
must not outlive its leadership: a task still running after ``deactivate`` would write on
behalf of a replica that no longer leads, or requeue into a stopped queue. Each controller
spawns them through one ``TaskOwner`` and cancels them all, awaited, when it stops leading.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class TaskOwner:
    """Spawns named tasks and forgets each one when it ends; ``cancel_all`` ends the rest."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, work: Coroutine[Any, Any, T], name: str) -> asyncio.Task[T]:
        task = asyncio.create_task(work, name=f"{self.name}-{name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def __len__(self) -> int:
        return len(self._tasks)

    def running(self) -> frozenset[asyncio.Task[Any]]:
        return frozenset(self._tasks)

    async def cancel_all(self) -> None:
        """Cancel every task and wait until each has ended (their own cleanup included)."""
        while self._tasks:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._tasks.difference_update(tasks)
