"""The claim-template controller and the reservation cleanup against the real API server.

Tests play the scheduler (allocate, reserve) and the kubelet (pod phases) where needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator
from typing import Any

import kopf
import pytest
from kubernetes_asyncio import client

from operators.api.core import Pod
from operators.api.names import DELETE_PROTECTION_FINALIZER, POD_CLAIM_NAME_ANNOTATION
from operators.api.resource import ResourceClaimTemplate
from operators.api.templates import claim_from_template
from operators.controllers.claim_templates import app as templates_app
from operators.controllers.claim_templates.settings import ClaimTemplateSettings
from operators.controllers.claims import app as claims_app
from operators.controllers.claims.settings import ClaimsSettings
from operators.controllers.reservations import app as reservations_app
from operators.controllers.reservations.handlers import ReservationController
from operators.controllers.reservations.settings import ReservationSettings
from operators.kube.api import KubeAPI, NotFoundError
from operators.runtime.app import OperatorApp, register_login
from tests.integration.helpers import (
    ALLOCATION,
    claim_body,
    device_quota,
    eventually,
    pod_body,
    running_operator,
    template_body,
    unique,
)

TEMPLATE_ENTRY = {"name": "gpu", "resourceClaimTemplateName": "gpu-template"}


@pytest.fixture
def kube(api: client.ApiClient) -> KubeAPI:
    return KubeAPI(api)


@pytest.fixture
async def claim_templates(kubeconfig: Any) -> AsyncIterator[None]:
    settings = ClaimTemplateSettings(kubeconfig=str(kubeconfig))
    async with running_operator(templates_app.APP.build_registry(settings), "claim-templates"):
        yield


@pytest.fixture
async def reservations(kubeconfig: Any) -> AsyncIterator[ReservationController]:
    """The running cleanup, exposed so tests can wait until it has looked at a change."""
    settings = ReservationSettings(kubeconfig=str(kubeconfig))
    registry = kopf.OperatorRegistry()
    register_login(registry, settings.kubeconfig)
    controller = ReservationController(settings)
    controller.register(registry)
    async with running_operator(registry, "reservations"):
        yield controller


@pytest.fixture(params=["separate", "claims"])
async def claim_controllers(request: pytest.FixtureRequest, kubeconfig: Any) -> AsyncIterator[None]:
    """claim-templates and reservations as two operators, or as one (``kopf-dra run claims``)."""
    if request.param == "claims":
        settings = ClaimsSettings(kubeconfig=str(kubeconfig))
        async with running_operator(claims_app.APP.build_registry(settings), "claims"):
            yield
        return
    config = str(kubeconfig)
    async with (
        running_operator(
            templates_app.APP.build_registry(ClaimTemplateSettings(kubeconfig=config)),
            "claim-templates",
        ),
        running_operator(
            reservations_app.APP.build_registry(ReservationSettings(kubeconfig=config)),
            "reservations",
        ),
    ):
        yield


async def generated_claims(kube: KubeAPI, namespace: str, pod: dict[str, Any]) -> list[Any]:
    items = (await kube.list("ResourceClaim", namespace))["items"]
    return [
        c
        for c in items
        if any(
            r.get("uid") == pod["metadata"]["uid"] for r in c["metadata"].get("ownerReferences", [])
        )
    ]


async def recorded_claim(kube: KubeAPI, namespace: str, pod_name: str) -> str | None:
    pod = await kube.get("Pod", pod_name, namespace)
    for status in pod.get("status", {}).get("resourceClaimStatuses") or []:
        if status["name"] == "gpu":
            name: str | None = status.get("resourceClaimName")
            return name
    return None


async def events_for(kube: KubeAPI, namespace: str, name: str, reason: str) -> list[Any]:
    items = (await kube.list("Event", namespace))["items"]
    return [e for e in items if e["involvedObject"].get("name") == name and e["reason"] == reason]


async def allocate_and_reserve(
    kube: KubeAPI, namespace: str, claim: str, *pods: dict[str, Any]
) -> dict[str, Any]:
    """What the scheduler does: finalizer, then allocation + reservedFor in one status write."""
    body = await kube.get("ResourceClaim", claim, namespace)
    body["metadata"].setdefault("finalizers", []).append(DELETE_PROTECTION_FINALIZER)
    body = await kube.replace(body)
    body["status"] = {
        "allocation": ALLOCATION,
        "reservedFor": [
            {"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}
            for p in pods
        ],
    }
    return await kube.replace_status(body)


async def set_phase(kube: KubeAPI, pod: dict[str, Any], phase: str) -> None:
    """Play kubelet."""
    fresh = await kube.get("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
    fresh["status"]["phase"] = phase
    await kube.replace_status(fresh)


async def gone(kube: KubeAPI, kind: str, name: str, namespace: str) -> bool:
    try:
        await kube.get(kind, name, namespace)
    except NotFoundError:
        return True
    return False


# --- claim-template controller -----------------------------------------------------------


@pytest.mark.usefixtures("claim_templates")
async def test_pod_with_template_gets_exactly_one_claim(kube: KubeAPI, namespace: str) -> None:
    await kube.create(template_body("gpu-template", namespace))
    pods = [await kube.create(pod_body(f"p{i}", namespace, TEMPLATE_ENTRY)) for i in range(3)]
    for pod in pods:
        name = await eventually(
            functools.partial(recorded_claim, kube, namespace, pod["metadata"]["name"]),
            what="claim recorded in pod status",
        )
        claims = await generated_claims(kube, namespace, pod)
        assert [c["metadata"]["name"] for c in claims] == [name]
        meta = claims[0]["metadata"]
        assert meta["generateName"] == f"{pod['metadata']['name']}-gpu-"
        assert meta["annotations"][POD_CLAIM_NAME_ANNOTATION] == "gpu"
        assert meta["labels"] == {"from-template": "gpu-template"}
        owner = meta["ownerReferences"][0]
        assert (owner["kind"], owner["uid"], owner["controller"], owner["blockOwnerDeletion"]) == (
            "Pod",
            pod["metadata"]["uid"],
            True,
            True,
        )
        # No kopf annotations or finalizers on objects we do not own.
        fresh = await kube.get("Pod", pod["metadata"]["name"], namespace)
        assert not any("kopf" in k for k in fresh["metadata"].get("annotations", {}))
        assert not fresh["metadata"].get("finalizers")


async def test_restart_mid_way_adopts_the_claim_created_before(
    kube: KubeAPI, namespace: str, kubeconfig: Any
) -> None:
    """A claim created before a crash (pod status not yet written) is adopted, not duplicated."""
    await kube.create(template_body("gpu-template", namespace))
    pod = await kube.create(pod_body("crashy", namespace, TEMPLATE_ENTRY))
    template = ResourceClaimTemplate.load(
        await kube.get("ResourceClaimTemplate", "gpu-template", namespace)
    )
    before_crash = await kube.create(claim_from_template(Pod.load(pod), "gpu", template))
    settings = ClaimTemplateSettings(kubeconfig=str(kubeconfig))
    async with running_operator(templates_app.APP.build_registry(settings), "claim-templates"):
        name = await eventually(
            lambda: recorded_claim(kube, namespace, "crashy"), what="claim recorded"
        )
    assert name == before_crash["metadata"]["name"]
    assert len(await generated_claims(kube, namespace, pod)) == 1


async def test_two_controllers_racing_converge_on_one_claim(
    kube: KubeAPI, namespace: str, kubeconfig: Any
) -> None:
    await kube.create(template_body("gpu-template", namespace))
    # Two active controllers (as kube-controller-manager's beside ours): their own Leases.
    first, second = (
        ClaimTemplateSettings(kubeconfig=str(kubeconfig), workers=1, lease_name=unique("ct"))
        for _ in range(2)
    )
    async with (
        running_operator(templates_app.APP.build_registry(first), "claim-templates"),
        running_operator(templates_app.APP.build_registry(second), "claim-templates"),
    ):
        pods = await asyncio.gather(
            *(kube.create(pod_body(f"race-{i}", namespace, TEMPLATE_ENTRY)) for i in range(5))
        )

        async def converged() -> bool:
            for pod in pods:
                recorded = await recorded_claim(kube, namespace, pod["metadata"]["name"])
                live = [
                    c
                    for c in await generated_claims(kube, namespace, pod)
                    if not c["metadata"].get("deletionTimestamp")
                ]
                if recorded is None or [c["metadata"]["name"] for c in live] != [recorded]:
                    return False
            return True

        await eventually(converged, what="exactly one live claim per pod, the recorded one")


@pytest.mark.usefixtures("claim_templates")
async def test_missing_template_is_reported_then_claim_created_when_it_appears(
    kube: KubeAPI, namespace: str
) -> None:
    await kube.create(pod_body("waiting", namespace, TEMPLATE_ENTRY))
    events = await eventually(
        lambda: events_for(kube, namespace, "waiting", "FailedResourceClaimCreation"),
        what="a Warning event naming the template",
    )
    assert "ResourceClaimTemplate gpu-template not found" in events[0]["message"]
    assert events[0]["type"] == "Warning"
    await kube.create(template_body("gpu-template", namespace))
    # Well before any periodic retry could fire: the template event requeues the pod.
    await eventually(
        lambda: recorded_claim(kube, namespace, "waiting"),
        within=10,
        what="claim created after the template appeared",
    )
    assert len(await events_for(kube, namespace, "waiting", "FailedResourceClaimCreation")) == 1


@pytest.mark.usefixtures("claim_templates")
async def test_conflicting_claim_name_is_reported_and_left_alone(
    kube: KubeAPI, namespace: str
) -> None:
    foreign = await kube.create(claim_body("someone-elses", namespace))
    pod = await kube.create(pod_body("confused", namespace, TEMPLATE_ENTRY))
    # Another actor recorded a claim this pod does not own. The template comes after: until
    # then the controller can create nothing, so the record surely comes first.
    pod["status"] = {
        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "someone-elses"}]
    }
    await kube.replace_status(pod)
    await kube.create(template_body("gpu-template", namespace))
    events = await eventually(
        lambda: events_for(kube, namespace, "confused", "ResourceClaimConflict"),
        what="a conflict event",
    )
    assert "someone-elses" in events[0]["message"]
    after = await kube.get("ResourceClaim", "someone-elses", namespace)
    assert after["metadata"]["resourceVersion"] == foreign["metadata"]["resourceVersion"]
    assert await recorded_claim(kube, namespace, "confused") == "someone-elses"
    assert await generated_claims(kube, namespace, pod) == []


async def test_pods_of_other_schedulers_are_left_to_kube_controller_manager(
    kube: KubeAPI, namespace: str, kubeconfig: Any
) -> None:
    await kube.create(template_body("gpu-template", namespace))
    settings = ClaimTemplateSettings(kubeconfig=str(kubeconfig))
    async with running_operator(templates_app.APP.build_registry(settings), "claim-templates"):
        other = await kube.create(
            pod_body("theirs", namespace, TEMPLATE_ENTRY, scheduler="default-scheduler")
        )
        ours = await kube.create(pod_body("ours", namespace, TEMPLATE_ENTRY))
        await eventually(lambda: recorded_claim(kube, namespace, "ours"), what="our pod handled")
    assert await generated_claims(kube, namespace, other) == []
    assert len(await generated_claims(kube, namespace, ours)) == 1


# --- reservation cleanup ----------------------------------------------------------------


@pytest.mark.usefixtures("claim_controllers")
async def test_pod_deleted_removes_reservation_and_generated_claim(
    kube: KubeAPI, namespace: str
) -> None:
    await kube.create(template_body("gpu-template", namespace))
    pod = await kube.create(pod_body("short", namespace, TEMPLATE_ENTRY))
    claim = await eventually(lambda: recorded_claim(kube, namespace, "short"), what="claim")
    await allocate_and_reserve(kube, namespace, claim, pod)
    await kube.call(
        "DELETE", f"/api/v1/namespaces/{namespace}/pods/short", body={"gracePeriodSeconds": 0}
    )
    await eventually(
        lambda: gone(kube, "ResourceClaim", claim, namespace),
        what="generated claim deleted (no garbage collector here)",
    )


@pytest.mark.usefixtures("claim_controllers")
async def test_pod_succeeded_unreserves_deallocates_and_deletes_generated_claim(
    kube: KubeAPI, namespace: str
) -> None:
    await kube.create(template_body("gpu-template", namespace))
    pod = await kube.create(pod_body("batch", namespace, TEMPLATE_ENTRY))
    claim = await eventually(lambda: recorded_claim(kube, namespace, "batch"), what="claim")
    await allocate_and_reserve(kube, namespace, claim, pod)
    await set_phase(kube, pod, "Succeeded")
    await eventually(lambda: gone(kube, "ResourceClaim", claim, namespace), what="claim gone")
    # The pod stays (kubelet's business); only the claim went.
    assert (await kube.get("Pod", "batch", namespace))["status"]["phase"] == "Succeeded"


@pytest.mark.usefixtures("reservations")
async def test_persistent_claim_shared_by_two_pods_is_deallocated_after_both(
    kube: KubeAPI, namespace: str
) -> None:
    await kube.create(claim_body("shared", namespace))
    entry = {"name": "gpu", "resourceClaimName": "shared"}
    p1 = await kube.create(pod_body("a", namespace, entry))
    p2 = await kube.create(pod_body("b", namespace, entry))
    await allocate_and_reserve(kube, namespace, "shared", p1, p2)

    async def reserved() -> list[str]:
        body = await kube.get("ResourceClaim", "shared", namespace)
        return [r["name"] for r in body["status"].get("reservedFor", [])]

    await set_phase(kube, p1, "Failed")
    await eventually(lambda: _equals(reserved(), ["b"]), what="only b still reserves")
    assert (await kube.get("ResourceClaim", "shared", namespace))["status"]["allocation"]
    await set_phase(kube, p2, "Succeeded")

    async def deallocated() -> bool:
        status = (await kube.get("ResourceClaim", "shared", namespace)).get("status", {})
        return not status.get("allocation") and not status.get("reservedFor")

    await eventually(deallocated, what="deallocated after the last consumer")
    # A persistent claim is not deleted.
    assert not await gone(kube, "ResourceClaim", "shared", namespace)


async def test_claim_deleted_while_in_use_stays_until_unused(
    kube: KubeAPI, namespace: str, reservations: ReservationController
) -> None:
    await kube.create(claim_body("precious", namespace))
    pod = await kube.create(
        pod_body("user", namespace, {"name": "gpu", "resourceClaimName": "precious"})
    )
    await set_phase(kube, pod, "Running")
    await allocate_and_reserve(kube, namespace, "precious", pod)
    await eventually(lambda: _idle(reservations), what="cleanup saw the reservation")
    before = reservations.queue.processed
    await kube.delete("ResourceClaim", "precious", namespace)
    await eventually(lambda: _idle(reservations, after=before), what="cleanup saw the deletion")
    body = await kube.get("ResourceClaim", "precious", namespace)
    assert body["metadata"]["deletionTimestamp"]
    assert body["status"]["allocation"]
    assert body["status"]["reservedFor"]
    await set_phase(kube, pod, "Succeeded")
    await eventually(
        lambda: gone(kube, "ResourceClaim", "precious", namespace),
        what="claim gone after its last user finished",
    )


async def _idle(controller: ReservationController, after: int = -1) -> bool:
    return controller.queue.processed > after and len(controller.queue) == 0


async def _equals(value: Any, expected: Any) -> bool:
    return bool(await value == expected)


# --- two replicas each --------------------------------------------------------------------------


def _processed(controller: Any) -> int:
    return sum(queue.processed for queue in controller.queues())


async def test_two_replicas_each_one_leads_and_the_other_takes_over(
    kube: KubeAPI, namespace: str, kubeconfig: Any
) -> None:
    """As the manifests run them: two replicas of each controller on one Lease. Only the
    leader works; when it stops, the standby takes the Lease over and does the work."""
    timings = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.5}
    apps: dict[str, OperatorApp[Any]] = {
        "claim-templates": templates_app.APP,
        "reservations": reservations_app.APP,
    }
    leases = {component: unique(component) for component in apps}
    replicas: dict[tuple[str, str], Any] = {}
    stacks: dict[tuple[str, str], contextlib.AsyncExitStack] = {}
    try:
        for component, app in apps.items():
            for identity in ("one", "two"):
                settings = app.settings_class(
                    kubeconfig=str(kubeconfig),
                    lease_name=leases[component],
                    lease_namespace=namespace,
                    identity=identity,
                    **timings,
                )
                registry, controller = app.build(settings)
                replicas[component, identity] = controller
                stack = stacks[component, identity] = contextlib.AsyncExitStack()
                await stack.enter_async_context(running_operator(registry, component))

        async def leader(component: str) -> str | None:
            active = [i for (c, i), r in replicas.items() if c == component and r.active]
            try:
                lease = await kube.get("Lease", leases[component], namespace)
            except NotFoundError:
                return None
            holder = lease["spec"].get("holderIdentity")
            return active[0] if active == [holder] else None

        first = {
            c: await eventually(functools.partial(leader, c), what=f"{c} leader") for c in apps
        }
        await kube.create(template_body("gpu-template", namespace))
        early = await kube.create(pod_body("early", namespace, TEMPLATE_ENTRY))
        claim = await eventually(lambda: recorded_claim(kube, namespace, "early"), what="claim")
        await allocate_and_reserve(kube, namespace, claim, early)
        await set_phase(kube, early, "Succeeded")
        await eventually(lambda: gone(kube, "ResourceClaim", claim, namespace), what="cleaned up")
        for component, identity in first.items():
            standby = replicas[component, "two" if identity == "one" else "one"]
            assert not standby.active, component
            assert _processed(standby) == 0, f"the {component} standby worked"

        for component, identity in first.items():  # the leaders stop (and give their Leases up)
            await stacks[component, identity].aclose()
        late = await kube.create(pod_body("late", namespace, TEMPLATE_ENTRY))
        claim = await eventually(
            lambda: recorded_claim(kube, namespace, "late"), within=15, what="claim after failover"
        )
        await allocate_and_reserve(kube, namespace, claim, late)
        await set_phase(kube, late, "Succeeded")
        await eventually(
            lambda: gone(kube, "ResourceClaim", claim, namespace),
            within=15,
            what="cleaned up after failover",
        )
        for component, identity in first.items():
            other = "two" if identity == "one" else "one"
            assert await leader(component) == other, component
            assert _processed(replicas[component, other]) > 0, component
    finally:
        for stack in stacks.values():
            await stack.aclose()


# --- ResourceQuota on devices --------------------------------------------------------------------


@pytest.mark.usefixtures("claim_templates")
async def test_a_claim_over_its_device_quota_is_reported_and_created_once_quota_frees(
    kube: KubeAPI, namespace: str
) -> None:
    await device_quota(kube, namespace, hard=2, used=2)
    await kube.create(template_body("gpu-template", namespace))
    await kube.create(pod_body("third", namespace, TEMPLATE_ENTRY))
    events = await eventually(
        lambda: events_for(kube, namespace, "third", "FailedResourceClaimCreation"),
        what="a Warning event naming the quota",
    )
    message = events[0]["message"]
    assert message.startswith("PodResourceClaim gpu: create ResourceClaim : "), message
    assert "exceeded quota: gpus" in message, message
    assert await recorded_claim(kube, namespace, "third") is None
    await device_quota(kube, namespace, hard=2, used=1)  # a claim of the namespace went
    await eventually(
        lambda: recorded_claim(kube, namespace, "third"),
        within=60,
        what="the claim created once quota freed (the controller retries with backoff)",
    )
