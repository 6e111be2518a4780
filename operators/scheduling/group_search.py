"""A placement of a whole pod group searched over each pod's choices, where the greedy cycle
(kube-scheduler 1.37.2's: each pod's best node and first alternative, in turn) fails.

kubernetes#138765: a gang of two pods, each asking ``firstAvailable: [whole GPU, half GPU]``
of one GPU, fails upstream (the first pod takes the whole GPU, the second finds nothing) when
both halves would do. The same happens across nodes: the first pod's best node can allocate a
shared claim on devices the other pods cannot reach. The search backtracks over, for each pod
in the cycle's order, the alternatives of its prioritized lists (earlier ones first, as the
single pod's scoring prefers them) and then the nodes that fit it (best score first), until
``minCount`` pods are placed, time runs out, or every combination was tried.

No I/O here: the caller gives each pod's options (an async iterator: they come from filtering,
against the state the pods placed before it in the search leave) and how to take and undo one.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import TypeVar

from operators.api.resource import ResourceClaim
from operators.scheduling.groups import cannot_be_satisfied

#: At most this many ways to try one pod's prioritized lists (the first is the pod's own).
MAX_VARIANTS = 16
#: At most this many nodes tried per way (best first).
NODE_OPTIONS = 4

#: For each firstAvailable request of the pod's unallocated claims: (claim key, request name,
#: index of the first alternative the allocator may use). The pod's own order is all zeros.
Variant = tuple[tuple[str, str, int], ...]

M = TypeVar("M")
O = TypeVar("O")  # noqa: E741
P = TypeVar("P")


def variants(claims: Sequence[ResourceClaim], limit: int = MAX_VARIANTS) -> list[Variant]:
    """The ways to try a pod, most preferred first: fewer alternatives skipped first (as the
    single-pod scoring ranks earlier alternatives higher), then in claim and request order."""
    axes = [
        (claim.key, request.name or "", len(request.first_available))
        for claim in claims
        if not claim.is_allocated
        for request in claim.spec.devices.requests
        if request.first_available
    ]
    ranges = [range(n) for _, _, n in axes]
    combos = sorted(itertools.product(*ranges), key=lambda c: (sum(c), c))
    return [
        tuple((key, name, skip) for (key, name, _), skip in zip(axes, combo, strict=True))
        for combo in combos[:limit]
    ]


def restricted(claims: Sequence[ResourceClaim], variant: Variant) -> list[ResourceClaim]:
    """The claims as the allocator sees them for ``variant``: each firstAvailable list starting
    at its chosen alternative. The allocation it gives is one of the original claim's (the
    subrequests keep their names), so it is written to the claim unchanged."""
    skips = {(key, name): skip for key, name, skip in variant if skip}
    if not skips:
        return list(claims)
    out = []
    for claim in claims:
        mine = {name: skip for (key, name), skip in skips.items() if key == claim.key}
        if not mine:
            out.append(claim)
            continue
        copy = claim.model_copy(deep=True)
        for request in copy.spec.devices.requests:
            skip = mine.get(request.name or "", 0)
            request.first_available = request.first_available[skip:]
        out.append(copy)
    return out


async def search(
    members: Sequence[M],
    min_count: int,
    placed_before: int,
    options: Callable[[M], AsyncGenerator[O, None]],
    take: Callable[[O], P],
    undo: Callable[[P], None],
    out_of_time: Callable[[], bool],
) -> list[P] | None:
    """Placements of the group's pods, in ``members``' order, reaching ``min_count`` with those
    placed before, or None. Each pod is tried with each of its options (``take`` places it,
    ``undo`` takes it back), and then left out (a pod of a group may fail while the group is
    placed); a branch that can no longer reach ``min_count`` is cut. The first placement found
    is the one the cycle's order and each pod's preferences rank first."""
    placed: list[P] = []

    async def place(i: int) -> bool:
        if cannot_be_satisfied(min_count, placed_before + len(placed), len(members) - i):
            return False
        if i == len(members):
            return bool(placed) and placed_before + len(placed) >= min_count
        async with contextlib.aclosing(options(members[i])) as tried:
            async for option in tried:
                if out_of_time():
                    return False
                placed.append(take(option))
                if await place(i + 1):
                    return True
                undo(placed.pop())
        return False if out_of_time() else await place(i + 1)

    try:
        found = await place(0)
    except BaseException:
        for taken in reversed(placed):  # cancelled or failed midway: nothing stays taken
            undo(taken)
        raise
    return list(placed) if found else None
