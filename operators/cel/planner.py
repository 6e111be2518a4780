"""A checked expression to Python closures that evaluate it as cel-go's interpreter does.

Every closure takes the activation, a list: slot 0 the cost spent so far, slot 1 ``device``,
slot 2 the cost limit, the rest the variables comprehensions and ``cel.bind`` introduce
(resolved to slots here, so a read is one list index). Errors are raised as ``CelError``;
``&&``, ``||``, ``?:`` and comprehensions absorb them where cel-go does, and evaluate what
cel-go evaluates after one.

Costs are charged as cel-go's runtime cost tracker charges them (cost.py): 1 per attribute
and per qualifier, the call's charge per call, 10/30 per list/map built; constants are free.
cel-go 0.33 (Kubernetes 1.38) charges from the interpreter's frame rather than by observing
each step, which changes what a failure costs (release.Dialect.frame_costs).
Since the cost only grows, comparing it with the limit after the evaluation (and once per
comprehension iteration, so no loop runs away) gives the verdict cel-go's check after every
step gives. The same comparison gives an evaluation's checkpoints (``Checkpoints``): the
activation's limit is then the next checkpoint, where the caller's interrupt may stop a long
evaluation (a scheduler yielding to another tenant) at no cost to the loop.

What cel-go's planner does at program creation is done here, with its consequences: list and
map literals of constants and type conversions of constants are evaluated once (a conversion
that fails is a compile error, as upstream's "program instantiation failed"), ``in`` a constant
list of primitives is a set lookup that costs nothing, constant regular expressions compile
once (an invalid one is a compile error).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

from . import types as t
from .cost import (
    LIST_CREATE,
    MAP_CREATE,
    CostFn,
    call_cost,
    equality_charge,
    inequality_charge,
)
from .library import Function, Overload, compile_regex, functions_of, runtime_matches
from .release import DEFAULT_KUBERNETES, Dialect, dialect
from .runtime import (
    _MISSING,
    EMPTY,
    CelError,
    CelMap,
    CostLimitExceeded,
    DomainMap,
    EvaluationInterrupted,
    HeldDomains,
    HeldNames,
    NoSuchKey,
    Optional,
    TypeValue,
    Uint,
    UnhashableKey,
    Unheld,
    equal,
    held_key,
    map_find,
    map_items,
    map_key,
    map_keys,
    no_overload,
    type_name,
)
from .syntax import Call, Comprehension, Expr, Ident, ListLit, Literal, MapLit, Select, StructLit
from .values import QuantityValue

Act = list[Any]
Fn = Callable[[Act], Any]

COST = 0
DEVICE = 1
LIMIT = 2
FIRST_SLOT = 3
_UNSET: Any = object()


class PlanError(Exception):
    """The program cannot be built (upstream's "program instantiation failed")."""


@dataclasses.dataclass(frozen=True, slots=True)
class Checkpoints:
    """An evaluation's checkpoints: every ``every`` units of cost, ``interrupt()`` says whether
    to stop (``EvaluationInterrupted``); ``cost_limit`` is the real limit."""

    cost_limit: int
    every: int
    interrupt: Callable[[], bool]


#: The checkpoints of the evaluation running in this context (None: only the cost limit).
CHECKPOINTS: ContextVar[Checkpoints | None] = ContextVar("cel_checkpoints", default=None)


def _past_limit(act: Act) -> int:
    """A comprehension's cost passed the activation's limit: the real limit (the evaluation
    stops), or a checkpoint, where the caller may stop it; else the next checkpoint."""
    checkpoints = CHECKPOINTS.get()
    if checkpoints is None or act[COST] > checkpoints.cost_limit:
        raise CostLimitExceeded
    if checkpoints.interrupt():
        raise EvaluationInterrupted
    act[LIMIT] = min(checkpoints.cost_limit, act[COST] + checkpoints.every)
    return act[LIMIT]  # type: ignore[no-any-return]


class _ErrArg:
    """An argument that failed, as the cost of its call sees it (size 1)."""


ERR_ARG = _ErrArg()

# Type names of the identifiers that denote types.
_TYPE_VALUES = {
    "bool": "bool",
    "bytes": "bytes",
    "double": "double",
    "google.protobuf.Duration": "google.protobuf.Duration",
    "int": "int",
    "list": "list",
    "map": "map",
    "null_type": "null_type",
    "string": "string",
    "google.protobuf.Timestamp": "google.protobuf.Timestamp",
    "type": "type",
    "uint": "uint",
    "kubernetes.DRADevice": "kubernetes.DRADevice",
}
_CONVERSIONS = frozenset(
    {"bool", "bytes", "double", "duration", "dyn", "int", "string", "timestamp", "type", "uint"}
)
_PRIMITIVES = (bool, int, Uint, float, str)
_REGEX_FUNCTIONS = frozenset({"matches", "find", "findAll"})
# Functions whose 1- or 2-argument overloads cel-go binds as variadic (an argument that fails
# stops the others, and the call is charged only if it was the last).
_VARARGS = frozenset({"string_format"})


# --- planned nodes -------------------------------------------------------------------------------


class Plan:
    """A planned node: ``fn(act)`` evaluates it (charging its cost)."""

    const = False

    def fn(self) -> Fn:
        raise NotImplementedError


class Const(Plan):
    """A constant (a literal, a folded literal or conversion, a type); costs nothing."""

    const = True

    def __init__(self, value: Any, error: CelError | None = None) -> None:
        self.value = value
        self.error = error

    def fn(self) -> Fn:
        if self.error is not None:
            error = self.error

            def fail(act: Act) -> Any:
                raise error

            return fail
        value = self.value
        return lambda act: value


class Dyn(Plan):
    def __init__(self, fn: Fn) -> None:
        self._fn = fn

    def fn(self) -> Fn:
        return self._fn


class Qual:
    """A qualifier of an attribute: a constant key, an attribute, or any expression."""

    __slots__ = ("attr", "charge_failure", "key", "kind", "optional", "plan", "test_only")

    def __init__(
        self,
        kind: str,
        *,
        key: Any = None,
        attr: Attr | None = None,
        plan: Plan | None = None,
        optional: bool = False,
        test_only: bool = False,
        charge_failure: bool = False,
    ) -> None:
        self.kind = kind
        self.key = key
        self.attr = attr
        self.plan = plan
        self.optional = optional
        self.test_only = test_only
        #: cel-go 0.33 charges a presence test's or an optional qualifier's failure too (1.38).
        self.charge_failure = charge_failure


class Attr(Plan):
    """cel-go's attribute: a variable, an expression's value or a conditional, qualified.

    Evaluated on its own it costs 1 (a conditional 0) plus 1 per qualifier applied; resolved
    as a qualifier or a conditional's branch, the 1 is not charged (cel-go resolves it
    without observing it).

    ``rooted``: a global named ``.name`` past a local of that name (cel-go 0.29). cel-go
    applies its qualifiers in the activation under every comprehension, where 0.29 tracks no
    cost (``untracked``: they are free; 0.33 charges them from its frame), and their keys see
    the globals only (planned so, plan_index).
    """

    def __init__(
        self,
        base: str,
        *,
        slot: int = 0,
        checked: bool = False,
        operand: Plan | None = None,
        cond: Plan | None = None,
        truthy: Attr | None = None,
        falsy: Attr | None = None,
    ) -> None:
        self.base = base  # "var", "rel" or "cond"
        self.slot = slot
        self.checked = checked  # the variable may hold an error or a lazy value
        self.operand = operand
        self.cond = cond
        self.truthy = truthy
        self.falsy = falsy
        self.quals: list[Qual] = []
        self.test_only = False
        self.lazy: dict[int, Fn] = {}
        self.rooted = False
        self.untracked = False  # rooted, its qualifiers free (cel-go 0.29; 0.33 charges them)
        self.refund = False  # a presence test on a conditional (cel-go 0.26, 0.29: fn)

    def add(self, qual: Qual) -> None:
        if self.base == "cond":
            assert self.truthy is not None
            assert self.falsy is not None
            self.truthy.add(qual)
            self.falsy.add(qual)
        else:
            self.quals.append(qual)

    def fn(self) -> Fn:
        resolve = self.resolver()
        if self.refund:
            # cel-go 0.26 and 0.29 take a presence test's attribute charge back, which a
            # conditional never made: the test costs 1 less than its qualifiers.

            def refunded(act: Act) -> Any:
                try:
                    return resolve(act)
                finally:
                    act[COST] -= 1

            return refunded
        if self.base == "cond" or self.test_only:
            return resolve

        def evaluate(act: Act) -> Any:
            act[COST] += 1
            return resolve(act)

        return evaluate

    def resolver(self) -> Fn:
        """Resolve without charging the attribute itself (its qualifiers are charged)."""
        if self.base == "cond":
            return self._conditional()
        if self.untracked and self.quals:
            resolve = self._resolver()

            def resolve_untracked(act: Act) -> Any:
                spent = act[COST]
                try:
                    return resolve(act)
                finally:
                    act[COST] = spent

            return resolve_untracked
        return self._resolver()

    def _resolver(self) -> Fn:
        base = self._base()
        quals = [_qualifier(q) for q in self.quals]
        test_only = self.test_only
        if not quals:
            return base
        if len(quals) == 1 and not self.quals[0].optional and not test_only:
            (only,) = quals

            def resolve_one(act: Act) -> Any:
                obj = base(act)
                if type(obj) is Optional:
                    return _apply_optional(act, obj, quals, test_only)
                return only(act, obj)

            return resolve_one
        if not any(q.optional for q in self.quals) and not test_only:

            def resolve(act: Act) -> Any:
                obj = base(act)
                if type(obj) is Optional:
                    return _apply_optional(act, obj, quals, test_only)
                for q in quals:
                    obj = q(act, obj)
                return obj

            return resolve
        optional_from = next((i for i, q in enumerate(self.quals) if q.optional), len(quals))

        def resolve_optional(act: Act) -> Any:
            obj = base(act)
            if type(obj) is Optional:
                return _apply_optional(act, obj, quals, test_only)
            for q in quals[:optional_from]:
                obj = q(act, obj)
            if optional_from == len(quals):
                return obj
            return _apply_optional(act, Optional(obj), quals[optional_from:], test_only, True)

        return resolve_optional

    def _base(self) -> Fn:
        if self.base == "var":
            slot = self.slot
            if not self.checked:
                return lambda act: act[slot]
            lazy = self.lazy.get(slot)

            def read(act: Act) -> Any:
                value = act[slot]
                if value is _UNSET and lazy is not None:
                    try:
                        value = lazy(act)
                    except CelError as exc:
                        value = exc
                    act[slot] = value
                if isinstance(value, CelError):
                    raise value
                return value

            return read
        assert self.operand is not None
        return self.operand.fn()

    def _conditional(self) -> Fn:
        assert self.cond is not None
        assert self.truthy is not None
        assert self.falsy is not None
        cond = self.cond.fn()
        yes = self.truthy.resolver()
        no = self.falsy.resolver()

        def conditional(act: Act) -> Any:
            chosen = cond(act)
            if chosen is True:
                return yes(act)
            if chosen is False:
                return no(act)
            raise no_overload("_?_:_", chosen)

        return conditional


QualFn = Callable[[Act, Any], Any]


def _qualifier(q: Qual) -> Callable[..., Any]:
    """``(act, obj) -> value`` for a non-optional qualifier; the optional form takes
    ``present_only`` too (see _apply_optional)."""
    key_fn: Fn | None = None
    if q.kind == "attr":
        assert q.attr is not None
        key_fn = q.attr.resolver()
    elif q.kind == "rel":
        assert q.plan is not None
        key_fn = q.plan.fn()
    key = q.key
    test_only = q.test_only
    if q.charge_failure:
        return _charging_qualifier(q, key_fn)

    if key_fn is None:
        if test_only:

            def test_constant(act: Act, obj: Any, optional: bool = False) -> Any:
                if optional:
                    present, _ = _present(obj, key)
                    if present:
                        act[COST] += 1
                    return present, present
                try:
                    present, _ = _present(obj, key)
                finally:
                    act[COST] += 1  # a presence test that fails is charged too
                return present

            return test_constant

        if type(key) is str:

            def select(act: Act, obj: Any, optional: bool = False) -> Any:
                if optional:
                    present, value = _present(obj, key)
                    if present:
                        act[COST] += 1
                    return present, value
                act[COST] += 1
                if type(obj) is dict:
                    value = obj.get(key, _MISSING)
                    if value is not _MISSING:
                        return value
                    raise NoSuchKey(f"no such key: {key}")
                return qualify(obj, key)

            return select

        def constant(act: Act, obj: Any, optional: bool = False) -> Any:
            if optional:
                present, value = _present(obj, key)
                if present:
                    act[COST] += 1
                return present, value
            act[COST] += 1
            return qualify(obj, key)

        return constant

    computed = key_fn

    def dynamic(act: Act, obj: Any, optional: bool = False) -> Any:
        if optional:
            k = computed(act)
            present, value = _present(obj, k)
            if present:
                act[COST] += 1
            return present, value
        try:
            k = computed(act)
        finally:
            act[COST] += 1
        return qualify(obj, k)

    return dynamic


def _charging_qualifier(q: Qual, key_fn: Fn | None) -> Callable[..., Any]:
    """_qualifier as cel-go 0.33 charges it (1.38): 1 per qualifier applied, a failed one
    included, and an optional one that finds nothing free."""
    key = q.key
    test_only = q.test_only

    def qualify_charged(act: Act, obj: Any, optional: bool = False) -> Any:
        if optional:
            try:
                k = key if key_fn is None else key_fn(act)
                present, value = _present(obj, k)
            except CelError:
                act[COST] += 1
                raise
            if present:
                act[COST] += 1
            return (present, present) if test_only else (present, value)
        try:
            k = key if key_fn is None else key_fn(act)
            if test_only:
                return _present(obj, k)[0]
            return qualify(obj, k)
        finally:
            act[COST] += 1

    return qualify_charged


def _apply_optional(
    act: Act,
    obj: Any,
    quals: list[Callable[..., Any]],
    test_only: bool,
    started: bool = False,
) -> Any:
    """applyQualifiers once the chain is optional: absent is ``optional.none()``."""
    if obj is Optional.NONE:
        return obj if not test_only else False
    value = obj.value
    for q in quals:
        present, value = q(act, value, True)
        if not present:
            return Optional.NONE if not test_only else False
    return Optional(value) if not test_only else True


def qualify(obj: Any, key: Any) -> Any:
    """cel-go's qualification of ``obj`` by ``key`` (select and index), or a CelError."""
    kind = type(obj)
    if kind is dict:
        if type(key) is str:
            value = obj.get(key, _MISSING)
            if value is not _MISSING:
                return value
        raise NoSuchKey(f"no such key: {_show_key(key)}")
    if kind is DomainMap:
        _want_qualifier(key)
        return obj.get(key, EMPTY) if type(key) is str else EMPTY
    if kind is CelMap:
        _want_qualifier(key)
        value = map_find(obj, key)
        if value is _MISSING:
            raise NoSuchKey(f"no such key: {_show_key(key)}")
        return value
    if kind is HeldDomains:
        return obj.get(held_key(key), EMPTY)
    if kind is HeldNames:
        value = obj.get(held_key(key), _MISSING)
        if value is _MISSING:
            raise NoSuchKey(f"no such key: {_show_key(key)}")
        if type(value) is Unheld:
            raise CelError(value.message)
        return value
    if isinstance(obj, list):
        index = _index(key)
        if not 0 <= index < len(obj):
            raise CelError(f"index out of bounds: {_show_key(key)}")
        return obj[index]
    raise NoSuchKey(f"no such key: {_show_key(key)}")


def _present(obj: Any, key: Any) -> tuple[bool, Any]:
    """cel-go's QualifyIfPresent: (present, value); only a bad list index is an error."""
    kind = type(obj)
    if kind is dict:
        if type(key) is str:
            value = obj.get(key, _MISSING)
            if value is not _MISSING:
                return True, value
        return False, None
    if kind is DomainMap:
        _want_qualifier(key)
        return True, (obj.get(key, EMPTY) if type(key) is str else EMPTY)
    if kind is CelMap:
        _want_qualifier(key)
        value = map_find(obj, key)
        return (False, None) if value is _MISSING else (True, value)
    if kind is HeldDomains:
        return True, obj.get(held_key(key), EMPTY)
    if kind is HeldNames:
        value = obj.get(held_key(key), _MISSING)
        if type(value) is Unheld:
            raise CelError(value.message)  # cel-go's presence test sees the error too
        return (False, None) if value is _MISSING else (True, value)
    if isinstance(obj, list):
        index = _index(key)
        if 0 <= index < len(obj):
            return True, obj[index]
        return False, None
    return False, None


def _want_qualifier(key: Any) -> None:
    """A list or a map indexes nothing (``in`` still finds it by identity, as in cel-go)."""
    if isinstance(key, (list, dict)):
        raise CelError(f"invalid qualifier type: {type_name(key)}")


def _index(key: Any) -> int:
    """cel-go's IndexOrError."""
    kind = type(key)
    if kind is int:
        return key  # type: ignore[no-any-return]
    if kind is Uint:
        if key > 2**63 - 1:
            raise CelError(f"unsupported index value {key} in list")
        return int(key)
    if kind is float:
        if math.isnan(key) or math.isinf(key) or key != math.floor(key):
            raise CelError(f"unsupported index value {key} in list")
        if not -(2.0**63) < key < 2.0**63:
            raise CelError(f"unsupported index value {key} in list")
        return int(key)
    raise CelError(f"unsupported index type '{type_name(key)}' in list")


def _show_key(key: Any) -> str:
    """As cel-go's ``%v`` prints a key: strings bare, bools in lower case."""
    if key is True:
        return "true"
    if key is False:
        return "false"
    return str(key)


# --- the planner ---------------------------------------------------------------------------------


class Planner:
    """Plans one checked expression; ``slots`` counts the activation's size."""

    def __init__(
        self, functions: dict[str, Function] | None = None, release: Dialect | None = None
    ) -> None:
        self.release = release if release is not None else dialect(DEFAULT_KUBERNETES)
        self.functions = functions_of(self.release.kubernetes) if functions is None else functions
        self.slots = FIRST_SLOT
        self.scopes: list[dict[str, tuple[int, bool]]] = [{"device": (DEVICE, False)}]
        self.lazy: dict[int, Fn] = {}
        self.mutates_quantities = False
        self.rooted = False  # planning a rooted attribute's key (globals_only)
        self.unproven: set[int] = set()  # nodes whose value may not be of their checked type
        self.charged = self.release.frame_costs  # Qual.charge_failure

    def lookup(self, name: str) -> tuple[int, bool]:
        """A variable's slot; ``.name`` (the checker's mark of a global a local would hide)
        in the root scope."""
        scopes = self.scopes[:1] if name.startswith(".") else reversed(self.scopes)
        name = name.lstrip(".")
        for scope in scopes:
            if name in scope:
                return scope[name]
        raise PlanError(f"undeclared variable {name}")

    def new_slot(self) -> int:
        self.slots += 1
        return self.slots - 1

    def plan(self, e: Expr) -> Plan:
        if isinstance(e, Literal):
            return Const(e.value)
        if isinstance(e, Ident):
            return self.plan_ident(e)
        if isinstance(e, Select):
            return self.plan_select(e)
        if isinstance(e, Call):
            return self.plan_call(e)
        if isinstance(e, ListLit):
            return self.plan_list(e)
        if isinstance(e, MapLit):
            return self.plan_map(e)
        if isinstance(e, StructLit):
            raise PlanError(f"unknown type: {e.name}")
        assert isinstance(e, Comprehension)
        return self.plan_comprehension(e)

    # --- identifiers, selections, indexes ---

    def plan_ident(self, e: Ident) -> Plan:
        name = e.name.lstrip(".")
        if e.type is not None and e.type.kind == t.Kind.TYPE:
            # cel-go plans an identifier whose type is a type as the type of that name, a
            # local's name included; a name no type has cannot be planned.
            if name in _TYPE_VALUES:
                return Const(TypeValue(_TYPE_VALUES[name]))
            raise PlanError(f"reference to undefined type: {name}")
        if self.rooted and not any(name in scope for scope in self.scopes):
            missing = CelError(f"no such attribute(s): {name}")

            def unresolved(act: Act) -> Any:
                raise missing

            return Dyn(unresolved)
        slot, checked = self.lookup(e.name)
        attr = Attr("var", slot=slot, checked=checked)
        if checked:
            attr.lazy = self.lazy
        attr.rooted = name != e.name
        attr.untracked = attr.rooted and not self.release.frame_costs
        return attr

    @contextlib.contextmanager
    def globals_only(self) -> Iterator[None]:
        """Plan what a rooted attribute's key reads: the root scope's names (a local named
        as a global reads the global), no other local (an error where read)."""
        scopes, rooted = self.scopes, self.rooted
        self.scopes, self.rooted = scopes[:1], True
        try:
            yield
        finally:
            self.scopes, self.rooted = scopes, rooted

    def as_attr(self, plan: Plan) -> Attr:
        if isinstance(plan, Attr) and not plan.test_only:
            return plan
        return Attr("rel", operand=plan)

    def plan_select(self, e: Select) -> Plan:
        if isinstance(e.ref, tuple) and e.ref[0] == "qualified":
            name = str(e.ref[1])
            return Const(TypeValue(_TYPE_VALUES.get(name, name)))
        attr = self.as_attr(self.plan(e.operand))
        if e.test_only:
            attr.add(Qual("const", key=e.field, test_only=True, charge_failure=self.charged))
            attr.test_only = True
            attr.refund = attr.base == "cond" and not self.release.frame_costs
            return attr
        attr.add(Qual("const", key=e.field, charge_failure=self.charged))
        return attr

    def plan_index(self, e: Call, optional: bool) -> Plan:
        operand, index = e.args
        attr = self.as_attr(self.plan(operand))
        if attr.rooted:
            with self.globals_only():
                key = self.plan(index)
        else:
            key = self.plan(index)
        if isinstance(key, Const):
            if key.error is not None:
                attr.add(Qual("rel", plan=key, optional=optional, charge_failure=self.charged))
            elif type(key.value) not in (str, int, Uint, bool, float):
                raise PlanError(f"invalid qualifier type: {type_name(key.value)}")
            else:
                attr.add(
                    Qual("const", key=key.value, optional=optional, charge_failure=self.charged)
                )
        elif isinstance(key, Attr) and not key.test_only:
            attr.add(Qual("attr", attr=key, optional=optional, charge_failure=self.charged))
        else:
            attr.add(Qual("rel", plan=key, optional=optional, charge_failure=self.charged))
        return attr

    # --- calls ---

    def plan_call(self, e: Call) -> Plan:
        name = e.function
        if name == "_&&_" or name == "_||_":
            return self.plan_logical(e)
        if name == "_?_:_":
            return self.plan_conditional(e)
        if name == "_[_]":
            return self.plan_index(e, False)
        if name == "_[?_]":
            return self.plan_index(e, True)
        if name == "_?._":
            operand, field = e.args
            attr = self.as_attr(self.plan(operand))
            assert isinstance(field, Literal)
            attr.add(Qual("const", key=field.value, optional=True, charge_failure=self.charged))
            return attr
        if name == "_==_" or name == "_!=_":
            return self.plan_equality(e)
        overloads: tuple[str, ...] = e.ref if isinstance(e.ref, tuple) else ()
        overload_id = overloads[0] if len(overloads) == 1 else ""
        if name in ("or", "orValue") and overload_id in (
            "",
            "optional_or_optional",
            "optional_orValue_value",
        ):
            return self.plan_optional_or(e, name == "orValue")
        args = ([] if e.target is None else [self.plan(e.target)]) + [self.plan(a) for a in e.args]
        if name == "@in" and overload_id == "in_list":
            folded = self.set_membership(args)
            if folded is not None:
                return folded
        if name == "@not_strictly_false":
            return self.plan_not_strictly_false(args[0])
        if name in ("add", "sub", "compareTo", "isGreaterThan", "isLessThan"):
            self.mutates_quantities = True
        fn = self.functions[name]
        impl = self.implementation(fn, overload_id, e, args)
        varargs = (
            overload_id in _VARARGS
            or (overload_id == "" and fn.singleton is None and len(args) > 0)
            or len(args) > 2
        )
        if name in _REGEX_FUNCTIONS and len(args) >= 2 and isinstance(args[1], Const):
            pattern = args[1].value
            if type(pattern) is str:
                try:
                    compile_regex(pattern, self.release.go127_regexp)
                except CelError as exc:
                    raise PlanError(str(exc)) from None
                varargs = True  # cel-go replaces the call with a variadic one
        charge = call_cost(name, overload_id, self.release)
        if self.release.frame_costs:
            plan = _strict_call(impl, [a.fn() for a in args], charge, name == "!_")
        else:
            plan = _call(impl, [a.fn() for a in args], charge, varargs)
        if name in _CONVERSIONS and len(args) == 1 and isinstance(args[0], Const):
            return self.fold(plan)
        if name in _IMMUTABLE_RESULTS and args and all(isinstance(a, Const) for a in args):
            return _memoized(plan, None)
        if name == "quantity" and args and isinstance(args[0], Const):
            return _memoized(plan, QuantityValue.copy)  # each evaluation mutates its own
        return plan

    def fold(self, plan: Plan) -> Plan:
        """Evaluate a conversion of a constant once, as cel-go's Optimize does."""
        act: Act = [0, None, 0]
        try:
            value = plan.fn()(act)
        except CelError as exc:
            raise PlanError(exc.message) from None
        return Const(value)

    def implementation(
        self, fn: Function, overload_id: str, e: Call, args: list[Plan]
    ) -> Callable[..., Any]:
        """The callable for this call: the singleton, the resolved overload (guarded where
        the checker could not prove the types), or dispatch over every overload."""
        if fn.singleton is not None:
            return fn.singleton
        if overload_id:
            overload = fn.overload(overload_id)
            assert overload.impl is not None
            operands = ([e.target] if e.target is not None else []) + e.args
            static = [t.DYN if id(a) in self.unproven else a.type for a in operands]
            if all(_proven(p, s) for p, s in zip(overload.params, static, strict=True)):
                return overload.impl
            return _guarded(fn.name, overload)
        return _dispatch(fn)

    def set_membership(self, args: list[Plan]) -> Plan | None:
        """``x in [constant primitives]``: a lookup with no call cost (cel-go's Optimize)."""
        items = args[1]
        if not isinstance(items, Const) or items.error is not None:
            return None
        values = items.value
        if not values:
            return Const(False)
        if any(type(v) not in _PRIMITIVES for v in values):
            return None
        keys: set[Any] = set()
        for v in values:
            keys.add(_set_key(v))
            kind = type(v)
            if kind is float and not math.isnan(v) and not math.isinf(v):
                if v == math.floor(v) and -(2.0**63) <= v < 2.0**63:
                    keys.add(("int", int(v)))
                if v == math.floor(v) and 0 <= v < 2.0**64:
                    keys.add(("uint", int(v)))
            elif kind is int:
                keys.add(("double", float(v)))
                if v >= 0:
                    keys.add(("uint", v))
            elif kind is Uint:
                keys.add(("double", float(v)))
                if v <= 2**63 - 1:
                    keys.add(("int", int(v)))
        item = args[0].fn()

        def member(act: Act) -> bool:
            value = item(act)
            try:
                return _set_key(value) in keys
            except TypeError:
                raise CelError("internal error: hash of unhashable type") from None

        return Dyn(member)

    def plan_not_strictly_false(self, arg: Plan) -> Plan:
        inner = arg.fn()

        def not_strictly_false(act: Act) -> bool:
            try:
                value = inner(act)
            except CelError:
                value = True
            act[COST] += 1
            return value if value is True or value is False else True

        return Dyn(not_strictly_false)

    def plan_logical(self, e: Call) -> Plan:
        left, right = (self.plan(a).fn() for a in e.args)
        is_and = e.function == "_&&_"
        stop = not is_and  # the value that decides: false for &&, true for ||

        def logical(act: Act) -> Any:
            error: CelError | None = None
            try:
                a = left(act)
                if a is stop:
                    return stop
                if a is not (not stop):
                    error = no_overload(e.function, a)
            except CelError as exc:
                error = exc
            b = right(act)
            if b is stop:
                return stop
            if error is not None:
                raise error
            if b is not (not stop):
                raise no_overload(e.function, b)
            return not stop

        return Dyn(logical)

    def plan_conditional(self, e: Call) -> Plan:
        cond = self.plan(e.args[0])
        branches = [self.plan(a) for a in e.args[1:]]
        attrs = [
            b if isinstance(b, Attr) and not b.test_only else Attr("rel", operand=b)
            for b in branches
        ]
        return Attr("cond", cond=cond, truthy=attrs[0], falsy=attrs[1])

    def plan_equality(self, e: Call) -> Plan:
        left, right = (self.plan(a) for a in e.args)
        lf, rf = left.fn(), right.fn()
        negate = e.function == "_!=_"
        charge = inequality_charge if negate else equality_charge
        lt, rt = e.args[0].type, e.args[1].type
        scalar = lt == rt and lt.kind in (t.Kind.INT, t.Kind.BOOL, t.Kind.UINT, t.Kind.DOUBLE)
        string = lt == rt == t.STRING

        stop_at_left = self.release.frame_costs

        def equals_failed(act: Act, a: Any, error: CelError | None) -> bool:
            """An operand failed: cel-go 0.29 still evaluates both, 0.33 stops at a failed left
            one (its right one then sized as 1); either charges the call."""
            try:
                b = rf(act) if a is ERR_ARG and not stop_at_left else ERR_ARG
            except CelError as exc:
                error, b = (error or exc), ERR_ARG
            act[COST] += charge([a, b], None)
            assert error is not None
            raise error

        if scalar or string:

            def equals_typed(act: Act) -> bool:
                try:
                    a = lf(act)
                except CelError as exc:
                    return equals_failed(act, ERR_ARG, exc)
                try:
                    b = rf(act)
                except CelError as exc:
                    act[COST] += charge([a, ERR_ARG], None)
                    raise exc from None
                if string:
                    smallest = min(len(a), len(b))
                    act[COST] += math.ceil(smallest * 0.1) if smallest else 0
                else:
                    act[COST] += 1
                return (a != b) if negate else (a == b)  # type: ignore[no-any-return]

            return Dyn(equals_typed)

        def equals(act: Act) -> bool:
            error: CelError | None = None
            try:
                a = lf(act)
            except CelError as exc:
                if stop_at_left:
                    return equals_failed(act, ERR_ARG, exc)
                error, a = exc, ERR_ARG
            try:
                b = rf(act)
            except CelError as exc:
                error, b = (error or exc), ERR_ARG
            act[COST] += charge([a, b], None)
            if error is not None:
                raise error
            if negate:
                try:
                    return not equal(a, b)
                except CelError:
                    return True  # cel-go: Equal's error is not True, so != is true
            return equal(a, b)

        return Dyn(equals)

    def plan_optional_or(self, e: Call, value: bool) -> Plan:
        assert e.target is not None
        lhs = self.plan(e.target).fn()
        rhs = self.plan(e.args[0]).fn()

        strict = self.release.strict_optional_or
        if not strict and e.target.type.kind != t.Kind.OPAQUE:
            self.unproven.add(id(e))  # dyn in, anything out: the checker's type is no proof

        def optional_or(act: Act) -> Any:
            chosen = lhs(act)
            if type(chosen) is not Optional:
                if strict:
                    raise no_overload("orValue" if value else "or", chosen)
                return chosen
            if chosen is not Optional.NONE:
                return chosen.value if value else chosen
            return rhs(act)

        return Dyn(optional_or)

    # --- literals ---

    def plan_list(self, e: ListLit) -> Plan:
        elements = [self.plan(x) for x in e.elements]
        optional = e.optional
        build = _list_builder([x.fn() for x in elements], optional)
        if all(x.const for x in elements):
            act: Act = [0, None, 0]
            try:
                return Const(build(act))
            except CelError as exc:
                return Const(None, exc)

        if self.release.frame_costs:

            def create_list_built(act: Act) -> list[Any]:
                value = build(act)
                act[COST] += LIST_CREATE
                return value  # type: ignore[no-any-return]

            return Dyn(create_list_built)

        def create_list(act: Act) -> list[Any]:
            act[COST] += LIST_CREATE
            return build(act)  # type: ignore[no-any-return]

        return Dyn(create_list)

    def plan_map(self, e: MapLit) -> Plan:
        keys = [self.plan(k) for k, _, _ in e.entries]
        values = [self.plan(v) for _, v, _ in e.entries]
        build = _map_builder(
            [k.fn() for k in keys], [v.fn() for v in values], [o for _, _, o in e.entries]
        )
        if all(x.const for x in (*keys, *values)):
            act: Act = [0, None, 0]
            try:
                return Const(build(act))
            except UnhashableKey as exc:  # cel-go builds it while planning, and panics
                raise PlanError(exc.message) from None
            except CelError as exc:
                return Const(None, exc)

        if self.release.frame_costs:

            def create_map_built(act: Act) -> CelMap:
                value = build(act)
                act[COST] += MAP_CREATE
                return value  # type: ignore[no-any-return]

            return Dyn(create_map_built)

        def create_map(act: Act) -> CelMap:
            act[COST] += MAP_CREATE
            return build(act)  # type: ignore[no-any-return]

        return Dyn(create_map)

    # --- comprehensions ---

    def plan_comprehension(self, e: Comprehension) -> Plan:
        if e.is_bind:
            return self.plan_bind(e)
        iter_range = self.plan(e.iter_range).fn()
        accu_slot = self.new_slot()
        accu_init = self.plan(e.accu_init)
        init = accu_init.fn()
        self.scopes.append({e.accu_var: (accu_slot, True)})
        var_slot = self.new_slot()
        var2_slot = self.new_slot() if e.iter_var2 is not None else 0
        iter_scope = {e.iter_var: (var_slot, False)}
        if e.iter_var2 is not None:
            # An entry's value may be an error (1.38's device maps): checked where read.
            iter_scope[e.iter_var2] = (var2_slot, self.release.lazy_attributes)
        self.scopes.append(iter_scope)
        empty_init = isinstance(e.accu_init, (ListLit, MapLit)) and not (
            e.accu_init.elements if isinstance(e.accu_init, ListLit) else e.accu_init.entries
        )
        self.lazy[accu_slot] = _accumulator_init(init, empty_init)
        cond = self.plan(e.loop_condition).fn()
        step = self.plan(e.loop_step).fn()
        self.scopes.pop()
        result = self.plan(e.result).fn()
        self.scopes.pop()
        two = e.iter_var2 is not None
        # cel-go 0.33 skips the loop over any empty range with a size, a string included.
        empty_sized = self.release.empty_ranges
        return Dyn(
            _fold(iter_range, accu_slot, var_slot, var2_slot, two, cond, step, result, empty_sized)
        )

    def plan_bind(self, e: Comprehension) -> Plan:
        init_type = e.accu_init.type
        if init_type is not None and init_type.kind == t.Kind.TYPE:
            # The macro's loop step reads the variable: planned as a type (plan_ident).
            step = Ident(e.pos, e.accu_var)
            step.type = init_type
            self.plan_ident(step)
        slot = self.new_slot()
        init = _bound_value(self.plan(e.accu_init).fn())
        self.scopes.append({e.accu_var: (slot, True)})
        self.lazy[slot] = init
        result = self.plan(e.result).fn()
        self.scopes.pop()

        def bind(act: Act) -> Any:
            act[slot] = _UNSET
            return result(act)

        return Dyn(bind)


def _bound_value(init: Fn) -> Fn:
    """What ``cel.bind`` binds: an empty ``device.attributes`` or ``device.capacity`` binds as
    a plain empty map upstream, without the default domain (``has(m.x)`` is false, ``m.x`` an
    error), while a non-empty one keeps it; measured against cel-go by the oracle. 1.38's maps
    (HeldDomains) keep their default either way."""

    def value(act: Act) -> Any:
        bound = init(act)
        return {} if type(bound) is DomainMap and not bound else bound

    return value


def _set_key(value: Any) -> Any:
    kind = type(value)
    if kind is bool:
        return ("bool", value)
    if kind is int:
        return ("int", value)
    if kind is Uint:
        return ("uint", int(value))
    if kind is float:
        return ("double", value)
    if kind is str:
        return ("string", value)
    return ("other", value)


def _proven(declared: t.Type, static: t.Type) -> bool:
    """The checker's type guarantees what the overload's runtime guard would check."""
    if declared.kind in (t.Kind.DYN, t.Kind.PARAM, t.Kind.ANY):
        return True
    if static.kind in (t.Kind.DYN, t.Kind.ANY, t.Kind.PARAM, t.Kind.ERROR):
        return False
    if declared.kind in (t.Kind.LIST, t.Kind.MAP):
        if static.kind != declared.kind:
            return False
        return all(_proven(d, s) for d, s in zip(declared.params, static.params, strict=True))
    return declared.name == static.name and declared.kind == static.kind


def _guarded(name: str, overload: Overload) -> Callable[..., Any]:
    impl = overload.impl
    params = overload.params
    assert impl is not None

    def guarded(*args: Any) -> Any:
        if len(args) != len(params) or not all(
            runtime_matches(p, a) for p, a in zip(params, args, strict=True)
        ):
            raise no_overload(name, *args)
        return impl(*args)

    return guarded


def _dispatch(fn: Function) -> Callable[..., Any]:
    overloads = [o for o in fn.overloads if o.impl is not None]

    def dispatch(*args: Any) -> Any:
        for o in overloads:
            if len(o.params) == len(args) and all(
                runtime_matches(p, a) for p, a in zip(o.params, args, strict=True)
            ):
                assert o.impl is not None
                return o.impl(*args)
        raise no_overload(fn.name, *args)

    return dispatch


# Calls whose result no later call changes (unlike a quantity, which add() mutates in place).
_IMMUTABLE_RESULTS = frozenset(
    {"semver", "ip", "cidr", "url", "isSemver", "isIP", "isCIDR", "isURL", "isQuantity"}
)


def _memoized(plan: Plan, copy: Callable[[Any], Any] | None) -> Plan:
    """A call of constants, computed once: cel-go parses ``semver("1.2.3")`` on every
    evaluation, so every evaluation is still charged what that costs, and fails if it fails."""
    act: Act = [0, None, 1 << 62]
    try:
        value = plan.fn()(act)
    except CelError as exc:
        error, spent = exc, act[COST]

        def fail(act: Act) -> Any:
            act[COST] += spent
            raise error.with_traceback(None)

        return Dyn(fail)
    cost = act[COST]
    if copy is not None:
        fresh = copy

        def memo_copy(act: Act) -> Any:
            act[COST] += cost
            return fresh(value)

        return Dyn(memo_copy)

    def memo(act: Act) -> Any:
        act[COST] += cost
        return value

    return Dyn(memo)


def _call(impl: Callable[..., Any], args: list[Fn], charge: int | CostFn, varargs: bool) -> Plan:
    """A strict call: arguments in order; a failed one is the result. cel-go evaluates the
    rest first for unary and binary calls, and charges the call; a variadic one stops at the
    failed argument, and is charged only when that was the last (every argument on the cost
    tracker's stack)."""
    if isinstance(charge, int):
        fixed = charge
        if len(args) == 1:
            (a0,) = args

            def unary(act: Act) -> Any:
                try:
                    x = a0(act)
                finally:
                    act[COST] += fixed
                return impl(x)

            return Dyn(unary)
        if len(args) == 2 and not varargs:
            a0, a1 = args

            def binary(act: Act) -> Any:
                try:
                    x = a0(act)
                except CelError:
                    with contextlib.suppress(CelError):
                        a1(act)
                    act[COST] += fixed
                    raise
                try:
                    y = a1(act)
                finally:
                    act[COST] += fixed
                return impl(x, y)

            return Dyn(binary)
        if not args:

            def zero(act: Act) -> Any:
                act[COST] += fixed
                return impl()

            return Dyn(zero)

        last = len(args) - 1

        def variadic(act: Act) -> Any:
            values = []
            for i, a in enumerate(args):
                try:
                    values.append(a(act))
                except CelError:
                    if i == last:  # every argument was evaluated: cel-go charges the call
                        act[COST] += fixed
                    raise
            act[COST] += fixed
            return impl(*values)

        return Dyn(variadic)

    sized = charge
    last = len(args) - 1

    def sized_call(act: Act) -> Any:
        values: list[Any] = []
        error: CelError | None = None
        for i, a in enumerate(args):
            try:
                values.append(a(act))
            except CelError as exc:
                if varargs and i < last:
                    raise
                error = error or exc
                values.append(ERR_ARG)
        if error is not None:
            act[COST] += sized(values, ERR_ARG)
            raise error
        try:
            result = impl(*values)
        except CelError:
            act[COST] += sized(values, ERR_ARG)
            raise
        act[COST] += sized(values, result)
        return result

    return Dyn(sized_call)


def _strict_call(
    impl: Callable[..., Any], args: list[Fn], charge: int | CostFn, charge_failed: bool
) -> Plan:
    """A strict call as cel-go 0.33 runs it (1.38): the arguments in order, the first that
    fails is the result and the call is not charged (``!`` is: ``charge_failed``); else the
    call runs and is charged, whatever it gives."""
    if isinstance(charge, int):
        fixed = charge
        if len(args) == 1:
            (a0,) = args

            def unary(act: Act) -> Any:
                try:
                    x = a0(act)
                except CelError:
                    if charge_failed:
                        act[COST] += fixed
                    raise
                act[COST] += fixed
                return impl(x)

            return Dyn(unary)
        if len(args) == 2:
            a0, a1 = args

            def binary(act: Act) -> Any:
                x = a0(act)
                y = a1(act)
                act[COST] += fixed
                return impl(x, y)

            return Dyn(binary)

        def call(act: Act) -> Any:
            values = [a(act) for a in args]
            act[COST] += fixed
            return impl(*values)

        return Dyn(call)

    sized = charge

    def sized_call(act: Act) -> Any:
        values = [a(act) for a in args]
        try:
            result = impl(*values)
        except CelError:
            act[COST] += sized(values, ERR_ARG)
            raise
        act[COST] += sized(values, result)
        return result

    return Dyn(sized_call)


def _list_builder(elements: list[Fn], optional: frozenset[int]) -> Fn:
    if not optional:
        if not elements:
            return lambda act: []
        return lambda act: [x(act) for x in elements]

    def build(act: Act) -> list[Any]:
        out: list[Any] = []
        for i, x in enumerate(elements):
            value = x(act)
            if i in optional:
                if type(value) is not Optional:
                    raise CelError(
                        "cannot initialize optional list element from non-optional value"
                    )
                if value is Optional.NONE:
                    continue
                value = value.value
            out.append(value)
        return out

    return build


def _map_builder(keys: list[Fn], values: list[Fn], optional: list[bool]) -> Fn:
    entries = list(zip(keys, values, optional, strict=True))

    def build(act: Act) -> CelMap:
        out = CelMap()
        for k, v, is_optional in entries:
            key = k(act)
            value = v(act)
            stored = map_key(key)
            if is_optional:
                if type(value) is not Optional:
                    raise CelError(
                        f"cannot initialize optional entry '{key}' from non-optional value"
                    )
                if value is Optional.NONE:
                    out.pop(stored, None)
                    continue
                value = value.value
            out[stored] = value
        return out

    return build


class _AccuList(list[Any]):
    """The private list a comprehension builds in place (cel-go's mutable accumulator)."""

    __slots__ = ()


class _AccuMap(CelMap):
    __slots__ = ()


def _accumulator_init(init: Fn, empty: bool) -> Fn:
    if not empty:
        return init

    def mutable(act: Act) -> Any:
        value = init(act)
        if type(value) is list and not value:
            return _AccuList()
        if type(value) is CelMap and not value:
            return _AccuMap()
        return value

    return mutable


def _items(value: Any, two: bool) -> list[tuple[Any, Any]]:
    if isinstance(value, list):
        return list(enumerate(value)) if two else [(v, None) for v in value]
    if isinstance(value, dict):
        if two:
            if type(value) is HeldNames:
                # cel-go binds the value an entry's Get gives: an error where 1.38 holds none.
                return [
                    (k, CelError(v.message) if type(v) is Unheld else v) for k, v in value.items()
                ]
            return list(map_items(value))
        return [(k, None) for k in map_keys(value)]
    if two:
        raise CelError(f"unsupported comprehension range type: {type_name(value)}")
    raise CelError(f"got '{type_name(value)}', expected iterable type")


def _fold(
    iter_range: Fn,
    accu_slot: int,
    var_slot: int,
    var2_slot: int,
    two: bool,
    cond: Fn,
    step: Fn,
    result: Fn,
    empty_sized: bool = False,
) -> Fn:
    def fold(act: Act) -> Any:
        iterated = iter_range(act)
        if empty_sized and (type(iterated) is str or type(iterated) is bytes) and not iterated:
            items: list[tuple[Any, Any]] = []
        else:
            items = _items(iterated, two)
        act[accu_slot] = _UNSET
        limit = act[LIMIT]
        for first, second in items:
            act[var_slot] = first
            if two:
                act[var2_slot] = second
            try:
                keep = cond(act)
            except CelError:
                keep = None
            if keep is False:
                break
            try:
                act[accu_slot] = step(act)
            except CelError as exc:
                act[accu_slot] = exc
            if act[COST] > limit:
                limit = _past_limit(act)
        value = result(act)
        if type(value) is _AccuList:
            return list(value)
        if type(value) is _AccuMap:
            return CelMap(value)
        return value

    return fold
