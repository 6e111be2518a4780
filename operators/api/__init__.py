"""Pure models of resource.k8s.io/v1 and the core/v1 subset, quantities, limits, validation."""
