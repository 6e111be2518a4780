"""Settings of the example driver (flags and ``KOPF_DRA_*`` environment variables)."""

from __future__ import annotations

from pydantic import Field

from operators.settings import Settings

DEFAULT_DRIVER = "example.kopf-dra.io"


class DriverSettings(Settings):
    node_name: str = Field(
        default="", description="This node's name (in a DaemonSet: the downward API spec.nodeName)"
    )
    driver_name: str = Field(default=DEFAULT_DRIVER, description="The DRA driver name")
    profiles: str | None = Field(
        default=None,
        description="Path of the device profile config (YAML); default: a built-in demo node",
    )
    kubelet_dir: str = Field(
        default="/var/lib/kubelet",
        description="The kubelet's root directory (plugins_registry/ and plugins/ live there)",
    )
    cdi_dir: str = Field(default="/var/run/cdi", description="Where CDI specs are written")
    state_dir: str | None = Field(
        default=None,
        description="Where the checkpoint is kept; default: <kubelet-dir>/plugins/<driver-name>",
    )
    pool_name: str | None = Field(default=None, description="Pool name; default: the node name")
    resync_seconds: float = Field(
        default=10.0,
        gt=0,
        description="How often to re-read the Node (hot-plugged devices) and repair the slices",
    )
    unhealthy_devices: list[str] = Field(
        default_factory=list,
        description="Devices to report unhealthy (simulated health; a GPU's name covers its "
        "partitions): the kubelet hears it on the health stream, and the device is published "
        "with a NoSchedule taint",
    )
    allow_arbitrary_node_status: bool = Field(
        default=False,
        description="Start even when this identity may write the device status of claims on any "
        "node (resourceclaims/driver arbitrary-node:patch/update): development with an admin "
        "kubeconfig only; a node's driver needs only the associated-node: verbs",
    )
