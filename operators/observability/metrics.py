"""Prometheus plumbing shared by every component: one registry per component, no ``_created``.

Each component's metrics live in its own module with a registry of its own (a process serves
only its component's metrics and the runtime's), so a scrape of the claim-template controller
never shows the scheduler's histograms. ``_created`` series are off: Kubernetes components do
not export them, and dashboards built for them would double-count.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from operators.api.names import EXTENDED_RESOURCE_CLAIM_ANNOTATION, POD_CLAIM_NAME_ANNOTATION

disable_created_metrics()  # type: ignore[no-untyped-call]


def registry() -> CollectorRegistry:
    """A component's registry (collectors describe themselves: names checked at once)."""
    return CollectorRegistry(auto_describe=True)


#: Label values and value of each sample.
Samples = Callable[[], Iterable[tuple[Sequence[str], float]]]


class GaugeFunction(Collector):
    """A labelled gauge computed at each scrape from what its controller holds, so it is never
    stale and never counts a series the controller has forgotten. The controller sets
    ``samples`` when it starts."""

    def __init__(
        self, name: str, documentation: str, labels: Sequence[str], registry: CollectorRegistry
    ) -> None:
        self.name, self.documentation, self.labels = name, documentation, list(labels)
        self.samples: Samples = lambda: ()
        registry.register(self)

    def collect(self) -> Iterator[Any]:
        family = GaugeMetricFamily(self.name, self.documentation, labels=self.labels)
        for values, value in self.samples():
            family.add_metric(list(values), value)
        yield family

    def describe(self) -> Iterator[Any]:
        yield GaugeMetricFamily(self.name, self.documentation, labels=self.labels)


def admin_access_label(claim: Mapping[str, Any]) -> str:
    """kube-controller-manager's ``admin_access`` label: some exact request asks for it
    (subrequests of firstAvailable never count)."""
    requests = (((claim.get("spec") or {}).get("devices") or {}).get("requests")) or []
    exact = (r.get("exactly") or {} for r in requests)
    return "true" if any(e.get("adminAccess") for e in exact) else "false"


def claim_labels(claim: Mapping[str, Any]) -> tuple[str, str, str]:
    """``allocated``, ``admin_access`` and ``source`` of resourceclaim_controller_resource_claims:
    the source is extended_resource, resource_claim_template, or empty (made by a user)."""
    annotations = (claim.get("metadata") or {}).get("annotations") or {}
    if annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true":
        source = "extended_resource"
    elif annotations.get(POD_CLAIM_NAME_ANNOTATION):
        source = "resource_claim_template"
    else:
        source = ""
    allocated = "true" if (claim.get("status") or {}).get("allocation") else "false"
    return allocated, admin_access_label(claim), source
