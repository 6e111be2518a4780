"""Claim constraints: matchAttribute and distinctAttribute over the devices being chosen.

Both are incremental (``add`` while searching, ``remove`` when backtracking) and reproduce
upstream's behaviour exactly, including 1.36's quirks: a matchAttribute intersection narrowed by
a removed device stays narrowed until the constraint is empty again, and distinctAttribute keeps
one value per request name (the latest device of that request). 1.37 (``exact``) fixed both: a
removed device takes back exactly what it added, and every chosen device's value counts.

1.38 (``held``) compares values as its allocator holds them (k8s.io/dynamic-resource-allocation's
internal attributes): every value as a typed set, a scalar as one element (for scalars that is
the same as comparing them); versions by semver precedence, build metadata dropped; a derived
``[]`` an empty string list (no common element, disjoint from anything). A value it cannot hold
(none set, an empty list a driver published, a version that does not parse, a list while
DRAListTypeAttributes is off) ends the allocation instead of skipping the device.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import cast

from operators.allocator.errors import UnsupportedAttributeError
from operators.api.ids import DeviceID
from operators.api.resource import Device, DeviceAttribute
from operators.cel import CIDRValue, IPValue, QuantityValue, SemverValue, URLValue
from operators.cel.runtime import DomainMap, Duration, Optional, Timestamp, TypeValue
from operators.cel.syntax import Uint
from operators.cel.values import SemverError, parse_semver

#: Evaluates a derived attribute (name, expression) for a device; raises InvalidInputError.
Derive = Callable[[str, str, Device, DeviceID], DeviceAttribute]

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


class _Nil:
    """What an empty optional's ``Value()`` gives in cel-go: Go's nil."""


_NIL = _Nil()


def _go_value(value: object) -> object:
    """The value as cel-go's ``Value()`` hands it to the allocator: an optional's content
    (nil when empty), a type's name."""
    while isinstance(value, Optional):
        if value is Optional.NONE:
            return _NIL
        value = value.value
    if isinstance(value, TypeValue):
        return value.name
    return value


def _go_type(value: object) -> str:
    """The Go type of the value cel-go hands the allocator, for its messages."""
    if isinstance(value, Uint):
        return "uint64"
    for kind, name in _GO_TYPES:
        if isinstance(value, kind):
            return name
    return type(value).__name__


_GO_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "bool"),
    (int, "int64"),
    (str, "string"),
    (float, "float64"),
    (bytes, "[]uint8"),
    (type(None), "structpb.NullValue"),
    (_Nil, "<nil>"),
    (SemverValue, "semver.Version"),
    (QuantityValue, "*resource.Quantity"),
    (IPValue, "netip.Addr"),
    (CIDRValue, "netip.Prefix"),
    (URLValue, "*url.URL"),
    (Timestamp, "time.Time"),
    (Duration, "time.Duration"),
    (DomainMap, "map[string]interface {}"),
    (dict, "map[ref.Val]ref.Val"),
    (list, "[]ref.Val"),
)


def derived_attribute(value: object) -> DeviceAttribute:
    """A derived attribute's CEL value as a device attribute (upstream's valToDeviceAttribute):
    a scalar, or a list of one scalar type (an empty list is an empty string list); raises
    ValueError for anything else. A list inside an optional is refused: upstream reads a list
    from the CEL value itself, and an optional hands over its content's Go value instead."""
    wrapped = isinstance(value, Optional)
    value = _go_value(value)
    if wrapped and isinstance(value, list):
        raise ValueError(f"unsupported CEL return type: {_go_type(value)}")
    if isinstance(value, bool):
        return DeviceAttribute(bool=value)
    if isinstance(value, int) and not isinstance(value, Uint):
        return DeviceAttribute(int=value)
    if isinstance(value, str):
        return DeviceAttribute(string=value)
    if isinstance(value, SemverValue):
        return DeviceAttribute(version=value.text)
    if not isinstance(value, list):
        raise ValueError(f"unsupported CEL return type: {_go_type(value)}")
    if not value:
        return DeviceAttribute(strings=[])
    elements = [_go_value(v) for v in value]
    first = elements[0]
    for kind, field_name, test in _LIST_KINDS:
        if test(first):
            for i, element in enumerate(elements):
                if not test(element):
                    raise ValueError(
                        f"expected list element at index {i} to be {kind}, got {_go_type(element)}"
                    )
            if field_name == "versions":
                return DeviceAttribute(versions=[cast(SemverValue, v).text for v in elements])
            return DeviceAttribute(**{field_name: elements})
    raise ValueError(f"unsupported list element type: {_go_type(first)}")


_LIST_KINDS: tuple[tuple[str, str, Callable[[object], bool]], ...] = (
    ("bool", "bools", lambda v: isinstance(v, bool)),
    ("int", "ints", lambda v: isinstance(v, int) and not isinstance(v, (bool, Uint))),
    ("string", "strings", lambda v: isinstance(v, str)),
    ("semver", "versions", lambda v: isinstance(v, SemverValue)),
)


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


def held_value(attr: DeviceAttribute, *, derived: bool = False) -> tuple[AttrSet, bool] | None:
    """1.38: the value as its allocator holds it, as a typed set, and whether it is a list;
    None for one it cannot hold. In upstream's order: scalars, then non-empty lists; only a
    derived attribute has an empty list (``derived``: CEL's ``[]``, an empty string list)."""
    if attr.int_ is not None:
        return ("int", frozenset([attr.int_])), False
    if attr.bool_ is not None:
        return ("bool", frozenset([attr.bool_])), False
    if attr.string is not None:
        return ("string", frozenset([attr.string])), False
    if attr.version is not None:
        versions = _versions([attr.version])
        return None if versions is None else (("version", versions), False)
    if attr.ints:
        return ("int", frozenset(attr.ints)), True
    if attr.bools:
        return ("bool", frozenset(attr.bools)), True
    if attr.strings:
        return ("string", frozenset(attr.strings)), True
    if attr.versions:
        versions = _versions(attr.versions)
        return None if versions is None else (("version", versions), True)
    if derived and attr.strings is not None:
        return ("string", frozenset()), True
    return None


def _versions(texts: Collection[str]) -> frozenset[object] | None:
    """Versions that compare as semver.Version.Equals does (build metadata ignored), or None
    when one does not parse (upstream cannot hold it)."""
    try:
        return frozenset(parse_semver(text) for text in texts)
    except SemverError:
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
    #: 1.37 (DRADerivedAttributes): evaluates the requests' derived attributes.
    derive: Derive | None = None
    #: 1.38: values as its allocator holds them (``held_value``); implies ``exact``.
    held: bool = False

    def applies(self, request: str, subrequest: str) -> bool:
        if not self.requests:
            return True
        if request in self.requests:
            return True
        return bool(subrequest) and f"{request}/{subrequest}" in self.requests

    def lookup(
        self, device: Device, device_id: DeviceID, derived: Mapping[str, str] | None
    ) -> DeviceAttribute | None:
        """Upstream's lookupAttribute: the request's derived attribute of that name first (it
        may shadow the driver's), else the device's own."""
        if derived is not None and self.derive is not None:
            expression = derived.get(self.attribute)
            if expression is not None:
                return self.derive(self.attribute, expression, device, device_id)
        return lookup_attribute(device, device_id, self.attribute)

    def lookup_held(
        self, device: Device, device_id: DeviceID, derived: Mapping[str, str] | None
    ) -> AttrSet | None:
        """1.38's lookupAttribute and its check of the value: the value as a set, None when the
        device has no such attribute; raises UnsupportedAttributeError for one it cannot hold."""
        attr: DeviceAttribute | None = None
        computed = False
        if derived is not None and self.derive is not None:
            expression = derived.get(self.attribute)
            if expression is not None:
                attr = self.derive(self.attribute, expression, device, device_id)
                computed = True
        if not computed:
            attr = lookup_attribute(device, device_id, self.attribute)
        if attr is None:
            return None
        held = held_value(attr, derived=computed)
        if held is None or (held[1] and not self.list_types):
            raise UnsupportedAttributeError(
                f"device {device_id}: unsupported attribute value for {self.attribute}"
            )
        return held[0]

    def add(
        self,
        request: str,
        subrequest: str,
        device: Device,
        device_id: DeviceID,
        derived: Mapping[str, str] | None = None,
    ) -> bool:
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

    def add(
        self,
        request: str,
        subrequest: str,
        device: Device,
        device_id: DeviceID,
        derived: Mapping[str, str] | None = None,
    ) -> bool:
        if not self.applies(request, subrequest):
            return True
        if self.held:
            return self._add_held(self.lookup_held(device, device_id, derived))
        attr = self.lookup(device, device_id, derived)
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

    def _add_held(self, new: AttrSet | None) -> bool:
        """1.38: a common element with the devices so far (for scalars: the same value)."""
        if new is None:
            return False
        if self.count == 0 or self.common is None:
            self.common = new
            self.count = 1
            return True
        if not _intersects(self.common, new):
            return False
        self.narrowed.append(self.common)
        self.common = (self.common[0], self.common[1] & new[1])
        self.count += 1
        return True

    def remove(self, request: str, subrequest: str) -> None:
        if self.applies(request, subrequest):
            self.count -= 1
            if self.exact and (self.list_types or self.held) and self.count:
                self.common = self.narrowed.pop()


@dataclass(slots=True)
class DistinctAttribute(Constraint):
    """No two chosen devices share a value of the attribute (disjoint lists)."""

    values: dict[str, DeviceAttribute] = field(default_factory=dict)
    count: int = 0
    #: 1.37: every chosen device's value, in order.
    chosen: list[DeviceAttribute] = field(default_factory=list)
    #: 1.38: every chosen device's value as held (``held_value``), in order.
    chosen_held: list[AttrSet] = field(default_factory=list)

    def add(
        self,
        request: str,
        subrequest: str,
        device: Device,
        device_id: DeviceID,
        derived: Mapping[str, str] | None = None,
    ) -> bool:
        if not self.applies(request, subrequest):
            return True
        if self.held:
            new = self.lookup_held(device, device_id, derived)
            if new is None or any(_intersects(new, other) for other in self.chosen_held):
                return False
            self.chosen_held.append(new)
            return True
        attr = self.lookup(device, device_id, derived)
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
            if self.held:
                self.chosen_held.pop()
                return
            if self.exact:
                self.chosen.pop()
                return
            self.values.pop(request, None)
            self.count -= 1
