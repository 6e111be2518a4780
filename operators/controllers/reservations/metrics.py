"""Metrics of the reservation cleanup: kube-controller-manager's claim gauge (computed from the
store at each scrape) and counters of its own."""

from __future__ import annotations

from prometheus_client import Counter

from operators.observability.metrics import GaugeFunction, registry

REGISTRY = registry()

RESERVATIONS_REMOVED = Counter(
    "kopf_dra_reservations_removed_total",
    "status.reservedFor entries removed",
    ["reason"],
    registry=REGISTRY,
)
DEALLOCATIONS = Counter(
    "kopf_dra_deallocations_total",
    "Allocations cleared by the reservation cleanup",
    registry=REGISTRY,
)
CLAIMS_DELETED = Counter(
    "kopf_dra_generated_claims_deleted_total",
    "Generated claims deleted after their pod",
    registry=REGISTRY,
)

CLAIMS = GaugeFunction(
    "resourceclaim_controller_resource_claims",
    "Number of ResourceClaims, by allocation status, admin access and source",
    ["allocated", "admin_access", "source"],
    REGISTRY,
)
