"""Prometheus metrics of every component, on ``/metrics`` when ``--metrics-port`` is set.

Names of the resourceclaim controller follow KEP-4381 so dashboards built for
kube-controller-manager keep working.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, start_http_server

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
