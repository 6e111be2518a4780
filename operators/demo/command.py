"""``kopf-dra demo`` (what ``make run`` runs): the whole system on one machine, and a live view.

The command line: it starts the local control plane (or uses ``--kubeconfig``), brings the
system up (``bringup``), applies the example workloads from ``manifests/examples/`` and shows
the live view (``view``) until Ctrl-C (or ``--once`` / ``--duration``) stops everything.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from operators.api.features import feature_gates_argument
from operators.demo.bringup import (
    ALONE_EXAMPLES,
    DEMO_NODES,
    VirtualNode,
    apply_example,
    example_names,
    serves_groups,
    start_real_nodes,
    start_system,
)
from operators.demo.supervision import DemoError
from operators.demo.view import view
from operators.kube.api import KubeAPI
from operators.kube.client import make_api_client
from operators.localcluster import cluster, controlplane, manifests, realnode


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        default=None,
        help="run the operators against this cluster (default: start the local control plane); "
        "its nodes need the example driver (kubectl apply -k manifests/driver)",
    )
    parser.add_argument(
        "--feature-gates",
        type=feature_gates_argument,
        default={},
        metavar="Name=true,...",
        help="with --kubeconfig: the cluster's DRA feature gates, for every component (default: "
        "Kubernetes' defaults; the local control plane's own otherwise)",
    )
    parser.add_argument(
        "--virtual-nodes",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="create virtual nodes with an example driver each (default: only on the local "
        "control plane)",
    )
    parser.add_argument(
        "--real-node",
        action="store_true",
        help="run kopf-dra-worker and kopf-dra-worker2 as real kubelets with containerd on this "
        "machine (root; builds them once, several minutes cold; changes host sysctls while it "
        "runs and restores them), so their pods run and show what they see of their devices",
    )
    parser.add_argument(
        "--in-cluster",
        action="store_true",
        help="kopf-dra as pods: build its image, start the complete local cluster (real "
        "kubelets, kube-proxy, CoreDNS; root), install it with Helm, then the examples and the "
        "view (make run CLUSTER=1; needs a checkout)",
    )
    parser.add_argument(
        "--image",
        default=None,
        help="with --in-cluster: this image archive instead of building one (make image)",
    )
    parser.add_argument(
        "--examples",
        default="all",
        help="comma-separated scenarios of manifests/examples/ to apply, 'all' or 'none'",
    )
    parser.add_argument("--refresh", type=float, default=2.0, help="seconds between frames")
    parser.add_argument(
        "--once",
        action="store_true",
        help="print one frame once every pod is bound or has a reason, then stop everything",
    )
    parser.add_argument(
        "--duration", type=float, default=0.0, help="stop after this many seconds (0: Ctrl-C)"
    )
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="--once: give up waiting after this long"
    )
    parser.add_argument(
        "--state-dir",
        default=None,
        help="control plane data and logs (default: ~/.cache/kopf-dra/demo)",
    )
    parser.add_argument(
        "--pid-file", default=None, help="write the pids of every child process here (tests)"
    )


def selected_examples(
    spec: str, fabric: bool, groups: bool = True, gates: Mapping[str, bool] | None = None
) -> list[str]:
    """``all``: every example the cluster runs but those that want the devices to themselves."""
    available = example_names(fabric, groups, gates)
    if spec == "all":
        return [n for n in available if n not in ALONE_EXAMPLES]
    if spec == "none":
        return []
    chosen = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [c for c in chosen if c not in available]
    if unknown:
        raise DemoError(f"unknown or unavailable examples {unknown}; available: {available}")
    return chosen


@contextlib.contextmanager
def control_plane_or(kubeconfig: str | None, state_dir: Path) -> Iterator[tuple[Path, str]]:
    """The given cluster, or a local control plane for the duration of the demo."""
    if kubeconfig:
        yield Path(kubeconfig), "cluster from " + kubeconfig
        return
    with controlplane.running(state_dir / "control-plane") as cp:
        yield cp.kubeconfig, f"local control plane {cp.server} (KUBECONFIG={cp.kubeconfig})"


async def _demo(args: argparse.Namespace, stop: asyncio.Event, out: Any) -> int:
    state_dir = Path(args.state_dir) if args.state_dir else controlplane.cache_root() / "demo"
    virtual = args.virtual_nodes if args.virtual_nodes is not None else not args.kubeconfig
    print("kopf-dra demo: starting (logs in %s)" % (state_dir / "logs"), file=out, flush=True)
    # The local control plane's gates, or the ones given for the user's cluster.
    gates = args.feature_gates if args.kubeconfig else controlplane.feature_gates()
    with (
        control_plane_or(args.kubeconfig, state_dir) as (kubeconfig, where),
        contextlib.ExitStack() as stack,
    ):
        async with await make_api_client(kubeconfig) as api_client:
            api = KubeAPI(api_client)
            nodes: tuple[VirtualNode, ...] = DEMO_NODES if virtual else ()
            if args.real_node:
                print("kopf-dra demo: starting the real nodes...", file=out, flush=True)
                # Only the real nodes: every pod then runs or waits with the scheduler's reason.
                nodes = await start_real_nodes(api, kubeconfig, stack)
            system = await start_system(
                api, kubeconfig, nodes=nodes, log_dir=state_dir / "logs", feature_gates=gates
            )
            try:
                if args.pid_file:
                    pids = json.dumps(system.supervisor.pids())
                    await asyncio.to_thread(Path(args.pid_file).write_text, pids)
                applied = []
                chosen = selected_examples(
                    args.examples, system.fabric, serves_groups(gates), gates
                )
                for name in chosen:
                    applied.append(name)
                    await apply_example(api, name)
                check = system.supervisor.check
                return await view(api, check, args, stop, out, where, applied)
            finally:
                system.stop()


InCluster = Callable[[argparse.Namespace, asyncio.Event, Any], Awaitable[int]]


def main(argv: Sequence[str], *, in_cluster: InCluster | None = None) -> int:
    """``kopf-dra demo``; ``in_cluster`` runs ``--in-cluster`` (the module ``in_cluster``, which
    imports this one)."""
    parser = argparse.ArgumentParser(prog="kopf-dra demo", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)

    async def run() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        if args.in_cluster:
            if in_cluster is None:
                raise DemoError("--in-cluster: run it as `kopf-dra demo --in-cluster`")
            return await in_cluster(args, stop, sys.stdout)
        return await _demo(args, stop, sys.stdout)

    try:
        return asyncio.run(run())
    except (
        DemoError,
        controlplane.ControlPlaneError,
        manifests.ManifestError,
        realnode.RealNodeError,
        cluster.ClusterError,
    ) as e:
        print(f"kopf-dra demo: {e}", file=sys.stderr)
        return 2
    finally:
        print("kopf-dra demo: stopped, nothing left running", file=sys.stderr)
