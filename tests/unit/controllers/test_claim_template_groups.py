"""The claim-template controller with 1.37's PodGroup claims (GenericWorkload +
DRAWorkloadResourceClaims), as kube-controller-manager v1.37.2's resourceclaim controller: one
claim per template entry of a PodGroup, recorded in its status; a member pod's entry equal to
its group's records the group's claim and never gets one of its own."""

from __future__ import annotations

from typing import Any

import pytest

from operators.api.core import Pod
from operators.api.groups import PodGroup
from operators.api.keys import ObjectKey
from operators.api.names import POD_CLAIM_NAME_ANNOTATION
from operators.api.resource import ResourceClaim, ResourceClaimTemplate
from operators.api.templates import claim_from_template
from operators.controllers.claim_templates import planning
from operators.controllers.claim_templates.handlers import ClaimTemplateController
from operators.controllers.claim_templates.planning import (
    CreateClaim,
    CreateGroupClaim,
    RecordGroupStatus,
    RecordStatus,
    Warn,
)
from operators.controllers.claim_templates.settings import ClaimTemplateSettings
from operators.controllers.claims.handlers import ClaimsController
from operators.controllers.claims.settings import ClaimsSettings
from operators.kube.api import ConflictError
from operators.runtime.actions import Create

GATES = {"GenericWorkload": True, "DRAWorkloadResourceClaims": True}
GROUP_UID = "group-uid"
POD_UID = "pod-uid"
LINK = {"name": "link", "resourceClaimTemplateName": "link-template"}


def group(
    *entries: dict[str, str], statuses: dict[str, str] | None = None, **meta: Any
) -> PodGroup:
    body: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": "job",
            "namespace": "ns",
            "uid": GROUP_UID,
            "resourceVersion": "4",
            **meta,
        },
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "resourceClaims": list(entries)},
    }
    if statuses:
        body["status"] = {
            "resourceClaimStatuses": [
                {"name": k, "resourceClaimName": v} for k, v in statuses.items()
            ]
        }
    return PodGroup.load(body)


def pod(
    *entries: dict[str, str], statuses: dict[str, str] | None = None, in_group: bool = True
) -> Pod:
    spec: dict[str, Any] = {
        "schedulerName": "kopf-dra",
        "containers": [{"name": "c"}],
        "resourceClaims": list(entries),
    }
    if in_group:
        spec["schedulingGroup"] = {"podGroupName": "job"}
    body: dict[str, Any] = {
        "metadata": {"name": "worker-0", "namespace": "ns", "uid": POD_UID, "resourceVersion": "7"},
        "spec": spec,
    }
    if statuses:
        body["status"] = {
            "resourceClaimStatuses": [
                {"name": k, "resourceClaimName": v} for k, v in statuses.items()
            ]
        }
    return Pod.load(body)


def template(name: str = "link-template") -> ResourceClaimTemplate:
    return ResourceClaimTemplate.load(
        {
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {
                "metadata": {"labels": {"team": "ml"}, "annotations": {"note": "copied"}},
                "spec": {
                    "devices": {"requests": [{"name": "l", "exactly": {"deviceClassName": "x"}}]}
                },
            },
        }
    )


def owned(
    name: str, entry: str = "link", *, uid: str = GROUP_UID, created: str = "1"
) -> ResourceClaim:
    """A claim generated for PodGroup ``job`` (uid ``uid``) and ``entry``."""
    body = claim_from_template(group(LINK), entry, template())
    body["metadata"].pop("generateName")
    body["metadata"]["ownerReferences"][0]["uid"] = uid
    body["metadata"].update(
        name=name, uid=f"uid-{name}", creationTimestamp=f"2026-01-01T00:00:0{created}Z"
    )
    return ResourceClaim.load(body)


# --- a PodGroup's claims -----------------------------------------------------------------------


def test_a_template_entry_gets_a_claim_made_and_owned_as_upstream_makes_it() -> None:
    actions = planning.plan_group(group(LINK), {"link-template": template()}, {})
    assert len(actions) == 1
    action = actions[0]
    assert isinstance(action, CreateGroupClaim)
    assert action.entry == "link"
    meta = action.claim["metadata"]
    assert meta["generateName"] == "job-link-"
    assert meta["namespace"] == "ns"
    assert meta["labels"] == {"team": "ml"}
    assert meta["annotations"] == {"note": "copied", POD_CLAIM_NAME_ANNOTATION: "link"}
    # No blockOwnerDeletion: upstream leaves it out for a PodGroup.
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "name": "job",
            "uid": GROUP_UID,
            "controller": True,
        }
    ]
    assert action.claim["spec"] == template().spec.spec.dump()


def test_the_generate_name_is_truncated_as_a_pods() -> None:
    long = group(LINK, name="g" * 60)
    (action,) = planning.plan_group(long, {"link-template": template()}, {})
    assert isinstance(action, CreateGroupClaim)
    assert (
        action.claim["metadata"]["generateName"] == "g" * 51 + "-lin"
    )  # 60 * 57 // 66, 4 * 57 // 66


def test_a_claim_left_from_a_crash_before_the_status_write_is_adopted() -> None:
    claims = {
        "job-link-bbbbb": owned("job-link-bbbbb", created="2"),
        "job-link-aaaaa": owned("job-link-aaaaa"),
    }
    actions = planning.plan_group(group(LINK), {"link-template": template()}, claims)
    assert actions == [RecordGroupStatus("link", "job-link-aaaaa")]


def test_claims_of_another_entry_or_an_earlier_group_of_the_name_are_not_adopted() -> None:
    claims = {
        "job-nic-aaaaa": owned("job-nic-aaaaa", entry="nic"),
        "job-link-zzzzz": owned("job-link-zzzzz", uid="earlier-group"),
    }
    actions = planning.plan_group(group(LINK), {"link-template": template()}, claims)
    assert [type(a) for a in actions] == [CreateGroupClaim]


def test_a_recorded_claim_the_group_owns_needs_nothing() -> None:
    g = group(LINK, statuses={"link": "job-link-aaaaa"})
    claims = {"job-link-aaaaa": owned("job-link-aaaaa")}
    assert planning.plan_group(g, {"link-template": template()}, claims) == []


def test_a_recorded_claim_gone_or_not_the_groups_is_made_again() -> None:
    """Upstream's handlePodGroupClaim: a status entry whose claim is gone, or owned by
    someone else, gives way to a new claim (and a new status entry)."""
    g = group(LINK, statuses={"link": "job-link-aaaaa"})
    templates = {"link-template": template()}
    assert [type(a) for a in planning.plan_group(g, templates, {})] == [CreateGroupClaim]
    foreign = {"job-link-aaaaa": owned("job-link-aaaaa", uid="someone")}
    assert [type(a) for a in planning.plan_group(g, templates, foreign)] == [CreateGroupClaim]


def test_a_missing_template_is_reported_with_upstreams_words_and_other_entries_go_on() -> None:
    nic = {"name": "nic", "resourceClaimTemplateName": "nic-template"}
    actions = planning.plan_group(group(LINK, nic), {"nic-template": template("nic-template")}, {})
    assert isinstance(actions[0], Warn)
    assert actions[0].reason == "FailedResourceClaimCreation"
    assert actions[0].message == (
        'PodGroupResourceClaim link: resource claim template "link-template": '
        'resourceclaimtemplate.resource.k8s.io "link-template" not found'
    )
    assert isinstance(actions[1], CreateGroupClaim)
    assert actions[1].entry == "nic"


def test_direct_entries_and_groups_being_deleted_get_nothing() -> None:
    direct = {"name": "link", "resourceClaimName": "shared"}
    assert planning.plan_group(group(direct), {}, {}) == []
    deleting = group(LINK, deletionTimestamp="2026-01-01T00:00:00Z")
    assert planning.plan_group(deleting, {"link-template": template()}, {}) == []


def test_the_status_write_merges_by_entry_at_the_groups_version() -> None:
    patch = planning.group_recording(group(LINK), [RecordGroupStatus("link", "job-link-aaaaa")])
    assert (patch.kind, patch.key, patch.subresource, patch.patch_type) == (
        "PodGroup",
        ObjectKey("ns", "job"),
        "status",
        "strategic",
    )
    assert patch.body() == {
        "status": {
            "resourceClaimStatuses": [{"name": "link", "resourceClaimName": "job-link-aaaaa"}]
        },
        "metadata": {"resourceVersion": "4"},
    }


def test_the_warning_goes_on_the_podgroup() -> None:
    event = planning.group_warning(group(LINK), Warn("FailedResourceClaimCreation", "m"))
    assert (event.obj["apiVersion"], event.obj["kind"], event.obj["metadata"]["uid"]) == (
        "scheduling.k8s.io/v1beta1",
        "PodGroup",
        GROUP_UID,
    )


# --- the member pods ----------------------------------------------------------------------------


def plan(p: Pod, g: PodGroup | None, claims: dict[str, ResourceClaim] | None = None) -> list[Any]:
    templates = {"link-template": template(), "gpu-template": template("gpu-template")}
    return planning.plan_pod(p, templates, claims or {}, g, group_claims=True)


def test_a_matching_entry_records_the_groups_claim_and_creates_none() -> None:
    g = group(LINK, statuses={"link": "job-link-aaaaa"})
    claims = {"job-link-aaaaa": owned("job-link-aaaaa")}
    assert plan(pod(LINK), g, claims) == [RecordStatus("link", "job-link-aaaaa")]
    # The store not showing the claim yet: the group's status names it.
    assert plan(pod(LINK), g) == [RecordStatus("link", "job-link-aaaaa")]
    # Not in the status yet (a crash before the group's status write): the claim it owns.
    assert plan(pod(LINK), group(LINK), claims) == [RecordStatus("link", "job-link-aaaaa")]


def test_a_matching_entry_waits_while_the_group_has_no_claim() -> None:
    assert plan(pod(LINK), group(LINK)) == []


def test_a_recorded_group_claim_needs_nothing() -> None:
    g = group(LINK, statuses={"link": "job-link-aaaaa"})
    claims = {"job-link-aaaaa": owned("job-link-aaaaa")}
    assert plan(pod(LINK, statuses={"link": "job-link-aaaaa"}), g, claims) == []


def test_a_recorded_claim_that_is_gone_gives_way_to_the_groups_current_one() -> None:
    g = group(LINK, statuses={"link": "job-link-bbbbb"})
    claims = {"job-link-bbbbb": owned("job-link-bbbbb")}
    p = pod(LINK, statuses={"link": "job-link-aaaaa"})
    assert plan(p, g, claims) == [RecordStatus("link", "job-link-bbbbb")]


def test_an_entry_differing_in_any_field_is_the_pods_own() -> None:
    """Same name, another template: an ordinary per-pod claim (upstream's BindTo)."""
    other = {"name": "link", "resourceClaimTemplateName": "gpu-template"}
    gpu = {"name": "gpu", "resourceClaimTemplateName": "gpu-template"}
    g = group(LINK, statuses={"link": "job-link-aaaaa"})
    actions = plan(pod(other, gpu), g, {"job-link-aaaaa": owned("job-link-aaaaa")})
    assert [(type(a), a.entry) for a in actions] == [(CreateClaim, "link"), (CreateClaim, "gpu")]
    assert actions[0].claim["metadata"]["generateName"] == "worker-0-link-"


def test_the_pods_own_entries_beside_the_groups_get_their_claims() -> None:
    gpu = {"name": "gpu", "resourceClaimTemplateName": "gpu-template"}
    g = group(LINK, statuses={"link": "job-link-aaaaa"})
    actions = plan(pod(LINK, gpu), g, {"job-link-aaaaa": owned("job-link-aaaaa")})
    assert actions[0] == RecordStatus("link", "job-link-aaaaa")
    assert isinstance(actions[1], CreateClaim)
    assert actions[1].entry == "gpu"


def test_a_pod_whose_group_does_not_exist_yet_gets_nothing() -> None:
    """Upstream's syncPod fails on the missing PodGroup before any claim, its own included."""
    gpu = {"name": "gpu", "resourceClaimTemplateName": "gpu-template"}
    assert plan(pod(LINK, gpu), None) == []
    # A pod of no group is served as ever.
    assert [type(a) for a in plan(pod(gpu, in_group=False), None)] == [CreateClaim]


def test_with_the_gates_off_the_pod_path_is_unchanged() -> None:
    """The group is ignored: a matching entry is the pod's own, a missing group waits for
    nothing."""
    g = group(LINK, statuses={"link": "job-link-aaaaa"})
    templates = {"link-template": template()}
    for given in (g, None):
        actions = planning.plan_pod(pod(LINK), templates, {}, given, group_claims=False)
        assert [type(a) for a in actions] == [CreateClaim]
    assert planning.plan_pod(pod(LINK), templates, {}) == planning.plan_pod(
        pod(LINK), templates, {}, g
    )


def test_a_group_claim_is_settled_once_its_members_and_group_record_it() -> None:
    claim = owned("job-link-aaaaa").dump()
    recording = pod(LINK, statuses={"link": "job-link-aaaaa"}).dump()
    assert planning.records(recording, claim)
    assert not planning.records(pod(LINK).dump(), claim)
    assert not planning.records(
        pod(LINK, statuses={"link": "job-link-aaaaa"}, in_group=False).dump(), claim
    )
    assert planning.group_records(group(LINK, statuses={"link": "job-link-aaaaa"}).dump(), claim)
    assert not planning.group_records(group(LINK).dump(), claim)
    assert not planning.group_records(None, claim)
    conditions = group(LINK).dump()
    conditions["status"] = {"conditions": [{"type": "PodGroupInitiallyScheduled"}]}
    assert planning.group_signature(conditions) == planning.group_signature(group(LINK).dump())
    assert planning.group_signature(
        group(LINK, statuses={"link": "x"}).dump()
    ) != planning.group_signature(group(LINK).dump())


# --- the controller's wiring ---------------------------------------------------------------------


def test_podgroups_are_watched_only_with_both_gates_on_1_37() -> None:
    cases = [
        (ClaimTemplateSettings(feature_gates=GATES), True),
        (ClaimTemplateSettings(), False),
        (ClaimTemplateSettings(feature_gates={"GenericWorkload": True}), False),
        (ClaimTemplateSettings(kubernetes_version="1.36", feature_gates=GATES), False),
    ]
    for settings, watched in cases:
        controller = ClaimTemplateController(settings)
        assert controller.group_claims is watched
        assert ("PodGroup" in controller.feeds_by_kind()) is watched
        assert (controller.group_queue is not None) is watched
        assert [s.kind for s in controller.stores.stores][-1] == (
            "PodGroup" if watched else "ResourceClaimTemplate"
        )


def _controller(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[ClaimTemplateController, list[Any], list[Any]]:
    controller = ClaimTemplateController(ClaimTemplateSettings(feature_gates=GATES, all_pods=True))
    pods: list[Any] = []
    groups: list[Any] = []
    monkeypatch.setattr(controller.queue, "add", pods.append)
    assert controller.group_queue is not None
    monkeypatch.setattr(controller.group_queue, "add", groups.append)
    return controller, pods, groups


def test_a_podgroup_event_queues_the_group_and_its_member_pods(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    controller, pods, groups = _controller(monkeypatch)
    member = {**pod(LINK).dump(), "kind": "Pod"}
    controller.on_pod({"type": "ADDED", "body": member})
    pods.clear()
    body = group(LINK).dump()
    controller.on_podgroup({"type": "ADDED", "body": body})
    assert (groups, pods) == ([ObjectKey("ns", "job")], [ObjectKey("ns", "worker-0")])
    # The scheduler's condition: nothing a plan reads.
    groups.clear()
    pods.clear()
    conditions = {**body, "metadata": {**body["metadata"], "resourceVersion": "5"}}
    conditions["status"] = {
        "conditions": [{"type": "PodGroupInitiallyScheduled", "status": "True"}]
    }
    controller.on_podgroup({"type": "MODIFIED", "body": conditions})
    assert (groups, pods) == ([], [])
    # Gone: the members are planned again (and wait for it).
    controller.on_podgroup({"type": "DELETED", "body": conditions})
    assert (groups, pods) == ([], [ObjectKey("ns", "worker-0")])


def test_a_template_or_claim_event_queues_the_group_that_needs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    controller, _, groups = _controller(monkeypatch)
    controller.on_podgroup({"type": "ADDED", "body": group(LINK).dump()})
    groups.clear()
    controller.on_template(
        {"type": "ADDED", "body": {**template().dump(), "kind": "ResourceClaimTemplate"}}
    )
    assert groups == [ObjectKey("ns", "job")]
    groups.clear()
    claim = {**owned("job-link-aaaaa").dump(), "kind": "ResourceClaim"}
    claim["metadata"]["resourceVersion"] = "9"
    controller.on_claim({"type": "ADDED", "body": claim})
    assert groups == [ObjectKey("ns", "job")]  # not recorded yet
    recorded = group(LINK, statuses={"link": "job-link-aaaaa"}, resourceVersion="6").dump()
    controller.on_podgroup({"type": "MODIFIED", "body": recorded})
    groups.clear()
    allocated = {**claim, "metadata": {**claim["metadata"], "resourceVersion": "10"}}
    allocated["status"] = {"allocation": {"devices": {"results": []}}}
    controller.on_claim({"type": "MODIFIED", "body": allocated})
    assert groups == []  # recorded: settled


async def test_a_group_reconcile_creates_records_and_a_retry_adopts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The group's claim created, then its status write fails with a 409: the retry adopts
    the claim it created (the mutation cache), never a second one."""
    controller, _, _ = _controller(monkeypatch)
    controller.templates.apply("ADDED", {**template().dump(), "kind": "ResourceClaimTemplate"})
    controller.on_podgroup({"type": "ADDED", "body": group(LINK).dump()})
    writes: list[Any] = []

    async def apply(action: Any) -> dict[str, Any]:
        writes.append(action)
        if isinstance(action, Create):
            return owned("job-link-aaaaa").dump()
        if len(writes) == 2:
            raise ConflictError(409, "Conflict", "conflict", {})
        return group(LINK, statuses={"link": "job-link-aaaaa"}).dump()

    monkeypatch.setattr(controller, "apply", apply)
    with pytest.raises(ConflictError):
        await controller.reconcile_group(ObjectKey("ns", "job"))
    await controller.reconcile_group(ObjectKey("ns", "job"))
    assert [type(w).__name__ for w in writes] == ["Create", "Patch", "Patch"]
    assert writes[2].patch == {
        "status": {
            "resourceClaimStatuses": [{"name": "link", "resourceClaimName": "job-link-aaaaa"}]
        }
    }


def test_the_claims_process_feeds_one_podgroup_watch_to_both_controllers() -> None:
    on = ClaimsController(ClaimsSettings(feature_gates=GATES))
    assert on.templates.group_claims
    assert on.reservations.group_claims
    assert [i.kind for i in on.feeds.informers][-1] == "PodGroup"
    off = ClaimsController(ClaimsSettings())
    assert "PodGroup" not in [i.kind for i in off.feeds.informers]
