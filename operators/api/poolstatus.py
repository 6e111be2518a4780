"""resource.k8s.io/v1alpha3 ResourcePoolStatusRequest of Kubernetes 1.36 and 1.37 (KEP-5677).

A user asks "how much is free in these pools" by creating one; one controller answers it once
by writing ``status``. The pool validator is that controller in a kopf-dra cluster, so these
models follow the 1.37.2 types field for field (same naming rules as ``resource.py``); 1.36.3's
are the same without 1.37's additions: ``spec.defaultPartitionTypeAttribute`` and, per pool,
``partitionSummary`` and ``shareableSummary``.
"""

from __future__ import annotations

from typing import Final

from pydantic import Field

from operators.api.base import KubeModel
from operators.api.meta import Condition, ObjectMeta
from operators.api.quantity import Quantity

API_VERSION_V1ALPHA3: Final = "resource.k8s.io/v1alpha3"
KIND: Final = "ResourcePoolStatusRequest"
PLURAL: Final = "resourcepoolstatusrequests"

#: ``spec.limit``: the default and the largest value the API server accepts.
LIMIT_DEFAULT: Final = 100
LIMIT_MAX: Final = 1000
#: ``status.pools[].validationError`` is at most this many bytes.
VALIDATION_ERROR_MAX_BYTES: Final = 256
#: 1.37: ``partitionSummary`` and ``shareableSummary.capacity`` entries per pool.
SUMMARY_MAX_ITEMS: Final = 32

CONDITION_COMPLETE: Final = "Complete"
CONDITION_FAILED: Final = "Failed"
#: kube-controller-manager's reasons, so that the same ``kubectl wait`` and alerts work.
REASON_COMPLETE: Final = "CalculationComplete"
REASON_FAILED: Final = "CalculationFailed"


class ResourcePoolStatusRequestSpec(KubeModel):
    """Which pools: every pool of ``driver``, or the one named ``pool_name``; at most ``limit``."""

    driver: str | None = None
    pool_name: str | None = None
    limit: int | None = None
    #: 1.37 (DRAPartitionableDevicesType): the partition type attribute of pools whose slices
    #: name none.
    default_partition_type_attribute: str | None = None


class PartitionTypeStatus(KubeModel):
    """1.37: how many devices of one partition type (a value of ``attribute``) a pool has, and
    how many more of them could be allocated."""

    attribute: str | None = None
    type: str | None = None
    total: int | None = None
    allocatable: int | None = None


class ShareableCapacityStatus(KubeModel):
    """1.37: one capacity of a pool's shareable devices, summed."""

    name: str | None = None
    total: Quantity | None = None
    consumed: Quantity | None = None
    available: Quantity | None = None


class ShareableSummaryStatus(KubeModel):
    """1.37: a pool's devices with ``allowMultipleAllocations``."""

    fully_available_devices: int | None = None
    partially_available_devices: int | None = None
    capacity: list[ShareableCapacityStatus] = Field(default_factory=list)


class PoolStatus(KubeModel):
    """One pool's answer; counts stay unset when ``validation_error`` says the pool is partial."""

    driver: str | None = None
    pool_name: str | None = None
    generation: int = 0
    resource_slice_count: int | None = None
    total_devices: int | None = None
    allocated_devices: int | None = None
    available_devices: int | None = None
    unavailable_devices: int | None = None
    node_name: str | None = None
    validation_error: str | None = None
    #: 1.37: per partition type of a partitionable pool whose partition type attribute is
    #: known (its slices', or the request's default).
    partition_summary: list[PartitionTypeStatus] = Field(default_factory=list)
    #: 1.37: where the pool has shareable devices.
    shareable_summary: ShareableSummaryStatus | None = None


class ResourcePoolStatusRequestStatus(KubeModel):
    pool_count: int | None = None
    pools: list[PoolStatus] = Field(default_factory=list)
    conditions: list[Condition] = Field(default_factory=list)

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)


class ResourcePoolStatusRequest(KubeModel):
    """Answered once: a request whose ``status`` is set is never processed again."""

    api_version: str | None = API_VERSION_V1ALPHA3
    kind: str | None = KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourcePoolStatusRequestSpec = Field(default_factory=ResourcePoolStatusRequestSpec)
    status: ResourcePoolStatusRequestStatus | None = None

    @property
    def answered(self) -> bool:
        return self.status is not None
