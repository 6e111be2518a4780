"""Settings of the fabric controller."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from operators.settings import LeaderElectionSettings


class FabricSettings(LeaderElectionSettings):
    manager_url: str = Field(
        default="http://fabric-manager-sim.kopf-dra.svc:8470", description="Fabric manager URL"
    )
    manager_token_file: str | None = Field(
        default=None,
        description="File with this cluster's bearer token for the fabric manager (a Secret's "
        "key; re-read when it changes); the token says which cluster we are there",
    )
    driver_name: str = Field(
        default="example.kopf-dra.io",
        description="Driver of the published fabric pools (the node driver that hot-plugs)",
    )
    condition_domain: str = Field(
        default="fabric.kopf-dra.io",
        description="Domain of the binding conditions <domain>/attached, <domain>/attach-failed",
    )
    node_label: str = Field(
        default="resource.kopf-dra.io/fabric", description="Label of nodes wired to the fabric"
    )
    fabric_name: str = Field(
        default="fabric1", description="Value of --node-label on the nodes of this fabric"
    )
    after_attach: Literal["bind", "reschedule"] = Field(
        default="bind",
        description="bind: the pod binds to the node; reschedule: hand the device to the node's "
        "driver and fail the binding so the pod is rescheduled onto it (KEP-5007 composable flow)",
    )
    publish_seconds: float = Field(
        default=10.0, gt=0, description="How often the free-device pools are republished"
    )
    poll_seconds: float = Field(
        default=1.0, gt=0, description="How often running operations are polled (besides waits)"
    )
    binding_timeout: float = Field(
        default=600.0,
        description="Seconds from allocationTimestamp after which an unattached device is given up",
    )
    handover_timeout: float = Field(
        default=60.0,
        description="reschedule: seconds to wait for the node's pool to publish an attached "
        "device before the binding is failed anyway",
    )
    handover_grace: float = Field(
        default=0.5,
        ge=0,
        description="reschedule: seconds the node's pool must have published the device before "
        "the binding is failed (lets the scheduler's cache catch up)",
    )
    lease_name: str = Field(default="kopf-dra-fabric", description="Name of the Lease")
