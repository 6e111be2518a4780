"""The ``device`` variable: a slice's device as CEL values, built once per slice generation.

Kubernetes (dynamic-resource-allocation/cel) groups attributes and capacities by domain: a
qualified name ``gpu.example.com/model`` lands in ``device.attributes["gpu.example.com"].model``
and an unqualified one in the driver's domain. Indexing an unknown domain yields an empty map.

Two forms are built, since a view serves every minor: 1.36 and 1.37 convert the device's
attributes when an expression runs and fail every expression on a device with one they cannot
convert (``value``, ``error``); 1.38 converts the slice once into its internal form and keeps
such an attribute as a value that fails only where read (``held``; release.Dialect's
``lazy_attributes``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .runtime import DomainMap, HeldDomains, HeldNames, Unheld
from .values import QuantityError, QuantityValue, SemverError, parse_semver

__all__ = ["DeviceLike", "DeviceView", "build_device_view", "split_qualified_name"]


class DeviceLike(Protocol):
    """What the CEL layer reads from a resource.k8s.io/v1 Device (operators.api.resource)."""

    @property
    def name(self) -> str | None: ...

    @property
    def attributes(self) -> Mapping[str, Any] | None: ...

    @property
    def capacity(self) -> Mapping[str, Any] | None: ...

    @property
    def allow_multiple_allocations(self) -> bool | None: ...


@dataclass(frozen=True, slots=True)
class DeviceView:
    """The CEL value of ``device`` for one device, or why it cannot be built.

    Kubernetes 1.36 and 1.37 fail every evaluation against a device whose attribute cannot be
    converted (an unparseable version, no value set), so ``error`` is reported by every
    evaluation of theirs; 1.38's ``held`` form keeps such an attribute as an error where it is
    read, and ``held_error`` is only a capacity that does not parse.
    """

    driver: str
    name: str
    value: dict[str, Any]
    error: str | None = None
    held: dict[str, Any] | None = None
    held_error: str | None = None

    def device(self, lazy: bool) -> tuple[dict[str, Any], str | None]:
        """(the ``device`` value, why every evaluation fails or None) as a release reads it:
        1.38's internal form when ``lazy`` (release.Dialect.lazy_attributes)."""
        if lazy and self.held is not None:
            return self.held, self.held_error
        return self.value, self.error


def split_qualified_name(name: str, driver: str) -> tuple[str, str]:
    """``domain/id`` -> (domain, id); an unqualified id belongs to the driver's domain."""
    domain, sep, ident = name.partition("/")
    if not sep:
        return driver, name
    return domain, ident


def _attribute_value(attribute: Any) -> Any:
    """The one value an attribute holds (lists first, as DRAListTypeAttributes reads them)."""
    ints = getattr(attribute, "ints", None)
    if ints is not None:
        return [int(v) for v in ints]
    bools = getattr(attribute, "bools", None)
    if bools is not None:
        return [bool(v) for v in bools]
    strings = getattr(attribute, "strings", None)
    if strings is not None:
        return [str(v) for v in strings]
    versions = getattr(attribute, "versions", None)
    if versions is not None:
        return [parse_semver(str(v)) for v in versions]
    value = getattr(attribute, "int_", None)
    if value is not None:
        return int(value)
    value = getattr(attribute, "bool_", None)
    if value is not None:
        return bool(value)
    value = getattr(attribute, "string", None)
    if value is not None:
        return str(value)
    value = getattr(attribute, "version", None)
    if value is not None:
        return parse_semver(str(value))
    raise ValueError("unsupported attribute value")


def _held_value(name: str, attribute: Any) -> Any:
    """The one value 1.38's slice conversion holds (dynamic-resource-allocation v0.38
    api/conversion.go attrValue): scalars before lists, an empty list as none, and
    :class:`Unheld` where it holds nothing (the attribute then fails where CEL reads it)."""
    for field in ("int_", "bool_", "string"):
        value = getattr(attribute, field, None)
        if value is not None:
            return value
    version = getattr(attribute, "version", None)
    if version is not None:
        try:
            return parse_semver(str(version))
        except (SemverError, ValueError):
            return Unheld(name)
    for field in ("ints", "bools", "strings"):
        values = getattr(attribute, field, None)
        if values:
            return list(values)
    versions = getattr(attribute, "versions", None)
    if versions:
        try:
            return [parse_semver(str(v)) for v in versions]
        except (SemverError, ValueError):
            return Unheld(name)
    return Unheld(name)


# The Go types of 1.38's device maps' Value(), as upstream's messages name them.
_HELD_ATTRIBUTES = "map[api.UniqueString]map[api.UniqueString]interface {}"
_HELD_CAPACITY = "map[api.UniqueString]map[api.UniqueString]*api.DeviceCapacity"
_HELD_NAMES = {
    _HELD_ATTRIBUTES: "map[api.UniqueString]interface {}",
    _HELD_CAPACITY: "map[api.UniqueString]*api.DeviceCapacity",
}


def _held_put(domains: HeldDomains, driver: str, name: str, value: Any) -> None:
    """Group as 1.38's conversion does: a qualified name replaces the driver's unqualified
    one of the same id, whichever comes first."""
    domain, ident = split_qualified_name(name, driver)
    names = domains.get(domain)
    if names is None:
        names = domains[domain] = HeldNames(_HELD_NAMES[domains.go_type])
    if "/" not in name and ident in names:
        return
    names[ident] = value


def _capacity_value(capacity: Any, bounded: bool = False) -> QuantityValue:
    """The capacity's quantity as the release parses it (``bounded``: 1.38's apimachinery)."""
    value = getattr(capacity, "value", capacity)
    if value is None:
        return QuantityValue(shared=True)
    text = getattr(value, "text", None)
    return QuantityValue.parse(
        str(text if text is not None else value), shared=True, bounded=bounded
    )


def build_device_view(driver: str, device: DeviceLike) -> DeviceView:
    """Convert a device once; evaluations share the result (restored if they change it)."""
    attributes = DomainMap()
    held_attributes = HeldDomains(_HELD_ATTRIBUTES)
    error: str | None = None
    for name, attribute in (device.attributes or {}).items():
        domain, ident = split_qualified_name(name, driver)
        _held_put(held_attributes, driver, name, _held_value(ident, attribute))
        try:
            value = _attribute_value(attribute)
        except (SemverError, ValueError) as exc:
            error = error or f"attribute {name}: {exc}"
            continue
        attributes.setdefault(domain, {})[ident] = value
    capacity = DomainMap()
    held_capacity = HeldDomains(_HELD_CAPACITY)
    capacity_error: str | None = None
    for name, cap in (device.capacity or {}).items():
        domain, ident = split_qualified_name(name, driver)
        try:
            quantity = _capacity_value(cap)
            held_quantity = _capacity_value(cap, bounded=True)
        except QuantityError as exc:
            capacity_error = capacity_error or f"capacity {name}: {exc}"
            continue
        capacity.setdefault(domain, {})[ident] = quantity
        _held_put(held_capacity, driver, name, held_quantity)
    allow = bool(device.allow_multiple_allocations)
    value = {
        "driver": driver,
        "allowMultipleAllocations": allow,
        "attributes": attributes,
        "capacity": capacity,
    }
    held = {
        "driver": driver,
        "allowMultipleAllocations": allow,
        "attributes": held_attributes,
        "capacity": held_capacity,
    }
    return DeviceView(
        driver=driver,
        name=device.name or "",
        value=value,
        error=error or capacity_error,
        held=held,
        held_error=capacity_error,
    )
