"""The driver's startup verdict on its identity's node-scoped status rights."""

from __future__ import annotations

from operators.driver.identity import StatusRights

OWN_NODE = ("associated-node:patch", "associated-node:update")


def test_the_node_scoped_verbs_alone_are_what_a_driver_should_hold() -> None:
    rights = StatusRights("gpu.example.com", (), OWN_NODE)
    assert rights.problem() is None
    assert rights.warning() is None


def test_any_arbitrary_node_verb_is_a_problem_naming_it_and_the_way_out() -> None:
    rights = StatusRights("gpu.example.com", ("arbitrary-node:update",), OWN_NODE)
    problem = rights.problem()
    assert problem is not None
    assert "arbitrary-node:update for driver gpu.example.com" in problem
    assert "--allow-arbitrary-node-status" in problem


def test_missing_node_scoped_verbs_are_a_warning_only() -> None:
    rights = StatusRights("gpu.example.com", (), ("associated-node:patch",))
    assert rights.problem() is None
    assert "associated-node:update" in (rights.warning() or "")
