"""Topology-aware placement of a pod group (TopologyAwareWorkloadScheduling), decided without
I/O: the domains a group may go to, how many of them are tried, which one wins, what the pods
are told; and kopf-dra's device count per domain, which rules a domain out before any pod is
filtered in it.

Upstream's rules, read in kube-scheduler 1.37.2 and 1.38.0-beta.0
(``framework/plugins/topologyaware/topology_placement.go``, ``schedule_one_podgroup.go``'s
``podGroupSchedulingPlacementAlgorithm`` at 1.37, ``algorithm_podgroup.go`` at 1.38):

- a placement per value of the group's topology key among the nodes labelled with it (1.38:
  an empty value is no domain, a labelling mistake); a group with pods already scheduled may
  only go where they are, and pods of one group on two domains is an error;
- each placement is the group's cycle with only its nodes as candidates (their count is the
  "0/N nodes" of a pod's message); nothing of it stays assumed;
- 1.37 evaluates every placement; 1.38 first the one holding the pods' nominated node (when
  one alone does, and the group fits there, nothing else is tried), then stops once
  ``percentageOfPlacementsToScore`` of them fit (0: from 100% down to 5% as the placements'
  nodes add up to 5,000);
- the winner has the most of the group's pods (PodGroupPodsCount: scheduled plus placed now);
  upstream breaks ties at random and shuffles a subset it evaluates, kopf-dra takes domains
  by name (same inputs, same answer);
- none fits: "0/N placements are available, first placement status: ..." with the first
  placement's reason.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence

from operators.allocator import Allocator
from operators.api.core import Node
from operators.api.features import Release
from operators.api.ids import DeviceID
from operators.api.keys import ObjectKey
from operators.api.resource import Device, DeviceRequest, DeviceSelector, ResourceClaim
from operators.cel.errors import SelectorError
from operators.cel.library.strings import go_quote

V1_38 = Release(1, 38)
#: The generator's Unschedulable when no node carries the key.
NO_PLACEMENTS = "no feasible placements found"
#: 1.38's adaptive share: never below 5% of the placements (and at least one).
MIN_ADAPTIVE_PERCENTAGE = 5


@dataclasses.dataclass(frozen=True)
class Domain:
    """One placement: a value of the key and the nodes that carry it (``everywhere``: the one
    placement of a group without a constraint, every node, no candidate left out)."""

    name: str
    nodes: frozenset[str]
    everywhere: bool = False

    @property
    def within(self) -> frozenset[str] | None:
        """The candidate nodes a cycle in it is restricted to (None: all)."""
        return None if self.everywhere else self.nodes


@dataclasses.dataclass(frozen=True)
class TopologyRules:
    """What a release does with a topology-constrained group. ``percentage``: 1.38's
    ``percentageOfPlacementsToScore`` (None: 1.37, every placement)."""

    release: Release
    percentage: int | None

    @classmethod
    def of(cls, release: Release, percentage: int) -> TopologyRules:
        return cls(release, percentage if release >= V1_38 else None)

    @property
    def empty_is_domain(self) -> bool:
        return self.release < V1_38

    @property
    def nominated_first(self) -> bool:
        return self.release >= V1_38

    @property
    def fit_errors(self) -> bool:
        """1.38's group messages (``groups.GroupRules.fit_errors``)."""
        return self.release >= V1_38


class DomainError(Exception):
    """The group's scheduled pods name no single domain: the cycle's error (SchedulerError)."""

    def told(self, rules: TopologyRules, group: str) -> str:
        """What each pod of the group is told: 1.37 the error, 1.38 that its group has one
        (``buildParentPodGroupErrorStatus``)."""
        if rules.release >= V1_38:
            return f"parent pod group {go_quote(group)} encountered an error"
        return str(self)


def scheduled_domain(
    key: str,
    placed: Mapping[ObjectKey, str],
    nodes: Mapping[str, Node],
    rules: TopologyRules,
) -> str | None:
    """The domain the group's scheduled pods (``placed``: pod -> node) fix, None when there are
    none (``getScheduledPodsTopologyDomain``)."""
    found: str | None = None
    for pod, node_name in placed.items():
        node = nodes.get(node_name)
        if node is None:
            raise DomainError(
                f"cannot determine domain for already scheduled pods: getting node for pod "
                f"{pod}: nodeinfo not found for node name {go_quote(node_name)}"
            )
        domain = node.metadata.labels.get(key)
        if domain is None:
            raise DomainError(
                "cannot determine domain for already scheduled pods: no topology domain found "
                f"for pod {pod}"
            )
        if domain == "" and not rules.empty_is_domain:
            raise DomainError(
                "cannot determine domain for already scheduled pods: empty topology domain "
                f"found for pod {pod}"
            )
        if found and found != domain:
            pair = (
                f"{go_quote(found)}, {go_quote(domain)}"
                if rules.release >= V1_38
                else f"{found}, {domain}"
            )
            raise DomainError(
                "cannot determine domain for already scheduled pods: more than 1 domain found "
                f"for pod group: {pair}"
            )
        found = domain
    return found if placed else None


def everywhere(nodes: Iterable[Node]) -> Domain:
    """The one placement of a group without a constraint and without a parent: every node."""
    return Domain("", frozenset(n.metadata.name or "" for n in nodes), everywhere=True)


def among(nodes: Sequence[Node], parent: Domain | None) -> Sequence[Node]:
    """The nodes of a parent's placement (None, or one of every node: all of them)."""
    if parent is None or parent.everywhere:
        return nodes
    return [n for n in nodes if n.metadata.name in parent.nodes]


def domains(
    key: str,
    nodes: Sequence[Node],
    placed: Mapping[ObjectKey, str],
    rules: TopologyRules,
) -> list[Domain]:
    """The placements of a group constrained to ``key``, by name (``GeneratePlacements``).
    Raises DomainError when the scheduled pods fix no single domain."""
    by_name = {n.metadata.name or "": n for n in nodes}
    required = scheduled_domain(key, placed, by_name, rules)
    members: dict[str, set[str]] = {}
    for node in nodes:
        value = node.metadata.labels.get(key)
        if value is None or (value == "" and not rules.empty_is_domain):
            continue
        if required is None or value == required:
            members.setdefault(value, set()).add(node.metadata.name or "")
    return [Domain(name, frozenset(members[name])) for name in sorted(members)]


def feasible_to_find(rules: TopologyRules, placements: Sequence[Domain]) -> int:
    """How many placements must fit before the search stops (``numFeasiblePlacementsToFind``;
    1.37: all of them)."""
    if rules.percentage is None:
        return len(placements)
    percentage = rules.percentage
    if percentage == 0:
        nodes = sum(len(d.nodes) for d in placements)
        percentage = max(MIN_ADAPTIVE_PERCENTAGE, 100 - nodes * 9 // 500)
    return max(1, len(placements) * percentage // 100)


def nominated_domain(placements: Sequence[Domain], nominated: Collection[str]) -> Domain | None:
    """The one placement holding the pods' nominated nodes (None: none, or several)."""
    if not nominated:
        return None
    matched = [d for d in placements if not d.nodes.isdisjoint(nominated)]
    return matched[0] if len(matched) == 1 else None


def best(counts: Sequence[tuple[Domain, int]]) -> Domain:
    """The placement with the most of the group's pods (PodGroupPodsCount), the first on a
    tie. ``counts``: each feasible placement, in the order tried, with its pods (scheduled
    and placed now)."""
    top = max(count for _, count in counts)
    return next(domain for domain, count in counts if count == top)


def unavailable(placements: int, first: str) -> str:
    """The group's reason when no placement fits."""
    return f"0/{placements} placements are available, first placement status: {first}"


# --- kopf-dra's device count per domain ---------------------------------------------------------


@dataclasses.dataclass(frozen=True, order=True)
class Need:
    """Devices a request takes: of a DeviceClass, and matching the request's own CEL
    selectors (a class is often broad: every GPU, partitions included)."""

    device_class: str
    selectors: tuple[str, ...] = ()

    def __str__(self) -> str:
        matching = " matching the request's selectors" if self.selectors else ""
        return f"DeviceClass {self.device_class}{matching}"


def _selectors(selectors: Sequence[DeviceSelector]) -> tuple[str, ...]:
    return tuple(s.cel.expression or "" for s in selectors if s.cel is not None)


def _exact(request: DeviceRequest) -> tuple[Need, int] | None:
    """What a request certainly takes from a domain's free devices, if anything: an
    ExactCount request without adminAccess; for prioritized alternatives, the fewest of one
    class (whatever their selectors) when every alternative is of that class."""
    if request.exactly is not None:
        e = request.exactly
        if e.admin_access or (e.allocation_mode or "ExactCount") != "ExactCount":
            return None
        return Need(e.device_class_name or "", _selectors(e.selectors)), e.count or 1
    subs = request.first_available
    if not subs:
        return None
    classes = {s.device_class_name for s in subs}
    if len(classes) != 1 or any((s.allocation_mode or "ExactCount") != "ExactCount" for s in subs):
        return None
    return Need(subs[0].device_class_name or ""), min(s.count or 1 for s in subs)


def claim_needs(claim: ResourceClaim) -> Counter[Need]:
    """Devices the claim takes from a domain, at least (an allocated claim: none)."""
    needs: Counter[Need] = Counter()
    if claim.is_allocated:
        return needs
    for request in claim.spec.devices.requests:
        exact = _exact(request)
        if exact is not None:
            needs[exact[0]] += exact[1]
    return needs


def group_needs(
    claims: Mapping[ObjectKey, Sequence[ResourceClaim]], still_to_place: int
) -> Counter[Need]:
    """What ``still_to_place`` of the pods (``claims``: each pod's) take at least, need by
    need: a claim several pods share once, when so many are placed that one of its holders
    must be; the pods' own claims of the pods that need fewest."""
    holders: Counter[str] = Counter(k for cs in claims.values() for k in {c.key for c in cs})
    pods = len(claims)
    needs: Counter[Need] = Counter()
    own: list[Counter[Need]] = []
    counted: set[str] = set()
    for pod_claims in claims.values():
        mine: Counter[Need] = Counter()
        for claim in pod_claims:
            held = holders[claim.key]
            if held == 1:
                mine.update(claim_needs(claim))
            elif still_to_place > pods - held and claim.key not in counted:
                counted.add(claim.key)
                needs.update(claim_needs(claim))
        own.append(mine)
    fewest = max(0, min(still_to_place, pods))
    for need in {n for mine in own for n in mine}:
        needs[need] += sum(sorted(mine[need] for mine in own)[:fewest])
    return +needs


def _matches(allocator: Allocator, expressions: Iterable[str], driver: str, device: Device) -> bool:
    try:
        return all(allocator.device_matches(e, driver, device) for e in expressions)
    except SelectorError:
        return True  # counted: only the allocator may refuse a device for its selector's error


def free_devices(
    allocator: Allocator, nodes: Iterable[Node], needs: Collection[Need]
) -> Counter[Need]:
    """The devices of each need (its class's and its own selectors) that the domain's nodes
    can reach and no claim holds (a shareable device counts while shares are possible): an
    upper bound of what the allocator may give, so that a domain it rules out could not have
    held the group."""
    free: Counter[Need] = Counter()
    seen: set[DeviceID] = set()
    wanted = [
        (need, (*_selectors(allocator.classes[need.device_class].spec.selectors), *need.selectors))
        for need in needs
        if need.device_class in allocator.classes
    ]
    for node in nodes:
        for candidate in allocator.candidates(node):
            if candidate.id in seen:
                continue
            seen.add(candidate.id)
            device = candidate.device
            if (
                allocator.allocated.is_allocated(candidate.id)
                and not device.allow_multiple_allocations
            ):
                continue
            driver = candidate.slice.spec.driver or ""
            for need, expressions in wanted:
                if _matches(allocator, expressions, driver, device):
                    free[need] += 1
    return free


def short_of(needs: Mapping[Need, int], free: Mapping[Need, int]) -> str | None:
    """Why a domain cannot hold the group's claims (None: it may)."""
    for need in sorted(needs):
        if free.get(need, 0) < needs[need]:
            return (
                f"the domain's free devices cannot hold the pod group's claims: "
                f"{needs[need]} of {need} needed, {free.get(need, 0)} free"
            )
    return None
