"""The ``device`` variable: a slice's device as CEL values, built once per slice generation.

Kubernetes (dynamic-resource-allocation/cel) groups attributes and capacities by domain: a
qualified name ``gpu.example.com/model`` lands in ``device.attributes["gpu.example.com"].model``
and an unqualified one in the driver's domain. Indexing an unknown domain yields an empty map.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from celpy import celtypes

from operators.api.quantity import Quantity

from .library import cel_bool, cel_int
from .values import DomainMap, QuantityValue, SemverError, parse_semver

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
    value: celtypes.MapType
    error: str | None = None


def split_qualified_name(name: str, driver: str) -> tuple[str, str]:
    """``domain/id`` -> (domain, id); an unqualified id belongs to the driver's domain."""
    domain, sep, ident = name.partition("/")
    if not sep:
        return driver, name
    return domain, ident


def _version(text: str) -> Any:
    return parse_semver(text)


def _string(text: str) -> celtypes.StringType:
    # cel-python's constructor re-checks types on every call; views are built in bulk.
    return str.__new__(celtypes.StringType, text)


def _attribute_value(attribute: Any) -> Any:
    """The one value an attribute holds, as a CEL value; ValueError when there is none."""
    scalar: list[tuple[str, Callable[[Any], Any]]] = [
        ("int_", cel_int),
        ("bool_", cel_bool),
        ("string", _string),
        ("version", _version),
    ]
    for field, convert in scalar:
        value = getattr(attribute, field, None)
        if value is not None:
            return convert(value)
    lists: list[tuple[str, Callable[[Any], Any]]] = [
        ("ints", cel_int),
        ("bools", cel_bool),
        ("strings", _string),
        ("versions", _version),
    ]
    for field, convert in lists:
        values = getattr(attribute, field, None)
        if values is not None:
            return celtypes.ListType([convert(v) for v in values])
    raise ValueError("unsupported attribute value (none of int, bool, string, version is set)")


def _capacity_value(capacity: Any) -> QuantityValue:
    value = getattr(capacity, "value", capacity)
    if value is None:
        raise ValueError("no value")
    if not isinstance(value, Quantity):
        value = Quantity(value)
    return QuantityValue(value)


def build_device_view(driver: str, device: DeviceLike) -> DeviceView:
    """Convert a device once; evaluations share the result (it is never mutated)."""
    attributes = DomainMap()
    error: str | None = None
    for name, attribute in (device.attributes or {}).items():
        domain, ident = split_qualified_name(name, driver)
        try:
            value = _attribute_value(attribute)
        except (SemverError, ValueError) as exc:
            error = error or f"attribute {name}: {exc}"
            continue
        inner: Any = dict.get(attributes, _string(domain))
        if inner is None:
            inner = celtypes.MapType()
            dict.__setitem__(attributes, _string(domain), inner)
        dict.__setitem__(inner, _string(ident), value)
    capacity = DomainMap()
    for name, cap in (device.capacity or {}).items():
        domain, ident = split_qualified_name(name, driver)
        try:
            quantity = _capacity_value(cap)
        except ValueError as exc:
            error = error or f"capacity {name}: {exc}"
            continue
        inner = dict.get(capacity, _string(domain))
        if inner is None:
            inner = celtypes.MapType()
            dict.__setitem__(capacity, _string(domain), inner)
        dict.__setitem__(inner, _string(ident), quantity)
    value = celtypes.MapType(
        {
            _string("driver"): _string(driver),
            _string("attributes"): attributes,
            _string("capacity"): capacity,
            _string("allowMultipleAllocations"): cel_bool(device.allow_multiple_allocations),
        }
    )
    return DeviceView(driver=driver, name=device.name or "", value=value, error=error)
