"""The Kubernetes minors whose DRA CEL kopf-dra speaks, and what differs between them.

A selector means what the API server and scheduler of the cluster's release make of it, and
two releases can disagree: a function's result or cost, what validation refuses. Each
:class:`~operators.cel.CELEnvironment` speaks one minor (the newest by default); everything it
compiles answers as that release's libraries do. Kubernetes 1.36 builds its CEL on cel-go
0.26, 1.37 on cel-go 0.29 (and its own libraries of that release): a :class:`Dialect` names
each difference the parser, checker, planner and cost model must know of; the functions that
differ are declared per minor in library/ (``since``/``until`` of ``@function``/``@method``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

__all__ = [
    "DEFAULT_KUBERNETES",
    "KUBERNETES_MINORS",
    "NEWEST_KUBERNETES",
    "Dialect",
    "check_minor",
    "dialect",
    "minor",
]

#: Oldest first; each has its oracle in hack/cel-oracle (the differential tests). 1.38's oracle
#: is there (its pre-release's libraries) before kopf-dra speaks it.
KUBERNETES_MINORS = ("1.36", "1.37")
NEWEST_KUBERNETES = KUBERNETES_MINORS[-1]
#: What an environment speaks when no release is named: the project's default release's
#: (``api.features.DEFAULT_RELEASE``, a released minor, not a pre-release).
DEFAULT_KUBERNETES = "1.37"


def minor(kubernetes: str) -> tuple[int, int]:
    """``"1.37"`` as ``(1, 37)``, for ordering."""
    major, _, rest = kubernetes.partition(".")
    return int(major), int(rest)


def check_minor(kubernetes: str) -> str:
    """``kubernetes`` when kopf-dra speaks that minor, else ValueError."""
    if kubernetes not in KUBERNETES_MINORS:
        known = ", ".join(KUBERNETES_MINORS)
        raise ValueError(f"Kubernetes {kubernetes!r}: the CEL of {known} only")
    return kubernetes


@dataclass(frozen=True, slots=True)
class Dialect:
    """Where one minor's CEL parts from the others', outside its function declarations."""

    kubernetes: str
    #: cel-go 0.29 parses backtick-quoted field names (``device.attributes[d].`a-b```); 0.26
    #: refuses them ("unsupported syntax").
    escaped_fields: bool
    #: cel-go 0.29 resolves ``.name`` in the root scope, past a macro's variable of that name,
    #: and reads ``x.y`` as a field of a local ``x`` before any qualified name ``x.y``; 0.26
    #: looks the innermost scope up first either way.
    root_names: bool
    #: cel-go 0.29 charges ``startsWith``/``endsWith`` by the prefix (0.26: by the receiver)
    #: and prices the global ``matches(s, re)`` as ``s.matches(re)`` (0.26: 1).
    sized_string_calls: bool
    #: cel-go 0.29's ``or``/``orValue`` fail on a value that is no optional; 0.26 returned it.
    strict_optional_or: bool


@functools.cache
def dialect(kubernetes: str) -> Dialect:
    """The dialect of a minor kopf-dra speaks (ValueError for any other)."""
    newer = minor(check_minor(kubernetes)) >= (1, 37)
    return Dialect(
        kubernetes=kubernetes,
        escaped_fields=newer,
        root_names=newer,
        sized_string_calls=newer,
        strict_optional_or=newer,
    )
