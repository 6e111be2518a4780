"""Metrics of the runtime, with the names Kubernetes components export for the same things.

Work queues as client-go's (``workqueue_*{name}``) and leader election as component-base's
(``leader_election_master_status{name}``), so dashboards built for kube-controller-manager
read kopf-dra's controllers too.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from operators.observability.metrics import registry

REGISTRY = registry()
DURATIONS = (1e-05, 0.0001, 0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)

QUEUE_DEPTH = Gauge("workqueue_depth", "Current depth of workqueue", ["name"], registry=REGISTRY)
QUEUE_ADDS = Counter(
    "workqueue_adds_total", "Total number of adds handled by workqueue", ["name"], registry=REGISTRY
)
QUEUE_RETRIES = Counter(
    "workqueue_retries_total",
    "Total number of retries handled by workqueue",
    ["name"],
    registry=REGISTRY,
)
QUEUE_WAIT = Histogram(
    "workqueue_queue_duration_seconds",
    "How long in seconds an item stays in workqueue before being requested",
    ["name"],
    buckets=DURATIONS,
    registry=REGISTRY,
)
QUEUE_WORK = Histogram(
    "workqueue_work_duration_seconds",
    "How long in seconds processing an item from workqueue takes",
    ["name"],
    buckets=DURATIONS,
    registry=REGISTRY,
)
LEADER = Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
    "1 indicates master. 'name' is the string used to identify the lease.",
    ["name"],
    registry=REGISTRY,
)
