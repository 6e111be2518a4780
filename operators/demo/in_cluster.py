"""``kopf-dra demo --in-cluster`` (``make run CLUSTER=1``): the demo with kopf-dra as pods.

It builds kopf-dra's image (``make image``), starts the complete local cluster with it in
every node (``operators/localcluster/cluster.py``: real kubelets, kube-controller-manager,
kube-scheduler, kube-proxy, CoreDNS), installs kopf-dra with the README's Helm commands,
applies the examples and shows the demo's live view, where the pods now run with their
devices. Ctrl-C tears the cluster down and restores the host. Needs a checkout (the image's
build, helm and the chart are not in the wheel) and root.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from operators.demo import command
from operators.demo.bringup import apply_example, serves_groups
from operators.demo.supervision import DemoError
from operators.demo.view import view
from operators.kube.api import KubeAPI
from operators.kube.client import make_api_client
from operators.localcluster import cluster, controlplane


def main(argv: Sequence[str]) -> int:
    """``kopf-dra demo``, its ``--in-cluster`` form included."""
    return command.main(argv, in_cluster=run)


async def run(args: argparse.Namespace, stop: asyncio.Event, out: Any) -> int:
    """Up, installed, the examples applied, the view until ``stop``; everything down after."""
    state_dir = Path(args.state_dir) if args.state_dir else cluster.default_state_dir()
    missing = cluster.missing_prerequisites()
    if missing:
        raise DemoError("--in-cluster needs: " + "; ".join(missing))

    def say(text: str) -> None:
        print(f"kopf-dra demo: {text}", file=out, flush=True)

    say("building kopf-dra's image (make image; cached)...")
    image = Path(args.image) if args.image else await asyncio.to_thread(cluster.build_image)
    say(f"starting the local cluster with {image.name} (logs in {state_dir})...")
    with contextlib.ExitStack() as stack:
        running = await asyncio.to_thread(
            stack.enter_context,
            cluster.running(state_dir, cluster.node_names(2), [image]),
        )
        say("installing kopf-dra with Helm (hack/cluster/helm-values.yaml)...")
        await asyncio.to_thread(running.install_with_helm)
        async with await make_api_client(running.kubeconfig) as api_client:
            api = KubeAPI(api_client)
            applied = []
            gates = controlplane.feature_gates()
            groups = serves_groups(gates)
            for name in command.selected_examples(args.examples, True, groups, gates):
                applied.append(name)
                await apply_example(api, name)
            where = f"local cluster, kopf-dra installed with Helm (KUBECONFIG={running.kubeconfig})"
            return await view(api, running.check, args, stop, out, where, applied, kubelets=True)
    raise AssertionError("unreachable")  # pragma: no cover - the with block returns
