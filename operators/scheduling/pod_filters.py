"""The default profile's plugins beyond the node and the pod's devices, run as one: PreFilter
once per cycle against the snapshot, then each node's Filter in upstream's order.

kube-scheduler 1.37's filter order (``default_plugins.go``): NodeName, NodeUnschedulable,
TaintToleration, NodeAffinity, **NodePorts**, NodeResourcesFit, **VolumeRestrictions,
NodeVolumeLimits, VolumeBinding, VolumeZone, PodTopologySpread, InterPodAffinity**,
DynamicResources, then **NodeDeclaredFeatures** (appended by its gate). A node's reason is the
first plugin's that refuses it, so ``before_fit`` runs between node affinity and resources
(``nodes.node_failure``), ``after_fit`` after them, and ``after_devices`` after the pod's
devices are allocated there (``cycle``).

``pre_filter`` returns ``Unresolvable`` when a plugin's PreFilter rejects the pod: no node is
tried, and upstream's message is "0/N nodes are available: <why>.". Preemption asks
``without`` for the filters with its victims gone (their ports, volumes, anti-affinity terms and
spread counts freed), and ``resolvable`` for whether evicting anybody can help a node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence

from operators.allocator.features import V1_37, V1_38
from operators.api.core import Node, Pod
from operators.api.features import Release
from operators.scheduling.plugins import (
    Unresolvable,
    interpodaffinity,
    nodedeclaredfeatures,
    nodeports,
    nodevolumelimits,
    podtopologyspread,
    volumebinding,
    volumerestrictions,
    volumezone,
)
from operators.scheduling.snapshot import Snapshot, without_pods

NodeCheck = Callable[[Node], "str | None"]


class PluginError(Exception):
    """A plugin's Filter failed (upstream's Error status: bad input, not a node that does
    not fit): the attempt fails with this message."""


#: What each plugin raises for bad input (its PreFilter's or Filter's Error status).
PLUGIN_ERRORS: tuple[type[Exception], ...] = (
    volumebinding.VolumeBindingError,
    nodevolumelimits.VolumeLimitsError,
    podtopologyspread.TopologySpreadError,
    interpodaffinity.AffinityParseError,
)


@dataclasses.dataclass(frozen=True)
class PluginSwitches:
    """What the release and its gates switch in the plugins (``Profile.plugins``); the
    defaults are 1.37's."""

    release: Release
    node_declared_features: bool = True
    #: VolumeLimitScaling (alpha in 1.36, beta and on from 1.37).
    volume_limit_scaling: bool = True
    #: MatchLabelKeysInPodTopologySpread (beta and on in 1.36-1.38).
    spread_match_label_keys: bool = True
    #: TaintTolerationComparisonOperators (alpha): Gt/Lt tolerations in nodeTaintsPolicy.
    taint_comparison_operators: bool = False
    #: InterPodAffinityHostnameFastPath (1.37's alpha).
    hostname_fast_path: bool = False
    #: InPlacePodVerticalScalingSchedulerPreemption (1.37's alpha): a pod whose resize is
    #: deferred skips the plugins.
    skip_deferred_resize: bool = False
    #: StorageCapacityScoring (alpha in 1.36, beta and on from 1.37): VolumeBinding scores.
    storage_capacity_scoring: bool = True

    @classmethod
    def of(cls, release: Release, gates: Mapping[str, bool]) -> PluginSwitches:
        return cls(
            release=release,
            node_declared_features=gates.get("NodeDeclaredFeatures", False),
            volume_limit_scaling=gates.get("VolumeLimitScaling", False),
            spread_match_label_keys=gates.get("MatchLabelKeysInPodTopologySpread", True),
            taint_comparison_operators=gates.get("TaintTolerationComparisonOperators", False),
            hostname_fast_path=gates.get("InterPodAffinityHostnameFastPath", False),
            skip_deferred_resize=gates.get("InPlacePodVerticalScalingSchedulerPreemption", False),
            storage_capacity_scoring=gates.get("StorageCapacityScoring", False),
        )

    @property
    def since_1_38(self) -> bool:
        return self.release >= V1_38

    @property
    def before_1_37(self) -> bool:
        return self.release < V1_37


@dataclasses.dataclass(frozen=True)
class Check:
    """One plugin's Filter for this pod, PreFilter done. ``resolvable``: a refusal that
    evicting pods may lift (upstream's Unschedulable, not UnschedulableAndUnresolvable)."""

    plugin: str
    check: NodeCheck
    resolvable: Callable[[str], bool]

    def __call__(self, node: Node) -> str | None:
        try:
            return self.check(node)
        except PLUGIN_ERRORS as e:
            raise PluginError(str(e)) from e


def _never(_: str) -> bool:
    return False


@dataclasses.dataclass(frozen=True)
class PodFilters:
    """The pod's Filter of each plugin that has something to check (none: nothing costs).
    ``volumes``: VolumeBinding's PodVolumes of each node its Filter passed (for Reserve)."""

    pod: Pod
    snapshot: Snapshot
    switches: PluginSwitches
    before: tuple[Check, ...] = ()
    after: tuple[Check, ...] = ()
    devices: tuple[Check, ...] = ()
    volumes: dict[str, volumebinding.PodVolumes] = dataclasses.field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.before or self.after or self.devices)

    def before_fit(self, node: Node) -> str | None:
        """NodePorts: between NodeAffinity and NodeResourcesFit."""
        return _first(self.before, node)

    def after_fit(self, node: Node) -> str | None:
        """The volume plugins, PodTopologySpread, InterPodAffinity: after NodeResourcesFit."""
        return _first(self.after, node)

    def after_devices(self, node: Node) -> str | None:
        """NodeDeclaredFeatures: after DynamicResources."""
        return _first(self.devices, node)

    def resolvable(self, node: Node, fits: Callable[[], bool]) -> bool:
        """Whether evicting pods may lift the node's first refusal in upstream's order (its
        status is that plugin's alone: a node refused for its ports is a candidate even if
        pod affinity would refuse it after). ``fits``: NodeResourcesFit passes, between the
        ports and the rest (a refusal there is always resolvable). True: nothing refuses."""
        for checks in (self.before, None, self.after, self.devices):
            if checks is None:
                if not fits():
                    return True
                continue
            for check in checks:
                reason = check(node)
                if reason is not None:
                    return check.resolvable(reason)
        return True

    def without(self, removed: Collection[str]) -> PodFilters | Unresolvable:
        """The filters with the pods of uids ``removed`` gone (preemption's trial)."""
        if self.empty or not removed:
            return self
        return pre_filter(self.pod, without_pods(self.snapshot, removed), self.switches)


def _first(checks: Sequence[Check], node: Node) -> str | None:
    for check in checks:
        reason = check(node)
        if reason is not None:
            return reason
    return None


def pre_filter(pod: Pod, snapshot: Snapshot, switches: PluginSwitches) -> PodFilters | Unresolvable:
    """Every plugin's PreFilter in upstream's order; the first rejection is the pod's."""
    try:
        return _pre_filter(pod, snapshot, switches)
    except PLUGIN_ERRORS as e:
        return Unresolvable(str(e), error=True)


#: A plugin's PreFilter: its Filter for this pod, None (Skip) or the pod's rejection.
Built = Check | Unresolvable | None
Stage = Callable[[Pod, Snapshot, PluginSwitches, dict[str, volumebinding.PodVolumes]], Built]


def _ports(pod: Pod, snapshot: Snapshot, switches: PluginSwitches, _: object) -> Built:
    state = nodeports.pre_filter(pod, snapshot, skip_deferred_resize=switches.skip_deferred_resize)
    if state is None:
        return None
    return Check(
        "NodePorts",
        lambda node: nodeports.filter(state, pod, node, snapshot),
        nodeports.resolvable,
    )


def _restrictions(pod: Pod, snapshot: Snapshot, switches: PluginSwitches, _: object) -> Built:
    state = volumerestrictions.pre_filter(
        pod, snapshot, skip_deferred_resize=switches.skip_deferred_resize
    )
    if state is None or isinstance(state, Unresolvable):
        return state
    return Check(
        "VolumeRestrictions",
        lambda node: volumerestrictions.filter(state, pod, node, snapshot),
        volumerestrictions.resolvable,
    )


def _limits(pod: Pod, snapshot: Snapshot, switches: PluginSwitches, _: object) -> Built:
    state = nodevolumelimits.pre_filter(
        pod,
        snapshot,
        volume_limit_scaling=switches.volume_limit_scaling,
        prevents_scheduling_if_missing=snapshot.storage.prevents_scheduling_if_missing,
        skip_deferred_resize=switches.skip_deferred_resize,
    )
    if state is None:
        return None
    return Check(
        "NodeVolumeLimits",
        lambda node: nodevolumelimits.filter(state, pod, node, snapshot),
        nodevolumelimits.resolvable,
    )


def _binding(
    pod: Pod,
    snapshot: Snapshot,
    switches: PluginSwitches,
    volumes: dict[str, volumebinding.PodVolumes],
) -> Built:
    """VolumeBinding: each node's PodVolumes kept in ``volumes`` for Reserve."""
    state = volumebinding.pre_filter(
        pod,
        snapshot,
        capacity_tracked=snapshot.storage.capacity_tracked,
        exact_capacity=switches.since_1_38,
        skip_deferred_resize=switches.skip_deferred_resize,
    )
    if state is None or isinstance(state, Unresolvable):
        return state

    def bind(node: Node, state: volumebinding.VolumeBindingState = state) -> str | None:
        found = volumebinding.find(state, pod, node, snapshot)
        if isinstance(found, str):
            return found
        volumes[node.metadata.name or ""] = found
        return None

    return Check("VolumeBinding", bind, volumebinding.resolvable)


def _zone(pod: Pod, snapshot: Snapshot, switches: PluginSwitches, _: object) -> Built:
    state = volumezone.pre_filter(pod, snapshot, skip_deferred_resize=switches.skip_deferred_resize)
    if state is None or isinstance(state, Unresolvable):
        return state
    return Check(
        "VolumeZone",
        lambda node: volumezone.filter(state, pod, node, snapshot),
        volumezone.resolvable,
    )


def _spread(pod: Pod, snapshot: Snapshot, switches: PluginSwitches, _: object) -> Built:
    state = podtopologyspread.pre_filter(
        pod,
        snapshot,
        match_label_keys=switches.spread_match_label_keys,
        taint_comparison_operators=switches.taint_comparison_operators,
        resize_preemption=switches.skip_deferred_resize,
        count_empty_selector=switches.since_1_38,
    )
    if state is None:
        return None
    return Check(
        "PodTopologySpread",
        lambda node: podtopologyspread.filter(state, pod, node),
        _spread_resolvable,
    )


def _affinity(pod: Pod, snapshot: Snapshot, switches: PluginSwitches, _: object) -> Built:
    state = interpodaffinity.pre_filter(
        pod,
        snapshot,
        hostname_fast_path=switches.hostname_fast_path,
        skip_deferred_resize=switches.skip_deferred_resize,
        keep_namespace_selector=switches.before_1_37,
    )
    if state is None or isinstance(state, Unresolvable):
        return state
    return Check(
        "InterPodAffinity",
        lambda node: interpodaffinity.filter(state, pod, node),
        interpodaffinity.resolvable,
    )


def _features(pod: Pod, _snapshot: Snapshot, switches: PluginSwitches, _: object) -> Built:
    needed = nodedeclaredfeatures.pre_filter(
        pod, release=switches.release, enabled=switches.node_declared_features
    )
    if needed is None:
        return None
    return Check(
        "NodeDeclaredFeatures", lambda node: nodedeclaredfeatures.filter(needed, node), _never
    )


#: The plugins in upstream's order, by where their Filter runs: before NodeResourcesFit,
#: after it, after DynamicResources.
STAGES: tuple[tuple[Stage, ...], tuple[Stage, ...], tuple[Stage, ...]] = (
    (_ports,),
    (_restrictions, _limits, _binding, _zone, _spread, _affinity),
    (_features,),
)


def _pre_filter(
    pod: Pod, snapshot: Snapshot, switches: PluginSwitches
) -> PodFilters | Unresolvable:
    volumes: dict[str, volumebinding.PodVolumes] = {}
    checks: list[tuple[Check, ...]] = []
    for stage in STAGES:
        found = []
        for build in stage:
            built = build(pod, snapshot, switches, volumes)
            if isinstance(built, Unresolvable):
                return built
            if built is not None:
                found.append(built)
        checks.append(tuple(found))
    before, after, devices = checks
    return PodFilters(pod, snapshot, switches, before, after, devices, volumes)


def _spread_resolvable(reason: str) -> bool:
    return reason not in podtopologyspread.UNRESOLVABLE_REASONS
