"""Differential test: our allocator against upstream's, on random inputs.

150 random problems per Kubernetes release with ``make test`` (differential.py says what is
compared); the long run, 20,000 problems or more per release at a random seed, is
``make allocator-oracle``. Failures found either
way become regression rows in the unit table.

Skipped only when go is not installed (it builds the oracle); under ``CI=true`` that fails.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from tests.requires import require_program

from .builders import J
from .differential import KUBERNETES, compare, oracle, problem


@pytest.fixture(scope="module", autouse=True)
def upstream() -> list[str]:
    """The oracle binaries, checked for before hypothesis draws a single problem."""
    require_program("go", "builds hack/allocator-oracle, upstream's allocator")
    return [oracle(k) for k in KUBERNETES]


@pytest.mark.parametrize("kubernetes", KUBERNETES)
def test_same_as_upstream(kubernetes: str) -> None:
    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(problem(kubernetes))
    def same(p: J) -> None:
        kind, got, want = compare(p)
        assert kind is None, (kind, got, want)

    same()
