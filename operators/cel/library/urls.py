"""Kubernetes' URLs library (``url()``, ``isURL()`` and the URL getters)."""

from __future__ import annotations

from typing import Any

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


def _text(raw: bytes) -> str:
    """A Go string of these bytes, as CEL sees it (invalid UTF-8 read as U+FFFD)."""
    return raw.decode("utf-8", "replace")


@method("getScheme", f"url_get_scheme {U}.() -> string")
def url_scheme(value: Any) -> str:
    return str(value.parts.scheme)


@method("getHost", f"url_get_host {U}.() -> string")
def url_host(value: Any) -> str:
    return _text(value.parts.host)


@method("getHostname", f"url_get_hostname {U}.() -> string")
def url_hostname(value: Any) -> str:
    return _text(value.parts.host_port()[0])


@method("getPort", f"url_get_port {U}.() -> string")
def url_port(value: Any) -> str:
    return _text(value.parts.host_port()[1])


@method("getEscapedPath", f"url_get_escaped_path {U}.() -> string")
def url_escaped_path(value: Any) -> str:
    return _text(value.parts.escaped_path)


@method("getQuery", f"url_get_query {U}.() -> map(string, list(string))")
def url_query(value: Any) -> CelMap:
    return CelMap({_text(k): [_text(v) for v in vs] for k, vs in value.parts.query().items()})
