"""Kubernetes' CIDR library (``cidr()``, ``isCIDR()`` and the CIDR methods).

``ip()`` as a method is ``cidr.ip()``; as a global function it is ip.py's parser.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from celpy import celtypes

from ..values import CIDRValue, IPValue, parse_cidr, parse_ip
from ._base import cel_bool, cel_int, fail, type_name, want_string
from ._registry import function, method
from .ip import address


@function("cidr", arity=(1,), returns="net.CIDR", fold=True)
def cidr(text: Any) -> CIDRValue:
    return parse_cidr(want_string(text, "cidr"))


@function("isCIDR", arity=(1,), returns="bool")
def is_cidr(text: Any) -> celtypes.BoolType:
    try:
        parse_cidr(want_string(text, "isCIDR"))
    except ValueError:
        return cel_bool(False)
    return cel_bool(True)


def _net(value: Any, fn: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    if not isinstance(value, CIDRValue):
        raise fail(f"no such overload: {type_name(value)}.{fn}()")
    return value.interface.network


@method("containsIP", arity=(1,), returns="bool")
def cidr_contains_ip(value: Any, other: Any) -> celtypes.BoolType:
    net = _net(value, "containsIP")
    addr = parse_ip(other).address if isinstance(other, str) else address(other, "containsIP")
    return cel_bool(addr.version == net.version and addr in net)


@method("containsCIDR", arity=(1,), returns="bool")
def cidr_contains_cidr(value: Any, other: Any) -> celtypes.BoolType:
    net = _net(value, "containsCIDR")
    sub = (
        parse_cidr(other).interface.network
        if isinstance(other, str)
        else _net(other, "containsCIDR")
    )
    return cel_bool(sub.version == net.version and sub.subnet_of(net))  # type: ignore[arg-type]


@method("ip", arity=(0,), returns="net.IP")
def cidr_ip(value: Any) -> IPValue:
    if not isinstance(value, CIDRValue):
        raise fail(f"no such overload: {type_name(value)}.ip()")
    return IPValue(value.interface.ip)


@method("masked", arity=(0,), returns="net.CIDR")
def cidr_masked(value: Any) -> CIDRValue:
    net = _net(value, "masked")
    return CIDRValue(ipaddress.ip_interface(str(net)))


@method("prefixLength", arity=(0,), returns="int")
def cidr_prefix_length(value: Any) -> celtypes.IntType:
    return cel_int(_net(value, "prefixLength").prefixlen)
