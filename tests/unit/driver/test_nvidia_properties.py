"""Random claims and releases on the dynamic-MIG H100: the counters keep NVML's rules."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators.allocator import Status
from operators.api.resource import ResourceClaim

from .gpu import NODE, allocate, claim, profile_selector, slices, source

PUBLISHED = slices(source(mig=True, dynamic=True).inventory(NODE))
DEVICES = {d.name: d for s in PUBLISHED for d in s.spec.devices}
PROFILES = sorted(
    {str(d.attributes["gpu.nvidia.com/profile"].typed_value()) for d in DEVICES.values()}
)
FULL = "gpu-0-mig-0-0-8"
#: Figures of the runs (printed at the end; written where KOPF_DRA_GPU_FIGURES names a file).
FIGURES = {
    "sequences": 0,
    "steps": 0,
    "allocations": 0,
    "refusals": 0,
    "releases": 0,
    "max_live": 0,
}

# A step: claim a profile (index) or release the i-th live claim (negative). Claims come three
# times as often as releases, so that sequences fill the GPU (releases otherwise keep it empty).
_claim = st.integers(min_value=0, max_value=len(PROFILES) - 1)
_release = st.integers(min_value=-8, max_value=-1)
steps = st.lists(st.one_of(_claim, _claim, _claim, _release), min_size=5, max_size=40)


def _slices_of(name: str) -> set[int]:
    attrs = DEVICES[name].attributes
    start = int(attrs["gpu.nvidia.com/memorySliceStart"].typed_value())  # type: ignore[arg-type]
    size = int(attrs["gpu.nvidia.com/memorySlices"].typed_value())  # type: ignore[arg-type]
    return set(range(start, start + size))


def _devices(claims: list[ResourceClaim]) -> list[str]:
    out: list[str] = []
    for c in claims:
        assert c.status.allocation is not None
        out.extend(r.device or "" for r in c.status.allocation.devices.results)
    return out


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps)
def _no_two_allocations_share_a_memory_slice_nor_sit_beside_the_whole_gpu(
    plan: list[int],
) -> None:
    live: list[ResourceClaim] = []
    FIGURES["sequences"] += 1
    for n, step in enumerate(plan):
        FIGURES["steps"] += 1
        if step < 0:
            if live:
                live.pop(-step % len(live))
                FIGURES["releases"] += 1
            continue
        wanted = claim(f"c{n}", profile_selector(PROFILES[step]))
        outcome = allocate(PUBLISHED, [wanted], live)
        if outcome.status != Status.SUCCESS:
            FIGURES["refusals"] += 1
            continue
        wanted.status.allocation = outcome.results[0]
        live.append(wanted)
        FIGURES["allocations"] += 1
        FIGURES["max_live"] = max(FIGURES["max_live"], len(live))
        held = _devices(live)
        assert len(held) == len(set(held))
        used = [i for name in held for i in _slices_of(name)]
        assert len(used) == len(set(used)), f"memory slices shared: {held}"
        assert FULL not in held or held == [FULL], f"beside the whole GPU: {held}"


def test_random_claims_and_releases_never_overlap_partitions() -> None:
    """Runs the property (so that its figures can be checked and recorded afterwards)."""
    _no_two_allocations_share_a_memory_slice_nor_sit_beside_the_whole_gpu()
    assert FIGURES["sequences"] >= 100
    assert FIGURES["allocations"] > 0, "the property must exercise allocations"
    assert FIGURES["refusals"] > 0, "and a full GPU"
    assert FIGURES["max_live"] >= 4, "several partitions live at once"
    line = ", ".join(f"{k}={v}" for k, v in FIGURES.items())
    print(f"dynamic-MIG property: {line}")
    if target := os.environ.get("KOPF_DRA_GPU_FIGURES"):
        Path(target).write_text(line + "\n")
