"""Kubernetes' IP library (``ip()``, ``isIP()``, ``ip.isCanonical()`` and the IP methods).

Addresses follow Go's netip predicates, not Python's ``ipaddress`` ones, where they differ.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from ..runtime import CelError
from ..values import IPValue, parse_ip
from ._registry import function, method


@function("ip", "string_to_ip (string) -> net.IP")
def ip(text: Any) -> IPValue:
    try:
        return parse_ip(text)
    except ValueError as exc:
        raise CelError(str(exc)) from None


@function("string", "ip_to_string (net.IP) -> string")
def ip_to_string(value: Any) -> str:
    return str(value.address)


@function("isIP", "is_ip (string) -> bool")
def is_ip(text: Any) -> bool:
    try:
        parse_ip(text)
    except ValueError:
        return False
    return True


@function("ip.isCanonical", "ip_is_canonical (string) -> bool")
def ip_is_canonical(text: Any) -> bool:
    try:
        return str(parse_ip(text).address) == text  # type: ignore[no-any-return]
    except ValueError as exc:
        raise CelError(str(exc)) from None


@method("family", "ip_family net.IP.() -> int")
def ip_family(value: Any) -> int:
    return value.address.version  # type: ignore[no-any-return]


@method("isUnspecified", "ip_is_unspecified net.IP.() -> bool")
def ip_is_unspecified(value: Any) -> bool:
    return value.address.is_unspecified  # type: ignore[no-any-return]


@method("isLoopback", "ip_is_loopback net.IP.() -> bool")
def ip_is_loopback(value: Any) -> bool:
    return value.address.is_loopback  # type: ignore[no-any-return]


@method("isLinkLocalMulticast", "ip_is_link_local_multicast net.IP.() -> bool")
def ip_is_link_local_multicast(value: Any) -> bool:
    a = value.address
    if a.version == 4:
        return a in ipaddress.ip_network("224.0.0.0/24")
    return (int(a) >> 112) & 0xFF0F == 0xFF02


@method("isLinkLocalUnicast", "ip_is_link_local_unicast net.IP.() -> bool")
def ip_is_link_local_unicast(value: Any) -> bool:
    a = value.address
    if a.version == 4:
        return a in ipaddress.ip_network("169.254.0.0/16")
    return (int(a) >> 112) & 0xFFC0 == 0xFE80


@method("isGlobalUnicast", "ip_is_global_unicast net.IP.() -> bool")
def ip_is_global_unicast(value: Any) -> bool:
    """Go's netip.Addr.IsGlobalUnicast: private ranges count as global unicast there."""
    a = value.address
    if a.version == 4 and int(a) in (0, 0xFFFFFFFF):
        return False
    return not (
        a.is_unspecified or a.is_loopback or a.is_multicast or ip_is_link_local_unicast(value)
    )
