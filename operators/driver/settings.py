"""Settings of the example driver (flags and ``KOPF_DRA_*`` environment variables)."""

from __future__ import annotations

from pydantic import Field, field_validator

from operators.settings import Settings

DEFAULT_DRIVER = "example.kopf-dra.io"
DEVICE_SOURCES = ("profiles", "nvml")


class DriverSettings(Settings):
    node_name: str = Field(
        default="", description="This node's name (in a DaemonSet: the downward API spec.nodeName)"
    )
    driver_name: str = Field(default=DEFAULT_DRIVER, description="The DRA driver name")
    profiles: str | None = Field(
        default=None,
        description="Path of the device profile config (YAML); default: a built-in demo node",
    )
    devices: str = Field(
        default="profiles",
        description="Where the devices come from: profiles (simulated, from --profiles) or nvml "
        "(this node's NVIDIA GPUs through NVML; needs the kopf-dra[nvidia] extra)",
    )
    dynamic_mig: bool = Field(
        default=False,
        description="With --devices nvml on GPUs in MIG mode: publish every MIG profile at every "
        "placement as partitionable devices, create the instance at prepare and destroy it at "
        "unprepare (without it: the MIG devices that exist)",
    )
    driver_root: str | None = Field(
        default=None,
        description="Where the NVIDIA driver's libraries are (e.g. /usr/local/nvidia, with "
        "lib64/ in it); default: found through ldconfig -p",
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

    @field_validator("devices")
    @classmethod
    def _known_source(cls, value: str) -> str:
        if value not in DEVICE_SOURCES:
            raise ValueError(
                f"unknown device source {value!r} (known: {', '.join(DEVICE_SOURCES)})"
            )
        return value
