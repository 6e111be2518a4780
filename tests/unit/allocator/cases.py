"""The whole table: upstream's cases (ported part by part) plus our regression cases.

The ported parts are Kubernetes 1.36's table (allocator_testing.go of v0.36.3), so they run as
the 1.36 allocator; where 1.37's table expects otherwise, a row of cases_137 says so (and is
checked to answer otherwise as 1.36). cases_137_alpha holds 1.37's rows for its alpha features,
which 1.36 lacks (not checked against 1.36). cases_138 holds the rows where 1.38's allocator
parts from 1.37's, each as both releases.
"""

from __future__ import annotations

import dataclasses

from operators.api.features import Release

from . import (
    cases_137,
    cases_137_alpha,
    cases_138,
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


def _as_136(case: Case) -> Case:
    return dataclasses.replace(
        case, features=dataclasses.replace(case.features, kubernetes=Release(1, 36))
    )


CASES: list[Case] = [
    *map(
        _as_136,
        [
            *cases_basic.cases(),
            *cases_requests.cases(),
            *cases_partitionable.cases(),
            *cases_taints.cases(),
            *cases_pools.cases(),
            *cases_capacity.cases(),
            *cases_attributes.cases(),
            *cases_regressions.cases(),
        ],
    ),
    *cases_137.cases(),
    *cases_137_alpha.cases(),
    *cases_138.cases(),
]
