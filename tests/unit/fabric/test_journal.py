"""The fabric manager's state on disk: a request writes what it changed (a journal line), not
the whole state; restarts restore everything; compaction, torn tails and crashes between a
snapshot and the journal's truncation lose nothing and bring nothing old back."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from operators.fabric.journal import Journal, JournalError
from operators.fabric.model import FaultRequest, OperationRequest
from operators.fabric.simulator import FabricSimulator, parse_config

CONFIG = {
    "attachSeconds": 2,
    "detachSeconds": 1,
    "devices": [{"model": "A100", "count": 50}],
}
LABELS = {"claim": "ns/" + "c" * 300, "claimUID": "0" * 36}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make(state: Path, clock: Clock, compact_bytes: int = 1 << 20) -> FabricSimulator:
    return FabricSimulator(
        parse_config(CONFIG), state, clock=clock, rng=random.Random(1), compact_bytes=compact_bytes
    )


def attach(op: str, device: str) -> OperationRequest:
    return OperationRequest(id=op, kind="attach", device=device, node="n1", labels=LABELS)


def journal_of(state: Path) -> Path:
    return state.with_name(state.name + ".journal")


def test_a_request_appends_what_it_changed_and_never_rewrites_the_state_file(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state.json"
    clock = Clock()
    sim = make(state, clock)
    before = state.stat()
    growth = []
    for i in range(200):
        size = journal_of(state).stat().st_size if journal_of(state).exists() else 0
        sim.submit(attach(f"op-{i}", f"a100-{i % 50}"), "c1")
        growth.append(journal_of(state).stat().st_size - size)
    after = state.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    # The 200th request writes what the 1st did (one operation, one device), whatever the
    # state holds by then: a few hundred bytes, not the ~100 KB of 200 operations.
    assert max(growth) < 2 * min(growth)
    assert max(growth) < 2048


def test_restart_restores_everything_from_snapshot_and_journal(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    clock = Clock()
    sim = make(state, clock)
    sim.submit(attach("a", "a100-0"), "c1")
    sim.submit(attach("b", "a100-1"), "c2")
    clock.now += 2
    sim.complete_due()
    sim.submit(OperationRequest(id="d", kind="detach", device="a100-0"), "c1")
    sim.inject(FaultRequest(device="a100-2", count=3, message="link down"))
    sim.inject(FaultRequest(rate=0.25))
    restarted = make(state, clock)
    assert restarted.devices == sim.devices
    assert restarted.operations == sim.operations
    assert restarted.faults == sim.faults
    assert restarted.failure_rate == 0.25
    assert (restarted.epoch, restarted.revision) == (sim.epoch, sim.revision)


def test_compaction_writes_the_state_once_and_empties_the_journal(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    clock = Clock()
    sim = make(state, clock, compact_bytes=4096)
    for i in range(40):
        sim.submit(attach(f"op-{i}", f"a100-{i}"), "c1")
    # Compacted at least once (the journal never grows past the state's size for long) ...
    assert journal_of(state).stat().st_size < state.stat().st_size + 4096
    assert json.loads(state.read_text())["revision"] > 1
    restarted = make(state, clock)
    assert restarted.operations == sim.operations
    assert restarted.revision == sim.revision


def test_a_torn_last_line_is_dropped_and_the_journal_stays_appendable(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    clock = Clock()
    sim = make(state, clock)
    sim.submit(attach("a", "a100-0"), "c1")
    with journal_of(state).open("ab") as f:
        f.write(b'{"revision": 99, "operations": [{"id": "half')  # the crash mid-append
    restarted = make(state, clock)
    assert set(restarted.operations) == {"a"}
    restarted.submit(attach("b", "a100-1"), "c1")
    again = make(state, clock)
    assert set(again.operations) == {"a", "b"}


def test_lines_older_than_the_snapshot_are_skipped(tmp_path: Path) -> None:
    """A crash after a compaction's rename, before the journal was emptied."""
    state = tmp_path / "state.json"
    clock = Clock()
    sim = make(state, clock)
    sim.submit(attach("a", "a100-0"), "c1")
    old_journal = tmp_path / "old.journal"
    shutil.copy(journal_of(state), old_journal)
    clock.now += 2
    sim.complete_due()  # a100-0 attached
    sim.save()  # snapshot with it, journal emptied
    shutil.copy(old_journal, journal_of(state))  # ... as if the truncation never happened
    restarted = make(state, clock)
    assert restarted.devices["a100-0"].state == "attached"
    assert restarted.operations["a"].state == "succeeded"


def test_state_files_of_the_previous_format_still_load(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    device = {"id": "a100-0", "model": "A100", "state": "attached", "cluster": "c1", "node": "n1"}
    state.write_text(json.dumps({"version": 1, "devices": [device], "operations": []}))
    restarted = make(state, Clock())
    assert restarted.devices["a100-0"].held_by("c1", "n1")


@pytest.mark.parametrize(
    ("content", "problem"),
    [("not json", "Expecting value"), ("[]", "not a JSON object"), ('{"devices": [{}]}', "id")],
)
def test_an_unreadable_state_file_names_the_file(
    tmp_path: Path, content: str, problem: str
) -> None:
    state = tmp_path / "state.json"
    state.write_text(content)
    with pytest.raises(JournalError, match=problem) as raised:
        make(state, Clock())
    assert str(state) in str(raised.value)


def test_journal_load_returns_nothing_for_a_fresh_path(tmp_path: Path) -> None:
    assert Journal(tmp_path / "none.json").load() == (None, [])
