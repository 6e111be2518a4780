"""The ``kopf-dra`` command: run a component, simulate allocation offline, manage the local
control plane, print the version."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

from operators import __version__
from operators.settings import Settings

# component name -> module with `add_arguments(parser)` and `run(args) -> int`.
COMPONENTS: dict[str, str] = {
    "claim-templates": "operators.controllers.claim_templates.app",
    "reservations": "operators.controllers.reservations.app",
    "pool-validator": "operators.controllers.pool_validator.app",
    "scheduler": "operators.controllers.scheduler.app",
    "driver": "operators.driver.app",
    "fabric": "operators.controllers.fabric.app",
    "fabric-manager-sim": "operators.fabric.app",
}

# component -> "module:Class" of its settings (flags, environment, the docs' reference).
SETTINGS: dict[str, str] = {
    "claim-templates": ("operators.controllers.claim_templates.settings:ClaimTemplateSettings"),
    "reservations": "operators.controllers.reservations.settings:ReservationSettings",
    "pool-validator": "operators.controllers.pool_validator.settings:PoolValidatorSettings",
    "scheduler": "operators.controllers.scheduler.settings:SchedulerSettings",
    "driver": "operators.driver.settings:DriverSettings",
    "fabric": "operators.controllers.fabric.settings:FabricSettings",
    "fabric-manager-sim": "operators.fabric.app:FabricSimSettings",
}


def settings_class(component: str) -> type[Settings]:
    """The settings class of a component (without importing its operator)."""
    module, _, name = SETTINGS[component].partition(":")
    cls: type[Settings] = getattr(importlib.import_module(module), name)
    return cls


def _control_plane(args: argparse.Namespace) -> int:
    from operators.kube import controlplane

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


def _run(args: argparse.Namespace, rest: list[str]) -> int:
    module = importlib.import_module(COMPONENTS[args.component])
    parser = argparse.ArgumentParser(prog=f"kopf-dra run {args.component}")
    module.add_arguments(parser)
    code: int = module.run(parser.parse_args(rest))
    return code


def _simulate(rest: list[str]) -> int:
    try:
        module = importlib.import_module("operators.simulate")
    except ModuleNotFoundError:
        print("kopf-dra: simulate is not available in this build", file=sys.stderr)
        return 2
    code: int = module.main(rest)
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kopf-dra", description="Kubernetes Dynamic Resource Allocation on kopf"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("version", help="print the version")
    run = sub.add_parser("run", help="run one component", add_help=False)
    run.add_argument("component", choices=sorted(COMPONENTS) or ["(none yet)"])
    sub.add_parser("simulate", help="allocate claims offline from YAML snapshots", add_help=False)
    sub.add_parser(
        "demo", help="the whole system on virtual nodes with a live view (make run)", add_help=False
    )
    cp = sub.add_parser("control-plane", help="the local kube-apiserver + etcd")
    cp.add_argument("action", choices=["up", "down", "env"])
    cp.add_argument("--state-dir", default=None, help="default: ~/.cache/kopf-dra/local")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if argv[:1] == ["simulate"]:
        return _simulate(argv[1:])
    if argv[:1] == ["demo"]:
        from operators import demo

        return demo.main(argv[1:])
    if argv[:1] == ["run"] and len(argv) >= 2:
        args = parser.parse_args(argv[:2])
        return _run(args, argv[2:])
    args = parser.parse_args(argv)
    if args.command == "version":
        print(f"kopf-dra {__version__}")
        return 0
    if args.command == "control-plane":
        return _control_plane(args)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
