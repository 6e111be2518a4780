"""The default profile's Score plugins as kube-scheduler 1.37.2's: upstream's table tests
(normalize_score_test.go, taint_toleration_test.go, node_affinity_test.go,
least_allocated_test.go, most_allocated_test.go, requested_to_capacity_ratio_test.go,
balanced_allocation_test.go, image_locality_test.go) ported case by case with exact integers,
plus the non-zero requests, the release switches and the combination of weighted scores."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from operators.allocator.errors import InvalidNodeSelectorError
from operators.api.core import Node, Pod
from operators.scheduling.plugins import scores as sc
from operators.scheduling.plugins.volumebinding import shape_from_args

J = dict[str, Any]
MB = 1024 * 1024
EXT = "abc.com/xyz"  # util_test.go's extendedRes
GPU = "nvidia.com/gpu"


def make_pod(
    *requests: Mapping[str, str] | None,
    init: Sequence[Mapping[str, str] | None] = (),
    images: Sequence[str] = (),
    init_images: Sequence[str] = (),
    image_volumes: Sequence[str] = (),
    tolerations: Sequence[J] = (),
    preferred: Sequence[J] | None = None,
    pod_requests: Mapping[str, str] | None = None,
    overhead: Mapping[str, str] | None = None,
) -> Pod:
    """st.MakePod(): one container per ``Req`` (None: a container without requests)."""

    def container(i: int, req: Mapping[str, str] | None, image: str = "") -> J:
        out: J = {"name": f"c{i}", "image": image}
        if req is not None:
            out["resources"] = {"requests": dict(req)}
        return out

    containers = [container(i, r) for i, r in enumerate(requests)]
    containers += [container(len(containers) + i, None, im) for i, im in enumerate(images)]
    spec: J = {"containers": containers}
    inits = [container(100 + i, r) for i, r in enumerate(init)]
    inits += [container(200 + i, None, im) for i, im in enumerate(init_images)]
    if inits:
        spec["initContainers"] = inits
    if image_volumes:
        spec["volumes"] = [
            {"name": f"v{i}", "image": {"reference": ref}} for i, ref in enumerate(image_volumes)
        ]
    if tolerations:
        spec["tolerations"] = list(tolerations)
    if preferred is not None:
        spec["affinity"] = {
            "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": list(preferred)}
        }
    if pod_requests is not None:
        spec["resources"] = {"requests": dict(pod_requests)}
    if overhead is not None:
        spec["overhead"] = dict(overhead)
    return Pod.load({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec})


def make_node(
    name: str,
    allocatable: Mapping[str, str | int] | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[J] = (),
    images: Sequence[tuple[Sequence[str], int]] = (),
) -> Node:
    status: J = {"allocatable": {k: str(v) for k, v in (allocatable or {}).items()}}
    if images:
        status["images"] = [{"names": list(n), "sizeBytes": size} for n, size in images]
    return Node.load(
        {
            "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": {"taints": list(taints)},
            "status": status,
        }
    )


def cpu_mem(cpu: str, memory: str) -> dict[str, str]:
    return {"cpu": cpu, "memory": memory}


# --- helper/normalize_score_test.go ---------------------------------------------------------


@pytest.mark.parametrize(
    ("reverse", "raw", "want"),
    [
        (False, [1, 2, 3, 4], [25, 50, 75, 100]),
        (True, [1, 2, 3, 4], [75, 50, 25, 0]),
        (False, [1000, 10, 20, 30], [100, 1, 2, 3]),
        (True, [1000, 10, 20, 30], [0, 99, 98, 97]),
        (False, [1, 1, 1, 1], [100, 100, 100, 100]),
        (False, [1000, 1, 1, 1], [100, 0, 0, 0]),
        (True, [0, 1, 1, 1], [100, 0, 0, 0]),
        (False, [0, 0, 0, 0], [0, 0, 0, 0]),
        (True, [0, 0, 0, 0], [100, 100, 100, 100]),
    ],
)
def test_default_normalize(reverse: bool, raw: list[int], want: list[int]) -> None:
    scores = {f"n{i}": s for i, s in enumerate(raw)}
    got = sc.default_normalize(scores, reverse)
    assert [got[f"n{i}"] for i in range(len(raw))] == want


# --- tainttoleration/taint_toleration_test.go -----------------------------------------------


def toleration(key: str, value: str, effect: str, operator: str = "Equal") -> J:
    return {"key": key, "operator": operator, "value": value, "effect": effect}


def prefer(key: str, value: str, effect: str = "PreferNoSchedule") -> J:
    return {"key": key, "value": value, "effect": effect}


CPU_ARM = prefer("cpu-type", "arm64")
DISK_SSD = prefer("disk-type", "ssd")
SLA = "node.kubernetes.io/sla"

TAINT_CASES: list[tuple[str, list[J], list[list[J]], list[int], bool]] = [
    (
        "tolerated taint beats an untolerated one",
        [toleration("foo", "bar", "PreferNoSchedule")],
        [[prefer("foo", "bar")], [prefer("foo", "blah")]],
        [100, 0],
        False,
    ),
    (
        "how many tolerated taints a node has does not matter",
        [
            toleration("cpu-type", "arm64", "PreferNoSchedule"),
            toleration("disk-type", "ssd", "PreferNoSchedule"),
        ],
        [[], [CPU_ARM], [CPU_ARM, DISK_SSD]],
        [100, 100, 100],
        False,
    ),
    (
        "the more intolerable taints, the lower the score",
        [toleration("foo", "bar", "PreferNoSchedule")],
        [[], [CPU_ARM], [CPU_ARM, DISK_SSD]],
        [100, 50, 0],
        False,
    ),
    (
        "only PreferNoSchedule taints and tolerations count",
        [
            toleration("cpu-type", "arm64", "NoSchedule"),
            toleration("disk-type", "ssd", "NoSchedule"),
        ],
        [[], [prefer("cpu-type", "arm64", "NoSchedule")], [CPU_ARM, DISK_SSD]],
        [100, 100, 0],
        False,
    ),
    ("no tolerations: the node without taints", [], [[], [CPU_ARM]], [100, 0], False),
    (
        "Gt toleration prefers the node with a higher SLA",
        [toleration(SLA, "950", "PreferNoSchedule", "Gt")],
        [[prefer(SLA, "800")], [prefer(SLA, "999")]],
        [0, 100],
        True,
    ),
    (
        "Lt toleration prefers the node with a lower SLA",
        [toleration(SLA, "800", "PreferNoSchedule", "Lt")],
        [[prefer(SLA, "950")], [prefer(SLA, "700")]],
        [0, 100],
        True,
    ),
]


@pytest.mark.parametrize(
    ("tolerations", "taints", "want", "comparison"),
    [c[1:] for c in TAINT_CASES],
    ids=[c[0] for c in TAINT_CASES],
)
def test_taint_toleration(
    tolerations: list[J], taints: list[list[J]], want: list[int], comparison: bool
) -> None:
    pod = make_pod(None, tolerations=tolerations)
    nodes = [make_node(f"node{i}", taints=t) for i, t in enumerate(taints)]
    raw = {
        n.metadata.name or "": sc.taint_toleration_score(pod, n, comparison=comparison)
        for n in nodes
    }
    got = sc.taint_toleration_normalize(raw)
    assert [got[f"node{i}"] for i in range(len(nodes))] == want


def test_taint_comparison_off_is_equal_only() -> None:
    """With the gate off (the default) a Gt toleration tolerates nothing."""
    pod = make_pod(None, tolerations=[toleration(SLA, "950", "PreferNoSchedule", "Gt")])
    assert sc.taint_toleration_score(pod, make_node("n", taints=[prefer(SLA, "999")])) == 1


# --- nodeaffinity/node_affinity_test.go (TestNodeAffinityPriority) --------------------------


def pref(weight: int, *exprs: tuple[str, str, list[str]]) -> J:
    return {
        "weight": weight,
        "preference": {
            "matchExpressions": [{"key": k, "operator": op, "values": v} for k, op, v in exprs]
        },
    }


LABEL1 = {"foo": "bar"}
LABEL2 = {"key": "value"}
LABEL3 = {"az": "az1"}
LABEL4 = {"abc": "az11", "def": "az22"}
LABEL5 = {"foo": "bar", "key": "value", "az": "az1"}
AFFINITY1 = [pref(2, ("foo", "In", ["bar"]))]
AFFINITY2 = [
    pref(2, ("foo", "In", ["bar"])),
    pref(4, ("key", "In", ["value"])),
    pref(5, ("foo", "In", ["bar"]), ("key", "In", ["value"]), ("az", "In", ["az1"])),
]

AFFINITY_CASES: list[tuple[str, list[J] | None, list[dict[str, str]], list[int]]] = [
    ("no NodeAffinity: all nodes the same", None, [LABEL1, LABEL2, LABEL3], [0, 0, 0]),
    ("no node matches: all zero", AFFINITY1, [LABEL4, LABEL2, LABEL3], [0, 0, 0]),
    ("only node1 matches", AFFINITY1, [LABEL1, LABEL2, LABEL3], [100, 0, 0]),
    ("all match with different priorities", AFFINITY2, [LABEL1, LABEL5, LABEL2], [18, 100, 36]),
]


@pytest.mark.parametrize(
    ("preferred", "labels", "want"),
    [c[1:] for c in AFFINITY_CASES],
    ids=[c[0] for c in AFFINITY_CASES],
)
def test_node_affinity(
    preferred: list[J] | None, labels: list[dict[str, str]], want: list[int]
) -> None:
    pod = make_pod(None, preferred=preferred)
    nodes = [make_node(f"node{i}", labels=lab) for i, lab in enumerate(labels)]
    terms = sc.preferred_terms(pod)
    raw = {n.metadata.name or "": sc.preferred_score(terms or (), n) for n in nodes}
    # "calculate the priorities correctly even if PreScore is not called"
    assert raw == {n.metadata.name or "": sc.node_affinity_score(pod, n) for n in nodes}
    got = sc.node_affinity_normalize(raw)
    assert [got[f"node{i}"] for i in range(len(nodes))] == want


def test_node_affinity_skip_and_broken() -> None:
    """PreScore's Skip without preferred terms; its error for a term that does not parse,
    in upstream's words; terms of weight 0 and empty terms are dropped unparsed."""
    assert sc.preferred_terms(make_pod(None)) is None
    broken = make_pod(None, preferred=[pref(2, ("invalid key", "In", ["bar"]))])
    with pytest.raises(InvalidNodeSelectorError) as err:
        sc.preferred_terms(broken)
    assert str(err.value) == (
        '[0].matchExpressions[0].key: Invalid value: "invalid key": name part must consist '
        "of alphanumeric characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
        "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
    )
    ignored = make_pod(
        None,
        preferred=[pref(0, ("invalid key", "In", ["bar"])), {"weight": 3, "preference": {}}],
    )
    assert sc.preferred_terms(ignored) == ()
    two = make_pod(
        None,
        preferred=[pref(1, ("a", "Gt", ["1", "2"])), pref(1, ("b", "Bogus", []))],
    )
    with pytest.raises(InvalidNodeSelectorError) as err:
        sc.preferred_terms(two)
    assert str(err.value) == (
        "[[0].matchExpressions[0].values: Invalid value: [\"1\",\"2\"]: for 'Gt', 'Lt' "
        "operators, exactly one value is required, [1].matchExpressions[0].operator: "
        'Unsupported value: "Bogus": supported values: "In", "NotIn", "Exists", '
        '"DoesNotExist", "Gt", "Lt"]'
    )


def test_node_affinity_fields_and_gt() -> None:
    pod = make_pod(
        None,
        preferred=[
            {
                "weight": 7,
                "preference": {
                    "matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": ["node-b"]}
                    ]
                },
            },
            pref(3, ("gen", "Gt", ["4"])),
        ],
    )
    a = make_node("node-a", labels={"gen": "5"})
    b = make_node("node-b", labels={"gen": "3"})
    assert (sc.node_affinity_score(pod, a), sc.node_affinity_score(pod, b)) == (3, 7)


# --- noderesources: least_allocated_test.go, most_allocated_test.go -------------------------

Req = Mapping[str, str] | None
#: (name, pod's containers, nodes' allocatable, existing pods per node, resources, scores)
FitCase = tuple[
    str,
    Sequence[Req],
    Sequence[Mapping[str, str]],
    Sequence[Sequence[Sequence[Req]]],
    Sequence[tuple[str, int]],
    list[int],
]
N4_10 = {"cpu": "4000", "memory": "10000"}
N6_10 = {"cpu": "6000", "memory": "10000"}
N10_20 = {"cpu": "10000", "memory": "20000"}
REQUESTED = [cpu_mem("1000", "2000"), cpu_mem("2000", "3000")]
EXT_SET = (("cpu", 1), ("memory", 1), (EXT, 1))
DEFAULT = sc.DEFAULT_RESOURCES
MEM2 = (("memory", 2), ("cpu", 1))
C3M0 = [cpu_mem("3000", "0")]
C3M5 = [cpu_mem("3000", "5000")]

LEAST_CASES: list[FitCase] = [
    ("nothing scheduled, nothing requested", [], [N4_10, N4_10], [[], []], DEFAULT, [100, 100]),
    ("differently sized nodes", REQUESTED, [N4_10, N6_10], [[], []], DEFAULT, [37, 50]),
    (
        "no resources requested, pods scheduled",
        [],
        [N4_10, N4_10],
        [[[], []], [[], []]],
        DEFAULT,
        [100, 100],
    ),
    (
        "no resources requested, pods scheduled with resources",
        [],
        [N10_20, N10_20],
        [[C3M0, C3M0], [C3M0, C3M5]],
        DEFAULT,
        [70, 57],
    ),
    (
        "resources requested, pods scheduled with resources",
        REQUESTED,
        [N10_20, N10_20],
        [[C3M0], [C3M5]],
        DEFAULT,
        [57, 45],
    ),
    (
        "resources requested, pods scheduled with resources, differently sized nodes",
        REQUESTED,
        [N10_20, {"cpu": "10000", "memory": "50000"}],
        [[C3M0], [C3M5]],
        DEFAULT,
        [57, 60],
    ),
    (
        "requested resources exceed node capacity",
        C3M0,
        [N4_10, N4_10],
        [[C3M0], [C3M5]],
        DEFAULT,
        [50, 25],
    ),
    ("zero node resources", [], [{}, {}], [[C3M0], [C3M5]], DEFAULT, [0, 0]),
    ("memory weighs 2", REQUESTED, [N4_10, N6_10], [[], []], MEM2, [41, 50]),
    (
        "bypass an extended resource the pod does not request",
        REQUESTED,
        [N6_10, {**N6_10, EXT: "4"}],
        [[], []],
        EXT_SET,
        [50, 50],
    ),
    (
        "honor an extended resource the pod requests",
        [{"cpu": "3000", "memory": "5000", EXT: "2"}],
        [{**N6_10, EXT: "4"}, {**N6_10, EXT: "10"}],
        [[], []],
        EXT_SET,
        [50, 60],
    ),
    (
        "a resource the node does not have",
        [cpu_mem("3000", "4000")],
        [N6_10, {**N6_10, EXT: "4"}],
        [[], []],
        ((EXT, 2), ("cpu", 1), ("memory", 1)),
        [55, 55],
    ),
]

MOST_CASES: list[FitCase] = [
    ("nothing scheduled, nothing requested", [], [N4_10, N4_10], [[], []], DEFAULT, [0, 0]),
    ("differently sized nodes", REQUESTED, [N4_10, N6_10], [[], []], DEFAULT, [62, 50]),
    (
        "no resources requested, pods scheduled with resources",
        [],
        [N10_20, N10_20],
        [[C3M0, C3M0], [C3M0, C3M5]],
        DEFAULT,
        [30, 42],
    ),
    (
        "resources requested, pods scheduled with resources",
        REQUESTED,
        [N10_20, N10_20],
        [[C3M0], [C3M5]],
        DEFAULT,
        [42, 55],
    ),
    (
        "resources requested equal node capacity",
        [cpu_mem("2000", "4000"), cpu_mem("3000", "5000")],
        [{"cpu": "5000", "memory": "10000"}, {"cpu": "10000", "memory": "9000"}],
        [[], []],
        DEFAULT,
        [95, 75],
    ),
    ("memory weighs 2", REQUESTED, [N4_10, N6_10], [[], []], MEM2, [58, 50]),
    (
        "no resources requested, pods scheduled, nonzero request for resource",
        [None],
        [{"cpu": "250m", "memory": "1000Mi"}, {"cpu": "250m", "memory": "1000Mi"}],
        [[[None], [None]], []],
        DEFAULT,
        [80, 30],
    ),
    (
        "bypass an extended resource the pod does not request",
        REQUESTED,
        [N6_10, {**N6_10, EXT: "4"}],
        [[], []],
        EXT_SET,
        [50, 50],
    ),
    (
        "honor an extended resource the pod requests",
        [{"cpu": "3000", "memory": "5000", EXT: "2"}],
        [{**N6_10, EXT: "4"}, {**N6_10, EXT: "10"}],
        [[], []],
        EXT_SET,
        [50, 40],
    ),
    (
        "a resource the node does not have",
        [cpu_mem("3000", "4000")],
        [N6_10, {**N6_10, EXT: "4"}],
        [[], []],
        ((EXT, 2), ("cpu", 1), ("memory", 1)),
        [45, 45],
    ),
]


def _fit_scores(case: FitCase, strategy: sc.Strategy, **kwargs: Any) -> list[int]:
    _, containers, allocatables, existing, resources, _ = case
    pod = make_pod(*containers)
    requests = sc.nonzero_requests(pod)
    out = []
    for i, allocatable in enumerate(allocatables):
        node = make_node(f"node{i}", allocatable)
        on_node = [make_pod(*c) for c in existing[i]]
        used = sc.nonzero_requested(on_node)
        got = sc.fit_score(requests, node, used, strategy, resources, **kwargs)
        assert got == sc.fit_score(
            requests, sc.allocatable_ints(node), used, strategy, resources, **kwargs
        )
        out.append(got)
    return out


@pytest.mark.parametrize("case", LEAST_CASES, ids=[c[0] for c in LEAST_CASES])
def test_least_allocated(case: FitCase) -> None:
    assert _fit_scores(case, "LeastAllocated") == case[-1]


@pytest.mark.parametrize("case", MOST_CASES, ids=[c[0] for c in MOST_CASES])
def test_most_allocated(case: FitCase) -> None:
    assert _fit_scores(case, "MostAllocated") == case[-1]


# requested_to_capacity_ratio_test.go: shape {0, 10}, {100, 0}
RATIO_CASES: list[FitCase] = [
    ("nothing requested", [], [N4_10, N4_10], [[[], []], []], DEFAULT, [100, 100]),
    ("differently sized nodes", REQUESTED, [N4_10, N6_10], [[[], []], []], DEFAULT, [38, 50]),
    (
        "pods scheduled with resources",
        [],
        [N4_10, N6_10],
        [[C3M5], [C3M5]],
        DEFAULT,
        [38, 50],
    ),
]


@pytest.mark.parametrize("case", RATIO_CASES, ids=[c[0] for c in RATIO_CASES])
def test_requested_to_capacity_ratio(case: FitCase) -> None:
    shape = shape_from_args([(0, 10), (100, 0)])
    assert _fit_scores(case, "RequestedToCapacityRatio", shape=shape) == case[-1]


# --- noderesources/balanced_allocation_test.go ----------------------------------------------

GPU_SET = (("cpu", 1), ("memory", 1), (GPU, 1))
CPU12 = [{"cpu": "1000m"}, {"cpu": "2000m"}]
CM12 = [cpu_mem("1000m", "2000"), cpu_mem("2000m", "3000")]
#: (name, pod's containers, nodes' (milli cpu, memory, gpus), existing pods per node, ...)
BalancedCase = tuple[
    str,
    Sequence[Req],
    Sequence[tuple[int, int, int]],
    Sequence[Sequence[Sequence[Req]]],
    Sequence[tuple[str, int]],
    list[int],
]

BALANCED_CASES: list[BalancedCase] = [
    ("best-effort pod: skipped", [], [(4000, 10000, 0)] * 2, [[], []], DEFAULT, [0, 0]),
    (
        "nothing scheduled, differently sized nodes",
        CM12,
        [(4000, 10000, 0), (6000, 10000, 0)],
        [[], []],
        DEFAULT,
        [68, 75],
    ),
    (
        "pods scheduled with resources",
        CM12,
        [(10000, 20000, 0)] * 2,
        [[CPU12], [CM12]],
        DEFAULT,
        [73, 74],
    ),
    (
        "pods scheduled with resources, differently sized nodes",
        CM12,
        [(10000, 20000, 0), (10000, 50000, 0)],
        [[CPU12], [CM12]],
        DEFAULT,
        [73, 70],
    ),
    (
        "nodes to reach min/max score",
        [{"memory": "2000"}, {"memory": "3000"}],
        [(3000, 5000, 0)] * 2,
        [[CPU12], []],
        DEFAULT,
        [100, 50],
    ),
    (
        "requested resources at node capacity",
        CPU12,
        [(6000, 10000, 0)] * 2,
        [[CPU12], [CM12]],
        DEFAULT,
        [62, 62],
    ),
    (
        "a scalar resource the pod requests counts",
        [{"cpu": "0", "memory": "0", GPU: "1"}],
        [(3500, 40000, 8)] * 2,
        [
            [[cpu_mem("1000m", "2000"), {"cpu": "2000m", "memory": "3000", GPU: "3"}]],
            [CM12],
        ],
        GPU_SET,
        [75, 76],
    ),
    (
        "a scalar resource the pod does not request does not",
        CM12,
        [(3500, 40000, 8), (3500, 40000, 0)],
        [[], []],
        GPU_SET,
        [56, 56],
    ),
]


@pytest.mark.parametrize("case", BALANCED_CASES, ids=[c[0] for c in BALANCED_CASES])
def test_balanced_allocation(case: BalancedCase) -> None:
    _, containers, shapes, existing, resources, want = case
    pod = make_pod(*containers)
    requests = sc.plain_requests(pod)
    got = []
    for i, (milli_cpu, memory, gpus) in enumerate(shapes):
        allocatable: dict[str, str | int] = {"cpu": f"{milli_cpu}m", "memory": memory}
        if gpus:
            allocatable[GPU] = gpus
        node = make_node(f"node{i}", allocatable)
        used = sc.requested([make_pod(*c) for c in existing[i]])
        got.append(sc.balanced_allocation_score(requests, node, used, resources))
    assert got == want


# --- imagelocality/image_locality_test.go ---------------------------------------------------

N_403002000 = [
    (["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40 * MB),
    (["gcr.io/300:latest", "gcr.io/300:v1"], 300 * MB),
    (["gcr.io/2000:latest"], 2000 * MB),
]
N_25010 = [(["gcr.io/250:latest"], 250 * MB), (["gcr.io/10:latest", "gcr.io/10:v1"], 10 * MB)]
N_60040900 = [
    (["gcr.io/600:latest"], 600 * MB),
    (["gcr.io/40:latest"], 40 * MB),
    (["gcr.io/900:latest"], 900 * MB),
]
N_300600900 = [
    (["gcr.io/300:latest"], 300 * MB),
    (["gcr.io/600:latest"], 600 * MB),
    (["gcr.io/900:latest"], 900 * MB),
]
N_400030 = [(["gcr.io/4000:latest"], 4000 * MB), (["gcr.io/30:latest"], 30 * MB)]
N_203040 = [
    (["gcr.io/20:latest"], 20 * MB),
    (["gcr.io/30:latest"], 30 * MB),
    (["gcr.io/40:latest"], 40 * MB),
]
Images = list[tuple[list[str], int]]

IMAGE_CASES: list[tuple[str, J, list[Images], list[int]]] = [
    (
        "two images on two nodes: the larger one",
        {"images": ["gcr.io/40", "gcr.io/250"]},
        [N_403002000, N_25010],
        [0, 5],
    ),
    (
        "two images on one node",
        {"images": ["gcr.io/40", "gcr.io/300"]},
        [N_403002000, N_25010],
        [7, 0],
    ),
    (
        "above the limit: the limit",
        {"images": ["gcr.io/10", "gcr.io/4000"]},
        [N_400030, N_25010],
        [100, 0],
    ),
    (
        "above the limit, with a node without images",
        {"images": ["gcr.io/10", "gcr.io/4000"]},
        [N_400030, N_25010, []],
        [66, 0, 0],
    ),
    (
        "multiple large images",
        {"images": ["gcr.io/300", "gcr.io/600", "gcr.io/900"]},
        [N_60040900, N_300600900, []],
        [32, 36, 0],
    ),
    (
        "multiple small images",
        {"images": ["gcr.io/30", "gcr.io/40"]},
        [N_203040, N_400030],
        [1, 0],
    ),
    (
        "an image volume",
        {"images": ["gcr.io/30"], "image_volumes": ["gcr.io/300"]},
        [N_300600900, N_400030],
        [6, 0],
    ),
    (
        "the same images as containers",
        {"images": ["gcr.io/30", "gcr.io/300"]},
        [N_300600900, N_400030],
        [6, 0],
    ),
    (
        "init containers count",
        {"images": ["gcr.io/30"], "init_images": ["gcr.io/300"]},
        [N_403002000, N_203040],
        [6, 0],
    ),
]


@pytest.mark.parametrize(
    ("spec", "node_images", "want"),
    [c[1:] for c in IMAGE_CASES],
    ids=[c[0] for c in IMAGE_CASES],
)
def test_image_locality(spec: J, node_images: list[Images], want: list[int]) -> None:
    pod = make_pod(**spec)
    nodes = [make_node(f"node{i}", images=imgs) for i, imgs in enumerate(node_images)]
    counts = sc.image_counts(nodes)
    got = [sc.image_locality_score(pod, n, len(nodes), counts) for n in nodes]
    assert got == want
    sizes = [sc.image_sizes(n) for n in nodes]
    assert [sc.image_locality_score(pod, s, len(nodes), counts) for s in sizes] == want


def test_image_locality_136_counts_containers_only() -> None:
    """1.36 scores an image volume but its thresholds count the containers alone:
    100 * (300M / 2 - 23M) / (1000M - 23M) = 12 instead of 6."""
    pod = make_pod(images=["gcr.io/30"], image_volumes=["gcr.io/300"])
    nodes = [make_node("a", images=N_300600900), make_node("b", images=N_400030)]
    counts = sc.image_counts(nodes)
    got = [sc.image_locality_score(pod, n, 2, counts, count_image_volumes=False) for n in nodes]
    assert got == [12, 0]
    assert sc.normalized_image_name("registry:5000/app") == "registry:5000/app:latest"
    assert sc.normalized_image_name("app:v1") == "app:v1"


# --- non-zero requests ----------------------------------------------------------------------


def test_nonzero_requests_defaults_per_container() -> None:
    """100m / 200Mi for each container (and init container) that names neither; an explicit
    0 stays 0; overhead on top; other resources plain."""
    pod = make_pod(None, {"memory": "0", "ephemeral-storage": "1Gi"}, overhead={"cpu": "50m"})
    assert sc.nonzero_requests(pod) == {
        "cpu": 250,
        "memory": 200 * MB,
        "ephemeral-storage": 1024 * MB,
    }
    assert sc.plain_requests(pod) == {"cpu": 50, "memory": 0, "ephemeral-storage": 1024 * MB}
    init = make_pod({"cpu": "1"}, init=[None, {"cpu": "2", "memory": "1Gi"}])
    # containers: 1000m + 200Mi; the init containers' peak: 2000m, 1Gi
    assert sc.nonzero_requests(init) == {"cpu": 2000, "memory": 1024 * MB}
    assert sc.plain_requests(init) == {"cpu": 2000, "memory": 1024 * MB}
    assert sc.nonzero_requests(make_pod()) == {}, "no containers, nothing to default"


def test_nonzero_requests_pod_level() -> None:
    """Fit's score ignores the incoming pod's pod-level requests in 1.36/1.37 and honours
    them in 1.38; BalancedAllocation and the node's sums honour them in all three."""
    pod = make_pod(None, None, pod_requests={"cpu": "3"})
    assert sc.nonzero_requests(pod) == {"cpu": 200, "memory": 400 * MB}
    assert sc.nonzero_requests(pod, pod_level_resources=True) == {
        "cpu": 3000,
        "memory": 400 * MB,
    }
    assert sc.plain_requests(pod) == {"cpu": 3000}
    # On a node: cpu set at the pod level, so only memory is defaulted (per container).
    assert sc.bound_nonzero(pod) == (3000, 400 * MB)
    # Both named somewhere: no defaults at all.
    both = make_pod(None, {"memory": "1Gi"}, pod_requests={"cpu": "3"})
    assert sc.bound_nonzero(both) == (3000, 1024 * MB)
    plain = make_pod(None, {"cpu": "500m"})
    assert sc.bound_nonzero(plain) == (600, 400 * MB)
    assert sc.nonzero_requested([pod, both, plain]) == {
        "cpu": 6600,
        "memory": 1824 * MB,
    }
    assert sc.requested([pod, both, plain]) == {"cpu": 6500, "memory": 1024 * MB}


def test_requests_round_up_per_pod() -> None:
    """Each pod's cpu rounds up to a millicore before the node adds them, as NodeInfo's."""
    tiny = make_pod({"cpu": "500u", "memory": "1"})
    assert sc.requested([tiny, tiny]) == {"cpu": 2, "memory": 2}
    assert sc.nonzero_requested([tiny, tiny]) == {"cpu": 2, "memory": 2}


# --- RunScorePlugins and prioritizeNodes ----------------------------------------------------


def test_combine_and_best() -> None:
    weights = sc.DEFAULT_WEIGHTS["1.37"]
    per_plugin = {
        sc.TAINT_TOLERATION: {"a": 100, "b": 100, "c": 0},
        sc.NODE_AFFINITY: {"a": 0, "b": 50, "c": 100},
        sc.NODE_RESOURCES_FIT: {"a": 80, "b": 30, "c": 90},
        sc.IMAGE_LOCALITY: {"a": 20, "b": 0, "c": 10},
        "SomePluginWithoutWeight": {"a": 0, "b": 70, "c": 0},
    }
    totals = sc.combine(per_plugin, weights)
    assert totals == {"a": 400, "b": 500, "c": 300}
    assert sc.best(totals) == ["b"]
    assert sc.best({"y": 5, "x": 5, "z": 1}) == ["x", "y"]
    assert sc.best({}) == []
    with pytest.raises(ValueError, match=r'plugin "NodeAffinity" returns an invalid score 101'):
        sc.combine({sc.NODE_AFFINITY: {"a": 101}}, weights)


def test_default_weights() -> None:
    assert (
        dict(sc.DEFAULT_WEIGHTS["1.36"])
        == dict(sc.DEFAULT_WEIGHTS["1.38"])
        == {
            "TaintToleration": 3,
            "NodeAffinity": 2,
            "NodeResourcesFit": 1,
            "VolumeBinding": 1,
            "PodTopologySpread": 2,
            "InterPodAffinity": 2,
            "DynamicResources": 2,
            "NodeResourcesBalancedAllocation": 1,
            "ImageLocality": 1,
        }
    )


def test_end_to_end_default_profile() -> None:
    """A pod preferring zone a, tolerating nothing: the plugins of this module together."""
    pod = make_pod(
        {"cpu": "1", "memory": "1Gi"},
        preferred=[pref(10, ("zone", "In", ["a"]))],
    )
    nodes = [
        make_node("a1", {"cpu": "4", "memory": "8Gi"}, labels={"zone": "a"}),
        make_node("a2", {"cpu": "4", "memory": "8Gi"}, labels={"zone": "a"},
                  taints=[prefer("spot", "true")]),
        make_node("b1", {"cpu": "8", "memory": "16Gi"}, labels={"zone": "b"}),
    ]  # fmt: skip
    names = [n.metadata.name or "" for n in nodes]
    terms = sc.preferred_terms(pod) or ()
    fit_req, plain = sc.nonzero_requests(pod), sc.plain_requests(pod)
    counts = sc.image_counts(nodes)
    per_plugin = {
        sc.TAINT_TOLERATION: sc.taint_toleration_normalize(
            {n: sc.taint_toleration_score(pod, node) for n, node in zip(names, nodes, strict=True)}
        ),
        sc.NODE_AFFINITY: sc.node_affinity_normalize(
            {n: sc.preferred_score(terms, node) for n, node in zip(names, nodes, strict=True)}
        ),
        sc.NODE_RESOURCES_FIT: {
            n: sc.fit_score(fit_req, node, {}) for n, node in zip(names, nodes, strict=True)
        },
        sc.BALANCED_ALLOCATION: {
            n: sc.balanced_allocation_score(plain, node, {})
            for n, node in zip(names, nodes, strict=True)
        },
        sc.IMAGE_LOCALITY: {
            n: sc.image_locality_score(pod, node, len(nodes), counts)
            for n, node in zip(names, nodes, strict=True)
        },
    }
    # a: cpu (4 - 1) / 4 = 75, memory 7 / 8 = 87 -> 81; b: 7 / 8 = 87, 15 / 16 = 93 -> 90
    assert per_plugin[sc.NODE_RESOURCES_FIT] == {"a1": 81, "a2": 81, "b1": 90}
    # a: 25% and 12.5% -> 93 (93.75) from 100: 50 + (50 + 93 - 100) / 2 = 71
    # b: 12.5% and 6.25% -> 96 (96.875) from 100: 50 + (50 + 96 - 100) / 2 = 73
    assert per_plugin[sc.BALANCED_ALLOCATION] == {"a1": 71, "a2": 71, "b1": 73}
    assert per_plugin[sc.IMAGE_LOCALITY] == {"a1": 0, "a2": 0, "b1": 0}
    totals = sc.combine(per_plugin, sc.DEFAULT_WEIGHTS["1.37"])
    # taints x3, affinity x2, fit, balanced, images
    assert totals == {"a1": 300 + 200 + 81 + 71, "a2": 200 + 81 + 71, "b1": 300 + 90 + 73}
    assert sc.best(totals) == ["a1"]
