"""The scheduler's profile: its policies and every switch its gates and release give it, derived
once and handed to each part (as upstream's ``feature.NewSchedulerFeaturesFromGates``).

``Policies`` are the flags that change where a pod goes. The scheduler's settings inherit them,
and ``simulate`` and ``kubectl dra why`` generate their flags from the same fields, so the
defaults exist once. ``Profile.of`` adds what the cluster's release and gates switch on; the
scheduler, its parts and ``simulate`` ask the profile, never a gate.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from operators.allocator.allocator import Policy
from operators.allocator.features import V1_37, V1_38, Features
from operators.api.features import KubernetesVersion, Release
from operators.scheduling.attempt import DEFAULT_FILTER_TIMEOUT
from operators.scheduling.groups import GroupRules
from operators.scheduling.pod_filters import PluginSwitches
from operators.scheduling.preemption import AlternativesPolicy
from operators.scheduling.score import ScorePolicy, Scoring
from operators.scheduling.topology import TopologyRules


class Policies(BaseModel):
    """The scheduler's flags that change its answer (``kopf-dra run scheduler``'s)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    binding_timeout: float = Field(
        default=600.0,
        description="Seconds from allocationTimestamp until unmet binding conditions give up",
    )
    score_policy: Literal["least-allocated", "most-allocated"] = Field(
        default="least-allocated", description="Spread (least) or pack (most) pods over nodes"
    )
    ready_devices_weight: int = Field(
        default=1,
        ge=0,
        description="Weight of kopf-dra's ReadyDevices score beside the default profile's "
        "(the share of a node's allocated devices that wait for no binding condition); 0: off",
    )
    allocation_policy: Literal["first-fit", "best-fit"] = Field(
        default="first-fit",
        description="first-fit gives upstream's devices; best-fit prefers small partitions",
    )
    filter_timeout: float = Field(
        default=DEFAULT_FILTER_TIMEOUT,
        ge=0,
        description="Seconds one pod's device allocation may take in all; past it the pod is "
        "unschedulable and retried with backoff (kube-scheduler's DRA filter timeout); 0: none",
    )
    preemption: bool = Field(
        default=True,
        description="Evict pods of lower priority for a pod that fits nowhere, as "
        "kube-scheduler's DefaultPreemption, devices included (KEP-5690)",
    )
    preemption_alternatives: Literal["no-preemption-first", "rank-first"] = Field(
        default="no-preemption-first",
        description="Prioritized alternatives (KEP-4816) and preemption: no-preemption-first: "
        "an alternative that fits without evicting anybody beats a higher-ranked one that needs "
        "an eviction; rank-first: evict lower-priority pods for a higher-ranked alternative",
    )
    gang_search: bool = Field(
        default=True,
        description="When a pod group's cycle fails, search its pods' prioritized alternatives "
        "and other nodes for a placement of the whole group, within the filter timeout "
        "(kube-scheduler 1.37 takes each pod's first choice; false: as it does)",
    )
    percentage_of_placements_to_score: int = Field(
        default=0,
        ge=0,
        le=100,
        description="Kubernetes 1.38: a topology-constrained pod group's search stops once "
        "this share of its domains fit (kube-scheduler's percentageOfPlacementsToScore, in "
        "percent; 0: adaptive, all of them down to a twentieth as the domains' nodes add up to "
        "5,000); 1.37 tries every domain",
    )
    domain_device_count: bool = Field(
        default=True,
        description="Rule out a topology domain whose free devices cannot hold a pod group's "
        "claims before any pod is filtered in it (false: every domain is tried, as "
        "kube-scheduler does)",
    )


def group_rules(release: Release, gates: Mapping[str, bool]) -> GroupRules:
    """1.38 dropped PodGroupPreemptionPolicy (the field is served ungated) and validates a
    group's hierarchy; 1.37 reads the PodGroup's policy only with the gate on."""
    if release >= V1_38:
        return GroupRules(policy="group-else-pods", hierarchy=True, fit_errors=True)
    return GroupRules(policy="group" if gates.get("PodGroupPreemptionPolicy") else "pods")


@dataclasses.dataclass(frozen=True)
class Profile:
    """What the scheduler does on this cluster: its policies, and each switch its release and
    gates give it (off where the release has no such feature)."""

    policies: Policies
    version: KubernetesVersion
    #: The allocator's gates and release.
    features: Features
    #: KEP-5004: container requests of extended resources that DeviceClasses back.
    extended: bool
    #: KEP-5517 in 1.37's shape: devices that take the node's cpu, memory, ... count there.
    node_allocatable: bool
    #: DeviceTaintRules are watched and applied (off: there are none).
    taint_rules: bool
    #: Seconds one pod's allocation may take (DRASchedulerFilterTimeout; 0: no limit).
    filter_timeout: float
    #: 1.37's pod groups (GenericWorkload); on 1.36 a pod naming a group is told why not.
    groups: bool
    #: Their shared claims (DRAWorkloadResourceClaims).
    group_claims: bool
    #: What the release checks of a group before its cycle, and whose preemption policy it
    #: has (1.37: PodGroupPreemptionPolicy; 1.38: the PodGroup's where set).
    group_rules: GroupRules
    #: What the release and gates switch in the default profile's other plugins (ports,
    #: volumes, pod affinity, topology spread, declared features).
    plugins: PluginSwitches
    #: TopologyAwareWorkloadScheduling: how a group with a topology constraint is placed
    #: (None: off, and the constraint is not read, as upstream with the gate off).
    topology: TopologyRules | None = None
    #: CompositePodGroup (alpha in 1.37, beta in 1.38, off by default; needs the topology's
    #: gate): trees of groups placed in one cycle (``scheduling.composite``).
    composite: bool = False
    #: SchedulerPopFromBackoffQ (beta, on since 1.33): a pod backing off is tried before its
    #: backoff ends when no other pod is ready.
    backoff_pops: bool = True

    @classmethod
    def of(
        cls, policies: Policies, version: KubernetesVersion, gates: Mapping[str, bool]
    ) -> Profile:
        """``gates``: every gate's value at ``version`` (``api.features.resolve``)."""
        features = Features.of(gates, version)
        since_1_37 = features.kubernetes >= V1_37
        groups = since_1_37 and gates["GenericWorkload"]
        return cls(
            policies=policies,
            version=version,
            features=features,
            extended=gates["DRAExtendedResource"],
            node_allocatable=since_1_37 and gates["DRANodeAllocatableResources"],
            taint_rules=gates["DRADeviceTaintRules"],
            filter_timeout=(policies.filter_timeout if gates["DRASchedulerFilterTimeout"] else 0.0),
            groups=groups,
            group_claims=groups and gates["DRAWorkloadResourceClaims"],
            group_rules=group_rules(features.kubernetes, gates),
            plugins=PluginSwitches.of(features.kubernetes, gates),
            topology=(
                TopologyRules.of(features.kubernetes, policies.percentage_of_placements_to_score)
                if groups and gates["TopologyAwareWorkloadScheduling"]
                else None
            ),
            composite=(
                groups
                and gates["TopologyAwareWorkloadScheduling"]
                and gates.get("CompositePodGroup", False)
            ),
            backoff_pops=gates.get("SchedulerPopFromBackoffQ", True),
        )

    @property
    def extended_claim_named(self) -> bool:
        """1.38 writes the extended-resource claim's real name in the pod's
        nodeAllocatableResourceClaimStatuses (1.37: its in-memory placeholder)."""
        return self.features.kubernetes >= V1_38

    @property
    def score_policy(self) -> ScorePolicy:
        return self.policies.score_policy

    @property
    def scoring(self) -> Scoring:
        """The score plugins: the release's default profile, the Fit strategy, ReadyDevices."""
        return Scoring(
            policy=self.policies.score_policy,
            ready_devices=self.policies.ready_devices_weight,
            plugins=self.plugins,
        )

    @property
    def allocation_policy(self) -> Policy:
        return self.policies.allocation_policy

    @property
    def binding_timeout(self) -> float:
        return self.policies.binding_timeout

    @property
    def preemption(self) -> AlternativesPolicy | None:
        """The alternatives policy of preemption; None when preemption is off."""
        return self.policies.preemption_alternatives if self.policies.preemption else None

    @property
    def gang_search(self) -> bool:
        return self.policies.gang_search

    @property
    def search_timeout(self) -> float:
        """Seconds a pod group's search of its pods' choices may take: the filter timeout as
        set (whether or not DRASchedulerFilterTimeout is on), its default where it is 0."""
        return self.policies.filter_timeout or DEFAULT_FILTER_TIMEOUT

    def groups_off(self) -> str | None:
        """Why this scheduler places no pod groups (None: it does)."""
        if self.groups:
            return None
        if self.features.kubernetes < V1_37:
            return (
                "gang scheduling (GenericWorkload) needs Kubernetes 1.37, and this cluster runs "
                f"{self.features.kubernetes}"
            )
        return (
            "kopf-dra runs with the GenericWorkload feature gate off, so it places no pod groups "
            "(--feature-gates GenericWorkload=true)"
        )
