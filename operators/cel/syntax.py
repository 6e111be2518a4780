"""CEL source to an AST, as cel-go (v0.26, v0.29) parses it: grammar, literals, macros, limits.

Hand-written so that what is a syntax error, how literals read, how macros expand and how deep
an expression may nest follow cel-go's ANTLR grammar and visitor, not a generic grammar: macros
become comprehensions here, ``!!x`` is ``x``, ``-5`` is a literal, ``||``/``&&`` chains are
balanced trees. The two versions' grammars are one; cel-go 0.29 (Kubernetes 1.37) accepts the
backtick-quoted field names (``a.`b-c```) that 0.26 refuses. Only the verdict and the tree
matter; messages are ours.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

from .errors import InvalidSelectorError

# cel-go's parser defaults (the Kubernetes environment keeps them).
MAX_RECURSION_DEPTH = 250
MAX_CODE_POINTS = 100_000
ACCUMULATOR = "@result"
LEGACY_ACCUMULATOR = "__result__"
UNUSED_ITER_VAR = "#unused"

RESERVED = frozenset(
    {
        "as",
        "break",
        "const",
        "continue",
        "else",
        "false",
        "for",
        "function",
        "if",
        "import",
        "in",
        "let",
        "loop",
        "package",
        "namespace",
        "null",
        "return",
        "true",
        "var",
        "void",
        "while",
    }
)


class Uint(int):
    """A CEL ``uint`` (an int subclass: arithmetic and hashing stay native)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}u"


# Python frames a tree as deep as cel-go allows may need to parse, check and run (about a dozen
# per level of nesting); Python's default of 1,000 is less.
RECURSION_LIMIT = 12_000


def allow_deep_recursion() -> None:
    """Raise the interpreter's recursion limit to what CEL's nesting limits need (never lower it).

    Process-wide but harmless: since Python 3.11 Python-to-Python calls use no C stack, and
    the data CEL builds is never nested deeper than its source.
    """
    if sys.getrecursionlimit() < RECURSION_LIMIT:
        sys.setrecursionlimit(RECURSION_LIMIT)


# --- the AST -----------------------------------------------------------------------------------


class Expr:
    """A node. ``type`` and ``ref`` are filled by the checker; ``pos`` is a source offset."""

    __slots__ = ("pos", "ref", "type")

    def __init__(self, pos: int) -> None:
        self.pos = pos
        self.type: Any = None
        self.ref: Any = None


class Literal(Expr):
    __slots__ = ("value",)

    def __init__(self, pos: int, value: Any) -> None:
        super().__init__(pos)
        self.value = value


class Ident(Expr):
    __slots__ = ("name",)

    def __init__(self, pos: int, name: str) -> None:
        super().__init__(pos)
        self.name = name


class Select(Expr):
    __slots__ = ("field", "operand", "test_only")

    def __init__(self, pos: int, operand: Expr, field: str, test_only: bool = False) -> None:
        super().__init__(pos)
        self.operand = operand
        self.field = field
        self.test_only = test_only


class Call(Expr):
    __slots__ = ("args", "function", "target")

    def __init__(self, pos: int, function: str, target: Expr | None, args: list[Expr]) -> None:
        super().__init__(pos)
        self.function = function
        self.target = target
        self.args = args


class ListLit(Expr):
    __slots__ = ("elements", "optional")

    def __init__(self, pos: int, elements: list[Expr], optional: frozenset[int] = frozenset()):
        super().__init__(pos)
        self.elements = elements
        self.optional = optional


class MapLit(Expr):
    __slots__ = ("entries",)

    def __init__(self, pos: int, entries: list[tuple[Expr, Expr, bool]]) -> None:
        super().__init__(pos)
        self.entries = entries


class StructLit(Expr):
    """``name{field: value}``: message construction."""

    __slots__ = ("fields", "name")

    def __init__(self, pos: int, name: str, fields: list[tuple[str, Expr, bool]]) -> None:
        super().__init__(pos)
        self.name = name
        self.fields = fields


class Comprehension(Expr):
    __slots__ = (
        "accu_init",
        "accu_var",
        "iter_range",
        "iter_var",
        "iter_var2",
        "loop_condition",
        "loop_step",
        "result",
    )

    def __init__(
        self,
        pos: int,
        iter_range: Expr,
        iter_var: str,
        iter_var2: str | None,
        accu_var: str,
        accu_init: Expr,
        loop_condition: Expr,
        loop_step: Expr,
        result: Expr,
    ) -> None:
        super().__init__(pos)
        self.iter_range = iter_range
        self.iter_var = iter_var
        self.iter_var2 = iter_var2
        self.accu_var = accu_var
        self.accu_init = accu_init
        self.loop_condition = loop_condition
        self.loop_step = loop_step
        self.result = result

    @property
    def is_bind(self) -> bool:
        """cel.bind's shape (cel-go's cost estimator and planner single it out)."""
        return (
            isinstance(self.iter_range, ListLit)
            and not self.iter_range.elements
            and isinstance(self.loop_condition, Literal)
            and self.loop_condition.value is False
            and self.accu_var != LEGACY_ACCUMULATOR
        )


def children(node: Expr) -> list[Expr]:
    """The direct sub-expressions, in evaluation order."""
    if isinstance(node, Select):
        return [node.operand]
    if isinstance(node, Call):
        return ([node.target] if node.target is not None else []) + node.args
    if isinstance(node, ListLit):
        return list(node.elements)
    if isinstance(node, MapLit):
        return [part for key, value, _ in node.entries for part in (key, value)]
    if isinstance(node, StructLit):
        return [value for _, value, _ in node.fields]
    if isinstance(node, Comprehension):
        return [
            node.iter_range,
            node.accu_init,
            node.loop_condition,
            node.loop_step,
            node.result,
        ]
    return []


# --- lexing ------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<ws>[\t\n\r\f ]+|//[^\n]*)
  | (?P<float>[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|\.[0-9]+(?:[eE][+-]?[0-9]+)?)
  | (?P<uint>(?:0x[0-9a-fA-F]+|[0-9]+)[uU])
  | (?P<int>0x[0-9a-fA-F]+|[0-9]+)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<escaped>`[A-Za-z0-9_./\- ]+`)
  | (?P<op>==|!=|<=|>=|&&|\|\||[<>!?:.,\[\]{}()+\-*/%])
    """,
    re.VERBOSE,
)
_ESC = (
    r"""\\(?:[abfnrtv"'\\?`]|[0-3][0-7][0-7]|[xX][0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})"""
)
# The STRING rule of cel-go's grammar, each alternative; a prefix letter b/B makes BYTES.
_STRING = re.compile(
    rf"""
    "{{3}}(?:{_ESC}|[^\\])*?"{{3}}
  | '{{3}}(?:{_ESC}|[^\\])*?'{{3}}
  | "(?:{_ESC}|[^\\"\n\r])*"
  | '(?:{_ESC}|[^\\'\n\r])*'
  | [rR]"{{3}}[\s\S]*?"{{3}}
  | [rR]'{{3}}[\s\S]*?'{{3}}
  | [rR]"[^"\n\r]*"
  | [rR]'[^'\n\r]*'
    """,
    re.VERBOSE,
)
_KEYWORDS = {"true": "true", "false": "false", "null": "null", "in": "in"}


class Token:
    __slots__ = ("kind", "pos", "text", "value")

    def __init__(self, kind: str, text: str, pos: int, value: Any = None) -> None:
        self.kind = kind  # float uint int string bytes ident escaped op true false null in eof
        self.text = text
        self.pos = pos
        self.value = value


def located(message: str, pos: int, source: str) -> InvalidSelectorError:
    line = source.count("\n", 0, pos) + 1
    column = pos - (source.rfind("\n", 0, pos) + 1) + 1
    return InvalidSelectorError(
        f"line {line}, column {column}: {message}", line=line, column=column
    )


_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "`": "`",
    "?": "?",
}


def unescape(text: str, is_bytes: bool) -> str | bytes:
    """A quoted literal's value, as cel-go's unescape reads it; ValueError when invalid.

    Strings are returned as str, bytes as bytes (escapes \\x and octal are octets there).
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    raw = text[0] in "rR"
    if raw:
        text = text[1:]
    quote = 3 if text.startswith(('"""', "'''")) and len(text) >= 6 else 1
    body = text[quote:-quote]
    if raw or "\\" not in body:
        return body.encode() if is_bytes else body
    out = bytearray()
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        if i + 1 >= n:
            raise ValueError("unable to unescape string, found '\\' as last character")
        e = body[i + 1]
        i += 2
        if e in _SIMPLE_ESCAPES:
            out += _SIMPLE_ESCAPES[e].encode()
        elif e in "xXuU":
            width = 2 if e in "xX" else 4 if e == "u" else 8
            if e in "uU" and is_bytes:
                raise ValueError("unable to unescape string")
            digits = body[i : i + width]
            if len(digits) < width or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError("unable to unescape string")
            code = int(digits, 16)
            i += width
            if e in "xX" and is_bytes:
                out.append(code)
            else:
                out += _rune(code)
        elif e in "0123":
            digits = body[i : i + 2]
            if len(digits) < 2 or any(d not in "01234567" for d in digits):
                raise ValueError("unable to unescape octal sequence in string")
            code = int(e + digits, 8)
            i += 2
            if is_bytes:
                out.append(code)
            else:
                out += _rune(code)
        else:
            raise ValueError("unable to unescape string")
    return bytes(out) if is_bytes else out.decode()


def _rune(code: int) -> bytes:
    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        raise ValueError("invalid unicode code point")
    return chr(code).encode()


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def tokenize(source: str) -> list[Token]:
    """ANTLR's longest match over cel-go's token rules; any unmatched character is an error."""
    tokens: list[Token] = []
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        string_start = i + 1 if c in "bB" else i if c in "rR\"'" else -1
        if string_start >= 0:
            m = _STRING.match(source, string_start)
            ident = _IDENT.match(source, i)
            if m is not None and m.end() > (ident.end() if ident else i):
                is_bytes = string_start > i
                try:
                    value = unescape(m.group(), is_bytes)
                except ValueError as exc:
                    raise located(str(exc), i, source) from None
                tokens.append(Token("bytes" if is_bytes else "string", "", i, value))
                i = m.end()
                continue
            if c in "\"'":
                raise located(f"Syntax error: token recognition error at: {c!r}", i, source)
        m = _TOKEN.match(source, i)
        if m is None:
            raise located(f"Syntax error: token recognition error at: {c!r}", i, source)
        kind = m.lastgroup
        assert kind is not None
        text = m.group()
        i = m.end()
        if kind == "ws":
            continue
        if kind == "ident" and text in _KEYWORDS:
            kind = _KEYWORDS[text]
        tokens.append(Token(kind, text, m.start()))
    tokens.append(Token("eof", "", n))
    return tokens


# --- parsing -----------------------------------------------------------------------------------

# Rules of cel-go's grammar whose nesting its ANTLR parse listener counts, each on its own.
_EXPR, _OR, _AND, _RELATION, _CALC, _UNARY, _MEMBER, _PRIMARY = range(8)
_EXPR_LIST, _LIST_INIT, _FIELD_INITS, _MAP_INITS, _OPT_EXPR = range(8, 13)

_RELATIONS = {"<": "_<_", "<=": "_<=_", ">": "_>_", ">=": "_>=_", "==": "_==_", "!=": "_!=_"}
_MULTIPLY = {"*": "_*_", "/": "_/_", "%": "_%_"}
_ADD = {"+": "_+_", "-": "_-_"}


class _Parser:
    """Recursive descent over cel-go's grammar, with both of its depth limits.

    ANTLR's listener counts how deep each rule nests (a left-recursive chain re-enters its rule
    once per operator, exiting first); cel-go's visitor counts nested ternaries, relations,
    arithmetic, selections, member calls and indexes. ``height`` keeps the latter per subtree.
    """

    def __init__(self, source: str, escaped_fields: bool) -> None:
        self.source = source
        self.escaped_fields = escaped_fields
        self.tokens = tokenize(source)
        self.i = 0
        self.rules = [0] * 13
        self.heights: dict[int, int] = {}

    # --- tokens and limits ---

    def peek(self, offset: int = 0) -> Token:
        return self.tokens[min(self.i + offset, len(self.tokens) - 1)]

    def at(self, text: str) -> bool:
        t = self.tokens[self.i]
        return t.kind == "op" and t.text == text

    def at_close(self, text: str) -> bool:
        """A ``,`` right before ``text``: the optional trailing comma of a literal."""
        nxt = self.peek(1)
        return self.at(",") and nxt.kind == "op" and nxt.text == text

    def take(self, text: str) -> Token:
        t = self.tokens[self.i]
        if t.kind != "op" or t.text != text:
            raise self.error(t, f"Syntax error: missing {text!r} at {self.shown(t)}")
        self.i += 1
        return t

    @staticmethod
    def shown(t: Token) -> str:
        if t.kind == "eof":
            return "<EOF>"
        return repr(t.text) if t.text else f"<{t.kind}>"

    def error(self, t: Token | int, message: str) -> InvalidSelectorError:
        return located(message, t if isinstance(t, int) else t.pos, self.source)

    def enter(self, rule: int) -> None:
        self.rules[rule] += 1
        if self.rules[rule] > MAX_RECURSION_DEPTH:
            raise self.error(
                self.peek(), f"expression recursion limit exceeded: {MAX_RECURSION_DEPTH}"
            )

    def leave(self, rule: int, times: int = 1) -> None:
        """cel-go's listener never lets a count go below zero (a chain's unrolling exits once
        per operator, more often than it entered)."""
        self.rules[rule] = max(0, self.rules[rule] - times)

    def push(self, rule: int) -> None:
        """One more operator of a left-recursive chain: ANTLR exits, then re-enters the rule."""
        self.leave(rule)
        self.enter(rule)

    def height(self, e: Expr) -> int:
        return self.heights.get(id(e), 0)

    def counted(self, e: Expr, *parts: Expr) -> Expr:
        """``e`` is a node cel-go's visitor descends into, over ``parts``."""
        self.heights[id(e)] = 1 + max((self.height(x) for x in parts), default=0)
        return e

    def uncounted(self, e: Expr, *parts: Expr) -> Expr:
        self.heights[id(e)] = max((self.height(x) for x in parts), default=0)
        return e

    # --- grammar ---

    def parse(self) -> Expr:
        e = self.expr()
        t = self.peek()
        if t.kind != "eof":
            raise self.error(t, f"Syntax error: mismatched input {self.shown(t)} expecting <EOF>")
        if self.height(e) > MAX_RECURSION_DEPTH:
            raise self.error(e.pos, "max recursion depth exceeded")
        return e

    def expr(self) -> Expr:
        self.enter(_EXPR)
        cond = self.conditional_or()
        if self.at("?"):
            q = self.take("?")
            yes = self.conditional_or()
            self.take(":")
            no = self.expr()
            cond = self.counted(Call(q.pos, "_?_:_", None, [cond, yes, no]), cond, yes, no)
        self.leave(_EXPR)
        return cond

    def conditional_or(self) -> Expr:
        self.enter(_OR)
        result = self.logical("||", "_||_", self.conditional_and)
        self.leave(_OR)
        return result

    def conditional_and(self) -> Expr:
        self.enter(_AND)
        result = self.logical("&&", "_&&_", self.relation)
        self.leave(_AND)
        return result

    def logical(self, op: str, function: str, operand: Callable[[], Expr]) -> Expr:
        terms = [operand()]
        ops: list[int] = []
        while self.at(op):
            ops.append(self.take(op).pos)
            terms.append(operand())
        if len(terms) == 1:
            return terms[0]
        return self.uncounted(_balance(function, terms, ops, 0, len(ops) - 1), *terms)

    def relation(self, nested: bool = False) -> Expr:
        """``relation: calc | relation op relation``, left-recursive as ANTLR runs it."""
        self.enter(_RELATION)
        left = self.calc()
        pushes = 0
        while not nested:
            t = self.peek()
            if t.kind == "op" and t.text in _RELATIONS:
                function = _RELATIONS[t.text]
            elif t.kind == "in":
                function = "@in"
            else:
                break
            self.push(_RELATION)
            pushes += 1
            self.i += 1
            right = self.relation(nested=True)
            left = self.counted(Call(t.pos, function, None, [left, right]), left, right)
        self.leave(_RELATION, pushes + 1)
        return left

    def calc(self, level: int = 0) -> Expr:
        """``calc``: ``* / %`` bind tighter than ``+ -``, both left-associative."""
        self.enter(_CALC)
        left = self.unary()
        pushes = 0
        while True:
            t = self.peek()
            if t.kind != "op":
                break
            if t.text in _MULTIPLY and level <= 2:
                function, right_level = _MULTIPLY[t.text], 3
            elif t.text in _ADD and level <= 1:
                function, right_level = _ADD[t.text], 2
            else:
                break
            self.push(_CALC)
            pushes += 1
            self.i += 1
            right = self.calc(right_level)
            left = self.counted(Call(t.pos, function, None, [left, right]), left, right)
        self.leave(_CALC, pushes + 1)
        return left

    def unary(self) -> Expr:
        self.enter(_UNARY)
        t = self.peek()
        result: Expr
        negate = t.kind == "op" and t.text == "-" and self.peek(1).kind not in ("int", "float")
        if t.kind == "op" and (t.text == "!" or negate):
            count = 0
            while self.at(t.text):
                self.i += 1
                count += 1
            operand = self.member()
            if count % 2 == 0:
                result = operand
            else:
                function = "!_" if t.text == "!" else "-_"
                result = self.uncounted(Call(t.pos, function, None, [operand]), operand)
        else:
            result = self.member()
        self.leave(_UNARY)
        return result

    def member(self) -> Expr:
        self.enter(_MEMBER)
        e = self.primary()
        pushes = 0
        while True:
            t = self.peek()
            if t.kind != "op" or t.text not in (".", "["):
                break
            self.push(_MEMBER)
            pushes += 1
            self.i += 1
            if t.text == ".":
                optional = False
                if self.at("?"):
                    self.i += 1
                    optional = True
                name = self.peek()
                field = self.field_name(name)
                self.i += 1
                if name.kind == "ident" and not optional and self.at("("):
                    args = self.call_args()
                    call = self.receiver_call(name.pos, name.text, e, args)
                    e = self.counted(call, e, *args)
                elif optional:
                    e = self.counted(Call(t.pos, "_?._", None, [e, Literal(name.pos, field)]), e)
                else:
                    e = self.counted(Select(t.pos, e, field), e)
            else:
                optional = False
                if self.at("?"):
                    self.i += 1
                    optional = True
                index = self.expr()
                self.take("]")
                function = "_[?_]" if optional else "_[_]"
                e = self.counted(Call(t.pos, function, None, [e, index]), e, index)
        self.leave(_MEMBER, pushes + 1)
        return e

    def field_name(self, t: Token) -> str:
        """A selected or initialized field's name: an identifier, or (cel-go 0.29) one quoted
        in backticks, which may hold ``.``, ``-``, ``/`` and spaces."""
        if t.kind == "ident":
            return t.text
        if t.kind == "escaped":
            if not self.escaped_fields:
                raise self.error(t, "unsupported syntax: '`'")
            return t.text[1:-1]
        raise self.error(t, f"Syntax error: mismatched input {self.shown(t)} expecting IDENTIFIER")

    def call_args(self) -> list[Expr]:
        self.take("(")
        args: list[Expr] = []
        if not self.at(")"):
            self.enter(_EXPR_LIST)
            args.append(self.expr())
            while self.at(","):
                self.i += 1
                args.append(self.expr())
            self.leave(_EXPR_LIST)
        self.take(")")
        return args

    def primary(self) -> Expr:
        self.enter(_PRIMARY)
        result = self._primary()
        self.leave(_PRIMARY)
        return result

    def _primary(self) -> Expr:
        t = self.peek()
        if t.kind == "op":
            if t.text == ".":
                self.i += 1
                name = self.peek()
                if name.kind != "ident":
                    raise self.error(
                        name,
                        f"Syntax error: mismatched input {self.shown(name)} expecting IDENTIFIER",
                    )
                self.i += 1
                return self.ident_or_call(name, leading_dot=True)
            if t.text == "(":
                self.i += 1
                e = self.expr()
                self.take(")")
                return e
            if t.text == "[":
                return self.list_literal()
            if t.text == "{":
                return self.map_literal()
            if t.text == "-" and self.peek(1).kind in ("int", "float"):
                number = self.peek(1)
                self.i += 2
                return self.number(number, negative=True, pos=t.pos)
        if t.kind in ("int", "uint", "float"):
            self.i += 1
            return self.number(t, negative=False, pos=t.pos)
        if t.kind in ("string", "bytes"):
            self.i += 1
            return Literal(t.pos, t.value)
        if t.kind in ("true", "false", "null"):
            self.i += 1
            return Literal(t.pos, {"true": True, "false": False, "null": None}[t.kind])
        if t.kind == "ident":
            self.i += 1
            return self.ident_or_call(t, leading_dot=False)
        raise self.error(t, f"Syntax error: mismatched input {self.shown(t)}")

    def number(self, t: Token, *, negative: bool, pos: int) -> Expr:
        text = t.text
        if t.kind == "float":
            value = float(("-" if negative else "") + text)
            if value in (float("inf"), float("-inf")):
                raise self.error(pos, "invalid double literal")
            return Literal(pos, value)
        if t.kind == "uint":
            body = text[:-1]
            n = int(body[2:], 16) if body.startswith("0x") else int(body, 10)
            if n >= 2**64:
                raise self.error(pos, "invalid uint literal")
            return Literal(pos, Uint(n))
        n = int(text[2:], 16) if text.startswith("0x") else int(text, 10)
        if negative:
            n = -n
        if not -(2**63) <= n < 2**63:
            raise self.error(pos, "invalid int literal")
        return Literal(pos, n)

    def ident_or_call(self, t: Token, *, leading_dot: bool) -> Expr:
        name = ("." if leading_dot else "") + t.text
        if self.at("("):
            if t.text in RESERVED:
                raise self.error(t, f"reserved identifier: {t.text}")
            args = self.call_args()
            return self.uncounted(self.global_call(t.pos, name, args), *args)
        # ids ('.' ids)* '{' is a message name.
        j, parts = self.i, [t.text]
        while (
            self.tokens[j].kind == "op"
            and self.tokens[j].text == "."
            and self.tokens[j + 1].kind == "ident"
        ):
            parts.append(self.tokens[j + 1].text)
            j += 2
        if self.tokens[j].kind == "op" and self.tokens[j].text == "{":
            self.i = j
            return self.message(t.pos, ("." if leading_dot else "") + ".".join(parts))
        if t.text in RESERVED:
            raise self.error(t, f"reserved identifier: {t.text}")
        return Ident(t.pos, name)

    def message(self, pos: int, name: str) -> Expr:
        self.take("{")
        fields: list[tuple[str, Expr, bool]] = []
        if not self.at("}") and not self.at_close("}"):
            self.enter(_FIELD_INITS)
            while True:
                optional = False
                if self.at("?"):
                    self.i += 1
                    optional = True
                field = self.field_name(self.peek())
                self.i += 1
                self.take(":")
                fields.append((field, self.expr(), optional))
                if not self.at(",") or self.at_close("}"):
                    break
                self.i += 1
            self.leave(_FIELD_INITS)
        if self.at(","):
            self.i += 1
        self.take("}")
        return self.uncounted(StructLit(pos, name, fields), *(v for _, v, _ in fields))

    def list_literal(self) -> Expr:
        start = self.take("[")
        elements: list[Expr] = []
        optional: set[int] = set()
        if not self.at("]") and not self.at_close("]"):
            self.enter(_LIST_INIT)
            while True:
                self.enter(_OPT_EXPR)
                if self.at("?"):
                    self.i += 1
                    optional.add(len(elements))
                elements.append(self.expr())
                self.leave(_OPT_EXPR)
                if not self.at(",") or self.at_close("]"):
                    break
                self.i += 1
            self.leave(_LIST_INIT)
        if self.at(","):
            self.i += 1
        self.take("]")
        return self.uncounted(ListLit(start.pos, elements, frozenset(optional)), *elements)

    def map_literal(self) -> Expr:
        start = self.take("{")
        entries: list[tuple[Expr, Expr, bool]] = []
        if not self.at("}") and not self.at_close("}"):
            self.enter(_MAP_INITS)
            while True:
                self.enter(_OPT_EXPR)
                optional = False
                if self.at("?"):
                    self.i += 1
                    optional = True
                key = self.expr()
                self.leave(_OPT_EXPR)
                self.take(":")
                entries.append((key, self.expr(), optional))
                if not self.at(",") or self.at_close("}"):
                    break
                self.i += 1
            self.leave(_MAP_INITS)
        if self.at(","):
            self.i += 1
        self.take("}")
        parts = [part for key, value, _ in entries for part in (key, value)]
        return self.uncounted(MapLit(start.pos, entries), *parts)

    # --- macros ---

    def global_call(self, pos: int, name: str, args: list[Expr]) -> Expr:
        if name == "has" and len(args) == 1:
            arg = args[0]
            if not isinstance(arg, Select):
                raise self.error(arg.pos, "invalid argument to has() macro")
            return Select(arg.pos, arg.operand, arg.field, test_only=True)
        return Call(pos, name, None, args)

    def receiver_call(self, pos: int, name: str, target: Expr, args: list[Expr]) -> Expr:
        expand = _MACROS.get((name, len(args)))
        if expand is not None:
            expanded = expand(self, pos, target, args)
            if expanded is not None:
                return expanded
        return Call(pos, name, target, args)


def _balance(function: str, terms: list[Expr], ops: list[int], lo: int, hi: int) -> Expr:
    """cel-go's balancer: a chain of one logical operator as a balanced tree."""
    mid = (lo + hi + 1) // 2
    left = terms[mid] if mid == lo else _balance(function, terms, ops, lo, mid - 1)
    right = terms[mid + 1] if mid == hi else _balance(function, terms, ops, mid + 1, hi)
    return Call(ops[mid], function, None, [left, right])


def _var(p: _Parser, e: Expr, message: str) -> str:
    if not isinstance(e, Ident):
        raise p.error(e.pos, message)
    return e.name


def _not_accumulator(p: _Parser, name: str, e: Expr) -> None:
    if name in (ACCUMULATOR, LEGACY_ACCUMULATOR):
        raise p.error(e.pos, "iteration variable overwrites accumulator variable")


def _accu(pos: int) -> Ident:
    return Ident(pos, ACCUMULATOR)


def _two_vars(p: _Parser, args: list[Expr]) -> tuple[str, str]:
    v1 = _var(p, args[0], "argument must be a simple name")
    v2 = _var(p, args[1], "argument must be a simple name")
    if v1 == v2:
        raise p.error(args[1].pos, f"duplicate variable name: {v1}")
    _not_accumulator(p, v1, args[0])
    _not_accumulator(p, v2, args[1])
    return v1, v2


def _quantifier(kind: str) -> Callable[..., Expr]:
    def expand(p: _Parser, pos: int, target: Expr, args: list[Expr]) -> Expr:
        if len(args) == 3:
            v1, v2 = _two_vars(p, args)
            var2: str | None = v2
        else:
            v1 = _var(p, args[0], "argument must be a simple name")
            _not_accumulator(p, v1, args[0])
            var2 = None
        body = args[-1]
        init: Expr
        if kind == "all":
            init = Literal(pos, True)
            cond: Expr = Call(pos, "@not_strictly_false", None, [_accu(pos)])
            step: Expr = Call(pos, "_&&_", None, [_accu(pos), body])
            result: Expr = _accu(pos)
        elif kind == "exists":
            init = Literal(pos, False)
            cond = Call(pos, "@not_strictly_false", None, [Call(pos, "!_", None, [_accu(pos)])])
            step = Call(pos, "_||_", None, [_accu(pos), body])
            result = _accu(pos)
        else:
            init = Literal(pos, 0)
            cond = Literal(pos, True)
            step = Call(
                pos,
                "_?_:_",
                None,
                [body, Call(pos, "_+_", None, [_accu(pos), Literal(pos, 1)]), _accu(pos)],
            )
            result = Call(pos, "_==_", None, [_accu(pos), Literal(pos, 1)])
        return Comprehension(pos, target, v1, var2, ACCUMULATOR, init, cond, step, result)

    return expand


def _map(p: _Parser, pos: int, target: Expr, args: list[Expr]) -> Expr:
    v = _var(p, args[0], "argument is not an identifier")
    _not_accumulator(p, v, args[0])
    step: Expr = Call(pos, "_+_", None, [_accu(pos), ListLit(pos, [args[-1]])])
    if len(args) == 3:
        step = Call(pos, "_?_:_", None, [args[1], step, _accu(pos)])
    return Comprehension(
        pos, target, v, None, ACCUMULATOR, ListLit(pos, []), Literal(pos, True), step, _accu(pos)
    )


def _filter(p: _Parser, pos: int, target: Expr, args: list[Expr]) -> Expr:
    v = _var(p, args[0], "argument is not an identifier")
    _not_accumulator(p, v, args[0])
    step: Expr = Call(pos, "_+_", None, [_accu(pos), ListLit(pos, [args[0]])])
    step = Call(pos, "_?_:_", None, [args[1], step, _accu(pos)])
    return Comprehension(
        pos, target, v, None, ACCUMULATOR, ListLit(pos, []), Literal(pos, True), step, _accu(pos)
    )


def _transform(kind: str) -> Callable[..., Expr]:
    def expand(p: _Parser, pos: int, target: Expr, args: list[Expr]) -> Expr:
        v1, v2 = _two_vars(p, args)
        transform = args[-1]
        init: Expr
        step: Expr
        if kind == "list":
            init = ListLit(pos, [])
            step = Call(pos, "_+_", None, [_accu(pos), ListLit(pos, [transform])])
        elif kind == "map":
            init = MapLit(pos, [])
            step = Call(pos, "cel.@mapInsert", None, [_accu(pos), Ident(pos, v1), transform])
        else:
            init = MapLit(pos, [])
            step = Call(pos, "cel.@mapInsert", None, [_accu(pos), transform])
        if len(args) == 4:
            step = Call(pos, "_?_:_", None, [args[2], step, _accu(pos)])
        return Comprehension(
            pos, target, v1, v2, ACCUMULATOR, init, Literal(pos, True), step, _accu(pos)
        )

    return expand


def _bind(p: _Parser, pos: int, target: Expr, args: list[Expr]) -> Expr | None:
    if not (isinstance(target, Ident) and target.name == "cel"):
        return None
    if not isinstance(args[0], Ident):
        raise p.error(args[0].pos, "cel.bind() variable names must be simple identifiers")
    name = args[0].name
    return Comprehension(
        pos,
        ListLit(pos, []),
        UNUSED_ITER_VAR,
        None,
        name,
        args[1],
        Literal(pos, False),
        Ident(pos, name),
        args[2],
    )


_SORT_INPUT = "@__sortBy_input__"


def _sort_by(p: _Parser, pos: int, target: Expr, args: list[Expr]) -> Expr:
    if not isinstance(target, (ListLit, Select, Ident, Comprehension, Call)):
        raise p.error(
            target.pos,
            "sortBy can only be applied to a list, identifier, comprehension, call or select "
            "expression",
        )
    keys = _map(p, pos, Ident(pos, _SORT_INPUT), args)
    call = Call(pos, "@sortByAssociatedKeys", Ident(pos, _SORT_INPUT), [keys])
    return Comprehension(
        pos,
        ListLit(pos, []),
        UNUSED_ITER_VAR,
        None,
        _SORT_INPUT,
        target,
        Literal(pos, False),
        Ident(pos, _SORT_INPUT),
        call,
    )


def _copy(e: Expr) -> Expr:
    """A deep copy of a macro target (cel-go copies it before using it twice)."""
    if isinstance(e, Literal):
        return Literal(e.pos, e.value)
    if isinstance(e, Ident):
        return Ident(e.pos, e.name)
    if isinstance(e, Select):
        return Select(e.pos, _copy(e.operand), e.field, e.test_only)
    if isinstance(e, Call):
        return Call(
            e.pos,
            e.function,
            None if e.target is None else _copy(e.target),
            [_copy(a) for a in e.args],
        )
    if isinstance(e, ListLit):
        return ListLit(e.pos, [_copy(x) for x in e.elements], e.optional)
    if isinstance(e, MapLit):
        return MapLit(e.pos, [(_copy(k), _copy(v), o) for k, v, o in e.entries])
    if isinstance(e, StructLit):
        return StructLit(e.pos, e.name, [(n, _copy(v), o) for n, v, o in e.fields])
    assert isinstance(e, Comprehension)
    return Comprehension(
        e.pos,
        _copy(e.iter_range),
        e.iter_var,
        e.iter_var2,
        e.accu_var,
        _copy(e.accu_init),
        _copy(e.loop_condition),
        _copy(e.loop_step),
        _copy(e.result),
    )


def _opt_map(flat: bool) -> Callable[..., Expr]:
    def expand(p: _Parser, pos: int, target: Expr, args: list[Expr]) -> Expr:
        name = "optFlatMap" if flat else "optMap"
        v = _var(p, args[0], f"{name}() variable name must be a simple identifier")
        bound: Expr = Comprehension(
            pos,
            ListLit(pos, []),
            UNUSED_ITER_VAR,
            None,
            v,
            Call(pos, "value", _copy(target), []),
            Literal(pos, False),
            Ident(pos, v),
            args[1],
        )
        if not flat:
            bound = Call(pos, "optional.of", None, [bound])
        return Call(
            pos,
            "_?_:_",
            None,
            [Call(pos, "hasValue", target, []), bound, Call(pos, "optional.none", None, [])],
        )

    return expand


_MACROS: dict[tuple[str, int], Callable[..., Expr | None]] = {
    ("all", 2): _quantifier("all"),
    ("exists", 2): _quantifier("exists"),
    ("exists_one", 2): _quantifier("exists_one"),
    ("all", 3): _quantifier("all"),
    ("exists", 3): _quantifier("exists"),
    ("exists_one", 3): _quantifier("exists_one"),
    ("existsOne", 3): _quantifier("exists_one"),
    ("map", 2): _map,
    ("map", 3): _map,
    ("filter", 2): _filter,
    ("transformList", 3): _transform("list"),
    ("transformList", 4): _transform("list"),
    ("transformMap", 3): _transform("map"),
    ("transformMap", 4): _transform("map"),
    ("transformMapEntry", 3): _transform("entry"),
    ("transformMapEntry", 4): _transform("entry"),
    ("bind", 3): _bind,
    ("sortBy", 2): _sort_by,
    ("optMap", 2): _opt_map(False),
    ("optFlatMap", 2): _opt_map(True),
}


def parse(source: str, *, escaped_fields: bool = True) -> Expr:
    """Parse (macros expanded); raises InvalidSelectorError on what cel-go rejects (0.26 the
    backtick-quoted field names, unless ``escaped_fields``)."""
    if len(source) > MAX_CODE_POINTS:
        raise InvalidSelectorError(
            f"expression code point size exceeds limit: size: {len(source)}, "
            f"limit {MAX_CODE_POINTS}"
        )
    allow_deep_recursion()
    return _Parser(source, escaped_fields).parse()
