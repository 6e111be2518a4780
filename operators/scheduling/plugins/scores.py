"""The Score side of kube-scheduler's default profile (v1.37.2), pure and in Go's integers.

Per plugin (``pkg/scheduler/framework/plugins/<name>``): TaintToleration and NodeAffinity
(raw score per node, then NormalizeScore over the feasible nodes), NodeResourcesFit
(LeastAllocated by default; MostAllocated and RequestedToCapacityRatio by configuration),
NodeResourcesBalancedAllocation and ImageLocality (raw scores already in [0, 100], no
normalisation), ``helper.DefaultNormalizeScore``; and the combination that RunScorePlugins and
prioritizeNodes make of every plugin's scores (normalise, multiply by the plugin's weight,
add). InterPodAffinity, PodTopologySpread and VolumeBinding score in their own modules;
``combine`` takes their normalised scores like the ones here.

Divisions follow Go: integers truncate toward zero (``go_div`` where an operand can be
negative), floats are IEEE doubles as Go's ``float64`` (BalancedAllocation, ImageLocality).
Resources are ints as the scheduler's NodeInfo keeps them: cpu in millicores
(``Quantity.MilliValue``, rounded up), everything else in units (``Quantity.Value``, rounded
up). Python's ints do not overflow: 1.37 multiplies ``capacity * 100`` in int64 (wrong above
about 92 PB of memory); 1.38 computes such products exactly (``scaledFraction``), as here.

Which requests each plugin reads (``resource_allocation.go``):

* Fit scores the pod's *non-zero* requests (a container without a cpu or memory request
  counts 100m / 200Mi: ``nonzero_requests``) against the node's sum of its pods' non-zero
  requests (``NodeInfo.NonZeroRequested``: ``nonzero_requested``). In 1.36 and 1.37 the
  incoming pod's pod-level requests (``spec.resources``) are *ignored* there (the scorer's own
  ``enablePodLevelResources`` is never set); 1.38 honours them (``pod_level_resources=True``).
* BalancedAllocation scores the *plain* requests (``useRequested``), pod-level ones honoured,
  against the node's plain sum (``NodeInfo.Requested``: ``requested``), and skips a pod that
  requests none of its resources (PreScore's Skip: 0 everywhere).

Release differences (1.36.3, 1.37.2, 1.38.0-beta.0): ImageLocality's image count (1.37 and
1.38 count image volumes: ``count_image_volumes``), Fit's pod-level requests (above), 1.38's
exact products and saturating sums (int64 overflow in 1.36/1.37, unreachable in practice).
The weights (``DEFAULT_WEIGHTS``), the normalisations and the other formulas are the same in
all three; TaintToleration's Gt/Lt (``comparison``) is alpha and off in all three.

Left out: DRA-backed extended resources in Fit and BalancedAllocation (DRAExtendedResource:
capacity counted from ResourceSlices), in-place resize (container statuses are not modelled:
requests are the spec's), and scheduler extenders' priorities.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Final, Literal

from operators.allocator.errors import InvalidNodeSelectorError
from operators.allocator.nodes import selector_matches
from operators.api.core import (
    Container,
    Node,
    NodeAllocatableResourceClaimStatus,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    Toleration,
)
from operators.api.quantity import Quantity
from operators.cel.library.strings import go_quote
from operators.scheduling.nodes import (
    Placement,
    bound_requests,
    is_scalar_resource,
    pod_level_resource,
    pod_requests,
)
from operators.scheduling.plugins.interpodaffinity import (
    aggregate_errors,
    go_json,
    label_key_errors,
    label_value_errors,
)
from operators.scheduling.plugins.podtopologyspread import tolerates
from operators.scheduling.plugins.volumebinding import Shape, broken_linear, go_div

#: fwk.MaxNodeScore (MaxScore in 1.38); MinNodeScore is 0.
MAX_NODE_SCORE: Final = 100
#: pkg/scheduler/util: what a container without a cpu / memory request counts when scoring.
DEFAULT_MILLI_CPU_REQUEST: Final = 100
DEFAULT_MEMORY_REQUEST: Final = 200 * 1024 * 1024

TAINT_TOLERATION: Final = "TaintToleration"
NODE_AFFINITY: Final = "NodeAffinity"
NODE_RESOURCES_FIT: Final = "NodeResourcesFit"
VOLUME_BINDING: Final = "VolumeBinding"
POD_TOPOLOGY_SPREAD: Final = "PodTopologySpread"
INTER_POD_AFFINITY: Final = "InterPodAffinity"
DYNAMIC_RESOURCES: Final = "DynamicResources"
BALANCED_ALLOCATION: Final = "NodeResourcesBalancedAllocation"
IMAGE_LOCALITY: Final = "ImageLocality"

_WEIGHTS: Final[Mapping[str, int]] = {
    TAINT_TOLERATION: 3,
    NODE_AFFINITY: 2,
    NODE_RESOURCES_FIT: 1,
    # listed without a weight: getValidScoreWeights gives a score plugin without one 1
    VOLUME_BINDING: 1,
    POD_TOPOLOGY_SPREAD: 2,
    INTER_POD_AFFINITY: 2,
    # applyDynamicResources (DynamicResourceAllocation, GA) in 1.36/1.37, listed in 1.38
    DYNAMIC_RESOURCES: 2,
    BALANCED_ALLOCATION: 1,
    IMAGE_LOCALITY: 1,
}
#: The default profile's Score plugins and weights (``apis/config/v1/default_plugins.go`` with
#: the default feature gates) per release. The same in 1.36, 1.37 and 1.38; VolumeBinding
#: scores only with StorageCapacityScoring (beta and on from 1.37, off in 1.36: it skips), but
#: has its weight in all three. PodGroupPodsCount (TopologyAwareWorkloadScheduling, alpha) is a
#: placement score plugin, not a node one.
DEFAULT_WEIGHTS: Final[Mapping[str, Mapping[str, int]]] = {
    "1.36": _WEIGHTS,
    "1.37": _WEIGHTS,
    "1.38": _WEIGHTS,
}

Strategy = Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]
#: (resource, weight): NodeResourcesFitArgs.scoringStrategy.resources' and
#: NodeResourcesBalancedAllocationArgs.resources' default.
DEFAULT_RESOURCES: Final[Sequence[tuple[str, int]]] = (("cpu", 1), ("memory", 1))
#: ImageLocality's thresholds: 23MB, and 1000MB per image of the pod.
_MIB: Final = 1024 * 1024
_MIN_THRESHOLD: Final = 23 * _MIB
_MAX_CONTAINER_THRESHOLD: Final = 1000 * _MIB


# --- DefaultNormalizeScore ------------------------------------------------------------------


def default_normalize(
    scores: Mapping[str, int], reverse: bool, max_priority: int = MAX_NODE_SCORE
) -> dict[str, int]:
    """helper.DefaultNormalizeScore: scale [0, max] to [0, max_priority], reversed on request
    (all nodes 0: unchanged, or all max_priority when reversed)."""
    max_count = max((s for s in scores.values() if s > 0), default=0)
    if max_count == 0:
        return dict.fromkeys(scores, max_priority) if reverse else dict(scores)
    out = {}
    for name, score in scores.items():
        scaled = go_div(max_priority * score, max_count)
        out[name] = max_priority - scaled if reverse else scaled
    return out


# --- TaintToleration ------------------------------------------------------------------------


def taint_toleration_score(pod: Pod, node: Node, *, comparison: bool = False) -> int:
    """The node's PreferNoSchedule taints that none of the pod's tolerations with effect
    PreferNoSchedule (or none) tolerates; fewer is better (``taint_toleration_normalize``).
    ``comparison``: TaintTolerationComparisonOperators (alpha, off in 1.35-1.38): Gt/Lt."""
    count = 0
    tolerations: list[Toleration] | None = None
    for taint in node.spec.taints:
        if taint.effect != "PreferNoSchedule":
            continue
        if tolerations is None:
            tolerations = [
                t for t in pod.spec.tolerations if not t.effect or t.effect == "PreferNoSchedule"
            ]
        if not any(tolerates(t, taint, comparison) for t in tolerations):
            count += 1
    return count


def taint_toleration_normalize(scores: Mapping[str, int]) -> dict[str, int]:
    """NormalizeScore: reversed, the nodes with the fewest untolerated taints score 100."""
    return default_normalize(scores, reverse=True)


# --- NodeAffinity ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class PreferredTerm:
    """One parsed preferredDuringScheduling term: its weight and its term as a selector."""

    weight: int
    selector: NodeSelector


_NODE_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_INT64: Final = re.compile(r"[+-]?[0-9]+")


def _parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64)."""
    if not _INT64.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def _supported(path: str, value: str, allowed: Sequence[str]) -> str:
    """field.NotSupported's message."""
    return f"{path}: Unsupported value: {go_quote(value)}: supported values: " + ", ".join(
        go_quote(a) for a in allowed
    )


def _expression_errors(path: str, r: NodeSelectorRequirement) -> list[str]:
    """nodeSelectorRequirementsAsSelector for one requirement: labels.NewRequirement's."""
    op, key, values = r.operator or "", r.key or "", list(r.values)
    if op not in _NODE_OPERATORS:
        return [_supported(f"{path}.operator", op, _NODE_OPERATORS)]
    errors = []
    key_errors = label_key_errors(key)
    if key_errors:
        errors.append(f"{path}.key: Invalid value: {go_quote(key)}: {'; '.join(key_errors)}")
    bad = f"{path}.values: Invalid value: {go_json(values)}"
    if op in ("In", "NotIn") and not values:
        errors.append(f"{bad}: for 'in', 'notin' operators, values set can't be empty")
    if op in ("Exists", "DoesNotExist") and values:
        errors.append(f"{bad}: values set must be empty for exists and does not exist")
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            errors.append(f"{bad}: for 'Gt', 'Lt' operators, exactly one value is required")
        for i, value in enumerate(values):
            if _parse_int64(value) is None:
                errors.append(
                    f"{path}.values[{i}]: Invalid value: {go_quote(value)}: "
                    "for 'Gt', 'Lt' operators, the value must be an integer"
                )
    for i, value in enumerate(values):
        value_errors = label_value_errors(value)
        if value_errors:
            errors.append(
                f"{path}.values[{i}][{key}]: Invalid value: {go_quote(value)}: "
                + "; ".join(value_errors)
            )
    return errors


def _field_errors(path: str, r: NodeSelectorRequirement) -> list[str]:
    """nodeSelectorRequirementsAsFieldSelector for one requirement."""
    op = r.operator or ""
    if op not in ("In", "NotIn"):
        return [_supported(f"{path}.operator", op, ("In", "NotIn"))]
    if len(r.values) != 1:
        return [f"{path}.values: Invalid value: {go_json(r.values)}: must have one element"]
    return []


def _term_errors(index: int, term: NodeSelectorTerm) -> list[str]:
    errors: list[str] = []
    for j, r in enumerate(term.match_expressions):
        errors += _expression_errors(f"[{index}].matchExpressions[{j}]", r)
    for j, r in enumerate(term.match_fields):
        errors += _field_errors(f"[{index}].matchFields[{j}]", r)
    return errors


def preferred_terms(pod: Pod) -> tuple[PreferredTerm, ...] | None:
    """NodeAffinity's PreScore: the pod's preferred terms parsed once per cycle (component-
    helpers' NewPreferredSchedulingTerms: terms of weight 0 and empty terms dropped unparsed).

    None: the pod has none, upstream's Skip (NodeAffinity adds 0 to every node). Raises
    InvalidNodeSelectorError with upstream's message when a term does not parse (PreScore's
    error: the attempt fails); the API server refuses such pods, so only tests meet it.
    """
    affinity = pod.spec.affinity
    node_affinity = affinity.node_affinity if affinity is not None else None
    if (
        node_affinity is None
        or not node_affinity.preferred_during_scheduling_ignored_during_execution
    ):
        return None
    errors: list[str] = []
    terms = []
    for i, t in enumerate(node_affinity.preferred_during_scheduling_ignored_during_execution):
        preference = t.preference
        if not t.weight or (not preference.match_expressions and not preference.match_fields):
            continue
        term_errors = _term_errors(i, preference)
        if term_errors:
            errors += term_errors
            continue
        terms.append(PreferredTerm(t.weight, NodeSelector(node_selector_terms=[preference])))
    if errors:
        raise InvalidNodeSelectorError(aggregate_errors(errors))
    return tuple(terms)


def preferred_score(terms: Iterable[PreferredTerm], node: Node) -> int:
    """PreferredSchedulingTerms.Score: the sum of the weights of the terms the node matches."""
    return sum(t.weight for t in terms if selector_matches(t.selector, node))


def node_affinity_score(pod: Pod, node: Node) -> int:
    """NodeAffinity's Score without PreScore's state (the default profile adds no
    addedAffinity). Per node of a cycle, parse once (``preferred_terms``) and use
    ``preferred_score``."""
    terms = preferred_terms(pod)
    return preferred_score(terms, node) if terms else 0


def node_affinity_normalize(scores: Mapping[str, int]) -> dict[str, int]:
    """NormalizeScore: the best matching node scores 100."""
    return default_normalize(scores, reverse=False)


# --- requests as the scheduler counts them --------------------------------------------------


def _milli(amount: Decimal) -> int:
    """Quantity.MilliValue (rounded up)."""
    return math.ceil(amount * 1000)


def _units(amount: Decimal) -> int:
    """Quantity.Value (rounded up)."""
    return math.ceil(amount)


def resource_ints(amounts: Mapping[str, Decimal]) -> dict[str, int]:
    """A ResourceList as NodeInfo's Resource keeps it: cpu in millicores, the rest in units."""
    return {n: _milli(a) if n == "cpu" else _units(a) for n, a in amounts.items()}


def _quantity_int(name: str, q: Quantity) -> int:
    return q.milli_value() if name == "cpu" else math.ceil(q.value)


_DEFAULTS: Final[Mapping[str, Quantity]] = {
    "cpu": Quantity(f"{DEFAULT_MILLI_CPU_REQUEST}m"),
    "memory": Quantity(DEFAULT_MEMORY_REQUEST),
}


def _defaulting(
    missing: Mapping[str, Quantity],
) -> Callable[[Container], Mapping[str, Quantity]]:
    """component-helpers' applyNonMissing: a container's requests with ``missing`` added for
    the resources it does not name (a request of 0 stays 0)."""

    def of(container: Container) -> Mapping[str, Quantity]:
        requests = container.resources.requests if container.resources is not None else {}
        if all(name in requests for name in missing):
            return requests
        return {**missing, **requests}

    return of


def _requests(
    pod: Pod,
    missing: Mapping[str, Quantity],
    *,
    pod_level: bool,
    claim_statuses: Sequence[NodeAllocatableResourceClaimStatus] = (),
) -> dict[str, Decimal]:
    """resourcehelper.PodRequests with NonMissingContainerRequests ``missing``: the containers'
    aggregate (defaults per container), the claims' node resources, pod-level requests
    (``pod_level``: not skipped), overhead: ``nodes.pod_requests`` with the defaults."""
    return pod_requests(pod, claim_statuses, of=_defaulting(missing), pod_level=pod_level)


def nonzero_requests(pod: Pod, *, pod_level_resources: bool = False) -> dict[str, int]:
    """The incoming pod's requests as NodeResourcesFit scores them (its PreScore): cpu and
    memory non-zero (100m / 200Mi for each container that names none), the other resources
    plain; overhead included, no claim statuses (the pod has none yet).

    ``pod_level_resources``: honour ``spec.resources.requests``, as 1.38 does; 1.36 and 1.37
    skip them in Fit's score (see the module docstring).
    """
    return resource_ints(_requests(pod, _DEFAULTS, pod_level=pod_level_resources))


def plain_requests(pod: Pod) -> dict[str, int]:
    """The incoming pod's requests as BalancedAllocation scores them: plain (no defaults),
    pod-level requests honoured, overhead included."""
    return resource_ints(_requests(pod, {}, pod_level=True))


def _pod_level_requests_set(pod: Pod) -> bool:
    """component-helpers' IsPodLevelRequestsSet."""
    resources = pod.spec.resources
    return resources is not None and any(pod_level_resource(n) for n in resources.requests)


def bound_nonzero(pod: Pod, *, node_allocatable: bool = False) -> tuple[int, int]:
    """(millicores, bytes): what a pod bound to a node adds to its NodeInfo.NonZeroRequested
    (PodInfo.CalculateResource's Non0CPU and Non0Mem). With pod-level requests, a resource
    gets the defaults only where neither the pod level nor any container (nor the overhead)
    names it. ``node_allocatable``: DRANodeAllocatableResources (alpha), as ``bound_requests``.
    """
    return _bound_nonzero(pod, bound_requests(pod, node_allocatable), node_allocatable)


def _bound_nonzero(
    pod: Pod, plain: Mapping[str, Decimal], node_allocatable: bool
) -> tuple[int, int]:
    statuses = pod.status.node_allocatable_resource_claim_statuses if node_allocatable else ()
    if _pod_level_requests_set(pod):
        missing = {n: q for n, q in _DEFAULTS.items() if n not in plain}
    else:
        missing = dict(_DEFAULTS)
    non0 = _requests(pod, missing, pod_level=True, claim_statuses=statuses) if missing else plain
    return _milli(non0.get("cpu", Decimal(0))), _units(non0.get("memory", Decimal(0)))


def counted_placement(
    pod: Pod, node: str, requests: Mapping[str, Decimal], *, node_allocatable: bool = False
) -> Placement:
    """What the usage tracker counts of a pod on ``node``: its ``requests`` and its non-zero
    cpu and memory (``bound_nonzero``)."""
    return (node, requests, bound_nonzero(pod, node_allocatable=node_allocatable))


def requested(pods: Iterable[Pod], *, node_allocatable: bool = False) -> dict[str, int]:
    """NodeInfo.Requested of a node with these pods: each pod's requests (``bound_requests``)
    in ints, summed (each pod rounded on its own, as upstream adds int64s)."""
    total: dict[str, int] = {}
    for pod in pods:
        for name, amount in resource_ints(bound_requests(pod, node_allocatable)).items():
            total[name] = total.get(name, 0) + amount
    return total


def nonzero_requested(pods: Iterable[Pod], *, node_allocatable: bool = False) -> dict[str, int]:
    """What NodeResourcesFit reads of a node with these pods: NonZeroRequested for cpu and
    memory, Requested for the other resources (ephemeral-storage, extended ones)."""
    total: dict[str, int] = {}
    cpu = memory = 0
    for pod in pods:
        plain = bound_requests(pod, node_allocatable)
        for name, amount in resource_ints(plain).items():
            total[name] = total.get(name, 0) + amount
        c, m = _bound_nonzero(pod, plain, node_allocatable)
        cpu += c
        memory += m
    total["cpu"] = cpu
    total["memory"] = memory
    return total


def allocatable_ints(node: Node) -> dict[str, int]:
    """The node's allocatable as NodeInfo.Allocatable keeps it (cpu in millicores); compute it
    once per node and snapshot and hand it to the scorers instead of the node."""
    return {n: _quantity_int(n, q) for n, q in node.status.allocatable.items()}


# --- NodeResourcesFit and BalancedAllocation ------------------------------------------------

Allocatable = Node | Mapping[str, int]


def _allocatable(node: Allocatable, name: str) -> int:
    """calculateResourceAllocatableRequest's allocatable: cpu, memory, ephemeral-storage and
    scalar resources; any other name (``pods``) counts 0 and is left out."""
    if name not in ("cpu", "memory", "ephemeral-storage") and not is_scalar_resource(name):
        return 0
    if isinstance(node, Node):
        q = node.status.allocatable.get(name)
        return _quantity_int(name, q) if q is not None else 0
    return node.get(name, 0)


def _node_request(
    pod_requests: Mapping[str, int],
    node: Allocatable,
    node_requested: Mapping[str, int],
    resources: Sequence[tuple[str, int]],
) -> list[tuple[int, int, int, int]]:
    """calculateNodeAllocatableRequest: (requested with the pod, requested, allocatable,
    weight) of each resource scored here: an extended resource the pod does not request, and
    one the node does not have, are left out."""
    out = []
    for name, weight in resources:
        request = pod_requests.get(name, 0)
        if request == 0 and is_scalar_resource(name):
            continue
        allocatable = _allocatable(node, name)
        if allocatable == 0:
            continue
        allocated = node_requested.get(name, 0)
        out.append((allocated + request, allocated, allocatable, weight))
    return out


def _least(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return go_div((capacity - max(requested, 0)) * MAX_NODE_SCORE, capacity)


def _most(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    return go_div(min(requested, capacity) * MAX_NODE_SCORE, capacity)


def fit_score(
    pod_requests: Mapping[str, int],
    node: Allocatable,
    node_requested: Mapping[str, int],
    strategy: Strategy = "LeastAllocated",
    resources: Sequence[tuple[str, int]] = DEFAULT_RESOURCES,
    shape: Shape = (),
) -> int:
    """NodeResourcesFit's Score: the weighted mean of each resource's score (integer mean).

    ``pod_requests``: ``nonzero_requests``; ``node``: the node or its ``allocatable_ints``;
    ``node_requested``: ``nonzero_requested`` of its pods (NonZeroRequested for cpu and memory,
    Requested for the rest). LeastAllocated favours free room, MostAllocated packs,
    RequestedToCapacityRatio reads the utilisation through ``shape`` (points in 0..100 units:
    volumebinding's ``shape_from_args`` scales the args' 0..10) and rounds the mean.
    """
    entries = _node_request(pod_requests, node, node_requested, resources)
    if strategy == "RequestedToCapacityRatio":
        if not shape:
            raise ValueError("RequestedToCapacityRatio needs a shape")
        return _ratio_score(entries, shape)
    if strategy not in ("LeastAllocated", "MostAllocated"):
        raise ValueError(f"scoring strategy {strategy} is not supported")
    per_resource = _least if strategy == "LeastAllocated" else _most
    node_score = weight_sum = 0
    for with_pod, _, allocatable, weight in entries:
        node_score += per_resource(with_pod, allocatable) * weight
        weight_sum += weight
    return go_div(node_score, weight_sum) if weight_sum else 0


def _ratio_score(entries: Sequence[tuple[int, int, int, int]], shape: Shape) -> int:
    """buildRequestedToCapacityRatioScorerFunction: resources scoring 0 do not count; the
    mean is rounded half away from zero (Go's math.Round of the float quotient)."""
    node_score = weight_sum = 0
    for with_pod, _, capacity, weight in entries:
        if capacity == 0 or with_pod > capacity:
            score = broken_linear(MAX_NODE_SCORE, shape)
        else:
            score = broken_linear(go_div(with_pod * MAX_NODE_SCORE, capacity), shape)
        if score > 0:
            node_score += score * weight
            weight_sum += weight
    if weight_sum == 0:
        return 0
    quotient, remainder = divmod(node_score, weight_sum)
    return quotient + (1 if 2 * remainder >= weight_sum else 0)


def _balance(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """balancedResourceScore: 100 * (1 - the standard deviation of the requested fractions)."""
    fractions = [min(float(r) / float(a), 1.0) for r, a in zip(requested, allocatable, strict=True)]
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        total_fraction = 0.0  # Go's running sum: no compensated sum() (Python 3.12+)
        for f in fractions:
            total_fraction += f
        mean = total_fraction / float(len(fractions))
        total = 0.0
        for f in fractions:
            total = total + (f - mean) * (f - mean)
        std = math.sqrt(total / float(len(fractions)))
    return int((1 - std) * float(MAX_NODE_SCORE))


def balanced_allocation_score(
    pod_requests: Mapping[str, int],
    node: Allocatable,
    node_requested: Mapping[str, int],
    resources: Sequence[tuple[str, int]] = DEFAULT_RESOURCES,
) -> int:
    """NodeResourcesBalancedAllocation's Score: 50 plus half the change the pod makes to the
    balance of the node's requested fractions, in [0, 100]; weights are not used.

    ``pod_requests``: ``plain_requests`` (not the non-zero ones); ``node_requested``:
    ``requested`` of its pods. A pod requesting none of ``resources`` scores 0 everywhere
    (PreScore's Skip).
    """
    if all(pod_requests.get(name, 0) == 0 for name, _ in resources):
        return 0
    entries = _node_request(pod_requests, node, node_requested, resources)
    allocatable = [e[2] for e in entries]
    with_pod = _balance([e[0] for e in entries], allocatable)
    without = _balance([e[1] for e in entries], allocatable)
    half = MAX_NODE_SCORE // 2
    return half + go_div(half + with_pod - without, 2)


# --- ImageLocality --------------------------------------------------------------------------


def normalized_image_name(name: str) -> str:
    """normalizedImageName: ``:latest`` when the name has no tag."""
    return name if name.rfind(":") > name.rfind("/") else name + ":latest"


def image_counts(nodes: Iterable[Node]) -> dict[str, int]:
    """How many nodes report each image name (the snapshot's imageExistenceMap)."""
    having: dict[str, set[str]] = {}
    for node in nodes:
        for image in node.status.images:
            for name in image.names:
                having.setdefault(name, set()).add(node.metadata.name or "")
    return {name: len(names) for name, names in having.items()}


def image_sizes(node: Node) -> dict[str, int]:
    """Each image name the node reports and its size (the first entry of that name, as the
    cache's NodeInfo.ImageStates): compute it once per node and snapshot."""
    sizes: dict[str, int] = {}
    for image in node.status.images:
        for name in image.names:
            sizes.setdefault(name, image.size_bytes or 0)
    return sizes


def _pod_images(pod: Pod) -> tuple[list[str], int]:
    images = [c.image or "" for c in (*pod.spec.init_containers, *pod.spec.containers)]
    volumes = []
    for volume in pod.spec.volumes:
        source = volume.source("image")
        if source is not None:
            volumes.append(str(source.get("reference") or ""))
    return images + volumes, len(volumes)


def image_locality_score(
    pod: Pod,
    node: Node | Mapping[str, int],
    total_nodes: int,
    nodes_having_image: Mapping[str, int],
    *,
    count_image_volumes: bool = True,
) -> int:
    """ImageLocality's Score: the sizes of the pod's images (containers, init containers,
    image volumes) already on the node, each scaled by the share of all ``total_nodes``
    having it (``image_counts``), mapped from [23MB, 1000MB x images] to [0, 100].

    ``count_image_volumes``: 1.37 and 1.38 count image volumes among the images that set the
    upper threshold; 1.36 scores them but counts only containers. An image's size is the one
    this node reports (the first entry of that name), as the snapshot's; the scheduler's cache
    keeps the size of the first node that reported the name. ``node``: the node or its
    ``image_sizes``.
    """
    sizes = image_sizes(node) if isinstance(node, Node) else node
    images, volumes = _pod_images(pod)
    total = 0
    if sizes:
        for image_name in images:
            name = normalized_image_name(image_name)
            size = sizes.get(name)
            if size is not None:
                spread = float(nodes_having_image.get(name, 1)) / float(total_nodes)
                total += int(float(size) * spread)
    count = len(images) if count_image_volumes else len(images) - volumes
    max_threshold = _MAX_CONTAINER_THRESHOLD * count
    if total < _MIN_THRESHOLD:
        total = _MIN_THRESHOLD
    elif total > max_threshold:
        total = max_threshold
    return go_div(MAX_NODE_SCORE * (total - _MIN_THRESHOLD), max_threshold - _MIN_THRESHOLD)


# --- RunScorePlugins and prioritizeNodes ----------------------------------------------------


def combine(
    per_plugin_normalized: Mapping[str, Mapping[str, int]], weights: Mapping[str, int]
) -> dict[str, int]:
    """Each node's total: every plugin's normalised score times its weight, summed.

    A plugin absent from ``weights`` (or weighing 0) weighs 1, as upstream gives a Score
    plugin configured without a weight; a plugin that skipped the pod is simply left out, and
    a node a plugin does not list gets 0 from it. A score outside [0, 100] is upstream's
    error ("applying score defaultWeights on Score plugins"): ValueError.
    """
    totals: dict[str, int] = {}
    for plugin, scores in per_plugin_normalized.items():
        weight = weights.get(plugin) or 1
        for node, score in scores.items():
            if not 0 <= score <= MAX_NODE_SCORE:
                raise ValueError(
                    f"plugin {go_quote(plugin)} returns an invalid score {score}, it should in "
                    f"the range of [0, {MAX_NODE_SCORE}] after normalizing"
                )
            totals[node] = totals.get(node, 0) + score * weight
    return totals


def best(totals: Mapping[str, int]) -> list[str]:
    """The nodes with the highest total, by name: the caller breaks the tie. Upstream pops a
    heap whose tie-breaker (Randomizer) is drawn only when extenders score, so without them
    the pick depends on the order parallel filtering found the nodes: effectively random."""
    if not totals:
        return []
    top = max(totals.values())
    return sorted(n for n, t in totals.items() if t == top)
