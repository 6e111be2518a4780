"""A tree of pod groups (CompositePodGroup: alpha in 1.37, beta in 1.38, off by default), placed
in one cycle, decided without I/O. kube-scheduler's recursive algorithm, read at 1.37.2
(``schedule_one_podgroup.go``: ``podGroupSchedulingRecursiveAlgorithm``,
``compositePodGroupSchedulingPlacementAlgorithm``, ``compositePodGroupSchedulingDefaultAlgorithm``,
``completeCompositePodGroupAlgorithmResultMap``) and 1.38.0-beta.0 (``algorithm_podgroup.go``,
the same steps; ``schedule_one_podgroup.go``'s ``validatePodGroupHierarchy`` and
``buildAncestorFailureStatus``), and GangScheduling's PreEnqueue (``isCPGTreeReady``):

- the tree is tried once every CompositePodGroup has at least ``minGroupCount`` children
  ready (1 for ``basic``), a PodGroup being ready with ``minCount`` pods (its own pods, any
  state); until then its pods wait without a word;
- any pod of the tree runs the whole tree's cycle, from its root;
- a CompositePodGroup's placements are the domains of its own topology key among its parent's
  placement (one placement, its parent's, without a key); in each, its children are placed one
  after another, each kept for the next (a PodGroup's own cycle, ``group_cycle.run_group``
  with the placement as its parent; a CompositePodGroup recursively), and the placement fits
  once ``minGroupCount`` children fit; the loop stops as soon as that is out of reach;
- the placement holding most of the tree's pods (scheduled and placed now) wins, as for a
  PodGroup; 1.38 stops after ``percentageOfPlacementsToScore`` of them fit;
- a root that fits but places no pod now is unschedulable; a failed group's children that fit
  are not placed: 1.37 gives them their nearest failed ancestor's status, 1.38 says "ancestor
  composite pod group X is unschedulable".

Where upstream leaves a choice, kopf-dra is deterministic: children are tried by name (upstream
walks a Go map), domains by name, ties to the first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeAlias, TypeVar

from operators.api.core import Pod
from operators.api.groups import CompositePodGroup, PodGroup
from operators.api.keys import ObjectKey
from operators.cel.library.strings import go_quote
from operators.scheduling import group_cycle, topology
from operators.scheduling.group_cycle import Assumed, Cycle, Host
from operators.scheduling.groups import (
    UNSCHEDULABLE,
    cannot_be_satisfied,
    hierarchy_pods,
    key_of,
    not_yet_satisfied,
    policy_of,
    single_group_refusal,
)

A = TypeVar("A", bound=Assumed)

#: The entity key types upstream names groups by in 1.38's messages.
POD_GROUP = "podgroup"
COMPOSITE = "compositepodgroup"
#: 1.38's ``WorkloadMaxTreeDepth``: a CompositePodGroup may not sit at this depth.
MAX_DEPTH = 4


@dataclasses.dataclass(frozen=True)
class Leaf:
    """A PodGroup of the tree: its queued pods in the cycle's order, its pods bound or
    binding with their nodes, and how many of its pods exist and are not finished."""

    group: PodGroup
    order: tuple[Pod, ...] = ()
    placed_on: Mapping[ObjectKey, str] = dataclasses.field(default_factory=dict)
    members: int = 0

    @property
    def key(self) -> ObjectKey:
        return ObjectKey(self.group.metadata.namespace or "", self.group.metadata.name or "")

    @property
    def ref(self) -> str:
        return f"{POD_GROUP}/{self.key.namespace}/{self.key.name}"


@dataclasses.dataclass(frozen=True)
class Composite:
    """A CompositePodGroup and its children (by name)."""

    group: CompositePodGroup
    children: tuple[Leaf | Composite, ...] = ()

    @property
    def key(self) -> ObjectKey:
        return ObjectKey(self.group.metadata.namespace or "", self.group.metadata.name or "")

    @property
    def ref(self) -> str:
        return f"{COMPOSITE}/{self.key.namespace}/{self.key.name}"


Tree: TypeAlias = Leaf | Composite


def leaves(tree: Tree) -> Iterator[Leaf]:
    if isinstance(tree, Leaf):
        yield tree
        return
    for child in tree.children:
        yield from leaves(child)


def walk(tree: Tree, depth: int = 0) -> Iterator[tuple[Tree, int]]:
    """Every group of the tree with its depth (the root's 0), depth first, the root first."""
    yield tree, depth
    if isinstance(tree, Composite):
        for child in tree.children:
            yield from walk(child, depth + 1)


def nodes_of(tree: Tree) -> Iterator[Tree]:
    """Every group of the tree, depth first, the tree's root first."""
    return (node for node, _ in walk(tree))


def scheduled(tree: Tree) -> dict[ObjectKey, str]:
    """The tree's pods bound or binding, with their nodes."""
    return {k: n for leaf in leaves(tree) for k, n in leaf.placed_on.items()}


def build(
    root: CompositePodGroup,
    composites: Sequence[CompositePodGroup],
    leaf_of: Mapping[ObjectKey, Leaf],
) -> Composite:
    """The tree under ``root`` from the namespace's CompositePodGroups and the PodGroups
    (``leaf_of``) that name a parent; children by name. A group met twice (a cycle in the
    parents) is left out, as upstream's ``visited`` set does."""
    visited: set[str] = set()

    def grow(group: CompositePodGroup) -> Composite:
        name = group.metadata.name or ""
        visited.add(name)
        kids: list[Tree] = []
        for c in sorted(composites, key=lambda c: c.metadata.name or ""):
            if c.spec.parent_composite_pod_group_name == name and c.metadata.name not in visited:
                kids.append(grow(c))
        for leaf in leaf_of.values():
            if leaf.group.spec.parent_composite_pod_group_name == name:
                kids.append(leaf)
        kids.sort(key=lambda t: (t.key.name, isinstance(t, Leaf)))
        return Composite(group, tuple(kids))

    return grow(root)


def root_name(
    start: str, composites: Mapping[str, CompositePodGroup]
) -> tuple[str | None, list[str]]:
    """The root CompositePodGroup above ``start`` (a CompositePodGroup's name) and the chain
    walked; None when a parent is missing or the parents loop."""
    chain = [start]
    current = start
    while True:
        group = composites.get(current)
        if group is None:
            return None, chain
        parent = group.spec.parent_composite_pod_group_name
        if not parent:
            return current, chain
        if parent in chain:
            return None, chain
        chain.append(parent)
        current = parent


def ready(tree: Tree) -> bool:
    """GangScheduling's ``isCPGTreeReady`` over the pods that exist (PreEnqueue)."""
    if isinstance(tree, Leaf):
        return tree.members >= tree.group.min_count
    return sum(1 for c in tree.children if ready(c)) >= tree.group.min_count


def waits(tree: Composite) -> str | None:
    """Why the tree's pods are not tried yet (None: they are); said in the log only."""
    if ready(tree):
        return None
    return f"waiting for composite pod group {go_quote(tree.key.name)} tree to meet quorum"


# --- validation (1.38's validatePodGroupHierarchy; 1.37's validatePodGroup) -------------------


def _priority(tree: Tree) -> int:
    return tree.group.spec.priority or 0


def refused(
    tree: Composite, bound: Mapping[ObjectKey, Sequence[Pod]], *, hierarchy: bool, gated: bool
) -> str | None:
    """What upstream's validation says of the tree (None: nothing). ``hierarchy``: 1.38's
    rules, group by group; otherwise 1.37's, the pods against the root's priority and
    preemption policy (``gated``: PodGroupPreemptionPolicy on)."""
    queued = [p for leaf in leaves(tree) for p in leaf.order]
    if not queued:
        return None
    if hierarchy:
        return _hierarchy(tree, bound, queued[0])
    placed = [p for leaf in leaves(tree) for p in bound.get(leaf.key, ())]
    return single_group_refusal(tree.group, queued, placed, "group" if gated else "pods")


def _disruption(tree: Tree, mode: str) -> bool:
    modes = tree.group.spec.disruption_mode or {}
    return mode in modes and modes[mode] is not None


def _workload(tree: Tree) -> str:
    ref = tree.group.spec.workload_ref
    return (ref.workload_name or "") if ref is not None else ""


def _hierarchy(root: Composite, bound: Mapping[ObjectKey, Sequence[Pod]], first: Pod) -> str | None:
    priority = _priority(root)
    expected = root.group.spec.preemption_policy or policy_of(first)
    root_ref = go_quote(root.ref)

    def group(tree: Tree, parent: Composite | None, depth: int) -> str | None:
        if isinstance(tree, Composite) and depth == MAX_DEPTH:
            return (
                f"hierarchy depth exceeds maximum allowed depth {MAX_DEPTH} at {go_quote(tree.ref)}"
            )
        if parent is not None:
            ref = go_quote(tree.ref)
            if _workload(tree) != _workload(root):
                return (
                    "pod group workload does not match root workload, got: "
                    f"{go_quote(_workload(tree))} ({ref}) and {go_quote(_workload(root))} "
                    f"({root_ref})"
                )
            if _priority(tree) != priority:
                return (
                    "all pod groups in a hierarchy should have the same priority as the root "
                    f"pod group's priority, got {_priority(tree)} ({ref}) and {priority} "
                    f"({root_ref})"
                )
            own = tree.group.spec.preemption_policy
            if own and own != expected:
                return (
                    "all pod groups in a hierarchy should have the same preemption policy, "
                    f"got {own} ({ref}) and {expected}"
                )
            if parent.group.is_gang and tree.group.spec.scheduling_policy.basic is not None:
                return f"gang parent {go_quote(parent.ref)} cannot have basic child {ref}"
            if _disruption(parent, "all") and _disruption(tree, "single"):
                return (
                    f"parent {go_quote(parent.ref)} with All disruption mode cannot have "
                    f"child {ref} with Single disruption mode"
                )
        if isinstance(tree, Composite):
            for child in tree.children:
                said = group(child, tree, depth + 1)
                if said is not None:
                    return said
            return None
        return hierarchy_pods((*tree.order, *bound.get(tree.key, ())), first, root.group, root.ref)

    return group(root, None, 1)


# --- the cycle ---------------------------------------------------------------------------------


@dataclasses.dataclass
class Outcome(Generic[A]):
    """One group's end in the cycle. A PodGroup's: its ``cycle`` (``group_cycle.Cycle``); a
    CompositePodGroup's: ``message`` (None: it fits), the placement chosen, those tried.
    ``inherited``: the failed ancestor whose status it was given (it fit on its own, or
    was not evaluated)."""

    message: str | None = None
    cycle: Cycle[A] | None = None
    domain: str | None = None
    domains: tuple[tuple[str, str | None], ...] = ()
    inherited: str | None = None
    evaluated: bool = True
    #: The ancestor whose failure it was given (``inherited``).
    ancestor: str | None = None

    @property
    def fits(self) -> bool:
        if self.inherited is not None:
            return False
        if self.cycle is not None:
            return self.cycle.succeeded or bool(
                self.cycle.verdict and self.cycle.verdict.minimum_met
            )
        return self.message is None


@dataclasses.dataclass
class TreeCycle(Generic[A]):
    """How the tree's cycle ended: each group's outcome (by ``ref``), the pod that is not
    ready (the tree waits; nothing stays assumed). On success the leaves that fit hold their
    assumptions (``placed``)."""

    root: Composite
    outcomes: dict[str, Outcome[A]]
    waiting: Any = None

    @property
    def succeeded(self) -> bool:
        return self.waiting is None and self.outcomes[self.root.ref].message is None

    def placed(self) -> list[tuple[Leaf, Cycle[A]]]:
        """The leaves whose pods are placed (success only), with their cycles."""
        out = []
        for leaf in leaves(self.root):
            got = self.outcomes.get(leaf.ref)
            if (
                got is not None
                and got.inherited is None
                and got.cycle is not None
                and got.cycle.succeeded
            ):
                out.append((leaf, got.cycle))
        return out

    def undo(self) -> None:
        _undo([cycle for _, cycle in self.placed()])


@dataclasses.dataclass(frozen=True)
class Settings:
    """The cycle's knobs, as ``group_cycle.run_group`` takes them."""

    rules: topology.TopologyRules
    count_devices: bool
    gang_search: bool
    search_timeout: float
    nominated: Collection[str] = ()


class _Waiting(Exception):
    """A pod of the tree is not ready: the whole tree waits."""

    def __init__(self, cycle: Cycle[Any]) -> None:
        self.cycle = cycle


@dataclasses.dataclass
class _Try(Generic[A]):
    """A CompositePodGroup's pass over its children in one placement: the outcomes of its
    subtree, the leaves' cycles it keeps assumed (in order), the pods they hold."""

    message: str | None
    outcomes: dict[str, Outcome[A]]
    kept: list[Cycle[A]]
    pods: int

    def undo(self) -> None:
        _undo(self.kept)
        self.kept.clear()


def _undo(cycles: Sequence[Cycle[Any]]) -> None:
    """What ``cycles`` keep assumed undone, the last first."""
    for cycle in reversed(cycles):
        cycle.placement.undo()


async def run_tree(host: Host[A], tree: Composite, settings: Settings) -> TreeCycle[A]:
    """The tree's cycle from its root (``runRootSchedulingAlgorithm``). Raises
    ``topology.DomainError`` when a group's scheduled pods fix no single domain."""
    rules = settings.rules
    try:
        found = await _composite(host, tree, None, settings)
    except _Waiting as w:
        return TreeCycle(tree, {}, waiting=w.cycle.placement.waiting)
    outcomes = found.outcomes
    root = outcomes[tree.ref]
    if root.message is None and not any(c.placement.assumed for c in found.kept):
        # Upstream's framework needs a pod placed for a success.
        root.message = UNSCHEDULABLE
    if root.message is not None:
        found.undo()
    _inherit(tree, outcomes, None, rules)
    return TreeCycle(tree, outcomes)


def _inherit(
    tree: Tree,
    outcomes: dict[str, Outcome[Any]],
    failed: tuple[Tree, str] | None,
    rules: topology.TopologyRules,
) -> None:
    """``completeCompositePodGroupAlgorithmResultMap``: a group that fit, or was not
    evaluated, under a failed ancestor takes that ancestor's failure; a group that failed on
    its own passes its own down (1.38; 1.37 passes the nearest failed ancestor's status,
    which is the same)."""
    got = outcomes.get(tree.ref)
    if got is None:
        got = Outcome(evaluated=False)
        outcomes[tree.ref] = got
    if failed is not None and (not got.evaluated or got.fits):
        got.inherited = _ancestor_status((failed[0].key.name, failed[1]), rules)
        got.ancestor = failed[0].ref
        if got.cycle is not None and got.cycle.succeeded:
            got.cycle.placement.undo()
    elif got.evaluated and not got.fits:
        failed = (tree, _message(got))
    if isinstance(tree, Composite):
        for child in tree.children:
            _inherit(child, outcomes, failed, rules)


def _message(outcome: Outcome[Any]) -> str:
    if outcome.inherited is not None:
        return outcome.inherited
    if outcome.cycle is not None:
        verdict = outcome.cycle.verdict
        return (verdict.message if verdict is not None else None) or UNSCHEDULABLE
    return outcome.message or UNSCHEDULABLE


def _ancestor_status(failed: tuple[str, str], rules: topology.TopologyRules) -> str:
    """What a group under a failed ancestor is given (``buildAncestorFailureStatus`` at 1.38;
    1.37 hands down the ancestor's status itself)."""
    name, message = failed
    if rules.fit_errors:
        return f"ancestor composite pod group {go_quote(name)} is unschedulable"
    return message


async def _child(
    host: Host[A], tree: Tree, placement: topology.Domain, settings: Settings
) -> _Try[A]:
    """One child of a CompositePodGroup placed in the parent's ``placement``."""
    if isinstance(tree, Composite):
        return await _composite(host, tree, placement, settings)
    cycle = await group_cycle.run_group(
        host,
        tree.group,
        tree.order,
        tree.placed_on,
        rules=settings.rules,
        nominated=settings.nominated,
        count_devices=settings.count_devices,
        gang_search=settings.gang_search,
        search_timeout=settings.search_timeout,
        fit_errors=settings.rules.fit_errors,
        parent=placement,
    )
    if cycle.placement.waiting is not None:
        raise _Waiting(cycle)
    outcome: Outcome[A] = Outcome(cycle=cycle, domain=cycle.domain)
    kept = [cycle] if cycle.succeeded else []
    return _Try(None if outcome.fits else _message(outcome), {tree.ref: outcome}, kept, 0)


async def _composite(
    host: Host[A], tree: Composite, parent: topology.Domain | None, settings: Settings
) -> _Try[A]:
    """``compositePodGroupSchedulingPlacementAlgorithm``: each placement tried in turn and
    undone, the best one placed again and kept."""
    rules = settings.rules
    key = tree.group.topology_key
    nodes = host.nodes()
    if key is None:
        placements = [parent or topology.everywhere(nodes)]
    else:
        placements = topology.domains(key, topology.among(nodes, parent), scheduled(tree), rules)
    if not placements:
        outcome: Outcome[A] = Outcome(message=topology.NO_PLACEMENTS)
        return _Try(topology.NO_PLACEMENTS, {tree.ref: outcome}, [], 0)
    to_find = topology.feasible_to_find(rules, placements)
    tries: list[tuple[topology.Domain, _Try[A]]] = []
    kept: tuple[topology.Domain, _Try[A]] | None = None
    for placement in placements:
        if kept is not None:
            kept[1].undo()
            kept = None
        attempt = await _default(host, tree, placement, settings)
        tries.append((placement, attempt))
        if attempt.message is None:
            kept = (placement, attempt)
        if sum(1 for _, t in tries if t.message is None) >= to_find:
            break
    said = tuple((d.name, t.message) for d, t in tries) if key is not None else ()
    fitting = [(d, t.pods) for d, t in tries if t.message is None]
    if not fitting:
        first = tries[0][1]
        status = group_cycle.placements_status(
            rules.release, len(placements), _first_status(first, rules)
        )
        outcomes = dict(first.outcomes)
        outcomes[tree.ref] = Outcome(message=f"{UNSCHEDULABLE}, {status}", domains=said)
        return _Try(outcomes[tree.ref].message, outcomes, [], 0)
    chosen = topology.best(fitting)
    if kept is not None and kept[0] is chosen:
        found = kept[1]
    else:
        if kept is not None:
            kept[1].undo()
        found = await _default(host, tree, chosen, settings)
    outcome = found.outcomes[tree.ref]
    outcome.domain = chosen.name if key is not None else None
    outcome.domains = said
    return found


def _first_status(first: _Try[Any], rules: topology.TopologyRules) -> str:
    """A failed placement's reason as "first placement status" quotes it (1.37: the status's
    error, "pod group is unschedulable" where the gang's minimum was not yet out of reach;
    1.38 its message)."""
    message = first.message or UNSCHEDULABLE
    reason = message.removeprefix(f"{UNSCHEDULABLE}, ")
    if rules.release >= topology.V1_38 or "cannot be satisfied" in reason:
        return reason
    return UNSCHEDULABLE


async def _default(
    host: Host[A], tree: Composite, placement: topology.Domain, settings: Settings
) -> _Try[A]:
    """``compositePodGroupSchedulingDefaultAlgorithm``: the children in order inside
    ``placement``, each that fits kept for the next, until ``minGroupCount`` is out of reach
    (GangScheduling's PlacementFeasible over children); nothing kept when it fails."""
    fit_errors = settings.rules.fit_errors
    minimum = tree.group.min_count
    remaining, fit, unfit = len(tree.children), 0, 0
    outcomes: dict[str, Outcome[A]] = {}
    kept: list[Cycle[A]] = []
    said = cannot_be_satisfied(minimum, 0, remaining, 0, fit_errors=fit_errors)
    try:
        for child in tree.children:
            if said is not None:
                break
            got = await _child(host, child, placement, settings)
            outcomes.update(got.outcomes)
            kept.extend(got.kept)
            remaining -= 1
            if got.message is None:
                fit += 1
            else:
                unfit += 1
            said = cannot_be_satisfied(minimum, fit, remaining, unfit, fit_errors=fit_errors)
    except BaseException:
        _undo(kept)
        raise
    if said is None and fit < minimum:
        said = not_yet_satisfied(minimum, fit, remaining, unfit, fit_errors=fit_errors)
    message = None if said is None else f"{UNSCHEDULABLE}, {said}"
    if message is not None:
        _undo(kept)
        kept = []
    outcomes[tree.ref] = Outcome(message=message)
    # PodGroupPodsCount: the subtree's scheduled pods and those its leaves place now.
    pods = len(scheduled(tree)) + sum(len(c.placement.assumed) for c in kept)
    return _Try(message, outcomes, kept, pods)


def told(
    cycle: TreeCycle[Any], rules: topology.TopologyRules, preemption: str | None = None
) -> dict[ObjectKey, str]:
    """What each queued pod of a leaf that was not placed is told. ``preemption``: what the
    root's PodGroupPostFilter said, which upstream appends to every group's status after the
    pods of an inheriting group were handed theirs (they do not see it; a pod of a group
    that failed itself and fits does)."""
    out: dict[ObjectKey, str] = {}
    for leaf in leaves(cycle.root):
        got = cycle.outcomes.get(leaf.ref)
        keys = [key_of(p) for p in leaf.order]
        if got is None or got.cycle is None or got.inherited is not None:
            message = (got.inherited if got is not None else None) or UNSCHEDULABLE
            for key in keys:
                out[key] = _pod_status(leaf, message, rules)
            continue
        if got.cycle.succeeded:
            continue  # placed: told nothing here
        _, each = got.cycle.told(keys, preemption)
        out.update(each)
    return out


def _pod_status(leaf: Leaf, message: str, rules: topology.TopologyRules) -> str:
    """A pod of a group given its ancestor's failure: 1.38 names its own group as the parent
    that is unschedulable; 1.37 tells it the status it was handed, whose message is the
    group's without the pods' prefix (a pod of a group that failed itself is told it twice)."""
    if rules.fit_errors:
        return f"parent pod group {go_quote(leaf.key.name)} is unschedulable"
    return group_cycle.condition(message)


def condition_of(
    cycle: TreeCycle[Any], ref: str, rules: topology.TopologyRules, preemption: str | None = None
) -> str:
    """A group's condition message: its status's, without the pods' prefix, with what the
    root's preemption said appended (1.37 appends it once per group holding the status, and
    a group handed its ancestor's status holds the ancestor's own: it shows one for the
    ancestor and one for each group that inherited it; 1.38 gives each its own)."""
    outcome = cycle.outcomes[ref]
    message = group_cycle.condition(_message(outcome))
    if preemption is None:
        return message
    holder = outcome.ancestor or ref
    shared = 1
    if not rules.fit_errors:
        shared += sum(1 for o in cycle.outcomes.values() if o.ancestor == holder)
    return message + f", {preemption}" * shared
