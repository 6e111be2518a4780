# ruff: noqa: E501  (expression templates read best on one line each)
"""Hypothesis generators of device selectors and devices for the differential CEL tests.

Expressions are built by the type they should have (so most of them compile and exercise
evaluation), with a share of deliberate type mixing, errors on one side of ``&&``/``||``,
syntax damage, long chains and deep nesting (so compile verdicts are exercised too). Devices
are resource.k8s.io/v1 Device JSON with attributes in the driver's domain and another one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

J = dict[str, Any]
DRIVER = "d.example.com"
OTHER = "o.example.com"
NAMES = ("a", "b", "c", "n", "s", "v", "l", "q")

# --- devices -----------------------------------------------------------------------------------

_VERSIONS = ("1.0.0", "1.2.3-rc.1", "2.0.0+b", "0.0.1", "10.20.30", "1.2.3-alpha")
_BAD_VERSIONS = ("99999999999999999999.0.0", "1.2", "01.0.0")
_STRINGS = ("", "a", "gpu", "A100", "10.1.2.3", "10.0.0.0/8", "é", "x y", "1", "true", "8Gi")
_INTS = (0, 1, -1, 2, 7, 40, 2**63 - 1, -(2**63), 1000)
_QUANTITIES = ("0", "1", "8Gi", "40Gi", "1000m", "1.5", "8Ei", "100", "9223372036854775807", "2k")
# Quantities Go keeps in the decimal form (inf.Dec): what add()/sub() share in 1.36.
_DECIMAL_QUANTITIES = ("1.5Gi", "100000000000000000000", "0.5Ki", "1e-10")


@st.composite
def attribute(draw: st.DrawFn) -> J:
    kind = draw(st.sampled_from(["int", "bool", "string", "version", "ints", "bools", "strings"]))
    if kind == "int":
        return {"int": draw(st.sampled_from(_INTS))}
    if kind == "bool":
        return {"bool": draw(st.booleans())}
    if kind == "string":
        return {"string": draw(st.sampled_from(_STRINGS))}
    if kind == "version":
        bad = draw(st.integers(0, 30)) == 0
        return {"version": draw(st.sampled_from(_BAD_VERSIONS if bad else _VERSIONS))}
    if kind == "ints":
        return {"ints": draw(st.lists(st.sampled_from(_INTS[:6]), max_size=3))}
    if kind == "bools":
        return {"bools": draw(st.lists(st.booleans(), max_size=2))}
    return {"strings": draw(st.lists(st.sampled_from(_STRINGS[:5]), max_size=3))}


@st.composite
def device(draw: st.DrawFn, index: int = 0) -> J:
    attributes: J = {}
    for name in draw(st.lists(st.sampled_from(NAMES), max_size=5, unique=True)):
        qualified = f"{OTHER}/{name}" if draw(st.integers(0, 4)) == 0 else name
        attributes[qualified] = draw(attribute())
    capacity: J = {}
    for name in draw(st.lists(st.sampled_from(("mem", "cores")), max_size=2, unique=True)):
        capacity[name] = {"value": draw(st.sampled_from(_QUANTITIES))}
    d: J = {"name": f"dev-{index}", "attributes": attributes, "capacity": capacity}
    choice = draw(st.integers(0, 2))
    if choice:
        d["allowMultipleAllocations"] = choice == 1
    return d


# --- expressions -------------------------------------------------------------------------------

Gen = Callable[[st.DrawFn, int], str]


def _attr(draw: st.DrawFn) -> str:
    domain = draw(st.sampled_from([DRIVER, DRIVER, OTHER, "nope.example.com"]))
    name = draw(st.sampled_from(NAMES))
    style = draw(st.integers(0, 3))
    if style == 0:
        return f'device.attributes["{domain}"]["{name}"]'
    return f'device.attributes["{domain}"].{name}'


def _int_lit(draw: st.DrawFn) -> str:
    return str(
        draw(
            st.sampled_from(
                [0, 1, 2, 3, -1, 7, 10, 100, 2**63 - 1, -(2**63), 2**62, 0x10, -7, 1000]
            )
        )
    )


def _double_lit(draw: st.DrawFn) -> str:
    return draw(
        st.sampled_from(
            [
                "0.0",
                "1.0",
                "-1.0",
                "2.5",
                "1e3",
                "1e308",
                "-0.0",
                "0.5",
                "3.0",
                "1e-3",
                ".5",
                "9.9e18",
            ]
        )
    )


def _string_lit(draw: st.DrawFn) -> str:
    return draw(
        st.sampled_from(
            [
                '"a"',
                '""',
                '"gpu"',
                "'A100'",
                '"é☃"',
                '"\\x1c x \\x1d"',
                '" t "',
                '"1"',
                '"-12"',
                '"1_000"',
                '" 12"',
                '"1e400"',
                '"true"',
                '"T"',
                '"f"',
                '"2.0"',
                "r'\\d+'",
                "'''a\nb'''",
                '"%s"',
                '"%d-%s"',
                '"%e"',
                '"%.2f|%.3e"',
                '"%x %X %o %b"',
                '"%.0f"',
                '"8Gi"',
                '"1.2.3"',
                '"v1.2"',
                '"10.0.0.1"',
                '"10.0.0.0/8"',
                '"https://x.io:8/p?q=1"',
                '"NaN"',
                '"-Inf"',
                '"0x10"',
                '"١٢"',
            ]
        )
    )


# Pieces of patterns where Go's regexp and RE2 part (operators/cel/goregexp.py), among plain
# ones, and texts on the edges of their classes and case folding (Kelvin sign, long s, U+0345,
# an unassigned and a private-use code point).
_REGEX_PIECES = (
    *("a", "k", "s", "(", ")", "(?:", "(?i)", "(?-i)", "(?i:", "(?P<n>", "(?<é>", "|", "*"),
    *("+", "?", "{2}", "[", "]", "[^", "^", "$", "-", "\\d", "\\w", "\\s", ".", "\\b"),
    *("\\pL", "\\pl", "\\p{Greek}", "\\p{greek}", "\\p{LC}", "\\P{LC}", "\\p{ASCII}"),
    *("\\P{ASCII}", "\\p{C}", "\\P{C}", "\\p{Cn}", "\\p{Assigned}", "\\P{Lu}"),
    *("\\p{Letter}", "\\p{Old_Italic}", "\\p{^Lt}", "\\p{Any}", "\\C", "\\Q", "\\E"),
    *("[:alpha:]", "\\x{41}", "\\z", "\u212a", "\u017f"),
)
_REGEX_TEXTS = (
    "",
    "k",
    "K",
    "\u212a",
    "s",
    "\u017f",
    "\u03b9",
    "\u0345",
    "a1",
    "\u00e9",
    "\u0378",
    "\ue000",
    "\u00ad",
    "x y",
)


def _quoted(text: str) -> str:
    """A CEL string literal of ``text``."""
    escaped = "".join(
        "\\\\" if c == "\\" else '\\"' if c == '"' else c if " " <= c <= "~" else f"\\U{ord(c):08x}"
        for c in text
    )
    return f'"{escaped}"'


def _regex_lit(draw: st.DrawFn) -> str:
    pieces = draw(st.lists(st.sampled_from(_REGEX_PIECES), min_size=1, max_size=6))
    return _quoted("".join(pieces))


def gen_int(draw: st.DrawFn, depth: int) -> str:
    if depth <= 0:
        return _int_lit(draw)
    c = draw(st.integers(0, 16))
    if c <= 3:
        return _int_lit(draw)
    if c == 4:
        return _attr(draw)
    if c == 5:
        op = draw(st.sampled_from(["+", "-", "*", "/", "%"]))
        return f"({gen_int(draw, depth - 1)} {op} {gen_int(draw, depth - 1)})"
    if c == 6:
        return f"-{gen_int(draw, depth - 1)}"
    if c == 7:
        return f"{gen_string(draw, depth - 1)}.size()"
    if c == 8:
        return f"int({draw(st.sampled_from([gen_string, gen_double, gen_uint, gen_int]))(draw, depth - 1)})"
    if c == 9:
        return f"{gen_list(draw, depth - 1)}.size()"
    if c == 10:
        fn = draw(st.sampled_from(["sum", "min", "max"]))
        return f"{gen_list(draw, depth - 1)}.{fn}()"
    if c == 11:
        return f"{gen_string(draw, depth - 1)}.indexOf({gen_string(draw, depth - 1)})"
    if c == 12:
        method = draw(st.sampled_from(["asInteger()", "sign()", 'compareTo(quantity("1"))']))
        return f"quantity({draw(st.sampled_from(_QUANTITIES))!r}).{method}"
    if c == 13:
        return f"sign(quantity({draw(st.sampled_from(_QUANTITIES))!r}))"
    if c == 14:
        return f"({gen_bool(draw, depth - 1)} ? {gen_int(draw, depth - 1)} : {gen_int(draw, depth - 1)})"
    if c == 15:
        return f"{gen_list(draw, depth - 1)}[{gen_int(draw, 0)}]"
    return f"cel.bind(x, {gen_int(draw, depth - 1)}, x {draw(st.sampled_from(['+', '*']))} {gen_int(draw, 0)})"


def gen_uint(draw: st.DrawFn, depth: int) -> str:
    c = draw(st.integers(0, 4))
    if c <= 1 or depth <= 0:
        return draw(st.sampled_from(["0u", "1u", "2u", "18446744073709551615u", "7u"]))
    if c == 2:
        op = draw(st.sampled_from(["+", "-", "*", "/", "%"]))
        return f"({gen_uint(draw, depth - 1)} {op} {gen_uint(draw, depth - 1)})"
    return f"uint({draw(st.sampled_from([gen_int, gen_double, gen_string]))(draw, depth - 1)})"


def gen_double(draw: st.DrawFn, depth: int) -> str:
    c = draw(st.integers(0, 6))
    if c <= 1 or depth <= 0:
        return _double_lit(draw)
    if c == 2:
        op = draw(st.sampled_from(["+", "-", "*", "/"]))
        return f"({gen_double(draw, depth - 1)} {op} {gen_double(draw, depth - 1)})"
    if c == 3:
        return f"double({draw(st.sampled_from([gen_int, gen_string, gen_uint]))(draw, depth - 1)})"
    if c == 4:
        return f"quantity({draw(st.sampled_from(_QUANTITIES))!r}).asApproximateFloat()"
    if c == 5:
        return f"-{gen_double(draw, depth - 1)}"
    return _attr(draw)


def gen_string(draw: st.DrawFn, depth: int) -> str:
    if depth <= 0:
        return _string_lit(draw)
    c = draw(st.integers(0, 16))
    if c <= 3:
        return _string_lit(draw)
    if c == 4:
        return _attr(draw)
    if c == 5:
        return f"({gen_string(draw, depth - 1)} + {gen_string(draw, depth - 1)})"
    if c == 6:
        conv = draw(st.sampled_from([gen_int, gen_double, gen_uint, gen_bool, gen_bytes]))
        return f"string({conv(draw, depth - 1)})"
    if c == 7:
        fn = draw(st.sampled_from(["lowerAscii()", "upperAscii()", "trim()", "reverse()"]))
        return f"{gen_string(draw, depth - 1)}.{fn}"
    if c == 8:
        return f"{gen_string(draw, depth - 1)}.substring({gen_int(draw, 0)}, {gen_int(draw, 0)})"
    if c == 9:
        return f"{gen_string(draw, depth - 1)}.charAt({gen_int(draw, 0)})"
    if c == 10:
        return (
            f"{gen_string(draw, depth - 1)}.replace({gen_string(draw, 0)}, {gen_string(draw, 0)})"
        )
    if c == 11:
        return f"{gen_list(draw, depth - 1)}.join({gen_string(draw, 0)})"
    if c == 12:
        return f"{gen_string(draw, depth - 1)}.format({gen_list(draw, depth - 1)})"
    if c == 13:
        return f"strings.quote({gen_string(draw, depth - 1)})"
    if c == 14:
        return f'{gen_string(draw, depth - 1)}.find("[a-z]+")'
    if c == 15:
        return f"ip({gen_string(draw, 0)}).family() == 4 ? 'v4' : 'v6'"
    return f"device.attributes[{draw(st.sampled_from([repr(DRIVER), repr(OTHER)]))}].?{draw(st.sampled_from(NAMES))}.orValue({gen_string(draw, 0)})"


def gen_bytes(draw: st.DrawFn, depth: int) -> str:
    c = draw(st.integers(0, 3))
    if c <= 1 or depth <= 0:
        return draw(st.sampled_from(['b"ab"', "b''", 'b"\\xff"', "b'é'"]))
    if c == 2:
        return f"bytes({gen_string(draw, depth - 1)})"
    return f"({gen_bytes(draw, depth - 1)} + {gen_bytes(draw, depth - 1)})"


def gen_list(draw: st.DrawFn, depth: int) -> str:
    if depth <= 0:
        return draw(st.sampled_from(["[]", "[1, 2, 3]", "['a', 'b']", "[1.0, 2.5]", "[true]"]))
    c = draw(st.integers(0, 14))
    elem = draw(st.sampled_from([gen_int, gen_string, gen_double, gen_bool, gen_uint]))
    if c <= 2:
        n = draw(st.integers(0, 4))
        return "[" + ", ".join(elem(draw, depth - 1) for _ in range(n)) + "]"
    if c == 3:
        return _attr(draw)
    if c == 4:
        return f"{gen_string(draw, depth - 1)}.split({gen_string(draw, 0)})"
    if c == 5:
        return f"{gen_list(draw, depth - 1)}.map(e, {gen_int(draw, depth - 1).replace('device', 'device')} + 0)"
    if c == 6:
        return f"{gen_list(draw, depth - 1)}.filter(e, {gen_bool(draw, depth - 1)})"
    if c == 7:
        fn = draw(
            st.sampled_from(["distinct()", "sort()", "reverse()", "flatten()", "slice(0, 1)"])
        )
        return f"{gen_list(draw, depth - 1)}.{fn}"
    if c == 8:
        return f"lists.range({draw(st.integers(-1, 5))})"
    if c == 9:
        return f"({gen_list(draw, depth - 1)} + {gen_list(draw, depth - 1)})"
    if c == 10:
        return f"[{gen_list(draw, depth - 1)}, {gen_list(draw, depth - 1)}]"
    if c == 11:
        return f"{gen_list(draw, depth - 1)}.sortBy(e, -e)"
    if c == 12:
        return f"{gen_string(draw, depth - 1)}.findAll('[a-z]')"
    if c == 13:
        return f"{gen_map(draw, depth - 1)}.map(k, k)"
    return "[1, 2, 3].transformList(i, v, v * i)"


def gen_map(draw: st.DrawFn, depth: int) -> str:
    c = draw(st.integers(0, 3))
    if c == 0 or depth <= 0:
        return draw(
            st.sampled_from(
                ["{}", "{'a': 1}", "{1: 'x', 2: 'y'}", "{true: 1}", "{'a': 1, 'b': 2.0}"]
            )
        )
    if c == 1:
        return (
            f"device.attributes[{draw(st.sampled_from([repr(DRIVER), repr(OTHER), repr('nope')]))}]"
        )
    if c == 2:
        k = draw(st.sampled_from([gen_int, gen_string, gen_bool, gen_uint]))
        n = draw(st.integers(0, 3))
        return "{" + ", ".join(f"{k(draw, 0)}: {gen_int(draw, depth - 1)}" for _ in range(n)) + "}"
    return "device.capacity"


def gen_quantity(draw: st.DrawFn, depth: int) -> str:
    c = draw(st.integers(0, 3))
    if c <= 1 or depth <= 0:
        return f"quantity({draw(st.sampled_from(_QUANTITIES))!r})"
    if c == 2:
        return f'device.capacity["{draw(st.sampled_from([DRIVER, OTHER]))}"].{draw(st.sampled_from(["mem", "cores"]))}'
    fn = draw(st.sampled_from(["add", "sub"]))
    return f"{gen_quantity(draw, depth - 1)}.{fn}({draw(st.sampled_from([gen_quantity, gen_int]))(draw, depth - 1)})"


def gen_semver(draw: st.DrawFn, depth: int) -> str:
    if draw(st.booleans()) or depth <= 0:
        text = draw(
            st.sampled_from([*_VERSIONS, "v1.2", "1.02.3", "99999999999999999999.0.0", "1"])
        )
        extra = draw(st.sampled_from(["", ", true", ", false"]))
        return f"semver({text!r}{extra})"
    return _attr(draw)


def gen_bool(draw: st.DrawFn, depth: int) -> str:
    if depth <= 0:
        return draw(st.sampled_from(["true", "false", f"has({_attr(draw)})"]))
    c = draw(st.integers(0, 42))
    any_gen = draw(st.sampled_from(_SCALARS))
    if c <= 1:
        return draw(st.sampled_from(["true", "false"]))
    if c <= 4:
        op = draw(st.sampled_from(["==", "!=", "<", "<=", ">", ">="]))
        left = any_gen(draw, depth - 1)
        # Mostly the same type on both sides, sometimes another.
        right_gen = any_gen if draw(st.integers(0, 3)) else draw(st.sampled_from(_SCALARS))
        return f"{left} {op} {right_gen(draw, depth - 1)}"
    if c == 5:
        return f"{_attr(draw)} == {any_gen(draw, depth - 1)}"
    if c <= 7:
        op = draw(st.sampled_from(["&&", "||"]))
        return f"({gen_bool(draw, depth - 1)} {op} {gen_bool(draw, depth - 1)})"
    if c == 8:
        return f"!{gen_bool(draw, depth - 1)}"
    if c == 9:
        return f"has({_attr(draw)})"
    if c == 10:
        return f"has(device.attributes.{draw(st.sampled_from(['nope', 'x']))})"
    if c == 11:
        return f"{any_gen(draw, depth - 1)} in {gen_list(draw, depth - 1)}"
    if c == 12:
        return f"{gen_string(draw, depth - 1)} in {gen_map(draw, depth - 1)}"
    if c == 13:
        fn = draw(st.sampled_from(["startsWith", "endsWith", "contains", "matches"]))
        if fn == "matches" and draw(st.booleans()):
            return f"{_quoted(draw(st.sampled_from(_REGEX_TEXTS)))}.matches({_regex_lit(draw)})"
        return f"{gen_string(draw, depth - 1)}.{fn}({gen_string(draw, 0)})"
    if c == 14:
        fn = draw(st.sampled_from(["all", "exists", "exists_one", "existsOne"]))
        return f"{gen_list(draw, depth - 1)}.{fn}(e, {gen_bool(draw, depth - 1)} || e == e)"
    if c == 15:
        fn = draw(st.sampled_from(["isGreaterThan", "isLessThan"]))
        return f"{gen_semver(draw, depth - 1)}.{fn}({gen_semver(draw, depth - 1)})"
    if c == 16:
        method = draw(
            st.sampled_from(
                ["isInteger()", 'isLessThan(quantity("1Gi"))', 'isGreaterThan(quantity("1"))']
            )
        )
        return f"{gen_quantity(draw, depth - 1)}.{method}"
    if c == 17:
        return f"{_attr(draw)}.includes({any_gen(draw, depth - 1)})"
    if c == 18:
        fn = draw(st.sampled_from(["contains", "equivalent", "intersects"]))
        return f"sets.{fn}({gen_list(draw, depth - 1)}, {gen_list(draw, depth - 1)})"
    if c == 19:
        return f"{gen_list(draw, depth - 1)}.isSorted()"
    if c == 20:
        return f"cel.bind(x, {any_gen(draw, depth - 1)}, {gen_bool(draw, depth - 1)})"
    if c == 21:
        return f"({gen_bool(draw, depth - 1)} ? {gen_bool(draw, depth - 1)} : {any_gen(draw, depth - 1)} == {any_gen(draw, depth - 1)})"
    if c == 22:
        err = draw(
            st.sampled_from(["1 / 0 == 1", "[1][5] == 1", "int('x') == 1", _attr(draw) + " == 1"])
        )
        op = draw(st.sampled_from(["&&", "||"]))
        return (
            f"({err} {op} {gen_bool(draw, depth - 1)})"
            if draw(st.booleans())
            else f"({gen_bool(draw, depth - 1)} {op} {err})"
        )
    if c == 23:
        fn = draw(st.sampled_from(["isIP", "isCIDR", "isURL", "isSemver", "isQuantity"]))
        return f"{fn}({gen_string(draw, depth - 1)})"
    if c == 24:
        return f"cidr({gen_string(draw, 0)}).containsIP({gen_string(draw, 0)})"
    if c == 25:
        return f"device.driver {draw(st.sampled_from(['==', '!=', '>']))} {gen_string(draw, 0)}"
    if c == 26:
        return f"device.allowMultipleAllocations {draw(st.sampled_from(['==', '!=']))} {gen_bool(draw, 0)}"
    if c == 27:
        return f"bool({gen_string(draw, depth - 1)})"
    if c == 28:
        return (
            f"{gen_list(draw, depth - 1)}.{draw(st.sampled_from(['first()', 'last()']))}.hasValue()"
        )
    if c == 29:
        return f"device.attributes.exists(d, device.attributes[d].exists(k, {gen_bool(draw, depth - 1)}))"
    if c == 30:
        return f"{gen_map(draw, depth - 1)}.all(k, v, {gen_bool(draw, depth - 1)})"
    if c == 31:
        return f"{gen_bytes(draw, depth - 1)} {draw(st.sampled_from(['==', '<', '>=']))} {gen_bytes(draw, depth - 1)}"
    if c == 32:
        return f"dyn({any_gen(draw, depth - 1)}) {draw(st.sampled_from(['==', '!=', '<']))} {draw(st.sampled_from(_SCALARS))(draw, depth - 1)}"
    if c == 33:
        return f"{gen_list(draw, depth - 1)}.indexOf({any_gen(draw, 0)}) >= 0"
    if c == 35:
        return gen_time(draw, depth - 1)
    if c == 36:
        return gen_comprehension(draw, depth - 1)
    if c == 37:
        return gen_optional(draw, depth - 1)
    if c == 38:
        return gen_typed(draw, depth - 1)
    if c == 39:
        return gen_network(draw, depth - 1)
    if c == 40:
        return f"dyn({any_gen(draw, depth - 1)}) in {gen_map(draw, depth - 1)}"
    if c in (41, 42):
        return gen_minor_changes(draw, depth - 1)
    return f"{gen_string(draw, depth - 1)}.lastIndexOf({gen_string(draw, 0)}, {gen_int(draw, 0)}) == -1"


_DURATIONS = (
    "'1h'",
    "'-1.5s'",
    "'0'",
    "'1h2m3s4ms5us6ns'",
    "'2562047h'",
    "'1d'",
    "'x'",
    "'9999999999h'",
)
_TIMESTAMPS = (
    "'2024-01-01T00:00:00Z'",
    "'1970-01-01T00:00:00.5+01:00'",
    "'0001-01-01T00:00:00Z'",
    "'9999-12-31T23:59:59.999999999Z'",
    "'2024-02-30T00:00:00Z'",
    "'2024-01-01'",
)


def gen_time(draw: st.DrawFn, depth: int) -> str:
    """duration and timestamp: literals, arithmetic, comparisons, getters, conversions."""
    d = f"duration({draw(st.sampled_from(_DURATIONS))})"
    d2 = f"duration({draw(st.sampled_from(_DURATIONS))})"
    ts = f"timestamp({draw(st.sampled_from(_TIMESTAMPS))})"
    ts2 = f"timestamp({draw(st.sampled_from([*_TIMESTAMPS, str(draw(st.sampled_from(_INTS)))]))})"
    op = draw(st.sampled_from(["==", "!=", "<", "<=", ">", ">="]))
    getter = draw(
        st.sampled_from(
            [
                "getFullYear()",
                "getMonth()",
                "getDayOfYear()",
                "getDate()",
                "getDayOfMonth()",
                "getDayOfWeek()",
                "getHours()",
                "getMinutes()",
                "getSeconds()",
                "getMilliseconds()",
                "getHours('America/New_York')",
                "getDate('+05:30')",
                "getMinutes('bad/zone')",
            ]
        )
    )
    return draw(
        st.sampled_from(
            [
                f"{d} {op} {d2}",
                f"{ts} {op} {ts2}",
                f"{ts} + {d} {op} {ts2}",
                f"{ts} - {ts2} {op} {d}",
                f"{d} + {d2} {op} {d}",
                f"-{d} {op} {d2}",
                f"{ts}.{getter} {op} {gen_int(draw, 0)}",
                f"{d}.{draw(st.sampled_from(['getHours()', 'getMinutes()', 'getSeconds()', 'getMilliseconds()']))} {op} {gen_int(draw, 0)}",
                f"string({d}) {op} {gen_string(draw, 0)}",
                f"string({ts}) {op} {gen_string(draw, 0)}",
                f"int({ts}) {op} {gen_int(draw, 0)}",
                f"duration(string({d})) == {d}",
                f"timestamp(string({ts})) == {ts}",
                f"{ts} - {d} {op} {ts2} - {d2}",
            ]
        )
    )


def gen_comprehension(draw: st.DrawFn, depth: int) -> str:
    """Two-variable comprehensions, the three-argument map, and binding the name ``device``."""
    lst = gen_list(draw, depth)
    mp = gen_map(draw, depth)
    pred = gen_bool(draw, max(0, depth - 1))
    fn = draw(st.sampled_from(["all", "exists", "existsOne", "exists_one"]))
    return draw(
        st.sampled_from(
            [
                f"{lst}.{fn}(i, v, {pred} || i == 0)",
                f"{mp}.{fn}(k, v, {pred} && k == k)",
                f"{lst}.map(x, {pred}, x) == {lst}",
                f"{lst}.map(x, x == x, [x]).size() > 0",
                f"{lst}.transformList(i, v, i > 0, [v]) == []",
                f"{lst}.transformMap(i, v, v).size() >= 0",
                f"{mp}.transformMap(k, v, [v]) == {{}}",
                f"{mp}.transformMapEntry(k, v, {{v: k}}).size() >= 0",
                f"{lst}.transformMapEntry(i, v, {{v: i}}).size() >= 0",
                f"cel.bind(device, {gen_int(draw, depth)}, device > 0)",
                f"cel.bind(device, device.attributes, {pred})",
                f"{lst}.all(device, {pred} || device == device)",
                f"{lst}.exists(device, v, v == device)",
                f"cel.bind(x, {lst}, cel.bind(y, x.size(), x.all(e, y >= 0)))",
                f"[1, 2, 3].all(x, x > 0) && {pred}",
            ]
        )
    )


# Field names a backtick may quote (cel-go's ESC_IDENTIFIER), the device's and others.
_ESCAPED_FIELDS = (*NAMES, "a-b", "x.y", "a b", "p/q", "_", "1", "in", "é")


def _escaped(draw: st.DrawFn) -> str:
    return f"`{draw(st.sampled_from(_ESCAPED_FIELDS))}`"


def gen_minor_changes(draw: st.DrawFn, depth: int) -> str:
    """Where Kubernetes 1.37's CEL (cel-go 0.29, its libraries) parts from 1.36's: backtick
    field names, ``.name`` past a local of that name, a local's field before a qualified name,
    the Lists library's includes(), quantities sharing their decimal, the empty string's index
    from an offset, lists.range, duration(int), or/orValue of a non-optional, the prices of
    startsWith/endsWith and of the global matches()."""
    x = draw(st.sampled_from(_SCALARS))(draw, depth)
    domain = draw(st.sampled_from([DRIVER, OTHER, "nope.example.com"]))
    field = _escaped(draw)
    path = draw(
        st.sampled_from(
            [
                f".attributes[{domain!r}].{field}",
                f".attributes.`{domain}`.{field}",
                f".`attributes`[{domain!r}].{draw(st.sampled_from(NAMES))}",
                f".capacity[{domain!r}].{draw(st.sampled_from(['mem', 'cores', '`mem`']))}",
                ".driver",
                ".`driver`",
                f".attributes[{domain!r}].?{field}",
                f".attributes[device]{draw(st.sampled_from(['', '.a', '[?0]']))}",
                f".attributes[{domain!r}][{draw(st.sampled_from(['device', 'k', '0', repr('a')]))}]",
                f".attributes[{domain!r}].l[{draw(st.sampled_from(['0', 'device', 'k']))}]",
            ]
        )
    )
    quantity = repr(draw(st.sampled_from(_DECIMAL_QUANTITIES + _QUANTITIES)))
    shared = draw(
        st.sampled_from(
            [
                f"quantity({quantity})",
                f"device.capacity[{DRIVER!r}].{draw(st.sampled_from(['mem', 'cores']))}",
            ]
        )
    )
    op = draw(st.sampled_from(["add", "sub"]))
    addend = draw(st.sampled_from(["1", "quantity('1')", "q"]))
    n = draw(st.sampled_from([0, 3, 47, 48, 49, 60]))
    items = "[" + ", ".join(str(i) for i in range(n)) + "]"
    text = draw(st.sampled_from(["''", "'abc'", "'é☃x'", "'abcdefghijklmnopqrstuvwxyz'"]))
    offset = draw(st.sampled_from(["-1", "0", "2", "3", "4", "100", "-9223372036854775808"]))
    return draw(
        st.sampled_from(
            [
                f"has(device{path})",
                f"device{path} == {x}",
                f"{{'a b': 1, 'x.y': 2, 'a-b': 3, 'p/q': 4}}.{field} == {x}",
                f"has({{'a b': 1, 'a-b': 2}}.{field})",
                f"{{'a b': 1, 'a-b': 2}}.?{field}.orValue({x}) == {x}",
                f"cel.bind(device, {x}, .device{path} == {x})",
                f"cel.bind(device, {domain!r}, has(.device{path}))",
                f"[{x}].all(device, .device{path} != device)",
                f"[{domain!r}].exists(k, cel.bind(device, k, .device{path} == {x}))",
                f"[{x}].exists(device, .device == device)",
                f"cel.bind(device, {x}, .device.driver == {gen_string(draw, 0)} || device == {x})",
                f"[{{'protobuf': {{'Duration': {x}}}}}].all(google, google.protobuf.Duration == {x})",
                "cel.bind(google, {'protobuf': {'Duration': 1}}, .google.protobuf.Duration == type(duration('1s')))",
                f"{items}.includes({gen_int(draw, 0)})",
                f"{text}.includes({gen_string(draw, 0)})",
                f"dyn({x}).includes({x})",
                f"device.attributes[{domain!r}].{draw(st.sampled_from(NAMES))}.includes({x})",
                f"cel.bind(q, {shared}, q.{op}({addend}) == q)",
                f"cel.bind(q, {shared}, q.{op}(1).isGreaterThan(q) || q.compareTo(q.{op}(1)) == 0)",
                f"{text}.indexOf('', {offset}) == {draw(st.sampled_from(['0', '3', offset]))}",
                f"{text}.lastIndexOf('', {offset}) == {draw(st.sampled_from(['0', '3', offset]))}",
                f"{text}.indexOf({gen_string(draw, 0)}, {offset}) >= 0",
                f"lists.range({draw(st.sampled_from(['-1', '-100', '0', '2']))}).size() == 0",
                f"duration({gen_int(draw, depth)}) == duration('1s')",
                f"dyn({x}).orValue({x}) == {x}",
                f"dyn({x}).or(optional.of({x})).hasValue()",
                f"{gen_string(draw, depth)}.{draw(st.sampled_from(['startsWith', 'endsWith']))}({gen_string(draw, depth)})",
                f"matches({gen_string(draw, depth)}, {draw(st.sampled_from([_regex_lit(draw), gen_string(draw, 0)]))})",
            ]
        )
    )


def gen_optional(draw: st.DrawFn, depth: int) -> str:
    """Optional values: constructors, chaining, optional fields, indexes and entries."""
    x = draw(st.sampled_from(_SCALARS))(draw, depth)
    a = _attr(draw).replace("].", "].?", 1) if draw(st.booleans()) else _attr(draw)
    opt = draw(
        st.sampled_from(
            [
                f"optional.of({x})",
                "optional.none()",
                f"optional.ofNonZeroValue({x})",
                f"{gen_list(draw, depth)}[?{gen_int(draw, 0)}]",
                f"{gen_map(draw, depth)}[?{gen_string(draw, 0)}]",
                f"device.attributes[{DRIVER!r}].?{draw(st.sampled_from(NAMES))}",
                "device.?attributes",
                f"{gen_list(draw, depth)}.first()",
                f"{gen_list(draw, depth)}.last()",
            ]
        )
    )
    return draw(
        st.sampled_from(
            [
                f"{opt}.hasValue()",
                f"{opt}.orValue({x}) == {x}",
                f"{opt}.or(optional.of({x})).value() == {x}",
                f"{opt}.value() == {x}",
                f"[?{opt}].size() == 1",
                f"{{?'k': {opt}}}.size() == 1",
                f"{opt} == optional.none()",
                f"{opt}.optMap(y, y).hasValue()",
                f"{opt}.optFlatMap(y, optional.of(y)).hasValue()",
                f"has({a})",
            ]
        )
    )


def gen_typed(draw: st.DrawFn, depth: int) -> str:
    """type(), dyn(), conversions and cross-type comparisons."""
    x = draw(st.sampled_from(_SCALARS))(draw, depth)
    t = draw(
        st.sampled_from(
            [
                "int",
                "uint",
                "double",
                "string",
                "bytes",
                "bool",
                "list",
                "map",
                "null_type",
                "type",
                "google.protobuf.Duration",
                "google.protobuf.Timestamp",
            ]
        )
    )
    return draw(
        st.sampled_from(
            [
                f"type({x}) == {t}",
                f"type({x}) == type({draw(st.sampled_from(_SCALARS))(draw, depth)})",
                f"type(dyn({x})) != {t}",
                f"type({_attr(draw)}) == {t}",
                f"dyn({x}) == dyn({draw(st.sampled_from(_SCALARS))(draw, depth)})",
                f"bytes({gen_string(draw, depth)}) == {gen_bytes(draw, depth)}",
                f"string({gen_bytes(draw, depth)}) == {gen_string(draw, depth)}",
                f"double({gen_string(draw, 0)}) {draw(st.sampled_from(['<', '==', '>']))} {gen_double(draw, 0)}",
                f"uint({x}) >= 0u",
            ]
        )
    )


def gen_network(draw: st.DrawFn, depth: int) -> str:
    """Kubernetes' IP, CIDR and URL libraries, and semver's accessors."""
    ip_s = draw(
        st.sampled_from(
            ["'10.0.0.1'", "'::1'", "'fe80::1%eth0'", "'1.2.3'", "'::ffff:1.2.3.4'", "'127.0.0.1'"]
        )
    )
    cidr_s = draw(
        st.sampled_from(
            ["'10.0.0.0/8'", "'::/0'", "'10.0.0.1/8'", "'1.2.3.4/33'", "'192.168.0.0/16'"]
        )
    )
    url_s = draw(
        st.sampled_from(
            [
                "'https://u@x.io:8/p?q=1#f'",
                "'/p'",
                "'x'",
                "'https://[::1]:80/'",
                "'http://%'",
                "'/a%2Fb?x=1&y=2&x=3;z'",
                "'https://a:b:c/'",
                "'/a b'",
                "'https://x.io/#%zz'",
                "'mailto:a@b'",
                "'https://[fe80::1%25en0]:8/'",
            ]
        )
    )
    v = gen_semver(draw, depth)
    op = draw(st.sampled_from(["==", "!=", "<", ">"]))
    return draw(
        st.sampled_from(
            [
                f"ip({ip_s}).family() {op} 4",
                f"ip({ip_s}).isLoopback()",
                f"ip({ip_s}).isGlobalUnicast() || ip({ip_s}).isUnspecified()",
                f"ip.isCanonical({ip_s})",
                f"cidr({cidr_s}).containsIP(ip({ip_s}))",
                f"cidr({cidr_s}).containsCIDR({cidr_s})",
                f"cidr({cidr_s}).prefixLength() {op} 8",
                f"string(cidr({cidr_s}).masked()) == {cidr_s}",
                f"cidr({cidr_s}).ip() == ip({ip_s})",
                f"url({url_s}).getHost() {op} 'x.io:8'",
                f"url({url_s}).getPort() == '8'",
                f"url({url_s}).getQuery().size() {op} 1",
                f"url({url_s}).getEscapedPath() == '/p'",
                f"{v}.major() {op} 1",
                f"{v}.minor() + {v}.patch() {op} 1",
                f"{v}.compareTo({gen_semver(draw, depth)}) {op} 0",
                f"{v} == {gen_semver(draw, depth)}",
            ]
        )
    )


_SCALARS: list[Gen] = [
    gen_int,
    gen_int,
    gen_string,
    gen_string,
    gen_double,
    gen_uint,
    gen_bool,
    gen_bytes,
    gen_list,
    gen_map,
    gen_quantity,
    gen_semver,
]


def _long_chain(draw: st.DrawFn) -> str:
    n = draw(st.sampled_from([5, 60, 130, 250, 400]))
    op = draw(st.sampled_from(["||", "&&", "+", "==", "."]))
    if op in ("||", "&&"):
        return f" {op} ".join(gen_bool(draw, 0) for _ in range(n))
    if op == "+":
        return " + ".join("1" for _ in range(n)) + " > 0"
    if op == ".":
        return "device.attributes" + ".x" * n + " == 1"
    return "true" + " == true" * n


def _deep(draw: st.DrawFn) -> str:
    n = draw(st.sampled_from([10, 31, 32, 33, 60, 100, 150, 200, 249, 250, 251, 260]))
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return "(" * n + "true" + ")" * n
    if kind == 1:
        return "[" * n + "1" + "]" * n + " != []"
    if kind == 2:
        return "!" * n + "true"
    return "true ? " * n + "true" + " : false" * n


def _heavy(draw: st.DrawFn) -> str:
    n = draw(st.sampled_from([10, 100, 200, 300, 450, 500, 1000]))
    items = "[" + ",".join(str(i) for i in range(n)) + "]"
    inner = draw(st.sampled_from(["x * y == -1", "x + y < 0", "'a' + string(x) == 'b'"]))
    return f"{items}.exists(x, {items}.exists(y, {inner}))"


def _damaged(draw: st.DrawFn, text: str) -> str:
    if not text:
        return text
    i = draw(st.integers(0, len(text) - 1))
    what = draw(st.integers(0, 2))
    if what == 0:
        return text[:i] + text[i + 1 :]
    junk = draw(st.sampled_from(list("()[]{},.?:!-+*/%<>=&|'\"`\\ 01x_")))
    return text[:i] + junk + text[i + (what - 1) :]


@st.composite
def selector(draw: st.DrawFn) -> str:
    """One selector expression, of some family."""
    family = draw(st.integers(0, 40))
    if family == 0:
        return _long_chain(draw)
    if family == 1:
        return _deep(draw)
    if family == 2:
        return _heavy(draw)
    if family <= 4:
        return _damaged(draw, gen_bool(draw, 2))
    if family == 5:
        return draw(st.sampled_from(_SCALARS))(draw, 2)  # not a bool, mostly
    return gen_bool(draw, draw(st.integers(1, 4)))


@st.composite
def case(draw: st.DrawFn) -> tuple[str, list[J]]:
    """A selector and a few devices to evaluate it on."""
    devices = [draw(device(i)) for i in range(draw(st.integers(1, 4)))]
    return draw(selector()), devices
