"""Patterns read as Go's regexp reads them, without the oracle (test_differential.py checks the
same answers against cel-go where Go is installed)."""

from __future__ import annotations

import pytest

from operators.cel.goregexp import GoRegexpError, translate
from operators.cel.library import compile_regex
from operators.cel.runtime import CelError

REFUSED = [
    "\\C",
    "a\\C*",
    "\\p{Linear_A}",
    "\\P{Old_Italic}",
    "[\\p{SignWriting}]",
    "\\p{Garay}",  # Unicode 16: newer than Go's tables
    "(?P<é>a)",
    "(?<n-1>a)",
    "(" * 1000 + ")" * 1000,
]


@pytest.mark.parametrize("pattern", REFUSED, ids=[p[:24] for p in REFUSED])
def test_what_go_refuses_is_refused(pattern: str) -> None:
    with pytest.raises(GoRegexpError):
        translate(pattern)
    with pytest.raises(CelError, match="invalid regular expression"):
        compile_regex(pattern)


# (pattern, text, Go's answer for a search)
MATCHES = [
    ("\\Q\\C\\E", "\\C", True),  # quoted: no escape
    ("[\\C]", "C", None),  # both refuse it in a class: RE2's own error
    ("\\p{greek}", "\u03b1", True),
    ("\\pl", "x", True),
    ("\\p{Uppercase_Letter}", "X", True),
    ("\\p{uppercase-letter}", "x", False),
    ("\\p{^Lt}", "\u01c5", False),
    ("\\p{ASCII}", "~", True),
    ("[^\\P{ASCII}]", "\u00e9", False),
    ("\\p{C}", "\u0378", True),  # Go's Other holds the unassigned code points
    ("\\P{C}", "\u0378", False),
    ("\\p{Cn}", "\ue000", False),  # private use is assigned
    ("\\p{Assigned}", "\ue000", True),
    ("(?i)\\P{ASCII}", "\u212a", False),  # the Kelvin sign is a k, negated with it
    ("(?i:\\P{ASCII})|x", "\u212a", False),
    ("(?i)(?-i:\\P{ASCII})", "\u212a", True),
    ("(?i)\\p{LC}", "\u0345", False),  # no folding table for LC in Go
    ("(?i)\\P{LC}", "\u0345", True),
    ("\\p{Cased_Letter}", "a", True),
    ("(?P<n_1>a)", "a", True),
    ("(" * 999 + "a" + ")" * 999, "a", True),
]


@pytest.mark.parametrize(("pattern", "text", "found"), MATCHES, ids=[m[0][:24] for m in MATCHES])
def test_what_go_takes_matches_as_in_go(pattern: str, text: str, found: bool | None) -> None:
    if found is None:
        with pytest.raises(CelError):
            compile_regex(pattern)
        return
    assert (compile_regex(pattern).search(text) is not None) is found


# (pattern, text, Go 1.27's answer for a search): Kubernetes 1.38's Go finds a script by its
# loose name, and knows Unicode 17's scripts (spelled out as ranges: RE2 has none of them).
MATCHES_GO127 = [
    ("\\p{Linear_A}", "\U00010600", True),
    ("\\p{old_italic}", "a", False),
    ("[\\p{SignWriting}x]", "x", True),
    ("^\\p{Garay}$", "\U00010d40", True),
    ("^\\p{garay}$", "\U00010d66", False),  # a gap in the script
    ("^\\P{Garay}$", "\U00010d40", False),
    ("^[^\\p{Sidetic}]$", "a", True),
    ("(?i)^\\p{Tulu_Tigalari}$", "\U0001138b", True),
    ("^\\p{Tulu_Tigalari}$", "\U0001138c", False),  # a stride of 3 in Go's table
]


@pytest.mark.parametrize(
    ("pattern", "text", "found"), MATCHES_GO127, ids=[m[0][:24] for m in MATCHES_GO127]
)
def test_go127_reads_scripts_loosely(pattern: str, text: str, found: bool) -> None:
    assert (compile_regex(pattern, True).search(text) is not None) is found
    with pytest.raises(CelError):
        compile_regex(pattern)  # Go 1.26 (Kubernetes 1.36, 1.37) finds no such table
