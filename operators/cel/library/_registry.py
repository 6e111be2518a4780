"""The registry: declaring a library function puts it in the tables, wrapped once.

It plays the part of cel-go's function declarations: one ``@function``/``@method`` per
implementation fills the tables the compiler checks names against and the transpiler binds.
Errors are *returned* as ``CELEvalError`` values (as cel-go returns error values), so that
``||``, ``&&`` and ``?:`` can absorb them with CEL's commutative error semantics, and so the
message survives. Tables are filled once, at import; a call at evaluation time is the wrapper
and the body, nothing more.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from celpy import celtypes
from celpy.evaluation import CELEvalError

from ._base import RESULT_TYPES, Failure, cel_bool, cel_int, no_overload, type_names

Function = Callable[..., Any]

# --- turning raised failures into CEL error values --------------------------------------------

_CAUGHT = (Failure, TypeError, AttributeError, ValueError, ArithmeticError, IndexError, KeyError)


def _error_value(fn: str, args: tuple[Any, ...], exc: Exception) -> CELEvalError:
    if isinstance(exc, Failure):
        return CELEvalError(str(exc), Failure, exc.args)
    if isinstance(exc, (TypeError, AttributeError)):
        return CELEvalError(f"no such overload: {fn}({type_names(args)})", TypeError, (str(exc),))
    return CELEvalError(f"{fn}: {exc}", type(exc), exc.args)


def cel_function(fn: Function) -> Function:
    """Propagate error arguments and turn failures into CEL error values with their message."""

    @functools.wraps(fn)
    def wrapper(*args: Any) -> Any:
        for arg in args:
            if isinstance(arg, CELEvalError):
                return arg
        try:
            return fn(*args)
        except _CAUGHT as exc:
            return _error_value(fn.__name__, args, exc)

    return wrapper


def _overloaded(name: str, overloads: list[tuple[type | None, Function]]) -> Function:
    """One method over several receiver types (``compareTo`` of quantities and of versions).

    The wrapper picks the body by receiver with at most two ``isinstance`` checks, as the single
    body that handled both types did, so the call costs no more; two types is all the
    Kubernetes libraries overload a method for, and a third fails at import.
    """
    typed = [(kind, body) for kind, body in overloads if kind is not None]
    if len(typed) > 2:
        raise ValueError(f"method {name!r}: more than two receiver types")
    first_kind, first = typed[0]
    second_kind, second = typed[-1]
    default = next((body for kind, body in overloads if kind is None), None)

    def no_receiver_type(*args: Any) -> Any:
        raise no_overload(args[0], name, *args[1:])

    fallback = no_receiver_type if default is None else default

    def dispatch(*args: Any) -> Any:
        for arg in args:
            if isinstance(arg, CELEvalError):
                return arg
        receiver = args[0]
        fn = (
            first
            if isinstance(receiver, first_kind)
            else second
            if isinstance(receiver, second_kind)
            else fallback
        )
        try:
            return fn(*args)
        except _CAUGHT as exc:
            return _error_value(fn.__name__, args, exc)

    dispatch.__name__ = dispatch.__qualname__ = name
    return dispatch


# --- the registry -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Declaration:
    """One ``@function`` or ``@method``: what the compiler checks and the transpiler binds."""

    kind: Literal["function", "method"]
    name: str  # as written in CEL; namespaced functions include the namespace
    arity: frozenset[int]  # argument counts, the receiver of a method not counted
    returns: frozenset[str]  # CEL result types, for the compile-time "not a bool" check
    receiver: type | None  # methods overloaded by receiver type; None: any receiver
    implementation: Function  # the plain body


class Registry:
    """The tables of one CEL environment, filled by its ``function`` and ``method`` decorators.

    Names live in two spaces, as in CEL: ``name(args)`` and ``receiver.name(args)``; one body
    may be declared in both (``matches``, ``size``). A method declared for several receiver
    types becomes one dispatching callable; its arities are the union of the overloads'.
    """

    def __init__(self) -> None:
        self.declarations: list[Declaration] = []
        self.functions: dict[str, Function] = {}
        self.methods: dict[str, Function] = {}
        self.arity: dict[str, frozenset[int]] = {}
        self.method_arity: dict[str, frozenset[int]] = {}
        # Names (global or method) every declaration of which certainly returns no bool.
        self.non_bool: set[str] = set()
        # Constructors whose call with one literal string the transpiler evaluates once.
        self.foldable: set[str] = set()
        self._results: dict[str, frozenset[str]] = {}
        self._overloads: dict[str, list[tuple[type | None, Function]]] = {}
        self._wrappers: dict[Function, Function] = {}  # body -> its wrapper
        self._bodies: dict[Function, Function] = {}  # wrapper -> its body

    def function(
        self,
        name: str,
        *,
        arity: tuple[int, ...],
        returns: str | tuple[str, ...],
        fold: bool = False,
        wrap: bool = True,
    ) -> Callable[[Function], Function]:
        """Declare ``name(args)``; ``fold``: a constructor worth evaluating at compile time;
        ``wrap=False``: the body takes error values itself and never raises."""

        def register(fn: Function) -> Function:
            if name in self.functions:
                raise ValueError(f"function {name!r} is declared twice")
            body, entry = self._callable(fn, wrap)
            declaration = self._declare("function", name, arity, returns, None, body)
            self.functions[name] = entry
            self.arity[name] = declaration.arity
            if fold:
                self.foldable.add(name)
            return entry

        return register

    def method(
        self,
        name: str,
        *,
        arity: tuple[int, ...],
        returns: str | tuple[str, ...],
        receiver: type | None = None,
        wrap: bool = True,
    ) -> Callable[[Function], Function]:
        """Declare ``receiver.name(args)``; ``receiver``: the type this overload is for, when
        other libraries declare the same method for other types."""

        def register(fn: Function) -> Function:
            overloads = self._overloads.get(name, [])
            if any(kind is receiver for kind, _ in overloads):
                raise ValueError(f"method {name!r} is declared twice for {receiver}")
            if not wrap and (receiver is not None or overloads):
                raise ValueError(f"method {name!r}: overloads must be wrapped")
            body, entry = self._callable(fn, wrap)
            declaration = self._declare("method", name, arity, returns, receiver, body)
            self._overloads[name] = overloads = [*overloads, (receiver, body)]
            if receiver is None and len(overloads) == 1:
                self.methods[name] = entry
            else:
                self.methods[name] = _overloaded(name, overloads)
            self.method_arity[name] = self.method_arity.get(name, frozenset()) | declaration.arity
            return entry

        return register

    def _callable(self, fn: Function, wrap: bool) -> tuple[Function, Function]:
        """(body, what the tables hold); a body declared twice keeps one wrapper."""
        body = self._bodies.get(fn, fn)
        if not wrap:
            return body, body
        wrapper = self._wrappers.get(body)
        if wrapper is None:
            wrapper = self._wrappers[body] = cel_function(body)
            self._bodies[wrapper] = body
        return body, wrapper

    def _declare(
        self,
        kind: Literal["function", "method"],
        name: str,
        arity: tuple[int, ...],
        returns: str | tuple[str, ...],
        receiver: type | None,
        body: Function,
    ) -> Declaration:
        results = frozenset((returns,) if isinstance(returns, str) else returns)
        if not results or not results <= RESULT_TYPES:
            raise ValueError(f"{name!r}: unknown result type in {sorted(results)}")
        counts = frozenset(arity)
        if not counts:
            raise ValueError(f"{name!r}: no argument count")
        declaration = Declaration(kind, name, counts, results, receiver, body)
        self.declarations.append(declaration)
        self._results[name] = self._results.get(name, frozenset()) | results
        if self._results[name] & {"bool", "dyn"}:
            self.non_bool.discard(name)
        else:
            self.non_bool.add(name)
        return declaration


REGISTRY = Registry()
function = REGISTRY.function
method = REGISTRY.method


def declare_ordering(receiver: type, compare: Callable[[Any, Any], int]) -> None:
    """``compareTo``, ``isGreaterThan`` and ``isLessThan`` for values of one type: Kubernetes'
    quantity and semver libraries declare the same three methods, each for its own type."""

    @method("compareTo", arity=(1,), returns="int", receiver=receiver)
    def compare_to(value: Any, other: Any) -> celtypes.IntType:
        if not isinstance(other, receiver):
            raise no_overload(value, "compareTo", other)
        return cel_int(compare(value, other))

    @method("isGreaterThan", arity=(1,), returns="bool", receiver=receiver)
    def is_greater_than(value: Any, other: Any) -> celtypes.BoolType:
        if not isinstance(other, receiver):
            raise no_overload(value, "isGreaterThan", other)
        return cel_bool(compare(value, other) > 0)

    @method("isLessThan", arity=(1,), returns="bool", receiver=receiver)
    def is_less_than(value: Any, other: Any) -> celtypes.BoolType:
        if not isinstance(other, receiver):
            raise no_overload(value, "isLessThan", other)
        return cel_bool(compare(value, other) < 0)
