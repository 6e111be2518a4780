"""The in-flight ledger: allocations chosen or written but not yet visible in the claim cache."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from operators.api.resource import ResourceClaim
from operators.scheduling.ledger import InFlightLedger
from tests.unit.allocator.builders import (
    CLAIM0,
    CLAIM1,
    DEVICE1,
    DRIVER_A,
    POOL1,
    REQ0,
    allocation,
    claim,
    local_node_selector,
    request,
    result,
)

from .builders import NS, in_namespace

KEY0, KEY1 = f"{NS}/{CLAIM0}", f"{NS}/{CLAIM1}"


def cached(version: str | None, *, uid: str = "uid-0", name: str = CLAIM0) -> ResourceClaim:
    """The claim as the cache shows it: unallocated."""
    return in_namespace(claim(name, request(REQ0, "class-a")), uid=uid, resource_version=version)


def chosen(version: str | None, *, uid: str = "uid-0", name: str = CLAIM0) -> ResourceClaim:
    """The claim with the allocation this cycle chose (as reserved, or as the write returned)."""
    return in_namespace(
        claim(name, request(REQ0, "class-a")),
        uid=uid,
        resource_version=version,
        allocation=allocation(
            local_node_selector("node-1"), result(REQ0, DRIVER_A, POOL1, DEVICE1)
        ),
        reserved_for=["pod-uid"],
    )


def keyed(c: ResourceClaim) -> tuple[str, ResourceClaim]:
    """(key, claim): the ledger is keyed by whatever key type its owner uses."""
    return c.key, c


def test_empty() -> None:
    ledger: InFlightLedger[str] = InFlightLedger()
    assert len(ledger) == 0
    assert KEY0 not in ledger
    assert ledger.get(KEY0) is None
    c = cached("1")
    ledger.observe(KEY0, c)  # unknown keys are ignored
    ledger.remove(KEY0)
    assert len(ledger) == 0


def test_reserve_shows_the_claim_in_flight() -> None:
    ledger: InFlightLedger[str] = InFlightLedger()
    target = chosen("10")
    ledger.reserve(*keyed(target))
    assert KEY0 in ledger
    assert len(ledger) == 1
    assert ledger.get(KEY0) is target
    assert ledger.get(KEY0).is_allocated  # type: ignore[union-attr]
    assert ledger.get(KEY1) is None


@pytest.mark.parametrize("seen", ["10", "11", "12", "999", None])
def test_in_flight_entry_survives_any_version(seen: str | None) -> None:
    """Before our write returned, no cached version can have our allocation in it: keep."""
    ledger: InFlightLedger[str] = InFlightLedger()
    ledger.reserve(*keyed(chosen("10")))
    ledger.observe(KEY0, cached(seen))
    assert KEY0 in ledger


@pytest.mark.parametrize(
    ("seen", "kept"),
    [
        pytest.param("10", True, id="the-version-the-cycle-read"),
        pytest.param("11", True, id="after-our-finalizer-patch"),
        pytest.param("9", True, id="a-stale-event"),
        pytest.param("12", False, id="our-write"),
        pytest.param("13", False, id="after-our-write"),
        pytest.param("100", False, id="much-later"),
        pytest.param(None, True, id="no-version"),
        pytest.param("not-a-number", True, id="unparsable-version"),
    ],
)
def test_written_entry_dropped_once_the_cache_caught_up(seen: str | None, kept: bool) -> None:
    ledger: InFlightLedger[str] = InFlightLedger()
    ledger.reserve(*keyed(chosen("10")))
    ledger.written(*keyed(chosen("12")))
    ledger.observe(KEY0, cached(seen))  # only the version matters
    assert (KEY0 in ledger) is kept


def test_versions_compare_as_integers() -> None:
    """ "9" < "10" as numbers though not as strings."""
    ledger: InFlightLedger[str] = InFlightLedger()
    ledger.written(*keyed(chosen("10")))
    ledger.observe(KEY0, cached("9"))
    assert KEY0 in ledger
    ledger.observe(KEY0, chosen("10"))
    assert KEY0 not in ledger


def test_finalizer_patch_then_status_write() -> None:
    """The double-allocation regression: the finalizer patch bumps the claim's version before
    our status write; seeing it must not drop the entry, or the next cycle would give the
    same device away while the cache still shows the claim unallocated."""
    ledger: InFlightLedger[str] = InFlightLedger()
    target = chosen("10")
    ledger.reserve(*keyed(target))  # the cycle read version 10
    ledger.observe(KEY0, cached("11"))  # the finalizer patch arrives first
    assert ledger.get(KEY0) is target
    written = chosen("12")
    ledger.written(*keyed(written))  # the status write returned version 12
    ledger.observe(KEY0, cached("11"))  # a late event of the finalizer patch
    assert ledger.get(KEY0) is written
    ledger.observe(KEY0, chosen("12"))  # the cache shows our write
    assert KEY0 not in ledger
    assert ledger.get(KEY0) is None  # the cache is the truth again


def test_write_event_before_written_is_recorded() -> None:
    """The watch may deliver our write before the API call returns; the entry then stays
    (harmlessly: it equals the cache) until the next event or the claim's deletion."""
    ledger: InFlightLedger[str] = InFlightLedger()
    ledger.reserve(*keyed(chosen("10")))
    ledger.observe(KEY0, chosen("12"))
    ledger.written(*keyed(chosen("12")))
    assert KEY0 in ledger
    ledger.observe(KEY0, chosen("13"))
    assert KEY0 not in ledger


@pytest.mark.parametrize("written", [False, True])
def test_dropped_when_the_claim_is_gone(written: bool) -> None:
    ledger: InFlightLedger[str] = InFlightLedger()
    ledger.reserve(*keyed(chosen("10")))
    if written:
        ledger.written(*keyed(chosen("12")))
    ledger.observe(KEY0, None)
    assert KEY0 not in ledger


@pytest.mark.parametrize("written", [False, True])
def test_dropped_when_the_claim_was_replaced(written: bool) -> None:
    """Same name, new uid: deleted and created again; our allocation is not in it."""
    ledger: InFlightLedger[str] = InFlightLedger()
    ledger.reserve(*keyed(chosen("10")))
    if written:
        ledger.written(*keyed(chosen("12")))
    ledger.observe(KEY0, cached("5", uid="uid-new"))
    assert KEY0 not in ledger


def test_remove_after_a_failed_write() -> None:
    ledger: InFlightLedger[str] = InFlightLedger()
    ledger.reserve(*keyed(chosen("10")))
    ledger.reserve(*keyed(chosen("3", uid="uid-1", name=CLAIM1)))
    ledger.remove(KEY0)
    assert KEY0 not in ledger
    assert KEY1 in ledger
    ledger.remove(KEY0)  # idempotent
    assert len(ledger) == 1


def test_reserve_again_starts_a_new_attempt() -> None:
    """A new attempt for the same claim forgets the previous write's version."""
    ledger: InFlightLedger[str] = InFlightLedger()
    ledger.written(*keyed(chosen("12")))
    ledger.reserve(*keyed(chosen("12")))
    ledger.observe(KEY0, chosen("12"))
    assert KEY0 in ledger


def test_unparsable_written_version_is_only_dropped_by_deletion() -> None:
    ledger: InFlightLedger[str] = InFlightLedger()
    ledger.written(*keyed(chosen("abc")))
    ledger.observe(KEY0, chosen("99999"))
    assert KEY0 in ledger
    ledger.observe(KEY0, None)
    assert KEY0 not in ledger


@given(
    written=st.integers(min_value=1, max_value=1000),
    before=st.lists(st.integers(min_value=1, max_value=1000), max_size=5),
    after=st.lists(st.integers(min_value=1, max_value=1000), max_size=5),
)
def test_kept_until_a_version_at_or_after_the_write(
    written: int, before: list[int], after: list[int]
) -> None:
    """Whatever the cache shows before the write returns, and in whatever order events come
    after it, the entry stays exactly until one of them is at least the written version."""
    ledger: InFlightLedger[str] = InFlightLedger()
    ledger.reserve(*keyed(chosen("1")))
    for v in before:
        ledger.observe(KEY0, cached(str(v)))
    assert KEY0 in ledger
    ledger.written(*keyed(chosen(str(written))))
    for i, v in enumerate(after):
        ledger.observe(KEY0, cached(str(v)))
        caught_up = any(seen >= written for seen in after[: i + 1])
        assert (KEY0 in ledger) is not caught_up


def test_every_change_of_an_entry_is_announced() -> None:
    """The scheduler's allocation tracker follows the ledger through these notifications."""
    changed: list[str] = []
    ledger: InFlightLedger[str] = InFlightLedger(on_change=changed.append)
    ledger.reserve(*keyed(chosen(None)))
    ledger.written(*keyed(chosen("7")))
    ledger.observe(KEY0, cached("6"))  # not caught up: no change
    ledger.observe(KEY0, chosen("7"))
    ledger.remove(KEY0)  # already gone: no change
    ledger.reserve(*keyed(chosen(None, name=CLAIM1)))
    ledger.remove(KEY1)
    ledger.reserve(*keyed(chosen(None)))
    ledger.clear()
    assert changed == [KEY0, KEY0, KEY0, KEY1, KEY1, KEY0, KEY0]
    assert len(ledger) == 0


def test_discard_unwritten_drops_a_chosen_status_and_keeps_a_written_one() -> None:
    ledger: InFlightLedger[str] = InFlightLedger()
    ledger.reserve(*keyed(chosen("10")))
    ledger.written(*keyed(chosen("11", name=CLAIM1)))
    ledger.discard_unwritten(KEY0)
    ledger.discard_unwritten(KEY1)
    assert KEY0 not in ledger
    assert KEY1 in ledger
