"""NodeOrder: the ranking kept across cycles is the one a fresh sort of every bound gives."""

from __future__ import annotations

import dataclasses
import typing
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.api.core import Node
from operators.scheduling.nodes import NodeUsage
from operators.scheduling.score import POLICIES, NodeOrder, Score, ScoreKey, ScorePolicy

from .builders import node

# One step of a cluster's life between two cycles, on node i (of at most six):
# ("usage", i, cpu): a pod lands or leaves (a new NodeUsage, or none at 0);
# ("resize", i, cpu): the node is updated (a new object, another allocatable cpu);
# ("remove", i, _) / ("add", i, cpu): it leaves, or joins; ("cycle", cpu, _): a pod asks
# for cpu (another request shape) and is ranked.
STEPS = st.lists(
    st.tuples(
        st.sampled_from(["usage", "resize", "remove", "add", "cycle"]),
        st.integers(min_value=0, max_value=5),
        st.integers(min_value=0, max_value=4),
    ),
    max_size=40,
)


def _node(i: int, cpu: int) -> Node:
    return node(f"node-{i}", allocatable={"cpu": str(cpu + 1), "memory": "8Gi", "pods": "10"})


def _fresh(
    nodes: list[Node], usage: dict[str, NodeUsage], requests: dict[str, Decimal], p: ScorePolicy
) -> list[ScoreKey]:
    return sorted(
        Score.upper_bound(n, usage.get(n.metadata.name or "", NodeUsage()), requests, p).key()
        for n in nodes
    )


@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=150, deadline=None)
@given(steps=STEPS)
def test_the_kept_ranking_is_a_fresh_sort(
    policy: ScorePolicy, steps: list[tuple[str, int, int]]
) -> None:
    order = NodeOrder(shapes=2)  # fewer shapes than requests: evicted rankings come back
    by_name = {f"node-{i}": _node(i, 3) for i in range(4)}
    usage: dict[str, NodeUsage] = {}
    nodes = list(by_name.values())
    for step, i, cpu in steps:
        name = f"node-{i}"
        if step == "usage":
            if cpu:
                usage[name] = NodeUsage({"cpu": Decimal(cpu)}, 1)
            else:
                usage.pop(name, None)
        elif step == "resize" and name in by_name:
            by_name[name] = _node(i, cpu)
            nodes = list(by_name.values())  # a node's change lists the kind anew
        elif step == "remove":
            by_name.pop(name, None)
            nodes = list(by_name.values())
        elif step == "add" and name not in by_name:
            by_name[name] = _node(i, cpu)
            nodes = list(by_name.values())
        requests = {"cpu": Decimal(i % 3)} if step == "cycle" else {}
        keys, ranked = order.ranked(nodes, usage, requests, policy)
        assert keys == _fresh(nodes, usage, requests, policy)
        assert [n.metadata.name for n in ranked] == [k[3] for k in keys]
        assert all(by_name[n.metadata.name or ""] is n for n in ranked)


def test_an_unchanged_cluster_is_not_ranked_again() -> None:
    nodes = [_node(i, 3) for i in range(3)]
    order = NodeOrder()
    first = order.ranked(nodes, {}, {}, "least-allocated")
    assert order.ranked(nodes, {}, {}, "least-allocated") == first
    basis = dict(order._rankings[("least-allocated", ())].basis)
    order.ranked(nodes, {"node-1": NodeUsage({"cpu": Decimal(1)}, 1)}, {}, "least-allocated")
    after = order._rankings[("least-allocated", ())].basis
    # Only node-1's bound was computed again: the others keep the very same entries.
    assert [after[n] is basis[n] for n in ("node-0", "node-1", "node-2")] == [True, False, True]


def test_key_is_every_field_of_score_in_order() -> None:
    """``Score.key()`` is what ranking and search compare, written out field by field: deriving
    it (``operator.attrgetter`` over the fields) costs half as much again per call, and it runs
    for every node of every cycle. So a field added to ``Score`` must be added to ``key()`` and
    to ``ScoreKey`` by hand; this test is what notices when it was not."""
    fields = dataclasses.fields(Score)
    values = [object() for _ in fields]
    assert Score(*values).key() == tuple(values)  # type: ignore[arg-type]
    assert [a.__name__ for a in typing.get_args(ScoreKey)] == [f.type for f in fields]
