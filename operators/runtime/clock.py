"""The clock every controller is given: wall time for timestamps, monotonic time for intervals.

Always passed in, never read from the environment: leases, backoffs and binding timeouts are
then testable with a fake clock, and an interval is never measured with a wall clock that an
NTP step can move.
"""

from __future__ import annotations

import datetime
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime.datetime:
        """Wall time, UTC: what goes into timestamps the API server stores."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that only moves forward (the event loop's clock)."""
        ...


class SystemClock:
    def now(self) -> datetime.datetime:
        return datetime.datetime.now(datetime.UTC)

    def monotonic(self) -> float:
        # asyncio's loop.time() is time.monotonic(): deadlines computed here and timeouts
        # measured by the loop agree.
        return time.monotonic()


SYSTEM_CLOCK = SystemClock()
