"""Kubernetes' named formats (``format.dns1123Label()``, ``format.named()``, ``validate()``).

Each format validates a string the way apimachinery's validation (and kube-openapi's strfmt)
does; ``validate`` gives ``optional.none()`` for a valid string, else the error messages.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..runtime import Optional, register_strict_equal, register_type_name
from ..values import parse_url
from ._registry import function, method

F = "kubernetes.NamedFormat"

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_UUID = re.compile(
    r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}", re.IGNORECASE
)
_BASE64 = re.compile(
    r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})"
)
_TIME = re.compile(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))")


def _label(
    prefix: bool, pattern: re.Pattern[str], limit: int, what: str
) -> Callable[[str], list[str]]:
    def check(text: str) -> list[str]:
        if prefix and text.endswith("-"):
            text = text[:-1]  # a generated name's prefix may end in a dash
        errors: list[str] = []
        if len(text) > limit:
            errors.append(f"must be no more than {limit} characters")
        if not pattern.fullmatch(text):
            errors.append(f"a {what} must consist of lower case alphanumeric characters or '-'")
        return errors

    return check


def _qualified_name(text: str) -> list[str]:
    errors: list[str] = []
    parts = text.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors += _label(False, _DNS1123_SUBDOMAIN, 253, "DNS-1123 subdomain")(prefix)
    else:
        return ["a qualified name must consist of alphanumeric characters, '-', '_' or '.'"]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    if name and not _QUALIFIED_NAME.fullmatch(name):
        errors.append("name part must consist of alphanumeric characters, '-', '_' or '.'")
    return errors


def _label_value(text: str) -> list[str]:
    errors: list[str] = []
    if len(text) > 63:
        errors.append("must be no more than 63 characters")
    if not _LABEL_VALUE.fullmatch(text):
        errors.append("a valid label must be an empty string or consist of alphanumeric characters")
    return errors


def _uri(text: str) -> list[str]:
    try:
        parse_url(text)
    except ValueError as exc:
        return [str(exc)]
    return []


def _is_date(text: str) -> bool:
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", text):
        return False
    try:
        datetime.date(int(text[:4]), int(text[5:7]), int(text[8:10]))
    except ValueError:
        return False
    return True


def _is_datetime(text: str) -> bool:
    if len(text) < 4:
        return False
    parts = text.lower().split("t")
    if len(parts) < 2 or not _is_date(parts[0]):
        return False
    m = _TIME.search(parts[1])
    if m is None:
        return False
    return m.group(1) <= "23" and m.group(2) <= "59" and m.group(3) <= "59"


def _predicate(test: Callable[[str], bool], message: str) -> Callable[[str], list[str]]:
    return lambda text: [] if test(text) else [message]


@dataclass(frozen=True, slots=True)
class NamedFormat:
    """A ``kubernetes.NamedFormat`` value."""

    name: str
    validate: Callable[[str], list[str]]
    max_regex_size: int


FORMATS: dict[str, NamedFormat] = {
    "dns1123Label": NamedFormat(
        "DNS1123Label", _label(False, _DNS1123_LABEL, 63, "lowercase RFC 1123 label"), 30
    ),
    "dns1123Subdomain": NamedFormat(
        "DNS1123Subdomain",
        _label(False, _DNS1123_SUBDOMAIN, 253, "lowercase RFC 1123 subdomain"),
        60,
    ),
    "dns1035Label": NamedFormat(
        "DNS1035Label", _label(False, _DNS1035_LABEL, 63, "DNS-1035 label"), 30
    ),
    "qualifiedName": NamedFormat("QualifiedName", _qualified_name, 60),
    "dns1123LabelPrefix": NamedFormat(
        "DNS1123LabelPrefix", _label(True, _DNS1123_LABEL, 63, "lowercase RFC 1123 label"), 30
    ),
    "dns1123SubdomainPrefix": NamedFormat(
        "DNS1123SubdomainPrefix",
        _label(True, _DNS1123_SUBDOMAIN, 253, "lowercase RFC 1123 subdomain"),
        60,
    ),
    "dns1035LabelPrefix": NamedFormat(
        "DNS1035LabelPrefix", _label(True, _DNS1035_LABEL, 63, "DNS-1035 label"), 30
    ),
    "labelValue": NamedFormat("LabelValue", _label_value, 40),
    "uri": NamedFormat("URI", _uri, 1103),
    "uuid": NamedFormat(
        "uuid",
        _predicate(lambda s: bool(_UUID.fullmatch(s)), "does not match the UUID format"),
        len(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"),
    ),
    "byte": NamedFormat(
        "byte", _predicate(lambda s: bool(_BASE64.fullmatch(s)), "invalid base64"), 84
    ),
    "date": NamedFormat("date", _predicate(_is_date, "invalid date"), 76),
    "datetime": NamedFormat("datetime", _predicate(_is_datetime, "invalid datetime"), 76),
}


def _constant(fmt: NamedFormat) -> Callable[[], NamedFormat]:
    def named_format() -> NamedFormat:
        return fmt

    return named_format


for _key, _fmt in FORMATS.items():
    function(f"format.{_key}", f"format.{_key} () -> {F}")(_constant(_fmt))


@function("format.named", f"format-named (string) -> optional({F})")
def format_named(name: Any) -> Optional:
    fmt = FORMATS.get(name)
    return Optional.NONE if fmt is None else Optional(fmt)


@method("validate", f"format-validate {F}.(string) -> optional(list(string))")
def validate(fmt: Any, text: Any) -> Optional:
    errors = fmt.validate(text)
    return Optional(list(errors)) if errors else Optional.NONE


register_type_name(NamedFormat, F)
register_strict_equal(NamedFormat)
