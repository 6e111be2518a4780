"""Compile a device selector as the API server validates it, into a program that runs it.

Validation, as Kubernetes' validateCELSelector does it for a new selector: the length limit,
cel-go's parser and checker over the DRA environment, the result type (bool, or the unknown
type of an attribute), upstream's planning (constant conversions and regular expressions are
compiled then), and the cost estimate against the limit. Every verdict is upstream's; the
messages are ours.

Nothing upstream accepts is restricted here: two-variable comprehensions and the
three-argument ``map``, ``duration``/``timestamp``/``type()``, and binding the name ``device``
(in ``cel.bind`` or a macro, which then shadows the variable) all compile and evaluate as in
Kubernetes; the differential generator (tests/unit/cel/generators.py) covers each. Which
Kubernetes: the minor a program is compiled for (``kubernetes``, the newest by default), whose
dialect (release.py) and functions the parser, checker, planner and cost model follow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import types as t
from .checker import Checker
from .cost import estimate
from .errors import InvalidSelectorError
from .library import functions_of
from .planner import CHECKPOINTS, COST, FIRST_SLOT, LIMIT, Checkpoints, Fn, PlanError, Planner
from .release import DEFAULT_KUBERNETES, dialect
from .runtime import CelError, CostLimitExceeded
from .syntax import allow_deep_recursion, parse
from .values import MUTATIONS, restore

__all__ = [
    "DEFAULT_COST_LIMIT",
    "MAX_EXPRESSION_LENGTH",
    "Checked",
    "Program",
    "check_expression",
    "check_selector",
    "compile_program",
]

# resource.k8s.io/v1: CELSelectorExpressionMaxLength (bytes) and CELSelectorExpressionMaxCost.
MAX_EXPRESSION_LENGTH = 10 * 1024
DEFAULT_COST_LIMIT = 1_000_000

_UNSET = object()
#: Cost between two checkpoints of an interruptible evaluation: a few milliseconds here.
CHECKPOINT_COST = 20_000


@dataclass(frozen=True, slots=True)
class Program:
    """A compiled selector: ``run(device)`` gives its value (bool) or raises ``CelError`` /
    ``CostLimitExceeded``; ``cost`` is the runtime cost of the last run."""

    expression: str
    root: Fn
    slots: int
    estimated_cost: int
    cost_limit: int
    mutates_quantities: bool
    #: Reads the device's 1.38 form (DeviceView.device; release.Dialect.lazy_attributes).
    lazy_attributes: bool = False

    def run(self, device: Any, interrupt: Callable[[], bool] | None = None) -> Any:
        """Evaluate against one ``device`` value; returns (value, cost). ``interrupt`` is
        asked every ``CHECKPOINT_COST`` units of cost whether to stop there
        (``EvaluationInterrupted``)."""
        if interrupt is None:
            return self._run([0, device, self.cost_limit])
        limit = min(self.cost_limit, CHECKPOINT_COST)
        token = CHECKPOINTS.set(Checkpoints(self.cost_limit, CHECKPOINT_COST, interrupt))
        try:
            return self._run([0, device, limit])
        finally:
            CHECKPOINTS.reset(token)

    def _run(self, act: list[Any]) -> Any:
        if self.slots > FIRST_SLOT:
            act.extend([_UNSET] * (self.slots - FIRST_SLOT))
        if self.mutates_quantities:
            log: list[Any] = []
            token = MUTATIONS.set(log)
            try:
                value = self.root(act)
            finally:
                MUTATIONS.reset(token)
                restore(log)
        else:
            value = self.root(act)
        if act[COST] > self.cost_limit:
            raise CostLimitExceeded(act[COST])
        return value, act[COST]


@dataclass(frozen=True, slots=True)
class Checked:
    """An expression parsed and type-checked as one Kubernetes minor's API server does, with
    what planning and the cost estimate need: the steps selectors and derived attributes
    share before their result types part."""

    expression: str
    root: Any
    result: t.Type
    kubernetes: str

    def plan(self) -> tuple[Any, Planner]:
        """upstream's planning (constant conversions and regular expressions compile here)."""
        planner = Planner(functions_of(self.kubernetes), dialect(self.kubernetes))
        try:
            return planner.plan(self.root), planner
        except PlanError as exc:
            raise InvalidSelectorError(
                f"program instantiation failed: {exc}", expression=self.expression
            ) from None

    def estimate(self) -> int:
        """The worst-case cost, as validation estimates it."""
        return estimate(self.root, dialect(self.kubernetes))[1]


def check_expression(expression: str, kubernetes: str = DEFAULT_KUBERNETES) -> Checked:
    """The length limit, cel-go's parser and checker over the DRA environment of
    ``kubernetes``; raises InvalidSelectorError (message without context)."""
    size = len(expression.encode("utf-8", "surrogatepass"))
    if size > MAX_EXPRESSION_LENGTH:
        raise InvalidSelectorError(
            f"expression is {size} bytes long, more than the limit of {MAX_EXPRESSION_LENGTH}",
            expression=expression,
        )
    release = dialect(kubernetes)
    allow_deep_recursion()
    try:
        root = parse(expression, escaped_fields=release.escaped_fields)
        result = Checker(expression, functions_of(kubernetes), release).check(root)
    except InvalidSelectorError as exc:
        raise InvalidSelectorError(
            exc.message, expression=expression, line=exc.line, column=exc.column
        ) from None
    return Checked(expression, root, result, kubernetes)


def compile_program(
    expression: str,
    *,
    cost_limit: int = DEFAULT_COST_LIMIT,
    kubernetes: str = DEFAULT_KUBERNETES,
) -> Program:
    """Validate and plan as the API server and scheduler of ``kubernetes`` (a minor) do;
    raises InvalidSelectorError (message without context)."""
    checked = check_expression(expression, kubernetes)
    if checked.result.kind not in (t.Kind.BOOL, t.Kind.DYN, t.Kind.ANY):
        raise InvalidSelectorError(
            f"must evaluate to bool or the unknown type, not {t.show(checked.result)}",
            expression=expression,
        )
    plan, planner = checked.plan()
    high = checked.estimate()
    if high > cost_limit:
        raise InvalidSelectorError(
            f"estimated cost {high} exceeds the limit of {cost_limit} (nested macros over "
            "large lists multiply)",
            expression=expression,
        )
    return Program(
        expression=expression,
        root=plan.fn(),
        slots=planner.slots,
        estimated_cost=high,
        cost_limit=cost_limit,
        mutates_quantities=planner.mutates_quantities,
        lazy_attributes=planner.release.lazy_attributes,
    )


def check_selector(
    expression: str, *, cost_limit: int = DEFAULT_COST_LIMIT, kubernetes: str = DEFAULT_KUBERNETES
) -> InvalidSelectorError | None:
    """The API server's verdict (of that Kubernetes minor) on a new or changed selector, None
    when it would accept it.

    Input the API server refuses never reaches a scheduler, so whoever validates input in its
    place (``simulate``, an admission webhook) must refuse exactly that: a field the device has
    not, a call no overload takes, ternary branches of two types, an estimated cost over the
    limit, besides syntax and length.
    """
    try:
        compile_program(expression, cost_limit=cost_limit, kubernetes=kubernetes)
    except InvalidSelectorError as exc:
        return exc
    return None


__all__ += ["LIMIT", "CelError", "CostLimitExceeded"]
