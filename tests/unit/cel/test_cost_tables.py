"""Every CEL function has a price, decided on purpose.

A call is priced twice, by tables kept apart as upstream keeps them: the estimate validation
computes (``cost._overload_estimate`` by overload id, then ``cost._library_estimate`` by
function name) and the charge at runtime (``cost._tracker`` by overload id, then
``cost._library_charge`` by function name). A function declared in the library and found in
neither costs cel-go's default, and nothing that compares results notices: only the oracle's
cost columns would (``make cel-oracle``). So a function is either priced in both the estimate
and the charge, or listed below as costing cel-go's default on purpose.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

import pytest

from operators.cel import cost
from operators.cel.library import FUNCTIONS, Function, Overload

# Priced by cel-go, not by a table of ours: a flat 1 per call, or (operators, conversions,
# strings) a size rule by overload id in ``Estimator.function_cost`` and ``_default_charge``.
# ``_==_`` is charged by ``equality_charge`` and estimated by its operands' types (Kubernetes'
# types cost 1), which the declared ``(A, A)`` does not show.
CEL_GO_DEFAULT = frozenset(
    {
        # the standard library: operators, conversions, size, matches, string methods
        "!_", "-_", "@in", "@not_strictly_false", "_!=_", "_%_", "_&&_", "_*_", "_+_", "_-_",
        "_/_", "_<=_", "_<_", "_==_", "_>=_", "_>_", "_?_:_", "_[_]", "_||_", "bool", "bytes",
        "contains", "double", "duration", "dyn", "endsWith", "int", "matches", "size",
        "startsWith", "string", "timestamp", "type", "uint",
        # durations and timestamps
        "getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear", "getFullYear", "getHours",
        "getMilliseconds", "getMinutes", "getMonth", "getSeconds",
        # optional types, two-variable comprehensions
        "_?._", "_[?_]", "hasValue", "optional.none", "optional.of", "optional.ofNonZeroValue",
        "optional.unwrap", "or", "orValue", "unwrapOpt", "value", "cel.@mapInsert",
        # the strings and lists extensions where they have no estimator of their own
        "charAt", "format", "strings.quote", "first", "last",
        # Kubernetes' named formats (each returns a format for validate()) and isURL
        "format.byte", "format.date", "format.datetime", "format.dns1035Label",
        "format.dns1035LabelPrefix", "format.dns1123Label", "format.dns1123LabelPrefix",
        "format.dns1123Subdomain", "format.dns1123SubdomainPrefix", "format.labelValue",
        "format.qualifiedName", "format.uri", "format.uuid", "isURL",
    }
)  # fmt: skip
# Estimated by name but charged cel-go's default, on purpose: (function, overload id).
ESTIMATE_ONLY = {
    # DRA's estimator (1.36) bounds it by the 48 values an attribute list may hold; cel-go
    # charges 1. 1.37's list_includes_dyn_dyn is the Lists library's, priced by name in both.
    ("includes", "dra_includes_dyn_dyn"),
}


def _call(overload: Overload) -> tuple[cost.Node | None, list[cost.Node]]:
    """Estimator nodes for a call of ``overload``: each argument of its declared type, size
    (0, 10)."""
    nodes = [cost.Node(None, None, p, (0, 10)) for p in overload.params]
    return (nodes[0], nodes[1:]) if overload.member else (None, nodes)


def _prices(fn: Function, overload: Overload) -> tuple[bool, bool, bool, bool]:
    """(estimated by id, charged by id, estimated by name, charged by name)."""
    target, args = _call(overload)
    return (
        cost._overload_estimate(cost.Estimator(), overload.id, target, args) is not None,
        cost._tracker(overload.id) is not None,
        cost._library_estimate(cost.Estimator(), fn.name, overload.id, target, args) is not None,
        cost._library_charge(fn.name, overload.id) is not None,
    )


OVERLOADS = [(fn, o) for fn in FUNCTIONS.values() for o in fn.overloads]


@pytest.mark.parametrize(
    ("fn", "overload"), OVERLOADS, ids=[f"{fn.name}:{o.id}" for fn, o in OVERLOADS]
)
def test_an_overload_priced_at_validation_is_priced_at_runtime(
    fn: Function, overload: Overload
) -> None:
    by_id_estimate, by_id_charge, by_name_estimate, by_name_charge = _prices(fn, overload)
    assert by_id_estimate == by_id_charge, "priced by overload id in one table only"
    if (fn.name, overload.id) in ESTIMATE_ONLY:
        assert by_name_estimate
        assert not by_name_charge
    else:
        assert by_name_estimate == by_name_charge, "priced by function name in one table only"


def test_every_function_is_priced_or_costs_cel_gos_default_on_purpose() -> None:
    priced = {fn.name for fn, o in OVERLOADS if any(_prices(fn, o))}
    unpriced = set(FUNCTIONS) - priced
    assert unpriced - CEL_GO_DEFAULT == set(), "price these in cost.py, or list them here"
    assert CEL_GO_DEFAULT - unpriced == set(), "priced or gone: no longer cel-go's default"


def _compared(fn: Callable[..., Any], variable: str) -> set[str]:
    """The string constants ``variable`` is compared with in ``fn`` (==, in a tuple or set,
    in a module-level frozenset)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(fn)))):
        if not (isinstance(node, ast.Compare) and ast.unparse(node.left) == variable):
            continue
        for right in node.comparators:
            if isinstance(right, ast.Constant) and isinstance(right.value, str):
                found.add(right.value)
            elif isinstance(right, (ast.Tuple, ast.Set, ast.List)):
                found.update(
                    e.value
                    for e in right.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)
                )
            elif isinstance(right, ast.Name):
                found.update(getattr(cost, right.id))
    return found


def test_the_tables_name_only_functions_and_overloads_that_exist() -> None:
    """A name the registry does not declare prices nothing: a typo, or a function gone."""
    names = _compared(cost._library_estimate, "function") | _compared(
        cost._library_charge, "function"
    )
    assert names - set(FUNCTIONS) == set()
    ids = set().union(
        *(
            _compared(f, "overload")
            for f in (
                cost._overload_estimate,
                cost._tracker,
                cost._default_charge,
                cost._sized_string_charge,
            )
        ),
        _compared(cost.Estimator.function_cost, "overload"),
    )
    assert ids - {o.id for _, o in OVERLOADS} == set()


def test_the_table_reader_sees_names() -> None:
    assert {"check", "fieldSelector", "serviceAccount"} <= _compared(
        cost._library_charge, "function"
    )
    assert {"list_slice", "list_distinct"} <= _compared(cost._tracker, "overload")
