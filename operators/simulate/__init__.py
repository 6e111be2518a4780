"""``kopf-dra simulate``: the scheduler's answer for a pod, before anything is applied.

"Where would this pod go, and if nowhere, why?" from snapshot files, a live cluster, or a live
cluster with files on top ("what if I add this pod"). The answer comes from the scheduler's own
cycle (``engine``; a PodGroup's cycle: ``group``); input is validated as the API server would
(``validate``). Exit codes: 0 the pod (or claims, or pod group) fit, 1 they do not (or wait),
2 bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, TextIO, get_args, get_origin

import yaml

from operators.api.features import (
    DEFAULT_RELEASE,
    FeatureGateError,
    KubernetesVersion,
    feature_gates_argument,
    parse_feature_gates,
    resolve,
)
from operators.api.keys import ObjectKey
from operators.kube.api import KubeAPI
from operators.kube.client import make_api_client
from operators.scheduling.profile import Policies
from operators.settings import flag_name
from operators.simulate import engine, output
from operators.simulate.cluster import read_cluster
from operators.simulate.group import GroupAnswer, group_answer
from operators.simulate.snapshot import Document, InputError, documents_from
from operators.simulate.validate import build

EXIT_SUCCESS, EXIT_UNSATISFIABLE, EXIT_ERROR = 0, 1, 2

EXAMPLES = """examples:
  # where would this pod go? (a snapshot taken with kubectl)
  kubectl get nodes,pods,resourceslices,deviceclasses,resourceclaims,resourceclaimtemplates \\
      -A -o yaml > snap.yaml
  kopf-dra simulate -f snap.yaml --pod team-a/trainer -o table

  # what if I add this pod to the cluster I am connected to?
  kopf-dra simulate --from-cluster -f new-pod.yaml --pod team-a/new-trainer --explain -o table

  # which pods would a high-priority pod evict, and what would that free? (nothing is evicted)
  kubectl get nodes,pods,resourceslices,deviceclasses,resourceclaims,priorityclasses,pdb \\
      -A -o yaml > snap.yaml
  kopf-dra simulate -f snap.yaml -f trainer.yaml --pod team-a/trainer -o table

  # do these claims fit on this node together?
  kopf-dra simulate -f snap.yaml --node gpu-3 --claim team-a/gpu --claim team-a/nic

  # would this gang be placed together, and where? (Kubernetes 1.37's PodGroups)
  kubectl get nodes,pods,resourceslices,deviceclasses,resourceclaims,resourceclaimtemplates \\
      -A -o yaml > snap.yaml
  kubectl get podgroups -A -o yaml > groups.yaml
  kopf-dra simulate -f snap.yaml -f groups.yaml --pod-group team-a/training -o table \\
      --feature-gates GenericWorkload=true,DRAWorkloadResourceClaims=true
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kopf-dra simulate",
        description="The scheduler's answer for a pod (or claims on a node, or a pod group), "
        "from snapshot files, a live cluster, or both; nothing is written to the cluster.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _input_arguments(p)
    scheduler_arguments(p)
    p.add_argument(
        "--explain",
        action="store_true",
        help="per request, which classes, selectors and checks eliminated which devices",
    )
    p.add_argument(
        "-o",
        "--output",
        choices=["json", "yaml", "table"],
        default="json",
        help="json and yaml keep one contract (outcome, error, node, allocations, reasons, "
        "nodes, notes; --pod-group: podGroup, outcome, message, pods, sharedClaims, notes); "
        "table is for people",
    )
    return p


def _input_arguments(p: argparse.ArgumentParser) -> None:
    """Where the snapshot comes from, and what to simulate in it."""
    p.add_argument(
        "-f",
        "--filename",
        action="append",
        default=[],
        metavar="PATH",
        help="YAML/JSON file or directory of objects (List objects too); later files replace "
        "earlier objects of the same kind and name, and files replace cluster objects",
    )
    p.add_argument(
        "--from-cluster",
        action="store_true",
        help="start from the cluster of $KUBECONFIG (or in-cluster, or ~/.kube/config)",
    )
    p.add_argument("--kubeconfig", metavar="PATH", help="start from the cluster of this kubeconfig")
    p.add_argument(
        "--save", metavar="PATH", help="write the snapshot (cluster and files) to PATH as YAML"
    )
    p.add_argument(
        "--no-validate",
        action="store_true",
        help="skip the API server's checks (apiVersion, unknown fields, limits, CEL) for "
        "deliberately partial snapshots; objects must still parse",
    )
    target = p.add_mutually_exclusive_group()
    target.add_argument("--pod", metavar="NS/NAME", help="the pod to place, as the scheduler would")
    target.add_argument(
        "--pod-group",
        metavar="NS/NAME",
        help="the PodGroup whose pods to place together, as the scheduler's group cycle would "
        "(Kubernetes 1.37, GenericWorkload)",
    )
    target.add_argument(
        "--node", metavar="NAME", help="allocate the --claim claims together on this node"
    )
    p.add_argument(
        "--claim", action="append", default=[], metavar="NS/NAME", help="a claim for --node"
    )


def scheduler_arguments(p: argparse.ArgumentParser) -> None:
    """The scheduler's flags that change its answer, generated from its policies
    (``scheduling.profile.Policies``, which ``kopf-dra run scheduler``'s settings inherit: the
    same names, choices and defaults); ``kubectl dra why`` takes them too."""
    for name, info in Policies.model_fields.items():
        help_text = f"as the scheduler's flag: {info.description or ''}"
        default = info.get_default(call_default_factory=True)
        choices = get_args(info.annotation) if get_origin(info.annotation) is Literal else None
        if info.annotation is bool:
            p.add_argument(
                flag_name(name),
                dest=name,
                action=argparse.BooleanOptionalAction,
                default=default,
                help=help_text,
            )
        elif choices:
            p.add_argument(flag_name(name), choices=choices, default=default, help=help_text)
        else:
            kind = type(default)
            p.add_argument(flag_name(name), type=kind, default=default, help=help_text)
    p.add_argument(
        "--feature-gates",
        type=feature_gates_argument,
        default={},
        metavar="Name=true,...",
        help="as the scheduler's flag: Kubernetes' feature gates (default: those of "
        "--kubernetes-version)",
    )
    p.add_argument(
        "--kubernetes-version",
        metavar="MAJOR.MINOR",
        help="as the scheduler's flag: the cluster's release, whose gate defaults apply "
        f"(default: the cluster's /version with --from-cluster or --kubeconfig, else "
        f"{DEFAULT_RELEASE})",
    )


async def cluster_documents(kubeconfig: str | None) -> tuple[list[Document], KubernetesVersion]:
    """The cluster's objects of every kind simulate reads, and its version."""
    async with await make_api_client(kubeconfig) as client:
        read = await read_cluster(KubeAPI(client))
    return read.documents, read.version


def version_of(args: argparse.Namespace, cluster: KubernetesVersion | None) -> KubernetesVersion:
    """--kubernetes-version, else the cluster's, else the default; the gates checked for it."""
    try:
        if args.kubernetes_version:
            version = KubernetesVersion.of(args.kubernetes_version)
        else:
            version = cluster or KubernetesVersion(DEFAULT_RELEASE)
        parse_feature_gates(args.feature_gates, version)
    except (FeatureGateError, ValueError) as e:
        raise InputError(f"--feature-gates / --kubernetes-version: {e}") from None
    return version


def options_of(args: argparse.Namespace, version: KubernetesVersion) -> engine.Options:
    """The answer's options from ``scheduler_arguments``' flags (and ``--explain``)."""
    policies = Policies(**{name: getattr(args, name) for name in Policies.model_fields})
    return engine.Options(
        policies=policies,
        explain=getattr(args, "explain", False),
        feature_gates=args.feature_gates,
        version=version,
    )


def _key(text: str, what: str) -> ObjectKey:
    namespace, _, name = text.rpartition("/")
    if not namespace or not name:
        raise InputError(f"{what} {text!r}: expected NAMESPACE/NAME")
    return ObjectKey(namespace, name)


def run(args: argparse.Namespace, now: datetime.datetime) -> engine.Answer | GroupAnswer | None:
    documents: list[Document] = []
    cluster: KubernetesVersion | None = None
    if args.from_cluster or args.kubeconfig:
        documents, cluster = asyncio.run(cluster_documents(args.kubeconfig))
    version = version_of(args, cluster)
    files = list(documents_from(args.filename))
    if not documents and not files:
        raise InputError("nothing to read: give -f files, --from-cluster or --kubeconfig")
    # The cluster's objects passed its API server already; files are checked (and what a gate
    # that is off keeps out, dropped) as it would, at the version and gates simulated.
    gates = resolve(parse_feature_gates(args.feature_gates, version), version)
    snapshot, problems = build(documents, strict=False, version=version, stored=True)
    overlay, more = build(files, strict=not args.no_validate, version=version, gates=gates)
    problems += more
    if problems:
        raise InputError("\n".join(problems))
    for (kind, _), body in overlay.bodies.items():
        snapshot.add(kind, body)
    if args.save:
        Path(args.save).write_text(yaml.safe_dump(snapshot.as_list(), sort_keys=False))
    options = options_of(args, version)
    if args.pod is not None:
        if args.claim:
            raise InputError("--claim works with --node; --pod finds the pod's claims")
        return engine.pod_answer(snapshot, _key(args.pod, "--pod"), options, now)
    if args.node is not None:
        claims = [_key(c, "--claim") for c in args.claim]
        return engine.node_answer(snapshot, args.node, claims, options)
    if args.pod_group is not None:
        if args.claim or args.explain:
            raise InputError("--claim and --explain work with --node and --pod, not --pod-group")
        return group_answer(snapshot, _key(args.pod_group, "--pod-group"), options, now)
    if args.save:
        return None
    raise InputError(
        "say what to simulate: --pod NS/NAME, --pod-group NS/NAME, or --node NAME with --claim"
    )


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Entry point of ``kopf-dra simulate``; returns the exit code."""
    out = out if out is not None else sys.stdout
    args = build_parser().parse_args(list(argv) if argv is not None else None)
    try:
        answer = run(args, datetime.datetime.now(datetime.UTC))
    except InputError as e:
        print(f"kopf-dra simulate: {e}", file=sys.stderr)
        if args.output == "json":
            out.write(json.dumps(output.as_json(engine.Answer("error", error=str(e)))) + "\n")
        return EXIT_ERROR
    if answer is None:
        print(f"snapshot saved to {args.save}", file=sys.stderr)
        return EXIT_SUCCESS
    output.write(answer, args.output, out)
    return {"success": EXIT_SUCCESS, "unsatisfiable": EXIT_UNSATISFIABLE}.get(
        answer.outcome, EXIT_UNSATISFIABLE if answer.outcome == "waiting" else EXIT_ERROR
    )
