"""The one list of structured log field names: every component logs the same thing the same way,
so one query finds a pod, a claim or a device across all of them."""

COMPONENT = "component"
POD = "pod"  # ns/name
CLAIM = "claim"  # ns/name
NODE = "node"
POOL = "pool"  # driver/pool
DEVICE = "device"  # driver/pool/device
REASON = "reason"
