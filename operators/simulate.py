"""``kopf-dra simulate``: run the allocator offline on YAML/JSON snapshots.

"Would this claim fit, where, and if not, why?" without a cluster: ``--node`` allocates the
given claims together on one node; ``--pod`` resolves a pod's claims (templates instantiated in
memory) and evaluates every node as the scheduler would. Exit codes: 0 success,
1 unsatisfiable, 2 error or bad input (the message names the file, object and field).
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml
from pydantic import ValidationError

from operators.allocator import (
    AllocatedState,
    Allocator,
    AllocatorError,
    Features,
    Outcome,
    Status,
)
from operators.allocator.nodes import selector_matches
from operators.allocator.selectors import CelSelectorEngine
from operators.api.base import KubeModel
from operators.api.core import Node, NodeSelector, Pod
from operators.api.resource import (
    AllocationResult,
    DeviceClass,
    DeviceTaintRule,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)

EXIT_SUCCESS, EXIT_UNSATISFIABLE, EXIT_ERROR = 0, 1, 2
_KINDS: dict[str, type[KubeModel]] = {
    "Node": Node,
    "Pod": Pod,
    "DeviceClass": DeviceClass,
    "ResourceSlice": ResourceSlice,
    "ResourceClaim": ResourceClaim,
    "ResourceClaimTemplate": ResourceClaimTemplate,
    "DeviceTaintRule": DeviceTaintRule,
}


class InputError(Exception):
    """Bad input: a file, object or flag that cannot be used (exit code 2)."""


@dataclass
class Snapshot:
    """Everything read from the files, by kind."""

    nodes: dict[str, Node] = field(default_factory=dict)
    pods: dict[str, Pod] = field(default_factory=dict)
    classes: list[DeviceClass] = field(default_factory=list)
    slices: list[ResourceSlice] = field(default_factory=list)
    claims: dict[str, ResourceClaim] = field(default_factory=dict)
    templates: dict[str, ResourceClaimTemplate] = field(default_factory=dict)
    taint_rules: list[DeviceTaintRule] = field(default_factory=list)

    def add(self, obj: KubeModel) -> None:
        if isinstance(obj, Node):
            self.nodes[obj.metadata.name or ""] = obj
        elif isinstance(obj, Pod):
            self.pods[obj.metadata.key] = obj
        elif isinstance(obj, DeviceClass):
            self.classes.append(obj)
        elif isinstance(obj, ResourceSlice):
            self.slices.append(obj)
        elif isinstance(obj, ResourceClaim):
            self.claims[obj.metadata.key] = obj
        elif isinstance(obj, ResourceClaimTemplate):
            self.templates[obj.metadata.key] = obj
        elif isinstance(obj, DeviceTaintRule):
            self.taint_rules.append(obj)


def _files(path: Path) -> Iterator[Path]:
    if path.is_dir():
        for child in sorted(path.iterdir()):
            if child.suffix in (".yaml", ".yml", ".json") and child.is_file():
                yield child
    elif path.is_file():
        yield path
    else:
        raise InputError(f"{path}: no such file or directory")


def _documents(path: Path) -> Iterator[tuple[int, Any]]:
    try:
        text = path.read_text()
        docs = list(yaml.safe_load_all(text))
    except (OSError, yaml.YAMLError) as e:
        raise InputError(f"{path}: cannot read: {e}") from None
    index = 0
    for doc in docs:
        if doc is None:
            continue
        items = (
            doc.get("items", []) if isinstance(doc, dict) and doc.get("kind") == "List" else [doc]
        )
        for item in items:
            yield index, item
            index += 1


def load(paths: Iterable[str]) -> Snapshot:
    """Read every object of a known kind; others are ignored (a snapshot may hold anything)."""
    snap = Snapshot()
    for raw in paths:
        for file in _files(Path(raw)):
            for index, doc in _documents(file):
                if not isinstance(doc, dict):
                    raise InputError(f"{file}: document #{index}: not an object")
                model = _KINDS.get(str(doc.get("kind", "")))
                if model is None:
                    continue
                name = (doc.get("metadata") or {}).get("name", f"#{index}")
                try:
                    snap.add(model.load(doc))
                except ValidationError as e:
                    err = e.errors()[0]
                    where = ".".join(str(p) for p in err["loc"])
                    raise InputError(
                        f"{file}: {doc['kind']} {name}: field {where}: {err['msg']}"
                    ) from None
    return snap


# --- evaluation ----------------------------------------------------------------------------


def _allocator(snap: Snapshot, exclude: set[str], policy: str) -> Allocator:
    features = Features.all()
    allocated = [c for k, c in snap.claims.items() if c.is_allocated and k not in exclude]
    return Allocator(
        features,
        AllocatedState.from_claims(allocated, features),
        snap.classes,
        snap.slices,
        CelSelectorEngine(),
        share_ids=lambda: str(uuid.uuid4()),
        taint_rules=snap.taint_rules,
        policy="best-fit" if policy == "best-fit" else "first-fit",
    )


@dataclass
class NodeVerdict:
    outcome: str
    reasons: list[str] = field(default_factory=list)
    error: str | None = None
    allocations: dict[str, AllocationResult] = field(default_factory=dict)
    score: tuple[int, int] = (0, 0)

    def as_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "error": self.error,
            "reasons": self.reasons,
            "allocations": {k: v.dump() for k, v in self.allocations.items()},
        }


def _allocated_fits(claim: ResourceClaim, node: Node) -> bool:
    selector = claim.status.allocation.node_selector if claim.status.allocation else None
    return selector is None or selector_matches(selector, node)


def evaluate_node(alloc: Allocator, node: Node, claims: Sequence[ResourceClaim]) -> NodeVerdict:
    """Allocate ``claims`` on ``node``; claims that are already allocated must fit the node."""
    verdict = NodeVerdict("success")
    pending = []
    for c in claims:
        if c.is_allocated:
            if not _allocated_fits(c, node):
                verdict.outcome = "unsatisfiable"
                verdict.reasons.append(
                    f"claim {c.key}: allocated for other nodes (its nodeSelector excludes "
                    f"{node.metadata.name})"
                )
            elif c.status.allocation is not None:
                verdict.allocations[c.key] = c.status.allocation
        else:
            pending.append(c)
    if verdict.outcome != "success":
        return verdict
    try:
        outcome: Outcome = alloc.allocate(node, pending)
    except AllocatorError as e:
        return NodeVerdict("error", error=str(e))
    if outcome.status is Status.ERROR:
        return NodeVerdict("error", error=str(outcome.error))
    if outcome.status is Status.UNSATISFIABLE:
        return NodeVerdict("unsatisfiable", reasons=[str(r) for r in outcome.reasons])
    for c, result in zip(pending, outcome.results, strict=True):
        verdict.allocations[c.key] = result
    verdict.score = _score(verdict.allocations.values())
    return verdict


def _score(results: Iterable[AllocationResult]) -> tuple[int, int]:
    """Lower is better: later firstAvailable alternatives, then devices needing binding."""
    alternatives = sum(1 for r in results for d in r.devices.results if "/" in (d.request or ""))
    binding = sum(1 for r in results for d in r.devices.results if d.binding_conditions)
    return alternatives, binding


def _node_filter(pod: Pod, node: Node) -> str | None:
    """The scheduler's non-DRA filters that matter offline; a reason when the node fails."""
    if node.spec.unschedulable:
        return "node is unschedulable"
    labels = node.metadata.labels
    for key, value in pod.spec.node_selector.items():
        if labels.get(key) != value:
            return f"nodeSelector {key}={value} does not match"
    affinity = pod.spec.affinity
    required: NodeSelector | None = None
    if affinity is not None and affinity.node_affinity is not None:
        required = affinity.node_affinity.required_during_scheduling_ignored_during_execution
    if required is not None and not selector_matches(required, node):
        return "required node affinity does not match"
    for taint in node.spec.taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        tolerated = any(
            (not t.key or t.key == taint.key)
            and (not t.effect or t.effect == taint.effect)
            and (t.operator == "Exists" or (t.value or "") == (taint.value or ""))
            for t in pod.spec.tolerations
        )
        if not tolerated:
            return f"untolerated taint {taint.key}:{taint.effect}"
    return None


def pod_claims(snap: Snapshot, pod: Pod) -> list[ResourceClaim]:
    """The pod's claims: by name, generated (pod status), or instantiated from a template."""
    ns = pod.metadata.namespace or "default"
    out = []
    for pc in pod.spec.resource_claims:
        name = pod.claim_name(pc)
        if name is not None:
            claim = snap.claims.get(f"{ns}/{name}")
            if claim is None:
                raise InputError(f"pod {pod.key}: claim {ns}/{name} not found")
            out.append(claim)
            continue
        if not pc.resource_claim_template_name:
            raise InputError(f"pod {pod.key}: resourceClaims[{pc.name}] names no claim")
        template = snap.templates.get(f"{ns}/{pc.resource_claim_template_name}")
        if template is None:
            raise InputError(
                f"pod {pod.key}: template {ns}/{pc.resource_claim_template_name} not found"
            )
        out.append(
            ResourceClaim.load(
                {
                    "metadata": {
                        "name": f"{pod.metadata.name}-{pc.name}",
                        "namespace": ns,
                        "annotations": {"resource.kubernetes.io/pod-claim-name": pc.name},
                    },
                    "spec": template.spec.spec.dump(),
                }
            )
        )
    return out


def _result(
    outcome: str,
    error: str | None = None,
    allocations: dict[str, AllocationResult] | None = None,
    reasons: list[str] | None = None,
    nodes: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "outcome": outcome,
        "error": error,
        "allocations": {k: v.dump() for k, v in (allocations or {}).items()},
        "reasons": reasons or [],
        "nodes": nodes or {},
    }


def simulate_node(
    snap: Snapshot, node_name: str, claim_keys: Sequence[str], policy: str
) -> dict[str, Any]:
    node = snap.nodes.get(node_name)
    if node is None:
        raise InputError(f"node {node_name} not found in the input")
    claims = []
    for key in claim_keys:
        claim = snap.claims.get(key)
        if claim is None:
            raise InputError(f"claim {key} not found in the input")
        claims.append(claim)
    alloc = _allocator(snap, {c.key for c in claims}, policy)
    v = evaluate_node(alloc, node, claims)
    return _result(v.outcome, v.error, v.allocations, v.reasons, {node_name: v.as_json()})


def simulate_pod(snap: Snapshot, pod_key: str, policy: str) -> dict[str, Any]:
    pod = snap.pods.get(pod_key)
    if pod is None:
        raise InputError(f"pod {pod_key} not found in the input")
    claims = pod_claims(snap, pod)
    alloc = _allocator(snap, {c.key for c in claims}, policy)
    nodes: dict[str, Any] = {}
    feasible: list[tuple[tuple[int, int], str, NodeVerdict]] = []
    errors: list[str] = []
    for name in sorted(snap.nodes):
        node = snap.nodes[name]
        reason = _node_filter(pod, node)
        if reason is not None:
            nodes[name] = NodeVerdict("unsatisfiable", reasons=[reason]).as_json()
            continue
        v = evaluate_node(alloc, node, claims)
        nodes[name] = v.as_json()
        if v.outcome == "success":
            feasible.append((v.score, name, v))
        elif v.outcome == "error" and v.error:
            errors.append(f"node {name}: {v.error}")
    if feasible:
        _, chosen, verdict = min(feasible)
        nodes[chosen]["chosen"] = True
        return _result("success", None, verdict.allocations, [], nodes)
    reasons = [f"node {n}: {r}" for n, j in nodes.items() for r in j["reasons"]]
    if errors and not reasons:
        return _result("error", "; ".join(errors), None, reasons, nodes)
    return _result("unsatisfiable", "; ".join(errors) or None, None, reasons, nodes)


def _print(result: dict[str, Any], fmt: str, out: TextIO) -> None:
    if fmt == "json":
        out.write(json.dumps(result, indent=2, sort_keys=True) + "\n")
    elif fmt == "yaml":
        out.write(yaml.safe_dump(result, sort_keys=True))
    else:
        out.write(f"OUTCOME  {result['outcome']}\n")
        if result["error"]:
            out.write(f"ERROR    {result['error']}\n")
        for key, alloc in sorted(result["allocations"].items()):
            for r in alloc["devices"].get("results", []):
                out.write(
                    f"CLAIM    {key}  {r['request']}  {r['driver']}/{r['pool']}/{r['device']}\n"
                )
        for name, verdict in sorted(result["nodes"].items()):
            mark = " (chosen)" if verdict.get("chosen") else ""
            out.write(f"NODE     {name}  {verdict['outcome']}{mark}\n")
        for reason in result["reasons"]:
            out.write(f"REASON   {reason}\n")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kopf-dra simulate",
        description="Run the DRA allocator offline on YAML/JSON snapshots.",
    )
    p.add_argument("-f", "--filename", action="append", required=True, metavar="PATH")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--node", metavar="NAME")
    target.add_argument("--pod", metavar="NS/NAME")
    p.add_argument("--claim", action="append", default=[], metavar="NS/NAME")
    p.add_argument("--policy", choices=["first-fit", "best-fit"], default="first-fit")
    p.add_argument("-o", "--output", choices=["json", "yaml", "table"], default="json")
    return p


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Entry point for ``kopf-dra simulate``; returns the exit code."""
    out = out if out is not None else sys.stdout
    args = build_parser().parse_args(list(argv) if argv is not None else None)
    try:
        snap = load(args.filename)
        if args.node is not None:
            result = simulate_node(snap, args.node, args.claim, args.policy)
        else:
            if args.claim:
                raise InputError("--claim works with --node; --pod finds the pod's claims")
            result = simulate_pod(snap, args.pod, args.policy)
    except InputError as e:
        print(f"kopf-dra simulate: {e}", file=sys.stderr)
        if args.output == "json":
            out.write(json.dumps(_result("error", str(e))) + "\n")
        return EXIT_ERROR
    _print(result, args.output, out)
    return {"success": EXIT_SUCCESS, "unsatisfiable": EXIT_UNSATISFIABLE}.get(
        result["outcome"], EXIT_ERROR
    )
