"""CEL types as cel-go's checker sees them, and its rules for assigning one to another.

A :class:`Type` has a kind, a runtime name and parameters, like cel-go's ``types.Type``. The
functions below follow cel-go's checker/types.go: assignability binds type parameters in a
:class:`Mapping`, ``substitute`` resolves them, and ``most_general`` joins two types.
"""

from __future__ import annotations

from typing import Final


class Kind:
    """The kinds of cel-go's type system (only what the DRA environment can produce)."""

    ANY: Final = "any"
    BOOL: Final = "bool"
    BYTES: Final = "bytes"
    DOUBLE: Final = "double"
    DURATION: Final = "duration"
    DYN: Final = "dyn"
    ERROR: Final = "error"
    INT: Final = "int"
    LIST: Final = "list"
    MAP: Final = "map"
    NULL: Final = "null_type"
    OPAQUE: Final = "opaque"
    STRING: Final = "string"
    STRUCT: Final = "struct"
    TIMESTAMP: Final = "timestamp"
    TYPE: Final = "type"
    PARAM: Final = "type_param"
    UINT: Final = "uint"


class Type:
    """Immutable; equal when kind, name and parameters are (``IsExactType``)."""

    __slots__ = ("_hash", "kind", "name", "params")

    def __init__(self, kind: str, name: str, params: tuple[Type, ...] = ()) -> None:
        self.kind = kind
        self.name = name
        self.params = params
        self._hash = hash((kind, name, params))

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Type):
            return NotImplemented
        return (
            self._hash == other._hash
            and self.kind == other.kind
            and self.name == other.name
            and self.params == other.params
        )

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"Type({show(self)})"

    def equivalent(self, other: Type) -> bool:
        """cel-go's IsEquivalentType: equal, except that type parameter names do not count."""
        if self.kind != other.kind or len(self.params) != len(other.params):
            return False
        if self.kind != Kind.PARAM and self.name != other.name:
            return False
        return all(a.equivalent(b) for a, b in zip(self.params, other.params, strict=True))

    def is_dyn(self) -> bool:
        return self.kind in (Kind.DYN, Kind.ANY, Kind.PARAM)


BOOL = Type(Kind.BOOL, "bool")
BYTES = Type(Kind.BYTES, "bytes")
DOUBLE = Type(Kind.DOUBLE, "double")
DURATION = Type(Kind.DURATION, "google.protobuf.Duration")
DYN = Type(Kind.DYN, "dyn")
ANY = Type(Kind.ANY, "google.protobuf.Any")
ERROR = Type(Kind.ERROR, "*error*")
INT = Type(Kind.INT, "int")
NULL = Type(Kind.NULL, "null_type")
STRING = Type(Kind.STRING, "string")
TIMESTAMP = Type(Kind.TIMESTAMP, "google.protobuf.Timestamp")
UINT = Type(Kind.UINT, "uint")
TYPE = Type(Kind.TYPE, "type")

QUANTITY = Type(Kind.STRUCT, "kubernetes.Quantity")
SEMVER = Type(Kind.STRUCT, "kubernetes.Semver")
URL = Type(Kind.STRUCT, "kubernetes.URL")
IP = Type(Kind.OPAQUE, "net.IP")
CIDR = Type(Kind.OPAQUE, "net.CIDR")
NAMED_FORMAT = Type(Kind.STRUCT, "kubernetes.NamedFormat")
DEVICE = Type(Kind.STRUCT, "kubernetes.DRADevice")


def list_of(elem: Type) -> Type:
    return Type(Kind.LIST, "list", (elem,))


def map_of(key: Type, value: Type) -> Type:
    return Type(Kind.MAP, "map", (key, value))


def optional_of(value: Type) -> Type:
    return Type(Kind.OPAQUE, "optional_type", (value,))


def type_of(value: Type) -> Type:
    """The type of a type value (``type(int)``)."""
    return Type(Kind.TYPE, "type", (value,))


def param(name: str) -> Type:
    return Type(Kind.PARAM, name)


def struct(name: str) -> Type:
    return Type(Kind.STRUCT, name)


def is_optional(t: Type) -> bool:
    return t.kind == Kind.OPAQUE and t.name == "optional_type"


def unwrap_optional(t: Type) -> tuple[Type, bool]:
    if is_optional(t):
        return t.params[0], True
    return t, False


def is_dyn(t: Type) -> bool:
    """The checker's notion: dyn or any (a type parameter is not)."""
    return t.kind in (Kind.DYN, Kind.ANY)


def is_dyn_or_error(t: Type) -> bool:
    return t.kind in (Kind.DYN, Kind.ANY, Kind.ERROR)


def show(t: Type) -> str:
    """How cel-go prints a type in messages."""
    if t.kind == Kind.PARAM:
        return t.name
    if t.kind == Kind.NULL:
        return "null"
    if t.kind == Kind.TYPE and not t.params:
        return "type"
    name = t.name
    if t.kind in (Kind.BOOL, Kind.BYTES, Kind.DOUBLE, Kind.INT, Kind.STRING, Kind.UINT):
        name = t.name
    if not t.params:
        return name
    return f"{name}({', '.join(show(p) for p in t.params)})"


# --- assignability, as cel-go's checker has it ------------------------------------------------


class Mapping:
    """Type parameter bindings; copied before a trial so that a failed match leaves no trace.

    ``typed_types``: cel-go 0.33 matches two type values' types by what they are types of
    where a type parameter takes part (``type(list(T))`` is no ``type(bool)``); 0.29 matches
    any two."""

    __slots__ = ("bound", "typed_types")

    def __init__(self, bound: dict[Type, Type] | None = None, typed_types: bool = False) -> None:
        self.bound: dict[Type, Type] = bound if bound is not None else {}
        self.typed_types = typed_types

    def copy(self) -> Mapping:
        return Mapping(dict(self.bound), self.typed_types)

    def find(self, t: Type) -> Type | None:
        return self.bound.get(t)

    def add(self, t: Type, sub: Type) -> None:
        self.bound[t] = sub


def _runtime_assignable(target: Type, source: Type) -> bool:
    """cel-go's Type.IsAssignableType (defaultIsAssignableType)."""
    if target is source or target == source or target.is_dyn():
        return True
    if (
        target.kind != source.kind
        or target.name != source.name
        or len(target.params) != len(source.params)
    ):
        return False
    return all(_runtime_assignable(t, s) for t, s in zip(target.params, source.params, strict=True))


def _equal_or_less_specific(t1: Type, t2: Type, typed: bool = False) -> bool:
    k1, k2 = t1.kind, t2.kind
    if is_dyn(t1) or k1 == Kind.PARAM:
        return True
    if is_dyn(t2) or k2 == Kind.PARAM:
        return False
    if k1 != k2:
        return False
    if k1 == Kind.OPAQUE:
        if t1.name != t2.name or len(t1.params) != len(t2.params):
            return False
        return all(
            _equal_or_less_specific(a, b, typed) for a, b in zip(t1.params, t2.params, strict=True)
        )
    if k1 == Kind.LIST:
        return _equal_or_less_specific(t1.params[0], t2.params[0], typed)
    if k1 == Kind.MAP:
        return _equal_or_less_specific(
            t1.params[0], t2.params[0], typed
        ) and _equal_or_less_specific(t1.params[1], t2.params[1], typed)
    if k1 == Kind.TYPE:
        if not typed:
            return True
        if t1.params and t2.params:
            if len(t1.params) != len(t2.params):
                return False
            return _equal_or_less_specific(t1.params[0], t2.params[0], typed)
        return not t1.params
    return t1 == t2


def most_general(t1: Type, t2: Type, typed: bool = False) -> Type:
    """The less specific of two types (``typed``: cel-go 0.33's rule for type values)."""
    return t1 if _equal_or_less_specific(t1, t2, typed) else t2


def _has_param(t: Type) -> bool:
    """cel-go 0.33's hasTypeParam: a type parameter anywhere in the type."""
    return t.kind == Kind.PARAM or any(_has_param(p) for p in t.params)


def _not_referenced_in(m: Mapping, t: Type, within: Type) -> bool:
    if t == within:
        return False
    if within.kind == Kind.PARAM:
        sub = m.find(within)
        return True if sub is None else _not_referenced_in(m, t, sub)
    if within.kind in (Kind.OPAQUE, Kind.LIST, Kind.MAP, Kind.TYPE):
        return all(_not_referenced_in(m, t, p) for p in within.params)
    return True


def _valid_substitution(m: Mapping, t1: Type, t2: Type) -> tuple[bool, bool]:
    """(valid, t2 had a binding) for binding the type parameter t2 to t1."""
    if t1.kind == t2.kind and t1 == t2:
        return True, True
    sub = m.find(t2)
    if sub is not None:
        if t1.kind == sub.kind and t1 == sub:
            return True, True
        if _assignable(m, t1, sub):
            general = most_general(t1, sub, m.typed_types)
            if _not_referenced_in(m, t2, general):
                m.add(t2, general)
            return True, True
        return False, True
    if _not_referenced_in(m, t2, t1):
        m.add(t2, t1)
        return True, False
    return False, False


def _assignable(m: Mapping, t1: Type, t2: Type) -> bool:
    """cel-go's internalIsAssignable: may a value of t2 be used where t1 is expected."""
    k1, k2 = t1.kind, t2.kind
    if k2 == Kind.PARAM:
        valid, had = _valid_substitution(m, t1, t2)
        if valid:
            return True
        if had:
            return False
    if k1 == Kind.PARAM:
        return _valid_substitution(m, t2, t1)[0]
    if is_dyn_or_error(t1) or is_dyn_or_error(t2):
        return True
    if k1 == Kind.NULL:
        return _assignable_null(t2)
    if k2 == Kind.NULL:
        return _assignable_null(t1)
    if k1 in (
        Kind.BOOL,
        Kind.BYTES,
        Kind.DOUBLE,
        Kind.INT,
        Kind.STRING,
        Kind.UINT,
        Kind.ANY,
        Kind.DURATION,
        Kind.TIMESTAMP,
        Kind.STRUCT,
    ):
        return _runtime_assignable(t2, t1)
    if k1 == Kind.TYPE:
        if k2 != Kind.TYPE:
            return False
        if not m.typed_types:
            return True
        if not t1.params or not t2.params:
            return not t2.params
        if len(t1.params) != len(t2.params):
            return False
        of1, of2 = t1.params[0], t2.params[0]
        if _has_param(of1) or _has_param(of2):
            return _assignable(m, of1, of2)
        return True  # concrete types are coassignable: type(1) == type("a")
    if k1 in (Kind.OPAQUE, Kind.LIST, Kind.MAP):
        return (
            k1 == k2
            and t1.name == t2.name
            and _assignable_list(m, list(t1.params), list(t2.params))
        )
    return False


def _assignable_list(m: Mapping, l1: list[Type], l2: list[Type]) -> bool:
    if len(l1) != len(l2):
        return False
    return all(_assignable(m, a, b) for a, b in zip(l1, l2, strict=True))


def _assignable_null(t: Type) -> bool:
    if t.kind in (Kind.OPAQUE, Kind.STRUCT, Kind.ANY, Kind.DURATION, Kind.TIMESTAMP):
        return True
    return _runtime_assignable(t, NULL)


def assignable(m: Mapping, t1: Type, t2: Type) -> Mapping | None:
    """The bindings after assigning a t2 to a t1, or None (``m`` is left as it was)."""
    trial = m.copy()
    return trial if _assignable(trial, t1, t2) else None


def assignable_list(m: Mapping, l1: list[Type], l2: list[Type]) -> Mapping | None:
    trial = m.copy()
    return trial if _assignable_list(trial, l1, l2) else None


def substitute(m: Mapping, t: Type, param_to_dyn: bool) -> Type:
    sub = m.find(t)
    if sub is not None:
        return substitute(m, sub, param_to_dyn)
    kind = t.kind
    if param_to_dyn and kind == Kind.PARAM:
        return DYN
    if kind in (Kind.OPAQUE, Kind.LIST, Kind.MAP) or (kind == Kind.TYPE and t.params):
        return Type(kind, t.name, tuple(substitute(m, p, param_to_dyn) for p in t.params))
    return t
