"""InterPodAffinity (``plugins/interpodaffinity``: filtering.go, scoring.go, plugin.go; the terms
as kube-scheduler's ``framework.NewPodInfo`` and k8s.io/kube-scheduler's ``AffinityTerm``).

Filter. PreFilter counts, per topology pair (node label key, value): the placed pods' required
anti-affinity terms that match the incoming pod (only ``snapshot.with_required_anti_affinity``
is read), and, when the incoming pod has required terms, the placed pods that match its
affinity terms (one pod must match all of them) and each of its anti-affinity terms. A node
then fails, in this order: affinity ("didn't match pod affinity rules", unresolvable: a node
lacking a term's topology key never passes; when no placed pod matches the terms anywhere, the
pod that matches its own terms may start the group), the pod's anti-affinity ("didn't match pod
anti-affinity rules"), the placed pods' anti-affinity ("didn't satisfy existing pods
anti-affinity rules"); the last two are Unschedulable (eviction helps).

Namespaces. A term selects pods in ``namespaces``, or the pod's own namespace when neither
``namespaces`` nor ``namespaceSelector`` is set; the incoming pod's ``namespaceSelector`` is
unrolled into names from ``snapshot.namespaces`` (an empty selector stays: every namespace),
while a placed pod's selector is matched against the incoming pod's namespace labels (none when
the namespace is unknown). A nil labelSelector selects nothing, an empty one everything.

matchLabelKeys / mismatchLabelKeys are not read: since MatchLabelKeysInPodAffinity (GA and
locked from 1.33, gone in 1.38) the API server merges them into the labelSelector when it
creates the pod, and the scheduler of 1.36-1.38 reads only the selector. ``apply_label_keys``
does that merge for pods that never went through an API server.

Score. PreScore sums, per topology pair, the weights of the incoming pod's preferred terms over
the placed pods that match them (anti-affinity negative), and of the placed pods' required
affinity (``hard_pod_affinity_weight``) and preferred terms that the incoming pod matches.
``normalize`` maps a cycle's scores onto 0..100 between their min and max.

Preemption: nothing is kept between cycles or snapshots. The states hold what the snapshot
gave (the fast path's local checks read ``pods_on`` of the snapshot given to ``pre_filter``), so
the answer with victims gone is ``pre_filter`` again on ``snapshot.without_pods`` -- what
upstream's RemovePod reaches incrementally.

Releases: 1.37 added InterPodAffinityHostnameFastPath (alpha, off; ``hostname_fast_path``):
kubernetes.io/hostname terms are checked against the node's own pods in Filter instead of being
counted cluster-wide (the first pod of a hostname-only affinity group is then allowed only while
no placed pod matches its terms on any node, with the hostname label or without) and
InPlacePodVerticalScalingSchedulerPreemption (alpha, off; ``skip_deferred_resize``). 1.36 kept
the incoming pod's namespaceSelector after unrolling it (``keep_namespace_selector``), so a
selector that matches empty labels (NotIn, DoesNotExist) matched pods of every namespace. 1.38
filters and scores as 1.37 (it only hardens AddPod/RemovePod and the queueing hints).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Final, TypeVar

from operators.api.core import (
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    Pod,
    PodAffinityTerm,
    WeightedPodAffinityTerm,
)
from operators.cel.library.strings import go_quote
from operators.scheduling.plugins import Unresolvable
from operators.scheduling.snapshot import Placed, Snapshot, has_affinity

REASON_AFFINITY: Final = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY: Final = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY: Final = "node(s) didn't satisfy existing pods anti-affinity rules"
#: v1.LabelHostname, the topology the fast path checks node by node.
HOSTNAME: Final = "kubernetes.io/hostname"
#: framework.MaxNodeScore.
MAX_NODE_SCORE: Final = 100
#: v1.DefaultHardPodAffinitySymmetricWeight (InterPodAffinityArgs.hardPodAffinityWeight).
DEFAULT_HARD_POD_AFFINITY_WEIGHT: Final = 1

#: (topology key, the node's value of it)
Pair = tuple[str, str]
_T = TypeVar("_T")


class AffinityParseError(ValueError):
    """A term's selector that metav1.LabelSelectorAsSelector refuses (the message is
    NewPodInfo's: "requiredAffinityTerms: values[0][key]: Invalid value: ...")."""


# --- label selectors: metav1.LabelSelectorAsSelector and labels.NewRequirement ---------------

_NAME_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_VALUE_FMT: Final = f"({_NAME_FMT})?"
_SUBDOMAIN_FMT: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_NAME_RE: Final = re.compile(_NAME_FMT)
_VALUE_RE: Final = re.compile(_VALUE_FMT)
_SUBDOMAIN_RE: Final = re.compile(_SUBDOMAIN_FMT)
_NAME_MSG: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_VALUE_MSG: Final = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character"
)
_SUBDOMAIN_MSG: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character"
)
_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist")


def _regex_error(message: str, fmt: str, *examples: str) -> str:
    """validation's RegexError, spacing included."""
    shown = "".join(f"{' or ' if i else ''}'{e}', " for i, e in enumerate(examples))
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def _too_long(maximum: int) -> str:
    return f"must be no more than {maximum} bytes"


def label_key_errors(key: str) -> list[str]:
    """content.IsLabelKey: ``[DNS-subdomain prefix/]name``."""
    parts = key.split("/")
    errors: list[str] = []
    if len(parts) > 2:
        name_rule = _regex_error(_NAME_MSG, _NAME_FMT, "MyName", "my.name", "123-abc")
        return [
            f"a valid label key {name_rule} with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            if len(prefix.encode()) > 253:
                errors.append(f"prefix part {_too_long(253)}")
            if not _SUBDOMAIN_RE.fullmatch(prefix):
                rule = _regex_error(_SUBDOMAIN_MSG, _SUBDOMAIN_FMT, "example.com")
                errors.append(f"prefix part {rule}")
    name = parts[-1]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name.encode()) > 63:
        errors.append(f"name part {_too_long(63)}")
    if not _NAME_RE.fullmatch(name):
        rule = _regex_error(_NAME_MSG, _NAME_FMT, "MyName", "my.name", "123-abc")
        errors.append(f"name part {rule}")
    return errors


def label_value_errors(value: str) -> list[str]:
    """content.IsLabelValue."""
    errors = []
    if len(value.encode()) > 63:
        errors.append(_too_long(63))
    if not _VALUE_RE.fullmatch(value):
        errors.append(_regex_error(_VALUE_MSG, _VALUE_FMT, "MyValue", "my_value", "12345"))
    return errors


def go_json(values: Sequence[str]) -> str:
    """encoding/json of a []string (nil: null), HTML characters escaped as Go does."""
    if not values:
        return "null"
    text = json.dumps(list(values), separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def aggregate_errors(messages: Iterable[str]) -> str:
    """utilerrors.Aggregate's Error(): one message as it is, several deduplicated in []."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def _requirement_errors(key: str, operator: str, values: Sequence[str]) -> str | None:
    """labels.NewRequirement's aggregated field errors (operator "=" for a matchLabels entry)."""
    errors = []
    key_errors = label_key_errors(key)
    if key_errors:
        errors.append(f"key: Invalid value: {go_quote(key)}: {'; '.join(key_errors)}")
    if operator in ("In", "NotIn") and not values:
        errors.append(
            "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty"
        )
    if operator in ("Exists", "DoesNotExist") and values:
        errors.append(
            f"values: Invalid value: {go_json(values)}: "
            "values set must be empty for exists and does not exist"
        )
    for i, value in enumerate(values):
        value_errors = label_value_errors(value)
        if value_errors:
            errors.append(
                f"values[{i}][{key}]: Invalid value: {go_quote(value)}: {'; '.join(value_errors)}"
            )
    return aggregate_errors(errors) if errors else None


def _check_selector(selector: LabelSelector | None) -> None:
    """LabelSelectorAsSelector's first error, raised; None (Nothing) and {} (Everything) pass."""
    if selector is None:
        return
    for key, value in selector.match_labels.items():
        error = _requirement_errors(key, "=", [value])
        if error:
            raise AffinityParseError(error)
    for requirement in selector.match_expressions:
        operator = requirement.operator or ""
        if operator not in _OPERATORS:
            raise AffinityParseError(f"{go_quote(operator)} is not a valid label selector operator")
        error = _requirement_errors(requirement.key or "", operator, requirement.values)
        if error:
            raise AffinityParseError(error)


def _selects(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """A nil selector selects nothing; an empty one everything (LabelSelector.matches)."""
    if selector is None:
        return False
    return selector.matches(labels if isinstance(labels, dict) else dict(labels))


# --- terms: framework.NewPodInfo ------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AffinityTerm:
    """fwk.AffinityTerm: a v1 term with its namespaces resolved and its selectors checked."""

    namespaces: frozenset[str]
    selector: LabelSelector | None
    topology_key: str
    namespace_selector: LabelSelector | None

    def matches(self, pod: Pod, namespace_labels: Mapping[str, str] | None) -> bool:
        """The pod is in the term's namespaces (named, or selected by ``namespace_labels``, the
        pod's namespace labels) and its labels match the selector."""
        if (pod.metadata.namespace or "") in self.namespaces or _selects(
            self.namespace_selector, namespace_labels or {}
        ):
            return _selects(self.selector, pod.metadata.labels)
        return False


@dataclasses.dataclass(frozen=True)
class WeightedAffinityTerm:
    term: AffinityTerm
    weight: int


@dataclasses.dataclass(frozen=True)
class PodTerms:
    """A pod's required and preferred (anti-)affinity terms (PodInfo's four lists)."""

    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedAffinityTerm, ...] = ()


def _term(pod: Pod, term: PodAffinityTerm) -> AffinityTerm:
    _check_selector(term.label_selector)
    if not term.namespaces and term.namespace_selector is None:
        namespaces = frozenset({pod.metadata.namespace or ""})
    else:
        namespaces = frozenset(term.namespaces)
    _check_selector(term.namespace_selector)
    return AffinityTerm(
        namespaces, term.label_selector, term.topology_key or "", term.namespace_selector
    )


def _terms(pod: Pod, terms: Sequence[PodAffinityTerm]) -> tuple[AffinityTerm, ...]:
    return tuple(_term(pod, t) for t in terms)


def _weighted(
    pod: Pod, terms: Sequence[WeightedPodAffinityTerm]
) -> tuple[WeightedAffinityTerm, ...]:
    return tuple(WeightedAffinityTerm(_term(pod, t.pod_affinity_term), t.weight) for t in terms)


def _required(pod: Pod, anti: bool) -> list[PodAffinityTerm]:
    affinity = pod.spec.affinity
    if affinity is None:
        return []
    terms = affinity.pod_anti_affinity if anti else affinity.pod_affinity
    return terms.required_during_scheduling_ignored_during_execution if terms else []


def _preferred(pod: Pod, anti: bool) -> list[WeightedPodAffinityTerm]:
    affinity = pod.spec.affinity
    if affinity is None:
        return []
    terms = affinity.pod_anti_affinity if anti else affinity.pod_affinity
    return terms.preferred_during_scheduling_ignored_during_execution if terms else []


def _parse(name: str, build: Callable[[], tuple[_T, ...]], errors: list[str]) -> tuple[_T, ...]:
    """One of NewPodInfo's lists: its first error recorded with the list's name."""
    try:
        return build()
    except AffinityParseError as error:
        errors.append(f"{name}: {error}")
        return ()


def pod_terms(pod: Pod) -> PodTerms:
    """The pod's terms, or AffinityParseError with every list's first error (NewPodInfo)."""
    errors: list[str] = []
    terms = PodTerms(
        _parse("requiredAffinityTerms", lambda: _terms(pod, _required(pod, False)), errors),
        _parse("requiredAntiAffinityTerms", lambda: _terms(pod, _required(pod, True)), errors),
        _parse("preferredAffinityTerms", lambda: _weighted(pod, _preferred(pod, False)), errors),
        _parse("preferredAntiAffinityTerms", lambda: _weighted(pod, _preferred(pod, True)), errors),
    )
    if errors:
        raise AffinityParseError(aggregate_errors(errors))
    return terms


def _placed_required(pod: Pod, anti: bool) -> tuple[AffinityTerm, ...]:
    """A placed pod's required terms: the cache ignores NewPodInfo's error, and a list that
    failed to parse is empty."""
    try:
        return _terms(pod, _required(pod, anti))
    except AffinityParseError:
        return ()


def _placed_preferred(pod: Pod, anti: bool) -> tuple[WeightedAffinityTerm, ...]:
    try:
        return _weighted(pod, _preferred(pod, anti))
    except AffinityParseError:
        return ()


def _unroll(
    term: AffinityTerm, namespaces: Mapping[str, Mapping[str, str]], keep_selector: bool
) -> AffinityTerm:
    """mergeAffinityTermNamespacesIfNotEmpty: the incoming pod's namespaceSelector becomes the
    names it selects, so matching a placed pod needs no namespace lookup. An empty selector
    (every namespace) stays; 1.36 kept any selector (``keep_selector``)."""
    selector = term.namespace_selector
    if selector is None or selector.is_empty:
        return term
    selected = {name for name, labels in namespaces.items() if _selects(selector, labels)}
    return dataclasses.replace(
        term,
        namespaces=term.namespaces | selected,
        namespace_selector=selector if keep_selector else None,
    )


# --- grouping: each distinct term, and each distinct (namespace, labels), looked at once ------

#: Memo of a placed pod's required anti-affinity terms and their keys, by the pod object's id
#: (the caller parses a pod once per resourceVersion, so the object is its identity; the entry
#: keeps it, so the id is not reused while the entry lives). Bounded: cleared when full.
_TERMS_MEMO: dict[int, tuple[Pod, tuple[tuple[AffinityTerm, Hashable], ...]]] = {}
_IDENTITY_MEMO: dict[int, tuple[Pod, Hashable]] = {}
MEMO_SIZE: Final = 200_000


def _selector_key(selector: LabelSelector | None) -> Hashable:
    if selector is None:
        return None
    return (
        tuple(sorted(selector.match_labels.items())),
        tuple((r.key, r.operator, tuple(r.values)) for r in selector.match_expressions),
    )


def _term_key(term: AffinityTerm) -> Hashable:
    """What makes two terms match the same pods at the same topology key."""
    return (
        term.namespaces,
        _selector_key(term.selector),
        term.topology_key,
        _selector_key(term.namespace_selector),
    )


def _anti_terms_with_keys(pod: Pod) -> tuple[tuple[AffinityTerm, Hashable], ...]:
    found = _TERMS_MEMO.get(id(pod))
    if found is not None and found[0] is pod:
        return found[1]
    terms = tuple((t, _term_key(t)) for t in _placed_required(pod, anti=True))
    if len(_TERMS_MEMO) >= MEMO_SIZE:
        _TERMS_MEMO.clear()
    _TERMS_MEMO[id(pod)] = (pod, terms)
    return terms


def _identity(pod: Pod) -> Hashable:
    """What a term's match depends on: the pod's namespace and labels."""
    found = _IDENTITY_MEMO.get(id(pod))
    if found is not None and found[0] is pod:
        return found[1]
    key = (pod.metadata.namespace or "", tuple(sorted(pod.metadata.labels.items())))
    if len(_IDENTITY_MEMO) >= MEMO_SIZE:
        _IDENTITY_MEMO.clear()
    _IDENTITY_MEMO[id(pod)] = (pod, key)
    return key


def _matches_all(terms: Sequence[AffinityTerm], pod: Pod) -> bool:
    """podMatchesAllAffinityTerms: at least one term, and the pod matches each (the incoming
    pod's terms, their namespaceSelector unrolled: no namespace labels needed)."""
    return bool(terms) and all(t.matches(pod, None) for t in terms)


def _record(counts: dict[Pair, int], labels: Mapping[str, str], key: str) -> None:
    value = labels.get(key)
    if value is not None:
        counts[(key, value)] = counts.get((key, value), 0) + 1


def _resize_deferred(pod: Pod) -> bool:
    """component-helpers' IsPodResizeDeferred: the first PodResizePending says Deferred."""
    condition = pod.condition("PodResizePending")
    return condition is not None and condition.reason == "Deferred"


def _no_pods(_: str) -> Sequence[Pod]:
    return ()


# --- filter ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class FilterState:
    """PreFilter's state for one pod and one snapshot (upstream's preFilterState)."""

    pod: Pod
    affinity_terms: tuple[AffinityTerm, ...]
    """The pod's required affinity terms, namespaceSelector unrolled."""
    anti_affinity_terms: tuple[AffinityTerm, ...]
    namespace_labels: Mapping[str, str] | None
    """The pod's namespace's labels (None: unknown namespace), for placed pods' selectors."""
    existing_anti_affinity_counts: Mapping[Pair, int]
    """Placed pods' required anti-affinity terms matching the pod (hostname ones are checked in
    Filter instead under the fast path)."""
    affinity_counts: Mapping[Pair, int]
    """Placed pods matching all cluster-wide affinity terms, once per term's pair."""
    anti_affinity_counts: Mapping[Pair, int]
    """Placed pods matching each cluster-wide anti-affinity term."""
    cluster_wide_affinity_terms: tuple[AffinityTerm, ...] = ()
    cluster_wide_anti_affinity_terms: tuple[AffinityTerm, ...] = ()
    host_scoped_affinity_terms: tuple[AffinityTerm, ...] = ()
    """Fast path, when every affinity term is a hostname one: checked on the node's pods."""
    host_scoped_anti_affinity_terms: tuple[AffinityTerm, ...] = ()
    matching_host_scoped_affinity_pods: int = 0
    """Fast path: placed pods anywhere matching all host-scoped affinity terms."""
    hostname_fast_path: bool = False
    pods_on: Callable[[str], Sequence[Pod]] = _no_pods
    """The snapshot's pods by node, for the fast path's node-local checks."""


def _existing_anti_affinity(
    pod: Pod,
    namespace_labels: Mapping[str, str] | None,
    snapshot: Snapshot,
    labels_of: Mapping[str, Mapping[str, str]],
    fast_path: bool,
) -> tuple[dict[Pair, int], bool]:
    """getExistingAntiAffinityCounts, and under the fast path whether a placed pod has a
    hostname anti-affinity term that Filter must check node by node."""
    if not fast_path:
        return _existing_grouped(pod, namespace_labels, snapshot, labels_of), False
    counts: dict[Pair, int] = {}
    host_scoped = False
    by_node: dict[str, list[Pod]] = {}
    for node_name, placed in snapshot.with_required_anti_affinity:
        by_node.setdefault(node_name, []).append(placed)
    for node_name, pods in by_node.items():
        labels = labels_of.get(node_name)
        if labels is None:
            continue
        if fast_path and not any(
            (t.topology_key or "") != HOSTNAME for p in pods for t in _required(p, anti=True)
        ):
            host_scoped = True  # a node whose pods' terms are all hostname ones
            continue
        for placed in pods:
            for term in _placed_required(placed, anti=True):
                if fast_path and term.topology_key == HOSTNAME:
                    host_scoped = True
                elif term.matches(pod, namespace_labels):
                    _record(counts, labels, term.topology_key)
    return counts, host_scoped


def _existing_grouped(
    pod: Pod,
    namespace_labels: Mapping[str, str] | None,
    snapshot: Snapshot,
    labels_of: Mapping[str, Mapping[str, str]],
) -> dict[Pair, int]:
    """getExistingAntiAffinityCounts, each distinct term matched once: the placed pods of an
    app share their terms, so a cluster of thousands of them has a handful to match."""
    groups: dict[Hashable, tuple[AffinityTerm, list[str]]] = {}
    for node_name, placed in snapshot.with_required_anti_affinity:
        for term, key in _anti_terms_with_keys(placed):
            group = groups.get(key)
            if group is None:
                groups[key] = (term, [node_name])
            else:
                group[1].append(node_name)
    counts: dict[Pair, int] = {}
    for term, nodes in groups.values():
        if not term.matches(pod, namespace_labels):
            continue
        for node_name in nodes:
            labels = labels_of.get(node_name)
            if labels is not None:
                _record(counts, labels, term.topology_key)
    return counts


def _incoming_counts(
    affinity: Sequence[AffinityTerm],
    anti_affinity: Sequence[AffinityTerm],
    snapshot: Snapshot,
) -> tuple[dict[Pair, int], dict[Pair, int]]:
    """getIncomingAffinityAntiAffinityCounts over every placed pod (only with terms)."""
    affinity_counts: dict[Pair, int] = {}
    anti_counts: dict[Pair, int] = {}
    if not affinity and not anti_affinity:
        return affinity_counts, anti_counts
    # Placed pods of one namespace and labels match alike: each such group is matched once.
    groups: dict[Hashable, tuple[Pod, list[Mapping[str, str]]]] = {}
    for node in snapshot.nodes:
        labels = node.metadata.labels
        for placed in snapshot.pods_on(node.metadata.name or ""):
            key = _identity(placed)
            group = groups.get(key)
            if group is None:
                groups[key] = (placed, [labels])
            else:
                group[1].append(labels)
    for placed, nodes in groups.values():
        if _matches_all(affinity, placed):
            for node_labels in nodes:
                for term in affinity:
                    _record(affinity_counts, node_labels, term.topology_key)
        for term in anti_affinity:
            if term.matches(placed, None):
                for node_labels in nodes:
                    _record(anti_counts, node_labels, term.topology_key)
    return affinity_counts, anti_counts


def pre_filter(
    pod: Pod,
    snapshot: Snapshot,
    *,
    hostname_fast_path: bool = False,
    skip_deferred_resize: bool = False,
    keep_namespace_selector: bool = False,
) -> FilterState | Unresolvable | None:
    """The counts Filter reads; None (Skip) when neither the pod nor any placed pod has a
    required term that could refuse a node; Unresolvable when a selector of the pod's terms is
    invalid ("parsing pod: ..."). Flags, 1.37's defaults: ``hostname_fast_path``
    (InterPodAffinityHostnameFastPath, alpha), ``skip_deferred_resize``
    (InPlacePodVerticalScalingSchedulerPreemption, alpha), ``keep_namespace_selector`` (1.36)."""
    if skip_deferred_resize and _resize_deferred(pod):
        return None
    if not snapshot.with_required_anti_affinity and not has_affinity(pod):
        return None  # nothing to parse, count or check: no O(pods) work
    try:
        terms = pod_terms(pod)
    except AffinityParseError as error:
        return Unresolvable(f"parsing pod: {error}")
    affinity = tuple(
        _unroll(t, snapshot.namespaces, keep_namespace_selector) for t in terms.required_affinity
    )
    anti = tuple(
        _unroll(t, snapshot.namespaces, keep_namespace_selector)
        for t in terms.required_anti_affinity
    )
    namespace_labels = snapshot.namespaces.get(pod.metadata.namespace or "")

    host_affinity: tuple[AffinityTerm, ...] = ()
    host_anti: tuple[AffinityTerm, ...] = ()
    wide_affinity, wide_anti = affinity, anti
    if hostname_fast_path:
        if all(t.topology_key == HOSTNAME for t in affinity):
            host_affinity, wide_affinity = affinity, ()
        host_anti = tuple(t for t in anti if t.topology_key == HOSTNAME)
        wide_anti = tuple(t for t in anti if t.topology_key != HOSTNAME)

    existing: dict[Pair, int] = {}
    must_check_host_scoped = False
    if snapshot.with_required_anti_affinity:
        labels_of = {n.metadata.name or "": n.metadata.labels for n in snapshot.nodes}
        existing, must_check_host_scoped = _existing_anti_affinity(
            pod, namespace_labels, snapshot, labels_of, hostname_fast_path
        )
    affinity_counts, anti_counts = _incoming_counts(wide_affinity, wide_anti, snapshot)
    matching_host_scoped = 0
    if host_affinity:
        matching_host_scoped = sum(
            1
            for node_name in snapshot.node_names()
            for placed in snapshot.pods_on(node_name)
            if _matches_all(host_affinity, placed)
        )

    if not existing and not affinity and not anti and not must_check_host_scoped:
        return None
    return FilterState(
        pod=pod,
        affinity_terms=affinity,
        anti_affinity_terms=anti,
        namespace_labels=namespace_labels,
        existing_anti_affinity_counts=existing,
        affinity_counts=affinity_counts,
        anti_affinity_counts=anti_counts,
        cluster_wide_affinity_terms=wide_affinity,
        cluster_wide_anti_affinity_terms=wide_anti,
        host_scoped_affinity_terms=host_affinity,
        host_scoped_anti_affinity_terms=host_anti,
        matching_host_scoped_affinity_pods=matching_host_scoped,
        hostname_fast_path=hostname_fast_path,
        pods_on=snapshot.pods_on,
    )


def _self_affinity(state: FilterState, labels: Mapping[str, str]) -> bool:
    """The pod may be the first of a group with affinity to itself: no placed pod matches
    the terms, the pod matches them and the node has every topology key."""
    if state.hostname_fast_path and state.matching_host_scoped_affinity_pods > 0:
        return False
    return _matches_all(state.affinity_terms, state.pod) and all(
        t.topology_key in labels for t in state.affinity_terms
    )


def _satisfies_affinity(state: FilterState, node: Node) -> bool:
    labels = node.metadata.labels
    if state.host_scoped_affinity_terms:
        # nodePodsSatisfyAffinity: hostname-only terms, on the node's own pods.
        if HOSTNAME not in labels:
            return False
        pods = state.pods_on(node.metadata.name or "")
        if any(_matches_all(state.host_scoped_affinity_terms, p) for p in pods):
            return True
        return _self_affinity(state, labels)
    # nodeTopologyMatchesAffinity
    pods_exist = True
    for term in state.cluster_wide_affinity_terms:
        value = labels.get(term.topology_key)
        if value is None:
            return False  # every topology key must be on the node, self-affinity too
        if state.affinity_counts.get((term.topology_key, value), 0) <= 0:
            pods_exist = False
    if pods_exist:
        return True
    return not state.affinity_counts and _self_affinity(state, labels)


def _conflicts_with_anti_affinity(state: FilterState, node: Node) -> bool:
    labels = node.metadata.labels
    if state.anti_affinity_counts:
        for term in state.cluster_wide_anti_affinity_terms:
            value = labels.get(term.topology_key)
            pair = (term.topology_key, value) if value is not None else None
            if pair is not None and state.anti_affinity_counts.get(pair, 0) > 0:
                return True
    if state.host_scoped_anti_affinity_terms and HOSTNAME in labels:
        for placed in state.pods_on(node.metadata.name or ""):
            if any(t.matches(placed, None) for t in state.host_scoped_anti_affinity_terms):
                return True
    return False


def _satisfies_existing_anti_affinity(state: FilterState, node: Node) -> bool:
    labels = node.metadata.labels
    counts = state.existing_anti_affinity_counts
    if counts and any(counts.get(pair, 0) > 0 for pair in labels.items()):
        return False
    if state.hostname_fast_path and HOSTNAME in labels:
        for placed in state.pods_on(node.metadata.name or ""):
            for term in _placed_required(placed, anti=True):
                if term.topology_key == HOSTNAME and term.matches(
                    state.pod, state.namespace_labels
                ):
                    return False
    return True


def filter(state: FilterState, pod: Pod, node: Node) -> str | None:
    """The first refusal, in upstream's order: the pod's affinity, its anti-affinity, the
    placed pods' anti-affinity. ``pod`` is the one ``state`` was made for."""
    del pod
    if not _satisfies_affinity(state, node):
        return REASON_AFFINITY
    if _conflicts_with_anti_affinity(state, node):
        return REASON_ANTI_AFFINITY
    if not _satisfies_existing_anti_affinity(state, node):
        return REASON_EXISTING_ANTI_AFFINITY
    return None


def resolvable(reason: str) -> bool:
    """Anti-affinity refusals are Unschedulable (evicting the pods in the way helps); an
    affinity refusal is UnschedulableAndUnresolvable."""
    return reason in (REASON_ANTI_AFFINITY, REASON_EXISTING_ANTI_AFFINITY)


# --- score ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ScoreState:
    """PreScore's sums: topology key -> value -> weight (never empty)."""

    topology_score: Mapping[str, Mapping[str, int]]


def _add(
    scores: dict[str, dict[str, int]],
    term: AffinityTerm,
    weight: int,
    pod: Pod,
    namespace_labels: Mapping[str, str] | None,
    labels: Mapping[str, str],
) -> None:
    """scoreMap.processTerm: the weight on the placed pod's node's pair when the pod matches."""
    if term.matches(pod, namespace_labels):
        value = labels.get(term.topology_key)
        if value is not None:
            values = scores.setdefault(term.topology_key, {})
            values[value] = values.get(value, 0) + weight


def pre_score(
    pod: Pod,
    snapshot: Snapshot,
    nodes_to_score: Sequence[Node] = (),
    *,
    hard_pod_affinity_weight: int = DEFAULT_HARD_POD_AFFINITY_WEIGHT,
    ignore_preferred_terms_of_existing_pods: bool = False,
    keep_namespace_selector: bool = False,
) -> ScoreState | None:
    """The weights per topology pair; None (Skip) when nothing adds any. Upstream reads every
    node of the snapshot, not the ones to score (``nodes_to_score`` is unused, as there). The
    placed pods read are all of them when the pod has preferred terms, else only those with
    terms. Raises AffinityParseError ("failed to parse pod: ...", upstream's Error status),
    which PreFilter has already turned into a rejection."""
    del nodes_to_score
    incoming_preferred = bool(_preferred(pod, anti=False) or _preferred(pod, anti=True))
    if ignore_preferred_terms_of_existing_pods and not incoming_preferred:
        return None
    try:
        terms = pod_terms(pod)
    except AffinityParseError as error:
        raise AffinityParseError(f"failed to parse pod: {error}") from None
    if not incoming_preferred and not snapshot.with_scoring_affinity:
        return None
    keep = keep_namespace_selector
    preferred = [
        WeightedAffinityTerm(_unroll(w.term, snapshot.namespaces, keep), w.weight)
        for w in terms.preferred_affinity
    ]
    preferred_anti = [
        WeightedAffinityTerm(_unroll(w.term, snapshot.namespaces, keep), w.weight)
        for w in terms.preferred_anti_affinity
    ]
    namespace_labels = snapshot.namespaces.get(pod.metadata.namespace or "")

    placed: Iterable[Placed] = (
        snapshot.placed() if incoming_preferred else snapshot.with_scoring_affinity
    )
    labels_of = {n.metadata.name or "": n.metadata.labels for n in snapshot.nodes}
    scores: dict[str, dict[str, int]] = {}
    for node_name, other in placed:
        labels = labels_of.get(node_name)
        if not labels:
            continue
        for w in preferred:
            _add(scores, w.term, w.weight, other, None, labels)
        for w in preferred_anti:
            _add(scores, w.term, -w.weight, other, None, labels)
        if hard_pod_affinity_weight > 0:
            for term in _placed_required(other, anti=False):
                _add(scores, term, hard_pod_affinity_weight, pod, namespace_labels, labels)
        for w in _placed_preferred(other, anti=False):
            _add(scores, w.term, w.weight, pod, namespace_labels, labels)
        for w in _placed_preferred(other, anti=True):
            _add(scores, w.term, -w.weight, pod, namespace_labels, labels)
    return ScoreState(scores) if scores else None


def score(state: ScoreState, node: Node) -> int:
    """The sums of the node's pairs (positive: affinity; negative: anti-affinity)."""
    labels = node.metadata.labels
    return sum(
        values.get(labels[key], 0) for key, values in state.topology_score.items() if key in labels
    )


def normalize(scores: Mapping[str, int]) -> dict[str, int]:
    """NormalizeScore: 100 * (score - min) / (max - min), truncated; all 0 when equal."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    spread = high - low
    if spread <= 0:
        return dict.fromkeys(scores, 0)
    return {name: int(float(MAX_NODE_SCORE) * ((s - low) / spread)) for name, s in scores.items()}


# --- the API server's side of matchLabelKeys ------------------------------------------------


def apply_label_keys(pod: Pod) -> Pod:
    """A copy of the pod with what the API server does when it creates one: each term's
    matchLabelKeys add ``key In (the pod's value)`` and mismatchLabelKeys ``key NotIn (value)``
    to its labelSelector (a key the pod lacks adds nothing; a term without labelSelector is
    left alone). For pods that never went through an API server; pods read from one have it
    already (applying it twice adds the same requirements again, which matches the same)."""
    copy = pod.model_copy(deep=True)
    affinity = copy.spec.affinity
    if affinity is None:
        return copy
    labels = copy.metadata.labels
    for terms in (affinity.pod_affinity, affinity.pod_anti_affinity):
        if terms is None:
            continue
        for term in (
            *(
                w.pod_affinity_term
                for w in terms.preferred_during_scheduling_ignored_during_execution
            ),
            *terms.required_during_scheduling_ignored_during_execution,
        ):
            selector = term.label_selector
            if selector is None:
                continue
            for keys, operator in (
                (term.match_label_keys, "In"),
                (term.mismatch_label_keys, "NotIn"),
            ):
                selector.match_expressions.extend(
                    LabelSelectorRequirement(key=k, operator=operator, values=[labels[k]])
                    for k in keys
                    if k in labels
                )
    return copy
