"""controllers layer of kopf-dra (see docs/architecture.md, Layers)."""
