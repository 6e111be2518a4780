"""``kubectl dra claims``: each claim's state, devices, holders, binding and device status."""

from __future__ import annotations

from operators.api.core import Pod
from operators.api.resource import ResourceClaim
from operators.kubectl import claims
from tests.unit.kubectl.objects import NOW, allocation, claim, pod


def _load(body: dict[str, object]) -> ResourceClaim:
    return ResourceClaim.load(body)


HELD = _load(
    claim(
        "held",
        allocation=allocation("node-1", "gpu-0"),
        reservedFor=[{"resource": "pods", "name": "runner", "uid": "uid-runner"}],
    )
)
PENDING = _load(claim("waiting", count=2))


def test_the_state_reads_as_kubectl_get_resourceclaims() -> None:
    allocated = _load(claim("a", allocation=allocation("node-1", "gpu-1")))
    deleting = _load(claim("d", allocation=allocation("node-1", "gpu-1")))
    deleting.metadata.deletion_timestamp = "2026-11-28T11:59:00Z"
    assert [claims.state(c) for c in (HELD, PENDING, allocated, deleting)] == [
        "allocated,reserved",
        "pending",
        "allocated",
        "deleted,allocated",
    ]


def test_a_share_shows_what_it_consumes_and_admin_access_is_marked() -> None:
    shared = _load(
        claim(
            "nic",
            allocation=allocation(
                "node-1", "nic-0", shareID="s-1", consumedCapacity={"bandwidth": "40G"}
            ),
        )
    )
    admin = _load(claim("admin", allocation=allocation("node-1", "gpu-0", adminAccess=True)))
    assert claims.devices(shared) == "gpu: gpu.example.com/node-1/nic-0 (bandwidth 40G)"
    assert claims.devices(admin) == "gpu: gpu.example.com/node-1/gpu-0 [admin]"
    assert claims.devices(PENDING) == "-"


def _with_binding(conditions: list[dict[str, str]]) -> ResourceClaim:
    body = claim(
        "fabric",
        allocation=allocation(
            "node-1",
            "gpu-0",
            bindingConditions=["Attached"],
            bindingFailureConditions=["AttachFailed"],
        ),
    )
    body["status"]["devices"] = [
        {
            "driver": "gpu.example.com",
            "pool": "node-1",
            "device": "gpu-0",
            "conditions": [
                {**c, "lastTransitionTime": "2026-11-28T11:58:00Z", "reason": "R", "message": ""}
                for c in conditions
            ],
            "networkData": {"interfaceName": "eth1", "ips": ["10.0.0.5/24"]},
        }
    ]
    return _load(body)


def test_binding_conditions_are_read_as_the_scheduler_reads_them() -> None:
    waiting = _with_binding([{"type": "Attached", "status": "False"}])
    ready = _with_binding([{"type": "Attached", "status": "True"}])
    failed = _with_binding([{"type": "AttachFailed", "status": "True"}])
    assert claims.binding(HELD, NOW) == "-"
    assert (
        claims.binding(waiting, NOW) == "pending: waiting for gpu.example.com/node-1/gpu-0 Attached"
    )
    assert claims.binding(ready, NOW) == "ready"
    assert claims.binding(failed, NOW).startswith("failed: claim team-a/fabric: device ")
    assert claims.device_status(ready) == "gpu-0: Attached=True eth1 10.0.0.5/24"
    assert claims.device_status(HELD) == "-"


def test_the_table_and_its_wide_and_all_namespaces_columns() -> None:
    other = _load(claim("other", namespace="team-b"))
    text = claims.render([PENDING, HELD, other], NOW)
    assert text.splitlines() == [
        "NAME     STATE               DEVICES                            "
        "RESERVED FOR  BINDING  AGE",
        "held     allocated,reserved  gpu: gpu.example.com/node-1/gpu-0  pod/runner    -        5m",
        "waiting  pending             -                                  -             -        5m",
        "other    pending             -                                  -             -        5m",
    ]
    wide = claims.render([HELD], NOW, wide=True, namespaced=True).splitlines()
    assert wide[0].split() == [
        "NAMESPACE", "NAME", "STATE", "DEVICES", "RESERVED", "FOR", "BINDING", "AGE", "NODE",
        "DEVICE", "STATUS",
    ]  # fmt: skip
    assert wide[1].split()[0] == "team-a"
    assert wide[1].split()[-2:] == ["node-1", "-"]
    assert claims.render([], NOW, empty="No ResourceClaims found.") == "No ResourceClaims found.\n"


def test_a_pods_claims_and_the_entries_without_one() -> None:
    body = pod("runner", "held", "gone")
    body["spec"]["resourceClaims"].append({"name": "t", "resourceClaimTemplateName": "gpu-tpl"})
    found, missing = claims.claims_of(Pod.load(body), [HELD, PENDING])
    assert [c.key for c in found] == ["team-a/held"]
    assert missing == [
        "entry gone: claim gone does not exist",
        "entry t: no claim from template gpu-tpl yet (the claim-template controller makes it)",
    ]
