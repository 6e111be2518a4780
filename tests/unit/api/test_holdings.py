"""Devices held per namespace and queue, kept as claims and pods change in any order."""

from __future__ import annotations

from typing import Any

from operators.api.holdings import KUEUE_QUEUE_LABEL, Holdings, held
from operators.api.keys import ObjectKey

J = dict[str, Any]


def claim(name: str, ns: str, pods: list[str], devices: int) -> J:
    status: J = {"reservedFor": [{"resource": "pods", "name": p, "uid": p} for p in pods]}
    if devices:
        status["allocation"] = {
            "devices": {"results": [{"device": f"gpu-{i}"} for i in range(devices)]}
        }
    return {"metadata": {"name": name, "namespace": ns}, "status": status}


def pod(name: str, ns: str, queue: str | None) -> J:
    labels = {KUEUE_QUEUE_LABEL: queue} if queue else {}
    return {"metadata": {"name": name, "namespace": ns, "labels": labels}}


def test_a_claim_counts_for_its_pods_queue_whichever_arrives_first() -> None:
    h = Holdings()
    assert h.set_claim(ObjectKey("team-a", "c1"), claim("c1", "team-a", ["p1"], 2)) == {
        ("team-a", "")
    }
    assert h.set_pod(ObjectKey("team-a", "p1"), "gpus") == {("team-a", ""), ("team-a", "gpus")}
    assert dict(h.sums) == {("team-a", "gpus"): 2}
    h.set_claim(ObjectKey("team-a", "c2"), claim("c2", "team-a", ["p2"], 1))
    assert dict(h.sums) == {("team-a", "gpus"): 2, ("team-a", ""): 1}


def test_a_deallocated_or_deleted_claim_leaves_no_sum_behind() -> None:
    h = Holdings()
    h.set_pod(ObjectKey("team-a", "p1"), "gpus")
    h.set_claim(ObjectKey("team-a", "c1"), claim("c1", "team-a", ["p1"], 1))
    assert h.set_claim(ObjectKey("team-a", "c1"), claim("c1", "team-a", [], 0)) == {
        ("team-a", "gpus")
    }
    assert dict(h.sums) == {}
    h.set_claim(ObjectKey("team-a", "c1"), claim("c1", "team-a", ["p1"], 1))
    h.set_claim(ObjectKey("team-a", "c1"), None)
    h.set_pod(ObjectKey("team-a", "p1"), None)
    assert dict(h.sums) == {}


def test_a_listing_sums_devices_and_claims_per_namespace_and_queue() -> None:
    claims = [
        claim("c1", "team-a", ["p1"], 1),
        claim("c2", "team-a", ["p2"], 2),
        claim("c3", "team-b", ["p3"], 1),
        claim("pending", "team-b", [], 0),
    ]
    pods = [pod("p1", "team-a", "queue"), pod("p2", "team-a", "queue"), pod("p3", "team-b", None)]
    assert held(claims, pods, KUEUE_QUEUE_LABEL) == {
        ("team-a", "queue"): (3, 2),
        ("team-b", ""): (1, 1),
    }
