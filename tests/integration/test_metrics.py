"""Every component's metrics as a scraper sees them: its own registry, upstream's names and
labels, no ``_created``; and the secure mode, with the API server deciding who may read them.

The fabric controller's scrape is in test_fabric.py, the driver's in driver/test_app.py (each
needs its own fixtures); the names they expect are here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes_asyncio import client
from prometheus_client import CollectorRegistry

from operators.controllers.claim_templates import app as templates_app
from operators.controllers.claim_templates.metrics import REGISTRY as TEMPLATES_REGISTRY
from operators.controllers.claim_templates.settings import ClaimTemplateSettings
from operators.controllers.claims import app as claims_app
from operators.controllers.claims.handlers import ClaimsController
from operators.controllers.claims.settings import ClaimsSettings
from operators.controllers.pool_validator import app as validator_app
from operators.controllers.pool_validator.settings import PoolValidatorSettings
from operators.controllers.reservations import app as reservations_app
from operators.controllers.reservations.metrics import REGISTRY as RESERVATIONS_REGISTRY
from operators.controllers.reservations.settings import ReservationSettings
from operators.controllers.scheduler import app as scheduler_app
from operators.controllers.scheduler.metrics import REGISTRY as SCHEDULER_REGISTRY
from operators.controllers.scheduler.settings import SchedulerSettings
from operators.kube.api import KubeAPI, NotFoundError
from operators.localcluster import manifests
from operators.localcluster.controlplane import feature_gates
from operators.runtime.controller import Controller
from tests.integration.helpers import (
    bound_node,
    claim_of,
    eventually,
    gpu_cluster,
    metric_names,
    mint_token,
    pod_body,
    running_operator,
    sample,
    scrape,
    template_body,
    token_kubeconfig,
    unique,
)

LOCAL = "127.0.0.1:0"  # any free port: the test reads the one bound
RUNTIME = {
    "workqueue_depth",
    "workqueue_adds_total",
    "workqueue_retries_total",
    "workqueue_queue_duration_seconds",
    "workqueue_work_duration_seconds",
    "leader_election_master_status",
}
SCHEDULER = RUNTIME | {
    "scheduler_schedule_attempts_total",
    "scheduler_scheduling_attempt_duration_seconds",
    "scheduler_pod_scheduling_attempts",
    "scheduler_pod_scheduling_sli_duration_seconds",
    "scheduler_pending_pods",
    "kopf_dra_scheduler_pod_scheduling_duration_seconds",
    "kopf_dra_scheduler_allocator_duration_seconds",
    "kopf_dra_scheduler_pods_waiting_binding_conditions",
    "kopf_dra_scheduler_oldest_pending_pod_age_seconds",
    "kopf_dra_scheduler_filter_timeouts_total",
    "kopf_dra_scheduler_binding_conditions_timeouts_total",
    "kopf_dra_scheduler_double_allocations_total",
    "kopf_dra_scheduler_queueing_hints_total",
    "kopf_dra_scheduler_starving_offers_total",
    "scheduler_preemption_attempts_total",
    "scheduler_preemption_victims",
}
CLAIM_TEMPLATES = RUNTIME | {"resourceclaim_controller_creates_total"}
RESERVATIONS = RUNTIME | {
    "resourceclaim_controller_resource_claims",
    "kopf_dra_reservations_removed_total",
    "kopf_dra_deallocations_total",
    "kopf_dra_generated_claims_deleted_total",
}
POOL_VALIDATOR = RUNTIME | {
    "kopf_dra_resource_pools",
    "kopf_dra_resource_pool_problems",
    "kopf_dra_resource_pool_counter_utilization_ratio",
    "kopf_dra_resource_pool_devices",
    "kopf_dra_topology_domain_devices",
    "kopf_dra_namespace_devices",
    "kopf_dra_resource_slice_admission_reviews_total",
    "kopf_dra_resource_pool_double_allocations_total",
}
FABRIC = RUNTIME | {
    "kopf_dra_fabric_attach_duration_seconds",
    "kopf_dra_fabric_allocation_to_condition_seconds",
    "kopf_dra_fabric_attach_results_total",
    "kopf_dra_fabric_detaches_total",
    "kopf_dra_fabric_free_devices",
    "kopf_dra_fabric_attached_devices",
    "kopf_dra_fabric_manager_errors_total",
}
DRIVER = {
    "kopf_dra_driver_prepare_total",
    "kopf_dra_driver_unprepare_total",
    "kopf_dra_driver_prepared_claims",
    "kopf_dra_driver_published_devices",
    "kopf_dra_driver_slice_publishes_total",
    "kopf_dra_driver_status_write_failures_total",
    "kopf_dra_driver_operation_duration_seconds",
}


def before(registry: CollectorRegistry, metric: str, **labels: str) -> float:
    """What ``metric{labels}`` counts before the test acts."""
    return registry.get_sample_value(metric, labels) or 0.0


def port_of(controller: Any) -> int:
    assert isinstance(controller, Controller)
    port = controller.server.port
    assert port, f"the {controller.component} controller serves no metrics"
    return port


async def test_each_component_serves_its_own_metrics_under_upstream_names(
    kube: KubeAPI,
    kubeconfig: Path,
    namespace: str,
    driver: str,
    rbac_applied: list[dict[str, Any]],  # the pool validator's CRD among them
) -> None:
    (node,) = await gpu_cluster(kube, driver, nodes=1, per_node=2)
    await kube.create(template_body("gpu", namespace, driver))
    config = str(kubeconfig)
    # A profile of its own: pods that earlier tests left pending are not this scheduler's, nor
    # the claim-template controller's.
    scheduler_settings = SchedulerSettings(
        kubeconfig=config,
        feature_gates=feature_gates(),
        lease_name=unique("scheduler"),
        scheduler_name=unique("metrics-scheduler"),
        metrics_bind_address=LOCAL,
    )
    scheduler_registry, scheduler = scheduler_app.APP.build(scheduler_settings)
    templates_registry, templates = templates_app.APP.build(
        ClaimTemplateSettings(
            kubeconfig=config,
            lease_name=unique("templates"),
            scheduler_names=[scheduler_settings.scheduler_name],
            metrics_bind_address=LOCAL,
        )
    )
    reservations_registry, reservations = reservations_app.APP.build(
        ReservationSettings(
            kubeconfig=config, lease_name=unique("reservations"), metrics_bind_address=LOCAL
        )
    )
    validator_registry, validator = validator_app.APP.build(
        PoolValidatorSettings(
            kubeconfig=config,
            feature_gates=feature_gates(),
            lease_name=unique("validator"),
            metrics_bind_address=LOCAL,
        )
    )
    # Registries are per component but per process too: earlier tests counted into them, and
    # the claim controllers serve every namespace (earlier tests' pods too): at least ours.
    allocations_before = before(
        SCHEDULER_REGISTRY, "kopf_dra_scheduler_allocator_duration_seconds_count"
    )
    creates_before = before(
        TEMPLATES_REGISTRY,
        "resourceclaim_controller_creates_total",
        status="success",
        admin_access="false",
    )
    deleted_before = before(RESERVATIONS_REGISTRY, "kopf_dra_generated_claims_deleted_total")
    async with (
        running_operator(scheduler_registry, "scheduler"),
        running_operator(templates_registry, "claim-templates"),
        running_operator(reservations_registry, "reservations"),
        running_operator(validator_registry, "pool-validator"),
    ):
        profile = scheduler_settings.scheduler_name
        await kube.create(
            pod_body(
                "p",
                namespace,
                {"name": "gpu", "resourceClaimTemplateName": "gpu"},
                scheduler=profile,
            )
        )

        async def bound() -> str | None:
            return await bound_node(kube, namespace, "p")

        assert await eventually(bound, what="the pod bound") == node
        claim = await claim_of(kube, namespace, "p")

        async def scraped(controller: Any, metric: str, **labels: str) -> str | None:
            """The scrape, once ``metric{labels}`` shows (scrapes race the reconciles)."""
            status, text = await scrape(port_of(controller))
            assert status == 200
            return text if sample(text, metric, **labels) else None

        async def counted(controller: Any, metric: str, least: float, **labels: str) -> str:
            """The scrape once ``metric{labels}`` is at least ``least``: the counter is bumped
            after the write the test saw."""

            async def probe() -> str | None:
                status, text = await scrape(port_of(controller))
                assert status == 200
                return text if (sample(text, metric, **labels) or 0) >= least else None

            return await eventually(probe, what=f"{metric}{labels} >= {least}")

        text = await counted(
            scheduler, "scheduler_schedule_attempts_total", 1, result="scheduled", profile=profile
        )
        assert (
            sample(text, "scheduler_schedule_attempts_total", result="scheduled", profile=profile)
            == 1
        )
        assert metric_names(text) == SCHEDULER
        assert sample(text, "scheduler_scheduling_attempt_duration_seconds_count", profile=profile)
        # Its first attempt placed it: counted under attempts="1" (the registry is per process).
        assert sample(text, "scheduler_pod_scheduling_sli_duration_seconds_count", attempts="1")
        # One allocator call at least: a busy machine may make the attempt yield and resume.
        allocations = sample(text, "kopf_dra_scheduler_allocator_duration_seconds_count")
        assert allocations is not None
        assert allocations >= allocations_before + 1
        assert sample(text, "scheduler_pending_pods", queue="unschedulable") == 0
        assert sample(text, "workqueue_adds_total", name="scheduler")
        assert sample(text, "leader_election_master_status", name=scheduler_settings.lease_name)

        # A pod whose claim never comes waits: the age of the oldest pending pod shows it.
        await kube.create(
            pod_body(
                "waiting",
                namespace,
                {"name": "gpu", "resourceClaimName": "none"},
                scheduler=profile,
            )
        )
        await counted(scheduler, "kopf_dra_scheduler_oldest_pending_pod_age_seconds", 1)

        text = await counted(
            templates,
            "resourceclaim_controller_creates_total",
            creates_before + 1,
            status="success",
            admin_access="false",
        )
        assert metric_names(text) == CLAIM_TEMPLATES

        text = await eventually(
            lambda: scraped(
                reservations,
                "resourceclaim_controller_resource_claims",
                allocated="true",
                source="resource_claim_template",
            ),
            what="the allocated generated claim counted",
        )
        assert metric_names(text) == RESERVATIONS

        text = await eventually(
            lambda: scraped(validator, "kopf_dra_resource_pools", state="valid"),
            what="the pool validator's verdicts",
        )
        assert metric_names(text) == POOL_VALIDATOR

        for component in (scheduler, templates, reservations, validator):
            status, text = await scrape(port_of(component))
            assert status == 200
            assert "_created" not in text
            assert await scrape(port_of(component), "/healthz") == (200, "ok")
            assert await scrape(port_of(component), "/readyz") == (200, "ok")

        # The pod ends: its claim goes, and the gauge follows at the next scrape.
        await kube.patch(
            "Pod", "p", {"status": {"phase": "Succeeded"}}, namespace, subresource="status"
        )

        async def claim_gone() -> bool:
            try:
                await kube.get("ResourceClaim", claim["metadata"]["name"], namespace)
            except NotFoundError:
                return True
            return False

        await eventually(claim_gone, what="the generated claim deleted")
        await counted(reservations, "kopf_dra_generated_claims_deleted_total", deleted_before + 1)


async def test_the_claims_component_serves_both_controllers_metrics_and_checks(
    kube: KubeAPI, kubeconfig: Path, namespace: str
) -> None:
    """``kopf-dra run claims``: one endpoint with kube-controller-manager's resourceclaim
    metrics from both controllers, and each controller's checks under its name."""
    await kube.create(template_body("gpu", namespace, "gpu.example.com"))
    registry, claims = claims_app.APP.build(
        ClaimsSettings(
            kubeconfig=str(kubeconfig),
            lease_name=unique("templates"),
            reservations_lease_name=unique("reservations"),
            metrics_bind_address=LOCAL,
        )
    )
    assert isinstance(claims, ClaimsController)
    async with running_operator(registry, "claims"):
        await kube.create(
            pod_body("p", namespace, {"name": "gpu", "resourceClaimTemplateName": "gpu"})
        )

        async def recorded() -> bool:
            pod = await kube.get("Pod", "p", namespace)
            return bool(pod["status"].get("resourceClaimStatuses"))

        await eventually(recorded, what="the claim created and recorded")
        port = claims.server.port
        assert port
        status, text = await scrape(port)
        assert status == 200
        assert metric_names(text) == CLAIM_TEMPLATES | RESERVATIONS
        assert sample(text, "workqueue_adds_total", name="claim-templates")
        assert sample(text, "workqueue_adds_total", name="reservations")
        status, verbose = await scrape(port, "/readyz?verbose")
        assert status == 200
        assert "claim-templates-started ok" in verbose
        assert "reservations-started ok" in verbose
        assert await scrape(port, "/healthz") == (200, "ok")


async def test_secure_metrics_answer_only_tokens_allowed_to_get_them(
    api: client.ApiClient,
    kube: KubeAPI,
    namespace: str,
    rbac_applied: list[dict[str, Any]],
    tmp_path: Path,
) -> None:
    """kube-scheduler's delegated authentication and authorization, done with the scheduler's
    own identity from the manifests (system:auth-delegator), against the real API server."""
    await kube.create(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "scraper", "namespace": namespace},
        }
    )
    binding = unique("scraper-metrics")
    await manifests.apply(
        kube,
        [
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": binding},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "kopf-dra-metrics-reader",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": namespace}],
            }
        ],
    )
    scraper = f"system:serviceaccount:{namespace}:scraper"

    async def may_scrape() -> bool:
        """The binding in force at the API server (its authorizer's cache follows a watch)."""
        review = await kube.call(
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            body={
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {
                    "user": scraper,
                    "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
                },
            },
        )
        return bool(review["status"].get("allowed"))

    try:
        await eventually(may_scrape, what="the scraper's binding in force")
        settings = SchedulerSettings(
            kubeconfig=str(await token_kubeconfig(api, "kopf-dra-scheduler", tmp_path)),
            lease_namespace="kopf-dra",
            lease_name=unique("secure-scheduler"),
            feature_gates=feature_gates(),
            metrics_bind_address=LOCAL,
            metrics_secure=True,
        )
        registry, scheduler = scheduler_app.APP.build(settings)
        async with running_operator(registry, "scheduler"):
            port = port_of(scheduler)
            status, text = await scrape(port, secure=True)
            assert status == 401, text
            status, text = await scrape(port, secure=True, token="not-a-token")
            assert status == 401, text
            nobody = await mint_token(api, "default", namespace)
            status, text = await scrape(port, secure=True, token=nobody)
            assert status == 403, text
            assert f"system:serviceaccount:{namespace}:default" in text
            allowed = await mint_token(api, "scraper", namespace)
            status, text = await scrape(port, secure=True, token=allowed)
            assert status == 200, text
            assert "scheduler_pending_pods" in metric_names(text)
            # Probes need no token.
            assert await scrape(port, "/healthz", secure=True) == (200, "ok")
            assert await scrape(port, "/readyz", secure=True) == (200, "ok")
    finally:
        await kube.call(
            "DELETE", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{binding}"
        )
