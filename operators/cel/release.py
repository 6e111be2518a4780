"""The Kubernetes minors whose DRA CEL kopf-dra speaks, and what differs between them.

A selector means what the API server and scheduler of the cluster's release make of it, and
two releases can disagree: a function's result or cost, what validation refuses. Each
:class:`~operators.cel.CELEnvironment` speaks one minor (the newest by default); everything it
compiles answers as that release's libraries do. Kubernetes 1.36 builds its CEL on cel-go
0.26, 1.37 on cel-go 0.29, 1.38 (v1.38.0-beta.0, a pre-release) on cel-go 0.33 (and its own
libraries of that release): a :class:`Dialect` names each difference the parser, checker,
planner and cost model must know of; the functions that differ are declared per minor in
library/ (``since``/``until`` of ``@function``/``@method``).
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

#: Oldest first; each has its oracle in hack/cel-oracle (the differential tests). 1.38's is its
#: pre-release's libraries (v0.38.0-beta.0).
KUBERNETES_MINORS = ("1.36", "1.37", "1.38")
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
    #: Kubernetes 1.38 hands CEL a slice's internal form (dynamic-resource-allocation v0.38's
    #: api/conversion.go, cel/compile.go): an attribute value that does not convert (a version
    #: that does not parse, an empty list, none set) fails only the expressions that read it,
    #: where 1.36 and 1.37 fail every expression on that device; scalars win over lists when
    #: both are set, a qualified name over the driver's unqualified one; the device maps convert
    #: a key to a string, compare strictly and keep their default when ``cel.bind`` binds them
    #: empty; capacities parse as apimachinery v0.38 parses quantities (device.py,
    #: runtime.HeldDomains).
    lazy_attributes: bool
    #: cel-go 0.33's interpreter charges each step from its frame where 0.26 and 0.29 observed
    #: the steps (interpreter/interpretable.go, attributes.go): a strict call stops at the first
    #: argument that fails, uncharged (``!`` is charged), so a binary call's right operand is not
    #: evaluated after a failed left one, nor the right operand of ``==``/``!=`` (charged); a
    #: list or map literal with a failed element is not charged; a failed qualifier is charged,
    #: optional or presence test included; a rooted attribute's qualifiers are charged; a
    #: presence test on a conditional costs its qualifiers (0.26 and 0.29 take back 1).
    frame_costs: bool
    #: cel-go 0.33's fold (interpreter/interpretable.go) returns a comprehension's result at once
    #: over any empty range with a size, an empty string or bytes too; 0.26 and 0.29 refuse a
    #: range that is no list or map.
    empty_ranges: bool
    #: cel-go 0.33's estimator (common/cost, its version 0 model): a field selection costs 1
    #: whatever the operand's type (0.29: on a map, struct or type parameter only); a type value
    #: is a scalar of size 1 (0.29: of unknown size) and an optional one only around a scalar;
    #: a local's size counts before its type's; an empty literal's element has no size (0.29:
    #: 0); a presence test on a conditional with a computed branch costs 1 more; ``distinct()``
    #: of strings or bytes also traverses them (ext/lists version 3); a field path is tracked
    #: only from an operand that has one, for a presence test too (``has()`` of an attribute is
    #: sized as the attribute), and a ``cel.bind`` takes its result's path and the size it has
    #: while the bound variable is in scope.
    v33_estimates: bool
    #: cel-go 0.33's checker (checker/types.go) matches the types of two type values by what
    #: they are types of where a type parameter takes part: ``type([]) == bool`` is refused
    #: (``type(list(T))`` against ``type(bool)``); 0.29 matched any two.
    typed_types: bool
    #: Kubernetes 1.38 builds on Go 1.27, whose regexp finds a script by its loose name too
    #: (``\p{Old_Italic}``) and whose tables are Unicode 17.0.0, eleven scripts newer than the
    #: 15.0.0 of Go 1.26, on which 1.36 and 1.37 build (goregexp.py).
    go127_regexp: bool
    #: Kubernetes 1.38's library estimator (apiserver pkg/cel/library/cost.go) sizes what a URL
    #: accessor returns as its URL (getEscapedPath up to three times that); 1.37 left it unsized.
    sized_url_accessors: bool


@functools.cache
def dialect(kubernetes: str) -> Dialect:
    """The dialect of a minor kopf-dra speaks (ValueError for any other)."""
    at = minor(check_minor(kubernetes))
    newer = at >= (1, 37)
    return Dialect(
        kubernetes=kubernetes,
        escaped_fields=newer,
        root_names=newer,
        sized_string_calls=newer,
        strict_optional_or=newer,
        lazy_attributes=at >= (1, 38),
        frame_costs=at >= (1, 38),
        empty_ranges=at >= (1, 38),
        v33_estimates=at >= (1, 38),
        typed_types=at >= (1, 38),
        go127_regexp=at >= (1, 38),
        sized_url_accessors=at >= (1, 38),
    )
