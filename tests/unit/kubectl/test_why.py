"""``kubectl dra why``: kopf-dra's answer for a pending pod per node, what a bound pod holds,
the pod's scheduling Events, and what the answer leaves out."""

from __future__ import annotations

from typing import Any

from operators.api.features import DEFAULT_VERSION
from operators.kubectl import why
from operators.simulate.cluster import Refusal
from operators.simulate.engine import Options
from operators.simulate.snapshot import Document, Source
from tests.unit.kubectl.objects import NOW, claim, cluster, node, pod

J = dict[str, Any]


def _ask(
    pod_body: J, *more: J, events: list[J] | None = None, refused: list[Refusal] | None = None
) -> why.Why:
    documents = [Document(Source("cluster"), b) for b in [*cluster(), *more]]
    return why.answer(
        pod_body,
        documents,
        events or [],
        DEFAULT_VERSION,
        Options(version=DEFAULT_VERSION),
        NOW,
        refused or [],
    )


def _event(reason: str, message: str, seen: str, uid: str = "uid-trainer", **more: Any) -> J:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"trainer.{reason}.{seen}", "namespace": "team-a"},
        "involvedObject": {"kind": "Pod", "name": "trainer", "namespace": "team-a", "uid": uid},
        "reason": reason,
        "message": message,
        "type": "Warning" if reason.startswith("Failed") else "Normal",
        "lastTimestamp": seen,
        "source": {"component": "kopf-dra"},
        **more,
    }


def test_a_pod_that_fits_nowhere_is_told_why_per_node() -> None:
    trainer = pod("trainer", "big")
    answer = _ask(trainer, claim("big", count=3), trainer)
    assert not answer.fits
    assert answer.answer is not None
    assert answer.answer.outcome == "unsatisfiable"
    text = why.render(answer, NOW)
    assert (
        "ANSWER     does not fit: 0/2 nodes are available: 2 cannot allocate claim team-a/big"
        in text
    )
    rows = [line for line in text.splitlines() if line.startswith("node-")]
    assert [r.split()[:4] for r in rows] == [
        ["node-1", "does", "not", "fit"],
        ["node-2", "does", "not", "fit"],
    ]
    assert "1 usable, 3 needed" in rows[0]
    assert "2 usable, 3 needed" in rows[1]


def test_a_pod_that_fits_gets_the_node_and_devices_it_would_get() -> None:
    trainer = pod("trainer", "two")
    answer = _ask(trainer, claim("two", count=2), trainer)
    assert answer.fits
    assert answer.answer is not None
    assert answer.answer.node == "node-2"
    text = why.render(answer, NOW)
    assert (
        "fits: kopf-dra would place it on node-2 now (the scheduler has not placed it yet)" in text
    )
    assert (
        "node-2  fits (chosen)  gpu.example.com/node-2/gpu-0, gpu.example.com/node-2/gpu-1" in text
    )


def test_a_bound_pod_shows_the_devices_it_holds() -> None:
    (runner,) = [b for b in cluster() if b["kind"] == "Pod"]
    answer = _ask(runner)
    assert answer.fits
    assert answer.node == "node-1"
    assert answer.answer is None
    text = why.render(answer, NOW)
    assert "ANSWER     bound to node node-1" in text
    assert "held  allocated,reserved  gpu: gpu.example.com/node-1/gpu-0  pod/runner" in text


def test_another_scheduler_is_named_and_no_filter_is_said_to_be_left_out() -> None:
    trainer = pod(
        "trainer",
        "one",
        schedulerName="default-scheduler",
        topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "zone"}],
    )
    answer = _ask(trainer, claim("one"), trainer)
    assert answer.scheduler == "default-scheduler"
    assert any("names scheduler default-scheduler" in n for n in answer.notes)
    assert not [n for n in answer.notes if "does not evaluate" in n]
    assert "placing it is up to default-scheduler" in why.render(answer, NOW)


def test_fields_kopf_dra_does_not_know_are_kept_not_refused() -> None:
    trainer = pod("trainer", "one")
    trainer["spec"]["someFutureField"] = {"x": 1}
    future = claim("one")
    future["spec"]["devices"]["requests"][0]["exactly"]["futureKnob"] = True
    answer = _ask(trainer, future, trainer)
    assert answer.error is None
    assert answer.fits
    assert not [n for n in answer.notes if n.startswith("left out")]


def test_what_could_not_be_read_is_said() -> None:
    trainer = pod("trainer", "one")
    refused = [Refusal("list", "nodes"), Refusal("list", "pods", None)]
    answer = _ask(trainer, claim("one", count=5), trainer, refused=refused)
    assert (
        "the answer considers only what could be read: list nodes cluster-wide was forbidden; "
        "list pods cluster-wide was forbidden"
    ) in answer.notes
    assert why.as_json(answer)["forbidden"] == ["list nodes cluster-wide", "list pods cluster-wide"]
    headline = why.render(answer, NOW).splitlines()[3]
    assert headline.endswith("(nodes could not be read: see the notes)")


def test_the_last_scheduling_events_of_this_pod_only() -> None:
    trainer = pod("trainer", "one")
    events = [
        _event("FailedScheduling", "0/2 nodes are available", "2026-11-28T11:59:00Z", count=3),
        _event("Scheduled", "old pod of the same name", "2026-11-28T11:58:00Z", uid="other"),
        _event("Pulled", "not about scheduling", "2026-11-28T11:59:30Z"),
        _event("FailedScheduling", "earlier", "2026-11-28T11:57:00Z"),
    ]
    answer = _ask(trainer, claim("one"), trainer, events=events)
    assert [e.message for e in answer.events] == ["earlier", "0/2 nodes are available"]
    (row,) = [line.split() for line in why.render(answer, NOW).splitlines() if "(x3)" in line]
    assert row[:4] == ["60s", "Warning", "FailedScheduling", "kopf-dra"]
    assert " ".join(row[4:]) == "0/2 nodes are available (x3)"


def test_a_claim_that_is_not_there_is_an_answer_not_a_crash() -> None:
    trainer = pod("trainer", "missing")
    answer = _ask(trainer, trainer)
    assert not answer.fits
    assert answer.answer is not None
    assert answer.answer.outcome == "waiting"
    assert "waits:" in why.render(answer, NOW)
    data = why.as_json(answer)
    assert data["answer"]["outcome"] == "waiting"
    assert data["fits"] is False


def test_many_nodes_are_cut_unless_wide() -> None:
    trainer = pod("trainer", "big")
    nodes = [node(f"node-{i:02}") for i in range(25)]
    answer = _ask(trainer, claim("big", count=3), trainer, *nodes)
    assert answer.answer is not None
    short = why.node_rows(answer.answer)
    assert len(short) == 1 + why.SHOWN_NODES + 1
    assert short[-1][0] == "(7 more nodes: -o wide lists them all)"
    assert len(why.node_rows(answer.answer, wide=True)) == 1 + 27


def test_a_pod_whose_claim_a_quota_refused_waits_for_quota() -> None:
    """The claim controllers' FailedResourceClaimCreation naming a quota, the claim from the
    template not recorded: the pod waits for quota, not for a node."""
    trainer = pod("trainer", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "gpu"}])
    refusal = (
        'PodResourceClaim gpu: create ResourceClaim : resourceclaims.resource.k8s.io "trainer-'
        'gpu-x7k2p" is forbidden: exceeded quota: gpus, requested: gpu.example.com.deviceclass.'
        "resource.k8s.io/devices=1, used: gpu.example.com.deviceclass.resource.k8s.io/devices=2,"
        " limited: gpu.example.com.deviceclass.resource.k8s.io/devices=2"
    )
    events = [_event("FailedResourceClaimCreation", refusal, "2026-12-05T10:00:00Z")]
    answer = _ask(trainer, events=events)
    assert answer.quota == refusal
    assert not answer.fits
    assert f"ANSWER     waits for quota: its claim was refused ({refusal})" in why.render(
        answer, NOW
    )
    assert why.as_json(answer)["quota"] == refusal
    recorded = {**trainer, "status": {"phase": "Pending", "resourceClaimStatuses": [
        {"name": "gpu", "resourceClaimName": "trainer-gpu-x7k2p"}
    ]}}  # fmt: skip
    assert _ask(recorded, events=events).quota is None, "created since: no longer waiting"
