"""AllocatedTracker: claim-by-claim updates give the state a full rebuild gives."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.allocator import AllocatedState, Features
from operators.allocator.state import AllocatedTracker, Holding
from operators.api.ids import DeviceID
from operators.api.resource import ResourceClaim

FEATURES = Features.all()
DEVICES = ["d0", "d1", "d2"]
ALL = tuple(DeviceID("drv", "pool", d) for d in DEVICES)


def _reference(claims: list[ResourceClaim]) -> AllocatedState:
    """The rule spelled out once more, claim by claim, as upstream's claim tracker reads it."""
    devices: set[DeviceID] = set()
    shared: set[tuple[DeviceID, str]] = set()
    capacity: dict[DeviceID, dict[str, Decimal]] = {}
    for claim in claims:
        for r in claim.allocated_results():
            if r.admin_access:
                continue
            if r.share_id is not None:
                shared.add((r.device_id, r.share_id))
                if r.consumed_capacity:
                    have = capacity.setdefault(r.device_id, {})
                    for name, q in r.consumed_capacity.items():
                        have[name] = have.get(name, Decimal(0)) + q.value
                continue
            devices.add(r.device_id)
    return AllocatedState(frozenset(devices), frozenset(shared), capacity)


results = st.fixed_dictionaries(
    {
        "request": st.just("r"),
        "driver": st.just("drv"),
        "pool": st.just("pool"),
        "device": st.sampled_from(DEVICES),
    },
    optional={
        "adminAccess": st.booleans(),
        "shareID": st.sampled_from(["s1", "s2"]),
        "consumedCapacity": st.dictionaries(
            st.sampled_from(["bw", "mem"]), st.sampled_from(["0", "1", "10Gi", "500m"]), max_size=2
        ),
    },
)


def _claim(name: str, allocated: list[dict[str, Any]] | None) -> ResourceClaim:
    body: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {},
    }
    if allocated is not None:
        body["status"] = {"allocation": {"devices": {"results": allocated}}}
    return ResourceClaim.load(body)


updates = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c", "d"]),
        st.one_of(st.none(), st.lists(results, max_size=3)),
    ),
    max_size=25,
)


@pytest.mark.parametrize("rebase", [0, 1, AllocatedTracker.REBASE_MIN])
@settings(max_examples=300, deadline=None)
@given(history=updates)
def test_updates_match_a_full_rebuild(rebase: int, history: list[tuple[str, Any]]) -> None:
    """Whether the state's devices are rebuilt on every change (``rebase`` 0), now and then, or
    kept as changes over a base (``DeviceSet``), they are the ones a full rebuild finds, and
    taking holdings away or adding them (preemption's victims, nominated pods) agrees too."""
    tracker: AllocatedTracker[str] = AllocatedTracker(FEATURES)
    tracker.REBASE_MIN = rebase
    current: dict[str, ResourceClaim] = {}
    for name, allocated in history:
        claim = _claim(name, allocated)
        tracker.track(name, claim if allocated is not None else None)
        if allocated is None:
            current.pop(name, None)
        else:
            current[name] = claim
        state, reference = tracker.state(), _reference(list(current.values()))
        assert state == reference
        assert sorted(map(str, state.devices)) == sorted(map(str, reference.devices))
        assert [state.is_allocated(d) for d in ALL] == [reference.is_allocated(d) for d in ALL]
        moved = [Holding.of(c, FEATURES) for c in current.values()][:2]
        for changed, expected in (
            (state.without(moved), reference.without(moved)),
            (state.plus([Holding(devices=ALL[:2])]), reference.plus([Holding(devices=ALL[:2])])),
        ):
            assert changed == expected
            assert [d in changed.devices for d in ALL] == [d in expected.devices for d in ALL]
        for device in DEVICES:
            did = DeviceID("drv", "pool", device)
            assert tracker.users(did) == {
                k
                for k, c in current.items()
                for r in c.allocated_results()
                if r.device_id == did and not r.admin_access
            }
    assert AllocatedState.from_claims(current.values(), FEATURES) == _reference(
        list(current.values())
    )


def test_state_object_is_reused_until_something_changes() -> None:
    tracker: AllocatedTracker[str] = AllocatedTracker(FEATURES)
    claim = _claim("a", [{"request": "r", "driver": "drv", "pool": "p", "device": "d0"}])
    tracker.track("a", claim)
    first = tracker.state()
    tracker.track("a", claim)
    assert tracker.state() is first
    tracker.track("a", None)
    assert tracker.state() is not first
    assert not tracker.state().is_allocated(DeviceID("drv", "p", "d0"))


def test_the_selector_engine_is_bounded_and_forgets_devices_gone() -> None:
    """Tenants write the expressions: the results kept are bounded, and a device replaced
    (its slice republished) takes its cached view with it."""
    import gc

    from operators.allocator.selectors import CelSelectorEngine
    from operators.api.resource import Device

    engine = CelSelectorEngine(result_limit=3)
    device = Device.load({"name": "gpu-0"})
    for i in range(3):
        assert engine.device_matches(f"{i} == {i}", "d.example.com", device)
    assert engine._results == 3
    assert not engine.device_matches("1 == 2", "d.example.com", device)
    assert engine._results == 1  # past the bound: dropped, then the new result kept
    other = Device.load({"name": "gpu-1"})
    engine.device_matches("true", "d.example.com", other)
    assert len(engine._views) == 2
    del other
    gc.collect()
    assert len(engine._views) == 1
