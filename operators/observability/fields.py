"""The one list of structured log field names (CONVENTIONS.md #11)."""

COMPONENT = "component"
POD = "pod"  # ns/name
CLAIM = "claim"  # ns/name
NODE = "node"
POOL = "pool"  # driver/pool
DEVICE = "device"  # driver/pool/device
REASON = "reason"
DURATION_MS = "duration_ms"
