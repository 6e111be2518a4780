"""Prometheus metrics of the fabric controller."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from operators.observability.metrics import registry

REGISTRY = registry()

ATTACH_DURATION = Histogram(
    "kopf_dra_fabric_attach_duration_seconds",
    "Attach operations, from request to completion (the fabric manager's clock)",
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
    registry=REGISTRY,
)
ALLOCATION_TO_READY = Histogram(
    "kopf_dra_fabric_allocation_to_condition_seconds",
    "From a claim's allocationTimestamp to the binding condition we report (attached or failed)",
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
    registry=REGISTRY,
)
ATTACH_RESULTS = Counter(
    "kopf_dra_fabric_attach_results_total",
    "Finished attach operations by result (Attached, or the failure reason)",
    ["result"],
    registry=REGISTRY,
)
DETACHES = Counter(
    "kopf_dra_fabric_detaches_total",
    "Detach operations started, by reason",
    ["reason"],
    registry=REGISTRY,
)
FREE_DEVICES = Gauge(
    "kopf_dra_fabric_free_devices",
    "Free fabric devices published, per model pool",
    ["pool"],
    registry=REGISTRY,
)
ATTACHED_DEVICES = Gauge(
    "kopf_dra_fabric_attached_devices",
    "Fabric devices this cluster holds (attaching or attached)",
    registry=REGISTRY,
)
MANAGER_ERRORS = Counter(
    "kopf_dra_fabric_manager_errors_total",
    "Failed calls to the fabric manager",
    ["reason"],
    registry=REGISTRY,
)
