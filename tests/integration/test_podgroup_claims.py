"""The claim controllers with 1.37's PodGroup claims (GenericWorkload + DRAWorkloadResourceClaims,
both on in the local control plane, scheduling.k8s.io/v1beta1 served) against the real API
server, as kube-controller-manager v1.37.2's resourceclaim controller behaves: a PodGroup's
template entry gets one claim owned by it and named in its status, a member pod's matching entry
records that claim, and the PodGroup's reservation goes with the PodGroup alone.

Tests play the scheduler (allocate, reserve for the PodGroup), the kubelet (pod phases) and the
podgroup-protection controller (the PodGroup's finalizer); no garbage collector runs here.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

import kopf
import pytest

from operators.api.features import Release
from operators.api.names import DELETE_PROTECTION_FINALIZER, POD_CLAIM_NAME_ANNOTATION
from operators.controllers.claim_templates import app as templates_app
from operators.controllers.claim_templates.settings import ClaimTemplateSettings
from operators.controllers.claims import app as claims_app
from operators.controllers.claims.settings import ClaimsSettings
from operators.controllers.reservations.handlers import ReservationController
from operators.controllers.reservations.settings import ReservationSettings
from operators.kube.api import KubeAPI, NotFoundError
from operators.localcluster import controlplane
from operators.localcluster.controlplane import feature_gates
from operators.runtime.app import register_login
from tests.integration.helpers import (
    ALLOCATION,
    device_quota,
    eventually,
    pod_body,
    running_operator,
    template_body,
    unique,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        Release.parse(controlplane.kubernetes_version()) < Release(1, 37)
        or os.environ.get("KOPF_DRA_USE_EXISTING_CLUSTER") == "1",
        reason="PodGroup claims: Kubernetes 1.37's local control plane (GenericWorkload and "
        "DRAWorkloadResourceClaims on, scheduling.k8s.io/v1beta1 served)",
    ),
]

LINK = {"name": "link", "resourceClaimTemplateName": "link-template"}
GPU = {"name": "gpu", "resourceClaimTemplateName": "gpu-template"}


def settings(cls: Any, kubeconfig: Any, component: str) -> Any:
    """The control plane's gates, as in a cluster; a Lease of the test's own."""
    return cls(
        kubeconfig=str(kubeconfig), feature_gates=feature_gates(), lease_name=unique(component)
    )


@pytest.fixture(params=["separate", "claims"])
async def claim_controllers(request: pytest.FixtureRequest, kubeconfig: Any) -> AsyncIterator[None]:
    """claim-templates and reservations as two operators, or as one (``kopf-dra run claims``:
    one PodGroup watch feeding both)."""
    if request.param == "claims":
        config = settings(ClaimsSettings, kubeconfig, "claim-templates")
        async with running_operator(claims_app.APP.build_registry(config), "claims"):
            yield
        return
    async with (
        running_operator(
            templates_app.APP.build_registry(
                settings(ClaimTemplateSettings, kubeconfig, "claim-templates")
            ),
            "claim-templates",
        ),
        running_operator(
            _reservations(settings(ReservationSettings, kubeconfig, "reservations"))[0],
            "reservations",
        ),
    ):
        yield


def _reservations(config: ReservationSettings) -> tuple[Any, ReservationController]:
    registry = kopf.OperatorRegistry()
    register_login(registry, config.kubeconfig)
    controller = ReservationController(config)
    controller.register(registry)
    return registry, controller


@pytest.fixture
async def claim_templates(kubeconfig: Any) -> AsyncIterator[None]:
    config = settings(ClaimTemplateSettings, kubeconfig, "claim-templates")
    async with running_operator(templates_app.APP.build_registry(config), "claim-templates"):
        yield


@pytest.fixture
async def reservations(kubeconfig: Any) -> AsyncIterator[ReservationController]:
    """The running cleanup, exposed so that a test can wait until it is idle."""
    registry, controller = _reservations(settings(ReservationSettings, kubeconfig, "reservations"))
    async with running_operator(registry, "reservations"):
        yield controller


def group_body(namespace: str, *claims: dict[str, str], name: str = "job") -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "resourceClaims": list(claims)},
    }


def member_body(name: str, namespace: str, *claims: dict[str, str]) -> dict[str, Any]:
    body = pod_body(name, namespace, *claims)
    body["spec"]["schedulingGroup"] = {"podGroupName": "job"}
    return body


async def group_claim(kube: KubeAPI, namespace: str, entry: str = "link") -> str | None:
    """The claim the PodGroup's status names for ``entry``."""
    group = await kube.get("PodGroup", "job", namespace)
    for status in (group.get("status") or {}).get("resourceClaimStatuses") or []:
        if status["name"] == entry:
            name: str | None = status.get("resourceClaimName")
            return name
    return None


async def pod_claims(kube: KubeAPI, namespace: str, pod: str) -> dict[str, str | None]:
    body = await kube.get("Pod", pod, namespace)
    return {
        s["name"]: s.get("resourceClaimName")
        for s in (body.get("status") or {}).get("resourceClaimStatuses") or []
    }


async def owned_by(kube: KubeAPI, namespace: str, uid: str) -> list[dict[str, Any]]:
    items = (await kube.list("ResourceClaim", namespace))["items"]
    return [
        c for c in items if any(r["uid"] == uid for r in c["metadata"].get("ownerReferences", []))
    ]


async def gone(kube: KubeAPI, kind: str, name: str, namespace: str) -> bool:
    try:
        await kube.get(kind, name, namespace)
    except NotFoundError:
        return True
    return False


@pytest.mark.usefixtures("claim_controllers")
async def test_a_podgroup_gets_one_claim_and_its_member_records_it(
    kube: KubeAPI, namespace: str
) -> None:
    """The member comes first: it waits for its PodGroup (not even its own claim is made, as
    upstream), and the PodGroup's arrival brings it back."""
    await kube.create(template_body("link-template", namespace))
    await kube.create(template_body("gpu-template", namespace))
    pod = await kube.create(member_body("worker-0", namespace, LINK, GPU))
    group = await kube.create(group_body(namespace, LINK))

    name = await eventually(lambda: group_claim(kube, namespace), what="the PodGroup's claim")
    (claim,) = await owned_by(kube, namespace, group["metadata"]["uid"])
    meta = claim["metadata"]
    assert meta["name"] == name
    assert meta["generateName"] == "job-link-"
    assert meta["annotations"][POD_CLAIM_NAME_ANNOTATION] == "link"
    assert meta["labels"] == {"from-template": "link-template"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "name": "job",
            "uid": group["metadata"]["uid"],
            "controller": True,
        }
    ]

    async def both_recorded() -> dict[str, str | None] | None:
        recorded = await pod_claims(kube, namespace, "worker-0")
        return recorded if len(recorded) == 2 else None

    recorded = await eventually(both_recorded, what="the member's two claims recorded")
    assert recorded["link"] == name  # the group's, not one of its own
    (own,) = await owned_by(kube, namespace, pod["metadata"]["uid"])
    assert own["metadata"]["name"] == recorded["gpu"]
    assert own["metadata"]["annotations"][POD_CLAIM_NAME_ANNOTATION] == "gpu"
    assert own["metadata"]["generateName"] == "worker-0-gpu-"

    # A second member joins later: it records the same claim, and no claim more is made.
    await kube.create(member_body("worker-1", namespace, LINK))
    later = await eventually(
        lambda: pod_claims(kube, namespace, "worker-1"), what="the second member's record"
    )
    assert later == {"link": name}
    assert len((await kube.list("ResourceClaim", namespace))["items"]) == 2


@pytest.mark.usefixtures("claim_templates")
async def test_a_missing_template_is_an_event_on_the_podgroup_then_the_claim_comes(
    kube: KubeAPI, namespace: str
) -> None:
    group = await kube.create(group_body(namespace, LINK))

    async def warnings() -> list[dict[str, Any]]:
        items = (await kube.list("Event", namespace))["items"]
        return [
            e
            for e in items
            if e["involvedObject"].get("kind") == "PodGroup"
            and e["involvedObject"].get("uid") == group["metadata"]["uid"]
            and e["reason"] == "FailedResourceClaimCreation"
        ]

    (event,) = await eventually(warnings, what="a Warning event on the PodGroup")
    assert event["type"] == "Warning"
    assert event["message"] == (
        'PodGroupResourceClaim link: resource claim template "link-template": '
        'resourceclaimtemplate.resource.k8s.io "link-template" not found'
    )
    assert event["involvedObject"]["apiVersion"] == "scheduling.k8s.io/v1beta1"
    await kube.create(template_body("link-template", namespace))
    # The template's event brings the PodGroup back, well before any retry could.
    await eventually(lambda: group_claim(kube, namespace), within=10, what="the claim made")


async def test_the_podgroups_reservation_goes_with_the_podgroup_alone(
    kube: KubeAPI, namespace: str, claim_templates: None, reservations: ReservationController
) -> None:
    """Reserved for the PodGroup and a pod: the pod finishing removes its entry only; the
    PodGroup deleted (and gone, its finalizer removed) removes its entry and deallocates in
    the same write. The claim the PodGroup owns is the garbage collector's: never deleted."""
    await kube.create(template_body("link-template", namespace))
    group = await kube.create(group_body(namespace, LINK))
    pod = await kube.create(member_body("worker-0", namespace, LINK))
    name = await eventually(lambda: group_claim(kube, namespace), what="the PodGroup's claim")
    # Play the scheduler: finalizer, then allocation + reservation in one status write.
    body = await kube.get("ResourceClaim", name, namespace)
    body["metadata"].setdefault("finalizers", []).append(DELETE_PROTECTION_FINALIZER)
    body = await kube.replace(body)
    body["status"] = {
        "allocation": ALLOCATION,
        "reservedFor": [
            {
                "apiGroup": "scheduling.k8s.io",
                "resource": "podgroups",
                "name": "job",
                "uid": group["metadata"]["uid"],
            },
            {"resource": "pods", "name": "worker-0", "uid": pod["metadata"]["uid"]},
        ],
    }
    await kube.replace_status(body)

    async def status() -> dict[str, Any]:
        got: dict[str, Any] = (await kube.get("ResourceClaim", name, namespace))["status"]
        return got

    async def consumers() -> list[str]:
        return [r["resource"] for r in (await status()).get("reservedFor") or []]

    before = reservations.queue.processed
    # A patch, as a kubelet reports the phase: the claim-template controller may still be
    # writing the pod's claim statuses (a read-modify-replace would race it into a 409).
    await kube.patch(
        "Pod", "worker-0", {"status": {"phase": "Succeeded"}}, namespace, subresource="status"
    )
    await eventually(
        lambda: _equals(consumers(), ["podgroups"]), what="the pod's entry gone, the group's kept"
    )
    await eventually(lambda: _idle(reservations, before), what="the cleanup idle")
    assert await consumers() == ["podgroups"]
    assert (await status())["allocation"]

    before = reservations.queue.processed
    await kube.delete("PodGroup", "job", namespace)
    # Play the podgroup-protection controller: no active pod names the group any more.
    with contextlib.suppress(NotFoundError):
        await kube.patch("PodGroup", "job", {"metadata": {"finalizers": None}}, namespace)
    await eventually(lambda: gone(kube, "PodGroup", "job", namespace), what="the PodGroup gone")

    async def deallocated() -> bool:
        now = await status()
        return not now.get("reservedFor") and not now.get("allocation")

    await eventually(deallocated, what="unreserved and deallocated")
    await eventually(lambda: _idle(reservations, before), what="the cleanup idle")
    claim = await kube.get("ResourceClaim", name, namespace)  # not deleted by the cleanup
    assert not claim["metadata"].get("deletionTimestamp")


async def _idle(controller: ReservationController, after: int) -> bool:
    return controller.queue.processed > after and len(controller.queue) == 0


async def _equals(value: Any, expected: Any) -> bool:
    return bool(await value == expected)


@pytest.mark.usefixtures("claim_templates")
async def test_a_group_claim_over_its_device_quota_is_an_event_on_the_podgroup_until_it_frees(
    kube: KubeAPI, namespace: str
) -> None:
    """As kube-controller-manager: the quota's refusal is a FailedResourceClaimCreation Event
    on the PodGroup ("PodGroupResourceClaim E: create ResourceClaim : ..."); the claim is made
    once the quota's usage drops (a ResourceQuota change retries the group at once)."""
    await device_quota(kube, namespace, hard=1, used=1)
    await kube.create(template_body("link-template", namespace))
    group = await kube.create(group_body(namespace, LINK))

    async def warnings() -> list[dict[str, Any]]:
        items = (await kube.list("Event", namespace))["items"]
        return [
            e
            for e in items
            if e["involvedObject"].get("uid") == group["metadata"]["uid"]
            and e["reason"] == "FailedResourceClaimCreation"
        ]

    (event, *_) = await eventually(warnings, what="a Warning event on the PodGroup")
    assert event["message"].startswith("PodGroupResourceClaim link: create ResourceClaim : ")
    assert "exceeded quota: gpus" in event["message"]
    assert await group_claim(kube, namespace) is None
    await device_quota(kube, namespace, hard=1, used=0)
    await eventually(lambda: group_claim(kube, namespace), within=60, what="the claim made")
