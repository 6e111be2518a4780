"""What ``Allocator.allocate`` answers for one node: success with results, reasons, or an error.

Kept apart from the search so that the explanations (``explain.py``) and the allocator can both
use these types without importing each other.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from operators.allocator.errors import AllocatorError
from operators.api.resource import AllocationResult


class Status(enum.Enum):
    SUCCESS = "success"
    UNSATISFIABLE = "unsatisfiable"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class Reason:
    """Why one request (or claim, or the node) could not be satisfied, short and structured."""

    claim: str
    request: str | None
    message: str
    counts: Mapping[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        where = f"claim {self.claim}" + (f", request {self.request}" if self.request else "")
        return f"{where}: {self.message}"


@dataclass(frozen=True, slots=True)
class Stats:
    """Search effort of one call (upstream's NumAllocateOneInvocations)."""

    steps: int = 0


@dataclass(frozen=True, slots=True)
class Outcome:
    """The answer for one node: results per claim, or reasons, or a node error.

    Reasons are computed on first access: a scheduler filtering many nodes pays for an
    explanation only when it reports one.
    """

    status: Status
    results: tuple[AllocationResult, ...] = ()
    error: AllocatorError | None = None  # a failure of this node (NodeAllocationError)
    stats: Stats = Stats()
    explain: Callable[[], Sequence[Reason]] | None = field(default=None, repr=False, compare=False)
    _reasons: list[tuple[Reason, ...]] = field(default_factory=list, repr=False, compare=False)

    @property
    def fits(self) -> bool:
        return self.status is Status.SUCCESS

    @property
    def reasons(self) -> tuple[Reason, ...]:
        """Why it does not fit (empty unless unsatisfiable)."""
        if not self._reasons:
            self._reasons.append(tuple(self.explain()) if self.explain is not None else ())
        return self._reasons[0]


__all__ = ["Outcome", "Reason", "Stats", "Status"]
