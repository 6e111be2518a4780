"""The example scenarios, placed by the in-cluster scheduler and run on real kubelets with the
devices the in-cluster driver prepared: the e2e suite's own tests (e2e/test_scenarios.py),
against the installed cluster (the fixtures of e2e/cluster/conftest.py)."""

from e2e.test_gangs import (
    test_gang_training_all_four_bound_together,
    test_gang_training_one_gpu_short_binds_none,
)
from e2e.test_scenarios import (
    test_admin_access_sees_devices_in_use,
    test_extended_resources,
    test_fabric_gpu_with_binding_conditions,
    test_mig_partitions,
    test_multi_host_shared_claim,
    test_prioritized_alternatives,
    test_priority_preemption,
    test_shared_nic_bandwidth_across_namespaces,
)

__all__ = [
    "test_admin_access_sees_devices_in_use",
    "test_extended_resources",
    "test_fabric_gpu_with_binding_conditions",
    "test_gang_training_all_four_bound_together",
    "test_gang_training_one_gpu_short_binds_none",
    "test_mig_partitions",
    "test_multi_host_shared_claim",
    "test_prioritized_alternatives",
    "test_priority_preemption",
    "test_shared_nic_bandwidth_across_namespaces",
]
