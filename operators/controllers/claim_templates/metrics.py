"""Metrics of the claim-template controller, named as kube-controller-manager's."""

from __future__ import annotations

from prometheus_client import Counter

from operators.observability.metrics import registry

REGISTRY = registry()

CREATES = Counter(
    "resourceclaim_controller_creates_total",
    "Number of ResourceClaims creation requests, by creation status and admin access",
    ["status", "admin_access"],
    registry=REGISTRY,
)
