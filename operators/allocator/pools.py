"""Resource pools: which slices a node sees, which generation wins, and whether a pool is usable.

Pool problems are values (``Pool.incomplete``, ``Pool.invalid_reason``), computed here by one
function that the allocator and the pool validator share (CONVENTIONS #9). The rules follow
upstream's GatherPools so both see the same pools for the same slices:

* a slice is relevant to a node by its ``nodeName``/``allNodes``/``nodeSelector``, or by
  ``perDeviceNodeSelection`` with one device reachable; counter-only slices always are in 1.36;
  in 1.37 they are by their node selection too, and a pool whose devices need them finds them
  among the slices for other nodes;
* 1.37 with DRADeviceCompatibilityGroups off (its default) ignores every slice with a device
  that names ``compatibilityGroups``: its pool counts one slice short, so it is incomplete;
* per pool the highest generation among relevant slices wins; the pool is complete when that
  generation has ``resourceSliceCount`` slices (counting slices for other nodes); a newer
  generation elsewhere makes the node's slices obsolete and the pool disappears;
* invalid: duplicate device names, duplicate counter set names, consumption of a counter set
  or counter that does not exist (``pool_problems`` lists them all, with codes; the allocator
  takes the first).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from operators.allocator.errors import InvalidNodeSelectorError
from operators.allocator.features import Features
from operators.allocator.nodes import node_matches
from operators.api.core import Node
from operators.api.ids import PoolID
from operators.api.resource import CounterSet, ResourceSlice


@dataclass(frozen=True, slots=True)
class Pool:
    """One (driver, pool) as seen from one node (or from everywhere, for the validator)."""

    id: PoolID
    incomplete: bool = False
    #: Why the pool is invalid, as far as checked when it was built (``invalid_reason`` has
    #: the whole answer).
    problem: str | None = None
    #: Slices with devices that target the node, sorted by name.
    slices: tuple[ResourceSlice, ...] = ()
    #: Slices of the same generation that do not target the node (their devices still
    #: consume the pool's shared counters).
    other_slices: tuple[ResourceSlice, ...] = ()
    counter_sets: Mapping[str, CounterSet] = field(default_factory=dict)
    #: Whether ``other_slices``' counter consumption is still to be checked: only for a pool
    #: with no devices for the node, whose validity matters only when a search fails or
    #: wants all devices. A cold call that succeeds then stays linear in the slices instead
    #: of checking every device of every node's pool (each node sees all counter sets).
    unchecked: bool = False

    @property
    def invalid_reason(self) -> str | None:
        if self.unchecked:  # checked once, on first use; the answer is that of an eager check
            object.__setattr__(self, "unchecked", False)
            reason = _check_consumption(self.counter_sets, self.other_slices)
            if reason is not None:
                object.__setattr__(self, "problem", reason)
                object.__setattr__(self, "other_slices", ())
                object.__setattr__(self, "counter_sets", {})
        return self.problem

    @property
    def invalid(self) -> bool:
        return self.invalid_reason is not None

    @property
    def usable(self) -> bool:
        return not self.incomplete and self.invalid_reason is None

    @property
    def has_binding_conditions(self) -> bool:
        """Pools with binding conditions go last, so node-local devices are preferred."""
        return any(d.binding_conditions for s in self.slices for d in s.spec.devices)


def slice_name(s: ResourceSlice) -> str:
    return s.metadata.name or ""


def pool_id_of(s: ResourceSlice) -> PoolID:
    return s.pool_id


def generation_of(s: ResourceSlice) -> int:
    return s.spec.pool.generation or 0


# Codes of the problems the allocator acts on; the pool validator reports them under these
# names and adds checks of its own (operators/allocator/pool_checks.py).
DUPLICATE_DEVICE_NAME = "DuplicateDeviceName"
DUPLICATE_COUNTER_SET = "DuplicateCounterSet"
COUNTER_SET_NOT_FOUND = "CounterSetNotFound"
COUNTER_NOT_FOUND = "CounterNotFound"


@dataclass(frozen=True, slots=True)
class PoolProblem:
    """One thing wrong with a pool, as data: a CamelCase code, why, and where (names or "")."""

    code: str
    message: str
    slice: str = ""
    device: str = ""


def pool_problems(
    slices: Sequence[ResourceSlice], features: Features, *, complete: bool = True
) -> tuple[list[PoolProblem], dict[str, CounterSet]]:
    """Every problem the allocator would reject the pool for, in the order it finds them,
    and the pool's counter sets by name (the first of duplicates).

    The allocator stops at the first problem (``_validate``); the pool validator reports all.
    With ``complete=False`` (slices of a pool still being published) a reference to a counter
    set that is not there yet is not a problem: the missing slices may hold it.
    """
    if features.partitionable_devices:
        device_slices = [s for s in slices if not s.spec.shared_counters]
        counter_slices = [s for s in slices if s.spec.shared_counters]
    else:
        device_slices, counter_slices = list(slices), []
    problems: list[PoolProblem] = []
    names: set[str] = set()
    for s in device_slices:
        for d in s.spec.devices:
            name = d.name or ""
            if name in names:
                problems.append(
                    PoolProblem(
                        DUPLICATE_DEVICE_NAME, f"duplicate device name {name}", slice_name(s), name
                    )
                )
            names.add(name)
    if not features.partitionable_devices:
        return problems, {}
    counter_sets: dict[str, CounterSet] = {}
    for s in counter_slices:
        for cs in s.spec.shared_counters:
            cs_name = cs.name or ""
            if cs_name in counter_sets:
                problems.append(
                    PoolProblem(
                        DUPLICATE_COUNTER_SET,
                        f"duplicate counter set name {cs_name}",
                        slice_name(s),
                    )
                )
                continue
            counter_sets[cs_name] = cs
    problems.extend(consumption_problems(counter_sets, slices, complete=complete))
    return problems, counter_sets


def consumption_problems(
    counter_sets: Mapping[str, CounterSet],
    slices: Iterable[ResourceSlice],
    *,
    complete: bool = True,
) -> list[PoolProblem]:
    """``consumesCounters`` entries naming a counter set or counter that does not exist."""
    slices = list(slices)
    if _consumption_valid(counter_sets, slices):
        return []
    problems: list[PoolProblem] = []
    for s in slices:
        for d in s.spec.devices:
            for use in d.consumes_counters:
                cs = counter_sets.get(use.counter_set or "")
                if cs is None:
                    if complete:
                        problems.append(
                            PoolProblem(
                                COUNTER_SET_NOT_FOUND,
                                f"counter set {use.counter_set} not found",
                                slice_name(s),
                                d.name or "",
                            )
                        )
                    continue
                for name in use.counters:
                    if name not in cs.counters:
                        problems.append(
                            PoolProblem(
                                COUNTER_NOT_FOUND,
                                f"counter {name} not found in counter set {cs.name}",
                                slice_name(s),
                                d.name or "",
                            )
                        )
    return problems


def _consumption_valid(
    counter_sets: Mapping[str, CounterSet], slices: Sequence[ResourceSlice]
) -> bool:
    """Whether every ``consumesCounters`` entry names an existing counter set and counters.

    The common answer, found with set operations: a cold allocator call checks every device
    of every pool with shared counters (each node sees all of them), so this is its hot loop.
    """
    known = {name: cs.counters.keys() for name, cs in counter_sets.items()}
    for s in slices:
        for d in s.spec.devices:
            for use in d.consumes_counters:
                have = known.get(use.counter_set or "")
                if have is None or not use.counters.keys() <= have:
                    return False
    return True


def _validate(
    slices: Sequence[ResourceSlice], features: Features
) -> tuple[str | None, dict[str, CounterSet]]:
    """(invalid reason or None, counter sets by name) for the slices of one pool generation."""
    problems, counter_sets = pool_problems(slices, features)
    if problems:
        return problems[0].message, {}
    return None, counter_sets


def _check_consumption(
    counter_sets: Mapping[str, CounterSet], slices: Iterable[ResourceSlice]
) -> str | None:
    problems = consumption_problems(counter_sets, slices)
    return problems[0].message if problems else None


def build_pool(
    pool_id: PoolID,
    slices: Sequence[ResourceSlice],
    features: Features,
    all_slices_of_generation: Sequence[ResourceSlice] | None = None,
) -> Pool:
    """Validate a pool made of ``slices`` (those relevant to the node, or all of them)."""
    ordered = sorted(slices, key=slice_name)
    others: tuple[ResourceSlice, ...] = ()
    if all_slices_of_generation is not None and len(all_slices_of_generation) != len(ordered):
        targeting = {slice_name(s) for s in ordered}
        others = tuple(s for s in all_slices_of_generation if slice_name(s) not in targeting)
    validated: Sequence[ResourceSlice] = ordered
    if features.partitionable_devices and not counters_everywhere(features):
        # 1.37: the counter sets may be in slices for other nodes, after the node's own.
        validated = [*ordered, *(s for s in others if s.spec.shared_counters)]
    reason, counter_sets = _validate(validated, features)
    if reason is not None:
        return Pool(pool_id, problem=reason)
    if features.partitionable_devices:
        device_slices = tuple(s for s in ordered if not s.spec.shared_counters)
    else:
        device_slices = tuple(ordered)
    if not features.partitionable_devices:
        return Pool(pool_id, slices=device_slices)
    if others:
        if not device_slices:
            return Pool(pool_id, other_slices=others, counter_sets=counter_sets, unchecked=True)
        reason = _check_consumption(counter_sets, others)
        if reason is not None:
            return Pool(pool_id, problem=reason)
    return Pool(pool_id, slices=device_slices, other_slices=others, counter_sets=counter_sets)


def uses_compatibility_groups(s: ResourceSlice) -> bool:
    """Whether a device of the slice names compatibility groups for a counter set (1.37)."""
    return any(use.compatibility_groups for d in s.spec.devices for use in d.consumes_counters)


def ignored(s: ResourceSlice, features: Features) -> bool:
    """Whether the allocator of ``features``' release leaves the slice out altogether: 1.37
    cannot check compatibility groups with their gate off (1.36 does not know the field)."""
    return (
        features.since_1_37 and not features.compatibility_groups and uses_compatibility_groups(s)
    )


def counters_everywhere(features: Features) -> bool:
    """Whether slices with shared counters are relevant to every node (1.36) rather than by
    their node selection (1.37)."""
    return not features.since_1_37


def slice_relevant(s: ResourceSlice, node: Node | None, features: Features) -> bool:
    """Whether a slice can contribute devices or counters to ``node``."""
    spec = s.spec
    if not features.partitionable_devices and (
        spec.per_device_node_selection is not None or spec.shared_counters
    ):
        return False
    if ignored(s, features):
        return False
    try:
        if spec.shared_counters and counters_everywhere(features):
            return True
        if spec.node_name or spec.all_nodes or spec.node_selector is not None:
            return node_matches(node, spec.node_name, spec.all_nodes, spec.node_selector)
        if spec.per_device_node_selection:
            for d in spec.devices:
                try:
                    if node_matches(node, d.node_name, d.all_nodes, d.node_selector):
                        return True
                except InvalidNodeSelectorError as e:
                    raise InvalidNodeSelectorError(
                        f"failed to perform node selection for device {d.name} in slice "
                        f"{slice_name(s)}: {e.message}"
                    ) from None
    except InvalidNodeSelectorError as e:
        if e.message.startswith("failed to perform"):
            raise
        raise InvalidNodeSelectorError(
            f"failed to perform node selection for slice {slice_name(s)}: {e.message}"
        ) from None
    return False


def gather_pools(
    slices_for_node: Iterable[ResourceSlice],
    node: Node | None,
    features: Features,
    all_slices: Sequence[ResourceSlice],
) -> list[Pool]:
    """The pools a node sees, in allocation order (binding-condition pools last).

    ``slices_for_node`` may be a pre-filtered subset of ``all_slices`` (slices of this node
    plus those without a node name); completeness and obsolescence look at ``all_slices``.
    """
    by_pool: dict[PoolID, list[ResourceSlice]] = {}
    for s in slices_for_node:
        if not slice_relevant(s, node, features):
            continue
        pid = pool_id_of(s)
        have = by_pool.get(pid)
        if have is None or generation_of(s) > generation_of(have[0]):
            by_pool[pid] = [s]
        elif generation_of(s) == generation_of(have[0]):
            have.append(s)

    plain: list[Pool] = []
    with_conditions: list[Pool] = []
    every_pool: dict[tuple[str, str], list[ResourceSlice]] | None = None  # all_slices by pool
    for pid, pool_slices in by_pool.items():
        generation = generation_of(pool_slices[0])
        count = pool_slices[0].spec.pool.resource_slice_count or 0
        pool: Pool
        if len(pool_slices) == count:
            pool = build_pool(pid, pool_slices, features)
        else:
            if every_pool is None:  # once per call: linear in the slices, not pools x slices
                every_pool = {}
                for s in all_slices:
                    spec = s.spec
                    every_pool.setdefault((spec.driver or "", spec.pool.name or ""), []).append(s)
            obsolete, same_generation = _same_generation(
                every_pool.get((pid.driver, pid.pool), []), generation
            )
            if obsolete:
                continue
            if features.since_1_37:
                same_generation = [s for s in same_generation if not ignored(s, features)]
            if len(same_generation) != count:
                plain.append(Pool(pid, incomplete=True))
                continue
            pool = build_pool(pid, pool_slices, features, same_generation)
        (with_conditions if pool.has_binding_conditions else plain).append(pool)
    plain.sort(key=lambda p: (p.id.driver, p.id.pool))
    with_conditions.sort(key=lambda p: (p.id.driver, p.id.pool))
    return plain + with_conditions


def _same_generation(
    pool_slices: Sequence[ResourceSlice], generation: int
) -> tuple[bool, list[ResourceSlice]]:
    """(a newer generation exists, the slices of exactly this generation) of one pool."""
    same: list[ResourceSlice] = []
    for s in pool_slices:
        if generation_of(s) > generation:
            return True, []
        if generation_of(s) == generation:
            same.append(s)
    return False, same


@dataclass(frozen=True, slots=True)
class PoolGeneration:
    """The slices of one pool, split into its newest generation and older leftovers."""

    id: PoolID
    generation: int
    #: Slices of the newest generation, in input order.
    slices: tuple[ResourceSlice, ...]
    #: Slices of older generations (the allocator ignores them; drivers should delete them).
    older: tuple[ResourceSlice, ...] = ()

    @property
    def expected_slices(self) -> int:
        """``resourceSliceCount`` of the newest generation (of its first slice)."""
        return self.slices[0].spec.pool.resource_slice_count or 0

    @property
    def complete(self) -> bool:
        return len(self.slices) == self.expected_slices


def newest_generations(slices: Iterable[ResourceSlice]) -> list[PoolGeneration]:
    """Group slices by pool and split off the newest generation, pools sorted by ID."""
    by_pool: dict[PoolID, list[ResourceSlice]] = {}
    for s in slices:
        by_pool.setdefault(pool_id_of(s), []).append(s)
    result = []
    for pid in sorted(by_pool, key=lambda p: (p.driver, p.pool)):
        pool_slices = by_pool[pid]
        generation = max(generation_of(s) for s in pool_slices)
        result.append(
            PoolGeneration(
                pid,
                generation,
                tuple(s for s in pool_slices if generation_of(s) == generation),
                tuple(s for s in pool_slices if generation_of(s) != generation),
            )
        )
    return result


def validate_pools(slices: Sequence[ResourceSlice], features: Features) -> list[Pool]:
    """Every pool of the cluster, judged as a whole (for the pool validator).

    Uses the newest generation of each pool, all of its slices whatever node they target; in
    1.37 without the slices the allocator ignores (such a pool is incomplete, as it sees it).
    """
    result = []
    for group in newest_generations(slices):
        if features.since_1_37:
            kept = tuple(s for s in group.slices if not ignored(s, features))
            if len(kept) != len(group.slices):
                result.append(Pool(group.id, incomplete=True))
                continue
        if not group.complete:
            result.append(Pool(group.id, incomplete=True))
        else:
            result.append(build_pool(group.id, group.slices, features))
    return result
