"""Kubernetes' IP library (``ip()``, ``isIP()``, ``ip.isCanonical()`` and the IP methods).

Addresses follow Go's ``net.IP`` predicates, not Python's ``ipaddress`` ones, where they differ.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from celpy import celtypes

from ..values import IPValue, parse_ip
from ._base import cel_bool, cel_int, fail, type_name, want_string
from ._registry import function, method


@function("ip", arity=(1,), returns="net.IP", fold=True)
def ip(text: Any) -> IPValue:
    return parse_ip(want_string(text, "ip"))


@function("isIP", arity=(1,), returns="bool")
def is_ip(text: Any) -> celtypes.BoolType:
    try:
        parse_ip(want_string(text, "isIP"))
    except ValueError:
        return cel_bool(False)
    return cel_bool(True)


@function("ip.isCanonical", arity=(1,), returns="bool")
def ip_is_canonical(text: Any) -> celtypes.BoolType:
    s = want_string(text, "ip.isCanonical")
    return cel_bool(str(parse_ip(s).address) == s)


def address(value: Any, fn: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """The address of an IP value (``cidr.containsIP`` takes one too)."""
    if not isinstance(value, IPValue):
        raise fail(f"no such overload: {type_name(value)}.{fn}()")
    return value.address


@method("family", arity=(0,), returns="int")
def ip_family(value: Any) -> celtypes.IntType:
    return cel_int(address(value, "family").version)


@method("isUnspecified", arity=(0,), returns="bool")
def ip_is_unspecified(value: Any) -> celtypes.BoolType:
    return cel_bool(address(value, "isUnspecified").is_unspecified)


@method("isLoopback", arity=(0,), returns="bool")
def ip_is_loopback(value: Any) -> celtypes.BoolType:
    return cel_bool(address(value, "isLoopback").is_loopback)


@method("isLinkLocalMulticast", arity=(0,), returns="bool")
def ip_is_link_local_multicast(value: Any) -> celtypes.BoolType:
    a = address(value, "isLinkLocalMulticast")
    net = ipaddress.ip_network("224.0.0.0/24" if a.version == 4 else "ff02::/16")
    return cel_bool(a in net)


@method("isLinkLocalUnicast", arity=(0,), returns="bool")
def ip_is_link_local_unicast(value: Any) -> celtypes.BoolType:
    a = address(value, "isLinkLocalUnicast")
    net = ipaddress.ip_network("169.254.0.0/16" if a.version == 4 else "fe80::/10")
    return cel_bool(a in net)


@method("isGlobalUnicast", arity=(0,), returns="bool")
def ip_is_global_unicast(value: Any) -> celtypes.BoolType:
    """Go's net.IP.IsGlobalUnicast: private ranges count as global unicast there."""
    a = address(value, "isGlobalUnicast")
    if a.version == 4 and a == ipaddress.IPv4Address("255.255.255.255"):
        return cel_bool(False)
    link_local = ipaddress.ip_network("169.254.0.0/16" if a.version == 4 else "fe80::/10")
    return cel_bool(not (a.is_unspecified or a.is_loopback or a.is_multicast or a in link_local))
