"""The time a Filter may take: kube-scheduler's filter timeout, and each tenant's turn.

The pure allocator reads no clock; it asks ``out_of_time`` between steps. ``AttemptBudget``
answers from the cycle's thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from operators.allocator.allocator import Allocator
from operators.allocator.outcome import Outcome
from operators.api.core import Node
from operators.api.keys import ObjectKey
from operators.api.resource import ResourceClaim
from operators.runtime.clock import Clock


class TimedAllocator(Allocator):
    """The allocator, summing the time its calls take (for its metric) and the CPU time of
    the thread they run in (beside it: what other threads took of the wall time)."""

    seconds = 0.0
    cpu_seconds = 0.0

    def allocate(self, node: Node, claims: Sequence[ResourceClaim]) -> Outcome:
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            return super().allocate(node, claims)
        finally:
            self.seconds += time.perf_counter() - started
            self.cpu_seconds += time.thread_time() - cpu


class AttemptBudget:
    """The time one pod's allocation attempt may take. Two limits: the pod's whole allocation
    time (``filter_timeout``, summed over attempts that yielded; 0: none), and its slice
    (``tenant_slice``) once pods of other namespaces are waiting (``others_waiting``)."""

    def __init__(
        self,
        clock: Clock,
        *,
        spent_before: float,
        filter_timeout: float,
        tenant_slice: float,
        others_waiting: Callable[[], bool],
    ) -> None:
        self.clock = clock
        self.before = spent_before
        self.filter_timeout = filter_timeout
        self.tenant_slice = tenant_slice
        self.others_waiting = others_waiting
        self.started = clock.monotonic()
        self.yielded = False
        #: The filter timeout stopped the allocation (counted in the scheduler's metrics),
        #: as opposed to a turn given to other tenants, which the next turn continues.
        self.timed_out = False

    def total(self) -> float:
        return self.before + self.clock.monotonic() - self.started

    def spent(self) -> bool:
        elapsed = self.clock.monotonic() - self.started
        if self.filter_timeout and self.before + elapsed >= self.filter_timeout:
            self.timed_out = True
            return True
        if elapsed >= self.tenant_slice and self.others_waiting():
            self.yielded = True
            return True
        return False


class RunningBudget:
    """The budget of the attempt whose Filter runs (one at a time; None between), which every
    allocator asks (``out_of_time``), not the one it was made for: a node known unsatisfiable
    from an earlier attempt is explained lazily, by that attempt's search, during the attempt
    that reports it (a spent budget there would leave the node unexplained for no reason)."""

    def __init__(
        self,
        clock: Clock,
        *,
        filter_timeout: float,
        tenant_slice: float,
        others_waiting: Callable[[ObjectKey], bool],
    ) -> None:
        self.clock = clock
        self.filter_timeout = filter_timeout
        self.tenant_slice = tenant_slice
        self.others_waiting = others_waiting
        self.running: AttemptBudget | None = None

    def start(self, key: ObjectKey, spent_before: float) -> AttemptBudget:
        """The attempt's time: the filter timeout over all its turns, and its turn while
        other tenants wait."""
        self.running = AttemptBudget(
            self.clock,
            spent_before=spent_before,
            filter_timeout=self.filter_timeout,
            tenant_slice=self.tenant_slice,
            others_waiting=lambda: self.others_waiting(key),
        )
        return self.running

    def out_of_time(self) -> bool:
        budget = self.running
        return budget is not None and budget.spent()
