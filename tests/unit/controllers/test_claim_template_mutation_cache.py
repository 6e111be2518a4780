"""A claim the controller created counts before its store shows it (no duplicate after a 409).

The sequence that used to leave two claims: create the claim, then the pod status patch gets a
409 (the pod changed); the retry runs before the claim's watch event and, seeing no claim,
creates a second one. kube-controller-manager keeps a mutation cache for the same reason.
"""

from __future__ import annotations

from typing import Any

from operators.api.core import Pod
from operators.api.resource import ResourceClaimTemplate
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
    body = planning.claim_from_template(Pod.load(POD), "gpu", TEMPLATE)
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
