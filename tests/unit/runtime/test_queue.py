"""The work queue: de-duplication, one task per key, lanes served in turn, retries."""

from __future__ import annotations

import asyncio

import pytest

from operators.runtime.errors import NotLeaderError, PermanentError, Requeue, TemporaryError
from operators.runtime.queue import WorkQueue


async def run_until(queue: WorkQueue[str], done: asyncio.Event) -> None:
    queue.start()
    try:
        async with asyncio.timeout(10):
            await done.wait()
    finally:
        await queue.stop()


async def test_lanes_take_turns_whatever_their_backlog() -> None:
    seen: list[str] = []
    done = asyncio.Event()

    async def reconcile(key: str) -> None:
        seen.append(key)
        if len(seen) == 6:
            done.set()

    queue: WorkQueue[str] = WorkQueue(
        reconcile, name="t", workers=1, lane_of=lambda k: k.split("/")[0]
    )
    for i in range(4):
        queue.add(f"busy/{i}")
    queue.add("quiet/a")
    queue.add("other/b")
    await run_until(queue, done)
    assert seen == ["busy/0", "quiet/a", "other/b", "busy/1", "busy/2", "busy/3"]


async def test_others_waiting_sees_only_other_lanes() -> None:
    async def reconcile(key: str) -> None:
        return None

    queue: WorkQueue[str] = WorkQueue(
        reconcile, name="t", workers=1, lane_of=lambda k: k.split("/")[0]
    )
    assert not queue.others_waiting("a/1")
    queue.add("a/2")
    assert not queue.others_waiting("a/1")
    queue.add("b/1")
    assert queue.others_waiting("a/1")
    assert queue.others_waiting("b/9")  # a/2 waits


async def test_a_key_is_deduplicated_and_run_again_if_added_while_running() -> None:
    runs: list[str] = []
    started = asyncio.Event()
    release = asyncio.Event()
    done = asyncio.Event()

    async def reconcile(key: str) -> None:
        runs.append(key)
        if len(runs) == 1:
            started.set()
            await release.wait()
        else:
            done.set()

    queue: WorkQueue[str] = WorkQueue(reconcile, name="t", workers=2)
    queue.add("k")
    queue.add("k")
    queue.start()
    try:
        async with asyncio.timeout(10):
            await started.wait()
            queue.add("k")  # while running: once more afterwards, never concurrently
            queue.add("k")
            release.set()
            await done.wait()
    finally:
        await queue.stop()
    assert runs == ["k", "k"]


async def test_requeue_and_permanent_errors() -> None:
    runs: list[str] = []
    done = asyncio.Event()

    async def reconcile(key: str) -> None:
        runs.append(key)
        if key == "again" and runs.count("again") == 1:
            raise Requeue(0.01, "poll")
        if key == "bad":
            raise PermanentError("never retried")
        if runs.count("again") == 2:
            done.set()

    queue: WorkQueue[str] = WorkQueue(reconcile, name="t", workers=1)
    queue.add("bad")
    queue.add("again")
    await run_until(queue, done)
    assert runs.count("bad") == 1
    assert queue.backoff("bad") == queue.backoff("never-failed")  # no backoff for permanent


async def test_a_key_that_yields_goes_behind_the_lanes_waiting_now() -> None:
    seen: list[str] = []
    done = asyncio.Event()
    queue: WorkQueue[str]

    async def reconcile(key: str) -> None:
        seen.append(key)
        if key == "busy/0" and seen.count(key) == 1:
            queue.add("quiet/a")  # arrives while busy/0 runs, behind busy's next turn
            queue.yield_turn(key)
        if len(seen) == 4:
            done.set()

    queue = WorkQueue(reconcile, name="t", workers=1, lane_of=lambda k: k.split("/")[0])
    queue.add("busy/0")
    queue.add("busy/1")
    await run_until(queue, done)
    assert seen == ["busy/0", "quiet/a", "busy/1", "busy/0"]


async def test_a_key_keeps_its_backoff_across_the_turns_it_yields() -> None:
    """Fail, yield, fail: the second retry waits twice as long, as two failures in a row."""
    runs: list[str] = []
    done = asyncio.Event()
    queue: WorkQueue[str]

    async def reconcile(key: str) -> None:
        runs.append(key)
        if len(runs) == 2:
            queue.yield_turn(key)
            return
        if len(runs) == 3:
            done.set()
        raise TemporaryError("still no room")

    queue = WorkQueue(reconcile, name="t", workers=1, base_delay=0.01)
    queue.add("k")
    await run_until(queue, done)
    assert queue.backoff("k") == pytest.approx(0.04)  # two failures, kept across the yield


async def test_a_key_the_fence_stopped_is_retried() -> None:
    """The fence refuses writes while the lease's renewal is late, and the renewal may still
    succeed: then no deactivate re-enqueues everything, and a dropped key would wait for its
    object's next change."""
    runs: list[str] = []
    done = asyncio.Event()

    async def reconcile(key: str) -> None:
        runs.append(key)
        if len(runs) == 1:
            raise NotLeaderError("renewal late")
        done.set()

    queue: WorkQueue[str] = WorkQueue(reconcile, name="t", workers=1, base_delay=0.01)
    queue.add("k")
    await run_until(queue, done)
    assert runs == ["k", "k"]


async def test_keys_backing_off_go_after_ready_ones_earliest_end_first() -> None:
    """SchedulerPopFromBackoffQ: with nothing else ready, a key is taken before its backoff
    ends, the one whose backoff ends first; a ready key always goes first."""
    seen: list[str] = []
    done = asyncio.Event()

    async def reconcile(key: str) -> None:
        seen.append(key)
        if len(seen) == 3:
            done.set()

    queue: WorkQueue[str] = WorkQueue(reconcile, name="t", workers=1, backoff_pops=True)
    queue.add_backoff("late", 200)
    queue.add_backoff("early", 100)
    queue.add("ready")
    assert queue.waiting() == (1, 2)
    await run_until(queue, done)
    assert seen == ["ready", "early", "late"]


async def test_without_pops_a_key_waits_out_its_backoff_unless_added() -> None:
    seen: list[str] = []
    second = asyncio.Event()
    done = asyncio.Event()

    async def reconcile(key: str) -> None:
        seen.append(key)
        if key == "first":
            queue.add("second")  # the worker is free again after this one: still not "b"
        elif key == "second":
            second.set()
        else:
            done.set()

    queue: WorkQueue[str] = WorkQueue(reconcile, name="t", workers=1)
    queue.add_backoff("b", 100)
    queue.add_backoff("b", 0.001)  # already waiting: its backoff is the first one's
    queue.add("first")
    queue.start()
    try:
        async with asyncio.timeout(10):
            await second.wait()
            assert seen == ["first", "second"]
            assert queue.waiting() == (0, 1)
            queue.add("b")  # something made room: ready now
            await done.wait()
    finally:
        await queue.stop()
    assert seen == ["first", "second", "b"]


async def test_a_key_is_ready_when_its_backoff_ends() -> None:
    done = asyncio.Event()

    async def reconcile(key: str) -> None:
        done.set()

    queue: WorkQueue[str] = WorkQueue(reconcile, name="t", workers=1)
    queue.add_backoff("b", 0.05)
    await run_until(queue, done)
    assert queue.waiting() == (0, 0)


async def test_a_key_backing_off_that_is_added_goes_before_the_others() -> None:
    seen: list[str] = []
    done = asyncio.Event()

    async def reconcile(key: str) -> None:
        seen.append(key)
        if len(seen) == 2:
            done.set()

    queue: WorkQueue[str] = WorkQueue(reconcile, name="t", workers=1, backoff_pops=True)
    queue.add_backoff("a", 100)
    queue.add_backoff("b", 200)
    queue.add("b")
    await run_until(queue, done)
    assert seen == ["b", "a"]


async def test_add_first_goes_to_the_head_of_its_lane_from_wherever_it_waits() -> None:
    """Ahead of the keys ready in its lane, whether it was new, ready behind them or backing
    off; the lanes keep their turns."""
    seen: list[str] = []
    done = asyncio.Event()

    async def reconcile(key: str) -> None:
        seen.append(key)
        if len(seen) == 6:
            done.set()

    queue: WorkQueue[str] = WorkQueue(
        reconcile, name="t", workers=1, lane_of=lambda k: k.split("/")[0], backoff_pops=True
    )
    for key in ("a/1", "a/2", "a/3", "b/1"):
        queue.add(key)
    queue.add_backoff("a/backing", 100)
    queue.add_first("a/3")  # ready, behind a/1 and a/2
    queue.add_first("a/backing")  # out of its backoff, ahead of a/3 now
    queue.add_first("b/new")
    assert queue.waiting() == (6, 0)
    await run_until(queue, done)
    assert seen == ["a/backing", "b/new", "a/3", "b/1", "a/1", "a/2"]


async def test_a_key_added_first_while_running_runs_again_at_the_head() -> None:
    seen: list[str] = []
    done = asyncio.Event()

    async def reconcile(key: str) -> None:
        seen.append(key)
        if len(seen) == 1:
            queue.add("other")
            queue.add_first("k")  # running: again afterwards, before "other"
        elif len(seen) == 3:
            done.set()

    queue: WorkQueue[str] = WorkQueue(reconcile, name="t", workers=1)
    queue.add("k")
    await run_until(queue, done)
    assert seen == ["k", "k", "other"]
