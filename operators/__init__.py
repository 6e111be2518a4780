"""kopf-dra: a Kubernetes Dynamic Resource Allocation control plane on kopf."""

__version__ = "0.1.0"
