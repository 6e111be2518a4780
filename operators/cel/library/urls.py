"""Kubernetes' URLs library (``url()``, ``isURL()`` and the URL getters)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from ..runtime import CelError, CelMap
from ..values import URLValue, parse_url
from ._registry import function, method

U = "kubernetes.URL"


@function("url", f"string_to_url (string) -> {U}")
def url(text: Any) -> URLValue:
    try:
        return parse_url(text)
    except ValueError as exc:
        raise CelError(str(exc)) from None


@function("isURL", "is_url_string (string) -> bool")
def is_url(text: Any) -> bool:
    try:
        parse_url(text)
    except ValueError:
        return False
    return True


@method("getScheme", f"url_get_scheme {U}.() -> string")
def url_scheme(value: Any) -> str:
    return value.parts.scheme  # type: ignore[no-any-return]


@method("getHost", f"url_get_host {U}.() -> string")
def url_host(value: Any) -> str:
    return value.parts.netloc.rpartition("@")[2]  # type: ignore[no-any-return]


@method("getHostname", f"url_get_hostname {U}.() -> string")
def url_hostname(value: Any) -> str:
    return value.parts.hostname or ""


@method("getPort", f"url_get_port {U}.() -> string")
def url_port(value: Any) -> str:
    port = value.parts.port
    return "" if port is None else str(port)


@method("getEscapedPath", f"url_get_escaped_path {U}.() -> string")
def url_escaped_path(value: Any) -> str:
    return value.parts.path  # type: ignore[no-any-return]


@method("getQuery", f"url_get_query {U}.() -> map(string, list(string))")
def url_query(value: Any) -> CelMap:
    query = parse_qs(value.parts.query, keep_blank_values=True)
    return CelMap({k: list(vs) for k, vs in query.items()})
