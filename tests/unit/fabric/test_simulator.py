"""The simulated fabric manager's state machine: attach/detach timing, idempotent operation
ids, clusters racing for a device, injected faults, and restarts from the state file."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from operators.fabric.model import (
    DeviceNotFoundError,
    FaultRequest,
    OperationConflictError,
    OperationRequest,
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


def attach(op: str, device: str, node: str = "n1", cluster: str = "c1") -> OperationRequest:
    return OperationRequest(id=op, kind="attach", device=device, node=node, cluster=cluster)


def detach(op: str, device: str, cluster: str = "c1") -> OperationRequest:
    return OperationRequest(id=op, kind="detach", device=device, cluster=cluster)


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
    op, created = sim.submit(attach("op1", "h100-0"))
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
    first, _ = sim.submit(attach("op1", "h100-0"))
    again, created = sim.submit(attach("op1", "h100-0"))
    assert again is first
    assert not created
    clock.now += 5
    sim.complete_due()
    assert sim.submit(attach("op1", "h100-0"))[0].state == "succeeded"
    assert sim.devices["h100-0"].attach_count == 1
    with pytest.raises(OperationConflictError):
        sim.submit(attach("op1", "a100-80gb-0"))


def test_another_cluster_cannot_take_a_held_device() -> None:
    sim, _ = make()
    sim.submit(attach("ours", "h100-0", cluster="c1"))
    theirs, _ = sim.submit(attach("theirs", "h100-0", cluster="c2"))
    assert (theirs.state, theirs.reason) == ("failed", "DeviceTaken")
    assert "cluster c1" in theirs.message
    refused, _ = sim.submit(detach("their-detach", "h100-0", cluster="c2"))
    assert refused.reason == "NotOwner"


def test_a_second_attach_to_the_same_node_joins_the_running_one() -> None:
    sim, clock = make()
    sim.submit(attach("first", "h100-0"))
    clock.now += 1
    second, _ = sim.submit(attach("second", "h100-0"))
    other_node, _ = sim.submit(attach("third", "h100-0", node="n2"))
    assert second.state == "running"
    assert other_node.reason == "DeviceBusy"
    clock.now += 1
    finished = {o.id: o.state for o in sim.complete_due()}
    assert finished == {"first": "succeeded", "second": "succeeded"}
    assert sim.devices["h100-0"].attach_count == 1
    done, _ = sim.submit(attach("fourth", "h100-0"))
    assert (done.state, done.reason) == ("succeeded", "AlreadyAttached")


def test_detach_frees_the_device_and_is_idempotent() -> None:
    sim, clock = make()
    sim.submit(attach("a", "h100-0"))
    busy, _ = sim.submit(detach("too-early", "h100-0"))
    assert busy.reason == "DeviceBusy"
    clock.now += 2
    sim.complete_due()
    op, _ = sim.submit(detach("d", "h100-0"))
    assert sim.devices["h100-0"].state == "detaching"
    clock.now += 1
    sim.complete_due()
    assert (op.state, sim.devices["h100-0"].state, sim.devices["h100-0"].node) == (
        "succeeded",
        "free",
        None,
    )
    again, _ = sim.submit(detach("d2", "h100-0"))
    assert (again.state, again.reason) == ("succeeded", "AlreadyFree")


def test_injected_fault_fails_the_next_attach_only_and_frees_the_device() -> None:
    sim, clock = make()
    sim.inject(FaultRequest(device="h100-0", count=1, reason="AttachFailed", message="link down"))
    op, _ = sim.submit(attach("a", "h100-0"))
    clock.now += 2
    sim.complete_due()
    assert (op.state, op.reason, op.message) == ("failed", "AttachFailed", "link down")
    assert sim.devices["h100-0"].state == "free"
    retry, _ = sim.submit(attach("b", "h100-0"))
    clock.now += 2
    sim.complete_due()
    assert retry.state == "succeeded"


def test_failure_rate_one_fails_every_attach() -> None:
    sim, clock = make()
    sim.inject(FaultRequest(rate=1.0))
    ops = [sim.submit(attach(f"a{i}", d))[0] for i, d in enumerate(["a100-80gb-0", "h100-0"])]
    clock.now += 2
    sim.complete_due()
    assert [o.reason for o in ops] == ["AttachFailed", "AttachFailed"]


def test_unknown_device_is_a_404() -> None:
    sim, _ = make()
    with pytest.raises(DeviceNotFoundError) as raised:
        sim.submit(attach("a", "nope"))
    assert raised.value.status == 404


def test_restart_from_the_state_file_finishes_the_running_attach_on_time(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    sim, clock = make(state)
    sim.submit(attach("a", "h100-0"))
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
    assert restarted.submit(attach("a", "h100-0"))[1] is False


def test_the_state_file_is_replaced_atomically(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    sim, _ = make(state)
    sim.submit(attach("a", "h100-0"))
    assert state.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".fabric-state-")]
