"""Python value types behind the Kubernetes CEL extension types (quantity, semver, IP, CIDR, URL).

cel-python dispatches operators to Python dunder methods, so these classes define exactly the
operators Kubernetes' CEL libraries define: equality for all of them, no ``<``/``>`` (Kubernetes
has ``isLessThan``/``compareTo`` instead), which makes ``quantity("1") < quantity("2")`` a "no
such overload" error just as in the API server.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import total_ordering
from typing import Any
from urllib.parse import SplitResult, urlsplit

from celpy import celtypes

from operators.api.quantity import Quantity, QuantityError

__all__ = [
    "EMPTY_MAP",
    "CIDRValue",
    "DomainMap",
    "IPValue",
    "QuantityValue",
    "SemverError",
    "SemverValue",
    "URLValue",
    "parse_semver",
]


class QuantityValue:
    """A CEL ``kubernetes.Quantity``: an exact :class:`Quantity`, equal by value."""

    __slots__ = ("quantity",)

    def __init__(self, quantity: Quantity) -> None:
        self.quantity = quantity

    def __eq__(self, other: object) -> bool:
        if isinstance(other, QuantityValue):
            return self.quantity == other.quantity
        return False

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.quantity)

    def __repr__(self) -> str:
        return f"quantity({self.quantity.canonical()!r})"


class SemverError(ValueError):
    """A string that is not a semantic version (semver.org 2.0.0)."""


_NUMERIC = re.compile(r"^(0|[1-9][0-9]*)$")
_IDENT = re.compile(r"^[0-9A-Za-z-]+$")


@total_ordering
@dataclass(frozen=True, slots=True, eq=False)
class _SemverKey:
    """Semver 2.0.0 precedence; build metadata takes no part."""

    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _SemverKey):
            return NotImplemented
        return self._tuple() == other._tuple()

    def __hash__(self) -> int:
        return hash(self._tuple())

    def _tuple(self) -> tuple[int, int, int, tuple[int | str, ...]]:
        return (self.major, self.minor, self.patch, self.pre)

    def __lt__(self, other: _SemverKey) -> bool:
        if (self.major, self.minor, self.patch) != (other.major, other.minor, other.patch):
            return (self.major, self.minor, self.patch) < (other.major, other.minor, other.patch)
        if not self.pre or not other.pre:
            # A version without a pre-release outranks the same version with one.
            return bool(self.pre) and not other.pre
        for mine, theirs in zip(self.pre, other.pre, strict=False):
            if mine == theirs:
                continue
            if isinstance(mine, int) and isinstance(theirs, int):
                return mine < theirs
            if isinstance(mine, int) != isinstance(theirs, int):
                return isinstance(mine, int)  # numeric identifiers sort first
            return str(mine) < str(theirs)
        return len(self.pre) < len(other.pre)


class SemverValue:
    """A CEL ``kubernetes.Semver`` (strict semver.org 2.0.0, as blang/semver parses it)."""

    __slots__ = ("build", "key", "text")

    def __init__(self, key: _SemverKey, build: tuple[str, ...], text: str) -> None:
        self.key = key
        self.build = build
        self.text = text

    @property
    def major(self) -> int:
        return self.key.major

    @property
    def minor(self) -> int:
        return self.key.minor

    @property
    def patch(self) -> int:
        return self.key.patch

    def compare(self, other: SemverValue) -> int:
        return (self.key > other.key) - (self.key < other.key)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SemverValue):
            return self.key == other.key
        return False

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"semver({self.text!r})"


def _parse_number(part: str, what: str, text: str) -> int:
    if not _NUMERIC.match(part):
        raise SemverError(f"invalid {what} version {part!r} in {text!r}")
    number = int(part)
    if number >= 2**64:
        raise SemverError(f"{what} version {part!r} in {text!r}: value out of range")
    return number


def parse_semver(text: str, *, normalize: bool = False) -> SemverValue:
    """Parse strictly, or (``normalize``) accept a ``v`` prefix, short forms and leading zeros."""
    source = text
    if normalize:
        text = _normalize_semver(text)
    core, plus, build_text = text.partition("+")
    core, dash, pre_text = core.partition("-")
    parts = core.split(".")
    if len(parts) != 3:
        raise SemverError(f"{source!r} is not a semantic version: expected MAJOR.MINOR.PATCH")
    major, minor, patch = (
        _parse_number(p, w, source) for p, w in zip(parts, ("major", "minor", "patch"), strict=True)
    )
    pre: list[int | str] = []
    if dash:
        for ident in pre_text.split("."):
            if not ident or not _IDENT.match(ident):
                raise SemverError(f"invalid pre-release identifier {ident!r} in {source!r}")
            if ident.isdigit():
                pre.append(_parse_number(ident, "pre-release", source))
            else:
                pre.append(ident)
    build: tuple[str, ...] = ()
    if plus:
        build = tuple(build_text.split("."))
        if any(not b or not _IDENT.match(b) for b in build):
            raise SemverError(f"invalid build metadata in {source!r}")
    return SemverValue(_SemverKey(major, minor, patch, tuple(pre)), build, text)


def _normalize_semver(text: str) -> str:
    """As Kubernetes' normalizeAndParse: drop "v", strip leading zeros, fill minor/patch."""
    text = text.removeprefix("v")
    parts = text.split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            stripped = part.lstrip("0")
            if not stripped or not stripped[0].isdigit():
                stripped = "0" + stripped
            parts[i] = stripped
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise SemverError(f"{text!r}: short version cannot contain pre-release/build metadata")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


class IPValue:
    """A CEL ``net.IP`` (Kubernetes library/ip.go): IPv4 or IPv6 without zone."""

    __slots__ = ("address",)

    def __init__(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> None:
        self.address = address

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IPValue) and self.address == other.address

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.address)

    def __repr__(self) -> str:
        return f"ip({str(self.address)!r})"


class CIDRValue:
    """A CEL ``net.CIDR``: an address with a prefix length (host bits may be set)."""

    __slots__ = ("interface",)

    def __init__(self, interface: ipaddress.IPv4Interface | ipaddress.IPv6Interface) -> None:
        self.interface = interface

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CIDRValue) and self.interface == other.interface

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.interface)

    def __repr__(self) -> str:
        return f"cidr({str(self.interface)!r})"


class URLValue:
    """A CEL ``kubernetes.URL`` (Kubernetes library/urls.go, Go's url.ParseRequestURI)."""

    __slots__ = ("parts", "text")

    def __init__(self, text: str, parts: SplitResult) -> None:
        self.text = text
        self.parts = parts

    def __eq__(self, other: object) -> bool:
        return isinstance(other, URLValue) and self.text == other.text

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"url({self.text!r})"


def parse_url(text: str) -> URLValue:
    """Accept what Go's url.ParseRequestURI accepts, approximately: absolute URLs or paths."""
    if not text or any(c in text for c in " \t\r\n\x7f") or "#" in text:
        raise ValueError(f"URL parse error during conversion from string: {text!r}")
    try:
        parts = urlsplit(text)
        _ = parts.port
    except ValueError as exc:
        raise ValueError(f"URL parse error during conversion from string: {exc}") from None
    if not parts.scheme and not text.startswith("/"):
        raise ValueError(f"URL parse error during conversion from string: {text!r}")
    return URLValue(text, parts)


class DomainMap(celtypes.MapType):
    """``device.attributes`` / ``device.capacity``: an unknown domain reads as an empty map.

    This is what Kubernetes' ``newStringInterfaceMapWithDefault`` does: indexing gives the
    default, while ``"x" in device.attributes`` still tests real membership.
    """

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str) and not dict.__contains__(self, key):
            return EMPTY_MAP
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        if isinstance(key, str) and not dict.__contains__(self, key):
            return EMPTY_MAP
        return super().get(key, default)


class _FrozenMap(celtypes.MapType):
    """The shared empty map handed out for unknown domains; it must never be mutated."""

    def __setitem__(self, key: Any, value: Any) -> None:
        raise TypeError("immutable map")


EMPTY_MAP: Mapping[Any, Any] = _FrozenMap()


def parse_ip(text: str) -> IPValue:
    """As Kubernetes' ip(): no zones, no IPv4-mapped IPv6 addresses."""
    if "%" in text:
        raise ValueError(f"IP address with zone value is not allowed: {text!r}")
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        raise ValueError(f"IP Address {text!r} parse error during conversion from string") from None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address is not allowed: {text!r}")
    return IPValue(address)


def parse_cidr(text: str) -> CIDRValue:
    """As Kubernetes' cidr(): an address, "/", a prefix length."""
    if "/" not in text:
        raise ValueError(f"network address parse error during conversion from string: {text!r}")
    address, _, _ = text.partition("/")
    parse_ip(address)
    try:
        interface = ipaddress.ip_interface(text)
    except ValueError:
        raise ValueError(
            f"network address parse error during conversion from string: {text!r}"
        ) from None
    return CIDRValue(interface)


def quantity_value(text: str) -> QuantityValue:
    """Parse a Kubernetes quantity into its CEL value (raises ValueError subclasses)."""
    try:
        return QuantityValue(Quantity(text))
    except QuantityError as exc:
        raise QuantityError(f"quantity parse error: {exc}") from None
