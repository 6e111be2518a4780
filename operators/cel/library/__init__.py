"""The functions of the DRA CEL environment: Kubernetes' base libraries on cel-python values.

Kubernetes 1.36 builds DRA selectors on its base environment (apiserver pkg/cel/environment,
base.go): the CEL standard library, ext.Strings v2, ext.Sets, optional types, and its own URLs,
Regex, Lists, Authz, Quantity, IP, CIDR, Format, Semver v1 and Image libraries, plus
``cel.bind`` and (DRAListTypeAttributes) ``includes()``. Each module here mirrors one of them;
what a device selector cannot use (authorizer, image references, named formats, optional
types, two-variable comprehensions) has no module and is rejected at compile time by
``compiler.UNSUPPORTED``.

Every function is a plain callable taking and returning cel-python values, declared once with
``@function``/``@method`` (see _registry.py); importing this package fills the tables below.
"""

from __future__ import annotations

from . import cidr, dra, ip, lists, quantity, regex, semver, sets, standard, strings, urls
from ._base import FALSE, TRUE, cel_bool, cel_int, type_name
from ._registry import REGISTRY, Declaration, Registry, function, method
from .regex import compile_regex
from .standard import OPERATORS, logical_and, logical_or

# Global functions, ``name(args)``, including namespaced ones (``sets.contains``), and methods,
# ``receiver.name(args)`` with the receiver passed first; the argument counts each accepts
# (a method's receiver not counted); names whose result is certainly not a bool; constructors
# the transpiler evaluates once when their argument is a literal.
GLOBAL_FUNCTIONS = REGISTRY.functions
METHODS = REGISTRY.methods
ARITY = REGISTRY.arity
METHOD_ARITY = REGISTRY.method_arity
NON_BOOL_RESULTS = REGISTRY.non_bool
FOLDABLE = REGISTRY.foldable

# Identifiers that name namespaces: those of the functions above, ``cel`` (cel.bind, a macro)
# and those of the unsupported libraries, so none of them can be taken for a variable.
NAMESPACES = frozenset(
    {name.partition(".")[0] for name in GLOBAL_FUNCTIONS if "." in name}
    | {"cel", "optional", "math", "format"}
)

__all__ = [
    "ARITY",
    "FALSE",
    "FOLDABLE",
    "GLOBAL_FUNCTIONS",
    "METHODS",
    "METHOD_ARITY",
    "NAMESPACES",
    "NON_BOOL_RESULTS",
    "OPERATORS",
    "REGISTRY",
    "TRUE",
    "Declaration",
    "Registry",
    "cel_bool",
    "cel_int",
    "cidr",
    "compile_regex",
    "dra",
    "function",
    "ip",
    "lists",
    "logical_and",
    "logical_or",
    "method",
    "quantity",
    "regex",
    "semver",
    "sets",
    "standard",
    "strings",
    "type_name",
    "urls",
]
