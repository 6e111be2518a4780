"""The admission check: a slice is refused only for the problems it would add to its pool."""

from __future__ import annotations

from operators.allocator.pool_checks import admission_problems
from operators.api.resource import ResourceSlice
from tests.unit.pool_validator.builders import ALL, counter_set, device, slice_, uses

GPU_SET = [counter_set("gpu-0", memory="40Gi")]


def _codes(candidate: ResourceSlice, *stored: ResourceSlice) -> list[tuple[str, str]]:
    return [(p.code, p.device) for p in admission_problems(candidate, stored, ALL)]


def test_a_device_name_taken_by_another_slice_is_refused() -> None:
    a = slice_("a", device("gpu-0"), count=2)
    assert _codes(slice_("b", device("gpu-0"), count=2), a) == [("DuplicateDeviceName", "gpu-0")]
    assert _codes(slice_("b", device("gpu-1"), count=2), a) == []


def test_the_slice_completing_a_pool_with_a_dangling_reference_is_refused() -> None:
    devices = slice_("devices", device("p0", uses("gpu-9", memory="1Gi")), count=2)
    counters = slice_("counters", counters=GPU_SET, count=2)
    # Published first, the reference may still be satisfied by a slice to come ...
    assert _codes(devices) == []
    # ... but the last slice of the pool does not bring the counter set.
    assert _codes(counters, devices) == [("CounterSetNotFound", "p0")]
    assert (
        _codes(slice_("counters", counters=[counter_set("gpu-9", memory="1Gi")], count=2), devices)
        == []
    )


def test_consumption_beyond_a_counter_total_is_refused() -> None:
    counters = slice_("counters", counters=GPU_SET, count=2)
    greedy = slice_("devices", device("p0", uses("gpu-0", memory="80Gi")), count=2)
    assert _codes(greedy, counters) == [("ConsumptionExceedsCounter", "p0")]


def test_problems_the_pool_already_has_do_not_block_a_fix() -> None:
    a = slice_("a", device("gpu-0"), count=2)
    b = slice_("b", device("gpu-0"), count=2)
    # Rewriting b unchanged adds nothing; renaming its device fixes the pool.
    assert _codes(b, a, b) == []
    assert _codes(slice_("b", device("gpu-1"), count=2), a, b) == []


def test_generations_are_judged_on_their_own() -> None:
    old = slice_("a", device("gpu-0"), count=2, generation=1)
    # A new generation starts afresh: the old slice's device name is no conflict ...
    assert _codes(slice_("b", device("gpu-0"), count=2, generation=2), old) == []
    # ... and a slice older than the pool's newest generation is not judged at all.
    newer = slice_("c", device("gpu-0"), count=2, generation=3)
    assert _codes(slice_("d", device("gpu-0"), count=2, generation=2), newer) == []
