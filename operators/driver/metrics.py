"""Prometheus metrics of the example driver."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from operators.observability.metrics import registry

REGISTRY = registry()

PREPARES = Counter(
    "kopf_dra_driver_prepare_total",
    "NodePrepareResources per claim, by result",
    ["result"],
    registry=REGISTRY,
)
UNPREPARES = Counter(
    "kopf_dra_driver_unprepare_total",
    "NodeUnprepareResources per claim, by result",
    ["result"],
    registry=REGISTRY,
)
PREPARED_CLAIMS = Gauge(
    "kopf_dra_driver_prepared_claims", "Claims prepared on this node", registry=REGISTRY
)
PUBLISHED_DEVICES = Gauge(
    "kopf_dra_driver_published_devices", "Devices in the node's pool", registry=REGISTRY
)
SLICE_PUBLISHES = Counter(
    "kopf_dra_driver_slice_publishes_total",
    "Pool generations published (changes only)",
    registry=REGISTRY,
)
STATUS_WRITE_FAILURES = Counter(
    "kopf_dra_driver_status_write_failures_total",
    "Failed writes of claim status.devices",
    registry=REGISTRY,
)
OPERATION_DURATION = Histogram(
    "kopf_dra_driver_operation_duration_seconds",
    "Preparing or unpreparing one claim (operation: prepare, unprepare), as the kubelet's "
    "dra_operations_duration_seconds per call",
    ["operation", "is_error"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    registry=REGISTRY,
)
