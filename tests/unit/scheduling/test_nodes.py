"""Node filters besides DRA: kube-scheduler's semantics and its exact reason strings."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.api.core import Container, Node, Pod, Taint, Toleration
from operators.scheduling.nodes import (
    NodeUsage,
    UsageTracker,
    affinity_matches,
    insufficient_resources,
    node_failure,
    pod_requests,
    toleration_matches,
    untolerated_taint,
)

from .builders import J, container, expr, node, pod, required, taint, term

D = Decimal


def tol(
    key: str | None = None,
    operator: str | None = None,
    value: str | None = None,
    effect: str | None = None,
) -> Toleration:
    return Toleration(key=key, operator=operator, value=value, effect=effect)


def tnt(key: str, value: str | None = None, effect: str = "NoSchedule") -> Taint:
    return Taint(key=key, value=value, effect=effect)


# --- tolerations -------------------------------------------------------------------------

TOLERATION_CASES = [
    # (toleration, taint, tolerated)
    pytest.param(tol(operator="Exists"), tnt("a", "x"), True, id="exists-empty-key-any-taint"),
    pytest.param(
        tol(operator="Exists"), tnt("b", None, "NoExecute"), True, id="exists-empty-key-noexecute"
    ),
    pytest.param(
        tol(operator="Exists", effect="NoSchedule"),
        tnt("a", "x", "NoExecute"),
        False,
        id="exists-empty-key-effect-mismatch",
    ),
    pytest.param(
        tol(operator="Exists", effect="NoExecute"),
        tnt("a", "x", "NoExecute"),
        True,
        id="exists-empty-key-effect-match",
    ),
    pytest.param(tol("a", "Exists"), tnt("a", "anything"), True, id="exists-key-match"),
    pytest.param(tol("a", "Exists"), tnt("b"), False, id="exists-key-mismatch"),
    pytest.param(tol("a", "Equal", "x"), tnt("a", "x"), True, id="equal-value-match"),
    pytest.param(tol("a", "Equal", "x"), tnt("a", "y"), False, id="equal-value-mismatch"),
    pytest.param(tol("a", "Equal", "x"), tnt("a"), False, id="equal-value-vs-no-value"),
    pytest.param(tol("a", "Equal"), tnt("a"), True, id="equal-no-value-vs-no-value"),
    pytest.param(tol("a", "Equal", ""), tnt("a"), True, id="equal-empty-value-is-no-value"),
    pytest.param(tol("a", "Equal", "x"), tnt("b", "x"), False, id="equal-key-mismatch"),
    pytest.param(tol("a", None, "x"), tnt("a", "x"), True, id="default-operator-is-equal"),
    pytest.param(tol("a", None, "x"), tnt("a", "y"), False, id="default-operator-mismatch"),
    pytest.param(
        tol("a", "Equal", "x", "NoSchedule"), tnt("a", "x"), True, id="equal-effect-match"
    ),
    pytest.param(
        tol("a", "Equal", "x", "NoExecute"), tnt("a", "x"), False, id="equal-effect-mismatch"
    ),
    pytest.param(
        tol("a", "Equal", "x"), tnt("a", "x", "NoExecute"), True, id="empty-effect-any-effect"
    ),
    pytest.param(tol("a", "Lt", "5"), tnt("a", "3"), False, id="unknown-operator"),
]


@pytest.mark.parametrize(("toleration", "taint_", "tolerated"), TOLERATION_CASES)
def test_toleration_matches(toleration: Toleration, taint_: Taint, tolerated: bool) -> None:
    assert toleration_matches(toleration, taint_) is tolerated


@pytest.mark.parametrize(
    ("taints", "tolerations", "expected"),
    [
        pytest.param([], [], None, id="no-taints"),
        pytest.param(
            [taint("soft", "x", "PreferNoSchedule")], [], None, id="prefer-no-schedule-ignored"
        ),
        pytest.param([taint("gpu", "true")], [], "gpu", id="noschedule-blocks"),
        pytest.param([taint("gone", None, "NoExecute")], [], "gone", id="noexecute-blocks"),
        pytest.param(
            [taint("gpu", "true")],
            [{"key": "gpu", "operator": "Equal", "value": "true"}],
            None,
            id="tolerated",
        ),
        pytest.param(
            [taint("a", "1"), taint("b", "2")],
            [{"key": "a", "operator": "Exists"}],
            "b",
            id="first-untolerated",
        ),
        pytest.param(
            [taint("soft", None, "PreferNoSchedule"), taint("a"), taint("b")],
            [],
            "a",
            id="first-blocking-in-node-order",
        ),
        pytest.param(
            [taint("a", "1"), taint("b", "2", "NoExecute")],
            [{"operator": "Exists"}],
            None,
            id="tolerate-everything",
        ),
    ],
)
def test_untolerated_taint(taints: list[J], tolerations: list[J], expected: str | None) -> None:
    found = untolerated_taint(node(taints=taints), map(Toleration.load, tolerations))
    assert (found.key if found is not None else None) == expected


EFFECTS = st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"])
TEXT = st.text(alphabet="abcxyz-./", max_size=6)


@given(key=TEXT, value=st.none() | TEXT, effect=EFFECTS)
def test_exists_without_key_tolerates_every_taint(key: str, value: str | None, effect: str) -> None:
    assert toleration_matches(tol(operator="Exists"), tnt(key, value, effect))


@given(
    key=TEXT,
    value=st.none() | TEXT,
    effect=EFFECTS,
    wanted=EFFECTS,
    operator=st.sampled_from(["Exists", "Equal", None]),
)
def test_toleration_with_effect_only_tolerates_that_effect(
    key: str, value: str | None, effect: str, wanted: str, operator: str | None
) -> None:
    toleration = tol(key, operator, value, wanted)
    if toleration_matches(toleration, tnt(key, value, effect)):
        assert effect == wanted
    if effect == wanted:  # same key and value: only the effect could have stopped it
        assert toleration_matches(toleration, tnt(key, value, effect))


@given(taints=st.lists(st.tuples(TEXT, EFFECTS), max_size=5))
def test_untolerated_taint_never_reports_prefer_no_schedule(
    taints: list[tuple[str, str]],
) -> None:
    found = untolerated_taint(node(taints=[taint(k, None, e) for k, e in taints]), [])
    blocking = [k for k, e in taints if e != "PreferNoSchedule"]
    if blocking:
        assert found is not None
        assert found.key == blocking[0]
    else:
        assert found is None


# --- readiness ---------------------------------------------------------------------------


@pytest.mark.parametrize("ready", ["True", "False", "Unknown", None])
def test_readiness_is_no_filter_of_its_own(ready: str | None) -> None:
    """As kube-scheduler: a node that is not ready is refused through the taints the node
    lifecycle controller gives it, not for its condition."""
    assert node_failure(pod(), node(ready=ready), {}, NodeUsage()) is None
    tainted = node(ready=ready, taints=[taint("node.kubernetes.io/not-ready", None, "NoExecute")])
    assert node_failure(pod(), tainted, {}, NodeUsage()) == "node(s) had untolerated taint(s)"


# --- nodeSelector and required node affinity ---------------------------------------------

LABELS = {"zone": "a", "gpu": "true", "cores": "16", "junk": "x1"}

AFFINITY_CASES = [
    # (nodeSelector, affinity, matches)
    pytest.param({}, None, True, id="nothing-required"),
    pytest.param({"zone": "a"}, None, True, id="selector-match"),
    pytest.param({"zone": "b"}, None, False, id="selector-value-mismatch"),
    pytest.param({"rack": "1"}, None, False, id="selector-label-missing"),
    pytest.param({"rack": ""}, None, False, id="selector-empty-value-needs-label"),
    pytest.param({"zone": "a", "gpu": "false"}, None, False, id="selector-all-labels"),
    pytest.param({}, required(term(expr("zone", "In", "a", "b"))), True, id="in"),
    pytest.param({}, required(term(expr("zone", "In", "b", "c"))), False, id="in-mismatch"),
    pytest.param({}, required(term(expr("rack", "In", "1"))), False, id="in-missing-label"),
    pytest.param({}, required(term(expr("zone", "NotIn", "b"))), True, id="notin"),
    pytest.param({}, required(term(expr("zone", "NotIn", "a"))), False, id="notin-mismatch"),
    pytest.param(
        {}, required(term(expr("rack", "NotIn", "1"))), True, id="notin-missing-label-matches"
    ),
    pytest.param({}, required(term(expr("gpu", "Exists"))), True, id="exists"),
    pytest.param({}, required(term(expr("rack", "Exists"))), False, id="exists-missing"),
    pytest.param({}, required(term(expr("rack", "DoesNotExist"))), True, id="doesnotexist"),
    pytest.param({}, required(term(expr("gpu", "DoesNotExist"))), False, id="doesnotexist-present"),
    pytest.param({}, required(term(expr("cores", "Gt", "8"))), True, id="gt"),
    pytest.param({}, required(term(expr("cores", "Gt", "16"))), False, id="gt-equal-fails"),
    pytest.param({}, required(term(expr("cores", "Lt", "32"))), True, id="lt"),
    pytest.param({}, required(term(expr("cores", "Lt", "16"))), False, id="lt-equal-fails"),
    pytest.param({}, required(term(expr("rack", "Gt", "0"))), False, id="gt-missing-label"),
    pytest.param({}, required(term(expr("junk", "Gt", "0"))), False, id="gt-non-integer-label"),
    pytest.param(
        {},
        required(term(fields=[expr("metadata.name", "In", "node-1")])),
        True,
        id="fields-name-in",
    ),
    pytest.param(
        {},
        required(term(fields=[expr("metadata.name", "In", "node-2")])),
        False,
        id="fields-name-in-other",
    ),
    pytest.param(
        {},
        required(term(fields=[expr("metadata.name", "NotIn", "node-2")])),
        True,
        id="fields-name-notin",
    ),
    pytest.param(
        {},
        required(term(fields=[expr("metadata.name", "NotIn", "node-1")])),
        False,
        id="fields-name-notin-self",
    ),
    pytest.param(
        {},
        required(term(expr("zone", "In", "a"), expr("gpu", "In", "false"))),
        False,
        id="expressions-anded",
    ),
    pytest.param(
        {},
        required(term(expr("zone", "In", "a"), fields=[expr("metadata.name", "In", "node-2")])),
        False,
        id="expressions-and-fields-anded",
    ),
    pytest.param(
        {},
        required(term(expr("zone", "In", "b")), term(expr("gpu", "Exists"))),
        True,
        id="terms-ored",
    ),
    pytest.param({}, required(term()), False, id="empty-term-matches-nothing"),
    pytest.param(
        {}, required(term(), term(expr("zone", "In", "a"))), True, id="empty-term-skipped"
    ),
    pytest.param(
        {"zone": "b"},
        required(term(expr("zone", "In", "a"))),
        False,
        id="selector-and-affinity-both-needed",
    ),
    pytest.param(
        {"zone": "a"},
        required(term(expr("zone", "In", "b"))),
        False,
        id="affinity-and-selector-both-needed",
    ),
    pytest.param(
        {}, required(term(expr("zone", "Near", "a"))), False, id="invalid-operator-no-crash"
    ),
    pytest.param({}, required(term(expr("cores", "Gt", "x"))), False, id="invalid-gt-no-crash"),
    pytest.param(
        {},
        {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": term(expr("zone", "In", "b"))}
                ]
            }
        },
        True,
        id="preferred-ignored",
    ),
    pytest.param({}, {"podAntiAffinity": {"x": 1}}, True, id="no-node-affinity"),
]


@pytest.mark.parametrize(("selector", "affinity", "matches"), AFFINITY_CASES)
def test_affinity_matches(selector: dict[str, str], affinity: J | None, matches: bool) -> None:
    p = pod(node_selector=selector, affinity=affinity)
    assert affinity_matches(p, node("node-1", labels=LABELS)) is matches


# --- effective requests ------------------------------------------------------------------


def reference_requests(p: Pod) -> dict[str, Decimal]:
    """component-helpers' PodRequests, spelled out independently of the implementation:
    reqs = sum(containers) + sum(sidecars); for the i-th init container its use is
    (restartable init containers up to i) + (itself, unless it is restartable);
    reqs = max(reqs, max over init uses); pod-level cpu/memory replace; overhead is added."""

    def req(c: Container) -> dict[str, Decimal]:
        return {k: v.value for k, v in (c.resources.requests if c.resources else {}).items()}

    def add(a: dict[str, Decimal], b: Mapping[str, Decimal]) -> None:
        for k, v in b.items():
            a[k] = a.get(k, D(0)) + v

    reqs: dict[str, Decimal] = {}
    for c in p.spec.containers:
        add(reqs, req(c))
    restartable: dict[str, Decimal] = {}
    init: dict[str, Decimal] = {}
    for c in p.spec.init_containers:
        use = req(c)
        if c.restart_policy == "Always":
            add(reqs, use)
            add(restartable, use)
            use = dict(restartable)
        else:
            add(use, restartable)
        for k, v in use.items():
            init[k] = max(init.get(k, D(0)), v)
    for k, v in init.items():
        reqs[k] = max(reqs.get(k, D(0)), v)
    if p.spec.resources is not None:
        for k, q in p.spec.resources.requests.items():
            if k in ("cpu", "memory") or k.startswith("hugepages-"):
                reqs[k] = q.value
    add(reqs, {k: q.value for k, q in p.spec.overhead.items()})
    return reqs


def cpu(v: str) -> dict[str, str]:
    return {"cpu": v}


REQUEST_CASES = [
    # (containers, init containers, overhead, pod-level requests, expected)
    pytest.param([container()], [], None, None, {}, id="no-requests"),
    pytest.param(
        [
            container({"cpu": "100m", "memory": "1Gi"}),
            container({"cpu": "200m", "memory": "512Mi"}),
        ],
        [],
        None,
        None,
        {"cpu": D("0.3"), "memory": D(1536 * 2**20)},
        id="regular-containers-add-up",
    ),
    pytest.param(
        [container(cpu("1"))], [container(cpu("2"))], None, None, {"cpu": D(2)}, id="init-above"
    ),
    pytest.param(
        [container(cpu("1"))],
        [container(cpu("500m"))],
        None,
        None,
        {"cpu": D(1)},
        id="init-below",
    ),
    pytest.param(
        [container(cpu("1"))],
        [container(cpu("3")), container(cpu("2"))],
        None,
        None,
        {"cpu": D(3)},
        id="init-containers-max-not-sum",
    ),
    pytest.param(
        [container(cpu("1"))],
        [container(cpu("1"), sidecar=True)],
        None,
        None,
        {"cpu": D(2)},
        id="sidecar-adds-to-containers",
    ),
    pytest.param(
        [container(cpu("1"))],
        [container(cpu("1"), sidecar=True), container(cpu("2"))],
        None,
        None,
        {"cpu": D(3)},
        id="init-after-sidecar-runs-beside-it",
    ),
    pytest.param(
        [container(cpu("1"))],
        [container(cpu("2")), container(cpu("1"), sidecar=True)],
        None,
        None,
        {"cpu": D(2)},
        id="init-before-sidecar-runs-alone",
    ),
    pytest.param(
        [container(cpu("500m"))],
        [
            container(cpu("1"), sidecar=True),
            container(cpu("1"), sidecar=True),
            container(cpu("2500m")),
        ],
        None,
        None,
        {"cpu": D("4.5")},
        id="sidecars-accumulate-for-later-inits",
    ),
    pytest.param(
        [container({"memory": "1Gi"})],
        [container({"ephemeral-storage": "10Gi"})],
        None,
        None,
        {"memory": D(2**30), "ephemeral-storage": D(10 * 2**30)},
        id="init-only-resource",
    ),
    pytest.param(
        [container(cpu("1"))],
        [container(cpu("2"))],
        {"cpu": "250m", "memory": "64Mi"},
        None,
        {"cpu": D("2.25"), "memory": D(64 * 2**20)},
        id="overhead-on-top-of-max",
    ),
    pytest.param(
        [container({"cpu": "1", "ephemeral-storage": "1Gi"})],
        [],
        {"cpu": "100m"},
        {"cpu": "4", "ephemeral-storage": "9Gi"},
        {"cpu": D("4.1"), "ephemeral-storage": D(2**30)},
        id="pod-level-cpu-replaces-containers-ephemeral-ignored",
    ),
    pytest.param(
        [container(cpu("1"))],
        [container(cpu("8"))],
        None,
        {"memory": "2Gi"},
        {"cpu": D(8), "memory": D(2 * 2**30)},
        id="pod-level-memory-only",
    ),
]


@pytest.mark.parametrize(
    ("containers", "inits", "overhead", "pod_level", "expected"), REQUEST_CASES
)
def test_pod_requests(
    containers: list[J],
    inits: list[J],
    overhead: dict[str, str] | None,
    pod_level: dict[str, str] | None,
    expected: dict[str, Decimal],
) -> None:
    p = pod(containers=containers, init_containers=inits, overhead=overhead, pod_requests=pod_level)
    assert pod_requests(p) == expected
    assert reference_requests(p) == expected


AMOUNT = st.integers(min_value=0, max_value=4000).map(lambda m: f"{m}m")
REQUESTS = st.dictionaries(st.sampled_from(["cpu", "memory", "ephemeral-storage"]), AMOUNT)
CONTAINER = st.builds(lambda r: container(r), REQUESTS)
INIT = st.builds(lambda r, s: container(r, sidecar=s), REQUESTS, st.booleans())


@st.composite
def pods(draw: st.DrawFn) -> Pod:
    return pod(
        containers=draw(st.lists(CONTAINER, min_size=1, max_size=3)),
        init_containers=draw(st.lists(INIT, max_size=4)),
        overhead=draw(st.none() | REQUESTS),
    )


@given(pods())
def test_pod_requests_matches_the_upstream_formula(p: Pod) -> None:
    assert pod_requests(p) == reference_requests(p)


@given(
    pods(),
    st.sampled_from(["containers", "initContainers", "overhead"]),
    st.sampled_from(["cpu", "memory"]),
    st.integers(min_value=1, max_value=2000),
    st.data(),
)
def test_pod_requests_monotone(
    p: Pod, where: str, resource: str, extra: int, data: st.DataObject
) -> None:
    """Asking for more in any container (or in the overhead) never lowers any total."""
    before = pod_requests(p)
    obj = p.dump()
    if where == "overhead":
        target = obj["spec"].setdefault("overhead", {})
    else:
        items = obj["spec"].get(where) or obj["spec"]["containers"]
        chosen = items[data.draw(st.integers(0, len(items) - 1))]
        target = chosen.setdefault("resources", {}).setdefault("requests", {})
    have = Decimal(target[resource][:-1]) if resource in target else D(0)
    target[resource] = f"{have + extra}m"
    after = pod_requests(Pod.load(obj))
    assert all(after.get(k, D(0)) >= v for k, v in before.items())
    assert after.get(resource, D(0)) >= before.get(resource, D(0))
    if where == "overhead":  # added after everything else: the total grows by exactly that
        assert after[resource] == before.get(resource, D(0)) + D(extra) / 1000


@given(pods())
def test_pod_requests_cover_every_container(p: Pod) -> None:
    total = pod_requests(p)
    for c in [*p.spec.containers, *p.spec.init_containers]:
        for k, q in (c.resources.requests if c.resources else {}).items():
            assert total.get(k, D(0)) >= q.value


# --- NodeResourcesFit --------------------------------------------------------------------

ALLOC = {"cpu": "4", "memory": "8Gi", "ephemeral-storage": "10Gi", "pods": "10"}


@pytest.mark.parametrize(
    ("requests", "usage", "allocatable", "expected"),
    [
        pytest.param({}, NodeUsage(), ALLOC, [], id="nothing-requested"),
        pytest.param({"cpu": "4"}, NodeUsage(), ALLOC, [], id="cpu-exactly-fits"),
        pytest.param({"cpu": "4001m"}, NodeUsage(), ALLOC, ["Insufficient cpu"], id="cpu-over"),
        pytest.param(
            {"cpu": "1"},
            NodeUsage({"cpu": D("3.5")}, 1),
            ALLOC,
            ["Insufficient cpu"],
            id="cpu-minus-usage",
        ),
        pytest.param(
            {"cpu": "500m"}, NodeUsage({"cpu": D("3.5")}, 1), ALLOC, [], id="cpu-fits-usage"
        ),
        pytest.param(
            {"memory": "9Gi"}, NodeUsage(), ALLOC, ["Insufficient memory"], id="memory-over"
        ),
        pytest.param(
            {"ephemeral-storage": "11Gi"},
            NodeUsage(),
            ALLOC,
            ["Insufficient ephemeral-storage"],
            id="ephemeral-storage-over",
        ),
        pytest.param({}, NodeUsage(pods=9), ALLOC, [], id="last-pod-slot"),
        pytest.param({}, NodeUsage(pods=10), ALLOC, ["Too many pods"], id="too-many-pods"),
        pytest.param(
            {"cpu": "1"},
            NodeUsage(pods=10),
            {"cpu": "4"},
            [],
            id="no-pods-allocatable-no-pod-limit",
        ),
        pytest.param(
            {"memory": "1"},
            NodeUsage(),
            {"cpu": "4"},
            ["Insufficient memory"],
            id="missing-allocatable-is-zero",
        ),
        pytest.param(
            {"nvidia.com/gpu": "1"},
            NodeUsage(),
            ALLOC,
            ["Insufficient nvidia.com/gpu"],
            id="extended-resource-the-node-lacks",
        ),
        pytest.param(
            {"nvidia.com/gpu": "2", "hugepages-2Mi": "4Mi"},
            NodeUsage({"nvidia.com/gpu": Decimal(1)}, 1),
            {**ALLOC, "nvidia.com/gpu": "2", "hugepages-2Mi": "8Mi"},
            ["Insufficient nvidia.com/gpu"],
            id="extended-resources-counted-like-cpu",
        ),
        pytest.param(
            {"cpu": "5", "memory": "9Gi", "ephemeral-storage": "11Gi"},
            NodeUsage(pods=10),
            ALLOC,
            [
                "Too many pods",
                "Insufficient cpu",
                "Insufficient memory",
                "Insufficient ephemeral-storage",
            ],
            id="all-in-kube-scheduler-order",
        ),
    ],
)
def test_insufficient_resources(
    requests: dict[str, str], usage: NodeUsage, allocatable: dict[str, str], expected: list[str]
) -> None:
    wanted = pod_requests(pod(containers=[container(requests)]))
    assert insufficient_resources(node(allocatable=allocatable), wanted, usage) == expected


# --- node_failure: every filter, its reason, and the order --------------------------------

UNSCHEDULABLE_TOLERATION = {
    "key": "node.kubernetes.io/unschedulable",
    "operator": "Exists",
    "effect": "NoSchedule",
}

FAILURE_CASES = [
    # (node, pod, usage, reason)
    pytest.param(node(), pod(), NodeUsage(), None, id="fits"),
    pytest.param(node(ready=None), pod(), NodeUsage(), None, id="no-ready"),
    pytest.param(node(ready="False"), pod(), NodeUsage(), None, id="not-ready"),
    pytest.param(
        node(unschedulable=True), pod(), NodeUsage(), "node(s) were unschedulable", id="cordoned"
    ),
    pytest.param(node(unschedulable=False), pod(), NodeUsage(), None, id="uncordoned"),
    pytest.param(
        node(unschedulable=True),
        pod(tolerations=[UNSCHEDULABLE_TOLERATION]),
        NodeUsage(),
        None,
        id="cordoned-tolerated",
    ),
    pytest.param(
        node(unschedulable=True),
        pod(tolerations=[{"operator": "Exists"}]),
        NodeUsage(),
        None,
        id="cordoned-tolerate-everything",
    ),
    pytest.param(
        node(unschedulable=True),
        pod(tolerations=[{**UNSCHEDULABLE_TOLERATION, "effect": "NoExecute"}]),
        NodeUsage(),
        "node(s) were unschedulable",
        id="cordoned-wrong-effect",
    ),
    pytest.param(
        node(labels={"zone": "a"}),
        pod(node_selector={"zone": "b"}),
        NodeUsage(),
        "node(s) didn't match Pod's node affinity/selector",
        id="selector",
    ),
    pytest.param(
        node(labels={"zone": "a"}),
        pod(affinity=required(term(expr("zone", "NotIn", "a")))),
        NodeUsage(),
        "node(s) didn't match Pod's node affinity/selector",
        id="affinity",
    ),
    pytest.param(
        node(taints=[taint("gpu", "true")]),
        pod(),
        NodeUsage(),
        "node(s) had untolerated taint(s)",
        id="taint",
    ),
    pytest.param(
        node(taints=[taint("dedicated", None, "NoExecute")]),
        pod(),
        NodeUsage(),
        "node(s) had untolerated taint(s)",
        id="taint-without-value",
    ),
    pytest.param(
        node(taints=[taint("soft", "x", "PreferNoSchedule")]),
        pod(),
        NodeUsage(),
        None,
        id="prefer-no-schedule",
    ),
    pytest.param(
        node(allocatable={"cpu": "1", "pods": "110"}),
        pod(containers=[container({"cpu": "2"})]),
        NodeUsage(),
        "Insufficient cpu",
        id="insufficient-cpu",
    ),
    pytest.param(
        node(allocatable={"pods": "2"}),
        pod(),
        NodeUsage(pods=2),
        "Too many pods",
        id="too-many-pods",
    ),
    pytest.param(
        node(allocatable={"cpu": "1", "memory": "1Gi", "pods": "1"}),
        pod(containers=[container({"cpu": "2", "memory": "2Gi"})]),
        NodeUsage(pods=1),
        "Too many pods, Insufficient cpu, Insufficient memory",
        id="several-resources",
    ),
    pytest.param(
        node(allocatable={"cpu": "2", "pods": "110"}),
        pod(containers=[container({"cpu": "1"})], init_containers=[container({"cpu": "3"})]),
        NodeUsage(),
        "Insufficient cpu",
        id="init-container-counts",
    ),
    pytest.param(
        node(allocatable={"cpu": "2", "pods": "110"}),
        pod(containers=[container({"cpu": "2"})], overhead={"cpu": "1m"}),
        NodeUsage(),
        "Insufficient cpu",
        id="overhead-counts",
    ),
    # The first failing filter wins, in kube-scheduler's order.
    pytest.param(
        node(ready="False", unschedulable=True),
        pod(),
        NodeUsage(),
        "node(s) were unschedulable",
        id="not-ready-is-no-filter",
    ),
    pytest.param(
        node(unschedulable=True, taints=[taint("gpu")]),
        pod(),
        NodeUsage(),
        "node(s) were unschedulable",
        id="unschedulable-before-taint",
    ),
    pytest.param(
        node(labels={"zone": "a"}, taints=[taint("gpu")]),
        pod(node_selector={"zone": "b"}),
        NodeUsage(),
        "node(s) had untolerated taint(s)",
        id="taint-before-affinity",
    ),
    pytest.param(
        node(labels={"zone": "a"}, allocatable={"pods": "1"}),
        pod(node_selector={"zone": "b"}),
        NodeUsage(pods=1),
        "node(s) didn't match Pod's node affinity/selector",
        id="affinity-before-resources",
    ),
]


@pytest.mark.parametrize(("node_", "pod_", "usage", "reason"), FAILURE_CASES)
def test_node_failure(node_: Node, pod_: Pod, usage: NodeUsage, reason: str | None) -> None:
    assert node_failure(pod_, node_, pod_requests(pod_), usage) == reason


def test_node_failure_uses_the_requests_it_is_given() -> None:
    """The cycle computes requests once per pod; node_failure must not recompute them."""
    small = node(allocatable={"cpu": "1", "pods": "110"})
    p = pod(containers=[container({"cpu": "100m"})])
    assert node_failure(p, small, {"cpu": D(2)}, NodeUsage()) == "Insufficient cpu"
    assert node_failure(p, small, pod_requests(p), NodeUsage()) is None


_placements = st.one_of(
    st.none(),
    st.tuples(
        st.sampled_from(["n1", "n2"]),
        st.dictionaries(
            st.sampled_from(["cpu", "memory"]),
            st.sampled_from([Decimal("0.1"), Decimal("0.25"), Decimal(1), Decimal(2**30)]),
            max_size=2,
        ),
        st.tuples(st.integers(0, 4000), st.integers(0, 2**31)),
    ),
)
_operations = st.lists(
    st.tuples(
        st.sampled_from(["observe", "assume", "forget", "forget_assumed"]),
        st.sampled_from(["a", "b", "c"]),
        _placements,
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(_operations)
def test_usage_tracker_matches_summing_every_pod(operations: list[tuple[str, str, Any]]) -> None:
    """The running totals equal a fresh sum: observed placements win over assumed ones."""
    tracker = UsageTracker()
    observed: dict[str, Any] = {}
    assumed: dict[str, Any] = {}
    for op, key, placement in operations:
        if op == "observe":
            tracker.observe(key, placement)
            if placement is None:
                observed.pop(key, None)
            else:
                observed[key] = placement
                assumed.pop(key, None)
        elif op == "assume":
            tracker.assume(key, placement)
            if placement is None:
                assumed.pop(key, None)
            else:
                assumed[key] = placement
        elif op == "forget":
            tracker.forget(key)
            observed.pop(key, None)
            assumed.pop(key, None)
        else:
            tracker.forget_assumed()
            assumed.clear()
        expected: dict[str, NodeUsage] = {}
        for k in {*observed, *assumed}:
            node, requests, (cpu, memory) = observed.get(k) or assumed[k]
            have = expected.get(node, NodeUsage(nonzero=(0, 0)))
            total = dict(have.requests)
            for name, value in requests.items():
                total[name] = total.get(name, Decimal(0)) + value
            had_cpu, had_memory = have.nonzero_requested()
            expected[node] = NodeUsage(total, have.pods + 1, (had_cpu + cpu, had_memory + memory))
        assert set(tracker.usage) == set(expected)
        for node, usage in expected.items():
            got = tracker.usage[node]
            assert got.pods == usage.pods
            assert got.nonzero == usage.nonzero
            names = {*got.requests, *usage.requests}
            assert all(
                got.requests.get(n, Decimal(0)) == usage.requests.get(n, Decimal(0)) for n in names
            )
        assert tracker.node_of(key) == (observed.get(key) or assumed.get(key) or (None,))[0]
