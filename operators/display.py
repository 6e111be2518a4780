"""Text for people: quantities in their unit, bars, aligned tables, ages, colour.

Shared by the demo's live view and ``kubectl dra``, so that both show a pool's counters and a
device's capacity the same way. Pure but for ``is_terminal`` and ``output_width``, which ask
the output stream.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from typing import Any, Final

from operators.api.quantity import Quantity

SUFFIXES: Final = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
}


def human(quantity: str, like: str | None = None) -> str:
    """A quantity in the unit ``like`` is written in (``58593750Ki`` like ``100G``: ``60G``);
    without ``like``, in the largest unit that divides it (decimal first)."""
    value = Quantity(quantity).value
    if like is None:
        exact = [
            u for u in ("T", "G", "M", "k", "Ti", "Gi", "Mi", "Ki") if value % SUFFIXES[u] == 0
        ]
        unit = exact[0] if exact and value else ""
    else:
        unit = next((u for u in sorted(SUFFIXES, key=len, reverse=True) if like.endswith(u)), "")
    if not unit:
        return str(Quantity(quantity))
    text = f"{value / SUFFIXES[unit]:.1f}".removesuffix(".0")
    return f"{text}{unit}"


def bar(ratio: float, width: int = 10) -> str:
    filled = max(0, min(width, round(ratio * width)))
    return "#" * filled + "." * (width - filled)


def ratio(used: str, total: str) -> float:
    total_q = Quantity(total).value
    return float(Quantity(used).value / total_q) if total_q else 0.0


def usage(used: str, total: str) -> str:
    """``#####..... 20Gi/40Gi``: what is used of a total, in the total's unit."""
    return f"{bar(ratio(used, total))} {human(used, like=total)}/{total}"


def table(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """Aligned columns (the last one unpadded, so that long reasons are not)."""
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return [
        indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1]
        for r in rows
    ]


def short_age(seconds: float | None) -> str:
    """An age as kubectl's AGE column rounds it: seconds below two minutes, minutes below
    three hours, hours below two days, then days (``<unknown>`` when unset)."""
    if seconds is None:
        return "<unknown>"
    whole = max(0, int(seconds))
    if whole < 120:
        return f"{whole}s"
    if whole < 3 * 3600:
        return f"{whole // 60}m"
    if whole < 48 * 3600:
        return f"{whole // 3600}h"
    return f"{whole // 86400}d"


UNLIMITED_WIDTH: Final = 1_000_000


def is_terminal(out: Any) -> bool:
    return hasattr(out, "isatty") and bool(out.isatty())


def output_width(out: Any) -> int:
    """The terminal's; a file or pipe gets whole lines (a log keeps every reason)."""
    return shutil.get_terminal_size().columns if is_terminal(out) else UNLIMITED_WIDTH


COLOURS: Final = {"bold": "1", "red": "31", "green": "32", "yellow": "33"}


def paint(text: str, colour: str, enabled: bool) -> str:
    """``text`` in ``colour`` where ``enabled`` (a terminal), else as it is."""
    return f"\x1b[{COLOURS[colour]}m{text}\x1b[0m" if enabled and text else text
