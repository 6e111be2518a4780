"""allocator layer of kopf-dra (see DESIGN.md, Layers)."""
