"""Properties of the allocator on random pools, claims and allocation histories.

Histories are made by the allocator itself (claims allocated one after another), so the
starting state is always one the scheduler could have produced. Checked for every outcome:
no dedicated device twice, counters and capacities never exceeded, constraints hold, every
result device exists and is reachable; and "unsatisfiable" agrees with an exhaustive search.

distinctAttribute is generated only for single-device requests: upstream (and so we) keep one
value per request name, which is weaker than "pairwise distinct" for counts above one.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators.allocator import AllocatedState, Allocator, Features, Status
from operators.api.ids import DeviceID
from operators.api.quantity import Quantity
from operators.api.resource import AllocationResult, ResourceClaim, ResourceSlice

from .builders import (
    ALL_NODES,
    NODE1,
    NODE2,
    REGION1,
    J,
    attr_i,
    claim,
    consumes,
    counter_set,
    device,
    device_class,
    distinct_attribute,
    match_attribute,
    node,
    pool,
    request,
    slice_,
)
from .engine import engine

DRIVER = "gpu.example.com"
FEATURES = Features.all()
NUMA = f"{DRIVER}/numa"


@dataclass
class World:
    slices: list[ResourceSlice]
    claims: list[ResourceClaim]
    history: list[ResourceClaim]
    counters: dict[tuple[str, str], dict[str, Decimal]] = field(default_factory=dict)
    shareable: bool = False


@st.composite
def worlds(draw: st.DrawFn, shareable: bool = False) -> World:
    slices: list[ResourceSlice] = []
    counters: dict[tuple[str, str], dict[str, Decimal]] = {}
    for p in range(draw(st.integers(1, 2))):
        pool_name = f"pool-{p}"
        where = draw(st.sampled_from([NODE1, NODE1, ALL_NODES, NODE2]))
        with_counters = draw(st.booleans())
        devices: list[J] = []
        for d in range(draw(st.integers(1, 4))):
            kw: dict[str, Any] = {}
            if with_counters:
                kw["consumes"] = [consumes("mem", {"gb": draw(st.integers(1, 4))})]
            capacity = None
            if shareable and draw(st.booleans()):
                kw["multi"] = True
                capacity = {"bw": draw(st.integers(2, 8))}
            devices.append(
                device(f"dev-{d}", capacity, {"numa": attr_i(draw(st.integers(0, 2)))}, **kw)
            )
        count = 2 if with_counters else 1
        slices.append(slice_(f"{pool_name}-a", where, pool(pool_name, count), DRIVER, *devices))
        if with_counters:
            total = draw(st.integers(1, 8))
            counters[(DRIVER, pool_name)] = {"gb": Decimal(total)}
            slices.append(
                slice_(
                    f"{pool_name}-b",
                    where,
                    pool(pool_name, count),
                    DRIVER,
                    counter_sets=[counter_set("mem", {"gb": total})],
                )
            )

    def make_claim(name: str) -> ResourceClaim:
        requests: list[J] = []
        single = True
        for r in range(draw(st.integers(1, 2))):
            n = draw(st.integers(1, 2))
            single = single and n == 1
            selectors = []
            if draw(st.booleans()):
                selectors.append(f'device.attributes["{DRIVER}"].numa <= {draw(st.integers(0, 2))}')
            req = request(f"r{r}", "gpu", n, *selectors)
            if shareable and draw(st.booleans()):
                req["exactly"]["capacity"] = {"requests": {"bw": str(draw(st.integers(1, 4)))}}
            requests.append(req)
        constraints: list[J] = []
        kind = draw(st.sampled_from(["none", "match", "distinct"]))
        if kind == "match":
            constraints.append(match_attribute(NUMA))
        elif kind == "distinct" and single:
            constraints.append(distinct_attribute(NUMA))
        return claim(name, *requests, constraints=constraints, namespace="ns")

    history = [make_claim(f"old-{i}") for i in range(draw(st.integers(0, 3)))]
    claims = [make_claim(f"new-{i}") for i in range(draw(st.integers(1, 2)))]
    return World(slices, claims, history, counters, shareable)


def share_ids() -> Iterator[str]:
    for i in itertools.count():
        yield f"00000000-0000-0000-0000-{i:012d}"


def allocate_history(world: World) -> list[ResourceClaim]:
    """Allocate the history claims one by one on node-1, as the scheduler would have."""
    ids = share_ids()
    done: list[ResourceClaim] = []
    for c in world.history:
        state = AllocatedState.from_claims(done, FEATURES)
        a = Allocator(
            FEATURES,
            state,
            [device_class("gpu", DRIVER)],
            world.slices,
            engine(),
            share_ids=lambda: next(ids),
        )
        outcome = a.allocate(node(NODE1, REGION1), [c])
        if outcome.fits:
            obj = c.dump()
            obj["status"] = {"allocation": outcome.results[0].dump()}
            done.append(ResourceClaim.load(obj))
    return done


def devices_by_id(slices: Sequence[ResourceSlice]) -> dict[DeviceID, Any]:
    out = {}
    for s in slices:
        for d in s.spec.devices:
            out[s.pool_id.device(d.name or "")] = (s, d)
    return out


def check_valid(
    world: World, allocated: list[ResourceClaim], results: Sequence[AllocationResult]
) -> None:
    known = devices_by_id(world.slices)
    exclusive: Counter[DeviceID] = Counter()
    capacity: dict[DeviceID, Decimal] = defaultdict(Decimal)
    chosen: list[DeviceID] = []
    all_results = [r for c in allocated for r in c.allocated_results()]
    for res in results:
        all_results.extend(res.devices.results)
    for r in all_results:
        dev_id = r.device_id
        assert dev_id in known, f"{dev_id} does not exist"
        if r.share_id is not None:
            for value in r.consumed_capacity.values():
                capacity[dev_id] += value.value
        else:
            exclusive[dev_id] += 1
    for dev_id, n in exclusive.items():
        assert n == 1, f"{dev_id} allocated {n} times"
    for dev_id, used in capacity.items():
        s, d = known[dev_id]
        assert dev_id not in exclusive, f"{dev_id} both shared and dedicated"
        limit = d.capacity["bw"].value.value
        assert used <= limit, f"{dev_id} capacity {used} > {limit}"
    # Counters: every device that holds a dedicated or shared allocation consumes once.
    users = set(exclusive) | set(capacity)
    for (driver, pool_name), total in world.counters.items():
        used_gb = sum(
            (
                c.value.value
                for dev_id in users
                if dev_id.driver == driver and dev_id.pool == pool_name
                for use in known[dev_id][1].consumes_counters
                for c in [use.counters["gb"]]
                if c.value is not None
            ),
            Decimal(0),
        )
        assert used_gb <= total["gb"], f"counters of {pool_name}: {used_gb} > {total['gb']}"
    # Reachability and constraints for the new results.
    n1 = node(NODE1, REGION1)
    for claim_, res in zip(world.claims, results, strict=True):
        values: list[int | None] = []
        for r in res.devices.results:
            chosen.append(r.device_id)
            s, d = known[r.device_id]
            assert s.spec.all_nodes or s.spec.node_name == n1.metadata.name
            attr = d.attributes.get("numa")
            values.append(attr.int_ if attr is not None else None)
        for c in claim_.spec.devices.constraints:
            if c.match_attribute:
                assert len(set(values)) <= 1, f"matchAttribute broken: {values}"
            if c.distinct_attribute:
                assert len(set(values)) == len(values), f"distinctAttribute broken: {values}"


def _candidates(world: World, req: Any, history_ids: set[DeviceID]) -> list[DeviceID]:
    n1 = node(NODE1, REGION1)
    out = []
    for s in world.slices:
        if not (s.spec.all_nodes or s.spec.node_name == n1.metadata.name):
            continue
        for d in s.spec.devices:
            dev_id = s.pool_id.device(d.name or "")
            if dev_id in history_ids:
                continue
            ok = True
            for sel in req.exactly.selectors:
                bound = int(sel.cel.expression.rsplit("<=", 1)[1])
                ok = ok and (d.attributes["numa"].int_ or 0) <= bound
            if ok:
                out.append(dev_id)
    return out


def exhaustive(world: World, allocated: list[ResourceClaim]) -> bool:
    """Is there any assignment for the new claims (dedicated devices only)?"""
    known = devices_by_id(world.slices)
    taken = {r.device_id for c in allocated for r in c.allocated_results()}
    slots: list[tuple[int, Any]] = [
        (ci, r) for ci, c in enumerate(world.claims) for r in c.spec.devices.requests
    ]
    options = [
        list(itertools.combinations(_candidates(world, r, taken), r.exactly.count or 1))
        for _, r in slots
    ]
    for combo in itertools.product(*options):
        flat = [d for group in combo for d in group]
        if len(set(flat)) != len(flat):
            continue
        used: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
        for dev_id in [*flat, *taken]:
            for use in known[dev_id][1].consumes_counters:
                c = use.counters["gb"].value
                used[(dev_id.driver, dev_id.pool)] += c.value if c is not None else Decimal(0)
        if any(v > world.counters[k]["gb"] for k, v in used.items()):
            continue
        ok = True
        for ci, c in enumerate(world.claims):
            numas = [
                known[d][1].attributes["numa"].int_
                for (cj, _), group in zip(slots, combo, strict=True)
                if cj == ci
                for d in group
            ]
            for con in c.spec.devices.constraints:
                if con.match_attribute and len(set(numas)) > 1:
                    ok = False
                if con.distinct_attribute and len(set(numas)) != len(numas):
                    ok = False
        if ok:
            return True
    return False


def run(world: World) -> tuple[list[ResourceClaim], Any]:
    allocated = allocate_history(world)
    ids = share_ids()
    a = Allocator(
        FEATURES,
        AllocatedState.from_claims(allocated, FEATURES),
        [device_class("gpu", DRIVER)],
        world.slices,
        engine(),
        share_ids=lambda: next(ids),
    )
    return allocated, a.allocate(node(NODE1, REGION1), world.claims)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_results_are_valid_and_complete(world: World) -> None:
    allocated, outcome = run(world)
    assert outcome.status is not Status.ERROR
    if outcome.fits:
        check_valid(world, allocated, outcome.results)
        assert len(outcome.results) == len(world.claims)
    else:
        assert outcome.reasons
        assert not exhaustive(world, allocated), "exhaustive search found a solution"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(shareable=True))
def test_shared_capacity_and_counters_never_exceeded(world: World) -> None:
    allocated, outcome = run(world)
    assert outcome.status is not Status.ERROR
    if outcome.fits:
        check_valid(world, allocated, outcome.results)


@settings(max_examples=50, deadline=None)
@given(worlds(shareable=True))
def test_deterministic(world: World) -> None:
    _, first = run(world)
    _, second = run(world)
    assert first.status == second.status
    assert [r.dump() for r in first.results] == [r.dump() for r in second.results]


def test_quantity_is_exact() -> None:
    """The properties sum Decimal values; a sanity check that quantities parse exactly."""
    assert Quantity("1.5").value == Decimal("1.5")
