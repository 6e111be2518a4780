"""Small builders of slices and claims for the pool validator's tests (JSON, then parsed)."""

from __future__ import annotations

from typing import Any

from operators.allocator.features import Features
from operators.allocator.pool_checks import PoolReport, check_pool
from operators.allocator.pools import PoolGeneration, newest_generations
from operators.api.resource import ResourceClaim, ResourceSlice

J = dict[str, Any]
DRIVER = "gpu.example.com"
POOL = "node-1"
ALL = Features.all()


def device(name: str, *uses: J, **extra: Any) -> J:
    d: J = {"name": name, **extra}
    if uses:
        d["consumesCounters"] = list(uses)
    return d


def uses(counter_set: str, **counters: str) -> J:
    return {"counterSet": counter_set, "counters": {k: {"value": v} for k, v in counters.items()}}


def counter_set(name: str, **counters: str) -> J:
    return {"name": name, "counters": {k: {"value": v} for k, v in counters.items()}}


def slice_(
    name: str,
    *devices: J,
    counters: list[J] | None = None,
    generation: int = 1,
    count: int = 1,
    pool: str = POOL,
    driver: str = DRIVER,
    selection: J | None = None,
) -> ResourceSlice:
    spec: J = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
        **(selection if selection is not None else {"nodeName": "node-1"}),
    }
    if devices:
        spec["devices"] = list(devices)
    if counters:
        spec["sharedCounters"] = counters
    return ResourceSlice.load({"metadata": {"name": name}, "spec": spec})


def claim(name: str, *results: J, namespace: str = "default") -> ResourceClaim:
    return ResourceClaim.load(
        {
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {}}]}},
            "status": {"allocation": {"devices": {"results": list(results)}}},
        }
    )


def result(device_name: str, *, pool: str = POOL, share_id: str | None = None, **extra: Any) -> J:
    r: J = {"request": "gpu", "driver": DRIVER, "pool": pool, "device": device_name, **extra}
    if share_id is not None:
        r["shareID"] = share_id
    return r


def group(*slices: ResourceSlice) -> PoolGeneration:
    (only,) = newest_generations(slices)
    return only


def report(*slices: ResourceSlice, claims: tuple[ResourceClaim, ...] = ()) -> PoolReport:
    return check_pool(group(*slices), claims, ALL)


def codes(r: PoolReport) -> list[str]:
    return [p.code for p in r.problems]
