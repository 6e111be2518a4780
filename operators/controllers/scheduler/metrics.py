"""Metrics of the scheduler: kube-scheduler's names where it has one, ``kopf_dra_`` otherwise."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from operators.observability.metrics import GaugeFunction, registry

REGISTRY = registry()
PROFILE = ("profile",)

SCHEDULE_ATTEMPTS = Counter(
    "scheduler_schedule_attempts_total",
    "Scheduling attempts by result (scheduled, unschedulable, error)",
    ["result", "profile"],
    registry=REGISTRY,
)
ATTEMPT_DURATION = Histogram(
    "scheduler_scheduling_attempt_duration_seconds",
    "Scheduling attempt latency (the scheduling cycle) by result",
    ["result", "profile"],
    buckets=(0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048),
    registry=REGISTRY,
)
POD_ATTEMPTS = Histogram(
    "scheduler_pod_scheduling_attempts",
    "Number of attempts to successfully schedule a pod",
    buckets=(1, 2, 4, 8, 16),
    registry=REGISTRY,
)
SCHEDULING_SLI = Histogram(
    "scheduler_pod_scheduling_sli_duration_seconds",
    "E2e latency for a pod being scheduled, from its first scheduling attempt to its binding, "
    "by the number of attempts",
    ["attempts"],
    buckets=tuple(0.01 * 2**i for i in range(20)),
    registry=REGISTRY,
)
PENDING_PODS = GaugeFunction(
    "scheduler_pending_pods",
    "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; "
    "'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in "
    "unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the "
    "number of unschedulable pods that the scheduler never attempted to schedule because "
    "they are gated.",
    ["queue"],
    REGISTRY,
)
SCHEDULING_LATENCY = Histogram(
    "kopf_dra_scheduler_pod_scheduling_duration_seconds",
    "From pod creation to binding",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600),
    registry=REGISTRY,
)
ALLOCATOR_DURATION = Histogram(
    "kopf_dra_scheduler_allocator_duration_seconds",
    "Allocator calls of one cycle, all nodes together",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
    registry=REGISTRY,
)
OLDEST_PENDING = GaugeFunction(
    "kopf_dra_scheduler_oldest_pending_pod_age_seconds",
    "Seconds since the creation of the oldest pod this scheduler has not bound (gated and "
    "deleting pods aside); 0 when none",
    [],
    REGISTRY,
)
FILTER_TIMEOUTS = Counter(
    "kopf_dra_scheduler_filter_timeouts_total",
    "Device allocation attempts cut short by the filter timeout (the pod is told "
    "'timed out trying to allocate devices')",
    registry=REGISTRY,
)
BINDING_CONDITIONS_TIMEOUTS = Counter(
    "kopf_dra_scheduler_binding_conditions_timeouts_total",
    "Pods whose devices' binding conditions were not met within the binding timeout (their "
    "allocations undone, the pods tried again)",
    registry=REGISTRY,
)
WAITING_BINDING_CONDITIONS = Gauge(
    "kopf_dra_scheduler_pods_waiting_binding_conditions",
    "Pods whose devices wait for binding conditions",
    registry=REGISTRY,
)
DOUBLE_ALLOCATIONS = Counter(
    "kopf_dra_scheduler_double_allocations_total",
    "Devices found in two allocations by the scheduler, by whether one was deallocated",
    ["repaired"],
    registry=REGISTRY,
)
PREEMPTION_ATTEMPTS = Counter(
    "scheduler_preemption_attempts_total",
    "Total preemption attempts in the cluster till now",
    registry=REGISTRY,
)
PREEMPTION_VICTIMS = Histogram(
    "scheduler_preemption_victims",
    "Number of selected preemption victims",
    buckets=(1, 2, 4, 8, 16, 32, 64),
    registry=REGISTRY,
)
STARVING_OFFERS = Counter(
    "kopf_dra_scheduler_starving_offers_total",
    "Freed devices offered first to a pod that waited longer than --starving-after (the pod "
    "tried at once, ahead of newer ones)",
    registry=REGISTRY,
)
QUEUEING_HINTS = Counter(
    "kopf_dra_scheduler_queueing_hints_total",
    "Events the scheduler weighed for its pods, by event (kind/Add, Update or Delete) and "
    "hint: Queue (brings pods back for an attempt) or QueueSkip (leaves them out)",
    ["event", "hint"],
    registry=REGISTRY,
)
