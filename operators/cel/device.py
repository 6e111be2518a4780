"""The ``device`` variable: a slice's device as CEL values, built once per slice generation.

Kubernetes (dynamic-resource-allocation/cel) groups attributes and capacities by domain: a
qualified name ``gpu.example.com/model`` lands in ``device.attributes["gpu.example.com"].model``
and an unqualified one in the driver's domain. Indexing an unknown domain yields an empty map.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .runtime import DomainMap
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

    Kubernetes fails every evaluation against a device whose attribute cannot be converted
    (an unparseable version, no value set), so ``error`` is reported by every evaluation.
    """

    driver: str
    name: str
    value: dict[str, Any]
    error: str | None = None


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


def _capacity_value(capacity: Any) -> QuantityValue:
    value = getattr(capacity, "value", capacity)
    if value is None:
        return QuantityValue(shared=True)
    text = getattr(value, "text", None)
    return QuantityValue.parse(str(text if text is not None else value), shared=True)


def build_device_view(driver: str, device: DeviceLike) -> DeviceView:
    """Convert a device once; evaluations share the result (restored if they change it)."""
    attributes = DomainMap()
    error: str | None = None
    for name, attribute in (device.attributes or {}).items():
        domain, ident = split_qualified_name(name, driver)
        try:
            value = _attribute_value(attribute)
        except (SemverError, ValueError) as exc:
            error = error or f"attribute {name}: {exc}"
            continue
        attributes.setdefault(domain, {})[ident] = value
    capacity = DomainMap()
    for name, cap in (device.capacity or {}).items():
        domain, ident = split_qualified_name(name, driver)
        try:
            quantity = _capacity_value(cap)
        except QuantityError as exc:
            error = error or f"capacity {name}: {exc}"
            continue
        capacity.setdefault(domain, {})[ident] = quantity
    value = {
        "driver": driver,
        "allowMultipleAllocations": bool(device.allow_multiple_allocations),
        "attributes": attributes,
        "capacity": capacity,
    }
    return DeviceView(driver=driver, name=device.name or "", value=value, error=error)
