"""Prometheus metrics of every component, on ``/metrics`` when ``--metrics-port`` is set.

Names of the resourceclaim controller follow KEP-4381 so dashboards built for
kube-controller-manager keep working.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, start_http_server

RESOURCE_CLAIMS = Gauge("resourceclaim_controller_resource_claims", "Number of ResourceClaims")
ALLOCATED_RESOURCE_CLAIMS = Gauge(
    "resourceclaim_controller_allocated_resource_claims", "Number of allocated ResourceClaims"
)
CLAIMS_CREATED = Counter(
    "kopf_dra_claims_created_total", "ResourceClaims created from ResourceClaimTemplates"
)
RESERVATIONS_REMOVED = Counter(
    "kopf_dra_reservations_removed_total", "status.reservedFor entries removed", ["reason"]
)
DEALLOCATIONS = Counter(
    "kopf_dra_deallocations_total", "Allocations cleared by the reservation cleanup"
)
CLAIMS_DELETED = Counter(
    "kopf_dra_generated_claims_deleted_total", "Generated claims deleted after their pod"
)


def serve(port: int) -> None:
    """Expose /metrics on ``port`` (0 means off)."""
    if port:
        start_http_server(port)


SCHEDULING_ATTEMPTS = Counter(
    "kopf_dra_scheduler_schedule_attempts_total",
    "Scheduling cycles by result (scheduled, unschedulable, error, waiting)",
    ["result"],
)
SCHEDULING_LATENCY = Histogram(
    "kopf_dra_scheduler_pod_scheduling_duration_seconds",
    "From pod creation to binding",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600),
)
CYCLE_DURATION = Histogram(
    "kopf_dra_scheduler_cycle_duration_seconds",
    "One scheduling cycle: filter, allocate and score every node",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)
ALLOCATOR_DURATION = Histogram(
    "kopf_dra_scheduler_allocator_duration_seconds",
    "Allocator calls of one cycle, all nodes together",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
)
QUEUE_DEPTH = Gauge("kopf_dra_scheduler_queue_depth", "Pods queued or being scheduled")
WAITING_BINDING_CONDITIONS = Gauge(
    "kopf_dra_scheduler_pods_waiting_binding_conditions",
    "Pods whose devices wait for binding conditions",
)
DOUBLE_ALLOCATIONS = Counter(
    "kopf_dra_scheduler_double_allocations_total",
    "Devices found in two allocations by the scheduler, by whether one was deallocated",
    ["repaired"],
)
