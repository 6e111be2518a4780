"""The type check the API server runs on a selector: cel-go's checker over DRA's declarations.

Every node gets a type (``node.type``) and every call the overloads its argument types allow
(``node.ref``, cel-go's overload ids, in declaration order). What cel-go rejects is rejected
here: undeclared names, fields the ``device`` object does not have, calls no overload takes,
non-bool conditions. Then Kubernetes' AST validators: homogeneous list and map literals,
regular expression, duration and timestamp literals, and ``format`` calls with literal
arguments.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from . import types as t
from .errors import InvalidSelectorError
from .library import Function, functions_of
from .release import DEFAULT_KUBERNETES, Dialect, dialect
from .runtime import CelError, Uint
from .syntax import (
    Call,
    Comprehension,
    Expr,
    Ident,
    ListLit,
    Literal,
    MapLit,
    Select,
    StructLit,
    children,
    located,
)

# The ``device`` variable (dynamic-resource-allocation/cel, DRAConsumableCapacity and
# DRAListTypeAttributes on): attribute values are dyn, capacities quantities.
DEVICE_FIELDS: dict[str, t.Type] = {
    "driver": t.STRING,
    "allowMultipleAllocations": t.BOOL,
    "attributes": t.map_of(t.STRING, t.map_of(t.STRING, t.DYN)),
    "capacity": t.map_of(t.STRING, t.map_of(t.STRING, t.QUANTITY)),
}
VARIABLES: dict[str, t.Type] = {"device": t.DEVICE}

# Identifiers naming types: the checker finds them in the type registry (NewProtoRegistry's
# ListType and MapType have dyn parameters), not in the standard library's type-parameterised
# declarations; cel-go 0.33's typed type values make the difference visible (``bool == map``).
TYPE_IDENTS: dict[str, t.Type] = {
    "bool": t.type_of(t.BOOL),
    "bytes": t.type_of(t.BYTES),
    "double": t.type_of(t.DOUBLE),
    "google.protobuf.Duration": t.type_of(t.DURATION),
    "int": t.type_of(t.INT),
    "list": t.type_of(t.list_of(t.DYN)),
    "map": t.type_of(t.map_of(t.DYN, t.DYN)),
    "null_type": t.type_of(t.NULL),
    "string": t.type_of(t.STRING),
    "google.protobuf.Timestamp": t.type_of(t.TIMESTAMP),
    "type": t.type_of(t.TYPE),
    "uint": t.type_of(t.UINT),
}
# Struct types the environment knows, with their fields.
STRUCT_FIELDS: dict[str, dict[str, t.Type]] = {"kubernetes.DRADevice": DEVICE_FIELDS}
# The runtime type name a type identifier evaluates to.
TYPE_VALUE_NAMES: dict[str, str] = {
    "google.protobuf.Duration": "google.protobuf.Duration",
    "google.protobuf.Timestamp": "google.protobuf.Timestamp",
}


def _global_ident(name: str) -> t.Type | None:
    """The type of a name the environment declares: ``device``, a type's name."""
    if name in VARIABLES:
        return VARIABLES[name]
    if name in TYPE_IDENTS:
        return TYPE_IDENTS[name]
    if name in STRUCT_FIELDS:
        return t.type_of(t.struct(name))
    return None


class _CheckError(Exception):
    def __init__(self, node: Expr | None, message: str) -> None:
        super().__init__(message)
        self.node = node
        self.message = message


class Checker:
    """One check of one expression; raises InvalidSelectorError at the first error."""

    def __init__(
        self,
        source: str,
        functions: dict[str, Function] | None = None,
        release: Dialect | None = None,
    ) -> None:
        self.source = source
        self.release = release if release is not None else dialect(DEFAULT_KUBERNETES)
        self.functions = functions_of(self.release.kubernetes) if functions is None else functions
        self.mapping = t.Mapping(typed_types=self.release.typed_types)
        self.fresh = 0
        self.scopes: list[dict[str, t.Type]] = []

    # --- entry point ---

    def check(self, root: Expr) -> t.Type:
        try:
            self.visit(root)
        except _CheckError as exc:
            raise self.error(exc.node, exc.message) from None
        for node in walk(root):
            if node.type is not None:  # None: a part of a qualified name, never visited
                node.type = t.substitute(self.mapping, node.type, True)
        try:
            validate(root, self)
        except _CheckError as exc:
            raise self.error(exc.node, exc.message) from None
        return root.type  # type: ignore[no-any-return]

    def error(self, node: Expr | None, message: str) -> InvalidSelectorError:
        if node is None:
            return InvalidSelectorError(message)
        return located(message, node.pos, self.source)

    # --- helpers ---

    def new_var(self) -> t.Type:
        name = f"_var{self.fresh}"
        self.fresh += 1
        return t.param(name)

    def assignable(self, t1: t.Type, t2: t.Type) -> bool:
        result = t.assignable(self.mapping, t1, t2)
        if result is None:
            return False
        self.mapping = result
        return True

    def lookup_ident(self, name: str) -> tuple[str, t.Type] | None:
        """The name as the planner resolves it, and its type. cel-go 0.26 drops a leading
        dot and looks the innermost scope up first; 0.29 (``root_names``) looks ``.name`` up
        in the root scope only, and keeps the dot where a local of that name would hide it."""
        dotted = name.startswith(".")
        if dotted:
            name = name[1:]
        local = next((scope[name] for scope in reversed(self.scopes) if name in scope), None)
        if local is not None and not (dotted and self.release.root_names):
            return name, local
        found = _global_ident(name)
        if found is None:
            return None
        return ("." + name if local is not None else name), found

    def local_first(self, e: Expr) -> bool:
        """Is ``e`` a selection from a local variable, never a qualified name (cel-go 0.29)?"""
        while isinstance(e, Select):
            e = e.operand
        return (
            self.release.root_names
            and isinstance(e, Ident)
            and not e.name.startswith(".")
            and any(e.name in scope for scope in self.scopes)
        )

    def lookup_function(self, name: str) -> Function | None:
        return self.functions.get(name[1:] if name.startswith(".") else name)

    # --- the walk ---

    def visit(self, e: Expr) -> None:
        if isinstance(e, Literal):
            e.type = literal_type(e.value)
        elif isinstance(e, Ident):
            self.check_ident(e)
        elif isinstance(e, Select):
            self.check_select(e)
        elif isinstance(e, Call):
            self.check_call(e)
        elif isinstance(e, ListLit):
            self.check_list(e)
        elif isinstance(e, MapLit):
            self.check_map(e)
        elif isinstance(e, StructLit):
            raise _CheckError(e, f"undeclared reference to '{e.name}' (in container '')")
        else:
            assert isinstance(e, Comprehension)
            self.check_comprehension(e)

    def check_ident(self, e: Ident) -> None:
        found = self.lookup_ident(e.name)
        if found is None:
            raise _CheckError(
                e, f"undeclared reference to '{e.name.lstrip('.')}' (in container '')"
            )
        e.name, e.type = found
        e.ref = "ident"

    def check_select(self, e: Select) -> None:
        qualified = qualified_name(e)
        if qualified is not None and not self.local_first(e):
            found = self.lookup_ident(qualified)
            if found is not None and (found[0] not in VARIABLES):
                e.type = found[1]
                e.ref = ("qualified", found[0])
                return
        result = self.select_field(e, e.operand, e.field, optional=False)
        e.type = t.BOOL if e.test_only else t.substitute(self.mapping, result, False)

    def select_field(self, e: Expr, operand: Expr, field: str, *, optional: bool) -> t.Type:
        self.visit(operand)
        operand_type = t.substitute(self.mapping, operand.type, False)
        target, is_opt = t.unwrap_optional(operand_type)
        result: t.Type
        if target.kind == t.Kind.MAP:
            result = target.params[1]
        elif target.kind == t.Kind.STRUCT:
            fields = STRUCT_FIELDS.get(target.name)
            if fields is None:
                raise _CheckError(e, f"unexpected failed resolution of '{target.name}'")
            if field not in fields:
                raise _CheckError(e, f"undefined field '{field}'")
            result = fields[field]
        elif target.kind == t.Kind.PARAM:
            self.assignable(t.DYN, target)
            result = t.DYN
        else:
            if not t.is_dyn_or_error(target):
                raise _CheckError(e, f"type '{t.show(target)}' does not support field selection")
            result = t.DYN
        return t.optional_of(result) if (is_opt or optional) else result

    def check_call(self, e: Call) -> None:
        if e.function == "_?._":
            self.check_opt_select(e)
            return
        for arg in e.args:
            self.visit(arg)
        if e.target is None:
            fn = self.lookup_function(e.function)
            if fn is None:
                raise _CheckError(
                    e, f"undeclared reference to '{e.function.lstrip('.')}' (in container '')"
                )
            e.function = fn.name
            self.resolve(e, fn, None)
            return
        prefix = qualified_name(e.target)
        if prefix is not None:
            fn = self.lookup_function(f"{prefix}.{e.function}")
            if fn is not None:
                e.function, e.target = fn.name, None
                self.resolve(e, fn, None)
                return
        self.visit(e.target)
        fn = self.lookup_function(e.function)
        if fn is None:
            raise _CheckError(e, f"undeclared reference to '{e.function}' (in container '')")
        self.resolve(e, fn, e.target)

    def check_opt_select(self, e: Call) -> None:
        operand, field = e.args
        if not (isinstance(field, Literal) and type(field.value) is str):
            raise _CheckError(field, "unsupported optional field selection")
        field.type = t.STRING
        result = self.select_field(e, operand, field.value, optional=True)
        e.type = t.substitute(self.mapping, result, False)
        e.ref = ("select_optional_field",)

    def resolve(self, e: Call, fn: Function, target: Expr | None) -> None:
        arg_types = ([target.type] if target is not None else []) + [a.type for a in e.args]
        result: t.Type | None = None
        matched: list[str] = []
        for overload in fn.overloads:
            if overload.member != (target is not None):
                continue
            if fn.name in ("_&&_", "_||_"):
                for arg, arg_type in zip(e.args, arg_types, strict=True):
                    if not self.assignable(arg_type, t.BOOL):
                        raise _CheckError(
                            arg,
                            f"expected type 'bool' but found "
                            f"'{t.show(t.substitute(self.mapping, arg_type, True))}'",
                        )
                e.type, e.ref = t.BOOL, (overload.id,)
                return
            params, overload_result = self.instantiate(overload.params, overload.result)
            if len(params) != len(arg_types):
                continue
            trial = t.assignable_list(self.mapping, arg_types, list(params))
            if trial is None:
                continue
            self.mapping = trial
            matched.append(overload.id)
            fn_result = t.substitute(self.mapping, overload_result, False)
            if result is None:
                result = fn_result
            elif not t.is_dyn(result) and fn_result != result:
                result = t.DYN
        if result is None:
            shown = [t.show(t.substitute(self.mapping, a, True)) for a in arg_types]
            applied = (
                f"{shown[0]}.({', '.join(shown[1:])})"
                if target is not None
                else f"({', '.join(shown)})"
            )
            raise _CheckError(
                e, f"found no matching overload for '{fn.name}' applied to '{applied}'"
            )
        e.type, e.ref = result, tuple(matched)

    def instantiate(
        self, params: tuple[t.Type, ...], result: t.Type
    ) -> tuple[tuple[t.Type, ...], t.Type]:
        names: set[str] = set()
        for p in (*params, result):
            _params(p, names)
        if not names:
            return params, result
        fresh = t.Mapping({t.param(n): self.new_var() for n in sorted(names)})
        return (
            tuple(t.substitute(fresh, p, False) for p in params),
            t.substitute(fresh, result, False),
        )

    def join(self, e: Expr, previous: t.Type | None, current: t.Type) -> t.Type:
        if previous is None:
            return current
        if self.assignable(previous, current):
            return t.most_general(previous, current, self.release.typed_types)
        return t.DYN

    def check_list(self, e: ListLit) -> None:
        elems: t.Type | None = None
        for i, element in enumerate(e.elements):
            self.visit(element)
            elem_type = element.type
            if i in e.optional:
                elem_type, is_opt = t.unwrap_optional(elem_type)
                if not is_opt and not t.is_dyn(elem_type):
                    raise _CheckError(
                        element,
                        f"expected type '{t.show(t.optional_of(elem_type))}' but found "
                        f"'{t.show(elem_type)}'",
                    )
            elems = self.join(element, elems, elem_type)
        e.type = t.list_of(elems if elems is not None else self.new_var())

    def check_map(self, e: MapLit) -> None:
        keys: t.Type | None = None
        values: t.Type | None = None
        for key, value, optional in e.entries:
            self.visit(key)
            keys = self.join(key, keys, key.type)
            self.visit(value)
            value_type = value.type
            if optional:
                value_type, is_opt = t.unwrap_optional(value_type)
                if not is_opt and not t.is_dyn(value_type):
                    raise _CheckError(
                        value,
                        f"expected type '{t.show(t.optional_of(value_type))}' but found "
                        f"'{t.show(value_type)}'",
                    )
            values = self.join(value, values, value_type)
        if keys is None:
            keys, values = self.new_var(), self.new_var()
        assert values is not None
        e.type = t.map_of(keys, values)

    def check_comprehension(self, e: Comprehension) -> None:
        self.visit(e.iter_range)
        self.visit(e.accu_init)
        range_type = t.substitute(self.mapping, e.iter_range.type, False)
        accu_type = e.accu_init.type
        self.scopes.append({e.accu_var: accu_type})
        var2: t.Type | None = None
        if range_type.kind == t.Kind.LIST:
            var = range_type.params[0]
            if e.iter_var2 is not None:
                var, var2 = t.INT, var
        elif range_type.kind == t.Kind.MAP:
            var = range_type.params[0]
            if e.iter_var2 is not None:
                var2 = range_type.params[1]
        elif range_type.kind in (t.Kind.DYN, t.Kind.ERROR, t.Kind.PARAM, t.Kind.ANY):
            self.assignable(t.DYN, range_type)
            var = t.DYN
            var2 = t.DYN if e.iter_var2 is not None else None
        else:
            raise _CheckError(
                e.iter_range,
                f"expression of type '{t.show(range_type)}' cannot be range of a comprehension "
                "(must be list, map, or dynamic)",
            )
        iter_scope = {e.iter_var: var}
        if e.iter_var2 is not None:
            assert var2 is not None
            iter_scope[e.iter_var2] = var2
        self.scopes.append(iter_scope)
        self.visit(e.loop_condition)
        self.assert_type(e.loop_condition, t.BOOL)
        self.visit(e.loop_step)
        self.assert_type(e.loop_step, accu_type)
        self.scopes.pop()
        self.visit(e.result)
        self.scopes.pop()
        e.type = t.substitute(self.mapping, e.result.type, False)

    def assert_type(self, e: Expr, expected: t.Type) -> None:
        if not self.assignable(expected, e.type):
            raise _CheckError(
                e,
                f"expected type '{t.show(t.substitute(self.mapping, expected, True))}' but found "
                f"'{t.show(t.substitute(self.mapping, e.type, True))}'",
            )


def _params(typ: t.Type, out: set[str]) -> None:
    if typ.kind == t.Kind.PARAM:
        out.add(typ.name)
    for p in typ.params:
        _params(p, out)


def literal_type(value: Any) -> t.Type:
    kind = type(value)
    if kind is bool:
        return t.BOOL
    if kind is int:
        return t.INT
    if kind is Uint:
        return t.UINT
    if kind is float:
        return t.DOUBLE
    if kind is str:
        return t.STRING
    if kind is bytes:
        return t.BYTES
    return t.NULL


def qualified_name(e: Expr) -> str | None:
    """``a.b.c`` as a dotted name when it is only identifiers and selections."""
    if isinstance(e, Ident):
        return e.name
    if isinstance(e, Select) and not e.test_only:
        inner = qualified_name(e.operand)
        return None if inner is None else f"{inner}.{e.field}"
    return None


def walk(root: Expr) -> Iterator[Expr]:
    """Every node, parents before children (iteratively: trees may be deep)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node)))


# --- the AST validators Kubernetes enables -------------------------------------------------------

_EXEMPT = frozenset({"format"})


def validate(root: Expr, checker: Checker) -> None:
    parents: dict[int, Expr] = {}
    for node in walk(root):
        for child in children(node):
            parents[id(child)] = node
    for node in walk(root):
        if isinstance(node, Call):
            _validate_literals(node, checker)
            if node.function == "format" and node.target is not None:
                _validate_format(node)
        elif isinstance(node, (ListLit, MapLit)) and not _in_exempt(node, parents):
            _validate_homogeneous(node)


def _in_exempt(node: Expr, parents: dict[int, Expr]) -> bool:
    parent = parents.get(id(node))
    while parent is not None:
        if isinstance(parent, Call) and parent.function in _EXEMPT:
            return True
        parent = parents.get(id(parent))
    return False


def _optional_value(node: Expr, optional: t.Type) -> t.Type:
    """The value type of an optional entry; cel-go's validator panics on one of unknown type
    (dyn has no parameter), and the API server refuses what panics."""
    if not optional.params:
        raise _CheckError(node, "an optional entry of unknown type (cel-go panics on it)")
    return optional.params[0]


def _validate_homogeneous(node: ListLit | MapLit) -> None:
    if isinstance(node, ListLit):
        first: t.Type | None = None
        for i, element in enumerate(node.elements):
            et = element.type
            if i in node.optional:
                et = _optional_value(element, et)
            if first is None:
                first = et
            elif not first.equivalent(et):
                raise _CheckError(
                    element, f"expected type '{t.show(first)}' but found '{t.show(et)}'"
                )
        return
    key_type: t.Type | None = None
    value_type: t.Type | None = None
    for key, value, optional in node.entries:
        kt, vt = key.type, value.type
        if optional:
            vt = _optional_value(value, vt)
        if key_type is None or value_type is None:
            key_type, value_type = kt, vt
            continue
        if not key_type.equivalent(kt):
            raise _CheckError(key, f"expected type '{t.show(key_type)}' but found '{t.show(kt)}'")
        if not value_type.equivalent(vt):
            raise _CheckError(
                value, f"expected type '{t.show(value_type)}' but found '{t.show(vt)}'"
            )


def _validate_literals(node: Call, checker: Checker) -> None:
    """cel-go's duration, timestamp and regex literal validators (first argument literal)."""
    if node.function not in ("duration", "timestamp", "matches") or not node.args:
        return
    arg = node.args[0]
    if not isinstance(arg, Literal):
        return
    from .library.regex import compile_regex

    try:
        if node.function == "matches":
            if type(arg.value) is str:
                compile_regex(arg.value, checker.release.go127_regexp)
            return
        fn = checker.functions[node.function]
        for overload in fn.overloads:
            if len(overload.params) == 1 and overload.params[0] == literal_type(arg.value):
                assert overload.impl is not None
                overload.impl(arg.value)
                return
        raise CelError("no such overload")
    except CelError:
        raise _CheckError(arg, f"invalid {node.function} argument") from None


def _validate_format(node: Call) -> None:
    """ext.Strings' check of ``"literal".format([literal list])`` calls."""
    if node.ref is not None and "string_format" not in node.ref:
        return
    target = node.target
    if not (isinstance(target, Literal) and type(target.value) is str):
        return
    if len(node.args) != 1 or not isinstance(node.args[0], ListLit):
        return
    from .library.strings import parse_format

    checker = _FormatChecker(node.args[0].elements)
    try:
        parse_format(target.value, checker)
    except _CheckError:
        raise
    except CelError as exc:
        raise _CheckError(node, exc.message) from None
    if len(node.args[0].elements) > checker.requested:
        raise _CheckError(
            node,
            "too many arguments supplied to string.format (expected "
            f"{checker.requested}, got {len(node.args[0].elements)})",
        )


_STRING_CLAUSE_KINDS = frozenset(
    {
        t.Kind.LIST,
        t.Kind.MAP,
        t.Kind.INT,
        t.Kind.UINT,
        t.Kind.DOUBLE,
        t.Kind.BOOL,
        t.Kind.STRING,
        t.Kind.TIMESTAMP,
        t.Kind.BYTES,
        t.Kind.DURATION,
        t.Kind.TYPE,
        t.Kind.NULL,
    }
)
_CLAUSE_KINDS: dict[str, frozenset[str]] = {
    "d": frozenset({t.Kind.INT, t.Kind.UINT}),
    "f": frozenset({t.Kind.DOUBLE, t.Kind.STRING}),
    "e": frozenset({t.Kind.DOUBLE, t.Kind.STRING}),
    "b": frozenset({t.Kind.INT, t.Kind.UINT, t.Kind.BOOL}),
    "x": frozenset({t.Kind.INT, t.Kind.UINT, t.Kind.STRING, t.Kind.BYTES}),
    "X": frozenset({t.Kind.INT, t.Kind.UINT, t.Kind.STRING, t.Kind.BYTES}),
    "o": frozenset({t.Kind.INT, t.Kind.UINT}),
}


class _FormatChecker:
    """parse_format's callbacks at compile time: check each clause's argument type."""

    def __init__(self, args: list[Expr]) -> None:
        self.args = args
        self.requested = 0
        self.current = 0

    def arg(self, index: int) -> Any:
        self.requested += 1
        self.current = index
        return 0

    def size(self) -> int:
        return len(self.args)

    def clause(self, verb: str, value: Any, precision: int | None) -> str:
        node = self.args[self.current]
        if verb == "s":
            bad = _bad_string_arg(node)
            if bad is not None:
                raise _CheckError(
                    bad,
                    "string clause can only be used on strings, bools, bytes, ints, doubles, "
                    "maps, lists, types, durations, and timestamps, was given "
                    f"{bad.type.name}",
                )
            return ""
        kinds = _CLAUSE_KINDS[verb]
        if node.type.kind != t.Kind.DYN and node.type.kind not in kinds:
            raise _CheckError(node, f"invalid argument type {node.type.name} for %{verb}")
        return ""


def _bad_string_arg(node: Expr) -> Expr | None:
    if node.type.kind != t.Kind.DYN and node.type.kind not in _STRING_CLAUSE_KINDS:
        return node
    if isinstance(node, ListLit):
        for element in node.elements:
            bad = _bad_string_arg(element)
            if bad is not None:
                return bad
    elif isinstance(node, MapLit):
        for key, value, _ in node.entries:
            bad = _bad_string_arg(key) or _bad_string_arg(value)
            if bad is not None:
                return bad
    return None
