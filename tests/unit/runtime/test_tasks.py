"""A controller's task owner: every task it spawned has ended when ``cancel_all`` returns."""

from __future__ import annotations

import asyncio

from operators.runtime.tasks import TaskOwner


async def test_cancel_all_waits_for_each_tasks_own_cleanup() -> None:
    owner = TaskOwner("ctl")
    cleaned: list[str] = []
    started = asyncio.Event()

    async def work(name: str) -> None:
        try:
            started.set()
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0)  # cleanup that itself awaits
            cleaned.append(name)

    tasks = [owner.spawn(work(n), name=n) for n in ("a", "b")]
    done = owner.spawn(asyncio.sleep(0), name="quick")
    await done
    await asyncio.wait_for(started.wait(), timeout=10)
    assert sorted(t.get_name() for t in owner.running()) == ["ctl-a", "ctl-b"]
    await owner.cancel_all()
    assert all(t.cancelled() for t in tasks)
    assert sorted(cleaned) == ["a", "b"]
    assert len(owner) == 0
