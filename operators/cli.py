"""The ``kopf-dra`` command: run a component, simulate allocation offline, manage the local
control plane, print the version."""

from __future__ import annotations

import argparse
import sys
import zoneinfo
from collections.abc import Sequence
from pathlib import Path

from operators import __version__
from operators.cel import install_zone_loader
from operators.components import COMPONENTS
from operators.settings import SettingsError


def _control_plane(args: argparse.Namespace) -> int:
    from operators.localcluster import controlplane

    state_dir = Path(args.state_dir) if args.state_dir else controlplane.default_state_dir()
    if args.action == "up":
        try:
            cp = controlplane.up(state_dir)
        except controlplane.ControlPlaneError as e:
            print(f"kopf-dra: {e}", file=sys.stderr)
            return 2
        print(f"local control plane {controlplane.kubernetes_version()} is up at {cp.server}")
        print(f"export KUBECONFIG={cp.kubeconfig}")
        return 0
    if args.action == "down":
        stopped = controlplane.down(state_dir)
        print("local control plane stopped" if stopped else "local control plane was not running")
        return 0
    print(f"export KUBECONFIG={state_dir / 'kubeconfig'}")
    return 0


def _cluster(args: argparse.Namespace) -> int:
    """The complete local cluster in the foreground: up until SIGINT or SIGTERM, then down."""
    import signal
    import threading

    from operators.localcluster import cluster

    names = cluster.node_names(args.nodes)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    try:
        state_dir = Path(args.state_dir) if args.state_dir else cluster.default_state_dir()
        images = [Path(i) for i in args.image]
        with cluster.running(state_dir, names, images, args.node_version or None) as c:
            print(f"local cluster {', '.join(n for n, _ in names)} is up ({c.timings})")
            print(f"export KUBECONFIG={c.kubeconfig}", flush=True)
            while not stop.wait(1.0):
                c.check()
    except cluster.ClusterError as e:
        print(f"kopf-dra cluster: {e}", file=sys.stderr)
        return 1
    print("local cluster stopped; the host is as it was")
    return 0


def _run(args: argparse.Namespace, rest: list[str]) -> int:
    app = COMPONENTS[args.component].runnable()
    parser = argparse.ArgumentParser(prog=f"kopf-dra run {args.component}")
    app.add_arguments(parser)
    parsed = parser.parse_args(rest)
    try:
        return app.run(parsed)
    except SettingsError as e:  # a usage error, like argparse's own: one line, exit 2
        print(f"kopf-dra run {args.component}: {e}", file=sys.stderr)
        return 2


def _run_help(*, asked: bool) -> int:
    """``kopf-dra run --help``: the components, each with what it does."""
    width = max(len(name) for name in COMPONENTS)
    lines = [
        "usage: kopf-dra run COMPONENT [flags]   (kopf-dra run COMPONENT --help: its flags)",
        "",
        "components:",
        *(f"  {c.name:<{width}}  {c.summary}" for c in COMPONENTS.values()),
    ]
    print("\n".join(lines), file=sys.stdout if asked else sys.stderr)
    return 0 if asked else 2


def _simulate(rest: list[str]) -> int:
    from operators import simulate

    return simulate.main(rest)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kopf-dra", description="Kubernetes Dynamic Resource Allocation on kopf"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("version", help="print the version")
    run = sub.add_parser("run", help="run one component", add_help=False)
    run.add_argument("component", choices=sorted(COMPONENTS))
    sub.add_parser("simulate", help="allocate claims offline from YAML snapshots", add_help=False)
    sub.add_parser(
        "demo", help="the whole system on virtual nodes with a live view (make run)", add_help=False
    )
    cp = sub.add_parser("control-plane", help="the local kube-apiserver + etcd")
    cp.add_argument("action", choices=["up", "down", "env"])
    cp.add_argument("--state-dir", default=None, help="default: ~/.cache/kopf-dra/local")
    cl = sub.add_parser(
        "cluster",
        help="a complete local cluster (real kubelets, kube-proxy, CoreDNS), in the foreground",
    )
    cl.add_argument("action", choices=["up"])
    cl.add_argument("--nodes", type=int, default=2, help="how many kubelet nodes (default 2)")
    cl.add_argument(
        "--image",
        action="append",
        default=[],
        help="an OCI image archive to import into every node (make image prints one); repeatable",
    )
    cl.add_argument(
        "--state-dir",
        default=None,
        help="certificates, kubeconfig, logs (default: ~/.cache/kopf-dra/cluster)",
    )
    cl.add_argument(
        "--node-version",
        action="append",
        default=[],
        help="the kubelet release of the next node, the last repeating (e.g. v1.36.3 beside a "
        "v1.37.2 control plane); repeatable; default: the control plane's",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    install_zone_loader(zoneinfo.ZoneInfo)  # CEL's getHours("Europe/Paris"), as Go's tz database
    parser = build_parser()
    if argv[:1] == ["simulate"]:
        return _simulate(argv[1:])
    if argv[:1] == ["demo"]:
        from operators.demo import in_cluster  # the demo, and its --in-cluster form

        return in_cluster.main(argv[1:])
    if argv[:1] == ["run"] and (len(argv) == 1 or argv[1] in ("-h", "--help")):
        return _run_help(asked=len(argv) > 1)
    if argv[:1] == ["run"]:
        args = parser.parse_args(argv[:2])
        return _run(args, argv[2:])
    args = parser.parse_args(argv)
    if args.command == "version":
        print(f"kopf-dra {__version__}")
        return 0
    if args.command == "control-plane":
        return _control_plane(args)
    if args.command == "cluster":
        return _cluster(args)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
