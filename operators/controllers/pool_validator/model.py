"""The ResourcePoolStatus custom resource (crds/resourcepoolstatuses.yaml), as models.

One cluster-scoped object per (driver, pool); ``spec`` says which pool, ``status`` holds the
verdict. Our own CRD, so unknown fields are errors (OwnModel). Optional fields stay unset
rather than null: the API server prunes nulls, and a status that does not round-trip exactly
would be rewritten on every reconcile.
"""

from __future__ import annotations

from typing import Final

from pydantic import Field

from operators.api.base import OwnModel
from operators.api.meta import Condition, ObjectMeta

GROUP: Final = "dra.kopf-dra.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "ResourcePoolStatus"
PLURAL: Final = "resourcepoolstatuses"

CONDITION_COMPLETE: Final = "Complete"
CONDITION_VALID: Final = "Valid"


class ProblemEntry(OwnModel):
    """One problem: a CamelCase code, Error or Warning, why, and where (slice, device)."""

    code: str
    severity: str
    message: str
    slice: str | None = None
    device: str | None = None


class CounterEntry(OwnModel):
    """One counter: consumed by allocated devices, of the total (quantities)."""

    name: str
    consumed: str
    total: str


class CounterSetEntry(OwnModel):
    name: str
    slice: str | None = None
    counters: list[CounterEntry] = Field(default_factory=list)


class DeviceCounts(OwnModel):
    total: int = 0
    allocated: int = 0


class PoolStatusSpec(OwnModel):
    driver: str
    pool: str


class PoolStatusStatus(OwnModel):
    conditions: list[Condition] = Field(default_factory=list)
    generation: int | None = None
    #: Slices of the newest generation that are published, and how many there should be.
    slices: int | None = None
    expected_slices: int | None = None
    #: Names of slices of older generations that are still there.
    stale_slices: list[str] = Field(default_factory=list)
    devices: DeviceCounts | None = None
    counter_sets: list[CounterSetEntry] = Field(default_factory=list)
    problem_count: int | None = None
    problems: list[ProblemEntry] = Field(default_factory=list)

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)


class ResourcePoolStatus(OwnModel):
    api_version: str = API_VERSION
    kind: str = KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PoolStatusSpec
    status: PoolStatusStatus = Field(default_factory=PoolStatusStatus)
