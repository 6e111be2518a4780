"""The registry: every CEL function of the DRA environment, declared once with its overloads.

It plays the part of cel-go's function declarations. ``@function`` declares global overloads,
``@method`` receiver-style ones; each names cel-go's overload id and a typed signature:

    @method("compareTo", "quantity_compare_to kubernetes.Quantity.(kubernetes.Quantity) -> int")

The checker resolves calls against these signatures (type parameters are single capitals);
the planner calls the implementation. An implementation takes CEL values (never errors, unless
declared ``non_strict``) and returns one, raising ``CelError`` on failure. Declared with
``singleton=True`` it serves every overload of its function and checks types itself (cel-go's
trait-based operators); otherwise it serves the overloads it is declared with, and the planner
guards it with the declared types when the checker could not prove them.

A declaration belongs to every Kubernetes minor kopf-dra speaks unless ``since`` or ``until``
(a minor, inclusive) bounds it: where releases differ, each one's overloads are declared with
their own bounds (one overload id may be declared twice, for minors apart; so may a
singleton implementation, each with its bounds), and :meth:`Registry.table` gives one minor's
functions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import types as t
from ..release import KUBERNETES_MINORS, minor
from ..runtime import CelMap, Duration, Optional, Timestamp, TypeValue, type_name

Implementation = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class Overload:
    """One signature of a function, as cel-go's OverloadDecl."""

    id: str
    member: bool
    params: tuple[t.Type, ...]  # the receiver first, for a member overload
    result: t.Type
    impl: Implementation | None  # None: the function's singleton serves it
    since: str | None = None  # the first Kubernetes minor that declares it (None: all)
    until: str | None = None  # the last one (None: all)

    def declared_in(self, kubernetes: str) -> bool:
        """Does that minor's environment declare this overload?"""
        return _within(kubernetes, self.since, self.until)


def _within(kubernetes: str, since: str | None, until: str | None) -> bool:
    """Is that minor within the bounds (inclusive; None: unbounded)?"""
    at = minor(kubernetes)
    if since is not None and at < minor(since):
        return False
    return until is None or at <= minor(until)


@dataclass(slots=True)
class Function:
    """A function name with its overloads in declaration order (cel-go dispatches in it)."""

    name: str
    overloads: list[Overload] = field(default_factory=list)
    singleton: Implementation | None = None
    non_strict: bool = False
    #: (since, until, implementation): where minors part on a singleton (registry only).
    singletons: list[tuple[str | None, str | None, Implementation]] = field(default_factory=list)

    def singleton_in(self, kubernetes: str) -> Implementation | None:
        """The singleton that serves this function in that minor."""
        for since, until, impl in self.singletons:
            if _within(kubernetes, since, until):
                return impl
        return self.singleton

    def overload(self, overload_id: str) -> Overload:
        for o in self.overloads:
            if o.id == overload_id:
                return o
        raise KeyError(overload_id)


class Registry:
    """The function table of one CEL environment, filled by its decorators at import."""

    def __init__(self) -> None:
        self.functions: dict[str, Function] = {}  # every declaration, of every minor
        self._tables: dict[str, dict[str, Function]] = {}

    def table(self, kubernetes: str) -> dict[str, Function]:
        """The functions one Kubernetes minor declares, with its overloads only (built once
        per minor and declaration)."""
        table = self._tables.get(kubernetes)
        if table is None:
            table = {}
            for fn in self.functions.values():
                overloads = [o for o in fn.overloads if o.declared_in(kubernetes)]
                if overloads:
                    table[fn.name] = Function(
                        fn.name, overloads, fn.singleton_in(kubernetes), fn.non_strict
                    )
            self._tables[kubernetes] = table
        return table

    def snapshot(self) -> dict[str, Function]:
        """The declarations as they are, for :meth:`restore` (tests that declare their own)."""
        return {
            name: Function(f.name, list(f.overloads), f.singleton, f.non_strict, list(f.singletons))
            for name, f in self.functions.items()
        }

    def restore(self, snapshot: dict[str, Function]) -> None:
        self.functions.clear()
        self.functions.update(snapshot)
        self._tables.clear()

    def function(
        self,
        name: str,
        *signatures: str,
        singleton: bool = False,
        non_strict: bool = False,
        since: str | None = None,
        until: str | None = None,
    ) -> Callable[[Implementation], Implementation]:
        """Declare global overloads ``"<overload id> (<params>) -> <result>"`` of ``name``."""
        return self._declare(name, signatures, False, singleton, non_strict, since, until)

    def method(
        self,
        name: str,
        *signatures: str,
        singleton: bool = False,
        since: str | None = None,
        until: str | None = None,
    ) -> Callable[[Implementation], Implementation]:
        """Declare receiver overloads ``"<overload id> <receiver>.(<params>) -> <result>"``."""
        return self._declare(name, signatures, True, singleton, False, since, until)

    def declare(self, name: str, *signatures: str) -> None:
        """Overloads the checker knows and nothing can call (receivers never built here)."""
        for signature in signatures:
            overload_id, member, params, result = parse_signature(signature)
            self._add(name, Overload(overload_id, member, params, result, _unreachable(name)))

    def _declare(
        self,
        name: str,
        signatures: tuple[str, ...],
        member: bool,
        singleton: bool,
        non_strict: bool,
        since: str | None = None,
        until: str | None = None,
    ) -> Callable[[Implementation], Implementation]:
        for bound in (since, until):
            if bound is not None and bound not in KUBERNETES_MINORS:
                raise ValueError(f"{name}: Kubernetes {bound} is no minor kopf-dra speaks")
        parsed = [parse_signature(s) for s in signatures]
        for overload_id, is_member, _, _ in parsed:
            if is_member != member:
                kind = "a receiver" if member else "no receiver"
                raise ValueError(f"{name}: overload {overload_id} must have {kind}")

        def register(impl: Implementation) -> Implementation:
            fn = self.functions.get(name)
            if singleton and fn is not None and fn.singleton not in (None, impl):
                bounded = since is not None or until is not None
                apart = all(
                    not (_within(k, since, until) and _within(k, s, u))
                    for s, u, other in fn.singletons
                    if other is not impl
                    for k in KUBERNETES_MINORS
                )
                if not (bounded and fn.singletons and apart):
                    raise ValueError(f"{name}: two singleton implementations")
            for overload_id, is_member, params, result in parsed:
                self._add(
                    name,
                    Overload(
                        overload_id,
                        is_member,
                        params,
                        result,
                        None if singleton else impl,
                        since,
                        until,
                    ),
                )
            fn = self.functions[name]
            if singleton:
                if since is not None or until is not None:
                    fn.singletons.append((since, until, impl))
                if fn.singleton is None:
                    fn.singleton = impl
            fn.non_strict = fn.non_strict or non_strict
            return impl

        return register

    def _add(self, name: str, overload: Overload) -> None:
        fn = self.functions.setdefault(name, Function(name))
        for o in fn.overloads:
            if o.id == overload.id and any(
                o.declared_in(k) and overload.declared_in(k) for k in KUBERNETES_MINORS
            ):
                raise ValueError(f"{name}: overload {overload.id} declared twice")
        fn.overloads.append(overload)
        self._tables.clear()


def _unreachable(name: str) -> Implementation:
    def impl(*args: Any) -> Any:
        from ..runtime import no_overload

        raise no_overload(name, *args)

    return impl


# --- signatures ----------------------------------------------------------------------------------

_NAMED: dict[str, t.Type] = {
    "bool": t.BOOL,
    "bytes": t.BYTES,
    "double": t.DOUBLE,
    "duration": t.DURATION,
    "dyn": t.DYN,
    "int": t.INT,
    "null_type": t.NULL,
    "string": t.STRING,
    "timestamp": t.TIMESTAMP,
    "uint": t.UINT,
    "type": t.TYPE,
    "net.IP": t.IP,
    "net.CIDR": t.CIDR,
}


def parse_type(text: str) -> t.Type:
    text = text.strip()
    if len(text) == 1 and text.isupper():
        return t.param(text)
    head, paren, rest = text.partition("(")
    if paren:
        args = [parse_type(a) for a in _split(rest[:-1])]
        if head == "list":
            return t.list_of(args[0])
        if head == "map":
            return t.map_of(args[0], args[1])
        if head == "optional":
            return t.optional_of(args[0])
        if head == "type":
            return t.type_of(args[0])
        raise ValueError(f"unknown parameterized type {text!r}")
    named = _NAMED.get(text)
    if named is not None:
        return named
    if text.startswith("kubernetes."):
        return t.struct(text)
    raise ValueError(f"unknown type {text!r}")


def _split(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current = ""
    for c in text:
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += c
    if current.strip():
        parts.append(current)
    return parts


def parse_signature(text: str) -> tuple[str, bool, tuple[t.Type, ...], t.Type]:
    """``"id recv.(a, b) -> r"`` or ``"id (a, b) -> r"``: (id, member, params, result)."""
    overload_id, _, rest = text.strip().partition(" ")
    left, arrow, result = rest.partition("->")
    if not arrow:
        raise ValueError(f"signature without a result: {text!r}")
    left = left.strip()
    cut = left.find(".(")
    member = cut >= 0
    receiver: list[t.Type] = [parse_type(left[:cut])] if member else []
    args_text = left[cut + 1 :] if member else left
    if not (args_text.startswith("(") and args_text.endswith(")")):
        raise ValueError(f"bad signature {text!r}")
    params = tuple(receiver + [parse_type(a) for a in _split(args_text[1:-1])])
    return overload_id, member, params, parse_type(result)


# --- runtime type guards -------------------------------------------------------------------------


def runtime_matches(declared: t.Type, value: Any) -> bool:
    """cel-go's IsAssignableRuntimeType: the type names agree (lists and maps: their first
    element too); dyn and type parameters take anything."""
    kind = declared.kind
    if kind in (t.Kind.DYN, t.Kind.ANY, t.Kind.PARAM):
        return True
    if kind == t.Kind.LIST:
        if not isinstance(value, list):
            return False
        return not value or runtime_matches(declared.params[0], value[0])
    if kind == t.Kind.MAP:
        if not isinstance(value, dict):
            return False
        if not value:
            return True
        from ..runtime import from_key

        key = next(iter(value))
        item = value[key]
        if type(value) is CelMap:
            key = from_key(key)
        return runtime_matches(declared.params[0], key) and runtime_matches(
            declared.params[1], item
        )
    if kind == t.Kind.TYPE:
        return type(value) is TypeValue
    if kind == t.Kind.DURATION:
        return type(value) is Duration
    if kind == t.Kind.TIMESTAMP:
        return type(value) is Timestamp
    if kind == t.Kind.OPAQUE and declared.name == "optional_type":
        return type(value) is Optional
    return type_name(value) == declared.name


REGISTRY = Registry()
function = REGISTRY.function
method = REGISTRY.method
declare = REGISTRY.declare
