"""Claim constraints: matchAttribute and distinctAttribute over the devices being chosen.

Both are incremental (``add`` while searching, ``remove`` when backtracking) and reproduce
upstream's behaviour exactly, including 1.36's quirks: a matchAttribute intersection narrowed by
a removed device stays narrowed until the constraint is empty again, and distinctAttribute keeps
one value per request name (the latest device of that request). 1.37 (``exact``) fixed both: a
removed device takes back exactly what it added, and every chosen device's value counts.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from operators.api.ids import DeviceID
from operators.api.resource import Device, DeviceAttribute

#: (kind, values): kind tells int/bool/string/version apart, lists and scalars alike.
AttrSet = tuple[str, frozenset[object]]


def lookup_attribute(device: Device, device_id: DeviceID, name: str) -> DeviceAttribute | None:
    """The attribute by fully qualified name; ``<driver>/<id>`` also finds a bare ``<id>``."""
    attr = device.attributes.get(name)
    if attr is not None:
        return attr
    domain, sep, ident = name.partition("/")
    if not sep or domain != device_id.driver:
        return None
    return device.attributes.get(ident)


def attribute_set(attr: DeviceAttribute) -> AttrSet | None:
    """A list-or-scalar attribute as a typed set (non-empty lists win over scalars)."""
    if attr.ints:
        return ("int", frozenset(attr.ints))
    if attr.bools:
        return ("bool", frozenset(attr.bools))
    if attr.strings:
        return ("string", frozenset(attr.strings))
    if attr.versions:
        return ("version", frozenset(attr.versions))
    if attr.int_ is not None:
        return ("int", frozenset([attr.int_]))
    if attr.bool_ is not None:
        return ("bool", frozenset([attr.bool_]))
    if attr.string is not None:
        return ("string", frozenset([attr.string]))
    if attr.version is not None:
        return ("version", frozenset([attr.version]))
    return None


def _intersects(a: AttrSet, b: AttrSet) -> bool:
    return a[0] == b[0] and not a[1].isdisjoint(b[1])


def _scalar(attr: DeviceAttribute) -> tuple[str, object] | None:
    """The scalar value with its kind, in upstream's switch order; lists have none."""
    if attr.string is not None:
        return ("string", attr.string)
    if attr.int_ is not None:
        return ("int", attr.int_)
    if attr.bool_ is not None:
        return ("bool", attr.bool_)
    if attr.version is not None:
        return ("version", attr.version)
    return None


@dataclass(slots=True)
class Constraint:
    """Common part: which requests the constraint applies to (empty: all of them)."""

    requests: Collection[str]
    attribute: str
    list_types: bool
    #: 1.37: remove undoes exactly the add (no 1.36 quirks).
    exact: bool = False

    def applies(self, request: str, subrequest: str) -> bool:
        if not self.requests:
            return True
        if request in self.requests:
            return True
        return bool(subrequest) and f"{request}/{subrequest}" in self.requests

    def add(self, request: str, subrequest: str, device: Device, device_id: DeviceID) -> bool:
        raise NotImplementedError

    def remove(self, request: str, subrequest: str) -> None:
        raise NotImplementedError


@dataclass(slots=True)
class MatchAttribute(Constraint):
    """All chosen devices share a value of the attribute (a common element, for lists)."""

    first: DeviceAttribute | None = None
    common: AttrSet | None = None
    count: int = 0
    #: 1.37: the intersection before each device after the first, restored on remove.
    narrowed: list[AttrSet | None] = field(default_factory=list)

    def add(self, request: str, subrequest: str, device: Device, device_id: DeviceID) -> bool:
        if not self.applies(request, subrequest):
            return True
        attr = lookup_attribute(device, device_id, self.attribute)
        if attr is None:
            return False
        if self.count == 0:
            if self.list_types:
                self.common = attribute_set(attr)
                if self.common is None:
                    return False
            else:
                self.first = attr
            self.count = 1
            return True
        if self.list_types:
            new = attribute_set(attr)
            if new is None or self.common is None or not _intersects(self.common, new):
                return False
            if self.exact:
                self.narrowed.append(self.common)
            self.common = (self.common[0], self.common[1] & new[1])
        else:
            have = _scalar(attr)
            first = _scalar(self.first) if self.first is not None else None
            if have is None or first is None or have[0] != first[0] or have[1] != first[1]:
                return False
        self.count += 1
        return True

    def remove(self, request: str, subrequest: str) -> None:
        if self.applies(request, subrequest):
            self.count -= 1
            if self.exact and self.list_types and self.count:
                self.common = self.narrowed.pop()


@dataclass(slots=True)
class DistinctAttribute(Constraint):
    """No two chosen devices share a value of the attribute (disjoint lists)."""

    values: dict[str, DeviceAttribute] = field(default_factory=dict)
    count: int = 0
    #: 1.37: every chosen device's value, in order.
    chosen: list[DeviceAttribute] = field(default_factory=list)

    def add(self, request: str, subrequest: str, device: Device, device_id: DeviceID) -> bool:
        if not self.applies(request, subrequest):
            return True
        attr = lookup_attribute(device, device_id, self.attribute)
        if attr is None:
            return False
        if self.exact:
            if not self._distinct(attr, self.chosen):
                return False
            self.chosen.append(attr)
            return True
        if self.count == 0:
            self.values[request] = attr
            self.count = 1
            return True
        if not self._distinct(attr, self.values.values()):
            return False
        self.values[request] = attr
        self.count += 1
        return True

    def _distinct(self, attr: DeviceAttribute, chosen: Collection[DeviceAttribute]) -> bool:
        if self.list_types:
            new = attribute_set(attr)
            if new is None:
                return False
            for other in chosen:
                have = attribute_set(other)
                if have is not None and _intersects(new, have):
                    return False
            return True
        mine = _scalar(attr)
        for other in chosen:
            if mine is None:
                return False
            theirs = _scalar(other)
            if theirs is not None and theirs[0] == mine[0] and theirs[1] == mine[1]:
                return False
        return True

    def remove(self, request: str, subrequest: str) -> None:
        if self.applies(request, subrequest):
            if self.exact:
                self.chosen.pop()
                return
            self.values.pop(request, None)
            self.count -= 1
