"""What ``simulate`` prints: one JSON/YAML contract, and a table people read.

The JSON keys are stable: ``outcome`` (success, unsatisfiable, waiting, error), ``error``,
``node`` (the chosen one), ``allocations`` (claim -> AllocationResult, each carried once: the
chosen node's entry does not repeat them), ``reasons`` (the scheduler's own unschedulable
message), ``nodes`` (per node: outcome, reason, score and its parts, and the allocations of
feasible nodes not chosen), ``notes`` (what the answer assumed), ``preemption`` (when the pod
fits nowhere: ``outcome`` victims, none or not-eligible, the pod's ``priority``, the ``node``
and the ``victims`` with their priority and the devices their eviction frees, and the
``message`` the scheduler gives; nothing is evicted).

For ``--pod-group`` (a ``GroupAnswer``): ``podGroup``, ``outcome``, ``message`` (the group's
reason, None on success), ``policy`` and ``minCount``, ``placedBefore`` (its pods bound
already), ``pods`` (by key, in the order the cycle tried them, bound ones last: ``outcome``
placed, bound, fits, unschedulable, not-tried, left-out, waiting or error; ``node``,
``allocations`` of the pod's own claims, ``message`` what the pod is told), ``sharedClaims``
(the group's claims' allocations, each once), ``preemption`` (when the group fits nowhere:
``outcome`` victims, none or not-eligible, the group's ``priority``, the ``victims`` with their
node and priority, the node each pod would be ``nominated`` to, and the ``message``; nothing is
evicted), ``notes``, and for a topology-constrained group ``topology``: its ``key``, the
``domain`` chosen and every ``domains`` entry (``name``, ``nodes``, ``outcome`` chosen, fits,
unschedulable, ruled-out or not-tried, the group's ``pods`` it would hold, its ``message`` and
each pod's own reason there, ``pods`` by key in ``failed``, and how many pods were
``filtered`` there); for a PodGroup of a tree (CompositePodGroup) ``tree``: every group, the
root first (``group`` as ``podgroup/NS/NAME`` or ``compositepodgroup/NS/NAME``, ``depth``,
``outcome`` placed, fits or unschedulable, its ``message`` and ``domain``). Bad input keeps
the pod answer's shape (``error``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, TextIO

import yaml

from operators.allocator.explain import ClaimBreakdown
from operators.api.resource import AllocationResult
from operators.simulate.engine import Answer, ExtendedAnswer, NodeAnswer, PreemptionAnswer
from operators.simulate.group import GroupAnswer, GroupPreemptionAnswer, MemberAnswer

SHOWN = 4  # device names listed per explanation line


def as_json(answer: Answer | GroupAnswer) -> dict[str, Any]:
    if isinstance(answer, GroupAnswer):
        return group_json(answer)
    return {
        "outcome": answer.outcome,
        "error": answer.error,
        "node": answer.node,
        "allocations": {k: v.dump() for k, v in sorted(answer.allocations.items())},
        "reasons": answer.reasons,
        "nodes": {name: _node_json(n) for name, n in sorted(answer.nodes.items())},
        "notes": answer.notes,
        "preemption": _preemption_json(answer.preemption),
        "extendedResourceClaim": _extended_json(answer.extended),
    }


def _extended_json(e: ExtendedAnswer | None) -> dict[str, Any] | None:
    if e is None:
        return None
    return {
        "claim": e.claim,
        "generateName": e.generate_name,
        "created": e.created,
        "requestMappings": [m.dump() for m in e.mappings],
    }


def _preemption_json(p: PreemptionAnswer | None) -> dict[str, Any] | None:
    if p is None:
        return None
    return {
        "outcome": p.outcome,
        "priority": p.priority,
        "node": p.node,
        "victims": [
            {"pod": pod, "priority": priority, "frees": list(frees)}
            for pod, priority, frees in p.victims
        ],
        "message": p.message,
    }


def _node_json(node: NodeAnswer) -> dict[str, Any]:
    out: dict[str, Any] = {"outcome": node.outcome, "reason": node.reason, "chosen": node.chosen}
    if node.score is not None:
        out["score"] = {
            "total": node.score.points,
            "plugins": dict(sorted(node.score.plugins.items())),
            "rank": node.score.rank,
            "bindingDevices": node.score.binding_devices,
        }
    if node.allocations:
        out["allocations"] = {k: v.dump() for k, v in sorted(node.allocations.items())}
    if node.explanation:
        out["explanation"] = [_claim_json(c) for c in node.explanation]
    return out


def _claim_json(claim: ClaimBreakdown) -> dict[str, Any]:
    return {
        "claim": claim.claim,
        "constraints": list(claim.constraints),
        "requests": [
            {
                "request": r.request,
                "needed": r.needed,
                "usable": list(r.usable),
                "eliminated": [{"reason": k, "devices": list(v)} for k, v in r.eliminated],
            }
            for r in claim.requests
        ],
    }


def group_json(answer: GroupAnswer) -> dict[str, Any]:
    return {
        "podGroup": str(answer.group),
        "outcome": answer.outcome,
        "message": answer.message,
        "policy": answer.policy,
        "minCount": answer.min_count,
        "placedBefore": answer.placed_before,
        "pods": {str(k): _member_json(m) for k, m in answer.members.items()},
        "sharedClaims": {k: v.dump() for k, v in sorted(answer.shared.items())},
        "preemption": _group_preemption_json(answer.preemption),
        "notes": answer.notes,
        "topology": _topology_json(answer),
        "tree": [
            {
                "group": t.ref,
                "depth": t.depth,
                "outcome": t.outcome,
                "message": t.message,
                "domain": t.domain,
            }
            for t in answer.tree
        ]
        or None,
    }


def _topology_json(answer: GroupAnswer) -> dict[str, Any] | None:
    if answer.topology_key is None:
        return None
    return {
        "key": answer.topology_key,
        "domain": answer.domain,
        "domains": [
            {
                "name": d.name,
                "nodes": d.nodes,
                "outcome": d.outcome,
                "pods": d.pods,
                "message": d.message,
                "failed": {str(k): v for k, v in d.failed.items()},
                "filtered": d.filtered,
            }
            for d in answer.domains
        ],
    }


def _group_preemption_json(p: GroupPreemptionAnswer | None) -> dict[str, Any] | None:
    if p is None:
        return None
    return {
        "outcome": p.outcome,
        "priority": p.priority,
        "victims": [{"pod": pod, "node": node, "priority": prio} for pod, node, prio in p.victims],
        "nominated": dict(sorted(p.nominations.items())),
        "message": p.message,
    }


def _member_json(member: MemberAnswer) -> dict[str, Any]:
    return {
        "outcome": member.outcome,
        "node": member.node,
        "allocations": {k: v.dump() for k, v in sorted(member.allocations.items())},
        "message": member.message,
    }


def write(answer: Answer | GroupAnswer, fmt: str, out: TextIO) -> None:
    if fmt == "json":
        out.write(json.dumps(as_json(answer), indent=2) + "\n")
    elif fmt == "yaml":
        out.write(yaml.safe_dump(as_json(answer), sort_keys=False))
    elif isinstance(answer, GroupAnswer):
        out.write(group_table(answer))
    else:
        out.write(table(answer))


def _devices(allocation: AllocationResult) -> list[str]:
    return [f"{r.driver}/{r.pool}/{r.device}" for r in allocation.devices.results]


def _listed(names: Iterable[str]) -> str:
    names = list(names)
    shown = ", ".join(names[:SHOWN])
    return shown + (f" (+{len(names) - SHOWN} more)" if len(names) > SHOWN else "")


def table(answer: Answer) -> str:
    lines = [f"OUTCOME  {answer.outcome}" + (f" on {answer.node}" if answer.node else "")]
    if answer.error:
        lines.append(f"ERROR    {answer.error}")
    for key, allocation in sorted(answer.allocations.items()):
        lines.append(f"CLAIM    {key}  {_listed(_devices(allocation))}")
    if answer.extended is not None:
        e = answer.extended
        made = "reused" if e.created else f"created at binding, generateName {e.generate_name}"
        lines.append(f"EXTENDED {e.claim} ({made})")
        for m in e.mappings:
            lines.append(
                f"  container {m.container_name}: {m.resource_name} -> request {m.request_name}"
            )
    for reason in answer.reasons:
        lines.append(f"REASON   {reason}")
    if answer.nodes:
        lines.append("")
        lines.append(f"  {'NODE':28} {'OUTCOME':22} {'SCORE':6} DEVICES OR REASON")
        for name, node in sorted(answer.nodes.items()):
            outcome = node.outcome + (" (chosen)" if node.chosen else "")
            score = str(node.score.points) if node.score is not None else "-"
            shown = answer.allocations if node.chosen else node.allocations
            what = node.reason or _listed(d for a in shown.values() for d in _devices(a))
            lines.append(f"  {name:28} {outcome:22} {score:6} {what}")
    lines += explain_lines(answer)
    lines += preemption_lines(answer)
    for note in answer.notes:
        lines.append(f"NOTE     {note}")
    return "\n".join(lines) + "\n"


def explain_lines(answer: Answer) -> list[str]:
    """``--explain``: per node, claim and request, which checks left which devices."""
    lines = []
    for name, node in sorted(answer.nodes.items()):
        for claim in node.explanation:
            lines.append("")
            lines.append(f"EXPLAIN  {name}: claim {claim.claim}")
            for constraint in claim.constraints:
                lines.append(f"  constraint {constraint}")
            for r in claim.requests:
                lines.append(
                    f"  request {r.request}: {len(r.usable)} usable of {r.needed} needed"
                    + (f" ({_listed(r.usable)})" if r.usable else "")
                )
                for reason, devices in r.eliminated:
                    lines.append(f"    {len(devices):4} {reason}: {_listed(devices)}")
    return lines


def preemption_lines(answer: Answer) -> list[str]:
    """Which pods preemption would evict, and what that frees (nobody is evicted)."""
    if answer.preemption is None:
        return []
    p = answer.preemption
    where = f" on {p.node}" if p.node else ""
    lines = ["", f"PREEMPT  {p.outcome}{where} (priority {p.priority}): {p.message}"]
    for pod, priority, frees in p.victims:
        freed = f"  frees {_listed(frees)}" if frees else ""
        lines.append(f"  VICTIM {pod} (priority {priority}){freed}")
    lines.append("NOTE     preemption is simulated: nobody is evicted")
    return lines


def group_preemption_lines(p: GroupPreemptionAnswer | None) -> list[str]:
    """Which pods the group's preemption would evict, and where its pods would go."""
    if p is None:
        return []
    lines = ["", f"PREEMPT  {p.outcome} (priority {p.priority}): {p.message}"]
    for pod, node, priority in p.victims:
        lines.append(f"  VICTIM {pod} on {node} (priority {priority})")
    for pod, node in sorted(p.nominations.items()):
        lines.append(f"  NOMINATE {pod} to {node}")
    lines.append("NOTE     preemption is simulated: nobody is evicted")
    return lines


def domain_lines(answer: GroupAnswer) -> list[str]:
    """A topology-constrained group's domains: the one chosen, and why not each other."""
    if answer.topology_key is None:
        return []
    lines = ["", f"TOPOLOGY {answer.topology_key}: " + (answer.domain or "no domain chosen")]
    if not answer.domains:
        lines.append("  no node carries the key")
    for d in answer.domains:
        held = f", {d.pods} of the group's pods" if d.pods is not None else ""
        filtered = f", {d.filtered} pods filtered" if d.filtered else ""
        lines.append(f"  DOMAIN {d.name} ({d.nodes} nodes): {d.outcome}{held}{filtered}")
        if d.message:
            lines.append(f"    {d.message}")
        for pod, why in d.failed.items():
            lines.append(f"    {pod}: {why}")
    return lines


def tree_lines(answer: GroupAnswer) -> list[str]:
    """A PodGroup of a tree: every group of the tree, indented by depth, with its outcome,
    its domain, and why where it is not placed."""
    if not answer.tree:
        return []
    lines = ["", "TREE"]
    for t in answer.tree:
        domain = f" in {t.domain}" if t.domain else ""
        lines.append(f"  {'  ' * t.depth}{t.ref}: {t.outcome}{domain}")
        if t.message:
            lines.append(f"  {'  ' * t.depth}  {t.message}")
    return lines


def group_table(answer: GroupAnswer) -> str:
    """The group's verdict, its shared claims' devices, then one row per pod: where it goes
    and its own devices, or what it is told."""
    policy: str = answer.policy or "no PodGroup"
    if answer.min_count is not None:
        policy += f", minCount {answer.min_count}"
    placed = sum(1 for m in answer.members.values() if m.outcome == "placed")
    head = f"OUTCOME  {answer.outcome}: PodGroup {answer.group} ({policy})"
    if placed:
        head += f", {placed} pods placed" + (
            f" ({answer.placed_before} bound before)" if answer.placed_before else ""
        )
    lines = [head]
    if answer.message:
        lines.append(f"MESSAGE  {answer.message}")
    for key, allocation in sorted(answer.shared.items()):
        lines.append(f"SHARED   {key}  {_listed(_devices(allocation))}")
    if answer.members:
        lines.append("")
        lines.append(f"  {'POD':28} {'OUTCOME':14} {'NODE':20} DEVICES OR MESSAGE")
        for pod, member in answer.members.items():
            devices = _listed(d for a in member.allocations.values() for d in _devices(a))
            what = member.message or devices or "-"
            lines.append(f"  {pod!s:28} {member.outcome:14} {member.node or '-':20} {what}")
    lines += domain_lines(answer)
    lines += tree_lines(answer)
    lines += group_preemption_lines(answer.preemption)
    for note in answer.notes:
        lines.append(f"NOTE     {note}")
    return "\n".join(lines) + "\n"
