"""The functions of the DRA CEL environment: Kubernetes' base libraries, on plain values.

Kubernetes builds DRA selectors on its base environment (apiserver pkg/cel/environment,
base.go): the CEL standard library, ext.Strings v2, ext.Sets, ext.Lists v3, ext.Bindings,
two-variable comprehensions, optional types, and its own URLs, Regex, Lists, Authz, Quantity,
IP, CIDR, Format and Semver v1 libraries, plus ``includes()`` (DRA's own in 1.36, the Lists
library's in 1.37). Each module here mirrors one of them. Every function is declared once
with ``@function``/``@method`` and its typed signatures (see _registry.py), an overload that
only some Kubernetes minors have with its bounds; importing this package fills
:data:`FUNCTIONS` (every declaration), and :func:`functions_of` gives one minor's.
"""

from __future__ import annotations

from . import (
    authz,
    cidr,
    comprehensions,
    dra,
    format,
    ip,
    lists,
    optional,
    quantity,
    regex,
    semver,
    sets,
    standard,
    strings,
    timestamps,
    urls,
)
from ._registry import REGISTRY, Function, Overload, Registry, function, method, runtime_matches
from .regex import compile_regex

FUNCTIONS = REGISTRY.functions
functions_of = REGISTRY.table

__all__ = [
    "FUNCTIONS",
    "REGISTRY",
    "Function",
    "Overload",
    "Registry",
    "authz",
    "cidr",
    "compile_regex",
    "comprehensions",
    "dra",
    "format",
    "function",
    "functions_of",
    "ip",
    "lists",
    "method",
    "optional",
    "quantity",
    "regex",
    "runtime_matches",
    "semver",
    "sets",
    "standard",
    "strings",
    "timestamps",
    "urls",
]
