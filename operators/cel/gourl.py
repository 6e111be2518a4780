"""URLs as Go's net/url reads them: Kubernetes' ``url()`` is Go's ParseRequestURI, then Parse.

Python's urllib splits differently (fragments, bracketed hosts, escapes, ports), so the
getters of ``kubernetes.URL`` would disagree with the API server on the same text. This is the
subset of Go's behaviour those getters see, on the URL's bytes as Go handles strings.
"""

from __future__ import annotations

import ipaddress
import string
from dataclasses import dataclass

__all__ = ["GoURL", "URLError", "parse", "parse_request_uri"]

_ALNUM = frozenset((string.ascii_letters + string.digits).encode())
# Bytes each part leaves unescaped (besides ASCII letters and digits), as Go's shouldEscape.
_PATH_SAFE = _ALNUM | frozenset(b"$&+,-./:;=@_~")
_HOST_SAFE = _ALNUM | frozenset(b"!\"$&'()*+,-.:;<=>[]_~")
_FRAGMENT_SAFE = _ALNUM | frozenset(b"!$&()*+,-./:;=?@_~")
_PATH_SUBDELIMS = frozenset(b"!$&'()*+,;=:@[]%")
_USERINFO = _ALNUM | frozenset(b"-._:~!$&'()*+,;=%@")
_HEX = frozenset(b"0123456789abcdefABCDEF")


class URLError(ValueError):
    """Go's url.Parse refused the text."""


@dataclass(frozen=True, slots=True)
class GoURL:
    """The fields of Go's url.URL that Kubernetes' getters read."""

    scheme: str
    opaque: bytes
    host: bytes
    path: bytes
    raw_path: bytes
    raw_query: bytes

    @property
    def escaped_path(self) -> bytes:
        """Go's EscapedPath: the raw path when it is a valid escaping of the path."""
        if self.raw_path and _valid_encoded_path(self.raw_path):
            try:
                if _unescape(self.raw_path, "path") == self.path:
                    return self.raw_path
            except URLError:
                pass
        if self.path == b"*":
            return b"*"
        return _escape_path(self.path)

    def host_port(self) -> tuple[bytes, bytes]:
        """Go's splitHostPort: a numeric port after the last colon; brackets removed."""
        host, port = self.host, b""
        colon = host.rfind(b":")
        if colon != -1 and _valid_optional_port(host[colon:]):
            host, port = host[:colon], host[colon + 1 :]
        if host.startswith(b"[") and host.endswith(b"]"):
            host = host[1:-1]
        return host, port

    def query(self) -> dict[bytes, list[bytes]]:
        """Go's Query(): pairs split on "&", those with a ";" or a bad escape skipped."""
        values: dict[bytes, list[bytes]] = {}
        for pair in self.raw_query.split(b"&") if self.raw_query else []:
            if b";" in pair or not pair:
                continue
            key, _, value = pair.partition(b"=")
            try:
                k, v = _unescape(key, "query"), _unescape(value, "query")
            except URLError:
                continue
            values.setdefault(k, []).append(v)
        return values


def parse_request_uri(text: str) -> GoURL:
    """Go's url.ParseRequestURI: an absolute URL or an absolute path, no fragment split."""
    return _parse(text.encode("utf-8", "surrogatepass"), via_request=True)


def parse(text: str) -> GoURL:
    """Go's url.Parse: a fragment after the first "#" must unescape, and is dropped here."""
    raw = text.encode("utf-8", "surrogatepass")
    rest, _, fragment = raw.partition(b"#")
    url = _parse(rest, via_request=False)
    if fragment:
        _unescape(fragment, "fragment")
    return url


def _parse(raw: bytes, *, via_request: bool) -> GoURL:
    if any(b < 0x20 or b == 0x7F for b in raw):
        raise URLError("net/url: invalid control character in URL")
    if not raw and via_request:
        raise URLError("empty url")
    if raw == b"*":
        return GoURL("", b"", b"", b"*", b"", b"")
    scheme, rest = _scheme(raw)
    if rest.endswith(b"?") and rest.count(b"?") == 1:
        rest, query = rest[:-1], b""
    else:
        rest, _, query = rest.partition(b"?")
    if not rest.startswith(b"/"):
        if scheme:
            return GoURL(scheme, rest, b"", b"", b"", query)
        if via_request:
            raise URLError("invalid URI for request")
        if b":" in rest.partition(b"/")[0]:
            raise URLError("first path segment in URL cannot contain colon")
    host = b""
    if (scheme or (not via_request and not rest.startswith(b"///"))) and rest.startswith(b"//"):
        authority, slash, tail = rest[2:].partition(b"/")
        rest = slash + tail
        host = _authority(scheme, authority)
    path = _unescape(rest, "path")
    raw_path = b"" if _escape_path(path) == rest else rest
    return GoURL(scheme, b"", host, path, raw_path, query)


def _scheme(raw: bytes) -> tuple[str, bytes]:
    for i, c in enumerate(raw):
        if (0x61 <= c <= 0x7A) or (0x41 <= c <= 0x5A):
            continue
        if (0x30 <= c <= 0x39) or c in b"+-.":
            if i == 0:
                return "", raw
            continue
        if c == 0x3A:  # ":"
            if i == 0:
                raise URLError("missing protocol scheme")
            return raw[:i].decode("ascii").lower(), raw[i + 1 :]
        return "", raw
    return "", raw


def _authority(scheme: str, authority: bytes) -> bytes:
    at = authority.rfind(b"@")
    host = _host(scheme, authority[at + 1 :] if at >= 0 else authority)
    if at >= 0:
        userinfo = authority[:at]
        if any(b < 0x80 and b not in _USERINFO for b in userinfo) or any(
            b >= 0x80 for b in userinfo
        ):
            raise URLError("net/url: invalid userinfo")
        for part in userinfo.split(b":", 1):
            _unescape(part, "userinfo")
    return host


def _host(scheme: str, host: bytes) -> bytes:
    bracket = host.rfind(b"[")
    if bracket > 0:
        raise URLError("invalid IP-literal")
    if bracket == 0:
        close = host.rfind(b"]")
        if close < 0:
            raise URLError("missing ']' in host")
        port = host[close + 1 :]
        if not _valid_optional_port(port):
            raise URLError(f"invalid port {port!r} after host")
        port = _unescape(port, "host")
        name = host[1:close]
        zone = name.find(b"%25")
        if zone >= 0:
            unescaped = _unescape(name[:zone], "host") + _unescape(name[zone:], "zone")
        else:
            unescaped = _unescape(name, "host")
        try:
            address = ipaddress.ip_address(unescaped.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise URLError(f"invalid host: {unescaped!r}") from None
        if address.version == 4:
            raise URLError("invalid IP-literal")
        return b"[" + unescaped + b"]" + port
    first = host.find(b":")
    if first != -1:
        last = host.rfind(b":")
        if last != first and scheme not in ("http", "https"):
            first = last
        if not _valid_optional_port(host[first:]):
            raise URLError(f"invalid port {host[first:]!r} after host")
    return _unescape(host, "host")


def _valid_optional_port(port: bytes) -> bool:
    if not port:
        return True
    return port[:1] == b":" and all(0x30 <= b <= 0x39 for b in port[1:])


def _unescape(s: bytes, mode: str) -> bytes:
    """Go's unescape: every "%" with two hex digits; hosts allow escapes of non-ASCII only."""
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c == 0x25:  # "%"
            if i + 2 >= len(s) or s[i + 1] not in _HEX or s[i + 2] not in _HEX:
                raise URLError(f"invalid URL escape {s[i : i + 3]!r}")
            value = int(s[i + 1 : i + 3], 16)
            if mode == "host" and value < 0x80 and s[i : i + 3] != b"%25":
                raise URLError(f"invalid URL escape {s[i : i + 3]!r}")
            if (
                mode == "zone"
                and s[i : i + 3] != b"%25"
                and value != 0x20
                and value not in _HOST_SAFE
            ):
                raise URLError(f"invalid URL escape {s[i : i + 3]!r}")
            out.append(value)
            i += 3
            continue
        if c == 0x2B and mode == "query":  # "+"
            out.append(0x20)
        else:
            if mode in ("host", "zone") and c < 0x80 and c not in _HOST_SAFE:
                raise URLError(f"invalid character {bytes([c])!r} in host name")
            out.append(c)
        i += 1
    return bytes(out)


def _escape_path(path: bytes) -> bytes:
    return b"".join(bytes([b]) if b in _PATH_SAFE else b"%%%02X" % b for b in path)


def _valid_encoded_path(s: bytes) -> bool:
    return all(b in _PATH_SUBDELIMS or b in _PATH_SAFE for b in s)
