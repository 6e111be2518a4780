"""Compile device selectors: parse with cel-python, check, estimate cost, transpile to Python.

Why not cel-python's ``Environment``/``CompiledRunner`` as they are:
- its parser is a process-wide singleton whose tree class is fixed by whoever builds it first,
  so we parse under a lock and copy the tree into transpiler nodes ourselves;
- its transpiled code names functions as ``module.qualname`` and runs in cel-python's module
  globals (a shared, mutable namespace); we bind our functions into a private globals dict per
  selector and turn the program into a plain function of the activation, so evaluating is one
  call with no ``exec``, no activation cloning and no shared state;
- it has no ``cel.bind``, treats ``min`` as a macro name, and returns Python ``bool`` from
  ``has()`` which its logical operators reject; the transpiler subclass below fixes those.
Kubernetes semantics the checker enforces at compile time (as the API server does): the 10 Ki
length limit, undeclared identifiers and functions, argument counts, regex literals, the
static cost limit, obvious non-bool results, and the base-library parts DRA cannot use.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from string import Template
from textwrap import dedent
from typing import Any, cast

import lark
from celpy import celtypes
from celpy.celparser import CELParseError, CELParser
from celpy.evaluation import (
    CELEvalError,
    CELSyntaxError,
    CELUnsupportedError,
    Phase1Transpiler,
    Phase2Transpiler,
    TranspilerTree,
    celstr,
)

from . import library
from .errors import InvalidSelectorError
from .values import DomainMap

Tree = lark.Tree[lark.Token]

# Kubernetes API limits (resource.k8s.io/v1): CELSelectorExpressionMaxLength and ...MaxCost.
MAX_EXPRESSION_LENGTH = 10 * 1024
DEFAULT_COST_LIMIT = 1_000_000
# Macro iterations one evaluation may run: a safety net behind the static estimate for ranges
# whose size the estimate can only guess (e.g. the result of split()).
DEFAULT_STEP_LIMIT = 100_000
# Worst-case sizes the estimate assumes for ranges it cannot see: a device has at most 32
# attributes plus capacities (ResourceSliceMaxAttributesAndCapacitiesPerDevice), and a list
# attribute, a string-derived list or any other computed list is assumed to be this long.
UNKNOWN_RANGE_SIZE = 64
# Nesting deeper than this is rejected instead of risking Python's recursion limit.
MAX_NESTING = 120

MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
VARIABLES = frozenset({"device"})
TYPE_NAMES = frozenset(
    {"int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type"}
)
# Parts of the Kubernetes base environment a device selector cannot meaningfully use.
UNSUPPORTED: dict[str, str] = {
    "authorizer": "the authorizer library is only available in admission policies",
    "image": "the image reference library is not available in device selectors",
    "isImage": "the image reference library is not available in device selectors",
    "optional": "optional types (optional.of, ?., [?]) are not supported in device selectors",
    "format": "the named-format library (format.named, format.dns1123Label, ...) needs "
    "optional types, which device selectors do not support",
    "math": "the math extension is not part of the Kubernetes base environment",
    "jsonpatch": "JSON patch values are only available in mutating admission policies",
    "duration": "durations are not useful in device selectors",
    "timestamp": "timestamps are not useful in device selectors",
    "type": "type() is not supported in device selectors",
}
# Macros whose result is certainly not a bool (for functions, see library.NON_BOOL_RESULTS).
_NON_BOOL_MACROS = frozenset({"map", "filter"})


# --- parsing -----------------------------------------------------------------------------------

_PARSER_LOCK = threading.Lock()


def _parse(expression: str) -> Tree:
    """Parse with cel-python's shared parser, under a lock (it keeps per-call state)."""
    with _PARSER_LOCK:
        parser = CELParser(tree_class=TranspilerTree)
        return parser.parse(expression)


def _to_transpiler_tree(tree: Tree, depth: int = 0) -> TranspilerTree:
    """A fresh copy in the node class the transpiler needs, whoever built the shared parser."""
    if depth > MAX_NESTING * 8:
        raise InvalidSelectorError("expression is nested too deeply")
    children: list[lark.Token | TranspilerTree] = [
        _to_transpiler_tree(c, depth + 1) if isinstance(c, lark.Tree) else c for c in tree.children
    ]
    return TranspilerTree(tree.data, children, tree.meta)


# --- tree helpers ------------------------------------------------------------------------------


def _descend(node: Tree) -> Tree:
    """Skip the single-child chain nodes (expr -> conditionalor -> ... -> member -> primary)."""
    while (
        node.data
        in {
            "expr",
            "conditionalor",
            "conditionaland",
            "relation",
            "addition",
            "multiplication",
            "unary",
            "member",
            "primary",
            "paren_expr",
        }
        and len(node.children) == 1
        and isinstance(node.children[0], lark.Tree)
    ):
        node = node.children[0]
    return node


def _bare_ident(node: Tree) -> str | None:
    """The name, when the node is nothing but an identifier."""
    inner = _descend(node)
    if inner.data == "ident":
        return str(cast(lark.Token, inner.children[0]).value)
    return None


def _args(node: Tree | None) -> list[TranspilerTree]:
    if node is None:
        return []
    return [cast(TranspilerTree, c) for c in node.children]


def _split_call(tree: Tree) -> tuple[Tree, lark.Token, Tree | None]:
    """member_dot_arg -> (receiver, method name token, exprlist or None)."""
    if len(tree.children) == 3:
        member, name, exprlist = tree.children
        return cast(Tree, member), cast(lark.Token, name), cast(Tree, exprlist)
    member, name = tree.children
    return cast(Tree, member), cast(lark.Token, name), None


def _position(node: Tree | lark.Token) -> tuple[int | None, int | None]:
    if isinstance(node, lark.Token):
        return node.line, node.column
    meta = node.meta
    return getattr(meta, "line", None), getattr(meta, "column", None)


def _literal_string(node: Tree) -> str | None:
    inner = _descend(node)
    if inner.data == "literal":
        token = cast(lark.Token, inner.children[0])
        if token.type in ("STRING_LIT", "MLSTRING_LIT"):
            return str(celstr(token))
    return None


# --- checking and cost estimation --------------------------------------------------------------


class _CheckError(Exception):
    def __init__(self, message: str, node: Tree | lark.Token) -> None:
        super().__init__(message)
        self.message = message
        self.line, self.column = _position(node)


class _Checker:
    """Names, arities, unsupported features and a worst-case cost, in one walk."""

    def check(self, node: Tree, scope: frozenset[str], depth: int = 0) -> int:
        if depth > MAX_NESTING:
            raise _CheckError(f"expression is nested more than {MAX_NESTING} levels deep", node)
        handler = getattr(self, f"_check_{node.data}", None)
        if handler is not None:
            return cast(int, handler(node, scope, depth + 1))
        cost = 0
        for child in node.children:
            if isinstance(child, lark.Tree):
                cost += self.check(child, scope, depth + 1)
        # Operators (relation, addition, ...) cost one step each; chain nodes are free.
        return cost + (1 if len(node.children) > 1 else 0)

    def _check_ident(self, node: Tree, scope: frozenset[str], depth: int) -> int:
        name = cast(lark.Token, node.children[0]).value
        if name in scope or name in VARIABLES:
            return 1
        if name in UNSUPPORTED:
            raise _CheckError(UNSUPPORTED[name], node)
        if name in TYPE_NAMES:
            raise _CheckError(f"type names such as {name!r} are not supported as values", node)
        raise _CheckError(f"undeclared reference to {name!r} (the only variable is 'device')", node)

    def _check_dot_ident(self, node: Tree, scope: frozenset[str], depth: int) -> int:
        raise _CheckError("leading-dot identifiers are not supported", node)

    _check_dot_ident_arg = _check_dot_ident

    def _check_member_object(self, node: Tree, scope: frozenset[str], depth: int) -> int:
        raise _CheckError("message construction is not supported in device selectors", node)

    def _check_member_dot(self, node: Tree, scope: frozenset[str], depth: int) -> int:
        receiver = cast(Tree, node.children[0])
        name = _bare_ident(receiver)
        if (
            name is not None
            and name not in scope
            and name in library.NAMESPACES | UNSUPPORTED.keys()
        ):
            if name in UNSUPPORTED:
                raise _CheckError(UNSUPPORTED[name], node)
            field = cast(lark.Token, node.children[1]).value
            raise _CheckError(f"{name}.{field} is a function; call it with arguments", node)
        return self.check(receiver, scope, depth) + 1

    def _check_ident_arg(self, node: Tree, scope: frozenset[str], depth: int) -> int:
        token = cast(lark.Token, node.children[0])
        name = token.value
        args = _args(cast(Tree, node.children[1]) if len(node.children) == 2 else None)
        if name == "has":
            if len(args) != 1 or _descend(args[0]).data != "member_dot":
                raise _CheckError(
                    "invalid argument to has() macro: expected a field selection such as "
                    'has(device.attributes["example.com"].model)',
                    node,
                )
            return self.check(args[0], scope, depth)
        if name == "dyn":
            if len(args) != 1:
                raise _CheckError("dyn() takes exactly one argument", node)
            return self.check(args[0], scope, depth)
        if name in UNSUPPORTED:
            raise _CheckError(UNSUPPORTED[name], node)
        if name not in library.GLOBAL_FUNCTIONS:
            raise _CheckError(f"undeclared reference to function {name!r}", token)
        self._arity(name, library.ARITY[name], len(args), token)
        self._regex_literal(name, args, 1)
        return 1 + sum(self.check(a, scope, depth) for a in args)

    def _check_member_dot_arg(self, node: Tree, scope: frozenset[str], depth: int) -> int:
        receiver, token, exprlist = _split_call(node)
        name = token.value
        args = _args(exprlist)
        namespace = _bare_ident(receiver)
        if namespace is not None and namespace not in scope:
            if namespace == "cel" and name == "bind":
                return self._check_bind(node, args, scope, depth)
            if namespace in UNSUPPORTED:
                raise _CheckError(UNSUPPORTED[namespace], node)
            if namespace in library.NAMESPACES:
                label = f"{namespace}.{name}"
                if label not in library.GLOBAL_FUNCTIONS:
                    raise _CheckError(f"undeclared reference to function {label!r}", token)
                self._arity(label, library.ARITY[label], len(args), token)
                return 1 + sum(self.check(a, scope, depth) for a in args)
        if name in MACROS:
            return self._check_macro(node, receiver, name, args, scope, depth)
        cost = self.check(receiver, scope, depth)  # errors in the receiver come first
        if name not in library.METHODS:
            raise _CheckError(f"undeclared reference to method {name!r}", token)
        self._arity(name, library.METHOD_ARITY[name], len(args), token)
        self._regex_literal(name, args, 0)
        return cost + sum(self.check(a, scope, depth) for a in args) + 1

    def _check_bind(
        self, node: Tree, args: Sequence[Tree], scope: frozenset[str], depth: int
    ) -> int:
        if len(args) != 3:
            raise _CheckError("cel.bind() takes three arguments: a name, a value, a body", node)
        var = _bare_ident(args[0])
        if var is None:
            raise _CheckError("cel.bind(): the first argument must be a simple name", args[0])
        self._bindable(var, args[0])
        init = self.check(args[1], scope, depth)
        return init + self.check(args[2], scope | {var}, depth) + 1

    def _check_macro(
        self,
        node: Tree,
        receiver: Tree,
        name: str,
        args: Sequence[Tree],
        scope: frozenset[str],
        depth: int,
    ) -> int:
        if len(args) == 3:
            raise _CheckError(
                f"the three-argument form of {name}() (two-variable comprehensions, map with "
                "a filter) is not supported in device selectors",
                node,
            )
        if len(args) != 2:
            raise _CheckError(f"{name}() takes two arguments: a variable and an expression", node)
        var = _bare_ident(args[0])
        if var is None:
            raise _CheckError(f"{name}(): the first argument must be a simple name", args[0])
        self._bindable(var, args[0])
        range_cost = self.check(receiver, scope, depth)
        body_cost = self.check(args[1], scope | {var}, depth)
        return range_cost + _range_size(receiver) * (body_cost + 1) + 1

    @staticmethod
    def _bindable(var: str, node: Tree) -> None:
        if var in VARIABLES or var in library.NAMESPACES or var in TYPE_NAMES:
            raise _CheckError(f"{var!r} is reserved and cannot be used as a variable name", node)

    @staticmethod
    def _arity(name: str, allowed: frozenset[int], given: int, token: lark.Token) -> None:
        if given not in allowed:
            counts = " or ".join(str(n) for n in sorted(allowed))
            raise _CheckError(f"{name}() takes {counts} argument(s), got {given}", token)

    @staticmethod
    def _regex_literal(name: str, args: Sequence[Tree], position: int) -> None:
        """Kubernetes validates regex literals at compile time (cel.ValidateRegexLiterals)."""
        if name not in ("matches", "find", "findAll") or len(args) <= position:
            return
        pattern = _literal_string(args[position])
        if pattern is None:
            return
        compiled = library.compile_regex.__wrapped__  # no memo pollution from bad patterns
        try:
            compiled(pattern)
        except Exception as exc:
            raise _CheckError(str(exc), args[position]) from None


def _range_size(receiver: Tree) -> int:
    inner = _descend(receiver)
    if inner.data == "list_lit":
        return len(_args(cast(Tree, inner.children[0])) if inner.children else [])
    if inner.data == "map_lit":
        return len(inner.children[0].children) // 2 if inner.children else 0  # type: ignore[union-attr]
    return UNKNOWN_RANGE_SIZE


def _result_is_not_bool(tree: Tree) -> str | None:
    """Why the top-level value certainly is not a bool, or None when it may be one."""
    inner = _descend(tree)
    kind = inner.data
    if kind in ("addition", "multiplication"):
        return "an arithmetic result"
    if kind == "unary" and cast(Tree, inner.children[0]).data == "unary_neg":
        return "a negated number"
    if kind == "list_lit":
        return "a list"
    if kind == "map_lit":
        return "a map"
    if kind == "literal":
        token = cast(lark.Token, inner.children[0])
        if token.type != "BOOL_LIT":
            return f"a {token.type.removesuffix('_LIT').lower()} literal"
    if kind == "ident_arg":
        name = cast(lark.Token, inner.children[0]).value
        if name in library.NON_BOOL_RESULTS or name in _NON_BOOL_MACROS:
            return f"the result of {name}()"
    if kind == "member_dot_arg":
        receiver, token, _ = _split_call(inner)
        namespace = _bare_ident(receiver)
        label = f"{namespace}.{token.value}" if namespace in library.NAMESPACES else token.value
        if label in library.NON_BOOL_RESULTS or label in _NON_BOOL_MACROS:
            return f"the result of {label}()"
    return None


# --- transpiling -------------------------------------------------------------------------------


class _Transpiler(Phase1Transpiler):
    """cel-python's first transpiler phase with our function binding and the missing pieces."""

    def __init__(self) -> None:  # the base class wants a facade only for its function lookup
        self.expr_number = 0
        self.bindings: dict[str, Any] = {}
        self._names: dict[str, str] = {}

    def bind(self, label: str, function: Any) -> str:
        name = self._names.get(label)
        if name is None:
            name = f"_f{len(self._names)}"
            self._names[label] = name
            self.bindings[name] = function
        return name

    def func_name(self, label: str) -> str:
        if label in library.OPERATORS:
            return self.bind(label, library.OPERATORS[label])
        return self.bind(label, library.GLOBAL_FUNCTIONS[label])

    def conditionalor(self, tree: TranspilerTree) -> None:
        if len(tree.children) == 2:
            self._lazy(tree, "or", _lazy_or, cast(list[TranspilerTree], tree.children))
        else:
            super().conditionalor(tree)

    def conditionaland(self, tree: TranspilerTree) -> None:
        if len(tree.children) == 2:
            self._lazy(tree, "and", _lazy_and, cast(list[TranspilerTree], tree.children))
        else:
            super().conditionaland(tree)

    def expr(self, tree: TranspilerTree) -> None:
        if len(tree.children) == 3:
            self._lazy(
                tree, "conditional", _lazy_conditional, cast(list[TranspilerTree], tree.children)
            )
        else:
            super().expr(tree)

    def _lazy(
        self,
        tree: TranspilerTree,
        what: str,
        function: Callable[..., Any],
        parts: list[TranspilerTree],
    ) -> None:
        """Short-circuit: operands are lambdas, evaluated only when the result needs them.

        cel-python evaluates both sides of ``||``/``&&`` before combining them; we evaluate
        the left side first and stop when it decides, as cel-go does. Errors still commute:
        ``error || true`` is true.
        """
        fn = self.bind(f"lazy {what}", function)
        lines = [f"# {what}:"]
        lines += [f"ex_${{n}}_{i} = lambda activation: ${{p{i}}}" for i in range(len(parts))]
        operands = ", ".join(f"ex_${{n}}_{i}" for i in range(len(parts)))
        lines.append(f"ex_${{n}} = lambda activation: {fn}(activation, {operands})")
        bindings: dict[str, Callable[[TranspilerTree], str]] = {"n": lambda t: str(t.expr_number)}
        for i, part in enumerate(parts):
            bindings[f"p{i}"] = lambda t, part=part: part.transpiled  # type: ignore[misc]
        tree.checked_exception = (Template("\n".join(lines)), bindings)
        tree.transpiled = f"ex_{tree.expr_number}(activation)"

    def literal(self, tree: TranspilerTree) -> None:
        """Literals are constants: build each once at compile time, not per evaluation."""
        super().literal(tree)
        if tree.transpiled != "None":
            value = eval(tree.transpiled, {"__builtins__": {}, "celpy": _CELPY_NAMESPACE})
            tree.transpiled = self.bind(f"literal {tree.transpiled}", value)

    def ident(self, tree: TranspilerTree) -> None:
        # Subscript, not attribute access: a variable named "get" must not hit a method.
        name = cast(lark.Token, tree.children[0]).value
        tree.transpiled = f"activation[{name!r}]"

    def member_dot(self, tree: TranspilerTree) -> None:
        member, token = cast(tuple[TranspilerTree, lark.Token], tree.children)
        select = self.bind("_.field", _select)
        tree.transpiled = f"{select}({member.transpiled}, {token.value!r})"

    def ident_arg(self, tree: TranspilerTree) -> None:
        name = cast(lark.Token, tree.children[0]).value
        if name in library.FOLDABLE and len(tree.children) == 2:
            # quantity("40Gi") and friends with a literal argument are constants: parse once
            # here instead of on every evaluation (a failure stays a runtime error, as in K8s).
            args = _args(cast(Tree, tree.children[1]))
            text = _literal_string(args[0]) if len(args) == 1 else None
            if text is not None:
                value = library.GLOBAL_FUNCTIONS[name](celtypes.StringType(text))
                if not isinstance(value, CELEvalError):
                    tree.transpiled = self.bind(f"constant {name}({text!r})", value)
                    return
        if name != "has":
            super().ident_arg(tree)
            return
        exprlist = cast(Tree, tree.children[1])
        target = cast(TranspilerTree, _descend(cast(Tree, exprlist.children[0])))
        member, field = cast(tuple[TranspilerTree, lark.Token], target.children)
        has = self.bind("has", _has)
        template = Template(
            dedent("""\
            # has:
            ex_${n}_h = lambda activation: ${member}
            ex_${n}_v = lambda activation: celpy.evaluation.result(activation, ex_${n}_h)
            ex_${n} = lambda activation: ${has}(ex_${n}_v(activation), ${field})""")
        )
        tree.checked_exception = (
            template,
            {
                "n": lambda t: str(t.expr_number),
                "member": lambda t: member.transpiled,
                "has": lambda t: has,
                "field": lambda t: repr(field.value),
            },
        )
        tree.transpiled = f"ex_{tree.expr_number}(activation)"

    def member_dot_arg(self, tree: TranspilerTree) -> None:
        receiver, token, exprlist = _split_call(tree)
        name = token.value
        args = _args(exprlist)
        namespace = _bare_ident(receiver)
        if namespace == "cel" and name == "bind":
            self._deferred(
                tree,
                "bind",
                _bind,
                var=cast(str, _bare_ident(args[0])),
                source=args[1],
                body=args[2],
            )
            return
        if namespace in library.NAMESPACES and f"{namespace}.{name}" in library.GLOBAL_FUNCTIONS:
            fn = self.bind(f"{namespace}.{name}", library.GLOBAL_FUNCTIONS[f"{namespace}.{name}"])
            tree.transpiled = f"{fn}({', '.join(a.transpiled for a in args)})"
            return
        member = cast(TranspilerTree, receiver)
        if name in MACROS:
            self._deferred(
                tree,
                name,
                _MACRO_FUNCTIONS[name],
                var=cast(str, _bare_ident(args[0])),
                source=member,
                body=args[1],
            )
            return
        fn = self.bind(f"method {name}", library.METHODS[name])
        tree.transpiled = f"{fn}({', '.join([member.transpiled, *(a.transpiled for a in args)])})"

    def _deferred(
        self,
        tree: TranspilerTree,
        what: str,
        function: Callable[..., Any],
        *,
        var: str,
        source: TranspilerTree,
        body: TranspilerTree,
    ) -> None:
        """A construct whose parts run lazily (lambdas), in the shape Phase2 collects."""
        fn = self.bind(f"macro {what}", function)
        template = Template(
            dedent("""\
            # ${what}:
            ex_${n}_s = lambda activation: ${source}
            ex_${n}_b = lambda activation: ${body}
            ex_${n} = lambda activation: ${fn}(activation, ${var}, ex_${n}_s, ex_${n}_b)""")
        )
        tree.checked_exception = (
            template,
            {
                "n": lambda t: str(t.expr_number),
                "what": lambda t: what,
                "source": lambda t: source.transpiled,
                "body": lambda t: body.transpiled,
                "fn": lambda t: fn,
                "var": lambda t: repr(var),
            },
        )
        tree.transpiled = f"ex_{tree.expr_number}(activation)"


def transpile(tree: TranspilerTree) -> tuple[str, dict[str, Any]]:
    """Python source defining ``_program(base_activation)``, and the globals it needs."""
    phase1 = _Transpiler()
    phase1.visit(tree)
    phase2 = Phase2Transpiler(cast(Any, None))
    phase2.visit(tree)
    statements = phase2.statements(tree)
    last = statements[-1]
    prefix = "CEL = "
    if not last.startswith(prefix):  # pragma: no cover - cel-python changed its output
        raise RuntimeError(f"unexpected transpiler output: {last!r}")
    statements[-1] = "_program = lambda base_activation: " + last[len(prefix) :]
    return "\n".join(statements), phase1.bindings


# --- runtime pieces the transpiled code calls --------------------------------------------------


class StepBudgetExceededError(Exception):
    """Raised (not returned) so no ``||`` or ``has()`` can swallow it."""


class Scope:
    """The activation transpiled code reads variables from: a dict and a shared step budget."""

    __slots__ = ("budget", "variables")

    def __init__(self, variables: dict[str, Any], budget: list[int]) -> None:
        self.variables = variables
        self.budget = budget

    def __getitem__(self, name: str) -> Any:
        try:
            value = self.variables[name]
        except KeyError:
            raise NameError(name) from None
        if type(value) is _Lazy:
            return value.get()
        return value

    def nested_activation(self, vars: dict[str, Any]) -> Scope:
        budget = self.budget
        budget[0] -= 1
        if budget[0] < 0:
            raise StepBudgetExceededError
        return Scope({**self.variables, **vars}, budget)


def _select(container: Any, field: str) -> Any:
    """``x.field``: a map lookup; a missing key is an error value with the key in it."""
    if isinstance(container, CELEvalError):
        return container
    if isinstance(container, dict):
        try:
            return container[field]
        except KeyError:
            return CELEvalError(f"no such key: {field!r}", KeyError, (field,))
    return CELEvalError(
        f"no such field {field!r} on {library.type_name(container)}", TypeError, (field,)
    )


def _has(container: Any, field: str) -> Any:
    if isinstance(container, CELEvalError):
        return container
    if isinstance(container, DomainMap):
        # Kubernetes' attribute and capacity maps find every domain (an empty map when
        # unknown), so has() is true for any domain, while ``in`` tests real membership.
        return library.TRUE
    if isinstance(container, dict):
        return library.cel_bool(dict.__contains__(container, field))
    return CELEvalError(
        f"invalid type for field selection: has() on {library.type_name(container)}", TypeError, ()
    )


def _result(activation: Scope, fn: Callable[[Scope], Any]) -> Any:
    """Evaluate a lazy part, turning Python errors into CEL error values (like celpy's result)."""
    try:
        return fn(activation)
    except (ValueError, KeyError, TypeError, ZeroDivisionError, OverflowError, IndexError) as exc:
        return CELEvalError(f"{type(exc).__name__}: {exc}", type(exc), exc.args)
    except NameError as exc:
        return CELEvalError(f"undeclared reference to {exc.args[0]!r}", NameError, exc.args)


class _Lazy:
    """A bound variable's value, computed when first read (then kept)."""

    __slots__ = ("activation", "done", "source", "value")

    def __init__(self, activation: Scope, source: Callable[..., Any]) -> None:
        self.activation = activation
        self.source = source
        self.done = False
        self.value: Any = None

    def get(self) -> Any:
        if not self.done:
            self.value = _result(self.activation, self.source)
            self.done = True
        return self.value


def _bind(activation: Scope, var: str, source: Callable[..., Any], body: Callable[..., Any]) -> Any:
    """``cel.bind(var, init, body)``: init is evaluated once, when ``body`` first reads it.

    As in cel-go, where the accumulator of bind's comprehension is initialised lazily: an
    error in ``init`` is the result only when ``body`` reads the variable.
    """
    return _result(activation.nested_activation({var: _Lazy(activation, source)}), body)


def _lazy_or(activation: Scope, left: Callable[..., Any], right: Callable[..., Any]) -> Any:
    first = _result(activation, left)
    if _is_bool(first) and first:
        return library.TRUE
    return library.logical_or(first, _result(activation, right))


def _lazy_and(activation: Scope, left: Callable[..., Any], right: Callable[..., Any]) -> Any:
    first = _result(activation, left)
    if _is_bool(first) and not first:
        return library.FALSE
    return library.logical_and(first, _result(activation, right))


def _lazy_conditional(
    activation: Scope,
    condition: Callable[..., Any],
    if_true: Callable[..., Any],
    if_false: Callable[..., Any],
) -> Any:
    chosen = _result(activation, condition)
    if isinstance(chosen, CELEvalError):
        return chosen
    if not _is_bool(chosen):
        return CELEvalError(f"no such overload: {library.type_name(chosen)} ? _ : _", TypeError, ())
    return _result(activation, if_true if chosen else if_false)


def _items(value: Any) -> Iterator[Any] | CELEvalError:
    if isinstance(value, CELEvalError):
        return value
    if isinstance(value, (list, dict)):
        return iter(list(value))
    return CELEvalError(f"no such overload: macro over {library.type_name(value)}", TypeError, ())


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, celtypes.BoolType))


def _predicate(value: Any, macro: str) -> Any:
    if _is_bool(value) or isinstance(value, CELEvalError):
        return value
    return CELEvalError(
        f"{macro}(): the predicate returned {library.type_name(value)}, not bool", TypeError, ()
    )


def _macro_all(
    activation: Scope, var: str, source: Callable[..., Any], body: Callable[..., Any]
) -> Any:
    items = _items(_result(activation, source))
    if isinstance(items, CELEvalError):
        return items
    error: Any = None
    for item in items:
        value = _predicate(_result(activation.nested_activation({var: item}), body), "all")
        if isinstance(value, CELEvalError):
            error = error or value
        elif not value:
            return library.cel_bool(False)
    return error if error is not None else library.cel_bool(True)


def _macro_exists(
    activation: Scope, var: str, source: Callable[..., Any], body: Callable[..., Any]
) -> Any:
    items = _items(_result(activation, source))
    if isinstance(items, CELEvalError):
        return items
    error: Any = None
    for item in items:
        value = _predicate(_result(activation.nested_activation({var: item}), body), "exists")
        if isinstance(value, CELEvalError):
            error = error or value
        elif value:
            return library.cel_bool(True)
    return error if error is not None else library.cel_bool(False)


def _macro_exists_one(
    activation: Scope, var: str, source: Callable[..., Any], body: Callable[..., Any]
) -> Any:
    items = _items(_result(activation, source))
    if isinstance(items, CELEvalError):
        return items
    count = 0
    for item in items:
        value = _predicate(_result(activation.nested_activation({var: item}), body), "exists_one")
        if isinstance(value, CELEvalError):
            return value
        count += 1 if value else 0
    return library.cel_bool(count == 1)


def _macro_map(
    activation: Scope, var: str, source: Callable[..., Any], body: Callable[..., Any]
) -> Any:
    items = _items(_result(activation, source))
    if isinstance(items, CELEvalError):
        return items
    out: list[Any] = []
    for item in items:
        value = _result(activation.nested_activation({var: item}), body)
        if isinstance(value, CELEvalError):
            return value
        out.append(value)
    return celtypes.ListType(out)


def _macro_filter(
    activation: Scope, var: str, source: Callable[..., Any], body: Callable[..., Any]
) -> Any:
    items = _items(_result(activation, source))
    if isinstance(items, CELEvalError):
        return items
    out: list[Any] = []
    for item in items:
        value = _predicate(_result(activation.nested_activation({var: item}), body), "filter")
        if isinstance(value, CELEvalError):
            return value
        if value:
            out.append(item)
    return celtypes.ListType(out)


_MACRO_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "all": _macro_all,
    "exists": _macro_exists,
    "exists_one": _macro_exists_one,
    "map": _macro_map,
    "filter": _macro_filter,
}


# --- the compile entry point -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Program:
    """A checked, transpiled expression: call ``run(scope)`` for a value or a CELEvalError."""

    expression: str
    run: Callable[[Scope], Any]
    estimated_cost: int
    source: str


def compile_program(expression: str, *, cost_limit: int = DEFAULT_COST_LIMIT) -> Program:
    """Parse, check and transpile; raise InvalidSelectorError (message without context)."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise InvalidSelectorError(
            f"expression is {len(expression)} characters long, more than the limit of "
            f"{MAX_EXPRESSION_LENGTH}",
            expression=expression,
        )
    try:
        tree = _to_transpiler_tree(_parse(expression))
    except CELParseError as exc:
        first = str(exc.args[0]).strip().splitlines()
        detail = first[0] if first else "syntax error"
        raise InvalidSelectorError(
            _located(f"syntax error near {detail!r}", exc.line, exc.column),
            expression=expression,
            line=exc.line,
            column=exc.column,
        ) from None
    except RecursionError:
        raise InvalidSelectorError(
            "expression is nested too deeply", expression=expression
        ) from None
    try:
        cost = _Checker().check(tree, frozenset())
    except _CheckError as exc:
        raise InvalidSelectorError(
            _located(exc.message, exc.line, exc.column),
            expression=expression,
            line=exc.line,
            column=exc.column,
        ) from None
    if cost > cost_limit:
        raise InvalidSelectorError(
            f"estimated cost {cost} exceeds the limit of {cost_limit} (nested macros over "
            "large lists multiply)",
            expression=expression,
        )
    why = _result_is_not_bool(tree)
    if why is not None:
        raise InvalidSelectorError(
            f"a selector must evaluate to bool, but this expression yields {why}",
            expression=expression,
        )
    try:
        source, bindings = transpile(tree)
        code = compile(source, "<cel selector>", "exec")
    except (CELSyntaxError, CELUnsupportedError, SyntaxError, RecursionError) as exc:
        raise InvalidSelectorError(f"cannot compile: {exc}", expression=expression) from None
    namespace: dict[str, Any] = {
        "__builtins__": {},
        "celpy": _CELPY_NAMESPACE,
        "CELEvalError": CELEvalError,
        **bindings,
    }
    exec(code, namespace)  # our own generated code, in a private namespace
    return Program(expression, namespace["_program"], cost, source)


def _located(message: str, line: int | None, column: int | None) -> str:
    if line is None:
        return message
    return f"line {line}, column {column}: {message}"


class _EvaluationNamespace:
    """What the generated code reaches as ``celpy.evaluation``: only our ``result``."""

    result = staticmethod(_result)


class _CelpyNamespace:
    """What the generated code reaches as ``celpy``: cel-python's types, our ``result``."""

    celtypes = celtypes
    evaluation = _EvaluationNamespace


_CELPY_NAMESPACE = _CelpyNamespace()
