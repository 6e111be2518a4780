"""Settings of the pool validator."""

from __future__ import annotations

from pydantic import Field

from operators.settings import LeaderElectionSettings


class PoolValidatorSettings(LeaderElectionSettings):
    incomplete_grace_period: float = Field(
        default=60.0,
        ge=0,
        description="Seconds a pool may stay incomplete, or keep slices of an older generation, "
        "before it is reported (drivers publish and retire slices one at a time)",
    )
    max_problems: int = Field(
        default=64, ge=1, description="Problems listed per ResourcePoolStatus (all are counted)"
    )
    workers: int = Field(default=2, description="Pools validated concurrently")
    webhook: bool = Field(
        default=False,
        description="Serve a validating admission webhook that refuses ResourceSlices adding "
        "problems to their pool (off by default: KEP-4815 validates at allocation time)",
    )
    webhook_port: int = Field(default=9443, ge=1, le=65535, description="Webhook HTTPS port")
    webhook_host: str = Field(
        default="127.0.0.1",
        description="Name or address the API server reaches the webhook at (certificate SAN "
        "and the URL of a managed configuration)",
    )
    webhook_cert_dir: str | None = Field(
        default=None,
        description="Directory with tls.crt and tls.key (a Secret's mount); unset: a "
        "self-signed certificate for --webhook-host is made at startup (needs openssl)",
    )
    webhook_configuration: str | None = Field(
        default=None,
        description="Name of a ValidatingWebhookConfiguration that kopf creates and keeps "
        "current with this process's URL and CA (local runs); unset: it comes from manifests",
    )
    webhook_fail_closed: bool = Field(
        default=False,
        description="In a managed configuration, refuse slices while the webhook is "
        "unreachable (failurePolicy Fail); default fail open (Ignore): publishing never "
        "depends on the validator being up",
    )
    domain_key: str | None = Field(
        default=None,
        description="A node label whose values are topology domains (a rack, a block): the "
        "devices of the pools local to each domain's nodes are published per domain "
        "(kopf_dra_topology_domain_devices), as kubectl dra pools --by shows them; needs "
        "read access to Nodes",
    )
    queue_label: str | None = Field(
        default=None,
        description="A pod label naming a queue (Kueue's kueue.x-k8s.io/cluster-queue-name, "
        "on the pods it admits): the devices held per namespace (kopf_dra_namespace_devices) "
        "are also split by the value of this label on the pods holding them, to compare with "
        "the queue's usage; needs read access to Pods",
    )
    lease_name: str = Field(default="kopf-dra-pool-validator", description="Name of the Lease")
    request_completed_ttl: float = Field(
        default=3600.0,
        gt=0,
        description="Seconds an answered ResourcePoolStatusRequest is kept before it is deleted "
        "(kube-controller-manager's 1 h; with DRAResourcePoolStatus on)",
    )
    request_pending_ttl: float = Field(
        default=86400.0,
        gt=0,
        description="Seconds an unanswered ResourcePoolStatusRequest is kept before it is "
        "deleted (kube-controller-manager's 24 h: a stuck request does not stay for ever)",
    )
    request_incomplete_retries: int = Field(
        default=5,
        ge=0,
        description="Times a ResourcePoolStatusRequest waits for a pool still being published "
        "before it is answered with that pool's validationError",
    )
    request_incomplete_retry_delay: float = Field(
        default=2.0,
        gt=0,
        description="Seconds between those waits (drivers publish a pool's slices one by one)",
    )
