"""The simulated fabric manager's state machine: attach/detach timing, idempotent operation
ids, clusters racing for a device, injected faults, and restarts from the state file."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from operators.fabric.model import (
    DeviceNotFoundError,
    FaultRequest,
    ForbiddenError,
    OperationConflictError,
    OperationRequest,
    TooManyOperationsError,
)
from operators.fabric.simulator import ConfigError, FabricSimulator, parse_config


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


CONFIG = {
    "attachSeconds": 2,
    "detachSeconds": 1,
    "devices": [
        {"model": "A100 80GB", "vendor": "nvidia", "memory": "80Gi", "count": 2},
        {"model": "H100", "memory": "94Gi"},
    ],
}


def make(state: Path | None = None, clock: Clock | None = None) -> tuple[FabricSimulator, Clock]:
    clock = clock or Clock()
    return FabricSimulator(parse_config(CONFIG), state, clock=clock, rng=random.Random(1)), clock


def attach(op: str, device: str, node: str = "n1") -> OperationRequest:
    return OperationRequest(id=op, kind="attach", device=device, node=node)


def detach(op: str, device: str) -> OperationRequest:
    return OperationRequest(id=op, kind="detach", device=device)


def test_inventory_from_config_has_dns_label_ids_and_stable_uuids() -> None:
    sim, _ = make()
    assert sorted(sim.devices) == ["a100-80gb-0", "a100-80gb-1", "h100-0"]
    again, _ = make()
    assert sim.devices["h100-0"].uuid == again.devices["h100-0"].uuid
    assert sim.devices["a100-80gb-0"].memory == "80Gi"


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"devices": [{"model": "x", "memory": "lots"}]}, "devices.0.memory"),
        ({"devices": [{"model": "x", "prefix": "Bad_Prefix"}]}, "prefix"),
        ({"attachSeconds": -1}, "attachSeconds"),
        ({"unknown": 1}, "unknown"),
    ],
)
def test_bad_config_is_reported_with_its_key(config: dict[str, object], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        parse_config(config)


def test_attach_takes_its_time_then_holds_the_device() -> None:
    sim, clock = make()
    op, created = sim.submit(attach("op1", "h100-0"), "c1")
    assert created
    assert (op.state, sim.devices["h100-0"].state) == ("running", "attaching")
    clock.now += 1.9
    assert sim.complete_due() == []
    clock.now += 0.1
    assert [o.id for o in sim.complete_due()] == ["op1"]
    device = sim.devices["h100-0"]
    assert (op.state, device.state, device.node, device.cluster) == (
        "succeeded",
        "attached",
        "n1",
        "c1",
    )
    assert device.attach_count == 1
    assert op.duration == pytest.approx(2.0)


def test_same_operation_id_returns_the_same_operation_and_never_attaches_twice() -> None:
    sim, clock = make()
    first, _ = sim.submit(attach("op1", "h100-0"), "c1")
    again, created = sim.submit(attach("op1", "h100-0"), "c1")
    assert again is first
    assert not created
    clock.now += 5
    sim.complete_due()
    assert sim.submit(attach("op1", "h100-0"), "c1")[0].state == "succeeded"
    assert sim.devices["h100-0"].attach_count == 1
    with pytest.raises(OperationConflictError):
        sim.submit(attach("op1", "a100-80gb-0"), "c1")


def test_another_cluster_cannot_take_a_held_device() -> None:
    sim, _ = make()
    sim.submit(attach("ours", "h100-0"), "c1")
    theirs, _ = sim.submit(attach("theirs", "h100-0", node="x"), "c2")
    assert (theirs.state, theirs.reason) == ("failed", "DeviceTaken")
    assert "c1" not in theirs.message  # whose it is, is not theirs to know
    assert "n1" not in theirs.message
    with pytest.raises(ForbiddenError, match="h100-0: held by another cluster"):
        sim.submit(detach("their-detach", "h100-0"), "c2")
    assert "their-detach" not in sim.operations  # a refused request leaves nothing behind
    assert sim.devices["h100-0"].state == "attaching"


def test_a_second_attach_to_the_same_node_joins_the_running_one() -> None:
    sim, clock = make()
    sim.submit(attach("first", "h100-0"), "c1")
    clock.now += 1
    second, _ = sim.submit(attach("second", "h100-0"), "c1")
    other_node, _ = sim.submit(attach("third", "h100-0", node="n2"), "c1")
    assert second.state == "running"
    assert other_node.reason == "DeviceBusy"
    clock.now += 1
    finished = {o.id: o.state for o in sim.complete_due()}
    assert finished == {"first": "succeeded", "second": "succeeded"}
    assert sim.devices["h100-0"].attach_count == 1
    done, _ = sim.submit(attach("fourth", "h100-0"), "c1")
    assert (done.state, done.reason) == ("succeeded", "AlreadyAttached")


def test_detach_frees_the_device_and_is_idempotent() -> None:
    sim, clock = make()
    sim.submit(attach("a", "h100-0"), "c1")
    busy, _ = sim.submit(detach("too-early", "h100-0"), "c1")
    assert busy.reason == "DeviceBusy"
    clock.now += 2
    sim.complete_due()
    op, _ = sim.submit(detach("d", "h100-0"), "c1")
    assert sim.devices["h100-0"].state == "detaching"
    clock.now += 1
    sim.complete_due()
    assert (op.state, sim.devices["h100-0"].state, sim.devices["h100-0"].node) == (
        "succeeded",
        "free",
        None,
    )
    again, _ = sim.submit(detach("d2", "h100-0"), "c1")
    assert (again.state, again.reason) == ("succeeded", "AlreadyFree")


def test_injected_fault_fails_the_next_attach_only_and_frees_the_device() -> None:
    sim, clock = make()
    sim.inject(FaultRequest(device="h100-0", count=1, reason="AttachFailed", message="link down"))
    op, _ = sim.submit(attach("a", "h100-0"), "c1")
    clock.now += 2
    sim.complete_due()
    assert (op.state, op.reason, op.message) == ("failed", "AttachFailed", "link down")
    assert sim.devices["h100-0"].state == "free"
    retry, _ = sim.submit(attach("b", "h100-0"), "c1")
    clock.now += 2
    sim.complete_due()
    assert retry.state == "succeeded"


def test_failure_rate_one_fails_every_attach() -> None:
    sim, clock = make()
    sim.inject(FaultRequest(rate=1.0))
    ops = [sim.submit(attach(f"a{i}", d), "c1")[0] for i, d in enumerate(["a100-80gb-0", "h100-0"])]
    clock.now += 2
    sim.complete_due()
    assert [o.reason for o in ops] == ["AttachFailed", "AttachFailed"]


def test_unknown_device_is_a_404() -> None:
    sim, _ = make()
    with pytest.raises(DeviceNotFoundError) as raised:
        sim.submit(attach("a", "nope"), "c1")
    assert raised.value.status == 404


def test_restart_from_the_state_file_finishes_the_running_attach_on_time(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    sim, clock = make(state)
    sim.submit(attach("a", "h100-0"), "c1")
    sim.inject(FaultRequest(device="a100-80gb-0", count=2))
    clock.now += 1
    restarted, _ = make(state, clock)
    assert restarted.devices["h100-0"].state == "attaching"
    assert restarted.operations["a"].state == "running"
    assert restarted.faults["a100-80gb-0"][0].count == 2
    clock.now += 1
    assert [o.id for o in restarted.complete_due()] == ["a"]
    assert restarted.devices["h100-0"].attach_count == 1
    # The same id after the restart is the same operation, not a second attach.
    assert restarted.submit(attach("a", "h100-0"), "c1")[1] is False


def test_the_state_file_is_replaced_atomically(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    sim, _ = make(state)
    sim.submit(attach("a", "h100-0"), "c1")
    assert state.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".fabric-state-")]


def test_operations_of_another_cluster_are_forbidden_to_read_or_reuse() -> None:
    sim, _ = make()
    sim.submit(attach("mine", "h100-0"), "c1")
    assert sim.operation("mine", "c1") is not None
    assert sim.operation("unknown", "c2") is None
    with pytest.raises(ForbiddenError) as read:
        sim.operation("mine", "c2")
    assert read.value.status == 403
    with pytest.raises(ForbiddenError):
        sim.submit(attach("mine", "h100-0"), "c2")
    assert sim.list_operations("c2") == []


def test_devices_held_by_another_cluster_show_as_held_without_its_names() -> None:
    sim, _ = make()
    sim.submit(attach("mine", "h100-0", node="secret-node"), "c1")
    theirs = {d.id: d for d in sim.devices_for("c2")}["h100-0"]
    assert (theirs.state, theirs.cluster, theirs.node, theirs.operation) == (
        "attaching",
        None,
        None,
        None,
    )
    ours = {d.id: d for d in sim.devices_for("c1")}["h100-0"]
    assert (ours.cluster, ours.node, ours.operation) == ("c1", "secret-node", "mine")
    assert {d.id: d for d in sim.devices_for("c2")}["a100-80gb-0"].state == "free"


def test_finished_operations_are_kept_per_cluster_up_to_the_limit() -> None:
    """One cluster's churn never pushes out another's operations (their idempotent retries)."""
    clock = Clock()
    sim = FabricSimulator(parse_config(CONFIG), clock=clock, keep_finished=3)
    sim.submit(attach("c2-op", "h100-0"), "c2")
    for i in range(6):
        clock.now += 1
        # Fails at once (held by c2): finished, and counted against c1 only.
        sim.submit(attach(f"c1-op-{i}", "h100-0"), "c1")
    assert [o.id for o in sim.list_operations("c1")] == ["c1-op-3", "c1-op-4", "c1-op-5"]
    assert [o.id for o in sim.list_operations("c2")] == ["c2-op"]
    # A forgotten id may be used again: it is a new operation.
    assert sim.submit(attach("c1-op-0", "h100-0"), "c1")[1] is True


def test_running_operations_per_cluster_are_bounded() -> None:
    sim = FabricSimulator(parse_config(CONFIG), clock=Clock(), max_running=2)
    sim.submit(attach("a", "h100-0"), "c1")
    sim.submit(attach("b", "h100-0"), "c1")  # joins the attach in flight: running too
    with pytest.raises(TooManyOperationsError) as refused:
        sim.submit(attach("c", "a100-80gb-0"), "c1")
    assert refused.value.status == 429
    assert "c" not in sim.operations
    assert sim.submit(attach("d", "a100-80gb-0"), "c2")[0].state == "running"


def test_snapshot_shows_an_operation_and_its_device_at_one_revision() -> None:
    sim, clock = make()
    before = sim.snapshot("c1")
    sim.submit(attach("a", "h100-0"), "c1")
    clock.now += 2
    sim.complete_due()
    after = sim.snapshot("c1")
    assert after.revision == before.revision + 2
    assert after.epoch == before.epoch
    [op] = after.operations
    device = {d.id: d for d in after.devices}["h100-0"]
    assert (op.state, device.state, device.operation) == ("succeeded", "attached", "a")
    assert after.cluster == "c1"
    assert sim.snapshot("c2").operations == []
