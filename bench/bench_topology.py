"""A topology-constrained gang's cycle: what kopf-dra's device count per domain saves.

``.venv/bin/python -m bench.bench_topology [--racks 16] [--nodes 4] [--gpus 8] [--rounds 5]``

``--racks`` racks of ``--nodes`` nodes; the last rack's nodes have ``--gpus`` free GPUs each,
every other rack one GPU fewer per node, so only the last rack holds a gang of
``nodes x gpus`` pods with a GPU each, constrained to one rack
(``schedulingConstraints.topology``). The scheduler's cycle runs through ``simulate
--pod-group`` (the same code), on Kubernetes 1.37 (every domain evaluated) and 1.38 (the
adaptive share of placements to score), with ``--domain-device-count`` on (kopf-dra's default:
a rack whose free GPUs cannot hold the gang is ruled out before any pod is filtered in it) and
off (every rack tried, as kube-scheduler does). Printed per mode: the racks tried and ruled out,
the pods filtered (each one attempt: Filter over its rack's nodes, its claims allocated on
each), and the cycle's wall time (median of ``--rounds``). No target: the closing note reports
the attempts saved.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import time
from typing import Any

from operators.api.features import KubernetesVersion, parse_feature_gates, resolve
from operators.api.keys import ObjectKey
from operators.scheduling.profile import Policies
from operators.simulate.engine import Options
from operators.simulate.group import GroupAnswer, group_answer
from operators.simulate.snapshot import Document, Snapshot, Source
from operators.simulate.validate import build

J = dict[str, Any]
NS = "bench"
RACK = "topology.example.com/rack"
NOW = datetime.datetime(2026, 12, 5, tzinfo=datetime.UTC)
GATES = {
    "GenericWorkload": True,
    "DRAWorkloadResourceClaims": True,
    "TopologyAwareWorkloadScheduling": True,
}


def bodies(racks: int, nodes: int, gpus: int) -> list[J]:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}
    out: list[J] = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpu", "namespace": NS},
            "spec": {"spec": {"devices": {"requests": [request]}}},
        },
    ]
    for r in range(racks):
        free = gpus if r == racks - 1 else gpus - 1
        for n in range(nodes):
            name = f"rack{r:02d}-node{n}"
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": {RACK: f"rack{r:02d}"}},
                    "status": {
                        "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
                        "conditions": [{"type": "Ready", "status": "True"}],
                    },
                }
            )
            out.append(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceSlice",
                    "metadata": {"name": f"{name}-gpus"},
                    "spec": {
                        "driver": "gpu.example.com",
                        "nodeName": name,
                        "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                        "devices": [{"name": f"gpu-{i}"} for i in range(free)],
                    },
                }
            )
    size = nodes * gpus
    out.append(
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "training", "namespace": NS},
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": size}},
                "schedulingConstraints": {"topology": [{"key": RACK}]},
            },
        }
    )
    for i in range(size):
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"worker-{i:03d}", "namespace": NS},
                "spec": {
                    "schedulerName": "kopf-dra",
                    "schedulingGroup": {"podGroupName": "training"},
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
                    "containers": [{"name": "main", "image": "busybox"}],
                },
            }
        )
    return out


def snapshot(docs: list[J], version: KubernetesVersion) -> Snapshot:
    gates = resolve(parse_feature_gates(GATES, version), version)
    documents = [Document(Source("bench.yaml", i), b) for i, b in enumerate(docs)]
    built, problems = build(documents, version=version, strict=True, gates=gates)
    if problems:
        raise SystemExit("\n".join(problems))
    return built


def run(
    snap: Snapshot, version: KubernetesVersion, count: bool, search: bool
) -> tuple[GroupAnswer, float]:
    options = Options(
        feature_gates=parse_feature_gates(GATES, version),
        version=version,
        policies=Policies(domain_device_count=count, gang_search=search),
    )
    start = time.perf_counter()
    answer = group_answer(snap, ObjectKey(NS, "training"), options, NOW)
    return answer, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--racks", type=int, default=16)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--no-gang-search",
        dest="search",
        action="store_false",
        help="as kube-scheduler: no search of other nodes in a rack where the first pass fails "
        "(with it, kopf-dra's default, each cycle's search shares one --filter-timeout)",
    )
    args = parser.parse_args()
    docs = bodies(args.racks, args.nodes, args.gpus)
    print(
        f"{args.racks} racks x {args.nodes} nodes; gang of {args.nodes * args.gpus} pods, one "
        f"GPU each; only the last rack holds it; gang search {'on' if args.search else 'off'}"
    )
    print(f"{'release':8} {'device count':13} {'racks tried':12} {'ruled out':10} "
          f"{'pods filtered':14} {'cycle (median)':15} chosen")  # fmt: skip
    for release in ("1.37", "1.38"):
        version = KubernetesVersion.of(release)
        snap = snapshot(docs, version)
        for count in (False, True):
            times, answer = [], None
            for _ in range(args.rounds):
                answer, seconds = run(snap, version, count, args.search)
                times.append(seconds)
            assert answer is not None
            tried = [d for d in answer.domains if d.outcome != "not-tried"]
            ruled = sum(1 for d in tried if d.outcome == "ruled-out")
            filtered = sum(d.filtered for d in tried)
            print(
                f"{release:8} {'on' if count else 'off':13} {len(tried) - ruled:<12} {ruled:<10} "
                f"{filtered:<14} {statistics.median(times) * 1000:>10.0f} ms    "
                f"{answer.domain} ({answer.outcome})"
            )


if __name__ == "__main__":
    main()
