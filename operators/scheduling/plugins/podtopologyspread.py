"""kube-scheduler's PodTopologySpread plugin (pkg/scheduler/framework/plugins/podtopologyspread,
v1.37.2), pure: PreFilter/Filter for the pod's DoNotSchedule constraints and PreScore/Score/
NormalizeScore for its ScheduleAnyway ones, with upstream's messages.

How a constraint is read (common.go's filterTopologySpreadConstraints): a nil labelSelector
selects nothing, an empty one everything; with MatchLabelKeysInPodTopologySpread the incoming
pod's values of ``matchLabelKeys`` are ANDed to a non-nil selector (an empty selector becomes
those labels; a nil one stays nil). With MatchLabelKeysInPodTopologySpreadSelectorMerge (beta,
on, since 1.34) the API server has already appended the same ``key In (value)`` expressions
to the stored labelSelector at creation; the scheduler merges them again, which changes
nothing unless the pod's labels changed since (then both values are required, as upstream).
minDomains defaults to 1, nodeAffinityPolicy to Honor, nodeTaintsPolicy to Ignore. Honor of
taints leaves out the nodes with a NoSchedule or NoExecute taint the pod does not tolerate
(helper.DoNotScheduleTaintsFilterFunc; PreferNoSchedule does not count); Honor of affinity
leaves out those that the pod's nodeSelector and required node affinity refuse.

Counting (countPodsMatchSelector) takes the pods on the node in the incoming pod's namespace
that match the selector, leaving out pods being deleted (a deletionTimestamp); finished pods
are not in the snapshot. In 1.37 an *empty* selector counts nobody (``selector.Empty()``), so
only the incoming pod's self-match weighs; 1.38 counts every pod of the namespace there
(``labels.MatchesNothing``): ``count_empty_selector``.

A pod with no constraints of its own takes the profile's default constraints (DefaultingType
System: hostname maxSkew 3 and zone maxSkew 5, both ScheduleAnyway; List: ``defaults``) with
the selector that ``default_selector`` builds from the Services, ReplicationControllers,
ReplicaSets and StatefulSets selecting it; without such a selector it has no constraints. A
pod without constraints and without a default selector costs O(1): ``pre_filter`` and
``pre_score`` return None (upstream's Skip) before looking at the snapshot.

Preemption: a state is computed from the Snapshot handed in and nothing is cached across
calls, so ``pre_filter`` run again on a snapshot without the victims counts what is left.
Upstream instead updates its PreFilter state with RemovePod (and AddPod for nominated pods on
the node being filtered); ``update_with_pod`` is that update, returning a new state. The two
agree except where RemovePod counts what a fresh count leaves out: a victim being deleted, and
in 1.37 a victim matched by an empty selector (both decremented upstream). The two critical
paths follow upstream's criticalPaths, whose minimum stays exact while every pod added or
removed sits on one node.

Release switches (keyword flags, 1.37 defaults):

- ``match_label_keys``: MatchLabelKeysInPodTopologySpread, beta and on in 1.36, 1.37, 1.38;
- ``node_inclusion_policy``: NodeInclusionPolicyInPodTopologySpread, GA and locked on since
  1.33 (off only reproduces older releases and upstream's tests);
- ``taint_comparison_operators``: TaintTolerationComparisonOperators, alpha and off in 1.36,
  1.37, 1.38: tolerations with Gt/Lt compare integer taint values under nodeTaintsPolicy Honor;
- ``resize_preemption``: InPlacePodVerticalScalingSchedulerPreemption, alpha and off, new in
  1.37 (absent in 1.36): a pod whose resize is Deferred skips PreFilter;
- ``count_empty_selector``: 1.38 (see Counting).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Final

from operators.api.core import (
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    Pod,
    Taint,
    Toleration,
    TopologySpreadConstraint,
)
from operators.api.validation import label_name_errors, label_value_errors
from operators.cel.library.strings import go_quote
from operators.scheduling.nodes import (
    BLOCKING_EFFECTS,
    affinity_matches,
    toleration_matches,
    untolerated_taint,
)
from operators.scheduling.snapshot import Snapshot

NAME: Final = "PodTopologySpread"

#: Filter's reason when a node would break a constraint's maxSkew (Unschedulable).
ERR_REASON_CONSTRAINTS_NOT_MATCH: Final = "node(s) didn't match pod topology spread constraints"
#: Filter's reason when the node lacks a constraint's topologyKey (UnschedulableAndUnresolvable).
ERR_REASON_NODE_LABEL_NOT_MATCH: Final = (
    ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"
)
#: The reasons that no eviction on the node can lift (preemption skips such nodes).
UNRESOLVABLE_REASONS: Final = frozenset({ERR_REASON_NODE_LABEL_NOT_MATCH})

DO_NOT_SCHEDULE: Final = "DoNotSchedule"
SCHEDULE_ANYWAY: Final = "ScheduleAnyway"
HONOR: Final = "Honor"
IGNORE: Final = "Ignore"
LABEL_HOSTNAME: Final = "kubernetes.io/hostname"
LABEL_TOPOLOGY_ZONE: Final = "topology.kubernetes.io/zone"
MAX_NODE_SCORE: Final = 100

#: kube-scheduler's DefaultingType System (plugin.go's systemDefaultConstraints).
SYSTEM_DEFAULT_CONSTRAINTS: Final = (
    TopologySpreadConstraint(
        topology_key=LABEL_HOSTNAME, when_unsatisfiable=SCHEDULE_ANYWAY, max_skew=3
    ),
    TopologySpreadConstraint(
        topology_key=LABEL_TOPOLOGY_ZONE, when_unsatisfiable=SCHEDULE_ANYWAY, max_skew=5
    ),
)

_MAX_INT32: Final = 2**31 - 1
_MAX_INT64: Final = 2**63 - 1


class TopologySpreadError(Exception):
    """What upstream returns as an Error status from PreFilter or PreScore (a constraint's
    selector does not parse): the attempt fails whatever the node. The message is upstream's
    wrapped error, without the framework's ``running PreFilter plugin ...`` prefix."""


# --- selectors -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Requirement:
    """One parsed requirement (labels.Requirement); ``=`` of matchLabels is In one value."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        if self.operator == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        return False


@dataclasses.dataclass(frozen=True, slots=True)
class Selector:
    """A parsed labels.Selector: ``requirements`` None is ``labels.Nothing()`` (a nil
    LabelSelector), an empty tuple ``labels.Everything()`` (an empty one). Kept apart
    because upstream's counting treats them differently from a selector with requirements."""

    requirements: tuple[Requirement, ...] | None

    @property
    def matches_nothing(self) -> bool:
        return self.requirements is None

    @property
    def empty(self) -> bool:
        """Go's ``Selector.Empty()``: Everything, not Nothing."""
        return self.requirements == ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return self.requirements is not None and all(r.matches(labels) for r in self.requirements)

    def with_labels(self, labels: Mapping[str, str]) -> Selector:
        """common.go's mergeLabelSetWithSelector: Nothing stays Nothing."""
        if self.requirements is None:
            return self
        extra = tuple(Requirement(k, "In", frozenset({v})) for k, v in labels.items())
        return Selector(extra + self.requirements)


NOTHING: Final = Selector(None)
EVERYTHING: Final = Selector(())


def _go_strings(values: Sequence[str] | None) -> str:
    """Go's ``%#v`` of a []string (how field.Invalid shows the values)."""
    if values is None:
        return "[]string(nil)"
    return "[]string{" + ", ".join(go_quote(v) for v in values) + "}"


def _requirement(key: str, operator: str, values: list[str] | None) -> Requirement:
    """labels.NewRequirement: the key, the number of values and each value validated."""
    errors = []
    key_errors = label_name_errors(key)
    if key_errors:
        errors.append(f"key: Invalid value: {go_quote(key)}: {'; '.join(key_errors)}")
    count = len(values or ())
    if operator in ("In", "NotIn") and count == 0:
        errors.append(
            f"values: Invalid value: {_go_strings(values)}: "
            "for 'in', 'notin' operators, values set can't be empty"
        )
    if operator in ("Exists", "DoesNotExist") and count != 0:
        errors.append(
            f"values: Invalid value: {_go_strings(values)}: "
            "values set must be empty for exists and does not exist"
        )
    for i, value in enumerate(values or ()):
        value_errors = label_value_errors(value)
        if value_errors:
            errors.append(
                f"values[{i}][{key}]: Invalid value: {go_quote(value)}: " + "; ".join(value_errors)
            )
    if len(errors) == 1:
        raise ValueError(errors[0])
    if errors:
        raise ValueError("[" + ", ".join(errors) + "]")
    return Requirement(key, operator, frozenset(values or ()))


def selector_of(selector: LabelSelector | None) -> Selector:
    """metav1.LabelSelectorAsSelector; raises ValueError with upstream's message when a
    requirement does not parse."""
    if selector is None:
        return NOTHING
    if selector.is_empty:
        return EVERYTHING
    requirements = [_requirement(k, "In", [v]) for k, v in selector.match_labels.items()]
    for expression in selector.match_expressions:
        operator = expression.operator or ""
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ValueError(f"{go_quote(operator)} is not a valid label selector operator")
        values = list(expression.values) if expression.values else None
        requirements.append(_requirement(expression.key or "", operator, values))
    return Selector(tuple(requirements))


def _default(selector: LabelSelector) -> Selector:
    """A default selector as upstream holds it (a label set's AsSelector plus the
    controller's parsed requirements): nothing left to validate."""
    requirements = [Requirement(k, "In", frozenset({v})) for k, v in selector.match_labels.items()]
    requirements.extend(
        Requirement(e.key or "", e.operator or "", frozenset(e.values))
        for e in selector.match_expressions
    )
    return Selector(tuple(requirements))


# --- constraints ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Constraint:
    """A constraint as the plugin reads it (common.go's topologySpreadConstraint)."""

    max_skew: int
    topology_key: str
    selector: Selector
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE


@dataclasses.dataclass(frozen=True, slots=True)
class _Flags:
    match_label_keys: bool
    node_inclusion_policy: bool
    taint_comparison_operators: bool
    count_empty_selector: bool


def _parse(
    specs: Iterable[TopologySpreadConstraint],
    pod_labels: Mapping[str, str],
    action: str,
    flags: _Flags,
) -> list[Constraint]:
    """common.go's filterTopologySpreadConstraints: the constraints of one action, parsed."""
    out = []
    for spec in specs:
        if (spec.when_unsatisfiable or "") != action:
            continue
        selector = selector_of(spec.label_selector)
        if flags.match_label_keys and spec.match_label_keys:
            own = {k: pod_labels[k] for k in spec.match_label_keys if k in pod_labels}
            if own:
                selector = selector.with_labels(own)
        affinity_policy, taints_policy = HONOR, IGNORE
        if flags.node_inclusion_policy:
            affinity_policy = spec.node_affinity_policy or affinity_policy
            taints_policy = spec.node_taints_policy or taints_policy
        out.append(
            Constraint(
                max_skew=spec.max_skew,
                topology_key=spec.topology_key or "",
                selector=selector,
                min_domains=1 if spec.min_domains is None else spec.min_domains,
                node_affinity_policy=affinity_policy,
                node_taints_policy=taints_policy,
            )
        )
    return out


def _constraints(
    pod: Pod,
    action: str,
    default: LabelSelector | None,
    defaults: Sequence[TopologySpreadConstraint],
    flags: _Flags,
) -> tuple[Constraint, ...]:
    """plugin.go's getConstraints / scoring.go's initPreScoreState: the pod's own constraints
    of ``action``, else the defaults of ``action`` with the default selector (none without
    one). Raises TopologySpreadError with upstream's wrapping."""
    hard = "hard" if action == DO_NOT_SCHEDULE else "soft"
    labels = pod.metadata.labels
    if pod.spec.topology_spread_constraints:
        try:
            return tuple(_parse(pod.spec.topology_spread_constraints, labels, action, flags))
        except ValueError as e:
            raise TopologySpreadError(
                f"obtaining pod's {hard} topology spread constraints: {e}"
            ) from e
    try:
        parsed = _parse(defaults, labels, action, flags)
        if not parsed:
            return ()
        selector = _default(default) if default is not None else EVERYTHING
    except ValueError as e:
        raise TopologySpreadError(f"setting default {hard} topology spread constraints: {e}") from e
    if selector.empty:
        return ()
    return tuple(dataclasses.replace(c, selector=selector) for c in parsed)


def _has_keys(labels: Mapping[str, str], constraints: Iterable[Constraint]) -> bool:
    """common.go's nodeLabelsMatchSpreadConstraints."""
    return all(c.topology_key in labels for c in constraints)


def _decimal_integer(text: str) -> int | None:
    """content.IsDecimalInteger then strconv.ParseInt: no sign but '-', no leading zero."""
    digits = text[1:] if text.startswith("-") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    if digits[0] == "0" and text != "0":
        return None
    value = int(text)
    return value if -(2**63) <= value <= _MAX_INT64 else None


def tolerates(toleration: Toleration, taint: Taint, comparison: bool) -> bool:
    """core/v1 ToleratesTaint, with Gt/Lt when TaintTolerationComparisonOperators is on."""
    if not comparison or toleration.operator not in ("Gt", "Lt"):
        return toleration_matches(toleration, taint)
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    bound = _decimal_integer(toleration.value or "")
    value = _decimal_integer(taint.value or "")
    if bound is None or value is None:
        return False
    return value < bound if toleration.operator == "Lt" else value > bound


def _untolerated(node: Node, tolerations: Sequence[Toleration], comparison: bool) -> bool:
    """FindMatchingUntoleratedTaint over the NoSchedule and NoExecute taints."""
    if not comparison:
        return untolerated_taint(node, tolerations) is not None
    return any(
        taint.effect in BLOCKING_EFFECTS
        and not any(tolerates(t, taint, comparison) for t in tolerations)
        for taint in node.spec.taints
    )


class _Inclusion:
    """matchNodeInclusionPolicies for one node, each check done at most once."""

    def __init__(self, pod: Pod, node: Node, flags: _Flags) -> None:
        self._pod, self._node, self._flags = pod, node, flags
        self._affinity: bool | None = None
        self._tainted: bool | None = None

    def affinity(self) -> bool:
        if self._affinity is None:
            self._affinity = affinity_matches(self._pod, self._node)
        return self._affinity

    def includes(self, c: Constraint) -> bool:
        if c.node_affinity_policy == HONOR and not self.affinity():
            return False
        if c.node_taints_policy == HONOR:
            if self._tainted is None:
                self._tainted = _untolerated(
                    self._node, self._pod.spec.tolerations, self._flags.taint_comparison_operators
                )
            if self._tainted:
                return False
        return True


def _count(pods: Iterable[Pod], selector: Selector, namespace: str, everything: bool) -> int:
    """common.go's countPodsMatchSelector: pods being deleted and other namespaces left out;
    an empty selector counts nobody unless ``everything`` (1.38)."""
    if selector.requirements is None or (not selector.requirements and not everything):
        return 0
    return sum(
        1
        for p in pods
        if p.metadata.deletion_timestamp is None
        and (p.metadata.namespace or "") == namespace
        and selector.matches(p.metadata.labels)
    )


def _resize_deferred(pod: Pod) -> bool:
    """component-helpers' IsPodResizeDeferred."""
    condition = pod.condition("PodResizePending")
    return condition is not None and condition.reason == "Deferred"


def _no_constraints(pod: Pod, default: LabelSelector | None) -> bool:
    """Nothing to spread, whatever the snapshot: the O(1) way out."""
    return not pod.spec.topology_spread_constraints and (default is None or default.is_empty)


# --- filtering -----------------------------------------------------------------------------

#: (topology value, matching pods): filtering.go's criticalPaths entry.
Path = tuple[str, int]
CriticalPaths = tuple[Path, Path]
_NO_PATHS: Final[CriticalPaths] = (("", _MAX_INT32), ("", _MAX_INT32))


def _update_paths(paths: CriticalPaths, value: str, num: int) -> CriticalPaths:
    """criticalPaths.update: the first entry always holds the minimum, the second is at least
    that (two are enough while changes stay on one node)."""
    (v0, n0), (v1, n1) = paths
    if value == v0:
        n0 = num
    elif value == v1:
        n1 = num
    elif num < n0:
        return ((value, num), (v0, n0))
    elif num < n1:
        return ((v0, n0), (value, num))
    else:
        return paths
    if n0 > n1:
        return ((v1, n1), (v0, n0))
    return ((v0, n0), (v1, n1))


@dataclasses.dataclass(frozen=True)
class FilterState:
    """filtering.go's preFilterState: per constraint, the matching pods per topology value
    of the eligible nodes, and the two critical paths."""

    constraints: tuple[Constraint, ...]
    match_num: tuple[Mapping[str, int], ...]
    critical_paths: tuple[CriticalPaths, ...]

    def min_match_num(self, index: int) -> int:
        """The global minimum, 0 while fewer domains than minDomains are eligible."""
        if len(self.match_num[index]) < self.constraints[index].min_domains:
            return 0
        return self.critical_paths[index][0][1]


def pre_filter(
    pod: Pod,
    snapshot: Snapshot,
    *,
    default_selector: LabelSelector | None = None,
    defaults: Sequence[TopologySpreadConstraint] | None = None,
    match_label_keys: bool = True,
    node_inclusion_policy: bool = True,
    taint_comparison_operators: bool = False,
    resize_preemption: bool = False,
    count_empty_selector: bool = False,
) -> FilterState | None:
    """PreFilter: count the pods matching each hard constraint per domain over every node of
    the snapshot (None: nothing to check, upstream's Skip).

    ``default_selector``: ``default_selector()``'s result for a pod without constraints;
    ``defaults``: the profile's List default constraints (None: System defaulting, whose
    constraints are all ScheduleAnyway). Raises TopologySpreadError where upstream errors."""
    if _no_constraints(pod, default_selector):
        return None
    if resize_preemption and _resize_deferred(pod):
        return None
    flags = _Flags(
        match_label_keys, node_inclusion_policy, taint_comparison_operators, count_empty_selector
    )
    try:
        constraints = _constraints(
            pod,
            DO_NOT_SCHEDULE,
            default_selector,
            SYSTEM_DEFAULT_CONSTRAINTS if defaults is None else defaults,
            flags,
        )
    except TopologySpreadError as e:
        raise TopologySpreadError(f"get constraints from pod: {e}") from e
    if not constraints:
        return None
    namespace = pod.metadata.namespace or ""
    counts: list[dict[str, int]] = [{} for _ in constraints]
    for node in snapshot.nodes:
        inclusion = _Inclusion(pod, node, flags)
        if not node_inclusion_policy and not inclusion.affinity():
            continue
        labels = node.metadata.labels
        if not _has_keys(labels, constraints):
            continue
        pods = snapshot.pods_on(node.metadata.name or "")
        for i, c in enumerate(constraints):
            if node_inclusion_policy and not inclusion.includes(c):
                continue
            value = labels[c.topology_key]
            found = _count(pods, c.selector, namespace, count_empty_selector)
            counts[i][value] = counts[i].get(value, 0) + found
    paths = []
    for per_value in counts:
        p = _NO_PATHS
        for value, num in per_value.items():
            p = _update_paths(p, value, num)
        paths.append(p)
    return FilterState(constraints, tuple(counts), tuple(paths))


def filter(state: FilterState, pod: Pod, node: Node) -> str | None:
    """Filter: the node's reason in upstream's words, None when it fits every constraint
    (skew = matching pods in the node's domain + the pod itself if it matches - minimum)."""
    labels = node.metadata.labels
    own = pod.metadata.labels
    for i, c in enumerate(state.constraints):
        value = labels.get(c.topology_key)
        if value is None:
            return ERR_REASON_NODE_LABEL_NOT_MATCH
        self_match = 1 if c.selector.matches(own) else 0
        skew = state.match_num[i].get(value, 0) + self_match - state.min_match_num(i)
        if skew > c.max_skew:
            return ERR_REASON_CONSTRAINTS_NOT_MATCH
    return None


def update_with_pod(
    state: FilterState,
    pod: Pod,
    other: Pod,
    node: Node,
    delta: int,
    *,
    node_inclusion_policy: bool = True,
    taint_comparison_operators: bool = False,
) -> FilterState:
    """AddPod (``delta`` 1) or RemovePod (-1) of ``other`` on ``node`` while scheduling
    ``pod``: a new state, ``state`` unchanged (upstream's Clone then update)."""
    if (other.metadata.namespace or "") != (pod.metadata.namespace or ""):
        return state
    labels = node.metadata.labels
    if not _has_keys(labels, state.constraints):
        return state
    flags = _Flags(True, node_inclusion_policy, taint_comparison_operators, False)
    inclusion = _Inclusion(pod, node, flags)
    if not node_inclusion_policy and not inclusion.affinity():
        return state
    counts = [dict(m) for m in state.match_num]
    paths = list(state.critical_paths)
    for i, c in enumerate(state.constraints):
        if not c.selector.matches(other.metadata.labels):
            continue
        if node_inclusion_policy and not inclusion.includes(c):
            continue
        value = labels[c.topology_key]
        counts[i][value] = counts[i].get(value, 0) + delta
        paths[i] = _update_paths(paths[i], value, counts[i][value])
    return FilterState(state.constraints, tuple(counts), tuple(paths))


# --- scoring -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ScoreState:
    """scoring.go's preScoreState, with what Score needs to count a node's own pods."""

    constraints: tuple[Constraint, ...]
    #: Feasible nodes lacking a topology key (only when every key is required).
    ignored_nodes: frozenset[str]
    #: Per constraint, matching pods per topology value of the feasible nodes (none for
    #: hostname constraints: Score counts those on the node).
    pod_counts: tuple[Mapping[str, int], ...]
    weights: tuple[float, ...]
    namespace: str
    pods_on: Callable[[str], Sequence[Pod]]
    count_empty_selector: bool = False


def topology_normalizing_weight(size: int) -> float:
    """log(size + 2): counts in a topology of few domains are not watered down."""
    return math.log(size + 2)


def pre_score(
    pod: Pod,
    snapshot: Snapshot,
    feasible: Sequence[Node],
    *,
    default_selector: LabelSelector | None = None,
    defaults: Sequence[TopologySpreadConstraint] | None = None,
    match_label_keys: bool = True,
    node_inclusion_policy: bool = True,
    taint_comparison_operators: bool = False,
    count_empty_selector: bool = False,
) -> ScoreState | None:
    """PreScore over the nodes that passed the filters (None: upstream's Skip).

    ``defaults`` None is System defaulting (SYSTEM_DEFAULT_CONSTRAINTS, and nodes without a
    zone still spread by hostname); a sequence is List defaulting. Raises TopologySpreadError
    where upstream errors."""
    if _no_constraints(pod, default_selector) or not snapshot.nodes:
        return None
    flags = _Flags(
        match_label_keys, node_inclusion_policy, taint_comparison_operators, count_empty_selector
    )
    own = bool(pod.spec.topology_spread_constraints)
    require_all = own or defaults is not None
    try:
        constraints = _constraints(
            pod,
            SCHEDULE_ANYWAY,
            default_selector,
            SYSTEM_DEFAULT_CONSTRAINTS if defaults is None else defaults,
            flags,
        )
    except TopologySpreadError as e:
        raise TopologySpreadError(f"calculating preScoreState: {e}") from e
    if not constraints:
        return None
    counts: list[dict[str, int]] = [{} for _ in constraints]
    ignored: set[str] = set()
    for node in feasible:
        labels = node.metadata.labels
        if require_all and not _has_keys(labels, constraints):
            ignored.add(node.metadata.name or "")
            continue
        for i, c in enumerate(constraints):
            if c.topology_key != LABEL_HOSTNAME:
                counts[i].setdefault(labels.get(c.topology_key, ""), 0)
    weights = tuple(
        topology_normalizing_weight(
            len(feasible) - len(ignored) if c.topology_key == LABEL_HOSTNAME else len(counts[i])
        )
        for i, c in enumerate(constraints)
    )
    namespace = pod.metadata.namespace or ""
    for node in snapshot.nodes:
        inclusion = _Inclusion(pod, node, flags)
        if not node_inclusion_policy and not inclusion.affinity():
            continue
        labels = node.metadata.labels
        if require_all and not _has_keys(labels, constraints):
            continue
        for i, c in enumerate(constraints):
            if node_inclusion_policy and not inclusion.includes(c):
                continue
            value = labels.get(c.topology_key, "")
            if value not in counts[i]:
                continue
            pods = snapshot.pods_on(node.metadata.name or "")
            counts[i][value] += _count(pods, c.selector, namespace, count_empty_selector)
    return ScoreState(
        constraints=constraints,
        ignored_nodes=frozenset(ignored),
        pod_counts=tuple(counts),
        weights=weights,
        namespace=namespace,
        pods_on=snapshot.pods_on,
        count_empty_selector=count_empty_selector,
    )


def _go_round(value: float) -> int:
    """Go's math.Round: half away from zero, on the float's exact value."""
    return int(Decimal(value).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def score(state: ScoreState, pod: Pod, node: Node) -> int:
    """Score: the raw score of a feasible node (more matching pods, higher), normalized later
    so that fewer matching pods score higher."""
    name = node.metadata.name or ""
    if name in state.ignored_nodes:
        return 0
    labels = node.metadata.labels
    total = 0.0
    for i, c in enumerate(state.constraints):
        value = labels.get(c.topology_key)
        if value is None:
            continue
        if c.topology_key == LABEL_HOSTNAME:
            found = _count(
                state.pods_on(name), c.selector, state.namespace, state.count_empty_selector
            )
        else:
            found = state.pod_counts[i].get(value, 0)
        total += float(found) * state.weights[i] + float(c.max_skew - 1)
    return _go_round(total)


def normalize_score(state: ScoreState, scores: Mapping[str, int]) -> dict[str, int]:
    """NormalizeScore: node name to 0..100, the least loaded 100, ignored nodes 0."""
    kept = [s for name, s in scores.items() if name not in state.ignored_nodes]
    low = min(kept, default=_MAX_INT64)
    high = max([0, *kept])
    out = {}
    for name, raw in scores.items():
        if name in state.ignored_nodes:
            out[name] = 0
        elif high == 0:
            out[name] = MAX_NODE_SCORE
        else:
            out[name] = MAX_NODE_SCORE * (high + low - raw) // high
    return out


def score_nodes(state: ScoreState, pod: Pod, nodes: Iterable[Node]) -> dict[str, int]:
    """Score then NormalizeScore over the feasible nodes."""
    return normalize_score(state, {n.metadata.name or "": score(state, pod, n) for n in nodes})


# --- default selector ----------------------------------------------------------------------

_CONTROLLERS: Final = {
    ("", "v1", "ReplicationController"): "rc",
    ("apps", "v1", "ReplicaSet"): "rs",
    ("apps", "v1", "StatefulSet"): "ss",
}


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _named(
    objects: Iterable[Mapping[str, Any]], namespace: str, name: str
) -> Mapping[str, Any] | None:
    """A lister's Get(namespace, name)."""
    for obj in objects:
        meta = _meta(obj)
        if (meta.get("namespace") or "") == namespace and (meta.get("name") or "") == name:
            return obj
    return None


def _group_version(api_version: str) -> tuple[str, str] | None:
    """schema.ParseGroupVersion: "" and "v1" are the core group; more than one '/' fails."""
    if not api_version:
        return ("", "")
    parts = api_version.split("/")
    if len(parts) == 1:
        return ("", parts[0])
    if len(parts) == 2:
        return (parts[0], parts[1])
    return None


def default_selector(
    pod: Pod,
    services: Iterable[Mapping[str, Any]],
    replication_controllers: Iterable[Mapping[str, Any]],
    replica_sets: Iterable[Mapping[str, Any]],
    stateful_sets: Iterable[Mapping[str, Any]],
) -> LabelSelector | None:
    """helper.DefaultSelector over plain objects (any namespace; the pod's is used): the
    selectors of the pod's Services merged, plus its controlling ReplicationController's
    selector, or its ReplicaSet's or StatefulSet's requirements. None when that is empty
    (the pod then gets no default constraints)."""
    namespace = pod.metadata.namespace or ""
    labels = pod.metadata.labels
    merged: dict[str, str] = {}
    for service in services:
        if (_meta(service).get("namespace") or "") != namespace:
            continue
        selector = _spec(service).get("selector")
        if not isinstance(selector, Mapping):
            continue  # a nil selector selects nothing, not everything
        if all(k in labels and labels[k] == v for k, v in selector.items()):
            merged.update(selector)
    expressions: list[LabelSelectorRequirement] = []
    owner = pod.metadata.controller_ref()
    gv = _group_version(owner.api_version or "") if owner is not None else None
    kind = _CONTROLLERS.get((*gv, owner.kind or "")) if owner is not None and gv else None
    if owner is not None and kind is not None:
        sources = {"rc": replication_controllers, "rs": replica_sets, "ss": stateful_sets}
        controller = _named(sources[kind], namespace, owner.name or "")
        if controller is not None and kind == "rc":
            rc_selector = _spec(controller).get("selector")
            if isinstance(rc_selector, Mapping):
                merged.update(rc_selector)
        elif controller is not None:
            expressions = _requirements_of(_spec(controller).get("selector"))
    if not merged and not expressions:
        return None
    return LabelSelector(match_labels=merged, match_expressions=expressions)


def _requirements_of(raw: Any) -> list[LabelSelectorRequirement]:
    """A ReplicaSet's or StatefulSet's selector as requirements (none when nil or invalid)."""
    if not isinstance(raw, Mapping):
        return []
    try:
        selector = LabelSelector.load(raw)
        selector_of(selector)
    except ValueError:  # pydantic's ValidationError is a ValueError
        return []
    out = [
        LabelSelectorRequirement(key=k, operator="In", values=[v])
        for k, v in selector.match_labels.items()
    ]
    out.extend(selector.match_expressions)
    return out
