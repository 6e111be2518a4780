"""InterPodAffinity: upstream's filtering_test.go and scoring_test.go tables (each filter case
run with InterPodAffinityHostnameFastPath off and on, as upstream does), then what differs
between releases, preemption's snapshot without victims, and the parse errors' messages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from operators.api.core import Node, Pod
from operators.scheduling.plugins import Unresolvable, interpodaffinity
from operators.scheduling.plugins.interpodaffinity import (
    HOSTNAME,
    REASON_AFFINITY,
    REASON_ANTI_AFFINITY,
    REASON_EXISTING_ANTI_AFFINITY,
    AffinityParseError,
    FilterState,
    ScoreState,
)
from operators.scheduling.snapshot import Snapshot, snapshot_of, without_pods
from tests.unit.scheduling.builders import node

J = dict[str, Any]
AFF = REASON_AFFINITY
ANTI = REASON_ANTI_AFFINITY
EXISTING = REASON_EXISTING_ANTI_AFFINITY
SKIP = "skip"

#: scoring_test.go's namespaces (the filter tests of one node use them too).
NAMESPACES: dict[str, Mapping[str, str]] = {
    "subteam1.team1": {"team": "team1"},
    "subteam2.team1": {"team": "team1"},
    "subteam1.team2": {"team": "team2"},
    "subteam2.team2": {"team": "team2"},
}

# --- builders (upstream's st.MakePod wrappers, as JSON) -------------------------------------


def expr(key: str, operator: str, *values: str) -> J:
    out: J = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def term(
    topology: str,
    *exprs: J,
    namespaces: Sequence[str] = (),
    ns_selector: J | None = None,
    selector: J | None = None,
) -> J:
    """A PodAffinityTerm whose labelSelector has ``exprs`` (or is ``selector``)."""
    out: J = {"topologyKey": topology}
    out["labelSelector"] = selector if selector is not None else {"matchExpressions": list(exprs)}
    if namespaces:
        out["namespaces"] = list(namespaces)
    if ns_selector is not None:
        out["namespaceSelector"] = ns_selector
    return out


def in_(key: str, topology: str, *values: str) -> J:
    return term(topology, expr(key, "In", *values))


def not_in(key: str, topology: str, *values: str) -> J:
    return term(topology, expr(key, "NotIn", *values))


def exists(key: str, topology: str) -> J:
    return term(topology, expr(key, "Exists"))


def weighted(weight: int, t: J) -> J:
    return {"weight": weight, "podAffinityTerm": t}


def pod(
    name: str = "p",
    *,
    ns: str = "",
    labels: Mapping[str, str] | None = None,
    on: str | None = None,
    affinity: Sequence[J] = (),
    anti: Sequence[J] = (),
    preferred: Sequence[J] = (),
    anti_preferred: Sequence[J] = (),
    raw_affinity: J | None = None,
    conditions: Sequence[J] = (),
) -> Pod:
    meta: J = {"name": name, "uid": f"uid-{name}", "labels": dict(labels or {})}
    if ns:
        meta["namespace"] = ns
    spec: J = {"containers": [{"name": "c"}]}
    if on:
        spec["nodeName"] = on
    aff: J = {}
    if affinity or preferred:
        aff["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": list(affinity),
            "preferredDuringSchedulingIgnoredDuringExecution": list(preferred),
        }
    if anti or anti_preferred:
        aff["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": list(anti),
            "preferredDuringSchedulingIgnoredDuringExecution": list(anti_preferred),
        }
    if raw_affinity is not None:
        aff = raw_affinity
    if aff:
        spec["affinity"] = aff
    status: J = {"conditions": list(conditions)} if conditions else {}
    return Pod.load({"metadata": meta, "spec": spec, "status": status})


def nodes(*specs: tuple[str, Mapping[str, str]]) -> list[Node]:
    return [node(name, labels=labels) for name, labels in specs]


def snapshot(
    placed: Sequence[Pod],
    node_list: Sequence[Node],
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
) -> Snapshot:
    return snapshot_of(
        node_list, [(p.spec.node_name or "", p) for p in placed], namespaces or NAMESPACES
    )


def run_filter(
    incoming: Pod,
    placed: Sequence[Pod],
    node_list: Sequence[Node],
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    **flags: bool,
) -> str | list[str | None]:
    """PreFilter's answer ("skip", or Unresolvable's message) or each node's Filter."""
    snap = snapshot(placed, node_list, namespaces)
    state = interpodaffinity.pre_filter(incoming, snap, **flags)
    if state is None:
        return SKIP
    if isinstance(state, Unresolvable):
        return state.message
    return [interpodaffinity.filter(state, incoming, n) for n in node_list]


FAST_PATH = pytest.mark.parametrize("fast_path", [False, True], ids=["1.37", "fastpath"])

# --- TestRequiredAffinitySingleNode ---------------------------------------------------------

SERVICE = {"service": "securityscan"}
SECURITY = {"security": "S1"}
NODE1 = nodes(("node1", {"region": "r1", "zone": "z11"}))
EXISTING_POD = pod("existing", labels=SERVICE, on="node1")
TEAM1 = {"matchExpressions": [expr("team", "In", "team1")]}
BAD = "{{.bad-value.}}"
BAD_VALUE = (
    'parsing pod: requiredAffinityTerms: values[0][service]: Invalid value: "{{.bad-value.}}": '
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
SECURITYSCAN_IN = expr("service", "In", "securityscan", "value2")

# (name, incoming pod, placed pods, want: "skip", the PreFilter message, or node1's reason)
SINGLE_NODE: list[tuple[str, Pod, list[Pod], str | None]] = [
    ("no required pod affinity and no existing pods", pod(), [], SKIP),
    (
        "In operator in PodAffinity matches the existing pod",
        pod(labels=SECURITY, affinity=[in_("service", "region", "securityscan", "value2")]),
        [EXISTING_POD],
        None,
    ),
    (
        "NotIn operator in PodAffinity matches the existing pod",
        pod(labels=SECURITY, affinity=[not_in("service", "region", "securityscan3", "value3")]),
        [EXISTING_POD],
        None,
    ),
    (
        "PodAffinity does not match because of a different namespace",
        pod(labels=SECURITY, affinity=[term("", SECURITYSCAN_IN, namespaces=["DiffNameSpace"])]),
        [pod("other", ns="ns", labels=SERVICE, on="node1")],
        AFF,
    ),
    (
        "PodAffinity's labelSelector does not match the existing pod",
        pod(labels=SERVICE, affinity=[in_("service", "", "antivirusscan", "value2")]),
        [EXISTING_POD],
        AFF,
    ),
    (
        "different label operators in several required terms",
        pod(
            labels=SECURITY,
            affinity=[
                term("region", expr("service", "Exists"), expr("wrongkey", "DoesNotExist")),
                term(
                    "region",
                    expr("service", "In", "securityscan"),
                    expr("service", "NotIn", "WrongValue"),
                ),
            ],
        ),
        [EXISTING_POD],
        None,
    ),
    (
        "matchExpressions are ANDed: one item does not match",
        pod(
            labels=SECURITY,
            affinity=[
                term("region", expr("service", "Exists"), expr("wrongkey", "DoesNotExist")),
                term(
                    "region",
                    expr("service", "In", "securityscan2"),
                    expr("service", "NotIn", "WrongValue"),
                ),
            ],
        ),
        [EXISTING_POD],
        AFF,
    ),
    (
        "PodAffinity and PodAntiAffinity both satisfied",
        pod(
            labels=SECURITY,
            affinity=[in_("service", "region", "securityscan", "value2")],
            anti=[in_("service", "node", "antivirusscan", "value2")],
        ),
        [EXISTING_POD],
        None,
    ),
    (
        "PodAffinity, PodAntiAffinity and the existing pod's anti-affinity satisfied",
        pod(
            labels=SECURITY,
            affinity=[in_("service", "region", "securityscan", "value2")],
            anti=[in_("service", "node", "antivirusscan", "value2")],
        ),
        [
            pod(
                "existing",
                labels=SERVICE,
                on="node1",
                anti=[in_("service", "node", "antivirusscan", "value2")],
            )
        ],
        None,
    ),
    (
        "PodAffinity satisfied but PodAntiAffinity not",
        pod(
            labels=SECURITY,
            affinity=[in_("service", "region", "securityscan", "value2")],
            anti=[in_("service", "zone", "securityscan", "value2")],
        ),
        [EXISTING_POD],
        ANTI,
    ),
    (
        "the pod's terms satisfied but not the existing pod's anti-affinity",
        pod(
            labels=SERVICE,
            affinity=[in_("service", "region", "securityscan", "value2")],
            anti=[in_("service", "node", "antivirusscan", "value2")],
        ),
        [
            pod(
                "existing",
                labels=SERVICE,
                on="node1",
                anti=[in_("service", "zone", "securityscan", "value2")],
            )
        ],
        EXISTING,
    ),
    (
        "the pod matches its own NotIn term but the matching pod's node is unknown",
        pod(labels=SERVICE, affinity=[not_in("service", "region", "securityscan", "value2")]),
        [pod("elsewhere", labels=SERVICE, on="node2")],
        AFF,
    ),
    (
        "the existing pod's anti-affinity holds for a pod without terms",
        pod(labels=SERVICE),
        [
            pod(
                "existing",
                labels=SERVICE,
                on="node1",
                anti=[in_("service", "zone", "securityscan", "value2")],
            )
        ],
        EXISTING,
    ),
    (
        "the existing pod's NotIn anti-affinity does not match: nothing to check",
        pod(labels=SERVICE),
        [
            pod(
                "existing",
                labels=SERVICE,
                on="node1",
                anti=[not_in("service", "zone", "securityscan", "value2")],
            )
        ],
        SKIP,
    ),
    (
        "the existing pod's anti-affinity holds, the incoming pod's does not",
        pod(labels=SERVICE, anti=[exists("service", "region"), exists("security", "region")]),
        [pod("existing", labels=SECURITY, on="node1", anti=[exists("security", "zone")])],
        ANTI,
    ),
    (
        "symmetry a1: terms partially match each other",
        pod(labels=SERVICE, anti=[exists("service", "zone"), exists("security", "zone")]),
        [pod("existing", labels=SECURITY, on="node1", anti=[exists("security", "zone")])],
        ANTI,
    ),
    (
        "symmetry a2: terms partially match each other",
        pod(labels=SECURITY, anti=[exists("security", "zone")]),
        [
            pod(
                "existing",
                labels=SERVICE,
                on="node1",
                anti=[exists("service", "zone"), exists("security", "zone")],
            )
        ],
        EXISTING,
    ),
    (
        "symmetry b1: terms partially match each other",
        pod(labels={"abc": "", "xyz": ""}, anti=[exists("abc", "zone"), exists("def", "zone")]),
        [
            pod(
                "existing",
                labels={"def": "", "xyz": ""},
                on="node1",
                anti=[exists("abc", "zone"), exists("def", "zone")],
            )
        ],
        ANTI,
    ),
    (
        "symmetry b2: terms partially match each other",
        pod(labels={"def": "", "xyz": ""}, anti=[exists("abc", "zone"), exists("def", "zone")]),
        [
            pod(
                "existing",
                labels={"abc": "", "xyz": ""},
                on="node1",
                anti=[exists("abc", "zone"), exists("def", "zone")],
            )
        ],
        ANTI,
    ),
    (
        "invalid label value in the first affinity term fails PreFilter",
        pod(
            labels=SERVICE,
            affinity=[
                in_("service", "region", BAD),
                in_("service", "node", "antivirusscan", "value2"),
            ],
        ),
        [],
        BAD_VALUE,
    ),
    (
        "invalid label value in the second affinity term fails PreFilter",
        pod(
            labels=SERVICE, affinity=[in_("service", "region", "foo"), in_("service", "node", BAD)]
        ),
        [],
        BAD_VALUE,
    ),
    (
        "affinity with a NamespaceSelector",
        pod(labels=SECURITY, affinity=[term("region", SECURITYSCAN_IN, ns_selector=TEAM1)]),
        [pod("other", ns="subteam1.team1", labels=SERVICE, on="node1")],
        None,
    ),
    (
        "affinity with a non-matching NamespaceSelector",
        pod(labels=SECURITY, affinity=[term("region", SECURITYSCAN_IN, ns_selector=TEAM1)]),
        [pod("other", ns="subteam1.team2", labels=SERVICE, on="node1")],
        AFF,
    ),
    (
        "anti-affinity with a matching NamespaceSelector",
        pod(
            ns="subteam1.team1",
            labels=SECURITY,
            anti=[term("zone", SECURITYSCAN_IN, ns_selector=TEAM1)],
        ),
        [pod("other", ns="subteam2.team1", labels=SERVICE, on="node1")],
        ANTI,
    ),
    (
        "anti-affinity with an empty NamespaceSelector (all namespaces)",
        pod(
            ns="subteam1.team1",
            labels=SECURITY,
            anti=[term("zone", SECURITYSCAN_IN, ns_selector={})],
        ),
        [pod("other", ns="subteam2.team1", labels=SERVICE, on="node1")],
        ANTI,
    ),
    (
        "anti-affinity with a non-matching NamespaceSelector",
        pod(
            ns="subteam1.team1",
            labels=SECURITY,
            anti=[term("zone", SECURITYSCAN_IN, ns_selector=TEAM1)],
        ),
        [pod("other", ns="subteam1.team2", labels=SERVICE, on="node1")],
        None,
    ),
]


@FAST_PATH
@pytest.mark.parametrize(
    ("incoming", "placed", "want"), [c[1:] for c in SINGLE_NODE], ids=[c[0] for c in SINGLE_NODE]
)
def test_required_affinity_single_node(
    incoming: Pod, placed: list[Pod], want: str | None, fast_path: bool
) -> None:
    got = run_filter(incoming, placed, NODE1, hostname_fast_path=fast_path)
    assert got == (want if want in (SKIP, BAD_VALUE) else [want])


# --- TestRequiredAffinityMultipleNodes ------------------------------------------------------

CHINA = {"region": "China"}
CHINA_AZ1 = {"region": "China", "az": "az1"}
INDIA = {"region": "India"}
FOO_BAR = {"foo": "bar"}


def abc(zone: str = "z1", region: str = "r1", host: str = "nodeA") -> dict[str, str]:
    return {"region": region, "zone": zone, "hostname": host}


TWO_ZONES = nodes(("nodeA", abc("z1")), ("nodeB", abc("z2", host="nodeB")))
ONE_ZONE = nodes(("nodeA", abc("z1")), ("nodeB", abc("z1", host="nodeB")))
CHINA_INDIA = nodes(("nodeA", CHINA), ("nodeB", CHINA_AZ1), ("nodeC", INDIA))
HOSTS = nodes(("nodeA", {HOSTNAME: "nodeA"}), ("nodeB", {HOSTNAME: "nodeB"}))
NS1: dict[str, Mapping[str, str]] = {"NS1": {}}

# (name, incoming pod, placed pods, nodes, want: "skip" or each node's reason)
MULTIPLE_NODES: list[tuple[str, Pod, list[Pod], list[Node], str | list[str | None]]] = [
    (
        "nodes sharing the matching pod's region value all pass",
        pod(affinity=[in_("foo", "region", "bar")]),
        [pod("p1", labels=FOO_BAR, on="node1")],
        nodes(("node1", CHINA), ("node2", CHINA_AZ1), ("node3", INDIA)),
        [None, None, AFF],
    ),
    (
        "the first pod of a collection with affinity to itself goes anywhere",
        pod(
            labels={"foo": "bar", "service": "securityscan"},
            affinity=[in_("foo", "zone", "bar"), in_("service", "zone", "securityscan")],
        ),
        [pod("p1", labels=FOO_BAR, on="nodeA")],
        nodes(
            ("nodeA", {"zone": "az1", "hostname": "h1"}),
            ("nodeB", {"zone": "az2", "hostname": "h2"}),
        ),
        [None, None],
    ),
    (
        "the first pod of a collection needs nodes with the topology keys",
        pod(
            labels={"foo": "bar", "service": "securityscan"},
            affinity=[in_("foo", "zone", "bar"), in_("service", "zone", "securityscan")],
        ),
        [pod("p1", labels=FOO_BAR, on="nodeA")],
        nodes(
            ("nodeA", {"zoneLabel": "az1", "hostname": "h1"}),
            ("nodeB", {"zoneLabel": "az2", "hostname": "h2"}),
        ),
        [AFF, AFF],
    ),
    (
        "anti-affinity refuses every node of the matching pod's region",
        pod(anti=[in_("foo", "region", "abc")]),
        [pod("p1", labels={"foo": "abc"}, on="nodeA")],
        nodes(
            ("nodeA", {"region": "r1", "hostname": "nodeA"}),
            ("nodeB", {"region": "r1", "hostname": "nodeB"}),
        ),
        [ANTI, ANTI],
    ),
    (
        "anti-affinity matches a pod when any of its terms does",
        pod(anti=[in_("foo", "region", "abc"), in_("service", "zone", "securityscan")]),
        [pod("p1", labels={"foo": "abc", "service": "securityscan"}, on="nodeA")],
        TWO_ZONES,
        [ANTI, ANTI],
    ),
    (
        "anti-affinity leaves the other region",
        pod(anti=[in_("foo", "region", "abc")]),
        [pod("p1", labels={"foo": "abc"}, on="nodeA")],
        CHINA_INDIA,
        [ANTI, ANTI, None],
    ),
    (
        "an existing pod's anti-affinity in another namespace does not select the pod",
        pod(ns="NS1", labels={"foo": "123"}, anti=[in_("foo", "region", "bar")]),
        [
            pod("p1", ns="NS1", labels=FOO_BAR, on="nodeA"),
            pod("p2", ns="NS2", on="nodeC", anti=[in_("foo", "region", "123")]),
        ],
        CHINA_INDIA,
        [ANTI, ANTI, None],
    ),
    (
        "an existing pod's term on a topology key no node has counts nothing",
        pod(labels={"foo": ""}),
        [pod("p1", on="nodeA", anti=[exists("foo", "invalid-node-label")])],
        ONE_ZONE,
        SKIP,
    ),
    (
        "the pod's anti-affinity on a topology key no node has refuses nothing",
        pod(on="nodeA", anti=[exists("foo", "invalid-node-label")]),
        [pod("p1", labels={"foo": ""}, on="nodeA")],
        ONE_ZONE,
        [None, None],
    ),
    (
        "each existing pod's term refuses the pod on every node",
        pod(labels={"foo": "", "bar": ""}),
        [
            pod("p1", on="nodeA", anti=[exists("foo", "zone")]),
            pod("p2", on="nodeA", anti=[exists("bar", "region")]),
        ],
        TWO_ZONES,
        [EXISTING, EXISTING],
    ),
    (
        "the pod's anti-affinity violated by one term on each node",
        pod(anti=[exists("foo", "zone"), exists("bar", "region")]),
        [pod("p1", labels={"foo": ""}, on="nodeA"), pod("p2", labels={"bar": ""}, on="nodeB")],
        TWO_ZONES,
        [ANTI, ANTI],
    ),
    (
        "existing pod's terms: one has a topology key no node has",
        pod(labels={"foo": "", "bar": ""}),
        [pod("p1", on="nodeA", anti=[exists("foo", "invalid-node-label"), exists("bar", "zone")])],
        TWO_ZONES,
        [EXISTING, None],
    ),
    (
        "the pod's terms: one has a topology key no node has",
        pod(anti=[exists("foo", "invalid-node-label"), exists("bar", "zone")]),
        [pod("podA", labels={"foo": "", "bar": ""}, on="nodeA")],
        TWO_ZONES,
        [ANTI, None],
    ),
    (
        "existing pod's terms all on keys the nodes have",
        pod(labels={"foo": "", "bar": ""}),
        [pod("p1", on="nodeA", anti=[exists("foo", "region"), exists("bar", "zone")])],
        TWO_ZONES,
        [EXISTING, EXISTING],
    ),
    (
        "the pod's terms all on keys the nodes have",
        pod(anti=[exists("foo", "region"), exists("bar", "zone")]),
        [pod("p1", labels={"foo": "", "bar": ""}, on="nodeA")],
        TWO_ZONES,
        [ANTI, ANTI],
    ),
    (
        "existing pods on two nodes refuse the pod; the third zone is free",
        pod(labels={"foo": "", "bar": ""}),
        [
            pod("p1", on="nodeA", anti=[exists("foo", "zone"), exists("labelA", "zone")]),
            pod("p2", on="nodeB", anti=[exists("bar", "zone"), exists("labelB", "zone")]),
        ],
        nodes(
            ("nodeA", abc("z1")),
            ("nodeB", abc("z2", host="nodeB")),
            ("nodeC", abc("z3", host="nodeC")),
        ),
        [EXISTING, EXISTING, None],
    ),
    (
        "one pod matches all affinity terms, and every topology key matches",
        pod(affinity=[exists("foo", "region"), exists("bar", "zone")]),
        [pod("pod1", labels={"foo": "", "bar": ""}, on="nodeA")],
        ONE_ZONE,
        [None, None],
    ),
    (
        "affinity terms must be matched by the same pod",
        pod(affinity=[exists("foo", "region"), exists("bar", "zone")]),
        [pod("pod1", labels={"foo": ""}, on="nodeA"), pod("pod2", labels={"bar": ""}, on="nodeB")],
        TWO_ZONES,
        [AFF, AFF],
    ),
    (
        "host-scoped affinity",
        pod(affinity=[exists("foo", HOSTNAME)]),
        [pod("pod1", labels={"foo": ""}, on="nodeA")],
        HOSTS,
        [None, AFF],
    ),
    (
        "host-scoped anti-affinity",
        pod(anti=[exists("foo", HOSTNAME)]),
        [pod("pod1", labels={"foo": ""}, on="nodeA")],
        HOSTS,
        [ANTI, None],
    ),
]


@FAST_PATH
@pytest.mark.parametrize(
    ("incoming", "placed", "node_list", "want"),
    [c[1:] for c in MULTIPLE_NODES],
    ids=[c[0] for c in MULTIPLE_NODES],
)
def test_required_affinity_multiple_nodes(
    incoming: Pod,
    placed: list[Pod],
    node_list: list[Node],
    want: str | list[str | None],
    fast_path: bool,
) -> None:
    assert run_filter(incoming, placed, node_list, NS1, hostname_fast_path=fast_path) == want


@FAST_PATH
def test_multiple_affinity_terms_require_a_single_matching_pod(fast_path: bool) -> None:
    """TestMultipleAffinityTermsRequireSingleMatchingPod."""
    both = [in_("foo", HOSTNAME, "bar"), in_("baz", HOSTNAME, "qux")]
    incoming = pod("pod-1", ns="default", affinity=both)
    pod_a = pod("podA", ns="default", labels={"foo": "bar"}, on="node-1")
    pod_b = pod("podB", ns="default", labels={"baz": "qux"}, on="node-1")
    pod_c = pod("podC", ns="default", labels={"foo": "bar", "baz": "qux"}, on="node-3")
    node_list = nodes(*((f"node-{i}", {HOSTNAME: f"node-{i}"}) for i in (1, 2, 3)))
    namespaces: dict[str, Mapping[str, str]] = {"default": {}}
    got = run_filter(
        incoming, [pod_a, pod_b, pod_c], node_list, namespaces, hostname_fast_path=fast_path
    )
    assert got == [AFF, AFF, None]
    itself = pod("pod-1", ns="default", labels={"foo": "bar", "baz": "qux"}, affinity=both)
    got = run_filter(itself, [pod_a, pod_b], node_list, namespaces, hostname_fast_path=fast_path)
    assert got == [None, None, None]


@FAST_PATH
def test_fast_track_inter_pod_affinity(fast_path: bool) -> None:
    """TestFastTrackInterPodAffinity: zone anti-affinity, hostname anti-affinity, and a
    DoesNotExist namespaceSelector that leaves a namespace with the label alone."""
    zone = "topology.kubernetes.io/zone"
    node_list = nodes(
        ("node-1", {HOSTNAME: "node-1", zone: "zone-a"}),
        ("node-2", {HOSTNAME: "node-2", zone: "zone-b"}),
    )
    placed = [
        pod("no-rules-foo", ns="default", labels={"app": "foo"}, on="node-1"),
        pod("no-rules-bar", ns="default", labels={"app": "bar"}, on="node-2"),
        pod("in-team-ns", ns="blue-ns", labels={"app": "blocked", "team": "blue"}, on="node-1"),
    ]
    namespaces = {"default": {}, "other": {}, "blue-ns": {"team": "blue"}}
    zone_anti = pod("pod-1", ns="default", labels={"app": "foo"}, anti=[in_("app", zone, "foo")])
    got = run_filter(zone_anti, placed, node_list, namespaces, hostname_fast_path=fast_path)
    assert got == [ANTI, None]
    host_anti = pod(
        "pod-2", ns="default", labels={"app": "bar"}, anti=[in_("app", HOSTNAME, "bar")]
    )
    got = run_filter(host_anti, placed, node_list, namespaces, hostname_fast_path=fast_path)
    assert got == [None, ANTI]
    no_team = {"matchExpressions": [expr("team", "DoesNotExist")]}
    ns_anti = pod(
        "pod-3",
        ns="other",
        labels={"app": "baz"},
        anti=[term(zone, expr("app", "In", "blocked"), ns_selector=no_team)],
    )
    got = run_filter(ns_anti, placed, node_list, namespaces, hostname_fast_path=fast_path)
    assert got == [None, None]


@FAST_PATH
def test_victims_gone_let_the_first_pod_of_a_group_in(fast_path: bool) -> None:
    """TestRemovePodHostScopedAffinityCount, as preemption asks: a snapshot without the
    victim, PreFilter again."""
    pending = pod("pending", labels=FOO_BAR, affinity=[in_("foo", HOSTNAME, "bar")])
    victim = pod("existing", labels=FOO_BAR, on="nodeA")
    full = snapshot([victim], HOSTS)
    state = interpodaffinity.pre_filter(pending, full, hostname_fast_path=fast_path)
    assert isinstance(state, FilterState)
    assert [interpodaffinity.filter(state, pending, n) for n in HOSTS] == [None, AFF]
    trial = without_pods(full, {"uid-existing"})
    state = interpodaffinity.pre_filter(pending, trial, hostname_fast_path=fast_path)
    assert isinstance(state, FilterState)
    assert [interpodaffinity.filter(state, pending, n) for n in HOSTS] == [None, None]


@FAST_PATH
def test_victims_gone_free_anti_affinity(fast_path: bool) -> None:
    incoming = pod("in", labels={"app": "x"})
    blocker = pod("blocker", on="nodeA", anti=[in_("app", HOSTNAME, "x")])
    full = snapshot([blocker], HOSTS)
    state = interpodaffinity.pre_filter(incoming, full, hostname_fast_path=fast_path)
    assert isinstance(state, FilterState)
    assert [interpodaffinity.filter(state, incoming, n) for n in HOSTS] == [EXISTING, None]
    assert interpodaffinity.resolvable(EXISTING)
    assert interpodaffinity.resolvable(ANTI)
    assert not interpodaffinity.resolvable(AFF)
    trial = without_pods(full, {"uid-blocker"})
    assert interpodaffinity.pre_filter(incoming, trial, hostname_fast_path=fast_path) is None


def test_getting_the_counts() -> None:
    """TestGetTPMapMatchingIncomingAffinityAntiAffinity and TestPreFilterStateAddRemovePod's
    end states: a pod matching all affinity terms counts once per term."""
    node_a = nodes(("nodeA", {HOSTNAME: "nodeA"}))
    pair = (HOSTNAME, "nodeA")
    incoming = pod(
        affinity=[exists("aaa", HOSTNAME), exists("bbb", HOSTNAME)],
        anti=[exists("aaa", HOSTNAME)],
    )
    ab = pod("ab", labels={"aaa": "", "bbb": ""}, on="nodeA")
    state = interpodaffinity.pre_filter(incoming, snapshot([ab], node_a))
    assert isinstance(state, FilterState)
    assert state.affinity_counts == {pair: 2}
    assert state.anti_affinity_counts == {pair: 1}
    only_b = pod("b", labels={"bbb": ""}, on="nodeA")
    state = interpodaffinity.pre_filter(incoming, snapshot([only_b], node_a))
    assert isinstance(state, FilterState)
    assert state.affinity_counts == {}
    assert state.anti_affinity_counts == {}

    foo_bar = {"matchExpressions": [expr("foo", "In", "bar")]}
    region_anti = [term("region", selector=foo_bar)]
    pending = pod("pending", labels=FOO_BAR, anti=region_anti)
    three = nodes(
        ("nodeA", {"region": "r1", "zone": "z11"}),
        ("nodeB", {"region": "r1", "zone": "z12"}),
        ("nodeC", {"region": "r2", "zone": "z21"}),
    )
    placed = [
        pod("p1", labels=FOO_BAR, on="nodeA"),
        pod("p2", on="nodeC", anti=region_anti),
        pod("added", labels=FOO_BAR, on="nodeB", anti=region_anti),
    ]
    state = interpodaffinity.pre_filter(pending, snapshot(placed, three))
    assert isinstance(state, FilterState)
    assert state.anti_affinity_counts == {("region", "r1"): 2}
    assert state.existing_anti_affinity_counts == {("region", "r1"): 1, ("region", "r2"): 1}


# --- what differs between releases, and the switches -----------------------------------------


def test_hostname_fast_path_first_pod_of_a_group() -> None:
    """The fast path allows the first pod of a hostname-only group while no pod matches
    anywhere; 1.37's default counts only matching pods on nodes with the hostname label."""
    pending = pod("pending", labels=FOO_BAR, affinity=[in_("foo", HOSTNAME, "bar")])
    unlabelled = pod("other", labels=FOO_BAR, on="nodeA")
    node_list = nodes(("nodeA", {}), ("nodeB", {HOSTNAME: "nodeB"}))
    assert run_filter(pending, [unlabelled], node_list) == [AFF, None]
    assert run_filter(pending, [unlabelled], node_list, hostname_fast_path=True) == [AFF, AFF]


def test_hostname_fast_path_must_check_existing_hostname_terms() -> None:
    """A placed pod whose only anti-affinity is per hostname: no Skip under the fast path
    (it is checked on the node), and the same answer."""
    incoming = pod(labels={"app": "x"})
    other = pod("other", labels={"app": "y"})
    placed = [pod("blocker", on="nodeA", anti=[in_("app", HOSTNAME, "y")])]
    assert run_filter(incoming, placed, HOSTS) == SKIP
    assert run_filter(incoming, placed, HOSTS, hostname_fast_path=True) == [None, None]
    assert run_filter(other, placed, HOSTS, hostname_fast_path=True) == [EXISTING, None]


def test_1_36_keeps_the_incoming_namespace_selector() -> None:
    """1.36 left the unrolled namespaceSelector on the incoming pod's terms: a NotIn selector
    then matched the empty labels it was given, in every namespace."""
    not_team1 = {"matchExpressions": [expr("team", "NotIn", "team1")]}
    incoming = pod(
        ns="subteam1.team1",
        labels=SECURITY,
        anti=[term("zone", SECURITYSCAN_IN, ns_selector=not_team1)],
    )
    same_team = [pod("other", ns="subteam2.team1", labels=SERVICE, on="node1")]
    assert run_filter(incoming, same_team, NODE1) == [None]
    assert run_filter(incoming, same_team, NODE1, keep_namespace_selector=True) == [ANTI]


def test_deferred_resize_skips_with_the_gate() -> None:
    deferred = [{"type": "PodResizePending", "status": "True", "reason": "Deferred"}]
    incoming = pod(labels=SERVICE, anti=[exists("service", "zone")], conditions=deferred)
    assert run_filter(incoming, [EXISTING_POD], NODE1) == [ANTI]
    assert run_filter(incoming, [EXISTING_POD], NODE1, skip_deferred_resize=True) == SKIP


def test_no_pod_work_without_terms() -> None:
    """A pod without terms in a cluster without anti-affinity reads no node's pods."""

    def pods_on(name: str) -> Sequence[Pod]:
        raise AssertionError(f"pods_on({name!r}) read")

    snap = Snapshot(nodes=NODE1, pods_on=pods_on)
    assert interpodaffinity.pre_filter(pod(labels=SERVICE), snap) is None
    preferred_only = pod(preferred=[weighted(1, exists("x", "zone"))])
    assert interpodaffinity.pre_filter(preferred_only, snap) is None
    assert interpodaffinity.pre_score(pod(labels=SERVICE), snap) is None


def test_match_label_keys_are_not_read_but_can_be_applied() -> None:
    """The scheduler reads only the labelSelector; the API server merges the keys into it."""
    keyed = term("zone", expr("app", "Exists"))
    keyed["matchLabelKeys"] = ["version"]
    keyed["mismatchLabelKeys"] = ["tenant", "absent"]
    incoming = pod(labels={"app": "a", "version": "v1", "tenant": "t1"}, anti=[keyed])
    placed = [pod("old", labels={"app": "a", "version": "v0", "tenant": "t2"}, on="node1")]
    assert run_filter(incoming, placed, NODE1) == [ANTI]
    merged = interpodaffinity.apply_label_keys(incoming)
    assert run_filter(merged, placed, NODE1) == [None]
    affinity = merged.spec.affinity
    assert affinity is not None
    assert affinity.pod_anti_affinity is not None
    selector = affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution[
        0
    ].label_selector
    assert selector is not None
    assert [(r.key, r.operator, r.values) for r in selector.match_expressions] == [
        ("app", "Exists", []),
        ("version", "In", ["v1"]),
        ("tenant", "NotIn", ["t1"]),
    ]
    original = incoming.spec.affinity
    assert original is not None
    assert original.pod_anti_affinity is not None
    first = original.pod_anti_affinity.required_during_scheduling_ignored_during_execution[0]
    assert first.label_selector is not None
    assert len(first.label_selector.match_expressions) == 1


def test_nil_and_empty_label_selectors() -> None:
    """A term without labelSelector selects nothing; an empty one every pod."""
    nil_term = {"topologyKey": "zone"}
    empty_term = term("zone", selector={})
    placed = [pod("any", labels={"x": "y"}, on="node1")]
    assert run_filter(pod(anti=[nil_term]), placed, NODE1) == [None]
    assert run_filter(pod(anti=[empty_term]), placed, NODE1) == [ANTI]
    assert run_filter(pod(labels={"a": "b"}, affinity=[nil_term]), [], NODE1) == [AFF]
    assert run_filter(pod(labels={"a": "b"}, affinity=[empty_term]), [], NODE1) == [None]


def test_unknown_namespace_has_no_labels() -> None:
    """A placed pod's namespaceSelector sees no labels for an unknown namespace: DoesNotExist
    selects it."""
    no_team = {"matchExpressions": [expr("team", "DoesNotExist")]}
    placed = [pod("p", on="node1", anti=[term("zone", expr("a", "Exists"), ns_selector=no_team)])]
    assert run_filter(pod(ns="nowhere", labels={"a": ""}), placed, NODE1) == [EXISTING]
    assert run_filter(pod(ns="subteam1.team1", labels={"a": ""}), placed, NODE1) == SKIP


# --- parse errors ---------------------------------------------------------------------------

PARSE_ERRORS: list[tuple[str, Pod, str]] = [
    (
        "invalid operator",
        pod(affinity=[term("zone", expr("a", "Equals", "b"))]),
        'parsing pod: requiredAffinityTerms: "Equals" is not a valid label selector operator',
    ),
    (
        "In without values",
        pod(anti=[term("zone", expr("a", "In"))]),
        "parsing pod: requiredAntiAffinityTerms: values: Invalid value: null: for 'in', 'notin' "
        "operators, values set can't be empty",
    ),
    (
        "Exists with values, two groups",
        pod(
            preferred=[weighted(1, term("zone", expr("a", "Exists", "b")))],
            anti_preferred=[weighted(1, term("zone", expr("a/b/c", "Exists")))],
        ),
        'parsing pod: [preferredAffinityTerms: values: Invalid value: ["b"]: values set must be '
        "empty for exists and does not exist, preferredAntiAffinityTerms: key: Invalid value: "
        "\"a/b/c\": a valid label key must consist of alphanumeric characters, '-', '_' or '.', "
        "and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  "
        "or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') "
        "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')]",
    ),
    (
        "invalid namespaceSelector and key prefix",
        pod(
            affinity=[
                term(
                    "zone",
                    expr("a", "Exists"),
                    ns_selector={"matchLabels": {"Bad_Prefix/k": "v"}},
                )
            ]
        ),
        'parsing pod: requiredAffinityTerms: key: Invalid value: "Bad_Prefix/k": prefix part a '
        "lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
        "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
        "used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
    ),
    (
        "two errors of one requirement",
        pod(affinity=[term("zone", expr("", "In"))]),
        'parsing pod: requiredAffinityTerms: [key: Invalid value: "": name part must be '
        "non-empty; name part must consist of alphanumeric characters, '-', '_' or '.', and must "
        "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
        "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), "
        "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty]",
    ),
]


@pytest.mark.parametrize(
    ("incoming", "want"), [c[1:] for c in PARSE_ERRORS], ids=[c[0] for c in PARSE_ERRORS]
)
def test_parse_errors(incoming: Pod, want: str) -> None:
    assert run_filter(incoming, [], NODE1) == want


def test_a_placed_pods_invalid_list_is_dropped() -> None:
    """The cache keeps a placed pod whose terms fail to parse, without the failing list."""
    placed = [
        pod(
            "bad",
            on="node1",
            anti=[exists("a", "zone"), term("zone", expr("b", "Bogus"))],
            affinity=[exists("a", "zone")],
        )
    ]
    incoming = pod(labels={"a": "", "b": ""})
    assert run_filter(incoming, placed, NODE1) == SKIP
    state = interpodaffinity.pre_score(incoming, snapshot(placed, NODE1))
    assert state == ScoreState({"zone": {"z11": 1}})


# --- TestPreferredAffinity ------------------------------------------------------------------

AZ1 = {"az": "az1"}
AZ2 = {"az": "az2"}
S1 = {"security": "S1"}
S2 = {"security": "S2"}


def security_in(topology: str, *values: str, **kw: Any) -> J:
    return term(topology, expr("security", "In", *values), **kw)


STAY_WITH_S1_IN_REGION = [weighted(5, security_in("region", "S1"))]
STAY_WITH_S2_IN_REGION = [weighted(6, security_in("region", "S2"))]
AFFINITY3 = [
    weighted(8, term("region", expr("security", "NotIn", "S1"), expr("security", "In", "S2"))),
    weighted(2, term("region", expr("security", "Exists"), expr("wrongkey", "DoesNotExist"))),
]
HARD_AFFINITY = [
    security_in("region", "S1", "value2"),
    term("region", expr("security", "Exists"), expr("wrongkey", "DoesNotExist")),
]
AWAY_FROM_S1_IN_AZ = [weighted(5, security_in("az", "S1"))]
AWAY_FROM_S2_IN_AZ = [weighted(5, security_in("az", "S2"))]
NS_SELECTED = [
    weighted(5, security_in("region", "S1", namespaces=["subteam2.team2"], ns_selector=TEAM1))
]
NOT_TEAM1 = {"matchExpressions": [expr("team", "NotIn", "team1")]}
NEGATIVE_NS_SELECTED = [weighted(5, security_in("region", "S1", ns_selector=NOT_TEAM1))]


def stay_s1_away_s2(**kw: Any) -> Pod:
    return pod(
        preferred=[weighted(8, security_in("region", "S1"))],
        anti_preferred=[weighted(5, security_in("az", "S2"))],
        **kw,
    )


def on(node_name: str, labels: Mapping[str, str] | None = None, **kw: Any) -> Pod:
    """A placed pod (names are irrelevant to scoring)."""
    return pod(f"p-{node_name}-{len(kw)}", labels=labels, on=node_name, **kw)


def run_score(
    incoming: Pod,
    placed: Sequence[Pod],
    node_list: Sequence[Node],
    **options: Any,
) -> str | dict[str, int]:
    """PreScore, Score for every node, NormalizeScore; "skip" for upstream's Skip."""
    snap = snapshot(placed, node_list)
    state = interpodaffinity.pre_score(incoming, snap, node_list, **options)
    if state is None:
        return SKIP
    raw = {n.metadata.name or "": interpodaffinity.score(state, n) for n in node_list}
    return interpodaffinity.normalize(raw)


N3 = nodes(("node1", CHINA), ("node2", INDIA), ("node3", AZ1))
N2_CHINA_INDIA = nodes(("node1", CHINA), ("node2", INDIA))
FIVE = nodes(
    ("node1", CHINA), ("node2", INDIA), ("node3", CHINA), ("node4", CHINA), ("node5", INDIA)
)

# (name, incoming pod, placed pods, nodes, want: "skip" or normalized scores, options)
PREFERRED: list[tuple[str, Pod, list[Pod], list[Node], str | dict[str, int], dict[str, Any]]] = [
    ("all nodes are same priority as Affinity is nil", pod(labels=S1), [], N3, SKIP, {}),
    (
        "affinity: matching topology key and pods score high",
        pod(labels=S1, preferred=STAY_WITH_S1_IN_REGION),
        [on("node1", S1), on("node2", S2), on("node3", S1)],
        N3,
        {"node1": 100, "node2": 0, "node3": 0},
        {},
    ),
    (
        "affinity: nodes sharing the matching pod's topology value score the same",
        pod(preferred=STAY_WITH_S1_IN_REGION),
        [on("node1", S1)],
        nodes(("node1", CHINA), ("node2", CHINA_AZ1), ("node3", INDIA)),
        {"node1": 100, "node2": 100, "node3": 0},
        {},
    ),
    (
        "affinity: the region with more matching pods scores higher",
        pod(labels=S1, preferred=STAY_WITH_S2_IN_REGION),
        [on(n, S2) for n in ("node1", "node1", "node2", "node3", "node4", "node5")],
        FIVE,
        {"node1": 100, "node2": 0, "node3": 100, "node4": 100, "node5": 0},
        {},
    ),
    (
        "affinity: operators and values, some not matching",
        pod(labels=S1, preferred=AFFINITY3),
        [on("node1", S1), on("node2", S2), on("node3", S1)],
        N3,
        {"node1": 20, "node2": 100, "node3": 0},
        {},
    ),
    (
        "affinity symmetry: the placed pods' preferred affinity",
        pod(labels=S2),
        [
            on("node1", S1, preferred=STAY_WITH_S1_IN_REGION),
            on("node2", S2, preferred=STAY_WITH_S2_IN_REGION),
        ],
        N3,
        {"node1": 0, "node2": 100, "node3": 0},
        {},
    ),
    (
        "affinity symmetry with a namespace selector",
        pod(ns="subteam1.team1", labels=S1),
        [on("node1", S1, preferred=NS_SELECTED), on("node2", S2, preferred=STAY_WITH_S2_IN_REGION)],
        N3,
        {"node1": 100, "node2": 0, "node3": 0},
        {},
    ),
    (
        "anti-affinity symmetry with a namespace selector",
        pod(ns="subteam1.team1", labels=S1),
        [
            on("node1", S1, anti_preferred=NS_SELECTED),
            on("node2", S2, preferred=STAY_WITH_S2_IN_REGION),
        ],
        N3,
        {"node1": 0, "node2": 100, "node3": 100},
        {},
    ),
    (
        "affinity symmetry: the placed pods' required affinity (hard weight 1)",
        pod(labels=S1),
        [on("node1", S1, affinity=HARD_AFFINITY), on("node2", S2, affinity=HARD_AFFINITY)],
        N3,
        {"node1": 100, "node2": 100, "node3": 0},
        {},
    ),
    (
        "anti-affinity: pods not matching score high",
        pod(labels=S1, anti_preferred=AWAY_FROM_S1_IN_AZ),
        [on("node1", S1), on("node2", S2)],
        nodes(("node1", AZ1), ("node2", CHINA)),
        {"node1": 0, "node2": 100},
        {},
    ),
    (
        "anti-affinity: a node without the topology key scores high",
        pod(labels=S1, anti_preferred=AWAY_FROM_S1_IN_AZ),
        [on("node1", S1), on("node2", S1)],
        nodes(("node1", AZ1), ("node2", CHINA)),
        {"node1": 0, "node2": 100},
        {},
    ),
    (
        "anti-affinity: more matching pods, lower score",
        pod(labels=S1, anti_preferred=AWAY_FROM_S1_IN_AZ),
        [on("node1", S1), on("node1", S1), on("node2", S2)],
        nodes(("node1", AZ1), ("node2", INDIA)),
        {"node1": 0, "node2": 100},
        {},
    ),
    (
        "anti-affinity symmetry",
        pod(labels=S2),
        [
            on("node1", S1, anti_preferred=AWAY_FROM_S2_IN_AZ),
            on("node2", S2, anti_preferred=AWAY_FROM_S1_IN_AZ),
        ],
        nodes(("node1", AZ1), ("node2", AZ2)),
        {"node1": 0, "node2": 100},
        {},
    ),
    (
        "affinity and anti-affinity",
        stay_s1_away_s2(labels=S1),
        [on("node1", S1), on("node2", S1)],
        nodes(("node1", CHINA), ("node2", AZ1)),
        {"node1": 100, "node2": 0},
        {},
    ),
    (
        "affinity and anti-affinity, the pod and placed pods alike",
        stay_s1_away_s2(labels=S1),
        [on(n, S1) for n in ("node1", "node1", "node2", "node3", "node3", "node4", "node5")],
        nodes(
            ("node1", CHINA_AZ1),
            ("node2", INDIA),
            ("node3", CHINA),
            ("node4", CHINA),
            ("node5", INDIA),
        ),
        {"node1": 100, "node2": 0, "node3": 100, "node4": 100, "node5": 0},
        {},
    ),
    (
        "affinity, anti-affinity and symmetry",
        stay_s1_away_s2(labels=S1),
        [
            on("node1", S1),
            on("node2", S2),
            stay_s1_away_s2(name="p3", on="node3"),
            on("node4", anti_preferred=AWAY_FROM_S1_IN_AZ),
        ],
        nodes(("node1", CHINA), ("node2", AZ1), ("node3", INDIA), ("node4", AZ2)),
        {"node1": 100, "node2": 0, "node3": 100, "node4": 0},
        {},
    ),
    (
        "no panic when only some nodes of a topology have pods with affinity",
        pod(labels=S1),
        [on("node1", S1), stay_s1_away_s2(name="p2", on="node2")],
        nodes(("node1", CHINA), ("node2", CHINA)),
        {"node1": 0, "node2": 0},
        {},
    ),
    (
        "affinity with pods matching the NamespaceSelector",
        pod(ns="subteam1.team1", labels=S1, preferred=NS_SELECTED),
        [
            on("node1", S1, ns="subteam1.team1"),
            on("node1", S1, ns="subteam1.team1"),
            on("node1", S1, ns="subteam1.team2"),
            on("node2", S1, ns="subteam2.team1"),
        ],
        N2_CHINA_INDIA,
        {"node1": 100, "node2": 0},
        {},
    ),
    (
        "affinity with pods matching both NamespaceSelector and namespaces",
        pod(ns="subteam1.team1", labels=S1, preferred=NS_SELECTED),
        [
            on("node1", S1, ns="subteam1.team1"),
            on("node1", S1, ns="subteam1.team1"),
            on("node1", S1, ns="subteam2.team2"),
            on("node2", S1, ns="subteam2.team1"),
        ],
        N2_CHINA_INDIA,
        {"node1": 100, "node2": 0},
        {},
    ),
    (
        "anti-affinity with pods matching the NamespaceSelector",
        pod(ns="subteam1.team1", labels=S1, anti_preferred=NS_SELECTED),
        [
            on("node1", S1, ns="subteam1.team1"),
            on("node1", S1, ns="subteam1.team1"),
            on("node1", S1, ns="subteam1.team2"),
            on("node2", S1, ns="subteam2.team1"),
        ],
        N2_CHINA_INDIA,
        {"node1": 0, "node2": 100},
        {},
    ),
    (
        "anti-affinity with pods matching both NamespaceSelector and namespaces",
        pod(ns="subteam1.team1", labels=S1, anti_preferred=NS_SELECTED),
        [
            on("node1", S1, ns="subteam1.team1"),
            on("node1", S1, ns="subteam1.team1"),
            on("node1", S1, ns="subteam2.team2"),
            on("node2", S1, ns="subteam2.team1"),
        ],
        N2_CHINA_INDIA,
        {"node1": 0, "node2": 100},
        {},
    ),
    (
        "affinity enforcing a negative NamespaceSelector",
        pod(ns="subteam1.team1", labels=S1, preferred=NEGATIVE_NS_SELECTED),
        [
            on("node1", S1, ns="subteam1.team1"),
            on("node1", S1, ns="subteam1.team1"),
            on("node2", S1, ns="subteam1.team2"),
        ],
        N2_CHINA_INDIA,
        {"node1": 0, "node2": 100},
        {},
    ),
    (
        "anti-affinity enforcing a negative NamespaceSelector",
        pod(ns="subteam1.team1", labels=S1, anti_preferred=NEGATIVE_NS_SELECTED),
        [
            on("node1", S1, ns="subteam1.team1"),
            on("node1", S1, ns="subteam1.team1"),
            on("node2", S1, ns="subteam1.team2"),
        ],
        N2_CHINA_INDIA,
        {"node1": 100, "node2": 0},
        {},
    ),
    (
        "ignore preferred terms of existing pods",
        pod(labels=S2),
        [
            stay_s1_away_s2(name="p1", labels=S1, on="node1"),
            on("node2", S2, preferred=STAY_WITH_S2_IN_REGION),
        ],
        N2_CHINA_INDIA,
        SKIP,
        {"ignore_preferred_terms_of_existing_pods": True},
    ),
    (
        "do not ignore preferred terms of existing pods",
        pod(labels=S2),
        [
            stay_s1_away_s2(name="p1", labels=S1, on="node1"),
            on("node2", S2, preferred=STAY_WITH_S2_IN_REGION),
        ],
        N2_CHINA_INDIA,
        {"node1": 0, "node2": 100},
        {},
    ),
    ("no nodes to score", pod(labels=S2), [], [], SKIP, {}),
    (
        "1.36: a negative NamespaceSelector kept selects every namespace",
        pod(ns="subteam1.team1", labels=S1, preferred=NEGATIVE_NS_SELECTED),
        [
            on("node1", S1, ns="subteam1.team1"),
            on("node1", S1, ns="subteam1.team1"),
            on("node2", S1, ns="subteam1.team2"),
        ],
        N2_CHINA_INDIA,
        {"node1": 100, "node2": 0},
        {"keep_namespace_selector": True},
    ),
]


@pytest.mark.parametrize(
    ("incoming", "placed", "node_list", "want", "options"),
    [c[1:] for c in PREFERRED],
    ids=[c[0] for c in PREFERRED],
)
def test_preferred_affinity(
    incoming: Pod,
    placed: list[Pod],
    node_list: list[Node],
    want: str | dict[str, int],
    options: dict[str, Any],
) -> None:
    assert run_score(incoming, placed, node_list, **options) == want


@pytest.mark.parametrize("anti", [False, True], ids=["affinity", "anti-affinity"])
def test_invalid_preferred_terms_fail_pre_score(anti: bool) -> None:
    bad = [weighted(8, security_in("region" if not anti else "az", BAD))]
    incoming = pod(anti_preferred=bad) if anti else pod(preferred=bad)
    group = "preferredAntiAffinityTerms" if anti else "preferredAffinityTerms"
    with pytest.raises(AffinityParseError) as raised:
        interpodaffinity.pre_score(incoming, snapshot([], N2_CHINA_INDIA))
    assert str(raised.value) == (
        f"failed to parse pod: {group}: "
        + BAD_VALUE.removeprefix("parsing pod: requiredAffinityTerms: ").replace(
            "[service]", "[security]"
        )
    )


HARD_POD_AFFINITY = [
    term(
        "region",
        expr("service", "In", "S1"),
        namespaces=["", "subteam2.team2"],
        ns_selector=TEAM1,
    )
]
HARD_PODS = [on("node1", affinity=HARD_POD_AFFINITY), on("node2", affinity=HARD_POD_AFFINITY)]

# (name, incoming pod's namespace, hard weight, want)
HARD_WEIGHT: list[tuple[str, str, int, str | dict[str, int]]] = [
    ("with default weight", "", 1, {"node1": 100, "node2": 100, "node3": 0}),
    ("with zero weight", "", 0, SKIP),
    ("with no matching namespace", "subteam1.team2", 1, SKIP),
    (
        "with matching NamespaceSelector",
        "subteam1.team1",
        1,
        {"node1": 100, "node2": 100, "node3": 0},
    ),
    ("with matching Namespaces", "subteam2.team2", 1, {"node1": 100, "node2": 100, "node3": 0}),
]


@pytest.mark.parametrize(
    ("ns", "weight", "want"), [c[1:] for c in HARD_WEIGHT], ids=[c[0] for c in HARD_WEIGHT]
)
def test_hard_pod_affinity_symmetric_weight(
    ns: str, weight: int, want: str | dict[str, int]
) -> None:
    incoming = pod(ns=ns, labels={"service": "S1"})
    assert run_score(incoming, HARD_PODS, N3, hard_pod_affinity_weight=weight) == want


def test_raw_scores_and_normalize() -> None:
    """Score is the sum over the node's pairs; NormalizeScore maps min..max onto 0..100,
    truncating, and leaves every node at 0 when all are equal."""
    incoming = pod(labels=S1, preferred=AFFINITY3, anti_preferred=AWAY_FROM_S1_IN_AZ)
    placed = [on("node1", S1), on("node2", S2), on("node3", S1)]
    node_list = nodes(("node1", CHINA_AZ1), ("node2", INDIA), ("node3", AZ1))
    state = interpodaffinity.pre_score(incoming, snapshot(placed, node_list))
    assert state == ScoreState({"region": {"China": 2, "India": 10}, "az": {"az1": -10}})
    raw = {n.metadata.name or "": interpodaffinity.score(state, n) for n in node_list}
    assert raw == {"node1": -8, "node2": 10, "node3": -10}
    assert interpodaffinity.normalize(raw) == {"node1": 10, "node2": 100, "node3": 0}
    assert interpodaffinity.normalize({"a": 3, "b": 3}) == {"a": 0, "b": 0}
    assert interpodaffinity.normalize({"a": 0, "b": 1, "c": 3}) == {"a": 0, "b": 33, "c": 100}
    assert interpodaffinity.normalize({}) == {}


def test_placed_pods_read_by_pre_score() -> None:
    """Without preferred terms only the pods with terms are read; with them, every pod."""
    read: list[str] = []
    base = snapshot([on("node1", S1)], N2_CHINA_INDIA)

    def pods_on(name: str) -> Sequence[Pod]:
        read.append(name)
        return base.pods_on(name)

    counting = Snapshot(nodes=base.nodes, pods_on=pods_on, namespaces=base.namespaces)
    assert interpodaffinity.pre_score(pod(labels=S1), counting) is None
    assert read == []
    state = interpodaffinity.pre_score(pod(preferred=STAY_WITH_S1_IN_REGION), counting)
    assert state == ScoreState({"region": {"China": 5}})
    assert read == ["node1", "node2"]
