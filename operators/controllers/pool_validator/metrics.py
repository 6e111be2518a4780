"""Prometheus metrics of the pool validator.

The controller owns the numbers (its verdict per pool) and republishes these gauges from them
after every change, so a pool that disappears also disappears from the metrics.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

from operators.observability.metrics import registry

REGISTRY = registry()

POOLS = Gauge(
    "kopf_dra_resource_pools",
    "Resource pools by validation state (valid, invalid, incomplete)",
    ["state"],
    registry=REGISTRY,
)
POOL_PROBLEMS = Gauge(
    "kopf_dra_resource_pool_problems",
    "Problems found in resource pools, by problem code",
    ["code"],
    registry=REGISTRY,
)
COUNTER_UTILIZATION = Gauge(
    "kopf_dra_resource_pool_counter_utilization_ratio",
    "Share of a shared counter that allocated devices consume (consumed / total)",
    ["driver", "pool", "counter_set", "counter"],
    registry=REGISTRY,
)
DEVICES = Gauge(
    "kopf_dra_resource_pool_devices",
    "Devices of resource pools (state: total or allocated)",
    ["driver", "pool", "state"],
    registry=REGISTRY,
)
DOMAIN_DEVICES = Gauge(
    "kopf_dra_topology_domain_devices",
    "Devices of the pools local to the nodes of each value of the --domain-key node label "
    "(state: total, allocated or free)",
    ["key", "domain", "state"],
    registry=REGISTRY,
)
NAMESPACE_DEVICES = Gauge(
    "kopf_dra_namespace_devices",
    "Devices allocated to the claims of each namespace, by the --queue-label value of the pods "
    "they are reserved for (queue: empty where none, or without --queue-label)",
    ["namespace", "queue"],
    registry=REGISTRY,
)
ADMISSION_REVIEWS = Counter(
    "kopf_dra_resource_slice_admission_reviews_total",
    "ResourceSlice admission reviews answered by the webhook, by result (allowed, denied)",
    ["result"],
    registry=REGISTRY,
)
DOUBLE_ALLOCATIONS = Counter(
    "kopf_dra_resource_pool_double_allocations_total",
    "Devices found allocated to several claims that do not share them (each found once)",
    registry=REGISTRY,
)
