"""A claim the controller created counts before its store shows it (no duplicate after a 409).

The sequence that used to leave two claims: create the claim, then the pod status patch gets a
409 (the pod changed); the retry runs before the claim's watch event and, seeing no claim,
creates a second one. kube-controller-manager keeps a mutation cache for the same reason.
"""

from __future__ import annotations

from typing import Any

from operators.api.core import Pod
from operators.api.keys import ObjectKey
from operators.api.resource import ResourceClaimTemplate
from operators.api.templates import claim_from_template
from operators.controllers.claim_templates import planning
from operators.controllers.claim_templates.handlers import ClaimTemplateController
from operators.controllers.claim_templates.settings import ClaimTemplateSettings

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "ns", "uid": "pod-uid", "resourceVersion": "5"},
    "spec": {
        "schedulerName": "kopf-dra",
        "containers": [{"name": "c"}],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
    },
}
TEMPLATE = ResourceClaimTemplate.load(
    {
        "metadata": {"name": "t", "namespace": "ns"},
        "spec": {
            "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "c"}}]}}
        },
    }
)


def created(name: str) -> dict[str, Any]:
    """What the API server answered to our create (generateName resolved)."""
    body = claim_from_template(Pod.load(POD), "gpu", TEMPLATE)
    body["metadata"] = {**body["metadata"], "name": name, "uid": f"uid-{name}"}
    body["metadata"].pop("generateName")
    body["metadata"]["resourceVersion"] = "9"
    return body


def test_a_retry_adopts_the_claim_created_before_the_store_shows_it() -> None:
    controller = ClaimTemplateController(ClaimTemplateSettings())
    pod = Pod.load(POD)
    templates = {"t": TEMPLATE}
    assert [type(a) for a in planning.plan_pod(pod, templates, controller._claims_for(pod))] == [
        planning.CreateClaim
    ]
    controller._created[("ns", "pod-uid")] = {"p-gpu-abcde": created("p-gpu-abcde")}
    # The pod status patch failed with a 409; the retry plans again from the same caches.
    actions = planning.plan_pod(pod, templates, controller._claims_for(pod))
    assert actions == [planning.RecordStatus("gpu", "p-gpu-abcde")]


def test_the_store_showing_the_claim_ends_the_entry() -> None:
    controller = ClaimTemplateController(ClaimTemplateSettings())
    controller._created[("ns", "pod-uid")] = {"p-gpu-abcde": created("p-gpu-abcde")}
    controller.claims.apply("ADDED", created("p-gpu-abcde"))
    assert controller._created == {}


def _controller(monkeypatch: Any) -> tuple[ClaimTemplateController, list[Any]]:
    """A controller whose writes succeed as the API server would answer them, and whose queue
    records what is added."""
    controller = ClaimTemplateController(ClaimTemplateSettings(all_pods=True))
    controller.templates.apply("ADDED", {**TEMPLATE.dump(), "kind": "ResourceClaimTemplate"})
    controller.pods.apply("ADDED", POD)
    added: list[Any] = []
    monkeypatch.setattr(controller.queue, "add", added.append)

    async def apply(action: Any) -> dict[str, Any]:
        if isinstance(action, planning.CreateClaim) or getattr(action, "kind", "") != "Pod":
            return created("p-gpu-abcde")
        return recorded()

    monkeypatch.setattr(controller, "apply", apply)
    return controller, added


def recorded() -> dict[str, Any]:
    """The pod after our status write."""
    statuses = [{"name": "gpu", "resourceClaimName": "p-gpu-abcde"}]
    return {
        **POD,
        "metadata": {**POD["metadata"], "resourceVersion": "6"},
        "status": {"resourceClaimStatuses": statuses},
    }


async def test_the_event_of_our_own_status_write_brings_no_reconcile(monkeypatch: Any) -> None:
    controller, added = _controller(monkeypatch)
    await controller.reconcile(ObjectKey("ns", "p"))
    controller.on_pod({"type": "MODIFIED", "body": recorded()})
    assert added == []
    stored = controller.indices.one("pods", ObjectKey("ns", "p"))
    assert stored["metadata"]["resourceVersion"] == "6"


async def test_a_reconcile_skipped_before_that_event_is_run_when_it_comes(
    monkeypatch: Any,
) -> None:
    """Something asked for the pod while the store still showed the version our write
    replaced (a claim event): that reconcile was skipped, so the write's event brings it."""
    controller, added = _controller(monkeypatch)
    await controller.reconcile(ObjectKey("ns", "p"))
    await controller.reconcile(ObjectKey("ns", "p"))  # stale store: skipped
    controller.on_pod({"type": "MODIFIED", "body": recorded()})
    assert added == [ObjectKey("ns", "p")]


def test_a_template_is_parsed_once_per_version() -> None:
    """Every pod of a workload names the same template: one parse per version of it, and a
    deleted template's model goes with it."""
    controller = ClaimTemplateController(ClaimTemplateSettings())
    pod = Pod.load(POD)
    first = {**TEMPLATE.dump(), "kind": "ResourceClaimTemplate"}
    first["metadata"] = {**first["metadata"], "resourceVersion": "3"}
    controller.on_template({"type": "ADDED", "body": first})
    parsed = controller._templates_for(pod)["t"]
    assert controller._templates_for(pod)["t"] is parsed
    second = {**first, "metadata": {**first["metadata"], "resourceVersion": "4"}}
    second["spec"] = {"spec": {"devices": {"requests": []}}}
    controller.on_template({"type": "MODIFIED", "body": second})
    assert controller._templates_for(pod)["t"].spec.spec.devices.requests == []
    controller.on_template({"type": "DELETED", "body": second})
    assert controller._templates_for(pod) == {}
    assert controller.template_models._items == {}
