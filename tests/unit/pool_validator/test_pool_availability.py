"""The pool validator's answers to ResourcePoolStatusRequests, pool shape by pool shape.

Each test also counts the pool the way kube-controller-manager 1.36 does (``naive``: one
allocated device per claim result, none unavailable), so that every difference the README
documents is shown by a test that would fail without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from operators.allocator.pool_availability import (
    answer,
    failed,
    incomplete_message,
    pool_status,
    spec_problem,
    wanted,
)
from operators.allocator.pool_checks import check_pool
from operators.allocator.pools import newest_generations
from operators.api.poolstatus import (
    CONDITION_COMPLETE,
    CONDITION_FAILED,
    LIMIT_DEFAULT,
    REASON_COMPLETE,
    REASON_FAILED,
    PoolStatus,
    ResourcePoolStatusRequest,
    ResourcePoolStatusRequestSpec,
)
from operators.api.resource import (
    DeviceTaintRule,
    ResourceClaim,
    ResourceClaimConsumerReference,
    ResourceSlice,
)
from tests.unit.pool_validator.builders import (
    ALL,
    DRIVER,
    POOL,
    claim,
    counter_set,
    device,
    group,
    result,
    slice_,
    uses,
)

NOW = "2026-01-01T00:00:00Z"
Counts = tuple[int | None, int | None, int | None, int | None]


def counts(
    *slices: ResourceSlice,
    claims: Sequence[ResourceClaim] = (),
    rules: Sequence[DeviceTaintRule] = (),
) -> Counts:
    """(total, allocated, unavailable, available) as the pool validator answers."""
    g = group(*slices)
    s = pool_status(g, check_pool(g, claims, ALL), claims, ALL, rules)
    return (s.total_devices, s.allocated_devices, s.unavailable_devices, s.available_devices)


def naive(*slices: ResourceSlice, claims: Sequence[ResourceClaim] = ()) -> Counts:
    """kube-controller-manager 1.36's counting, as the reference the differences are from."""
    total = sum(len(s.spec.devices) for s in slices)
    allocated = sum(
        1 for c in claims for r in c.allocated_results() if (r.driver, r.pool) == (DRIVER, POOL)
    )
    return (total, allocated, 0, max(0, total - allocated))


def test_plain_devices_agree_with_1_36() -> None:
    slices = (slice_("s", device("d0"), device("d1"), device("d2")),)
    claims = [claim("a", result("d0"))]
    assert counts(*slices, claims=claims) == (3, 1, 0, 2)
    assert naive(*slices, claims=claims) == (3, 1, 0, 2)


def split_gpu() -> tuple[ResourceSlice, ...]:
    """One 40Gi GPU offered whole or as two 20Gi halves (one counter set)."""
    return (
        slice_("counters", counters=[counter_set("gpu-0", memory="40Gi")], count=2),
        slice_(
            "devices",
            device("whole", uses("gpu-0", memory="40Gi")),
            device("half-0", uses("gpu-0", memory="20Gi")),
            device("half-1", uses("gpu-0", memory="20Gi")),
            count=2,
        ),
    )


def test_partitions_sharing_counters_count_what_is_left() -> None:
    # The whole GPU is allocated: neither half fits any more.
    slices = split_gpu()
    claims = [claim("a", result("whole"))]
    assert counts(*slices, claims=claims) == (3, 1, 2, 0)
    assert naive(*slices, claims=claims) == (3, 1, 0, 2)


def test_one_half_allocated_leaves_the_other_half() -> None:
    slices = split_gpu()
    claims = [claim("a", result("half-0"))]
    assert counts(*slices, claims=claims) == (3, 1, 1, 1)


def test_a_pool_the_allocator_refuses_has_nothing_available() -> None:
    # p1 consumes a counter set that is not there: the allocator refuses the whole pool.
    slices = (
        slice_("counters", counters=[counter_set("gpu-0", memory="40Gi")], count=2),
        slice_(
            "devices",
            device("p0", uses("gpu-0", memory="10Gi")),
            device("p1", uses("gpu-9", memory="10Gi")),
            count=2,
        ),
    )
    assert counts(*slices) == (2, 0, 2, 0)
    assert naive(*slices) == (2, 0, 0, 2)


def test_shared_device_is_allocated_once() -> None:
    # Consumable capacity: one NIC shared by three claims, each with its own share.
    nic = device(
        "nic",
        allowMultipleAllocations=True,
        capacity={"bandwidth": {"value": "10Gi"}},
    )
    slices = (slice_("s", nic, device("other")),)
    claims = [
        claim(name, result("nic", share_id=f"share-{name}", consumedCapacity={"bandwidth": "1Gi"}))
        for name in ("a", "b", "c")
    ]
    assert counts(*slices, claims=claims) == (2, 1, 0, 1)
    assert naive(*slices, claims=claims) == (2, 3, 0, 0)


def test_admin_access_takes_nothing() -> None:
    slices = (slice_("s", device("d0"), device("d1")),)
    claims = [claim("admin", result("d0", adminAccess=True)), claim("user", result("d0"))]
    assert counts(*slices, claims=claims) == (2, 1, 0, 1)
    assert naive(*slices, claims=claims) == (2, 2, 0, 0)


def test_no_schedule_and_no_execute_taints_make_devices_unavailable() -> None:
    slices = (
        slice_(
            "s",
            device("ok"),
            device("info", taints=[{"key": "k", "effect": "None"}]),
            device("drain", taints=[{"key": "k", "effect": "NoSchedule"}]),
            device("evict", taints=[{"key": "k", "effect": "NoExecute"}]),
            device("held", taints=[{"key": "k", "effect": "NoSchedule"}]),
            device("ruled"),
        ),
    )
    claims = [claim("a", result("held"))]
    rule = DeviceTaintRule.load(
        {
            "metadata": {"name": "r"},
            "spec": {
                "deviceSelector": {"driver": DRIVER, "pool": POOL, "device": "ruled"},
                "taint": {"key": "k", "effect": "NoExecute"},
            },
        }
    )
    # "held" is allocated (counted there, not twice); "drain", "evict", "ruled" unavailable.
    assert counts(*slices, claims=claims, rules=[rule]) == (6, 1, 3, 2)
    assert naive(*slices, claims=claims) == (6, 1, 0, 5)


def test_pool_still_being_published_has_no_counts() -> None:
    slices = (slice_("s-0", device("d0"), count=2, generation=3),)
    g = group(*slices)
    s = pool_status(g, check_pool(g, (), ALL), (), ALL)
    assert s.validation_error == incomplete_message(g)
    assert (
        s.validation_error == f"PoolIncomplete: pool {DRIVER}/{POOL} is incomplete: "
        "observed 1/2 slices at generation 3"
    )
    assert (s.total_devices, s.resource_slice_count, s.generation) == (None, None, 3)


def test_older_generations_are_ignored_and_node_is_reported() -> None:
    slices = (
        slice_("old", device("d0"), device("d1"), generation=1),
        slice_("new", device("d0"), generation=2),
    )
    (g,) = newest_generations(slices)
    s = pool_status(g, check_pool(g, (), ALL), (), ALL)
    assert (s.generation, s.total_devices, s.resource_slice_count, s.node_name) == (
        2,
        1,
        1,
        "node-1",
    )


def test_pools_on_several_nodes_have_no_node_name() -> None:
    slices = (
        slice_("a", device("d0"), count=2),
        slice_("b", device("d1"), count=2, selection={"nodeName": "node-2"}),
    )
    g = group(*slices)
    assert pool_status(g, check_pool(g, (), ALL), (), ALL).node_name is None


def _pool(name: str, driver: str = DRIVER, error: str | None = None) -> PoolStatus:
    return PoolStatus(driver=driver, pool_name=name, generation=1, validation_error=error)


def test_answer_sorts_limits_and_counts_every_pool() -> None:
    spec = ResourcePoolStatusRequestSpec(driver=DRIVER, limit=2)
    status = answer(spec, [_pool("c"), _pool("a", error="partial"), _pool("b")], NOW)
    assert [p.pool_name for p in status.pools] == ["a", "b"]
    assert status.pool_count == 3
    complete = status.condition(CONDITION_COMPLETE)
    assert complete is not None
    assert complete.is_true
    assert (complete.reason, complete.message) == (
        REASON_COMPLETE,
        "Calculated status for 2 pools (1 incomplete)",
    )


def test_answer_without_limit_shows_the_default_number() -> None:
    spec = ResourcePoolStatusRequestSpec(driver=DRIVER)
    status = answer(spec, [_pool(f"p-{i:03}") for i in range(LIMIT_DEFAULT + 5)], NOW)
    assert (len(status.pools), status.pool_count) == (LIMIT_DEFAULT, LIMIT_DEFAULT + 5)


def test_answer_with_no_pools_is_complete_and_empty() -> None:
    status = answer(ResourcePoolStatusRequestSpec(driver=DRIVER), [], NOW)
    assert (status.pool_count, status.pools) == (0, [])
    dumped: dict[str, Any] = status.model_dump(mode="json", by_alias=True, exclude_unset=True)
    assert "pools" not in dumped
    assert dumped["poolCount"] == 0


def test_failed_names_the_field() -> None:
    problem = spec_problem(ResourcePoolStatusRequestSpec(driver=DRIVER, limit=0))
    assert problem is not None
    assert "spec.limit" in problem
    assert spec_problem(ResourcePoolStatusRequestSpec()) == "spec.driver: Required value"
    assert spec_problem(ResourcePoolStatusRequestSpec(driver=DRIVER, pool_name="p")) is None
    status = failed(problem, NOW)
    cond = status.condition(CONDITION_FAILED)
    assert cond is not None
    assert (cond.reason, cond.message) == (REASON_FAILED, problem)
    assert status.pool_count == 0


def test_wanted_filters_by_driver_and_pool() -> None:
    g = group(slice_("s", device("d0")))
    assert wanted(ResourcePoolStatusRequestSpec(driver=DRIVER), g)
    assert wanted(ResourcePoolStatusRequestSpec(driver=DRIVER, pool_name=POOL), g)
    assert not wanted(ResourcePoolStatusRequestSpec(driver=DRIVER, pool_name="other"), g)
    assert not wanted(ResourcePoolStatusRequestSpec(driver="nic.example.com"), g)


def test_request_round_trips() -> None:
    obj = {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "ResourcePoolStatusRequest",
        "metadata": {"name": "r"},
        "spec": {"driver": DRIVER, "poolName": POOL, "limit": 5},
        "status": {
            "poolCount": 1,
            "pools": [
                {
                    "driver": DRIVER,
                    "poolName": POOL,
                    "generation": 1,
                    "resourceSliceCount": 1,
                    "totalDevices": 2,
                    "allocatedDevices": 0,
                    "availableDevices": 2,
                    "unavailableDevices": 0,
                    "nodeName": "node-1",
                }
            ],
            "conditions": [{"type": "Complete", "status": "True"}],
        },
    }
    request = ResourcePoolStatusRequest.load(obj)
    assert request.answered
    assert request.dump() == obj
    assert not ResourcePoolStatusRequest.load({"spec": {"driver": DRIVER}}).answered


def test_a_pod_groups_shared_claim_counts_once_however_many_pods_use_it() -> None:
    """A claim of a PodGroup (1.37, DRAWorkloadResourceClaims) is reserved for the PodGroup,
    once, while every pod of the group uses it: one allocated device, its counters once."""
    slices = split_gpu()
    shared = claim("training-interconnect", result("half-0"))
    shared.status.reserved_for = [
        ResourceClaimConsumerReference.load(
            {
                "apiGroup": "scheduling.k8s.io",
                "resource": "podgroups",
                "name": "training",
                "uid": "uid-training",
            }
        )
    ]
    assert counts(*slices, claims=[shared]) == (3, 1, 1, 1)
    g = group(*slices)
    assert not check_pool(g, [shared], ALL).problems
