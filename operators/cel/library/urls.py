"""Kubernetes' URLs library (``url()``, ``isURL()`` and the URL getters)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from celpy import celtypes

from ..values import URLValue, parse_url
from ._base import cel_bool, fail, type_name, want_string
from ._registry import function, method


@function("url", arity=(1,), returns="kubernetes.URL", fold=True)
def url(text: Any) -> URLValue:
    return parse_url(want_string(text, "url"))


@function("isURL", arity=(1,), returns="bool")
def is_url(text: Any) -> celtypes.BoolType:
    try:
        parse_url(want_string(text, "isURL"))
    except ValueError:
        return cel_bool(False)
    return cel_bool(True)


def _u(value: Any, fn: str) -> URLValue:
    if not isinstance(value, URLValue):
        raise fail(f"no such overload: {type_name(value)}.{fn}()")
    return value


@method("getScheme", arity=(0,), returns="string")
def url_scheme(value: Any) -> celtypes.StringType:
    return celtypes.StringType(_u(value, "getScheme").parts.scheme)


@method("getHost", arity=(0,), returns="string")
def url_host(value: Any) -> celtypes.StringType:
    return celtypes.StringType(_u(value, "getHost").parts.netloc.rpartition("@")[2])


@method("getHostname", arity=(0,), returns="string")
def url_hostname(value: Any) -> celtypes.StringType:
    return celtypes.StringType(_u(value, "getHostname").parts.hostname or "")


@method("getPort", arity=(0,), returns="string")
def url_port(value: Any) -> celtypes.StringType:
    port = _u(value, "getPort").parts.port
    return celtypes.StringType("" if port is None else str(port))


@method("getEscapedPath", arity=(0,), returns="string")
def url_escaped_path(value: Any) -> celtypes.StringType:
    return celtypes.StringType(_u(value, "getEscapedPath").parts.path)


@method("getQuery", arity=(0,), returns="map")
def url_query(value: Any) -> celtypes.MapType:
    query = parse_qs(_u(value, "getQuery").parts.query, keep_blank_values=True)
    return celtypes.MapType(
        {
            celtypes.StringType(k): celtypes.ListType([celtypes.StringType(v) for v in vs])
            for k, vs in query.items()
        }
    )
