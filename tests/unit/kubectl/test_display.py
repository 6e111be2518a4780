"""The text helpers ``kubectl dra`` shares with the demo's view."""

from __future__ import annotations

import io

import pytest

from operators import display


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (None, "<unknown>"),
        (-3, "0s"),
        (59, "59s"),
        (119, "119s"),
        (120, "2m"),
        (10799, "179m"),
        (10800, "3h"),
        (172799, "47h"),
        (172800, "2d"),
    ],
)
def test_ages_as_kubectl_rounds_them(seconds: float | None, shown: str) -> None:
    assert display.short_age(seconds) == shown


def test_usage_in_the_totals_unit() -> None:
    assert display.usage("20Gi", "40Gi") == "#####..... 20Gi/40Gi"
    assert display.usage("58593750Ki", "100G") == "######.... 60G/100G"
    assert display.usage("0", "0") == ".......... 0/0"


def test_colour_only_where_asked() -> None:
    assert display.paint("x", "red", enabled=False) == "x"
    assert display.paint("x", "red", enabled=True) == "\x1b[31mx\x1b[0m"
    assert display.paint("", "red", enabled=True) == ""
    assert not display.is_terminal(io.StringIO())
