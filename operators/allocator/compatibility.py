"""Compatibility groups (1.37 alpha, DRADeviceCompatibilityGroups, KEP-5963): which devices may
draw on one shared counter set together.

Each counter consumption of a device may name up to two groups. All devices on one counter set,
those allocated before included, must share a group; a device naming none goes only with others
naming none. Upstream (the experimental allocator's compatibilityGroupIntersection) keeps, per
counter set, the intersection of the groups of the devices placed so far, and tells "every
member named none" apart from "the members' groups have nothing in common". So does ``Members``;
``None`` is a counter set with no device on it yet, where anything goes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Members:
    """The devices on one counter set so far: none of them named a group (``ungrouped``), or
    ``common`` is what all their groups share (empty only where allocated devices already
    disagree, which then admits nothing)."""

    ungrouped: bool
    common: frozenset[str] = frozenset()


def admits(members: Members | None, groups: frozenset[str]) -> bool:
    """Whether a device naming ``groups`` may join the counter set's devices."""
    if members is None:
        return True
    if not groups:
        return members.ungrouped
    if members.ungrouped:
        return False
    return not members.common.isdisjoint(groups)


def join(members: Members | None, groups: frozenset[str]) -> Members:
    """The members with the device added. Allocated devices are folded in without ``admits``
    (their slice may have changed since), so a mix leaves the state as upstream's does."""
    if members is None:
        return Members(ungrouped=True) if not groups else Members(False, groups)
    if members.ungrouped or not groups:
        return members
    return Members(False, members.common & groups)


__all__ = ["Members", "admits", "join"]
