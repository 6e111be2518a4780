"""Pod groups, decided without I/O (operators.scheduling.groups, operators.api.groups)."""

from __future__ import annotations

import datetime
from typing import Any

from operators.api.core import Pod, PodResourceClaim
from operators.api.groups import (
    PodGroup,
    is_for_pod,
    is_group_claim,
    is_reserved_for_pod,
)
from operators.api.keys import ObjectKey
from operators.api.resource import ResourceClaim
from operators.controllers.scheduler.permit import go_duration
from operators.controllers.scheduler.planning import group_condition, reservations
from operators.scheduling.groups import (
    FailedCycle,
    GroupRules,
    Refusal,
    cannot_be_satisfied,
    ordered,
    outcome,
    pod_message,
    refused,
    stranded_group_claims,
    tried_with_group,
    waits,
)

NOW = datetime.datetime(2026, 11, 28, tzinfo=datetime.UTC)
KEY = ObjectKey("ns", "training")


def group(min_count: int | None = 4, **spec: Any) -> PodGroup:
    policy = {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}}
    return PodGroup.load(
        {
            "metadata": {"name": "training", "namespace": "ns", "uid": "g-uid", "generation": 1},
            "spec": {
                "schedulingPolicy": policy,
                "resourceClaims": [{"name": "link", "resourceClaimTemplateName": "link"}],
                **spec,
            },
        }
    )


def pod(name: str, priority: int = 0, created: str = "2026-11-28T00:00:00Z", **spec: Any) -> Pod:
    return Pod.load(
        {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "uid": f"{name}-uid",
                "creationTimestamp": created,
            },
            "spec": {
                "schedulerName": "kopf-dra",
                "priority": priority,
                "schedulingGroup": {"podGroupName": "training"},
                "resourceClaims": [
                    {"name": "link", "resourceClaimTemplateName": "link"},
                    {"name": "gpu", "resourceClaimTemplateName": "gpu"},
                ],
                **spec,
            },
        }
    )


def claim(name: str, owner_kind: str, owner: str, reserved: list[dict[str, str]]) -> ResourceClaim:
    return ResourceClaim.load(
        {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "uid": f"{name}-uid",
                "resourceVersion": "5",
                "ownerReferences": [
                    {
                        "apiVersion": "scheduling.k8s.io/v1beta1"
                        if owner_kind == "PodGroup"
                        else "v1",
                        "kind": owner_kind,
                        "name": owner,
                        "uid": f"{owner}-uid" if owner_kind == "Pod" else "g-uid",
                        "controller": True,
                    }
                ],
            },
            "spec": {"devices": {"requests": []}},
            "status": {"reservedFor": reserved} if reserved else {},
        }
    )


def test_a_pod_claim_is_the_groups_only_when_every_field_equals_one_of_its_claims() -> None:
    g = group()
    assert is_group_claim(PodResourceClaim(name="link", resource_claim_template_name="link"), g)
    assert not is_group_claim(PodResourceClaim(name="link", resource_claim_template_name="x"), g)
    assert not is_group_claim(PodResourceClaim(name="link", resource_claim_name="link"), g)
    assert not is_group_claim(PodResourceClaim(name="gpu", resource_claim_template_name="gpu"), g)
    assert not is_group_claim(
        PodResourceClaim(name="link", resource_claim_template_name="link"), None
    )


def test_a_claim_made_for_the_pods_group_is_the_pods_only_with_group_claims_on() -> None:
    trainer = pod("t0")
    made = claim("training-link-abc", "PodGroup", "training", [])
    assert is_for_pod(made, trainer, group_claims=True)
    assert not is_for_pod(made, trainer, group_claims=False)
    other = claim("other-link-abc", "PodGroup", "other", [])
    assert not is_for_pod(other, trainer, group_claims=True)
    assert is_for_pod(claim("t0-gpu-abc", "Pod", "t0", []), trainer, group_claims=False)


def test_reserved_for_the_group_by_name_counts_for_its_pods() -> None:
    trainer = pod("t0")
    entry = {
        "apiGroup": "scheduling.k8s.io",
        "resource": "podgroups",
        "name": "training",
        "uid": "x",
    }
    shared = claim("training-link-abc", "PodGroup", "training", [entry])
    assert is_reserved_for_pod(shared, trainer, group_claims=True)
    assert not is_reserved_for_pod(shared, trainer, group_claims=False)


def test_a_group_waits_silently_for_its_podgroup_and_for_min_count_pods() -> None:
    assert waits(None, KEY, 4) == (
        "waiting for pods's pod group 'ns/training' to appear in scheduling queue"
    )
    assert waits(group(4), KEY, 3) == (
        "waiting for minCount pods from a gang to appear in scheduling queue"
    )
    assert waits(group(4), KEY, 4) is None
    assert waits(group(None), KEY, 1) is None  # basic: no minimum


V1_37_OFF, V1_37_ON = GroupRules("pods"), GroupRules("group")
V1_38 = GroupRules("group-else-pods", hierarchy=True)


def test_refused_names_the_two_scheduler_names_or_priorities_that_differ_as_1_37() -> None:
    g = group()
    assert refused(g, [pod("a"), pod("b")], [], V1_37_OFF) is None
    other = pod("b", schedulerName="default-scheduler")
    assert refused(g, [pod("a"), other], [], V1_37_OFF) == Refusal(
        "all pods in a single pod group should have the same .spec.schedulerName set, "
        'got: "default-scheduler" and "kopf-dra"',
        "SchedulerError",
    )
    assert refused(g, [pod("a")], [pod("b", priority=5)], V1_37_OFF) == Refusal(
        "all pods in a single pod group should have the same priority as the pod group's "
        "priority, got 5 and 0",
        "SchedulerError",
    )


def test_preemption_policies_are_checked_as_each_release_and_gate_checks_them() -> None:
    never = pod("b", preemptionPolicy="Never")
    # 1.37, PodGroupPreemptionPolicy off: the pods agree among themselves.
    assert refused(group(), [never, pod("c", preemptionPolicy="Never")], [], V1_37_OFF) is None
    assert refused(group(), [never, pod("a")], [], V1_37_OFF) == Refusal(
        "all pods in a single pod group should have the same preemption policy, "
        "got PreemptLowerPriority and Never",
        "SchedulerError",
    )
    # On: each pod agrees with the PodGroup's (PreemptLowerPriority when unset).
    assert refused(group(), [never], [], V1_37_ON) == Refusal(
        "all pods in a single pod group should have the same preemption policy as the pod "
        "group's preemption policy, got Never and PreemptLowerPriority",
        "SchedulerError",
    )
    assert refused(group(preemptionPolicy="Never"), [never], [], V1_37_ON) is None
    # 1.38: the PodGroup's where set, else the first pod's; the pods named, PodGroupError.
    assert refused(group(), [never], [], V1_38) is None
    assert refused(group(), [never, pod("a")], [], V1_38) == Refusal(
        "all pods in a pod group hierarchy should have the same preemption policy, "
        'got PreemptLowerPriority ("a") and Never',
        "PodGroupError",
    )
    assert refused(group(preemptionPolicy="PreemptLowerPriority"), [never], [], V1_38) == (
        Refusal(
            "all pods in a pod group hierarchy should have the same preemption policy, "
            'got Never ("b") and PreemptLowerPriority',
            "PodGroupError",
        )
    )


def test_1_38_names_the_pods_and_the_root_group_in_its_messages() -> None:
    other = pod("b", schedulerName="default-scheduler")
    assert refused(group(), [pod("a"), other], [], V1_38) == Refusal(
        "all pods in a pod group hierarchy should have the same .spec.schedulerName set, "
        'got: "default-scheduler" ("b") and "kopf-dra" ("a")',
        "PodGroupError",
    )
    assert refused(group(), [pod("a")], [pod("c", priority=5)], V1_38) == Refusal(
        "all pods in a pod group hierarchy should have the same priority as the root pod "
        'group\'s priority, got 5 ("c") and 0 ("podgroup/ns/training")',
        "PodGroupError",
    )


def test_pods_are_tried_by_priority_then_attempts_then_age_then_name() -> None:
    pods = [
        pod("d", created="2026-11-28T00:00:02Z"),
        pod("c", created="2026-11-28T00:00:01Z"),
        pod("b", created="2026-11-28T00:00:01Z"),
        pod("a", priority=0, created="2026-11-28T00:00:09Z"),
        pod("z", priority=0, created="2026-11-28T00:00:09Z"),
    ]
    attempts = {ObjectKey("ns", "z"): 2}
    assert [p.metadata.name for p in ordered(pods, attempts)] == ["z", "b", "c", "d", "a"]


def test_a_gang_is_placed_when_placed_before_and_now_reach_min_count() -> None:
    g = group(4)
    keys = [ObjectKey("ns", f"t{i}") for i in range(4)]
    assert outcome(g, 0, keys, {}, 0).succeeded
    assert outcome(g, 2, keys[:2], {}, 0).succeeded  # two bound before, two now
    short = outcome(g, 0, keys[:3], {keys[3]: "0/2 nodes are available: ..."}, 0)
    assert short.message == (
        "pod group is unschedulable, minCount (4) cannot be satisfied: 3 scheduled, 0 remaining"
    )
    assert pod_message(short, keys[0], evaluated=True) == short.message
    assert pod_message(short, keys[3], evaluated=True) == "0/2 nodes are available: ..."
    assert cannot_be_satisfied(4, 1, 2) is not None
    assert cannot_be_satisfied(4, 1, 3) is None
    # Enough were placed before, but none of the pods tried now fits.
    assert outcome(g, 4, [], {keys[0]: "no"}, 0).message == "pod group is unschedulable"


def test_a_basic_group_is_a_gang_of_one() -> None:
    basic = group(None)
    assert basic.min_count == 1
    assert not basic.is_gang
    assert outcome(basic, 0, [ObjectKey("ns", "t0")], {ObjectKey("ns", "t1"): "no"}, 0).succeeded


def test_the_groups_claim_is_reserved_for_the_podgroup_once_and_the_pods_own_for_the_pod() -> None:
    g = group()
    trainer = pod("t1")
    entry = {
        "apiGroup": "scheduling.k8s.io",
        "resource": "podgroups",
        "name": "training",
        "uid": "g-uid",
    }
    shared = claim("training-link-abc", "PodGroup", "training", [entry])
    own = claim("t1-gpu-abc", "Pod", "t1", [])
    plan = reservations(trainer, [shared, own], {}, NOW, group=g, shared=frozenset({shared.key}))
    assert [r.cached.key for r in plan] == [own.key], "the group's claim is reserved already"
    first = reservations(
        trainer,
        [claim("training-link-abc", "PodGroup", "training", []), own],
        {},
        NOW,
        group=g,
        shared=frozenset({shared.key}),
    )
    reserved = [r.target.dump()["status"]["reservedFor"] for r in first]
    assert reserved[0] == [entry]
    assert reserved[1] == [{"resource": "pods", "name": "t1", "uid": "t1-uid"}]


def test_the_podgroup_condition_never_goes_back_from_true() -> None:
    g = group()
    written = group_condition(g, "PodGroupInitiallyScheduled", "True", "Scheduled", "", NOW)
    assert written is not None
    (condition,) = written.patch["status"]["conditions"]
    assert (condition["status"], condition["reason"], condition["observedGeneration"]) == (
        "True",
        "Scheduled",
        1,
    )
    placed = PodGroup.load({**g.dump(), "status": {"conditions": [condition]}})
    assert (
        group_condition(placed, "PodGroupInitiallyScheduled", "False", "Unschedulable", "x", NOW)
        is None
    )
    assert (
        group_condition(placed, "PodGroupInitiallyScheduled", "True", "Scheduled", "", NOW) is None
    )


def test_the_permit_timeout_is_spelled_as_go_does() -> None:
    assert (go_duration(300), go_duration(45), go_duration(3700)) == ("5m0s", "45s", "1h1m40s")


def test_a_groups_claim_no_pod_can_use_is_deallocated_only_while_none_is_placed() -> None:
    g = group()
    entry = {
        "apiGroup": "scheduling.k8s.io",
        "resource": "podgroups",
        "name": "training",
        "uid": "g-uid",
    }
    held = claim("training-link-abc", "PodGroup", "training", [entry])
    body = held.dump()
    body["status"]["allocation"] = {"devices": {"results": []}}
    allocated = ResourceClaim.load(body)
    assert stranded_group_claims(g, [allocated], {allocated.key}, placed_before=0) == [allocated]
    assert stranded_group_claims(g, [allocated], {allocated.key}, placed_before=1) == []
    assert stranded_group_claims(g, [allocated], set(), placed_before=0) == []
    other = {"resource": "pods", "name": "x", "uid": "x-uid"}
    body["status"]["reservedFor"] = [entry, other]
    in_use = ResourceClaim.load(body)
    assert stranded_group_claims(g, [in_use], {in_use.key}, placed_before=0) == []


def test_a_parent_is_refused_where_composite_groups_are_off_a_topology_constraint_is_not() -> None:
    constrained = group(schedulingConstraints={"topology": [{"key": "zone"}]})
    assert constrained.topology_key == "zone"
    assert refused(constrained, [pod("a")], [], V1_38) is None
    nested = group(parentCompositePodGroupName="job")
    refusal = refused(nested, [pod("a")], [], V1_37_OFF)
    assert refusal is not None
    assert "CompositePodGroup feature gate off" in refusal.message
    assert refusal.reason == "SchedulerError"


def test_a_pod_tried_in_its_groups_failed_cycle_rides_on_it_until_something_changes() -> None:
    a, b, c = ObjectKey("ns", "a"), ObjectKey("ns", "b"), ObjectKey("ns", "c")
    last = FailedCycle(moves=7, group_version="41", tried=frozenset({a, b}), at=100.0)

    def rides(key: ObjectKey, queued: list[ObjectKey], moves: int = 7, version: str = "41",
              now: float = 101.0) -> bool:  # fmt: skip
        return tried_with_group(last, key, queued, moves, version, now, retry=5.0)

    assert rides(b, [a, b])
    assert not tried_with_group(None, b, [a, b], 7, "41", 101.0, 5.0), "no failed cycle"
    assert not rides(b, [a, b], moves=8), "room made since"
    assert not rides(b, [a, b], version="42"), "the PodGroup changed"
    assert not rides(b, [a, b, c]), "a new pod of the group"
    assert not rides(c, [c]), "not tried in that cycle"
    assert not rides(b, [a, b], now=105.0), "the periodic retry runs the cycle again"


def test_1_38_words_the_gang_as_its_policys_minimum_and_tells_a_pod_that_fits_of_its_parent() -> (
    None
):
    """kube-scheduler 1.38's GangScheduling PlacementFeasible and podGroupFitError."""
    a, b, c = ObjectKey("ns", "a"), ObjectKey("ns", "b"), ObjectKey("ns", "c")
    verdict = outcome(group(4), 0, [a, b], {c: "0/2 nodes are available"}, 0, fit_errors=True)
    assert verdict.message == (
        "pod group is unschedulable, scheduling policy's minimum threshold (4) cannot be "
        "satisfied: 2 scheduled, 1 unschedulable, 0 not-evaluated"
    )
    assert pod_message(verdict, a, evaluated=True) == 'parent pod group "training" is unschedulable'
    assert pod_message(verdict, c, evaluated=True) == "0/2 nodes are available"
    waiting = outcome(group(4), 0, [a], {}, 1, fit_errors=True)
    assert waiting.message == (
        "pod group is unschedulable, scheduling policy's minimum threshold (4) cannot be "
        "satisfied: 1 scheduled, 0 unschedulable, 1 not-evaluated"
    )
    short = outcome(group(4), 2, [a], {}, 2, fit_errors=True)
    assert short.message == (
        "pod group is unschedulable, scheduling policy's minimum threshold (4) is not yet "
        "satisfied: 3 scheduled, 0 unschedulable, 2 not-evaluated"
    )
    nothing = outcome(group(2), 2, [], {c: "0/2 nodes are available"}, 0, fit_errors=True)
    assert (nothing.message, nothing.minimum_met) == (
        "pod group is unschedulable, no pods were schedulable",
        True,
    )
    # 1.37: the same cycles in minCount's words, the pods told the group's message.
    old = outcome(group(4), 0, [a, b], {c: "0/2 nodes are available"}, 0)
    assert old.message == (
        "pod group is unschedulable, minCount (4) cannot be satisfied: 2 scheduled, 0 remaining"
    )
    assert pod_message(old, a, evaluated=True) == old.message
    assert outcome(group(2), 2, [], {}, 0).message == "pod group is unschedulable"
