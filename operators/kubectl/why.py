"""``kubectl dra why POD``: for a pending pod, kopf-dra's scheduling answer now, per node; for a
bound one, the devices it holds. Either way, the pod's last scheduling Events.

The answer is ``kopf-dra simulate``'s (``simulate.engine.pod_answer``: the scheduler's own
cycle, allocator and filter timeout) on the objects just read, whichever scheduler the pod
names: kube-scheduler's default profile's filters (ports, volumes, pod affinity, topology
spread, declared features) with the devices, as the scheduler runs them. Objects are taken as
stored: a field kopf-dra does not know is kept, never refused, and an object that cannot be
read at all is left out with a note. Pure: the objects, events and clocks come in as arguments.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from operators.api.core import Event, Pod
from operators.api.features import KubernetesVersion
from operators.api.groups import group_name
from operators.api.keys import ObjectKey
from operators.api.resource import ResourceClaim
from operators.api.timestamps import age
from operators.display import paint, short_age, table
from operators.kubectl import claims as claim_view
from operators.simulate import engine, output
from operators.simulate.cluster import Refusal
from operators.simulate.group import GroupAnswer, group_answer
from operators.simulate.snapshot import Document, InputError, Source
from operators.simulate.validate import build, defaulted

KOPF_DRA = "kopf-dra"
DEFAULT_SCHEDULER = "default-scheduler"
SCHEDULING_REASONS = frozenset(
    {
        "FailedScheduling",
        "Scheduled",
        "Preempted",
        "Preempting",
        "FailedBinding",
        "NotTriggerScaleUp",
        "TriggeredScaleUp",
        # The claim controllers': a claim not created (a template missing, a quota refusing).
        "FailedResourceClaimCreation",
    }
)
#: What the ResourceQuota admission plugin says when a claim would exceed a quota.
EXCEEDED_QUOTA = "exceeded quota: "
LAST_EVENTS = 5
SHOWN_NODES = 20


@dataclasses.dataclass
class Why:
    pod: str
    scheduler: str
    phase: str
    node: str | None = None
    answer: engine.Answer | None = None
    error: str | None = None
    held: list[ResourceClaim] = dataclasses.field(default_factory=list)
    missing: list[str] = dataclasses.field(default_factory=list)
    events: list[Event] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    refused: list[Refusal] = dataclasses.field(default_factory=list)
    #: The pod's claim refused by a ResourceQuota and not created since: the refusal.
    quota: str | None = None
    #: The pod names a PodGroup: the group's cycle (``--pod-group``), which is what places
    #: it (its domains, where the group is constrained to one; its tree).
    group: GroupAnswer | None = None

    @property
    def fits(self) -> bool:
        if self.node is not None:
            return True
        placed = self.group is None or self.group.outcome == "success"
        return (
            self.quota is None
            and placed
            and (self.answer is not None and self.answer.outcome == "success")
        )


def quota_wait(pod: Pod, events: Sequence[Event]) -> str | None:
    """The message of the pod's last FailedResourceClaimCreation Event that names a quota,
    while a claim from a template is not recorded yet: the pod waits for quota (the claim
    controllers retry once the quota changes)."""
    unrecorded = [
        e
        for e in pod.spec.resource_claims
        if e.resource_claim_template_name and not pod.claim_status(e)[0]
    ]
    if not unrecorded:
        return None
    refusals = [
        e.message
        for e in events
        if e.reason == "FailedResourceClaimCreation" and EXCEEDED_QUOTA in (e.message or "")
    ]
    return refusals[-1] if refusals else None


def _seen(event: Event) -> str:
    series = event.series.last_observed_time if event.series is not None else None
    return (
        series
        or event.last_timestamp
        or event.event_time
        or event.metadata.creation_timestamp
        or ""
    )


def scheduling_events(events: Sequence[Mapping[str, Any]], pod: Pod) -> list[Event]:
    """The pod's scheduling Events (this pod, not an earlier one of its name), oldest first,
    the last ``LAST_EVENTS``."""
    found = []
    for body in events:
        event = Event.load(body)
        involved = event.involved_object
        if involved.name != pod.metadata.name or (involved.kind or "Pod") != "Pod":
            continue
        if involved.uid and pod.metadata.uid and involved.uid != pod.metadata.uid:
            continue
        if event.reason in SCHEDULING_REASONS:
            found.append(event)
    return sorted(found, key=_seen)[-LAST_EVENTS:]


def scope_notes(pod_body: Mapping[str, Any], refused: Sequence[Refusal]) -> list[str]:
    """Which scheduler the pod names, and what could not be read."""
    spec = pod_body.get("spec") or {}
    scheduler = spec.get("schedulerName") or DEFAULT_SCHEDULER
    notes = []
    if scheduler != KOPF_DRA:
        notes.append(
            f"the pod names scheduler {scheduler}: this is kopf-dra's answer (its allocator and "
            f"node checks), which {scheduler} may not share"
        )
    if refused:
        notes.append(
            "the answer considers only what could be read: "
            + "; ".join(f"{r} was forbidden" for r in refused)
        )
    return notes


def answer(
    pod_body: Mapping[str, Any],
    documents: Sequence[Document],
    events: Sequence[Mapping[str, Any]],
    version: KubernetesVersion,
    options: engine.Options,
    now: datetime.datetime,
    refused: Sequence[Refusal] = (),
    monotonic: Callable[[], float] = time.monotonic,
) -> Why:
    """The answer for the pod ``pod_body`` (as just read) among ``documents`` (the cluster)."""
    pod = Pod.load(pod_body)
    why = Why(
        pod=pod.key,
        scheduler=pod.spec.scheduler_name or DEFAULT_SCHEDULER,
        phase=pod.status.phase or "Pending",
        node=pod.spec.node_name,
        events=scheduling_events(events, pod),
        notes=scope_notes(pod_body, refused),
        refused=list(refused),
    )
    why.quota = None if pod.spec.node_name else quota_wait(pod, why.events)
    snapshot, problems = build(
        [*documents, Document(Source("pod"), dict(pod_body))],
        strict=False,
        version=version,
        stored=True,
    )
    why.notes += [f"left out, cannot be read: {p}" for p in problems]
    if pod.spec.node_name:
        why.held, why.missing = claim_view.claims_of(pod, snapshot.claims.values())
        return why
    try:
        key = ObjectKey(pod.metadata.namespace or "", pod.metadata.name or "")
        if key not in snapshot.pods:
            snapshot.add("Pod", defaulted("Pod", pod_body))
        why.answer = engine.pod_answer(snapshot, key, options, now, monotonic)
        name = group_name(snapshot.pods[key])
        if name is not None and ObjectKey(key.namespace, name) in snapshot.pod_groups:
            why.group = group_answer(
                snapshot, ObjectKey(key.namespace, name), options, now, monotonic
            )
    except (InputError, ValidationError) as e:
        why.error = str(e)
    return why


def group_lines(answer: GroupAnswer, pod: str) -> list[str]:
    """The answer for a pod of a PodGroup is its group's cycle (not the pod alone): the
    group's verdict, where this pod goes or what it is told, then the group's domains (the one
    chosen, why not each other) and its tree, as ``simulate --pod-group`` shows them."""
    said = f": {answer.message}" if answer.message else ""
    member = answer.members.get(ObjectKey.parse(pod))
    lines = ["", f"POD GROUP  {answer.group}: {answer.outcome}{said}"]
    if member is not None:
        told = (
            f" on {member.node}" if member.node else f": {member.message}" if member.message else ""
        )
        lines.append(f"THIS POD   {member.outcome}{told}")
    return [*lines, *output.domain_lines(answer)[1:], *output.tree_lines(answer)[1:]]


def _verdict(node: engine.NodeAnswer) -> str:
    if node.chosen:
        return "fits (chosen)"
    return {"success": "fits", "unsatisfiable": "does not fit"}.get(node.outcome, node.outcome)


def _devices(allocations: Mapping[str, Any]) -> str:
    return ", ".join(
        claim_view.device_name(r) for a in allocations.values() for r in a.devices.results
    )


def node_rows(result: engine.Answer, *, wide: bool = False) -> list[list[str]]:
    """One row per node: fitting ones first (the chosen one on top), then by name."""
    ordered = sorted(
        result.nodes.items(),
        key=lambda item: (not item[1].chosen, item[1].outcome != "success", item[0]),
    )
    rows = [["NODE", "VERDICT", "DEVICES OR REASON"]]
    for name, node in ordered if wide else ordered[:SHOWN_NODES]:
        shown = result.allocations if node.chosen else node.allocations
        rows.append([name, _verdict(node), node.reason or _devices(shown) or "-"])
    if not wide and len(ordered) > SHOWN_NODES:
        rows.append([f"({len(ordered) - SHOWN_NODES} more nodes: -o wide lists them all)", "", ""])
    return rows


def _headline(why: Why) -> str:
    if why.node is not None:
        return f"bound to node {why.node}"
    if why.quota is not None:
        return f"waits for quota: its claim was refused ({why.quota})"
    if why.error is not None:
        return f"cannot be answered: {why.error}"
    later = (
        "the scheduler has not placed it yet"
        if why.scheduler == KOPF_DRA
        else f"placing it is up to {why.scheduler}"
    )
    if why.group is not None:
        member = why.group.members.get(ObjectKey.parse(why.pod))
        if why.group.outcome == "success" and member is not None and member.node:
            return f"fits: its PodGroup's cycle would place it on {member.node} now ({later})"
        said = f": {why.group.message}" if why.group.message else ""
        return f"its PodGroup {why.group.group} is not placed ({why.group.outcome}{said})"
    assert why.answer is not None
    result = why.answer
    if result.outcome == "success":
        return f"fits: kopf-dra would place it on {result.node} now ({later})"
    if result.outcome == "waiting":
        return f"waits: {result.error}"
    reasons = "; ".join(result.reasons) or result.error or ""
    unseen = sorted({r.resource for r in why.refused} & {"nodes", "resourceslices"})
    if unseen:  # "0/0 nodes" means nothing where the nodes could not be read
        reasons += f" ({' and '.join(unseen)} could not be read: see the notes)"
    return f"does not fit: {reasons}"


def _event_rows(why: Why, now: datetime.datetime) -> list[list[str]]:
    rows = [["LAST SEEN", "TYPE", "REASON", "FROM", "MESSAGE"]]
    for event in why.events:
        source = event.reporting_component or (event.source.component if event.source else None)
        count = event.series.count if event.series is not None else event.count
        message = (event.message or "") + (f" (x{count})" if count and count > 1 else "")
        rows.append(
            [
                short_age(age(_seen(event), now)),
                event.type or "",
                event.reason or "",
                source or "-",
                message,
            ]
        )
    return rows


def render(why: Why, now: datetime.datetime, *, wide: bool = False, colour: bool = False) -> str:
    verdict = "green" if why.fits else "red"
    lines = [
        f"POD        {why.pod}",
        f"SCHEDULER  {why.scheduler}",
        f"PHASE      {why.phase}",
        f"ANSWER     {paint(_headline(why), verdict, colour)}",
    ]
    if why.node is not None:
        lines += ["", paint("HOLDS", "bold", colour)]
        held = claim_view.rows(why.held, now, wide=wide)
        lines += [line.rstrip() for line in table(held)] if why.held else ["  (no claims)"]
        lines += [f"  {m}" for m in why.missing]
    elif why.group is not None:
        lines += group_lines(why.group, why.pod)
    elif why.answer is not None:
        if why.answer.nodes:
            lines += ["", *(line.rstrip() for line in table(node_rows(why.answer, wide=wide), ""))]
        lines += output.explain_lines(why.answer)
        lines += output.preemption_lines(why.answer)
    lines += ["", paint("EVENTS", "bold", colour)]
    if why.events:
        lines += [line.rstrip() for line in table(_event_rows(why, now))]
    else:
        lines.append("  (no scheduling events)")
    notes = [*(why.answer.notes if why.answer is not None else []), *why.notes]
    if why.group is not None:  # the group's cycle, not the pod alone, is the answer
        notes = [*why.group.notes, *why.notes]
    if notes:
        lines.append("")
        lines += [f"NOTE  {n}" for n in notes]
    return "\n".join(lines) + "\n"


def as_json(why: Why) -> dict[str, Any]:
    """``-o json|yaml``: the pod, simulate's answer (its JSON contract) or the claims held,
    the scheduling events and the notes."""
    return {
        "pod": why.pod,
        "scheduler": why.scheduler,
        "phase": why.phase,
        "node": why.node,
        "fits": why.fits,
        "answer": output.as_json(why.answer) if why.answer is not None else None,
        "error": why.error,
        "holds": {c.key: [r.dump() for r in c.allocated_results()] for c in why.held},
        "missing": why.missing,
        "events": [e.dump() for e in why.events],
        "notes": why.notes,
        "forbidden": [str(r) for r in why.refused],
        "quota": why.quota,
        "podGroup": output.group_json(why.group) if why.group is not None else None,
    }
