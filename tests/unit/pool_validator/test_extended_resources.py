"""A device allocated through a pod's special claim for extended resources (KEP-5004) counts
as allocated: the validator reads every allocated claim, whatever made it."""

from __future__ import annotations

from operators.api.core import Node, Pod
from operators.api.resource import DeviceClass, ResourceClaim
from operators.controllers.pool_validator import planning
from operators.controllers.pool_validator.handlers import claim_pools
from operators.controllers.pool_validator.model import PoolStatusStatus
from operators.scheduling.extended import (
    class_mapping,
    extended_resources,
    is_special_claim,
)
from operators.scheduling.nodes import pod_requests
from tests.unit.pool_validator.builders import DRIVER, POOL, device, report, result, slice_

POD = Pod.load(
    {
        "metadata": {"name": "trainer", "namespace": "default", "uid": "trainer-uid"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "resources": {
                        "requests": {"example.kopf-dra.io/gpu": "1"},
                        "limits": {"example.kopf-dra.io/gpu": "1"},
                    },
                }
            ]
        },
    }
)
GPU = DeviceClass.load(
    {"metadata": {"name": "gpu"}, "spec": {"extendedResourceName": "example.kopf-dra.io/gpu"}}
)


def special_claim() -> ResourceClaim:
    """The claim as the scheduler writes it (its own builder), allocated ``d0`` of the pool."""
    extended = extended_resources(POD, class_mapping([GPU]), pod_requests(POD))
    assert extended is not None
    node_claim = extended.for_node(Node.load({"metadata": {"name": "node-1"}}))
    assert node_claim is not None
    body = node_claim.named("trainer-extended-resources-k7b2q").dump()
    (request,) = body["spec"]["devices"]["requests"]
    body["status"] = {
        "allocation": {"devices": {"results": [{**result("d0"), "request": request["name"]}]}},
        "reservedFor": [{"resource": "pods", "name": "trainer", "uid": "trainer-uid"}],
    }
    return ResourceClaim.load(body)


def test_a_device_of_a_special_claim_counts_as_allocated() -> None:
    claim = special_claim()
    assert is_special_claim(claim, POD)
    # The index files it under its pool, and the pool's report counts its device.
    assert claim_pools(claim.dump()) == {(DRIVER, POOL)}
    r = report(slice_("devices", device("d0"), device("d1")), claims=(claim,))
    assert (r.devices, r.allocated_devices) == (2, 1)
    status = PoolStatusStatus.load(
        planning.plan_pool(r, None, planning.Timing(), grace=60, now="2026-01-01T00:00:00Z").status
    )
    assert status.devices is not None
    assert (status.devices.total, status.devices.allocated) == (2, 1)
