"""The scheduler's derived state (allocated devices, node usage) follows its caches and ledger,
without a cluster: stores are fed events the way the kopf handlers feed them."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from operators.api.ids import DeviceID
from operators.api.keys import ObjectKey
from operators.api.resource import ResourceClaim
from operators.controllers.scheduler.handlers import Scheduler
from operators.controllers.scheduler.settings import SchedulerSettings

DEVICE = DeviceID("gpu.example.com", "node-1", "gpu-0")
KEY = ObjectKey("ns", "c")


def _claim(version: str, *, allocated: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns", "uid": "u", "resourceVersion": version},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "x"}}]}},
    }
    if allocated:
        result = {"request": "gpu", "driver": DEVICE.driver, "pool": DEVICE.pool}
        results = [{**result, "device": DEVICE.device}]
        body["status"] = {"allocation": {"devices": {"results": results}}}
    return body


def _pod(name: str, node: str | None, cpu: str = "1") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": name, "resourceVersion": "1"},
        "spec": spec,
    }


async def test_allocations_come_from_cache_and_ledger_and_survive_losing_leadership() -> None:
    s = Scheduler(SchedulerSettings())
    s.cache.claims.apply("ADDED", _claim("5", allocated=True))
    assert s.cache.allocated.state().is_allocated(DEVICE)
    # An in-flight deallocation (written by us, not yet seen) frees the device at once ...
    s.cache.ledger.reserve(KEY, ResourceClaim.load(_claim("5", allocated=False)))
    assert not s.cache.allocated.state().is_allocated(DEVICE)
    # ... and losing leadership drops the ledger: the cache is the truth again.
    await s.deactivate()
    assert s.cache.allocated.state().is_allocated(DEVICE)
    s.cache.claims.apply("DELETED", _claim("6", allocated=True))
    assert not s.cache.allocated.state().is_allocated(DEVICE)


async def test_node_usage_counts_bound_and_assumed_pods() -> None:
    s = Scheduler(SchedulerSettings())
    s.cache.pods.apply("ADDED", _pod("a", "node-1"))
    s.cache.pods.apply("ADDED", _pod("b", None))
    s.cache.usage.assume(ObjectKey("ns", "b"), ("node-1", {"cpu": Decimal(2)}))
    usage = s.cache.usage.usage["node-1"]
    assert (usage.pods, usage.requests["cpu"]) == (2, Decimal(3))
    await s.deactivate()  # our assumption goes, the cache's bound pod stays
    usage = s.cache.usage.usage["node-1"]
    assert (usage.pods, usage.requests["cpu"]) == (1, Decimal(1))
    s.cache.pods.apply("DELETED", _pod("a", "node-1"))
    assert "node-1" not in s.cache.usage.usage
