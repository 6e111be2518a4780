"""Versions our own writes superseded: skipped until the cache shows something newer."""

from __future__ import annotations

from operators.runtime.indices import SupersededVersions


def test_every_version_a_run_of_writes_replaced_is_skipped_until_a_newer_one() -> None:
    superseded = SupersededVersions()
    superseded.wrote("ns/claim", "1")  # a status write replaced version 1 by 2
    superseded.wrote("ns/claim", "2")  # then a delete replaced version 2 by 3
    assert superseded.is_stale("ns/claim", "1")
    assert superseded.is_stale("ns/claim", "2")  # deleting again from 2 would count twice
    assert not superseded.is_stale("ns/claim", "3")
    assert not superseded.is_stale("ns/claim", "1")  # forgotten once the newer one showed
    assert not superseded.is_stale("ns/other", "1")
