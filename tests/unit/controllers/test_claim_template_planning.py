"""Pure decisions of the claim-template controller (kube-controller-manager conventions)."""

from __future__ import annotations

from typing import Any

import pytest

from operators.api import templates
from operators.api.core import Pod
from operators.api.names import POD_CLAIM_NAME_ANNOTATION
from operators.api.resource import ResourceClaim, ResourceClaimTemplate
from operators.controllers.claim_templates import planning
from operators.controllers.claim_templates.planning import (
    CreateClaim,
    DeleteDuplicate,
    RecordStatus,
    Warn,
)

POD_UID = "pod-uid-1"


def pod(
    *entries: tuple[str, str],
    statuses: dict[str, str | None] | None = None,
    phase: str | None = None,
    deleting: bool = False,
) -> Pod:
    meta: dict[str, Any] = {
        "name": "trainer",
        "namespace": "ns",
        "uid": POD_UID,
        "resourceVersion": "7",
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status: dict[str, Any] = {}
    if statuses:
        status["resourceClaimStatuses"] = [
            {"name": k, "resourceClaimName": v} if v else {"name": k} for k, v in statuses.items()
        ]
    if phase:
        status["phase"] = phase
    return Pod.load(
        {
            "metadata": meta,
            "spec": {
                "schedulerName": "kopf-dra",
                "containers": [{"name": "c"}],
                "resourceClaims": [{"name": n, "resourceClaimTemplateName": t} for n, t in entries],
            },
            "status": status,
        }
    )


def template(name: str = "gpu-template") -> ResourceClaimTemplate:
    return ResourceClaimTemplate.load(
        {
            "metadata": {"name": name, "namespace": "ns", "labels": {"ignored": "yes"}},
            "spec": {
                "metadata": {"labels": {"team": "ml"}, "annotations": {"note": "copied"}},
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
                        ]
                    }
                },
            },
        }
    )


def generated(
    name: str,
    entry: str,
    uid: str = POD_UID,
    *,
    created: str = "2026-01-01T00:00:00Z",
    allocated: bool = False,
) -> ResourceClaim:
    body: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "creationTimestamp": created,
            "annotations": {POD_CLAIM_NAME_ANNOTATION: entry},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": "trainer",
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"devices": {}},
    }
    if allocated:
        body["status"] = {"allocation": {"devices": {"results": []}}}
    return ResourceClaim.load(body)


@pytest.mark.parametrize(
    ("pod_name", "entry", "expected"),
    [
        ("web", "gpu", "web-gpu-"),
        ("a" * 39, "b" * 16, "a" * 39 + "-" + "b" * 16 + "-"),  # exactly 57: kept
        # Longer: each part keeps len * 57 // len("<pod>-<entry>-"), no trailing hyphen.
        ("a" * 40, "b" * 16, "a" * 39 + "-" + "b" * 15),
        ("a" * 60, "gpu", "a" * 52 + "-" + "gp"),
        ("p", "c" * 70, "-" + "c" * 54),
    ],
)
def test_generate_name_truncates_both_parts_like_kube_controller_manager(
    pod_name: str, entry: str, expected: str
) -> None:
    assert templates.generate_name(pod_name, entry) == expected
    assert len(expected) <= 57


def test_claim_is_created_from_the_template_spec_with_kcm_metadata() -> None:
    actions = planning.plan_pod(pod(("gpu", "gpu-template")), {"gpu-template": template()}, {})
    assert len(actions) == 1
    action = actions[0]
    assert isinstance(action, CreateClaim)
    meta = action.claim["metadata"]
    assert meta["generateName"] == "trainer-gpu-"
    assert meta["namespace"] == "ns"
    assert meta["labels"] == {"team": "ml"}  # from spec.metadata, not the template's own
    assert meta["annotations"] == {"note": "copied", POD_CLAIM_NAME_ANNOTATION: "gpu"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "trainer",
            "uid": POD_UID,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert action.claim["spec"] == template().spec.spec.dump()


def test_existing_generated_claim_is_adopted_not_duplicated() -> None:
    existing = generated("trainer-gpu-abcde", "gpu")
    actions = planning.plan_pod(
        pod(("gpu", "gpu-template")),
        {"gpu-template": template()},
        {"trainer-gpu-abcde": existing},
    )
    assert actions == [RecordStatus("gpu", "trainer-gpu-abcde")]


def test_recorded_claim_needs_nothing() -> None:
    p = pod(("gpu", "gpu-template"), statuses={"gpu": "trainer-gpu-abcde"})
    claims = {"trainer-gpu-abcde": generated("trainer-gpu-abcde", "gpu")}
    assert planning.plan_pod(p, {"gpu-template": template()}, claims) == []


def test_duplicate_is_deleted_and_recorded_claim_wins() -> None:
    p = pod(("gpu", "gpu-template"), statuses={"gpu": "trainer-gpu-bbbbb"})
    older = generated("trainer-gpu-aaaaa", "gpu", created="2026-01-01T00:00:00Z")
    recorded = generated("trainer-gpu-bbbbb", "gpu", created="2026-01-01T00:00:01Z")
    actions = planning.plan_pod(
        p,
        {"gpu-template": template()},
        {"trainer-gpu-aaaaa": older, "trainer-gpu-bbbbb": recorded},
    )
    assert actions == [DeleteDuplicate("gpu", "trainer-gpu-aaaaa", "uid-trainer-gpu-aaaaa")]


def test_unrecorded_duplicates_keep_the_oldest_and_spare_allocated_ones() -> None:
    old = generated("trainer-gpu-aaaaa", "gpu", created="2026-01-01T00:00:00Z")
    new = generated("trainer-gpu-bbbbb", "gpu", created="2026-01-01T00:00:05Z")
    busy = generated("trainer-gpu-ccccc", "gpu", created="2026-01-01T00:00:09Z", allocated=True)
    actions = planning.plan_pod(
        pod(("gpu", "gpu-template")),
        {"gpu-template": template()},
        {c.metadata.name or "": c for c in (new, busy, old)},
    )
    assert actions == [
        RecordStatus("gpu", "trainer-gpu-aaaaa"),
        DeleteDuplicate("gpu", "trainer-gpu-bbbbb", "uid-trainer-gpu-bbbbb"),
    ]


def test_missing_template_is_reported_naming_it() -> None:
    actions = planning.plan_pod(pod(("gpu", "absent")), {}, {})
    assert len(actions) == 1
    assert isinstance(actions[0], Warn)
    assert actions[0].reason == "FailedResourceClaimCreation"
    assert "ResourceClaimTemplate absent not found" in actions[0].message


def test_recorded_claim_owned_by_someone_else_is_a_conflict_not_overwritten() -> None:
    p = pod(("gpu", "gpu-template"), statuses={"gpu": "shared"})
    foreign = generated("shared", "gpu", uid="another-pod")
    actions = planning.plan_pod(p, {"gpu-template": template()}, {"shared": foreign})
    assert len(actions) == 1
    assert isinstance(actions[0], Warn)
    assert actions[0].reason == "ResourceClaimConflict"
    assert "shared" in actions[0].message


@pytest.mark.parametrize(
    "kwargs", [{"phase": "Succeeded"}, {"phase": "Failed"}, {"deleting": True}]
)
def test_finished_or_deleting_pods_get_no_new_claims(kwargs: dict[str, Any]) -> None:
    p = pod(("gpu", "gpu-template"), **kwargs)
    assert planning.plan_pod(p, {"gpu-template": template()}, {}) == []


def test_a_terminated_pod_records_its_generated_claim_until_1_38() -> None:
    """kube-controller-manager 1.37's syncPod still records a claim generated for a pod that
    has terminated; 1.38's leaves such a pod alone."""
    existing = generated("trainer-gpu-abcde", "gpu")
    done = pod(("gpu", "gpu-template"), phase="Succeeded")
    objects = ({"gpu-template": template()}, {"trainer-gpu-abcde": existing})
    assert planning.plan_pod(done, *objects) == [RecordStatus("gpu", "trainer-gpu-abcde")]
    assert planning.plan_pod(done, *objects, terminal_untouched=True) == []
    running = pod(("gpu", "gpu-template"))
    assert planning.plan_pod(running, *objects, terminal_untouched=True) == [
        RecordStatus("gpu", "trainer-gpu-abcde")
    ]


def test_direct_claim_references_are_left_alone() -> None:
    p = Pod.load(
        {
            "metadata": {"name": "x", "namespace": "ns", "uid": "u"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "mine"}]},
        }
    )
    assert planning.plan_pod(p, {}, {}) == []


def test_claims_of_another_entry_or_pod_are_not_adopted() -> None:
    other_entry = generated("trainer-nic-aaaaa", "nic")
    other_pod = generated("trainer-gpu-zzzzz", "gpu", uid="previous-incarnation")
    actions = planning.plan_pod(
        pod(("gpu", "gpu-template")),
        {"gpu-template": template()},
        {"trainer-nic-aaaaa": other_entry, "trainer-gpu-zzzzz": other_pod},
    )
    assert [type(a) for a in actions] == [CreateClaim]


@pytest.mark.parametrize(
    ("scheduler", "names", "all_pods", "expected"),
    [
        ("kopf-dra", ["kopf-dra"], False, True),
        ("default-scheduler", ["kopf-dra"], False, False),
        (None, ["default-scheduler"], False, True),
        ("default-scheduler", ["kopf-dra"], True, True),
    ],
)
def test_scope_by_scheduler_name(
    scheduler: str | None, names: list[str], all_pods: bool, expected: bool
) -> None:
    p = Pod.load({"spec": {"schedulerName": scheduler} if scheduler else {}})
    assert planning.in_scope(p, names, all_pods) is expected


# --- which events bring a reconcile ------------------------------------------------------------


def test_updates_a_pods_plan_does_not_read_bring_no_reconcile() -> None:
    """The scheduler's condition, the binding and a label leave the signature (and so the plan)
    as it was; the recorded claims, the phase and the deletion change it."""
    waiting = pod(("gpu", "gpu-template")).dump()
    bound = pod(("gpu", "gpu-template")).dump()
    bound["spec"]["nodeName"] = "node-1"
    bound["metadata"]["labels"] = {"app": "x"}
    bound["metadata"]["resourceVersion"] = "8"
    bound["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    assert planning.pod_signature(waiting) == planning.pod_signature(bound)
    templates = {"gpu-template": template()}
    assert planning.plan_pod(Pod.load(waiting), templates, {}) == planning.plan_pod(
        Pod.load(bound), templates, {}
    )
    for changed in (
        pod(("gpu", "gpu-template"), statuses={"gpu": "trainer-gpu-abcde"}),
        pod(("gpu", "gpu-template"), phase="Succeeded"),
        pod(("gpu", "gpu-template"), deleting=True),
        pod(("gpu", "gpu-template"), ("nic", "gpu-template")),
    ):
        assert planning.pod_signature(changed.dump()) != planning.pod_signature(waiting)
    assert planning.pod_signature(None) is None


def test_a_claim_matters_to_its_pods_plan_until_the_pod_records_it() -> None:
    claim = generated("trainer-gpu-abcde", "gpu").dump()
    reserved = generated("trainer-gpu-abcde", "gpu").dump()
    reserved["status"] = {"reservedFor": [{"resource": "pods", "name": "trainer", "uid": "u"}]}
    reserved["metadata"]["resourceVersion"] = "9"
    assert planning.claim_signature(claim) == planning.claim_signature(reserved)
    allocated = generated("trainer-gpu-abcde", "gpu", allocated=True).dump()
    assert planning.claim_signature(allocated) != planning.claim_signature(claim)

    recording = pod(("gpu", "gpu-template"), statuses={"gpu": "trainer-gpu-abcde"}).dump()
    assert planning.records(recording, claim)
    assert not planning.records(None, claim)
    assert not planning.records(pod(("gpu", "gpu-template")).dump(), claim)
    other_entry = pod(("nic", "gpu-template"), statuses={"nic": "trainer-gpu-abcde"}).dump()
    assert not planning.records(other_entry, claim)
    duplicate = generated("trainer-gpu-fghij", "gpu").dump()
    assert not planning.records(recording, duplicate)
    someone_elses = generated("trainer-gpu-abcde", "gpu", uid="another-pod").dump()
    assert not planning.records(recording, someone_elses)


def test_a_refused_create_is_worded_as_kube_controller_managers_and_a_quota_is_told_apart() -> None:
    action = planning.CreateClaim("gpu", {"metadata": {"generateName": "p-gpu-"}})
    quota = 'resourceclaims.resource.k8s.io "p-gpu-ab12c" is forbidden: exceeded quota: gpus'
    warn = planning.refused(action, quota)
    assert (warn.reason, warn.message) == (
        "FailedResourceClaimCreation",
        f"PodResourceClaim gpu: create ResourceClaim : {quota}",
    )
    assert planning.over_quota(quota)
    assert not planning.over_quota("admission webhook denied the request")


def test_a_refused_group_claim_is_worded_as_kube_controller_managers_podgroup_event() -> None:
    action = planning.CreateGroupClaim("link", {"metadata": {"generateName": "training-link-"}})
    warn = planning.refused(action, "exceeded quota: links")
    assert (
        warn.message == "PodGroupResourceClaim link: create ResourceClaim : exceeded quota: links"
    )
