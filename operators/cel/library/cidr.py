"""Kubernetes' CIDR library (``cidr()``, ``isCIDR()`` and the CIDR methods).

``ip()`` as a method is ``cidr.ip()``; as a global function it is ip.py's parser.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from ..runtime import CelError, no_overload
from ..values import CIDRValue, IPValue, parse_cidr, parse_ip
from ._registry import function, method


@function("cidr", "string_to_cidr (string) -> net.CIDR")
def cidr(text: Any) -> CIDRValue:
    try:
        return parse_cidr(text)
    except ValueError as exc:
        raise CelError(
            f"network address parse error during conversion from string: {exc}"
        ) from None


@function("string", "cidr_to_string (net.CIDR) -> string")
def cidr_to_string(value: Any) -> str:
    return str(value.interface)


@function("isCIDR", "is_cidr (string) -> bool")
def is_cidr(text: Any) -> bool:
    try:
        parse_cidr(text)
    except ValueError:
        return False
    return True


def _network(value: CIDRValue) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return value.interface.network


@method(
    "containsIP",
    "cidr_contains_ip_string net.CIDR.(string) -> bool",
    "cidr_contains_ip_ip net.CIDR.(net.IP) -> bool",
)
def contains_ip(value: Any, other: Any) -> bool:
    if type(other) is str:
        try:
            other = parse_ip(other)
        except ValueError:
            raise no_overload("containsIP", value, other) from None
    if type(other) is not IPValue:
        raise no_overload("containsIP", value, other)
    net = _network(value)
    return other.address.version == net.version and other.address in net


@method(
    "containsCIDR",
    "cidr_contains_cidr_string net.CIDR.(string) -> bool",
    "cidr_contains_cidr net.CIDR.(net.CIDR) -> bool",
)
def contains_cidr(value: Any, other: Any) -> bool:
    if type(other) is str:
        try:
            other = parse_cidr(other)
        except ValueError:
            raise no_overload("containsCIDR", value, other) from None
    if type(other) is not CIDRValue:
        raise no_overload("containsCIDR", value, other)
    net, sub = _network(value), _network(other)
    if net.version != sub.version:
        return False
    return net.prefixlen <= sub.prefixlen and sub.subnet_of(net)  # type: ignore[arg-type]


@method("ip", "cidr_ip net.CIDR.() -> net.IP")
def cidr_ip(value: Any) -> IPValue:
    return IPValue(value.interface.ip)


@method("masked", "cidr_masked net.CIDR.() -> net.CIDR")
def cidr_masked(value: Any) -> CIDRValue:
    return CIDRValue(ipaddress.ip_interface(str(_network(value))))


@method("prefixLength", "cidr_prefix_length net.CIDR.() -> int")
def cidr_prefix_length(value: Any) -> int:
    return _network(value).prefixlen
