"""A seeded fault suite (``make chaos``): faults against the running system, then invariants.

``invariants`` judges a settled cluster (pure), ``faults`` injects faults into a running
system, ``scenarios`` combines workloads and faults per seed, ``runner`` starts a fresh local
control plane per scenario and reports PASS/FAIL per invariant.
"""
