"""PodTopologySpread as kube-scheduler 1.37.2's: upstream's table tests (filtering_test.go,
scoring_test.go) ported case by case, with exact reasons and scores, plus DefaultSelector,
preemption's re-run, the release switches and the O(1) way out."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from operators.api.core import LabelSelector, Node, Pod, TopologySpreadConstraint
from operators.scheduling.plugins import podtopologyspread as pts
from operators.scheduling.plugins.podtopologyspread import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    LABEL_HOSTNAME,
    LABEL_TOPOLOGY_ZONE,
    FilterState,
    ScoreState,
    TopologySpreadError,
    default_selector,
    normalize_score,
    pre_filter,
    pre_score,
    score_nodes,
    update_with_pod,
)
from operators.scheduling.snapshot import Placed, Snapshot, snapshot_of

from ..builders import J, expr, node, required, taint, term

NS = "default"
HARD = "DoNotSchedule"
SOFT = "ScheduleAnyway"
FOO: J = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR: J = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}
UNSCHED = ERR_REASON_CONSTRAINTS_NOT_MATCH
MISSING = ERR_REASON_NODE_LABEL_NOT_MATCH
TAINTS = [taint("node.kubernetes.io/unschedulable")]
#: What upstream's tests run with (feature.Features{}): both gates off unless a case says so.
UPSTREAM_TEST: dict[str, Any] = {"node_inclusion_policy": False, "match_label_keys": False}
HOSTNAME = LABEL_HOSTNAME


def spread(
    max_skew: int,
    key: str,
    action: str,
    selector: J | None,
    *,
    min_domains: int | None = None,
    affinity_policy: str | None = None,
    taints_policy: str | None = None,
    match_label_keys: Sequence[str] = (),
) -> J:
    """st.PodWrapper.SpreadConstraint's arguments as a JSON constraint."""
    out: J = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": action}
    if selector is not None:
        out["labelSelector"] = selector
    if min_domains is not None:
        out["minDomains"] = min_domains
    if affinity_policy is not None:
        out["nodeAffinityPolicy"] = affinity_policy
    if taints_policy is not None:
        out["nodeTaintsPolicy"] = taints_policy
    if match_label_keys:
        out["matchLabelKeys"] = list(match_label_keys)
    return out


def mkpod(
    labels: Mapping[str, str] | None = None,
    *constraints: J,
    name: str = "p",
    ns: str = NS,
    node_selector: Mapping[str, str] | None = None,
    affinity: J | None = None,
    tolerations: Sequence[J] = (),
    owner: J | None = None,
    terminating: bool = False,
    conditions: Sequence[J] = (),
) -> Pod:
    meta: J = {"name": name, "namespace": ns, "labels": dict(labels or {})}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: J = {"containers": [{"name": "c"}]}
    if constraints:
        spec["topologySpreadConstraints"] = list(constraints)
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if affinity:
        spec["affinity"] = affinity
    if tolerations:
        spec["tolerations"] = list(tolerations)
    status: J = {"phase": "Running"}
    if conditions:
        status["conditions"] = list(conditions)
    return Pod.load({"metadata": meta, "spec": spec, "status": status})


def on(node_name: str, name: str, labels: Mapping[str, str], **kw: Any) -> Placed:
    """st.MakePod().Name(name).Node(node_name).Label(...): an existing pod."""
    return (node_name, mkpod(labels, name=name, **kw))


def n(name: str, labels: Mapping[str, str], *, taints: Sequence[J] = ()) -> Node:
    return node(name, labels=labels, taints=taints)


def four(**extra: Mapping[str, str]) -> list[Node]:
    """node-a/b in zone1 and node-x/y in zone2, each with its name under "node"."""
    zones = {"node-a": "zone1", "node-b": "zone1", "node-x": "zone2", "node-y": "zone2"}
    return [
        n(name, {"zone": zone, "node": name, **extra.get(name.replace("-", "_"), {})})
        for name, zone in zones.items()
    ]


def hosts(*names: str, zone: Mapping[str, str] | None = None) -> list[Node]:
    """Nodes with only the hostname label (and a zone where given)."""
    zone = zone or {}
    return [
        n(name, {HOSTNAME: name, **({"zone": zone[name]} if name in zone else {})})
        for name in names
    ]


def nodes_by(label: str, *names: str, **extra: Mapping[str, str]) -> list[Node]:
    return [n(name, {label: name, **extra.get(name.replace("-", "_"), {})}) for name in names]


F: Mapping[str, str] = {"foo": ""}
B: Mapping[str, str] = {"bar": ""}
FB: Mapping[str, str] = {"foo": "", "bar": ""}


def placed(pairs: Sequence[tuple[str, str, Mapping[str, str]]]) -> list[Placed]:
    return [on(node_name, name, labels) for node_name, name, labels in pairs]


#: 2/1/0/3 over node-a, node-b, node-x, node-y
SPREAD_2103 = placed(
    [
        ("node-a", "p-a1", F),
        ("node-a", "p-a2", F),
        ("node-b", "p-b1", F),
        ("node-y", "p-y1", F),
        ("node-y", "p-y2", F),
        ("node-y", "p-y3", F),
    ]
)


def run_filter(
    pod: Pod, nodes: Sequence[Node], existing: Sequence[Placed], **flags: Any
) -> dict[str, str | None]:
    state = pre_filter(pod, snapshot_of(nodes, existing), **flags)
    assert state is not None
    return {nd.metadata.name or "": pts.filter(state, pod, nd) for nd in nodes}


# --- Filter: TestSingleConstraint and TestMultipleConstraints ------------------------------


@dataclasses.dataclass
class FilterCase:
    name: str
    pod: Pod
    nodes: list[Node]
    existing: list[Placed]
    want: dict[str, str | None]
    flags: dict[str, Any] = dataclasses.field(default_factory=dict)


def _abxy(a: str | None, b: str | None, x: str | None, y: str | None) -> dict[str, str | None]:
    return {"node-a": a, "node-b": b, "node-x": x, "node-y": y}


NIP: dict[str, Any] = {"node_inclusion_policy": True}

FILTER_CASES = [
    FilterCase(
        "no existing pods",
        mkpod(F, spread(1, "zone", HARD, FOO)),
        four(),
        [],
        _abxy(None, None, None, None),
    ),
    FilterCase(
        "no existing pods, incoming pod doesn't match itself",
        mkpod(F, spread(1, "zone", HARD, BAR)),
        four(),
        [],
        _abxy(None, None, None, None),
    ),
    FilterCase(
        "existing pods in a different namespace do not count",
        mkpod(F, spread(1, "zone", HARD, FOO)),
        four(),
        [
            on("node-a", "p-a1", F, ns="ns1"),
            on("node-a", "p-b1", F, ns="ns2"),
            on("node-x", "p-x1", F),
            on("node-y", "p-y1", F),
        ],
        _abxy(None, None, UNSCHED, UNSCHED),
    ),
    FilterCase(
        "existing pods do not match null selector",
        mkpod(F, spread(1, "zone", HARD, None)),
        four(),
        placed([("node-x", "p-x1", F), ("node-y", "p-y1", F)]),
        _abxy(None, None, None, None),
    ),
    FilterCase(
        "pods spread across zones as 3/3, all nodes fit",
        mkpod(F, spread(1, "zone", HARD, FOO)),
        four(),
        SPREAD_2103,
        _abxy(None, None, None, None),
    ),
    FilterCase(
        "pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
        mkpod(F, spread(1, "zone", HARD, FOO)),
        [
            n("node-a", {"zone": "zone1", "node": "node-a"}),
            n("node-b", {"zon": "zone1", "node": "node-b"}),
            n("node-x", {"zone": "zone2", "node": "node-x"}),
            n("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        placed(
            [
                ("node-a", "p-a1", F),
                ("node-b", "p-b1", F),
                ("node-x", "p-x1", F),
                ("node-y", "p-y1", F),
            ]
        ),
        _abxy(None, MISSING, UNSCHED, UNSCHED),
    ),
    FilterCase(
        "pod cannot be scheduled as all nodes don't have label 'rack'",
        mkpod(F, spread(1, "rack", HARD, FOO)),
        [n("node-a", {"zone": "zone1", "node": "node-a"}), n("node-x", {"zone": "zone2"})],
        [],
        {"node-a": MISSING, "node-x": MISSING},
    ),
    FilterCase(
        "pods spread across nodes as 2/1/0/3, only node-x fits",
        mkpod(F, spread(1, "node", HARD, FOO)),
        four(),
        SPREAD_2103,
        _abxy(UNSCHED, UNSCHED, None, UNSCHED),
    ),
    FilterCase(
        "pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
        mkpod(F, spread(2, "node", HARD, FOO)),
        four(),
        SPREAD_2103,
        _abxy(UNSCHED, None, None, UNSCHED),
    ),
    FilterCase(
        "pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
        mkpod(B, spread(1, "node", HARD, FOO)),
        four(),
        SPREAD_2103,
        _abxy(UNSCHED, None, None, UNSCHED),
    ),
    FilterCase(
        "incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
        mkpod(
            F,
            spread(1, "node", HARD, FOO),
            affinity=required(term(expr("node", "In", "node-a", "node-y"))),
        ),
        four(),
        SPREAD_2103,
        _abxy(None, None, None, UNSCHED),
    ),
    FilterCase(
        "terminating Pods should be excluded",
        mkpod(F, spread(1, "node", HARD, FOO)),
        nodes_by("node", "node-a", "node-b"),
        [on("node-a", "p-a", F, terminating=True), on("node-b", "p-b", F)],
        {"node-a": None, "node-b": UNSCHED},
    ),
    FilterCase(
        "incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence node-a fits",
        mkpod(
            F,
            spread(1, "zone", HARD, FOO),
            affinity=required(term(expr("node", "NotIn", "node-b"))),
        ),
        four(),
        placed([("node-b", "p-b1", F), ("node-b", "p-b2", F), ("node-y", "p-y1", F)]),
        _abxy(None, None, UNSCHED, UNSCHED),
    ),
    FilterCase(
        "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains < "
        "minDomains, then the third node fits",
        mkpod(F, spread(2, "node", HARD, FOO, min_domains=4)),
        nodes_by("node", "node-a", "node-b", "node-c"),
        placed(
            [
                ("node-a", "p-a1", F),
                ("node-a", "p-a2", F),
                ("node-b", "p-b1", F),
                ("node-b", "p-b2", F),
                ("node-c", "p-c1", F),
            ]
        ),
        {"node-a": UNSCHED, "node-b": UNSCHED, "node-c": None},
    ),
    FilterCase(
        "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains > "
        "minDomains, then the all nodes fit",
        mkpod(F, spread(2, "node", HARD, FOO, min_domains=2)),
        nodes_by("node", "node-a", "node-b", "node-c"),
        placed(
            [
                ("node-a", "p-a1", F),
                ("node-a", "p-a2", F),
                ("node-b", "p-b1", F),
                ("node-b", "p-b2", F),
                ("node-c", "p-c1", F),
            ]
        ),
        {"node-a": None, "node-b": None, "node-c": None},
    ),
    FilterCase(
        "pods spread across zone as 2/1, maxSkew is 2 and the number of domains < minDomains, "
        "then the third and fourth nodes fit",
        mkpod(F, spread(2, "zone", HARD, FOO, min_domains=3)),
        four(),
        placed([("node-a", "p-b1", F), ("node-b", "p-b2", F), ("node-y", "p-y1", F)]),
        _abxy(UNSCHED, UNSCHED, None, None),
    ),
    FilterCase(
        "pods spread across zone as 2/1, maxSkew is 2 and the number of domains > minDomains, "
        "then the all nodes fit",
        mkpod(F, spread(2, "zone", HARD, FOO, min_domains=1)),
        four(),
        placed([("node-a", "p-b1", F), ("node-b", "p-b2", F), ("node-y", "p-y1", F)]),
        _abxy(None, None, None, None),
    ),
    FilterCase(
        "NodeAffinityPolicy honored with labelSelectors",
        mkpod(F, spread(1, "node", HARD, FOO), node_selector=F),
        nodes_by("node", "node-a", "node-b", "node-x", "node-y", node_a=F, node_b=F, node_x=F),
        placed([("node-a", "p-b1", F), ("node-b", "p-b2", F), ("node-y", "p-y1", F)]),
        _abxy(UNSCHED, UNSCHED, None, None),
        NIP,
    ),
    FilterCase(
        "NodeAffinityPolicy ignored with labelSelectors",
        mkpod(F, spread(1, "node", HARD, FOO, affinity_policy="Ignore"), node_selector=F),
        nodes_by("node", "node-a", "node-b", "node-x", "node-y", node_a=F, node_b=F, node_x=F),
        placed([("node-a", "p-b1", F), ("node-b", "p-b2", F), ("node-y", "p-y1", F)]),
        _abxy(UNSCHED, UNSCHED, None, UNSCHED),
        NIP,
    ),
    FilterCase(
        "NodeAffinityPolicy honored with nodeAffinity",
        mkpod(F, spread(1, "node", HARD, FOO), affinity=required(term(expr("foo", "In", "")))),
        nodes_by("node", "node-a", "node-b", "node-x", "node-y", node_a=F, node_b=F, node_x=F),
        placed([("node-a", "p-b1", F), ("node-b", "p-b2", F), ("node-y", "p-y1", F)]),
        _abxy(UNSCHED, UNSCHED, None, None),
        NIP,
    ),
    FilterCase(
        "NodeAffinityPolicy ignored with nodeAffinity",
        mkpod(
            F,
            spread(1, "node", HARD, FOO, affinity_policy="Ignore"),
            affinity=required(term(expr("foo", "In", ""))),
        ),
        nodes_by("node", "node-a", "node-b", "node-x", "node-y", node_a=F, node_b=F, node_x=F),
        placed([("node-a", "p-b1", F), ("node-b", "p-b2", F), ("node-y", "p-y1", F)]),
        _abxy(UNSCHED, UNSCHED, None, UNSCHED),
        NIP,
    ),
    FilterCase(
        "NodeTaintsPolicy honored",
        mkpod(F, spread(1, "node", HARD, FOO, taints_policy="Honor")),
        [
            *nodes_by("node", "node-a", "node-b", "node-x", node_a=F, node_b=F, node_x=F),
            n("node-y", {"node": "node-y"}, taints=TAINTS),
        ],
        placed([("node-a", "p-b1", F), ("node-b", "p-b2", F), ("node-y", "p-y1", F)]),
        _abxy(UNSCHED, UNSCHED, None, None),
        NIP,
    ),
    FilterCase(
        "NodeTaintsPolicy ignored",
        mkpod(F, spread(1, "node", HARD, FOO)),
        [
            *nodes_by("node", "node-a", "node-b", "node-x", node_a=F, node_b=F, node_x=F),
            n("node-y", {"node": "node-y"}, taints=TAINTS),
        ],
        placed([("node-a", "p-b1", F), ("node-b", "p-b2", F), ("node-y", "p-y1", F)]),
        _abxy(UNSCHED, UNSCHED, None, UNSCHED),
        NIP,
    ),
    # TestMultipleConstraints
    FilterCase(
        "two Constraints on zone and node, spreads = [3/3, 2/1/0/3]",
        mkpod(F, spread(1, "zone", HARD, FOO), spread(1, "node", HARD, FOO)),
        four(),
        SPREAD_2103,
        _abxy(UNSCHED, UNSCHED, None, UNSCHED),
    ),
    FilterCase(
        "two Constraints on zone and node, spreads = [3/4, 2/1/0/4]",
        mkpod(F, spread(1, "zone", HARD, FOO), spread(1, "node", HARD, FOO)),
        four(),
        [*SPREAD_2103, on("node-y", "p-y4", F)],
        _abxy(UNSCHED, UNSCHED, UNSCHED, UNSCHED),
    ),
    FilterCase(
        "Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]",
        mkpod(FB, spread(1, "zone", HARD, FOO), spread(1, "node", HARD, BAR)),
        four(),
        placed([("node-a", "p-a1", F), ("node-y", "p-y1", B)]),
        _abxy(UNSCHED, UNSCHED, None, UNSCHED),
    ),
    FilterCase(
        "Constraints hold different labelSelectors, spreads = [1/0, 0/0/1/1]",
        mkpod(FB, spread(1, "zone", HARD, FOO), spread(1, "node", HARD, BAR)),
        four(),
        placed([("node-a", "p-a1", F), ("node-x", "p-x1", B), ("node-y", "p-y1", B)]),
        _abxy(UNSCHED, UNSCHED, UNSCHED, UNSCHED),
    ),
    FilterCase(
        "Constraints hold different labelSelectors, spreads = [2/3, 1/0/0/1]",
        mkpod(FB, spread(1, "zone", HARD, FOO), spread(1, "node", HARD, BAR)),
        four(),
        placed(
            [
                ("node-a", "p-a1", F),
                ("node-a", "p-a2", FB),
                ("node-y", "p-y1", F),
                ("node-y", "p-y2", FB),
                ("node-y", "p-y3", F),
            ]
        ),
        _abxy(UNSCHED, None, UNSCHED, UNSCHED),
    ),
    FilterCase(
        "Constraints hold different labelSelectors but pod doesn't match itself on 'zone'",
        mkpod(B, spread(1, "zone", HARD, FOO), spread(1, "node", HARD, BAR)),
        four(),
        placed([("node-a", "p-a1", F), ("node-x", "p-x1", B), ("node-y", "p-y1", B)]),
        _abxy(None, None, UNSCHED, UNSCHED),
    ),
    FilterCase(
        "two Constraints on zone and node, absence of label 'node' on node-x, "
        "spreads = [1/1, 1/0/0/1]",
        mkpod(F, spread(1, "zone", HARD, FOO), spread(1, "node", HARD, FOO)),
        [
            n("node-a", {"zone": "zone1", "node": "node-a"}),
            n("node-b", {"zone": "zone1", "node": "node-b"}),
            n("node-x", {"zone": "zone2"}),
            n("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        placed([("node-a", "p-a1", F), ("node-y", "p-y3", F)]),
        _abxy(UNSCHED, None, MISSING, UNSCHED),
    ),
    FilterCase(
        "two node inclusion Constraints, zone: honor/ignore, node: ignore/ignore",
        mkpod(
            F,
            spread(1, "zone", HARD, FOO),
            spread(1, "node", HARD, FOO, affinity_policy="Ignore"),
            node_selector=F,
        ),
        four(node_a=F, node_b=F, node_x=F),
        placed([("node-a", "p-a1", F), ("node-b", "p-b1", F), ("node-y", "p-y1", F)]),
        _abxy(UNSCHED, UNSCHED, None, UNSCHED),
        NIP,
    ),
    FilterCase(
        "two node inclusion Constraints, zone: honor/honor, node: honor/ignore",
        mkpod(F, spread(1, "zone", HARD, FOO, taints_policy="Honor"), spread(1, "node", HARD, FOO)),
        [
            *four(node_a=F, node_b=F, node_x=F)[:3],
            n("node-y", {"zone": "zone2", "node": "node-y"}, taints=TAINTS),
        ],
        placed([("node-a", "p-a1", F), ("node-b", "p-b1", F), ("node-y", "p-y1", F)]),
        _abxy(UNSCHED, UNSCHED, None, UNSCHED),
        NIP,
    ),
    FilterCase(
        "two node inclusion Constraints, zone: honor/ignore, node: honor/ignore",
        mkpod(F, spread(1, "zone", HARD, FOO), spread(1, "node", HARD, FOO), node_selector=F),
        [
            *four(node_a=F, node_x=F)[:3],
            n("node-y", {"zone": "zone2", "node": "node-y", "foo": ""}, taints=TAINTS),
        ],
        placed([("node-a", "p-a1", F), ("node-b", "p-b1", F), ("node-y", "p-y1", F)]),
        _abxy(UNSCHED, None, None, UNSCHED),
        NIP,
    ),
    FilterCase(
        "two node inclusion Constraints, zone: honor/honor, node: ignore/ignore",
        mkpod(
            F,
            spread(1, "zone", HARD, FOO, taints_policy="Honor"),
            spread(1, "node", HARD, FOO, affinity_policy="Ignore"),
            node_selector=F,
        ),
        [
            *four(node_a=F, node_x=F)[:3],
            n("node-y", {"zone": "zone2", "node": "node-y", "foo": ""}, taints=TAINTS),
        ],
        placed([("node-a", "p-a1", F), ("node-b", "p-b1", F), ("node-y", "p-y1", F)]),
        _abxy(UNSCHED, UNSCHED, None, UNSCHED),
        NIP,
    ),
    FilterCase(
        "two Constraints on zone, spreads = [3/3, 2/1]",
        mkpod(FB, spread(1, "zone", HARD, BAR), spread(1, "zone", HARD, FOO)),
        four(),
        placed(
            [
                ("node-a", "p-a1", FB),
                ("node-a", "p-a2", F),
                ("node-b", "p-b1", FB),
                ("node-y", "p-y1", F),
                ("node-y", "p-y2", FB),
                ("node-y", "p-y3", F),
            ]
        ),
        _abxy(UNSCHED, UNSCHED, None, None),
    ),
    FilterCase(
        "two Constraints on zone, spreads = [3/4, 2/1]",
        mkpod(FB, spread(1, "zone", HARD, BAR), spread(1, "zone", HARD, FOO)),
        four(),
        placed(
            [
                ("node-a", "p-a1", FB),
                ("node-a", "p-a2", F),
                ("node-b", "p-b1", FB),
                ("node-y", "p-y1", F),
                ("node-y", "p-y2", FB),
                ("node-y", "p-y3", F),
                ("node-y", "p-y4", F),
            ]
        ),
        _abxy(UNSCHED, UNSCHED, UNSCHED, UNSCHED),
    ),
]


@pytest.mark.parametrize("case", FILTER_CASES, ids=lambda c: c.name)
def test_filter(case: FilterCase) -> None:
    got = run_filter(case.pod, case.nodes, case.existing, **{**UPSTREAM_TEST, **case.flags})
    assert got == case.want


@pytest.mark.parametrize(
    "case",
    [c for c in FILTER_CASES if not c.flags and "nodeAffinity" not in c.name],
    ids=lambda c: c.name,
)
def test_filter_same_with_1_37_defaults(case: FilterCase) -> None:
    """The cases without node affinity or policies answer the same with 1.37's gates."""
    assert run_filter(case.pod, case.nodes, case.existing) == case.want


# --- PreFilter state: TestPreFilterState ---------------------------------------------------

NODE_C_BAR = {"node": "node-c", "bar": ""}
ABCD_BAR = [on("node-a", "p-a", B), on("node-b", "p-b", B), on("node-b", "p-c", B)]
ABCD_BAR.append(on("node-c", "p-d", {}))
TOL_UNSCHED: J = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}

PRE_FILTER_STATE_CASES = [
    # (name, pod, nodes, existing, flags, [(counts, min) per constraint])
    pytest.param(
        mkpod(F, spread(5, "zone", HARD, {"matchLabels": {"foo": "bar"}})),
        four(),
        [],
        {},
        [({"zone1": 0, "zone2": 0}, 0)],
        id="clean cluster with one spreadConstraint",
    ),
    pytest.param(
        mkpod(F, spread(1, "zone", HARD, FOO)),
        four(),
        SPREAD_2103[:5],
        {},
        [({"zone1": 3, "zone2": 2}, 2)],
        id="normal case with one spreadConstraint",
    ),
    pytest.param(
        mkpod(F, spread(1, "zone", HARD, None)),
        four(),
        SPREAD_2103[:5],
        {},
        [({"zone1": 0, "zone2": 0}, 0)],
        id="normal case with null label selector",
    ),
    pytest.param(
        mkpod(F, spread(1, "zone", HARD, FOO), spread(1, "node", HARD, FOO)),
        four(),
        [*SPREAD_2103, on("node-y", "p-y4", F)],
        {},
        [
            ({"zone1": 3, "zone2": 4}, 3),
            ({"node-a": 2, "node-b": 1, "node-x": 0, "node-y": 4}, 0),
        ],
        id="TpKeyToDomainsNum is calculated when MinDomains is enabled",
    ),
    pytest.param(
        mkpod({"foo": "", "bar": ""}, spread(1, "zone", HARD, FOO, match_label_keys=["bar"])),
        four(),
        SPREAD_2103[:5],
        {"match_label_keys": False},
        [({"zone1": 3, "zone2": 2}, 2)],
        id="matchLabelKeys ignored when feature gate disabled",
    ),
    pytest.param(
        mkpod({"foo": "", "bar": "a"}, spread(1, "zone", HARD, FOO, match_label_keys=["bar"])),
        four(),
        [
            on("node-a", "p-a1", F),
            on("node-a", "p-a2", {"foo": "", "bar": "a"}),
            on("node-b", "p-b1", F),
            on("node-y", "p-y1", {"foo": "", "bar": "a"}),
            on("node-y", "p-y2", B),
        ],
        {},
        [({"zone1": 1, "zone2": 1}, 1)],
        id="matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
    ),
    pytest.param(
        mkpod({"foo": "a"}, spread(1, "zone", HARD, {}, match_label_keys=["foo"])),
        four(),
        [
            on(nd, name, {"foo": "a"})
            for nd, name in [
                ("node-a", "p-a1"),
                ("node-a", "p-a2"),
                ("node-b", "p-b1"),
                ("node-y", "p-y1"),
                ("node-y", "p-y2"),
            ]
        ],
        {},
        [({"zone1": 3, "zone2": 2}, 2)],
        id="matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
    ),
    pytest.param(
        mkpod(F, spread(1, "zone", HARD, None, match_label_keys=["bar"])),
        four(),
        [on("node-a", "p-a1", {"foo": "a"}), on("node-y", "p-y1", {"foo": "a"})],
        {},
        [({"zone1": 0, "zone2": 0}, 0)],
        id="key in matchLabelKeys is ignored when LabelSelector is nil",
    ),
    pytest.param(
        mkpod(F, spread(1, "zone", HARD, FOO, match_label_keys=["bar"])),
        four(),
        [on("node-a", "p-a1", {"foo": "a"}), on("node-y", "p-y1", {"foo": "a"})],
        {},
        [({"zone1": 1, "zone2": 1}, 1)],
        id="key in matchLabelKeys is ignored when it isn't exist in pod.labels",
    ),
    pytest.param(
        mkpod(FB, spread(1, "zone", HARD, FOO), spread(1, "zone", HARD, BAR)),
        four(),
        placed(
            [
                ("node-a", "p-a1", FB),
                ("node-b", "p-b1", F),
                ("node-x", "p-x1", B),
                ("node-y", "p-y1", FB),
                ("node-y", "p-y2", B),
            ]
        ),
        {},
        [({"zone1": 2, "zone2": 1}, 1), ({"zone1": 1, "zone2": 3}, 1)],
        id="two spreadConstraints with the same topologyKey",
    ),
    pytest.param(
        mkpod(F, spread(1, "zone", HARD, FOO), spread(1, "zone", SOFT, FOO)),
        four(),
        [on("node-a", "p-a1", F, ns="other"), on("node-x", "p-x1", F)],
        {},
        [({"zone1": 0, "zone2": 1}, 0)],
        id="namespace mismatch doesn't count; soft spreadConstraints are bypassed",
    ),
    pytest.param(
        mkpod(F, spread(1, "node", HARD, BAR), node_selector=F),
        [*nodes_by("node", "node-a", "node-b", node_a=F, node_b=F), n("node-c", NODE_C_BAR)],
        ABCD_BAR,
        {"node_inclusion_policy": False},
        [({"node-a": 1, "node-b": 2}, 1)],
        id="feature gate disabled with NodeAffinityPolicy",
    ),
    pytest.param(
        mkpod(F, spread(1, "node", HARD, BAR, taints_policy="Honor")),
        [*nodes_by("node", "node-a", "node-b"), n("node-c", NODE_C_BAR, taints=TAINTS)],
        ABCD_BAR,
        {},
        [({"node-a": 1, "node-b": 2}, 1)],
        id="NodeTaintsPolicy honored",
    ),
    pytest.param(
        mkpod(F, spread(1, "node", HARD, BAR, taints_policy="Honor"), tolerations=[TOL_UNSCHED]),
        [*nodes_by("node", "node-a", "node-b"), n("node-c", NODE_C_BAR, taints=TAINTS)],
        ABCD_BAR,
        {},
        [({"node-a": 1, "node-b": 2, "node-c": 0}, 0)],
        id="NodeTaintsPolicy honored with tolerated taints",
    ),
    pytest.param(
        mkpod(F, spread(1, "node", HARD, BAR)),
        [*nodes_by("node", "node-a", "node-b"), n("node-c", NODE_C_BAR, taints=TAINTS)],
        ABCD_BAR,
        {},
        [({"node-a": 1, "node-b": 2, "node-c": 0}, 0)],
        id="NodeTaintsPolicy ignored",
    ),
]


@pytest.mark.parametrize(("pod", "nodes", "existing", "flags", "want"), PRE_FILTER_STATE_CASES)
def test_pre_filter_state(
    pod: Pod,
    nodes: list[Node],
    existing: list[Placed],
    flags: dict[str, Any],
    want: list[tuple[dict[str, int], int]],
) -> None:
    state = pre_filter(pod, snapshot_of(nodes, existing), **flags)
    assert state is not None
    got = [(dict(state.match_num[i]), state.min_match_num(i)) for i in range(len(want))]
    assert got == want
    assert len(state.constraints) == len(want)


def test_pre_filter_constraint_defaults() -> None:
    """minDomains 1, Honor/Ignore, and the policies read only with the gate on."""
    pod = mkpod(F, spread(1, "zone", HARD, FOO, affinity_policy="Ignore", taints_policy="Honor"))
    snap = snapshot_of(four(), [])
    on_ = pre_filter(pod, snap)
    off = pre_filter(pod, snap, node_inclusion_policy=False)
    assert on_ is not None
    assert off is not None
    got = [(c.min_domains, c.node_affinity_policy, c.node_taints_policy) for c in on_.constraints]
    assert got == [(1, "Ignore", "Honor")]
    got = [(c.min_domains, c.node_affinity_policy, c.node_taints_policy) for c in off.constraints]
    assert got == [(1, "Honor", "Ignore")]


LIST_DEFAULTS = [
    TopologySpreadConstraint(max_skew=3, topology_key="node", when_unsatisfiable=HARD),
    TopologySpreadConstraint(max_skew=2, topology_key="node", when_unsatisfiable=SOFT),
    TopologySpreadConstraint(max_skew=5, topology_key="rack", when_unsatisfiable=HARD),
]


def test_pre_filter_default_constraints_and_a_service() -> None:
    pod = mkpod({"foo": "bar", "baz": "kar"})
    service = {"metadata": {"namespace": NS, "name": "s"}, "spec": {"selector": {"foo": "bar"}}}
    selector = default_selector(pod, [service], [], [], [])
    state = pre_filter(pod, snapshot_of([], []), default_selector=selector, defaults=LIST_DEFAULTS)
    assert state is not None
    assert [(c.max_skew, c.topology_key) for c in state.constraints] == [(3, "node"), (5, "rack")]
    assert all(c.selector.matches({"foo": "bar"}) for c in state.constraints)
    assert not any(c.selector.matches({"foo": "baz"}) for c in state.constraints)
    assert state.match_num == ({}, {})
    assert state.critical_paths == ((("", 2**31 - 1), ("", 2**31 - 1)),) * 2


def test_pre_filter_default_constraints_skipped() -> None:
    """A service that doesn't match, the pod's own constraints, soft defaults, System."""
    pod = mkpod({"foo": "bar"})
    service = {"metadata": {"namespace": NS}, "spec": {"selector": {"baz": "kep"}}}
    snap = snapshot_of(four(), [])
    assert default_selector(pod, [service], [], [], []) is None
    assert pre_filter(pod, snap, defaults=LIST_DEFAULTS) is None
    selector = LabelSelector(match_labels={"foo": "bar"})
    assert pre_filter(pod, snap, default_selector=selector, defaults=LIST_DEFAULTS[1:2]) is None
    assert pre_filter(pod, snap, default_selector=selector) is None  # System: all soft
    own = mkpod(
        {"foo": "bar", "baz": "tar"},
        spread(1, "zone", HARD, {"matchLabels": {"baz": "tar"}}),
        spread(2, "planet", SOFT, {"matchLabels": {"fot": "rok"}}),
    )
    state = pre_filter(own, snap, default_selector=selector, defaults=LIST_DEFAULTS)
    assert state is not None
    assert [(c.max_skew, c.topology_key) for c in state.constraints] == [(1, "zone")]


class _Untouchable(Sequence[Node]):
    """A node list that fails when read: proves the O(1) way out."""

    def __getitem__(self, index: Any) -> Any:
        raise AssertionError("read the nodes")

    def __len__(self) -> int:
        raise AssertionError("read the nodes")

    def __iter__(self) -> Iterator[Node]:
        raise AssertionError("read the nodes")


def _untouchable_pods(_: str) -> Sequence[Pod]:
    raise AssertionError("read the pods")


def test_no_constraints_cost_nothing() -> None:
    snap = Snapshot(nodes=_Untouchable(), pods_on=_untouchable_pods)
    pod = mkpod(F)
    assert pre_filter(pod, snap) is None
    assert pre_score(pod, snap, _Untouchable()) is None
    assert pre_filter(pod, snap, default_selector=LabelSelector()) is None
    assert pre_score(pod, snap, [], default_selector=LabelSelector()) is None


def test_only_soft_constraints_skip_filter() -> None:
    pod = mkpod(F, spread(1, "zone", SOFT, FOO))
    assert pre_filter(pod, snapshot_of(four(), [])) is None


# --- AddPod / RemovePod and preemption -----------------------------------------------------

UPDATE_CASES = [
    # (name, preemptor, nodes, existing, (node index, pod, delta), [(counts, paths[0][1])])
    pytest.param(
        mkpod(F, spread(1, "node", HARD, FOO)),
        four()[:2],
        [],
        (0, mkpod(F, name="p-a1"), 1),
        [({"node-a": 1, "node-b": 0}, 0)],
        id="add: node a and b both impact current min match",
    ),
    pytest.param(
        mkpod(F, spread(1, "node", HARD, FOO)),
        four()[:2],
        [on("node-b", "p-b1", F)],
        (0, mkpod(F, name="p-a1"), 1),
        [({"node-a": 1, "node-b": 1}, 1)],
        id="add: only node a impacts current min match",
    ),
    pytest.param(
        mkpod(F, spread(1, "node", HARD, FOO)),
        four()[:2],
        [on("node-b", "p-b1", F)],
        (0, mkpod(F, name="p-a1", ns="ns1"), 1),
        [({"node-a": 0, "node-b": 1}, 0)],
        id="add: a pod in a different namespace doesn't change anything",
    ),
    pytest.param(
        mkpod(F, spread(1, "node", HARD, FOO)),
        four()[:2],
        [on("node-b", "p-b1", F)],
        (1, mkpod(F, name="p-b2"), 1),
        [({"node-a": 0, "node-b": 2}, 0)],
        id="add: pod on non-critical node won't trigger re-calculation",
    ),
    pytest.param(
        mkpod(F, spread(1, "zone", HARD, FOO)),
        four()[:3],
        placed([("node-a", "p-a1", F), ("node-b", "p-b1", F), ("node-x", "p-x1", F)]),
        (0, mkpod(F, name="p-a1"), -1),
        [({"zone1": 1, "zone2": 1}, 1)],
        id="remove: one spreadConstraint on zone, min unchanged",
    ),
    pytest.param(
        mkpod(F, spread(1, "zone", HARD, FOO)),
        four(),
        placed(
            [
                ("node-a", "p-a1", F),
                ("node-b", "p-b1", F),
                ("node-x", "p-x1", F),
                ("node-y", "p-y1", F),
            ]
        ),
        (0, mkpod(F, name="p-a1"), -1),
        [({"zone1": 1, "zone2": 2}, 1)],
        id="remove: one spreadConstraint on zone, min changed",
    ),
    pytest.param(
        mkpod(F, spread(1, "zone", HARD, FOO)),
        four(),
        placed([("node-a", "p-a1", F), ("node-x", "p-x1", F)]),
        (0, mkpod(B, name="p-a2"), -1),
        [({"zone1": 1, "zone2": 1}, 1)],
        id="remove: delete an irrelevant pod won't help",
    ),
]


@pytest.mark.parametrize(("pod", "nodes", "existing", "change", "want"), UPDATE_CASES)
def test_update_with_pod(
    pod: Pod,
    nodes: list[Node],
    existing: list[Placed],
    change: tuple[int, Pod, int],
    want: list[tuple[dict[str, int], int]],
) -> None:
    state = pre_filter(pod, snapshot_of(nodes, existing), **UPSTREAM_TEST)
    assert state is not None
    before = [dict(m) for m in state.match_num]
    index, other, delta = change
    updated = update_with_pod(state, pod, other, nodes[index], delta, node_inclusion_policy=False)
    got = [(dict(updated.match_num[i]), updated.critical_paths[i][0][1]) for i in range(len(want))]
    assert got == want
    assert [dict(m) for m in state.match_num] == before  # the original is untouched


def test_preemption_reruns_pre_filter_on_the_snapshot_without_victims() -> None:
    """Victims on node-a left out of the snapshot: the same counts as RemovePod, and a
    node refused before fits."""
    pod = mkpod(F, spread(1, "zone", HARD, FOO))
    nodes = four()
    victims = [on("node-a", "v1", F), on("node-a", "v2", F)]
    others = [on("node-x", "p-x1", F)]
    full = pre_filter(pod, snapshot_of(nodes, victims + others))
    assert full is not None
    assert pts.filter(full, pod, nodes[0]) == UNSCHED
    rerun = pre_filter(pod, snapshot_of(nodes, others))
    assert rerun is not None
    assert pts.filter(rerun, pod, nodes[0]) is None
    incremental: FilterState = full
    for _, victim in victims:
        incremental = update_with_pod(incremental, pod, victim, nodes[0], -1)
    assert [dict(m) for m in rerun.match_num] == [dict(m) for m in incremental.match_num]
    assert rerun.min_match_num(0) == incremental.min_match_num(0) == 0
    # The first state is unchanged: no caching across snapshots.
    assert pts.filter(full, pod, nodes[0]) == UNSCHED


# --- release switches and errors -----------------------------------------------------------


def test_empty_selector_counts_nobody_in_1_37_everybody_in_1_38() -> None:
    """1.37's countPodsMatchSelector skips ``selector.Empty()``; 1.38's only Nothing
    (upstream 1.38's "empty (non-nil) label selector should count all namespace pods")."""
    pod = mkpod(F, spread(1, "zone", HARD, {}))
    existing = placed([("node-a", "p-a1", F), ("node-a", "p-a2", F)])
    assert run_filter(pod, four(), existing) == _abxy(None, None, None, None)
    got = run_filter(pod, four(), existing, count_empty_selector=True)
    assert got == _abxy(UNSCHED, UNSCHED, None, None)
    state = pre_filter(pod, snapshot_of(four(), SPREAD_2103[:5]), count_empty_selector=True)
    assert state is not None
    assert dict(state.match_num[0]) == {"zone1": 3, "zone2": 2}
    # A nil selector counts nobody on both releases.
    nil = mkpod(F, spread(1, "zone", HARD, None))
    got = run_filter(nil, four(), existing, count_empty_selector=True)
    assert got == _abxy(None, None, None, None)


def test_resize_deferred_pod_skips_with_the_1_37_gate() -> None:
    pod = mkpod(
        F,
        spread(1, "zone", HARD, FOO),
        conditions=[{"type": "PodResizePending", "status": "True", "reason": "Deferred"}],
    )
    snap = snapshot_of(four(), [])
    assert pre_filter(pod, snap, resize_preemption=True) is None
    assert pre_filter(pod, snap) is not None


def test_taint_comparison_operators() -> None:
    """nodeTaintsPolicy Honor with a Gt toleration: tolerated only with the alpha gate."""
    pod = mkpod(
        F,
        spread(1, "node", HARD, FOO, taints_policy="Honor"),
        tolerations=[{"key": "tier", "operator": "Gt", "value": "2", "effect": "NoSchedule"}],
    )
    nodes = [
        n("node-a", {"node": "node-a"}, taints=[taint("tier", "5")]),
        n("node-b", {"node": "node-b"}, taints=[taint("tier", "1")]),
        n("node-c", {"node": "node-c"}),
    ]
    existing = [on("node-a", "p-a1", F), on("node-b", "p-b1", F)]
    off = pre_filter(pod, snapshot_of(nodes, existing))
    on_ = pre_filter(pod, snapshot_of(nodes, existing), taint_comparison_operators=True)
    assert off is not None
    assert on_ is not None
    assert dict(off.match_num[0]) == {"node-c": 0}
    assert dict(on_.match_num[0]) == {"node-a": 1, "node-c": 0}


def test_invalid_selector_is_an_error() -> None:
    pod = mkpod(F, spread(1, "zone", HARD, {"matchExpressions": [{"key": "a", "operator": "Is"}]}))
    with pytest.raises(TopologySpreadError) as hard:
        pre_filter(pod, snapshot_of(four(), []))
    assert str(hard.value) == (
        "get constraints from pod: obtaining pod's hard topology spread constraints: "
        '"Is" is not a valid label selector operator'
    )
    soft = mkpod(F, spread(1, "zone", SOFT, {"matchExpressions": [{"key": "a", "operator": "In"}]}))
    with pytest.raises(TopologySpreadError) as e:
        pre_score(soft, snapshot_of(four(), []), four())
    assert str(e.value) == (
        "calculating preScoreState: obtaining pod's soft topology spread constraints: "
        "values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't "
        "be empty"
    )


# --- Score: TestPodTopologySpreadScore -----------------------------------------------------


@dataclasses.dataclass
class ScoreCase:
    name: str
    pod: Pod
    nodes: list[Node]
    existing: list[Placed]
    want: dict[str, int]
    failed: list[Node] = dataclasses.field(default_factory=list)
    flags: dict[str, Any] = dataclasses.field(default_factory=dict)
    default: LabelSelector | None = None


def _spread_on(counts: Mapping[str, int], labels: Mapping[str, str] = F) -> list[Placed]:
    out: list[Placed] = []
    for nd, count in counts.items():
        out.extend(on(nd, f"p-{nd[-1]}{i}", labels) for i in range(1, count + 1))
    return out


HOST_2103 = _spread_on({"node-a": 2, "node-b": 1, "node-d": 3})
HOST_4321 = _spread_on({"node-a": 4, "node-b": 3, "node-c": 2, "node-d": 1})
HOST_4213 = _spread_on({"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3})
ZONED = {"node-a": "zone1", "node-b": "zone1", "node-x": "zone2", "node-y": "zone2"}
ZONED_CD = {"node-a": "zone1", "node-b": "zone1", "node-c": "zone2", "node-d": "zone2"}
SOFT_HOST_FOO = spread(1, HOSTNAME, SOFT, FOO)
BY_NODE_2011 = _spread_on({"node-a": 2, "node-b": 1, "node-c": 1})

SCORE_CASES = [
    ScoreCase(
        "one constraint on node, no existing pods",
        mkpod(F, SOFT_HOST_FOO),
        hosts("node-a", "node-b"),
        [],
        {"node-a": 100, "node-b": 100},
    ),
    ScoreCase(
        "one constraint on node, only one node is candidate",
        mkpod(F, SOFT_HOST_FOO),
        hosts("node-a"),
        _spread_on({"node-a": 2, "node-b": 1}),
        {"node-a": 100},
        failed=hosts("node-b"),
    ),
    ScoreCase(
        "one constraint on node, all nodes have the same number of matching pods",
        mkpod(F, SOFT_HOST_FOO),
        hosts("node-a", "node-b"),
        _spread_on({"node-a": 1, "node-b": 1}),
        {"node-a": 100, "node-b": 100},
    ),
    ScoreCase(
        "one constraint on node, all 4 nodes are candidates",
        mkpod(F, SOFT_HOST_FOO),
        hosts("node-a", "node-b", "node-c", "node-d"),
        HOST_2103,
        {"node-a": 20, "node-b": 60, "node-c": 100, "node-d": 0},
    ),
    ScoreCase(
        "one constraint on node, null selector",
        mkpod(F, spread(1, HOSTNAME, SOFT, None)),
        hosts("node-a", "node-b", "node-c", "node-d"),
        HOST_2103,
        {"node-a": 100, "node-b": 100, "node-c": 100, "node-d": 100},
    ),
    ScoreCase(
        "one constraint on node, all 4 nodes are candidates, maxSkew=2",
        mkpod(F, spread(2, HOSTNAME, SOFT, FOO)),
        hosts("node-a", "node-b", "node-c", "node-d"),
        HOST_2103,
        {"node-a": 33, "node-b": 66, "node-c": 100, "node-d": 16},
    ),
    ScoreCase(
        "one constraint on node, all 4 nodes are candidates, maxSkew=3",
        mkpod(F, spread(3, HOSTNAME, SOFT, FOO)),
        hosts("node-a", "node-b", "node-c", "node-d"),
        HOST_4321,
        {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100},
    ),
    ScoreCase(
        "system defaulting, nodes don't have zone, pods match service",
        mkpod(F),
        hosts("node-a", "node-b", "node-c", "node-d"),
        HOST_4321,
        {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100},
        default=default_selector(
            mkpod(F), [{"metadata": {"namespace": NS}, "spec": {"selector": F}}], [], [], []
        ),
    ),
    ScoreCase(
        "one constraint on node, 3 out of 4 nodes are candidates",
        mkpod(F, SOFT_HOST_FOO),
        hosts("node-a", "node-b", "node-x"),
        HOST_4213,
        {"node-a": 33, "node-b": 83, "node-x": 100},
        failed=hosts("node-y"),
    ),
    ScoreCase(
        "one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match "
        "topology key",
        mkpod(F, SOFT_HOST_FOO),
        [*hosts("node-a"), n("node-b", {"n": "node-b"}), *hosts("node-x")],
        HOST_4213,
        {"node-a": 16, "node-b": 0, "node-x": 100},
        failed=hosts("node-y"),
    ),
    ScoreCase(
        "one constraint on zone, 3 out of 4 nodes are candidates",
        mkpod(F, spread(1, "zone", SOFT, FOO)),
        hosts("node-a", "node-b", "node-x", zone=ZONED),
        HOST_4213,
        {"node-a": 75, "node-b": 75, "node-x": 100},
        failed=hosts("node-y", zone=ZONED),
    ),
    ScoreCase(
        "two Constraints on zone and node, 2 out of 4 nodes are candidates",
        mkpod(F, spread(1, "zone", SOFT, FOO), SOFT_HOST_FOO),
        hosts("node-a", "node-x", zone=ZONED),
        _spread_on({"node-a": 2, "node-b": 1, "node-x": 2, "node-y": 4}),
        {"node-a": 100, "node-x": 63},
        failed=hosts("node-b", "node-y", zone=ZONED),
    ),
    ScoreCase(
        "two Constraints on zone, 2 out of 4 nodes are candidates",
        mkpod(FB, spread(1, "zone", SOFT, FOO), spread(1, "zone", SOFT, BAR)),
        [n("node-a", {"zone": "zone1"}), n("node-x", {"zone": "zone2"})],
        placed(
            [
                ("node-a", "p-a1", FB),
                ("node-a", "p-a2", F),
                ("node-b", "p-b1", FB),
                ("node-y", "p-y1", F),
                ("node-y", "p-y2", FB),
                ("node-y", "p-y3", F),
            ]
        ),
        {"node-a": 85, "node-x": 100},
        failed=[n("node-b", {"zone": "zone1"}), n("node-y", {"zone": "zone2"})],
    ),
    ScoreCase(
        "two Constraints on zone and node, with different labelSelectors",
        mkpod(FB, spread(1, "zone", SOFT, FOO), spread(1, HOSTNAME, SOFT, BAR)),
        hosts("node-a", "node-b", "node-x", "node-y", zone=ZONED),
        placed(
            [
                ("node-a", "p-a1", F),
                ("node-b", "p-b1", FB),
                ("node-y", "p-y1", F),
                ("node-y", "p-y2", B),
            ]
        ),
        {"node-a": 60, "node-b": 20, "node-x": 100, "node-y": 60},
    ),
    ScoreCase(
        "two Constraints on zone and node, with different labelSelectors, some nodes have 0 pods",
        mkpod(FB, spread(1, "zone", SOFT, FOO), spread(1, HOSTNAME, SOFT, BAR)),
        hosts("node-a", "node-b", "node-x", "node-y", zone=ZONED),
        placed([("node-b", "p-b1", B), ("node-x", "p-x1", F), ("node-y", "p-y1", FB)]),
        {"node-a": 100, "node-b": 60, "node-x": 40, "node-y": 0},
    ),
    ScoreCase(
        "two Constraints on zone and node, with different labelSelectors, 3 out of 4 nodes are "
        "candidates",
        mkpod(FB, spread(1, "zone", SOFT, FOO), spread(1, HOSTNAME, SOFT, BAR)),
        hosts("node-a", "node-b", "node-x", zone=ZONED),
        placed(
            [
                ("node-a", "p-a1", F),
                ("node-b", "p-b1", FB),
                ("node-y", "p-y1", F),
                ("node-y", "p-y2", B),
            ]
        ),
        {"node-a": 50, "node-b": 25, "node-x": 100},
        failed=hosts("node-y", zone=ZONED),
    ),
    ScoreCase(
        "existing pods in a different namespace do not count",
        mkpod(F, SOFT_HOST_FOO),
        hosts("node-a", "node-b"),
        [
            on("node-a", "p-a1", F, ns="ns1"),
            on("node-a", "p-a2", F),
            on("node-b", "p-b1", F),
            on("node-b", "p-b2", F),
        ],
        {"node-a": 100, "node-b": 33},
    ),
    ScoreCase(
        "terminating Pods should be excluded",
        mkpod(F, SOFT_HOST_FOO),
        hosts("node-a", "node-b"),
        [on("node-a", "p-a", F, terminating=True), on("node-b", "p-b", F)],
        {"node-a": 100, "node-b": 0},
    ),
    ScoreCase(
        "minDomains has no effect when ScheduleAnyway",
        mkpod(F, spread(2, "node", SOFT, FOO, min_domains=10)),
        nodes_by("node", "node-a", "node-b", "node-c"),
        _spread_on({"node-a": 2, "node-b": 2, "node-c": 1}),
        {"node-a": 75, "node-b": 75, "node-c": 100},
    ),
    ScoreCase(
        "NodeAffinityPolicy honored with labelSelectors",
        mkpod(F, spread(1, "node", SOFT, FOO), node_selector=F),
        nodes_by("node", "node-a", "node-b", "node-c", node_a=F, node_b=F),
        BY_NODE_2011,
        {"node-a": 0, "node-b": 33, "node-c": 100},
        flags=NIP,
    ),
    ScoreCase(
        "NodeAffinityPolicy ignored with labelSelectors",
        mkpod(F, spread(1, "node", SOFT, FOO, affinity_policy="Ignore"), node_selector=F),
        nodes_by("node", "node-a", "node-b", "node-c", node_a=F, node_b=F),
        BY_NODE_2011,
        {"node-a": 66, "node-b": 100, "node-c": 100},
        flags=NIP,
    ),
    ScoreCase(
        "NodeAffinityPolicy honored with nodeAffinity",
        mkpod(F, spread(1, "node", SOFT, FOO), affinity=required(term(expr("foo", "In", "")))),
        nodes_by("node", "node-a", "node-b", "node-c", node_a=F, node_b=F),
        BY_NODE_2011,
        {"node-a": 0, "node-b": 33, "node-c": 100},
        flags=NIP,
    ),
    ScoreCase(
        "NodeAffinityPolicy ignored with nodeAffinity",
        mkpod(
            F,
            spread(1, "node", SOFT, FOO, affinity_policy="Ignore"),
            affinity=required(term(expr("foo", "In", ""))),
        ),
        nodes_by("node", "node-a", "node-b", "node-c", node_a=F, node_b=F),
        BY_NODE_2011,
        {"node-a": 66, "node-b": 100, "node-c": 100},
        flags=NIP,
    ),
    ScoreCase(
        "NodeTaintsPolicy honored",
        mkpod(F, spread(1, "node", SOFT, FOO, taints_policy="Honor")),
        [*nodes_by("node", "node-a", "node-b"), n("node-c", {"node": "node-c"}, taints=TAINTS)],
        BY_NODE_2011,
        {"node-a": 0, "node-b": 33, "node-c": 100},
        flags=NIP,
    ),
    ScoreCase(
        "NodeTaintsPolicy ignored",
        mkpod(F, spread(1, "node", SOFT, FOO)),
        [*nodes_by("node", "node-a", "node-b"), n("node-c", {"node": "node-c"}, taints=TAINTS)],
        BY_NODE_2011,
        {"node-a": 66, "node-b": 100, "node-c": 100},
        flags=NIP,
    ),
    ScoreCase(
        "matchLabelKeys ignored when feature gate disabled",
        mkpod(
            {"foo": "", "bar": "", "baz": ""},
            spread(1, "zone", SOFT, FOO, match_label_keys=["baz"]),
            spread(1, HOSTNAME, SOFT, BAR, match_label_keys=["baz"]),
        ),
        hosts("node-a", "node-b", "node-c", "node-d", zone=ZONED_CD),
        placed(
            [
                ("node-a", "p-a1", F),
                ("node-b", "p-b1", FB),
                ("node-c", "p-y1", F),
                ("node-c", "p-y2", B),
            ]
        ),
        {"node-a": 60, "node-b": 20, "node-c": 60, "node-d": 100},
    ),
    ScoreCase(
        "matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
        mkpod(
            FB,
            spread(1, "zone", SOFT, {}, match_label_keys=["foo"]),
            spread(1, HOSTNAME, SOFT, {}, match_label_keys=["bar"]),
        ),
        hosts("node-a", "node-b", "node-c", "node-d", zone=ZONED_CD),
        placed(
            [
                ("node-a", "p-a1", F),
                ("node-b", "p-b1", FB),
                ("node-c", "p-y1", F),
                ("node-c", "p-y2", B),
            ]
        ),
        {"node-a": 60, "node-b": 20, "node-c": 60, "node-d": 100},
        flags={"match_label_keys": True},
    ),
    ScoreCase(
        "matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
        mkpod(
            {"foo": "", "bar": "", "baz": ""},
            spread(1, "zone", SOFT, FOO),
            spread(1, HOSTNAME, SOFT, BAR, match_label_keys=["baz"]),
        ),
        hosts("node-a", "node-b", "node-c", "node-d", zone=ZONED_CD),
        placed(
            [
                ("node-a", "p-a1", F),
                ("node-b", "p-b1", {"foo": "", "bar": "", "baz": ""}),
                ("node-c", "p-c1", F),
                ("node-c", "p-c2", B),
                ("node-c", "p-d3", {"bar": "", "baz": ""}),
            ]
        ),
        {"node-a": 60, "node-b": 20, "node-c": 60, "node-d": 100},
        flags={"match_label_keys": True},
    ),
]


@pytest.mark.parametrize("case", SCORE_CASES, ids=lambda c: c.name)
def test_score(case: ScoreCase) -> None:
    snap = snapshot_of([*case.nodes, *case.failed], case.existing)
    state = pre_score(
        case.pod,
        snap,
        case.nodes,
        default_selector=case.default,
        **{**UPSTREAM_TEST, **case.flags},
    )
    assert state is not None
    assert score_nodes(state, case.pod, case.nodes) == case.want


# --- PreScore: TestPreScoreSkip and TestPreScoreStateEmptyNodes ----------------------------

RS_OWNER: J = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs1", "controller": True}
RS1: J = {"metadata": {"namespace": NS, "name": "rs1"}, "spec": {"selector": FOO}}


def test_pre_score_skips() -> None:
    nodes = hosts("node-a", "node-b")
    assert pre_score(mkpod(), snapshot_of(nodes, []), nodes, defaults=[]) is None
    pod = mkpod({"foo": "bar", "baz": "sup"}, owner={**RS_OWNER, "name": "rs2"})
    tar = {"matchExpressions": [{"key": "tar", "operator": "Exists"}]}
    rs1 = {"metadata": {"namespace": NS, "name": "rs1"}, "spec": {"selector": tar}}
    assert default_selector(pod, [], [], [rs1], []) is None
    planet = [TopologySpreadConstraint(max_skew=2, topology_key="planet", when_unsatisfiable=SOFT)]
    planets = [n("node-a", {"planet": "mars"})]
    assert pre_score(pod, snapshot_of(planets, []), planets, defaults=planet) is None
    # No node at all: Skip.
    own = mkpod(F, SOFT_HOST_FOO)
    assert pre_score(own, snapshot_of([], []), []) is None


def _weights(*sizes: int) -> tuple[float, ...]:
    return tuple(math.log(s + 2) for s in sizes)


PRE_SCORE_STATE_CASES = [
    # (pod, nodes, defaults, default selector, (constraints, ignored, counts, weights))
    pytest.param(
        mkpod(F, spread(1, "zone", SOFT, FOO), SOFT_HOST_FOO),
        hosts("node-a", "node-b", "node-x", zone=ZONED),
        [],
        None,
        ([(1, "zone"), (1, HOSTNAME)], set(), [{"zone1": 0, "zone2": 0}, {}], _weights(2, 3)),
        id="normal case",
    ),
    pytest.param(
        mkpod(F, spread(1, "zone", SOFT, None)),
        hosts("node-a", "node-b", "node-x", zone=ZONED),
        [],
        None,
        ([(1, "zone")], set(), [{"zone1": 0, "zone2": 0}], _weights(2)),
        id="null selector",
    ),
    pytest.param(
        mkpod(F, spread(1, "zone", SOFT, FOO), spread(1, HOSTNAME, SOFT, BAR)),
        hosts("node-a", "node-b", "node-x", zone={"node-a": "zone1", "node-b": "zone1"}),
        [],
        None,
        ([(1, "zone"), (1, HOSTNAME)], {"node-x"}, [{"zone1": 0}, {}], _weights(1, 2)),
        id="node-x doesn't have label zone",
    ),
    pytest.param(
        mkpod({"foo": "tar", "baz": "sup"}, owner=RS_OWNER),
        [
            n("node-a", {HOSTNAME: "node-a", LABEL_TOPOLOGY_ZONE: "mars"}),
            n("node-b", {HOSTNAME: "node-b", LABEL_TOPOLOGY_ZONE: "mars"}),
            n("node-c", {HOSTNAME: "node-c"}),
            n("node-d", {HOSTNAME: "node-d"}),
        ],
        None,
        default_selector(mkpod({"foo": "tar"}, owner=RS_OWNER), [], [], [RS1], []),
        (
            [(3, HOSTNAME), (5, LABEL_TOPOLOGY_ZONE)],
            set(),
            [{}, {"mars": 0, "": 0}],
            _weights(4, 2),
        ),
        id="system default constraints and a replicaset",
    ),
    pytest.param(
        mkpod({"foo": "tar", "baz": "sup"}, owner=RS_OWNER),
        [n("node-a", {"rack": "rack1", HOSTNAME: "node-a", "planet": "mars"})],
        [
            TopologySpreadConstraint(max_skew=1, topology_key=HOSTNAME, when_unsatisfiable=SOFT),
            TopologySpreadConstraint(max_skew=2, topology_key="rack", when_unsatisfiable=HARD),
            TopologySpreadConstraint(max_skew=2, topology_key="planet", when_unsatisfiable=SOFT),
        ],
        default_selector(mkpod({"foo": "tar"}, owner=RS_OWNER), [], [], [RS1], []),
        ([(1, HOSTNAME), (2, "planet")], set(), [{}, {"mars": 0}], _weights(1, 1)),
        id="default constraints and a replicaset",
    ),
    pytest.param(
        mkpod(
            {"foo": "bar", "baz": "sup"},
            spread(1, "zone", HARD, BAR),
            spread(2, "planet", SOFT, {"matchLabels": {"baz": "sup"}}),
            owner=RS_OWNER,
        ),
        [n("node-a", {"planet": "mars", "galaxy": "andromeda"})],
        [TopologySpreadConstraint(max_skew=2, topology_key="galaxy", when_unsatisfiable=SOFT)],
        default_selector(mkpod({"foo": "tar"}, owner=RS_OWNER), [], [], [RS1], []),
        ([(2, "planet")], set(), [{"mars": 0}], _weights(1)),
        id="default constraints and a replicaset, but pod has constraints",
    ),
]


@pytest.mark.parametrize(("pod", "nodes", "defaults", "default", "want"), PRE_SCORE_STATE_CASES)
def test_pre_score_state(
    pod: Pod,
    nodes: list[Node],
    defaults: list[TopologySpreadConstraint] | None,
    default: LabelSelector | None,
    want: tuple[list[tuple[int, str]], set[str], list[dict[str, int]], tuple[float, ...]],
) -> None:
    state = pre_score(
        pod, snapshot_of(nodes, []), nodes, defaults=defaults, default_selector=default
    )
    assert state is not None
    assert _described(state) == want


def _described(
    state: ScoreState,
) -> tuple[list[tuple[int, str]], set[str], list[dict[str, int]], tuple[float, ...]]:
    return (
        [(c.max_skew, c.topology_key) for c in state.constraints],
        set(state.ignored_nodes),
        [dict(m) for m in state.pod_counts],
        state.weights,
    )


def test_pre_score_policies() -> None:
    """The policies as read, only with NodeInclusionPolicyInPodTopologySpread."""
    pod = mkpod(F, spread(1, "zone", SOFT, BAR, affinity_policy="Ignore", taints_policy="Honor"))
    nodes = hosts("node-a", "node-x", zone=ZONED)
    on_ = pre_score(pod, snapshot_of(nodes, []), nodes)
    off = pre_score(pod, snapshot_of(nodes, []), nodes, node_inclusion_policy=False)
    assert on_ is not None
    assert off is not None
    assert [(c.node_affinity_policy, c.node_taints_policy) for c in on_.constraints] == [
        ("Ignore", "Honor")
    ]
    assert [(c.node_affinity_policy, c.node_taints_policy) for c in off.constraints] == [
        ("Honor", "Ignore")
    ]


def test_normalize_score_ignored_and_all_zero() -> None:
    pod = mkpod(F, spread(1, "zone", SOFT, FOO))
    nodes = [n("node-a", {"zone": "z1"}), n("node-b", {})]
    state = pre_score(pod, snapshot_of(nodes, []), nodes)
    assert state is not None
    assert state.ignored_nodes == {"node-b"}
    assert normalize_score(state, {"node-a": 0, "node-b": 0}) == {"node-a": 100, "node-b": 0}
    assert normalize_score(state, {"node-a": 4, "node-c": 2}) == {"node-a": 50, "node-c": 100}


# --- DefaultSelector -----------------------------------------------------------------------


def _svc(selector: Mapping[str, str] | None, ns: str = NS, name: str = "s") -> J:
    spec: J = {} if selector is None else {"selector": dict(selector)}
    return {"metadata": {"namespace": ns, "name": name}, "spec": spec}


def _owned(kind: str, api_version: str, name: str = "c", *, controller: bool = True) -> J:
    return {"apiVersion": api_version, "kind": kind, "name": name, "controller": controller}


def _ctl(selector: Any, name: str = "c", ns: str = NS) -> J:
    return {"metadata": {"namespace": ns, "name": name}, "spec": {"selector": selector}}


POD_LABELS = {"app": "web", "tier": "front", "v": "1"}
EXISTS_V: J = {"key": "v", "operator": "Exists"}

DEFAULT_SELECTOR_CASES = [
    # (owner, services, rcs, rss, sss, want as (matchLabels, matchExpressions) or None)
    pytest.param(None, [], [], [], [], None, id="nothing selects the pod"),
    pytest.param(
        None,
        [_svc({"app": "web"}), _svc({"tier": "front"}, name="t"), _svc({"app": "db"}, name="d")],
        [],
        [],
        [],
        ({"app": "web", "tier": "front"}, []),
        id="matching services merged, others left out",
    ),
    pytest.param(
        None,
        [_svc(None), _svc({"app": "web"}, ns="other")],
        [],
        [],
        [],
        None,
        id="a nil selector and another namespace select nothing",
    ),
    pytest.param(None, [_svc({})], [], [], [], None, id="an empty service selector adds nothing"),
    pytest.param(
        _owned("ReplicationController", "v1"),
        [_svc({"app": "web"})],
        [_ctl({"tier": "back"}), _ctl({"x": "y"}, name="other")],
        [],
        [],
        ({"app": "web", "tier": "back"}, []),
        id="replication controller's selector merged (unchecked, as upstream)",
    ),
    pytest.param(
        _owned("ReplicaSet", "apps/v1"),
        [_svc({"app": "web"})],
        [],
        [_ctl({"matchLabels": {"app": "other"}, "matchExpressions": [EXISTS_V]})],
        [],
        ({"app": "web"}, [("app", "In", ["other"]), ("v", "Exists", [])]),
        id="replica set's requirements added",
    ),
    pytest.param(
        _owned("StatefulSet", "apps/v1"),
        [],
        [],
        [],
        [_ctl({"matchLabels": {"app": "web"}})],
        ({}, [("app", "In", ["web"])]),
        id="stateful set's requirements",
    ),
    pytest.param(
        _owned("ReplicaSet", "extensions/v1beta1"),
        [],
        [],
        [_ctl(FOO)],
        [],
        None,
        id="another group version is not a supported controller",
    ),
    pytest.param(
        _owned("ReplicaSet", "apps/v1", controller=False),
        [],
        [],
        [_ctl(FOO)],
        [],
        None,
        id="an owner that is not the controller",
    ),
    pytest.param(
        _owned("ReplicaSet", "apps/v1"),
        [],
        [],
        [_ctl({"matchExpressions": [{"key": "v", "operator": "Bad"}]}), _ctl(None, name="n")],
        [],
        None,
        id="an invalid replica set selector is skipped",
    ),
    pytest.param(
        _owned("ReplicaSet", "apps/v1"),
        [],
        [],
        [_ctl(FOO, ns="other")],
        [],
        None,
        id="the controller is looked up in the pod's namespace",
    ),
    pytest.param(
        _owned("StatefulSet", "a/b/c"),
        [_svc({"v": "1"})],
        [],
        [],
        [_ctl(FOO)],
        ({"v": "1"}, []),
        id="an api version that does not parse keeps the services' selector",
    ),
]


@pytest.mark.parametrize(("owner", "svcs", "rcs", "rss", "sss", "want"), DEFAULT_SELECTOR_CASES)
def test_default_selector(
    owner: J | None,
    svcs: list[J],
    rcs: list[J],
    rss: list[J],
    sss: list[J],
    want: tuple[dict[str, str], list[tuple[str, str, list[str]]]] | None,
) -> None:
    pod = mkpod(POD_LABELS, owner=owner)
    got = default_selector(pod, svcs, rcs, rss, sss)
    if want is None:
        assert got is None
        return
    assert got is not None
    expressions = [(e.key, e.operator, list(e.values)) for e in got.match_expressions]
    assert (got.match_labels, expressions) == want


# --- matchLabelKeys merging and rounding ---------------------------------------------------


def test_match_label_keys_leave_a_nil_selector_nil() -> None:
    """mergeLabelSetWithSelector keeps Nothing: the pod's own value changes nothing."""
    pod = mkpod({"foo": "a"}, spread(1, "zone", HARD, None, match_label_keys=["foo"]))
    existing = [on("node-a", "p-a1", {"foo": "a"})]
    state = pre_filter(pod, snapshot_of(four(), existing), count_empty_selector=True)
    assert state is not None
    assert state.constraints[0].selector.matches_nothing
    assert dict(state.match_num[0]) == {"zone1": 0, "zone2": 0}


def test_match_label_keys_merged_by_the_api_server_and_again_by_the_scheduler() -> None:
    """The API server appended ``v In (1)`` at creation; the pod's label is now 2: the
    scheduler adds ``v=2`` and no pod can match both, so nobody is counted."""
    merged = {"matchExpressions": [EXISTS_FOO, {"key": "v", "operator": "In", "values": ["1"]}]}
    pod = mkpod({"foo": "", "v": "2"}, spread(1, "node", HARD, merged, match_label_keys=["v"]))
    existing = [on("node-a", "p-a1", {"foo": "", "v": "1"}), on("node-a", "p-a2", {"foo": ""})]
    state = pre_filter(pod, snapshot_of(four(), existing))
    assert state is not None
    assert dict(state.match_num[0]) == {"node-a": 0, "node-b": 0, "node-x": 0, "node-y": 0}
    old = pre_filter(pod, snapshot_of(four(), existing), match_label_keys=False)
    assert old is not None
    assert old.match_num[0]["node-a"] == 1


EXISTS_FOO: J = {"key": "foo", "operator": "Exists"}


@pytest.mark.parametrize(
    ("value", "want"), [(2.5, 3), (3.5, 4), (0.49999999999999994, 0), (1.4999, 1), (0.0, 0)]
)
def test_scores_round_half_away_from_zero(value: float, want: int) -> None:
    """Go's math.Round, not Python's round-half-even."""
    assert pts._go_round(value) == want
