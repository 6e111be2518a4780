"""A level-triggered work queue, as controller-runtime has and kopf does not.

kopf event handlers only say "something about this key changed"; the reconcile function then
reads the current state and decides. The queue de-duplicates keys, never runs one key twice at
the same time, retries failures with per-key exponential backoff, and lets a reconcile ask to be
called again later (a requeue with a delay). Nothing is lost: a key added while it is being
processed is processed again afterwards.

With ``lane_of``, keys wait in lanes (a tenant's namespace, say) served in turn: a lane with a
thousand keys gets one turn per round like a lane with one, so no tenant's backlog holds
another's key for long.

``add_backoff`` is kube-scheduler's backoff queue: the key is ready when its backoff ends, and
with ``backoff_pops`` (SchedulerPopFromBackoffQ) taken earlier when no ready key waits, the
earliest-ending first. A key that waits out a backoff never goes before one that is ready.
``add_first`` puts a key at the head of its lane, before the keys ready now (the scheduler
offers freed devices to the pod that waited longest this way).
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

import structlog

from operators.aio import wait_at_most
from operators.runtime import metrics
from operators.runtime.clock import SYSTEM_CLOCK, Clock
from operators.runtime.errors import Requeue, is_expected, retry_delay

K = TypeVar("K", bound=Hashable)

log = structlog.get_logger(__name__)


class _Lanes(Generic[K]):
    """Ready keys by lane; ``pop`` takes the head of the lane whose turn it is."""

    def __init__(self, lane_of: Callable[[K], Hashable]) -> None:
        self.lane_of = lane_of
        self._lanes: dict[Hashable, collections.deque[K]] = {}
        self._turns: collections.deque[Hashable] = collections.deque()
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def put(self, key: K, *, first: bool = False) -> None:
        """``key`` at the back of its lane, or at its head (``first``); the lane keeps its
        turn."""
        lane = self.lane_of(key)
        waiting = self._lanes.get(lane)
        if waiting is None:
            waiting = self._lanes[lane] = collections.deque()
            self._turns.append(lane)
        if first:
            waiting.appendleft(key)
        else:
            waiting.append(key)
        self._size += 1

    def to_the_head(self, key: K) -> None:
        """``key``, ready already, moves to the head of its lane."""
        waiting = self._lanes[self.lane_of(key)]
        waiting.remove(key)
        waiting.appendleft(key)

    def pop(self) -> K:
        lane = self._turns.popleft()
        waiting = self._lanes[lane]
        key = waiting.popleft()
        if waiting:
            self._turns.append(lane)  # its next key waits for every other lane's turn
        else:
            del self._lanes[lane]
        self._size -= 1
        return key

    def to_the_back(self, key: K) -> None:
        """``key``'s lane takes its next turn after every lane waiting now."""
        lane = self.lane_of(key)
        if lane in self._lanes:
            self._turns.remove(lane)
            self._turns.append(lane)

    def others_waiting(self, key: K) -> bool:
        """Whether keys of a lane other than ``key``'s wait (read from any thread)."""
        lanes = len(self._lanes)
        return lanes > 1 or (lanes == 1 and self.lane_of(key) not in self._lanes)


def _one_lane(_: Hashable) -> None:
    return None


class WorkQueue(Generic[K]):
    """Keys to reconcile, processed by ``workers`` tasks, at most one task per key."""

    def __init__(
        self,
        reconcile: Callable[[K], Awaitable[None]],
        *,
        name: str,
        workers: int = 4,
        base_delay: float = 0.2,
        max_delay: float = 60.0,
        clock: Clock = SYSTEM_CLOCK,
        lane_of: Callable[[K], Hashable] = _one_lane,
        backoff_pops: bool = False,
    ) -> None:
        self._reconcile = reconcile
        self.name = name
        self._workers = workers
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._clock = clock.monotonic
        self._ready: _Lanes[K] = _Lanes(lane_of)
        # One release per key put in _ready (and, with backoff_pops, per key backing off).
        self._available = asyncio.Semaphore(0)
        self._queued: set[K] = set()  # in _ready or backing off, not yet taken
        self._active: set[K] = set()  # being reconciled now
        self._dirty: set[K] = set()  # added while active: run again afterwards
        self._dirty_first: set[K] = set()  # ... at the head of its lane (``add_first``)
        self._failures: dict[K, int] = {}
        self._yielded: set[K] = set()  # keys whose attempt gave way, to be resumed
        self._delayed: list[tuple[float, int, K]] = []
        # The backoff queue (``add_backoff``): (ends, entry, key), and the live entry per key
        # (an entry of a key since made ready, or backing off anew, is skipped).
        self._backoff: list[tuple[float, int, K]] = []
        self._backing_off: dict[K, int] = {}
        self._backoff_pops = backoff_pops
        self._counter = itertools.count()
        self._wakeup = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._added_at: dict[K, float] = {}  # when a waiting key was put in _ready
        self._started_at: dict[K, float] = {}  # when an active key's reconcile began
        self.processed = 0
        self._depth = metrics.QUEUE_DEPTH.labels(name)
        self._adds = metrics.QUEUE_ADDS.labels(name)
        self._retries = metrics.QUEUE_RETRIES.labels(name)
        self._wait = metrics.QUEUE_WAIT.labels(name)
        self._work = metrics.QUEUE_WORK.labels(name)

    def add(self, key: K) -> None:
        """Reconcile ``key`` soon; a no-op when it is already waiting (one backing off is
        ready now)."""
        self._put(key, first=False)

    def add_first(self, key: K) -> None:
        """Reconcile ``key`` before the keys of its lane that wait now: it goes to the head of
        its lane, out of a backoff or ahead of the keys ready; one being reconciled goes there
        once it is done."""
        self._put(key, first=True)

    def _put(self, key: K, *, first: bool) -> None:
        if key in self._active:
            self._dirty.add(key)
            if first:
                self._dirty_first.add(key)
        elif key in self._backing_off:
            del self._backing_off[key]
            self._ready.put(key, first=first)
            if not self._backoff_pops:
                self._available.release()  # not counted while it backed off
            self._depth.set(len(self._ready))
        elif key not in self._queued:
            self._queued.add(key)
            self._ready.put(key, first=first)
            self._added_at[key] = self._clock()
            self._available.release()
            self._adds.inc()
            self._depth.set(len(self._ready))
        elif first:
            self._ready.to_the_head(key)

    def add_after(self, key: K, delay: float) -> None:
        """Reconcile ``key`` after ``delay`` seconds (earlier if someone adds it)."""
        if delay <= 0:
            self.add(key)
            return
        heapq.heappush(self._delayed, (self._clock() + delay, next(self._counter), key))
        self._wakeup.set()

    def add_backoff(self, key: K, delay: float) -> None:
        """Reconcile ``key`` once ``delay`` seconds of backoff are over, or before when no
        other key is ready (``backoff_pops``); a no-op when it already waits."""
        if delay <= 0:
            self.add(key)
            return
        if key in self._active:
            self._dirty.add(key)
            return
        if key in self._queued:
            return
        entry = next(self._counter)
        heapq.heappush(self._backoff, (self._clock() + delay, entry, key))
        self._backing_off[key] = entry
        self._queued.add(key)
        self._added_at[key] = self._clock()
        self._adds.inc()
        if self._backoff_pops:
            self._available.release()
        self._wakeup.set()

    def _pop_backoff(self) -> K:
        """The key whose backoff ends first (taken early: nothing else is ready)."""
        while True:
            _, entry, key = heapq.heappop(self._backoff)
            if self._backing_off.get(key) == entry:
                del self._backing_off[key]
                return key

    def backoff(self, key: K) -> float:
        failures = self._failures.get(key, 0)
        return float(min(self._max_delay, self._base_delay * (2**failures)))

    def longest_running(self) -> tuple[K, float] | None:
        """The key whose reconcile has run longest, and for how many seconds (liveness)."""
        if not self._started_at:
            return None
        key = min(self._started_at, key=self._started_at.__getitem__)
        return key, self._clock() - self._started_at[key]

    def waiting(self) -> tuple[int, int]:
        """Keys waiting for a worker, and keys waiting for their retry time or backoff."""
        backing_off = len(self._backing_off)
        return len(self._queued) - backing_off, len(self._delayed) + backing_off

    def others_waiting(self, key: K) -> bool:
        """Keys of other lanes wait for a worker: a long reconcile of ``key`` may yield."""
        return self._ready.others_waiting(key)

    def yield_turn(self, key: K) -> None:
        """``key`` gave way to other lanes: queue it again, its lane behind theirs. Its
        attempt is not over, so it keeps its backoff: a key that always yields and then fails
        must not be retried at the base delay forever."""
        self.add(key)
        self._ready.to_the_back(key)
        self._yielded.add(key)

    def forget(self, key: K) -> None:
        """Reset the backoff of a key after a success."""
        self._failures.pop(key, None)

    def __len__(self) -> int:
        return len(self._queued) + len(self._delayed) + len(self._active)

    async def _delay_loop(self) -> None:
        while True:
            now = self._clock()
            while self._delayed and self._delayed[0][0] <= now:
                _, _, key = heapq.heappop(self._delayed)
                self.add(key)
            while self._backoff and self._backoff[0][0] <= now:
                _, entry, key = heapq.heappop(self._backoff)
                if self._backing_off.get(key) == entry:
                    self.add(key)  # its backoff is over: ready
            ends = [h[0][0] for h in (self._delayed, self._backoff) if h]
            timeout = min(ends) - now if ends else None
            self._wakeup.clear()
            await wait_at_most(self._wakeup.wait(), timeout)

    async def _worker(self) -> None:
        while True:
            await self._available.acquire()
            key = self._ready.pop() if len(self._ready) else self._pop_backoff()
            self._queued.discard(key)
            self._active.add(key)
            started = self._clock()
            self._started_at[key] = started
            self._wait.observe(started - self._added_at.pop(key, started))
            self._depth.set(len(self._ready))
            try:
                await self._reconcile(key)
            except asyncio.CancelledError:
                raise
            except Requeue as r:
                self.forget(key)
                self.add_after(key, r.delay)
            except Exception as e:
                backoff = self.backoff(key)
                delay = retry_delay(e, backoff)
                if delay == backoff:
                    self._failures[key] = self._failures.get(key, 0) + 1
                log.warning(
                    "reconcile failed" + (", will retry" if delay is not None else ""),
                    queue=self.name,
                    key=str(key),
                    error=str(e),
                    error_type=type(e).__name__,
                    retry_in_s=None if delay is None else round(delay, 2),
                    exc_info=not is_expected(e),
                )
                if delay is not None:
                    self._retries.inc()
                    self.add_after(key, delay)
            else:
                if key not in self._yielded:
                    self.forget(key)
            finally:
                self._yielded.discard(key)
                self.processed += 1
                self._work.observe(self._clock() - self._started_at.pop(key, started))
                self._active.discard(key)
                if key in self._dirty:
                    self._dirty.discard(key)
                    first = key in self._dirty_first
                    self._dirty_first.discard(key)
                    self._put(key, first=first)

    def start(self) -> None:
        if self._tasks:
            return
        self._tasks.append(asyncio.create_task(self._delay_loop(), name=f"{self.name}-delays"))
        for i in range(self._workers):
            self._tasks.append(asyncio.create_task(self._worker(), name=f"{self.name}-{i}"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception as e:  # a cleanup that raises would be retried by kopf a minute later
                log.error("work queue task failed", queue=self.name, error=repr(e))
        self._tasks.clear()
