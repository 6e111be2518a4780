"""kopf-dra's CEL against Kubernetes' (hack/cel-oracle): regression rows, each checked both ways.

Every row is a disagreement the differential runs found (``make cel-oracle``), with upstream's
answer: the oracle must still give it (so the row stays true to Kubernetes) and so must
kopf-dra. Each test runs against every Kubernetes minor kopf-dra speaks (KUBERNETES_MINORS:
1.36, 1.37, 1.38), with a CEL environment of that minor; the rows where the minors part say
what each answers, one outcome per minor. Skipped only when go is not installed (it builds the
oracles); under ``CI=true`` that fails.
"""

from __future__ import annotations

import pytest

from operators.cel import KUBERNETES_MINORS, check_selector
from operators.cel.derived import DERIVED_ATTRIBUTES_SINCE
from operators.cel.release import dialect, minor
from tests.requires import require_program

from .differential import (
    Oracle,
    derived_disagreement,
    describe,
    disagreement,
    oracle,
    our_derived,
    ours,
    run_corpus,
    run_derived,
)
from .generators import J

DEVICE: J = {
    "name": "dev-0",
    "attributes": {"a": {"int": 1}, "s": {"string": "x y"}, "l": {"ints": [1, 2]}},
    "capacity": {"mem": {"value": "8Gi"}},
}
BAD_VERSION: J = {"name": "dev-1", "attributes": {"v": {"version": "99999999999999999999.0.0"}}}

# (expression, upstream's outcome on DEVICE)
ROWS: list[tuple[str, str]] = [
    # Every domain of the attribute map is present (an empty map when unknown).
    ("has(device.attributes.nope)", "true"),
    ("'nope' in device.attributes", "false"),
    # cel.bind binds lazily: an unread error is no error.
    ("cel.bind(x, 1 / 0, false)", "false"),
    ("cel.bind(x, 1 / 0, x == 1)", "error"),
    # Quantity: sign() is a global function; isInteger()/asInteger() read the int64 form.
    ('sign(quantity("-1")) == -1', "true"),
    ('quantity("-1").sign() == -1', "compile error"),
    ('quantity("8Ei").isInteger()', "false"),
    # Sub of MinInt64 (MINOR_ROWS): 1 - MinInt64 is not below 0, wrapped or not.
    ("quantity('1').sub(quantity('-9223372036854775808')).isLessThan(quantity('0'))", "false"),
    ('quantity("1000m").isInteger()', "false"),
    ('quantity("1.0").isInteger()', "false"),
    ('quantity("1.5k").isInteger()', "true"),
    ('quantity("9E").isInteger()', "true"),
    ('quantity("1000m").asInteger() == 1', "error"),
    # Doubles divide as IEEE 754; int64 MIN % -1 overflows.
    ("-1.0 / 0.0 < 0.0", "true"),
    ("0.0 / 0.0 != 0.0 / 0.0", "true"),
    ("-9223372036854775808 % -1 == 0", "error"),
    # Conversions: Go's number formatting and parsing.
    ('string(2.0) == "2"', "true"),
    ('string(1e21) == "1e+21"', "true"),
    ('int("+12") == 12', "true"),
    # trim() keeps the ASCII separators \x1c-\x1f, as Go's TrimSpace does.
    ("'\\x1c a \\x1d'.trim() == 'a'", "false"),
    # Map keys as Go hashes them: a list or a map by its pointer (found by nothing else, and
    # indexing nothing), bytes and versions not at all (an error, at compile time when cel-go
    # folds the literal while planning), except in an empty map, which is never hashed into.
    ("dyn([1]) in {'a': 1}", "false"),
    ("cel.bind(k, [1], k in dyn({k: 1}))", "true"),
    ("cel.bind(k, [1], dyn({k: 1})[?k].hasValue())", "error"),
    # A list or a map indexes no map, the device's map of attribute domains included.
    ("cel.bind(k, {'a': 1}, device.attributes[dyn(k)].size() >= 0)", "error"),
    ("{[1]: 1, [1]: 2}.size() == 2", "true"),
    ("dyn(b'a') in {'a': 1}", "error"),
    ("dyn(b'a') in {}", "false"),
    ("dyn(semver('1.0.0')) in {'a': 1}", "error"),
    ("dyn({b'a': device.driver}) == dyn({'a': 1})", "error"),
    ("[{b'': 1}].size() == 1", "compile error"),
    # format's %e and %f print as golang.org/x/text does for en_US; %e's precision is a width.
    ('"%e".format([1.5]) == "1.500000\u00d710⁰⁰"', "true"),
    ('"%.20e".format([-0.001]) == "     -1.000000\u00d710⁻⁰³"', "true"),
    ('"%e".format([1.0 / 0.0]) == "     ∞"', "true"),
    ('"%.2f".format([-0.0]) == "0.00"', "true"),
    ('"%f".format([-1.0 / 0.0]) == "-∞"', "true"),
    # URLs as Go's net/url reads them (ParseRequestURI, then Parse).
    ("url('https://u@x.io:8/p?q=1#f').getHost() == 'x.io:8'", "true"),
    ("url('https://[::1]:80/').getHostname() == '::1'", "true"),
    ("url('/a%2Fb?x=1&y=2&x=3;z').getQuery() == {'x': ['1'], 'y': ['2']}", "true"),
    ("url('/a b').getEscapedPath() == '/a%20b'", "true"),
    ("url('http://%').getHost() == ''", "error"),
    ("url('https://a:b:c/').getHost() == ''", "error"),
    ("url('https://x.io/#%zz').getHost() == ''", "error"),
    # Timestamps: a duration subtracted, the result within years 1 to 9999.
    (
        "timestamp('1970-01-01T00:00:00Z') - duration('2562047h')"
        " < timestamp('1970-01-01T00:00:00Z')",
        "true",
    ),
    (
        "timestamp('0001-01-01T00:00:00Z') - duration('1h') < timestamp('1970-01-01T00:00:00Z')",
        "error",
    ),
    # Kubernetes' device maps are never zero values, even empty.
    ("optional.ofNonZeroValue(device.capacity).hasValue()", "true"),
    # An optional entry of unknown type panics cel-go's validator: refused.
    ('[?device.attributes["d.example.com"]["a"][?0]].size() == 1', "compile error"),
    ('{?\'k\': device.attributes["d.example.com"]["a"][?0]}.size() == 1', "compile error"),
    # Versions past uint64 do not parse.
    ('semver("99999999999999999999.0.0") == semver("1.0.0")', "error"),
    # IANA zone names, from the zone database the process loads (as Go's time.LoadLocation).
    ("timestamp('2024-01-01T00:00:00Z').getHours('America/New_York') == 19", "true"),
    ("timestamp('2024-01-01T00:00:00Z').getHours('Mars/Olympus') == 19", "error"),
    # Local time before year 1 and after 9999, as Go's time keeps it.
    ("timestamp('0001-01-01T00:00:00Z').getFullYear('America/New_York') == 0", "true"),
    ("timestamp('0001-01-01T00:00:00Z').getMinutes('America/New_York') == 3", "true"),
    ("timestamp('9999-12-31T23:00:00Z').getFullYear('+05:00') == 10000", "true"),
    # A bare suffix is no quantity.
    ("quantity('Ei') == quantity('0')", "error"),
    ("isQuantity('Ei')", "false"),
    # An int meets a double through float64: MaxInt64 rounds to 2^63, equal to it.
    ("9223372036854775807 < 9223372036854775808.0", "false"),
    ("9223372036854775807 >= 9223372036854775808.0", "true"),
    ("dyn(9223372036854775807) != 9223372036854775808.0", "false"),
    # Patterns as Go's regexp reads them (operators/cel/goregexp.py): \C is no escape of Go's;
    # \p names are looked up loosely (a script's only from Go 1.27: MINOR_ROWS); Go's C holds the
    # unassigned code points; capture names are ASCII; 1,000 nested groups are too deep;
    # (?i) negates after folding (the Kelvin sign is a k) and leaves LC unfolded.
    (r"'a'.matches('\\C')", "compile error"),
    (r"'a'.matches('\\p{Greek}|\\P{greek}')", "true"),
    (r"'a'.matches('^\\pl\\p{Letter}?\\p{Cased_Letter}?$')", "true"),
    (r"'\u0378'.matches('\\p{C}')", "true"),
    (r"'\u0378'.matches('\\p{Cn}|\\P{Assigned}')", "true"),
    (r"'\u212a'.matches('(?i)\\P{ASCII}')", "false"),
    (r"'\u0345'.matches('(?i)\\p{LC}')", "false"),
    (r"'a'.matches('(?P<é>a)')", "compile error"),
    ("'a'.matches('" + "(" * 1000 + "a" + ")" * 1000 + "')", "compile error"),
    ("'a'.matches('" + "(" * 999 + "a" + ")" * 999 + "')", "true"),
    # cel-go plans an identifier typed as a type as the type its name is: a local's name too,
    # and a name no type has (a variable bound to a type, read or not) is no program.
    ("[type(1)].all(t, t != null)", "compile error"),
    ("cel.bind(t, int, true)", "compile error"),
    ("cel.bind(int, string, true)", "true"),
]


@pytest.fixture(scope="module", params=KUBERNETES_MINORS)
def upstream(request: pytest.FixtureRequest) -> Oracle:
    """The oracle of each Kubernetes minor in turn; compare with ``upstream.kubernetes``'s."""
    require_program("go", "builds hack/cel-oracle, Kubernetes' CEL")
    return oracle(request.param)


@pytest.mark.parametrize(("expression", "outcome"), ROWS, ids=[r[0][:40] for r in ROWS])
def test_regression_row(upstream: Oracle, expression: str, outcome: str) -> None:
    assert upstream.ask(expression, [DEVICE]) == [outcome], "the row no longer holds upstream"
    assert ours(expression, [DEVICE], kubernetes=upstream.kubernetes) == [outcome]


def _range_list(n: int) -> str:
    return "[" + ",".join(map(str, range(n))) + "]"


def per_minor(kubernetes: str, outcomes: tuple[str, ...]) -> str:
    """A row's outcome for one minor: the row gives one per KUBERNETES_MINORS, oldest first."""
    assert len(outcomes) == len(KUBERNETES_MINORS), "a row needs an outcome for every minor"
    return outcomes[KUBERNETES_MINORS.index(kubernetes)]


# (expression, outcome on DEVICE in 1.36, 1.37, 1.38): where cel-go 0.26, 0.29 and 0.33, or
# Kubernetes' libraries of those releases (and the Go each builds with), answer otherwise.
MINOR_ROWS: list[tuple[str, tuple[str, ...]]] = [
    # includes(): DRA's own refuses lists past 48 values (1.36), the Lists library's does not.
    (f"{_range_list(50)}.includes(49)", ("error", "true", "true")),
    ('device.attributes["d.example.com"].l.includes(2)', ("true", "true", "true")),
    # add()/sub() of a decimal quantity add into the decimal its copies share (1.36).
    ("cel.bind(q, quantity('1.5Gi'), q.add(1) == q)", ("true", "false", "false")),
    ("cel.bind(q, quantity('1.5Gi'), q.sub(quantity('1')) == q)", ("true", "false", "false")),
    # or/orValue of a value that is no optional: the value (0.26), no such overload (0.29);
    # either way no optional, whatever the checker said: hasValue() fails on it.
    ("dyn(1).orValue(2) == 1", ("true", "error", "error")),
    ("dyn(1).or(optional.of(1)).hasValue()", ("error", "error", "error")),
    # The empty string's index from an offset: the offset (0.26); clamped, never negative.
    ("'abc'.indexOf('', 5) == 5", ("true", "false", "false")),
    ("'abc'.indexOf('', -1) == -1", ("true", "error", "error")),
    ("'abc'.lastIndexOf('', 5) == 3", ("false", "true", "true")),
    ("'abc'.lastIndexOf('', -1) == -1", ("true", "error", "error")),
    # lists.range of a negative size: empty (0.26), an error (0.29).
    ("lists.range(-1) == []", ("true", "error", "error")),
    # duration(int): declared, always failing (0.26); undeclared (0.29).
    ("duration(1 + 0) == duration('1ns')", ("error", "compile error", "compile error")),
    # Backtick-quoted field names parse in 0.29 only.
    ('device.attributes["d.example.com"].`a` == 1', ("compile error", "true", "true")),
    ("has(device.attributes['d.example.com'].`a-b`)", ("compile error", "false", "false")),
    (
        "device.attributes['d.example.com'].?`a b`.orValue(0) == 0",
        ("compile error", "true", "true"),
    ),
    # .name past a local of that name: the local (0.26), the global (0.29); a local's field
    # before a qualified name (0.29).
    ("[1].all(device, .device == 1)", ("true", "compile error", "compile error")),
    ("[2].all(device, .device.driver == 'd.example.com')", ("compile error", "true", "true")),
    (
        "[{'protobuf': {'Duration': 1}}].all(google, google.protobuf.Duration == 1)",
        ("compile error", "true", "true"),
    ),
    # A rooted attribute's key sees the globals only: ``device`` there is the device.
    (
        "cel.bind(device, 'd.example.com', .device.attributes[device].a == 1)",
        ("compile error", "error", "error"),
    ),
    # Quantities (apimachinery v0.38): Sub of MinInt64 goes to decimals instead of negating in
    # int64 (where -MinInt64 wraps to itself); 19-digit integers are int64s; comparing converts
    # nothing; a zero's approximate float is 0, whatever its exponent.
    (
        "quantity('1').sub(-9223372036854775808).isGreaterThan(quantity('1'))",
        ("false", "false", "true"),
    ),
    (
        "quantity('0').sub(-9223372036854775808) == quantity('-9223372036854775808')",
        ("true", "true", "false"),
    ),
    ('quantity("9223372036854775807").isInteger()', ("false", "false", "true")),
    (
        "cel.bind(q, quantity('1'), q.compareTo(quantity('1.5Gi')) == -1 && q.isInteger())",
        ("false", "false", "true"),
    ),
    ("quantity('0e400').asApproximateFloat() == 0.0", ("false", "false", "true")),
    # Go 1.27's regexp (1.38) finds a script by its loose name, and knows Unicode 17's.
    (r"'a'.matches('\\p{Linear_A}')", ("compile error", "compile error", "false")),
    (r"'a'.matches('\\p{old_italic}')", ("compile error", "compile error", "false")),
    (r"'\U00010d40'.matches('^\\p{Garay}$')", ("compile error", "compile error", "true")),
    # An ordering of a NaN: an error (0.26, 0.29), false (0.33).
    ("0.0 / 0.0 < 1.0", ("error", "error", "false")),
    ("dyn(1) >= 0.0 / 0.0", ("error", "error", "false")),
    # Type values: sized 1 by 0.33's estimate (0.29: unknown, past every limit); their types
    # unify by what they are types of where a type parameter takes part.
    ("type(1) == int", ("compile error", "compile error", "true")),
    ("type(1e-3) == string", ("compile error", "compile error", "false")),
    ("type([]) == list", ("compile error", "compile error", "true")),
    ("type([]) == bool", ("compile error", "compile error", "compile error")),
    ("type(device.attributes) == map", ("compile error", "compile error", "true")),
    # The checker finds type names in the type registry: map is type(map(dyn, dyn)).
    ("bool == map", ("compile error", "compile error", "false")),
    # A comprehension over an empty range with a size, a string too, does not iterate (0.33).
    ("dyn('').map(x, x) == []", ("error", "error", "true")),
    # 1.38's device maps convert a key to a string.
    ("dyn(b'd.example.com') in device.attributes", ("false", "false", "true")),
    # A local named as a type, bound to a type, is that type (estimated 1 from 0.33 only).
    ("[string].all(int, int == string)", ("compile error", "compile error", "false")),
    # 1.38's library sizes a URL accessor's result as the URL: matches() on it is bounded.
    ("url('https://x.io/a').getHost().matches('x.*')", ("compile error", "compile error", "true")),
]


@pytest.mark.parametrize(
    ("expression", "outcomes"), MINOR_ROWS, ids=[r[0][:40] for r in MINOR_ROWS]
)
def test_the_minors_part(upstream: Oracle, expression: str, outcomes: tuple[str, ...]) -> None:
    outcome = per_minor(upstream.kubernetes, outcomes)
    assert upstream.ask(expression, [DEVICE]) == [outcome], "the row no longer holds upstream"
    assert ours(expression, [DEVICE], kubernetes=upstream.kubernetes) == [outcome]


# A device whose attributes 1.38 holds otherwise than 1.36 and 1.37 convert them: a version
# that does not parse, an empty list, no value at all (each fails every expression on the
# device until 1.38, only the expressions that read it in 1.38); an int and a list both set
# (the list until 1.38, the int in 1.38); a name both unqualified and qualified by the driver
# (either, as Go's map order has it, until 1.38; the qualified one in 1.38).
HELD_DEVICE: J = {
    "name": "dev-3",
    "attributes": {
        "a": {"int": 1},
        "v": {"version": "99999999999999999999.0.0"},
        "e": {"ints": []},
        "n": {},
        "t": {"int": 2, "ints": [3]},
        "q": {"int": 6},
        "d.example.com/q": {"int": 5},
        "o.example.com/w": {"version": "1.0.0"},
    },
    "capacity": {"mem": {"value": "1E"}},
}

# (expression, its outcome on HELD_DEVICE in 1.38): every one fails before 1.38.
HELD_ROWS: list[tuple[str, str]] = [
    ("device.attributes['d.example.com'].a == 1", "true"),
    ("device.attributes['d.example.com'].v == semver('1.0.0')", "error"),
    # A value not held is an error for has() and the optional field too, absent for `in`.
    ("has(device.attributes['d.example.com'].v)", "error"),
    ("device.attributes['d.example.com'].?e.hasValue()", "error"),
    ("'v' in device.attributes['d.example.com']", "false"),
    ("'e' in device.attributes['d.example.com']", "false"),
    ("device.attributes['d.example.com'].n == 1", "error"),
    ("device.attributes['d.example.com'].t == 2", "true"),
    ("device.attributes['d.example.com'].q == 5", "true"),
    # It still counts, and iterates as a key; its value is an error where read.
    ("device.attributes['d.example.com'].size() == 6", "true"),
    ("device.attributes['d.example.com'].all(k, k != '')", "true"),
    ("device.attributes['d.example.com'].all(k, v, k == 'a' || true)", "true"),
    ("device.attributes['d.example.com'].exists(k, v, k == 'v' && v == 1)", "error"),
    # A device map compares strictly: an error comparing a value is the result.
    ("device.attributes['o.example.com'] == {'w': 1}", "error"),
    ("{'w': 1} == device.attributes['o.example.com']", "false"),
    # Keys convert to strings: 1 finds the (empty) domain "1"; `in` is false, not an error.
    ("device.attributes[dyn(1)].size() == 0", "true"),
    ("dyn(1) in device.attributes['d.example.com']", "false"),
    # The capacity parses as 1.38's apimachinery does: 1E is an int64.
    ("device.capacity['d.example.com'].mem.isInteger()", "true"),
]


@pytest.mark.parametrize(("expression", "outcome"), HELD_ROWS, ids=[r[0][:40] for r in HELD_ROWS])
def test_held_attribute_row(upstream: Oracle, expression: str, outcome: str) -> None:
    if not dialect(upstream.kubernetes).lazy_attributes:
        outcome = "error"  # the device cannot be converted: every evaluation fails
    assert upstream.ask(expression, [HELD_DEVICE]) == [outcome], "the row no longer holds"
    assert ours(expression, [HELD_DEVICE], kubernetes=upstream.kubernetes) == [outcome]


NO_ATTRIBUTES: J = {"name": "dev-2", "attributes": {}, "capacity": {}}

# (expression, upstream's outcome on NO_ATTRIBUTES in 1.36, 1.37, 1.38, on DEVICE): until
# 1.38, cel.bind binds an empty attribute or capacity map as a plain map, without the default
# domain (cel-go 0.29 makes an empty accumulator mutable); a non-empty one, or the same map
# anywhere else, keeps it; 1.38 keeps it always.
BIND_ROWS: list[tuple[str, tuple[str, ...], str]] = [
    ("cel.bind(m, device.attributes, has(m.nope))", ("false", "false", "true"), "true"),
    ("cel.bind(m, device.capacity, m.?nope.hasValue())", ("false", "false", "true"), "true"),
    ("cel.bind(m, device.attributes, m.nope.size() == 0)", ("error", "error", "true"), "true"),
    (
        "cel.bind(m, device.attributes, cel.bind(n, m, has(n.nope)))",
        ("false", "false", "true"),
        "true",
    ),
    ("[device.attributes].all(m, has(m.nope))", ("true", "true", "true"), "true"),
    ("cel.bind(m, device, has(m.attributes.nope))", ("true", "true", "true"), "true"),
]


@pytest.mark.parametrize(
    ("expression", "empties", "full"), BIND_ROWS, ids=[r[0] for r in BIND_ROWS]
)
def test_bind_row(upstream: Oracle, expression: str, empties: tuple[str, ...], full: str) -> None:
    devices = [NO_ATTRIBUTES, DEVICE]
    expected = [per_minor(upstream.kubernetes, empties), full]
    assert upstream.ask(expression, devices) == expected, "the row no longer holds upstream"
    assert ours(expression, devices, kubernetes=upstream.kubernetes) == expected


def _range(n: int) -> str:
    return "[" + ",".join(map(str, range(n))) + "]"


# What the API server's type check and cost estimate refuse in a new selector, and what they
# let through (check_selector, as simulate validates input).
VERDICTS: list[tuple[str, bool]] = [
    ("device.nope == 1", True),
    ('device.driver == "" ? true : "one"', True),
    ("device.driver > 1", True),
    ("[1, 'a'].size() == 2", True),
    ("device.attributes['d.example.com'].a > 1 ? 1 : 2", True),
    (f"{_range(500)}.all(x, {_range(500)}.all(y, x != y))", True),
    ("device.attributes['d.example.com'].a > 1", False),
    ('device.driver == "" ? true : dyn("one")', False),
    (f"{_range(300)}.all(x, {_range(300)}.all(y, x != y))", False),
]


@pytest.mark.parametrize(("expression", "refused"), VERDICTS, ids=[v[0][:40] for v in VERDICTS])
def test_check_selector_gives_the_api_servers_verdict(
    upstream: Oracle, expression: str, refused: bool
) -> None:
    assert (upstream.ask(expression, [DEVICE]) == ["compile error"]) == refused
    assert (check_selector(expression, kubernetes=upstream.kubernetes) is not None) == refused


# Runtime costs and estimates that differed: the whole answer (outcome, cost, estimate) agrees.
# An IP's size is its address bytes, a CIDR's its prefix bytes, as in containsIP/containsCIDR.
COST_ROWS: list[str] = [
    # Kubernetes prices _==_ of its types at 1; _!=_ keeps cel-go's size rule.
    "dyn(semver('1.2.3-rc.1', true)) != {}",
    "dyn(ip('::1')) != {}",
    # cel-go appends both variables' paths to the range's path: where that Go slice has
    # room, the key is sized as a value.
    "device.attributes['d.example.com'].exists(k, v, k == k)",
    "device.attributes.exists(k, v, k == k)",
    "cidr('::/0').containsCIDR('::/0')",
    "cidr('::/0').containsIP('::1')",
    "cidr('10.0.0.0/32').containsCIDR(cidr('10.0.0.0/32'))",
    "cidr('::/127').containsIP(ip('::1'))",
    # A variadic call stops at a failed argument; charged only when it was the last one.
    '"-12".format(device.attributes["o.example.com"].l) == "" || true',
    '"a".replace("a", "b", device.attributes["o.example.com"].l) == "" || true',
    '"a".replace("a", device.attributes["o.example.com"].l, 1) == "" || true',
    '"abc".substring(device.attributes["o.example.com"].l, 2) == "" || true',
    # includes(): DRA's estimate (48 values) and cel-go's 1 (1.36); the Lists library's
    # traversal of the target, estimated at 64 for an attribute (1.37).
    'device.attributes["d.example.com"].l.includes(2)',
    "[1, 2, 3].includes(3)",
    "'abc'.includes('abc')",
    "['a', 'bc'].includes('bc')",
    # startsWith/endsWith: charged by the receiver (0.26), by the prefix (0.29); the global
    # matches(): 1 (0.26), as the method (0.29).
    "'abcdefghijklmnop'.startsWith('a')",
    "'a'.endsWith('abcdefghijklmnopqrstuvwxyz')",
    "matches('abcdefghijklmnopqrstuvwxyz', 'a.*')",
    # A rooted attribute's qualifiers are applied where cel-go tracks no cost (0.29), and are
    # charged (0.33).
    "[2].all(device, .device.attributes['d.example.com'].a == 1)",
    "cel.bind(device, 1, .device.attributes['d.example.com'].l[0] == 1)",
    # A presence test that fails is charged.
    "has(dyn(device.attributes['d.example.com'].l).x) || true",
    # A call whose argument fails: charged when every argument was evaluated (0.26, 0.29),
    # never (0.33), which stops a binary call at its left operand; a literal with an element
    # that fails is not charged (0.33).
    "cidr('1.2.3').containsIP('1.2.3') || true",
    "url('http://%').getHost() > 'x.io:8' && false",
    "(1 / 0 + 1 == 2) || true",
    "([1 / 0].size() == 1) || true",
    "({'a': 1 / 0}.size() == 1) || true",
    # 0.33's estimate: distinct() of strings also traverses them; an empty literal's element
    # has no size; a selection costs 1 whatever its operand's type.
    "['a', 'b'].distinct().size() == 2",
    "[][5] == 1 || true",
    "device.attributes.x.x.x == 1 || true",
    # A presence test on a conditional: 1 less than its qualifiers (0.26, 0.29); estimated 1
    # more where a branch is computed, not an attribute (0.33).
    "has((true ? {'a': 1} : {'b': 2}).a)",
    "has((device.driver != 'x' ? device.attributes : device.capacity).a)",
    # 0.33 tracks a path for a presence test (sized as the attribute it tests) and only from
    # an operand with one; a bind takes its result's path and its bound variable's size.
    "has(device.attributes['x.com'].c) == has(device.attributes['x.com'].c)",
    "{'device': 'abc'}.device == 'abc'",
    "cel.bind(x, [1, 2, 3], x).all(e, e > 0)",
    "cel.bind(x, device.attributes['d.example.com'], x).c == cel.bind(y, 'a', y)",
]


@pytest.mark.parametrize("expression", COST_ROWS)
def test_cost_row(upstream: Oracle, expression: str) -> None:
    assert disagreement(expression, [DEVICE], upstream.kubernetes) is None


def test_unparseable_version_fails_every_evaluation_until_1_38(upstream: Oracle) -> None:
    """1.36 and 1.37 fail every expression on the device; 1.38 only those that read it."""
    expression = "true"
    outcome = "true" if dialect(upstream.kubernetes).lazy_attributes else "error"
    assert upstream.ask(expression, [BAD_VERSION]) == [outcome]
    assert ours(expression, [BAD_VERSION], kubernetes=upstream.kubernetes) == [outcome]


# The fixed-seed corpus of `make test`: the same selectors and devices on every run, so a
# failure is a change in kopf-dra (or in the pinned upstream), never chance. The random run of
# 100,000 evaluations and more is `make cel-oracle`.
CORPUS_SEED = 20
CORPUS_EVALUATIONS = 4000


def test_fixed_seed_corpus_agrees_with_upstream(upstream: Oracle) -> None:
    counted, found = run_corpus(CORPUS_EVALUATIONS, CORPUS_SEED, upstream.kubernetes)
    assert counted["evaluations"] >= CORPUS_EVALUATIONS
    assert not found, "\n".join(describe(f) for f in found[:10])


def test_oracle_runs_with_the_local_control_planes_feature_gates() -> None:
    """The oracle's DRA CEL features are the gates the local control plane turns on, so that
    what it calls upstream is what that API server and scheduler do."""
    from operators.localcluster.controlplane import default_version, feature_gates

    from .differential import ROOT

    source = (ROOT / "hack" / "cel-oracle" / "main.go").read_text()
    gates = feature_gates(default_version())
    line = next(x for x in source.splitlines() if x.startswith("var features = cel.Features{"))
    for gate, field in [
        ("DRAConsumableCapacity", "EnableConsumableCapacity"),
        ("DRAListTypeAttributes", "EnableListTypeAttributes"),
    ]:
        assert f"{field}: {str(gates[gate]).lower()}" in line


# --- derived attributes (1.37) ----------------------------------------------------------------


DERIVED_MINORS = [m for m in KUBERNETES_MINORS if minor(m) >= minor(DERIVED_ATTRIBUTES_SINCE)]


@pytest.fixture(scope="module", params=DERIVED_MINORS)
def upstream_derived(request: pytest.FixtureRequest) -> Oracle:
    """The oracle of each minor with derived attributes (1.37 on) in turn."""
    require_program("go", "builds hack/cel-oracle, Kubernetes' CEL")
    return oracle(request.param)


def _heavy_list(n: int) -> str:
    return f"{_range(n)}.map(x, {_range(n)}.filter(y, x == y).size())"


# (derived expression, upstream's outcome on DEVICE, as Oracle.derived words it): validation's
# verdict, the attribute, a value that is none (its conversion error), an evaluation error.
DERIVED_ROWS: list[tuple[str, str]] = [
    ("device.attributes['d.example.com'].a", 'attribute {"int": 1}'),
    ("device.attributes['d.example.com'].l", 'attribute {"ints": [1, 2]}'),
    ("device.attributes['d.example.com'].s + '!'", 'attribute {"string": "x y!"}'),
    ("device.attributes['d.example.com'].a > 0", 'attribute {"bool": true}'),
    ("semver('1.2.3-rc.1')", 'attribute {"version": "1.2.3-rc.1"}'),
    ("[semver('1.0.0'), semver('2.0.0')]", 'attribute {"versions": ["1.0.0", "2.0.0"]}'),
    ("['a', 'b']", 'attribute {"strings": ["a", "b"]}'),
    ("[true]", 'attribute {"bools": [true]}'),
    # An empty list is an empty string list, whatever its type.
    ("[]", 'attribute {"strings": []}'),
    ("dyn([1]).filter(x, x > 1)", 'attribute {"strings": []}'),
    ("cel.bind(x, 1 / 0, 1)", 'attribute {"int": 1}'),
    # The result type: a scalar an attribute takes, a list of those, or dyn.
    ("2.5", "refused type"),
    ("1u", "refused type"),
    ("b'a'", "refused type"),
    ("{'a': 1}", "refused type"),
    ("null", "refused type"),
    ("[[1]]", "refused type"),
    ("optional.of(1)", "refused type"),
    ("[1, 'a']", "refused compile"),
    ("device.nope", "refused compile"),
    (_heavy_list(1000), "refused cost"),
    ("'" + "a" * 10240 + "'", "refused length"),
    # dyn() passes the type check; the value decides (valToDeviceAttribute's words).
    ("dyn(2.5)", "convert: unsupported CEL return type: float64"),
    ("dyn(1u)", "convert: unsupported CEL return type: uint64"),
    ("dyn(null)", "convert: unsupported CEL return type: structpb.NullValue"),
    ("dyn(b'a')", "convert: unsupported CEL return type: []uint8"),
    ("[dyn(1), dyn('a')]", "convert: expected list element at index 1 to be int, got string"),
    ("[dyn(1u)]", "convert: unsupported list element type: uint64"),
    ("1 / 0", "error"),
    ("device.attributes['d.example.com'].nope", "error"),
    # cel-go hands a type over as its name and an optional as what it holds (nil when
    # none), and names Go types in the conversion errors.
    ("dyn(int)", 'attribute {"string": "int"}'),
    ("dyn(type(device))", 'attribute {"string": "map"}'),
    ("[dyn(type(1)), dyn('a')]", 'attribute {"strings": ["int", "a"]}'),
    ("dyn(optional.of(1))", 'attribute {"int": 1}'),
    ("dyn(device.attributes['d.example.com'].?a)", 'attribute {"int": 1}'),
    ("[dyn(1), dyn(optional.of(2))]", 'attribute {"ints": [1, 2]}'),
    ("dyn(optional.none())", "convert: unsupported CEL return type: <nil>"),
    ("dyn(duration('1h'))", "convert: unsupported CEL return type: time.Duration"),
    ("dyn(quantity('1'))", "convert: unsupported CEL return type: *resource.Quantity"),
    ("dyn({})", "convert: unsupported CEL return type: map[ref.Val]ref.Val"),
    ("[dyn([1])]", "convert: unsupported list element type: []ref.Val"),
]


@pytest.mark.parametrize(
    ("expression", "outcome"), DERIVED_ROWS, ids=[r[0][:40] for r in DERIVED_ROWS]
)
def test_derived_row(upstream_derived: Oracle, expression: str, outcome: str) -> None:
    kubernetes = upstream_derived.kubernetes
    assert upstream_derived.derived(expression, [DEVICE]).outcomes == [outcome], (
        "the row no longer holds upstream"
    )
    assert our_derived(expression, [DEVICE], kubernetes).outcomes == [outcome]
    assert derived_disagreement(expression, [DEVICE], kubernetes) is None


def test_a_library_before_derived_attributes_says_so() -> None:
    """One main.go builds every oracle; 1.36's library has no DerivedAttribute option."""
    require_program("go", "builds hack/cel-oracle, Kubernetes' CEL")
    older = [m for m in KUBERNETES_MINORS if m not in DERIVED_MINORS]
    assert older, "a minor before derived attributes"
    for kubernetes in older:
        assert oracle(kubernetes).derived("1", [DEVICE]).outcomes == ["refused unsupported"]


# A fixed-seed derived corpus for `make test` (`--derived` runs more); the words of a
# conversion error ("message") are left to those runs and DERIVED_KNOWN.
DERIVED_SEED = 7
DERIVED_EVALUATIONS = 120


def test_fixed_seed_derived_corpus_agrees_with_upstream(upstream_derived: Oracle) -> None:
    counted, found = run_derived(DERIVED_EVALUATIONS, DERIVED_SEED, upstream_derived.kubernetes)
    assert counted["evaluations"] >= DERIVED_EVALUATIONS
    assert counted["accepted"]
    assert counted["refused"]
    assert counted.get("attributes")
    found = [f for f in found if f[0] != "message"]
    assert not found, "\n".join(describe(f) for f in found[:10])
