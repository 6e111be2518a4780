"""Derived attributes (1.37, DRADerivedAttributes): the API server's verdict on an expression.

A derived attribute's expression runs in the selectors' environment but is a grouping key for
``matchAttribute``/``distinctAttribute``, not a filter: Kubernetes 1.37 compiles it with its
``DerivedAttribute`` option, which accepts a primitive scalar (string, int, bool, semver, or
the unknown type) instead of a bool, and a list of those where list-typed attributes are on.
The length and the per-expression cost limit are a selector's; the claim's total is capped by
the caller (``DeviceClaimDerivedAttributeCELMaxCost``), so the estimate is returned.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import types as t
from .compiler import DEFAULT_COST_LIMIT, Program, check_expression
from .errors import InvalidSelectorError

#: The first Kubernetes minor with derived attributes (DRADerivedAttributes).
DERIVED_ATTRIBUTES_SINCE = "1.37"

_SCALARS = (t.BOOL, t.INT, t.STRING, t.SEMVER)


@dataclass(frozen=True, slots=True)
class DerivedVerdict:
    """``error`` None: accepted; ``cost`` is the estimate the claim's budget counts (0 when
    the expression did not compile)."""

    error: InvalidSelectorError | None
    cost: int = 0


def _scalar(result: t.Type) -> bool:
    return result.kind in (t.Kind.DYN, t.Kind.ANY) or result in _SCALARS


def _allowed(result: t.Type, list_types: bool) -> bool:
    if _scalar(result):
        return True
    return (
        list_types
        and result.kind == t.Kind.LIST
        and len(result.params) == 1
        and _scalar(result.params[0])
    )


def check_derived_attribute(
    expression: str,
    *,
    list_types: bool,
    cost_limit: int = DEFAULT_COST_LIMIT,
    kubernetes: str = DERIVED_ATTRIBUTES_SINCE,
) -> DerivedVerdict:
    """Compile ``expression`` as a new derived attribute; ``list_types``: DRAListTypeAttributes.
    Compiled in the CEL of ``kubernetes`` (1.37, where derived attributes came, by default; a
    later minor's API server validates with its own CEL)."""
    try:
        checked = check_expression(expression, kubernetes)
        if not _allowed(checked.result, list_types):
            what = "a primitive scalar (string, integer, boolean, semver)"
            if list_types:
                what += " or a list of these scalars"
            raise InvalidSelectorError(
                f"must evaluate to {what}, not {t.show(checked.result)}", expression=expression
            )
        checked.plan()
    except InvalidSelectorError as exc:
        return DerivedVerdict(exc)
    high = checked.estimate()
    if high > cost_limit:
        return DerivedVerdict(
            InvalidSelectorError(
                f"estimated cost {high} exceeds the limit of {cost_limit}", expression=expression
            ),
            high,
        )
    return DerivedVerdict(None, high)


def compile_derived(
    expression: str, *, kubernetes: str, cost_limit: int = DEFAULT_COST_LIMIT
) -> Program:
    """Compile a stored derived attribute as the scheduler does (GetOrCompileDerivedAttribute):
    the output rule of a stored expression (lists allowed whatever the gate, so that objects
    written while it was on still run) and no cost estimate, only the runtime limit; raises
    InvalidSelectorError (message without context)."""
    checked = check_expression(expression, kubernetes)
    if not _allowed(checked.result, True):
        raise InvalidSelectorError(
            "must evaluate to a primitive scalar (string, integer, boolean, semver) or a list "
            f"of these scalars, not {t.show(checked.result)}",
            expression=expression,
        )
    plan, planner = checked.plan()
    return Program(
        expression=expression,
        root=plan.fn(),
        slots=planner.slots,
        estimated_cost=0,
        cost_limit=cost_limit,
        mutates_quantities=planner.mutates_quantities,
        lazy_attributes=planner.release.lazy_attributes,
    )
