"""Prometheus metrics of the example driver."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

PREPARES = Counter(
    "kopf_dra_driver_prepare_total", "NodePrepareResources per claim, by result", ["result"]
)
UNPREPARES = Counter(
    "kopf_dra_driver_unprepare_total", "NodeUnprepareResources per claim, by result", ["result"]
)
PREPARED_CLAIMS = Gauge("kopf_dra_driver_prepared_claims", "Claims prepared on this node")
PUBLISHED_DEVICES = Gauge("kopf_dra_driver_published_devices", "Devices in the node's pool")
SLICE_PUBLISHES = Counter(
    "kopf_dra_driver_slice_publishes_total", "Pool generations published (changes only)"
)
STATUS_WRITE_FAILURES = Counter(
    "kopf_dra_driver_status_write_failures_total", "Failed writes of claim status.devices"
)
