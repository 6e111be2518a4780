"""The whole table: upstream's cases (ported part by part) plus our regression cases."""

from __future__ import annotations

from . import (
    cases_137,
    cases_attributes,
    cases_basic,
    cases_capacity,
    cases_partitionable,
    cases_pools,
    cases_regressions,
    cases_requests,
    cases_taints,
)
from .builders import Case

CASES: list[Case] = [
    *cases_basic.cases(),
    *cases_requests.cases(),
    *cases_partitionable.cases(),
    *cases_taints.cases(),
    *cases_pools.cases(),
    *cases_capacity.cases(),
    *cases_attributes.cases(),
    *cases_regressions.cases(),
    *cases_137.cases(),
]
