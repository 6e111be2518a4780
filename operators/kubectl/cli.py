"""The ``kubectl-dra`` command line: parse, read the cluster, hand the objects to the pure
views (``claims``, ``pools``, ``why``), print. Exit codes: ``operators.kubectl``."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import sys
import zoneinfo
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TextIO

import yaml

from operators.api import holdings
from operators.api.core import Pod
from operators.api.features import KubernetesVersion
from operators.api.holdings import KUEUE_QUEUE_LABEL
from operators.api.resource import ResourceClaim
from operators.api.validation import label_name_errors
from operators.cel import install_zone_loader
from operators.display import is_terminal
from operators.kube.api import ApiError, KubeAPI
from operators.kubectl import claims as claim_view
from operators.kubectl import pools as pool_view
from operators.kubectl import why as why_view
from operators.kubectl.connect import Target, Unreachable, UsageError, connected, get_pod
from operators.kubectl.connect import default_namespace as namespace_of
from operators.simulate import options_of, scheduler_arguments, version_of
from operators.simulate.cluster import Reader, is_forbidden, read_cluster
from operators.simulate.snapshot import InputError

EXIT_ANSWERED, EXIT_NO, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
SUBCOMMANDS = ("claims", "pools", "why")
OUTPUTS = ("json", "yaml", "wide")
CLEAR = "\x1b[H\x1b[2J"

EXAMPLES = """examples:
  kubectl dra claims                 # the claims of the current namespace
  kubectl dra claims trainer -o wide # the claims of pod trainer, with device status
  kubectl dra pools --watch          # every pool, refreshed every 2 s
  kubectl dra pools --by topology.example.com/rack # devices free per rack
  kubectl dra pools --held           # devices allocated per namespace and Kueue queue
  kubectl dra why trainer            # why is pod trainer pending (or what does it hold)?

exit codes: 0 answered (why: the pod is bound or fits), 1 why: the pod fits nowhere or waits,
2 usage or bad input (an unknown pod), 3 the cluster cannot be reached, refused the
credentials, or forbade a read the answer needs
"""


def _common(p: argparse.ArgumentParser, *, top: bool) -> None:
    """kubectl's flags; on a subcommand they may also follow it (kubectl takes flags
    anywhere), without overwriting one given before it."""
    default: Any = None if top else argparse.SUPPRESS
    p.add_argument(
        "-n", "--namespace", default=default, help="the namespace (default: the context's)"
    )
    p.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="every namespace (claims)",
    )
    p.add_argument("--context", default=default, help="the kubeconfig context to use")
    p.add_argument("--kubeconfig", default=default, help="the kubeconfig file to use")
    p.add_argument("-o", "--output", choices=OUTPUTS, default=default, help="json, yaml or wide")


def _label_key(value: str) -> str:
    """``--by``'s KEY: a label key, refused at once rather than matching no node."""
    errors = label_name_errors(value)
    if errors:
        raise argparse.ArgumentTypeError(f"{value!r} is not a label key: {'; '.join(errors)}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubectl dra",
        description="Dynamic Resource Allocation at a glance: claims, pools, and why a pod "
        "waits, read from the cluster of your kubeconfig (no kopf-dra component needed).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(parser, top=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    claims = sub.add_parser(
        "claims", help="ResourceClaims with their devices, reservations and device status"
    )
    claims.add_argument("pod", nargs="?", metavar="POD", help="only the claims of this pod")
    _common(claims, top=False)
    pools = sub.add_parser(
        "pools", help="every pool's devices: allocated, available, counters, capacity, taints"
    )
    pools.add_argument("--watch", "-w", action="store_true", help="refresh until Ctrl-C")
    pools.add_argument(
        "--interval", type=float, default=2.0, metavar="SECONDS", help="--watch's refresh (2)"
    )
    pools.add_argument(
        "--by",
        type=_label_key,
        metavar="KEY",
        help="one row per topology domain (the nodes sharing a value of node label KEY, e.g. "
        "a rack): its nodes and its pools' devices summed; nodes without KEY (or with an empty "
        "value) and pools not local to one node are in the row <none>",
    )
    pools.add_argument(
        "--held",
        action="store_true",
        help="devices allocated per namespace and per queue (the --queue-label of the pods "
        "holding them), to compare with a queue's usage (Kueue's ClusterQueue status)",
    )
    pools.add_argument(
        "--queue-label",
        type=_label_key,
        default=KUEUE_QUEUE_LABEL,
        metavar="KEY",
        help=f"--held's pod label naming a queue (default {KUEUE_QUEUE_LABEL}: Kueue's)",
    )
    _common(pools, top=False)
    why = sub.add_parser(
        "why",
        help="why a pod is pending (kopf-dra's answer per node, and its scheduling events), "
        "or which devices a bound pod holds",
    )
    why.add_argument("pod", metavar="POD")
    why.add_argument(
        "--explain",
        action="store_true",
        help="per request, which classes, selectors and checks eliminated which devices",
    )
    scheduler_arguments(why)
    _common(why, top=False)
    return parser


def _target(args: argparse.Namespace) -> Target:
    return Target(args.kubeconfig, args.context, args.namespace)


def _write(data: Any, fmt: str | None, out: TextIO) -> None:
    if fmt == "json":
        out.write(json.dumps(data, indent=2) + "\n")
    else:
        out.write(yaml.safe_dump(data, sort_keys=False))


def _warn(reader: Reader, what: str, err: TextIO | None) -> None:
    for refusal in reader.refused if err is not None else ():
        print(f"warning: {refusal} is forbidden: {what}", file=err)


async def _version(api: KubeAPI) -> KubernetesVersion:
    """The cluster's release, and reads where it serves each kind."""
    try:
        version = KubernetesVersion.from_version_info(await api.version_info())
    except ValueError as e:
        raise Unreachable(f"the API server's /version: {e}") from None
    api.release = version.release
    return version


async def claims(args: argparse.Namespace, api: KubeAPI, out: TextIO, err: TextIO) -> int:
    reader = Reader(api)
    namespace = namespace_of(_target(args))
    pod = Pod.load(await get_pod(api, namespace, args.pod)) if args.pod else None
    everywhere = args.all_namespaces and pod is None
    items = await reader.items("ResourceClaim", None if everywhere else namespace)
    if items is None and everywhere:
        items = await reader.items("ResourceClaim", namespace)
        _warn(reader, f"showing namespace {namespace} only", err)
        everywhere = False
    if items is None:
        raise Unreachable(f"forbidden: {reader.refused[-1]}: {reader.refused[-1].message}")
    models = [ResourceClaim.load(i) for i in items]
    notes: list[str] = []
    if pod is not None:
        mine, notes = claim_view.claims_of(pod, models)
        keys = {c.key for c in mine}
        items = [i for i, m in zip(items, models, strict=True) if m.key in keys]
        models = mine
    if args.output in ("json", "yaml"):
        _write(claim_view.as_list(items), args.output, out)
        return EXIT_ANSWERED
    now = datetime.datetime.now(datetime.UTC)
    where = f"pod {namespace}/{args.pod}" if args.pod else f"namespace {namespace}"
    out.write(
        claim_view.render(
            models,
            now,
            wide=args.output == "wide",
            namespaced=everywhere,
            notes=notes,
            empty=f"No ResourceClaims found in {'any namespace' if everywhere else where}.",
            colour=_colour(out),
        )
    )
    return EXIT_ANSWERED


async def pool_objects(
    api: KubeAPI, namespace: str, err: TextIO | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], KubernetesVersion]:
    """The slices, claims and DeviceTaintRules this user may read, and the cluster's version
    (claims of one namespace if that is all: other namespaces' allocations are then not
    counted, and a warning on ``err`` says so)."""
    version = await _version(api)
    reader = Reader(api)
    slices = await reader.items("ResourceSlice")
    if slices is None:
        raise Unreachable(f"forbidden: {reader.refused[-1]}: {reader.refused[-1].message}")
    found = await reader.items("ResourceClaim")
    if found is None:
        found = await reader.items("ResourceClaim", namespace) or []
    rules = await reader.items("DeviceTaintRule") or []
    _warn(reader, "the pools are counted without it", err)
    return slices, found, rules, version


async def pool_nodes(api: KubeAPI, err: TextIO | None) -> list[dict[str, Any]] | None:
    """The Nodes, for ``--by``'s domains; None where listing them is forbidden (the pools are
    then shown one by one, and a warning on ``err`` says why)."""
    reader = Reader(api)
    nodes = await reader.items("Node")
    _warn(reader, "the pools are shown without domains", err)
    return nodes


async def watch(
    frame: Callable[[], Awaitable[str]],
    out: TextIO,
    interval: float,
    *,
    frames: int | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> int:
    """Print ``frame()`` every ``interval`` seconds (over the last one on a terminal) until
    interrupted, or ``frames`` times."""
    shown = 0
    while frames is None or shown < frames:
        text = await frame()
        prefix = CLEAR if is_terminal(out) else ("\n" if shown else "")
        out.write(prefix + text)
        out.flush()
        shown += 1
        if frames is None or shown < frames:
            await sleep(interval)
    return EXIT_ANSWERED


async def held(
    api: KubeAPI, namespace: str, label: str, err: TextIO | None
) -> dict[tuple[str, str], tuple[int, int]]:
    """Devices and claims per (namespace, queue): the allocated claims this user may read,
    the queue label of the pods carrying it (only those are listed)."""
    _, found, _, _ = await pool_objects(api, namespace, err)
    reader = Reader(api)
    pods = await reader.items("Pod", label_selector=label)
    if pods is None:
        pods = await reader.items("Pod", namespace, label_selector=label) or []
    _warn(reader, "devices are counted without their queues", err)
    return holdings.held(found, pods, label)


async def pools(args: argparse.Namespace, api: KubeAPI, out: TextIO, err: TextIO) -> int:
    namespace = namespace_of(_target(args))
    colour = _colour(out)
    wide = args.output == "wide"
    if args.held:
        sums = await held(api, namespace, args.queue_label, err)
        if args.output in ("json", "yaml"):
            _write(pool_view.held_json(sums), args.output, out)
        else:
            out.write(pool_view.render_held(sums, args.queue_label, colour=colour))
        return EXIT_ANSWERED

    warn: list[TextIO | None] = [err]  # --watch warns of a refused read once, not every frame

    async def views() -> tuple[list[pool_view.PoolView], list[pool_view.DomainView] | None]:
        """The pools, and with ``--by`` their domains (None where Nodes cannot be read)."""
        objects = await pool_objects(api, namespace, warn[0])
        nodes = await pool_nodes(api, warn[0]) if args.by else None
        warn[0] = None
        shown = pool_view.from_objects(*objects)
        if nodes is None:
            return shown, None
        return shown, pool_view.domains_from_objects(shown, nodes, args.by)

    def text(shown: list[pool_view.PoolView], domains: list[pool_view.DomainView] | None) -> str:
        if domains is None:
            return pool_view.render(shown, wide=wide, colour=colour)
        return pool_view.render_domains(domains, shown, args.by, wide=wide, colour=colour)

    if args.output in ("json", "yaml"):
        _write(pool_view.as_json(*await views()), args.output, out)
        return EXIT_ANSWERED
    if not args.watch:
        out.write(text(*await views()))
        return EXIT_ANSWERED

    command = f"kubectl dra pools --by {args.by}" if args.by else "kubectl dra pools"

    async def frame() -> str:
        shown = text(*await views())
        now = datetime.datetime.now().strftime("%H:%M:%S")
        return f"Every {args.interval:g}s: {command}  {now}\n\n" + shown

    return await watch(frame, out, args.interval)


async def why(args: argparse.Namespace, api: KubeAPI, out: TextIO, err: TextIO) -> int:
    namespace = namespace_of(_target(args))
    reader = Reader(api)
    pod = await get_pod(api, namespace, args.pod)
    try:
        read = await read_cluster(api, namespace=namespace)
    except InputError as e:
        raise Unreachable(str(e)) from None
    try:
        version = version_of(args, read.version)
    except InputError as e:
        raise UsageError(str(e)) from None
    events = await reader.items(
        "Event", namespace, field_selector=f"involvedObject.name={args.pod}"
    )
    refused = [*read.refused, *reader.refused]
    for refusal in refused:
        print(f"warning: {refusal} is forbidden: the answer is without it", file=err)
    answer = why_view.answer(
        pod,
        read.documents,
        events or [],
        version,
        options_of(args, version),
        datetime.datetime.now(datetime.UTC),
        refused,
    )
    if args.output in ("json", "yaml"):
        _write(why_view.as_json(answer), args.output, out)
    else:
        now = datetime.datetime.now(datetime.UTC)
        out.write(why_view.render(answer, now, wide=args.output == "wide", colour=_colour(out)))
    return EXIT_ANSWERED if answer.fits else EXIT_NO


COMMANDS = {"claims": claims, "pools": pools, "why": why}


def _colour(out: TextIO) -> bool:
    return is_terminal(out) and not os.environ.get("NO_COLOR")


async def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    async with connected(_target(args)) as api:
        try:
            return await COMMANDS[args.command](args, api, out, err)
        except ApiError as e:
            if is_forbidden(e):
                raise Unreachable(f"forbidden: {e.message}") from None
            raise


def main(
    argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Entry point of ``kubectl-dra``; returns the exit code."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    install_zone_loader(zoneinfo.ZoneInfo)  # CEL's getHours("Europe/Paris"), as Go's
    try:
        args = build_parser().parse_args(list(argv) if argv is not None else None)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return int(e.code or 0)
    try:
        return asyncio.run(_run(args, out, err))
    except UsageError as e:
        print(f"error: {e}", file=err)
        return EXIT_USAGE
    except Unreachable as e:
        print(f"error: {e}", file=err)
        return EXIT_UNREACHABLE
    except KeyboardInterrupt:  # Ctrl-C ends --watch
        return EXIT_ANSWERED
