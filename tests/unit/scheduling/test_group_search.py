"""The search for a whole group's placement over each pod's alternatives and nodes."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import pytest

from operators.api.resource import ResourceClaim
from operators.scheduling.group_search import restricted, search, variants


def claim(name: str, *requests: dict[str, Any], allocated: bool = False) -> ResourceClaim:
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"devices": {"requests": list(requests)}},
    }
    if allocated:
        body["status"] = {"allocation": {"devices": {"results": []}}}
    return ResourceClaim.load(body)


def prioritized(name: str, *alternatives: str) -> dict[str, Any]:
    return {
        "name": name,
        "firstAvailable": [
            {"name": a, "deviceClassName": f"{a}.example.com"} for a in alternatives
        ],
    }


def test_variants_prefer_fewer_alternatives_skipped() -> None:
    a = claim("a", prioritized("gpu", "whole", "half"))
    b = claim("b", prioritized("gpu", "big", "medium", "small"), {"name": "nic", "exactly": {}})
    assert variants([a, b]) == [
        (("ns/a", "gpu", 0), ("ns/b", "gpu", 0)),
        (("ns/a", "gpu", 0), ("ns/b", "gpu", 1)),
        (("ns/a", "gpu", 1), ("ns/b", "gpu", 0)),
        (("ns/a", "gpu", 0), ("ns/b", "gpu", 2)),
        (("ns/a", "gpu", 1), ("ns/b", "gpu", 1)),
        (("ns/a", "gpu", 1), ("ns/b", "gpu", 2)),
    ]
    assert len(variants([a, b], limit=2)) == 2
    assert variants([claim("c", {"name": "gpu", "exactly": {}})]) == [()], "one way: the pod's"
    done = claim("d", prioritized("gpu", "whole", "half"), allocated=True)
    assert variants([done]) == [()], "an allocated claim has no choice left"


def test_restricted_starts_each_list_at_its_alternative_and_leaves_the_claim_alone() -> None:
    a = claim("a", prioritized("gpu", "whole", "half"))
    b = claim("b", prioritized("gpu", "whole", "half"))
    (ra, rb) = restricted([a, b], (("ns/a", "gpu", 1), ("ns/b", "gpu", 0)))
    assert [s.name for s in ra.spec.devices.requests[0].first_available] == ["half"]
    assert rb is b
    assert [s.name for s in a.spec.devices.requests[0].first_available] == ["whole", "half"]


class Gpu:
    """One GPU of two halves per node: 'whole' takes both, 'half' one."""

    def __init__(self, nodes: dict[str, int]) -> None:
        self.free = dict(nodes)
        self.taken = 0

    async def options(self, pod: tuple[str, ...]) -> AsyncGenerator[tuple[str, str], None]:
        for alternative in pod:  # the pod's prioritized list
            need = 2 if alternative == "whole" else 1
            for node in sorted(self.free, key=lambda n: -self.free[n]):  # most free first
                if self.free[node] >= need:
                    yield node, alternative

    def take(self, option: tuple[str, str]) -> tuple[str, str]:
        node, alternative = option
        self.taken += 1
        self.free[node] -= 2 if alternative == "whole" else 1
        return option

    def undo(self, placed: tuple[str, str]) -> None:
        node, alternative = placed
        self.free[node] += 2 if alternative == "whole" else 1


async def test_a_gang_upstream_fails_is_placed_on_later_alternatives() -> None:
    """kubernetes#138765: two pods asking [whole, half] of one GPU; greedy gives the first the
    whole GPU and fails the gang; the search gives each a half."""
    gpu = Gpu({"node-a": 2})
    pods = [("whole", "half"), ("whole", "half")]
    found = await search(pods, 2, 0, gpu.options, gpu.take, gpu.undo, lambda: False)
    assert found == [("node-a", "half"), ("node-a", "half")]
    assert gpu.free == {"node-a": 0}


async def test_the_first_placement_found_is_the_preferred_one() -> None:
    gpu = Gpu({"node-a": 2, "node-b": 2})
    pods = [("whole", "half"), ("whole", "half")]
    found = await search(pods, 2, 0, gpu.options, gpu.take, gpu.undo, lambda: False)
    assert found == [("node-a", "whole"), ("node-b", "whole")], "no alternative skipped"


async def test_a_pod_that_fits_nowhere_is_left_out_when_the_rest_reach_min_count() -> None:
    gpu = Gpu({"node-a": 2})
    pods = [("half",), ("whole",), ("half",)]
    found = await search(pods, 2, 0, gpu.options, gpu.take, gpu.undo, lambda: False)
    assert found == [("node-a", "half"), ("node-a", "half")]


async def test_nothing_is_kept_when_no_combination_reaches_min_count() -> None:
    gpu = Gpu({"node-a": 2})
    pods = [("whole", "half")] * 3
    assert await search(pods, 3, 0, gpu.options, gpu.take, gpu.undo, lambda: False) is None
    assert gpu.free == {"node-a": 2}, "every placement tried was undone"


async def test_pods_placed_before_count_toward_min_count() -> None:
    gpu = Gpu({"node-a": 1})
    found = await search([("half",)], 3, 2, gpu.options, gpu.take, gpu.undo, lambda: False)
    assert found == [("node-a", "half")]
    assert await search([], 2, 2, gpu.options, gpu.take, gpu.undo, lambda: False) is None


async def test_the_search_stops_when_time_runs_out_and_keeps_nothing() -> None:
    gpu = Gpu({"node-a": 2})
    pods = [("whole", "half")] * 3
    budget = iter(range(3))
    found = await search(
        pods, 3, 0, gpu.options, gpu.take, gpu.undo, lambda: next(budget, None) is None
    )
    assert found is None
    assert gpu.free == {"node-a": 2}
    assert gpu.taken == 2, "two options taken while time was left, none after"


async def test_a_search_cut_short_by_an_error_keeps_nothing() -> None:
    gpu = Gpu({"node-a": 2, "node-b": 2})

    async def failing(pod: tuple[str, ...]) -> AsyncGenerator[tuple[str, str], None]:
        if pod == ("boom",):
            raise RuntimeError("the API went away")
        async for option in gpu.options(pod):
            yield option

    pods = [("whole",), ("boom",)]
    with pytest.raises(RuntimeError):
        await search(pods, 2, 0, failing, gpu.take, gpu.undo, lambda: False)
    assert gpu.free == {"node-a": 2, "node-b": 2}
