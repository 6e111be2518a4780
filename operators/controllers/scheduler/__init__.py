"""The secondary scheduler: allocates claims with the structured-parameters allocator and binds
pods whose spec.schedulerName is ours (KEP-4381 and the KEPs built on it)."""
