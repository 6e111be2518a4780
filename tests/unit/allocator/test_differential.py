"""Differential test: our allocator against upstream's, on random inputs.

150 random problems with ``make test`` (differential.py says what is compared); the long run,
20,000 problems or more at a random seed, is ``make allocator-oracle``. Failures found either
way become regression rows in the unit table.

Skipped only when no Go toolchain is installed (the oracle cannot be built).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from .builders import J
from .differential import NoToolchainError, compare, oracle, problem


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(problem())
def test_same_as_upstream(p: J) -> None:
    try:
        oracle()
    except NoToolchainError as exc:
        pytest.skip(str(exc))
    kind, got, want = compare(p)
    assert kind is None, (kind, got, want)
