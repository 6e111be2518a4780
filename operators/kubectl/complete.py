"""``kubectl_complete-dra``: shell completion for ``kubectl dra`` (kubectl 1.26 and later).

For ``kubectl dra why tr<TAB>`` kubectl runs ``kubectl_complete-dra why tr`` (the words after
the plugin's name, the one being completed last, empty for a new word) and reads one
candidate a line, then ``:<directive>``, cobra's: 4 asks the shell for no file names, 0 lets
it complete them (``--kubeconfig``). Subcommands, flags, ``-o`` values, namespaces, contexts
and pod names (``why`` and ``claims``) are offered; a cluster that cannot be read in
``TIMEOUT`` seconds offers no names, never an error.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from collections.abc import Sequence
from typing import Literal, TextIO

from operators.kube.api import ApiTimeouts
from operators.kubectl.cli import OUTPUTS, build_parser
from operators.kubectl.connect import Target, connected, context_names, default_namespace
from operators.simulate.cluster import Reader

NO_FILE_COMPLETION = 4
SHELL_DEFAULT = 0
TIMEOUT = 3.0
POD_ARGUMENT = ("why", "claims")

What = Literal["words", "pods", "namespaces", "contexts", "files"]


@dataclasses.dataclass(frozen=True)
class Wanted:
    what: What
    prefix: str
    words: tuple[str, ...] = ()
    target: Target = dataclasses.field(default_factory=Target)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _flags(parser: argparse.ArgumentParser) -> dict[str, bool]:
    """Each flag of ``parser``, and whether it takes a value."""
    return {
        flag: action.nargs != 0
        for flag, action in parser._option_string_actions.items()
        if flag not in ("-h", "--help")
    }


def wanted(args: Sequence[str]) -> Wanted:
    """What the word being completed is, from the words before it (pure)."""
    words = list(args)
    if words[:1] == ["__complete"]:  # as a cobra program is asked; kubectl does not add it
        words = words[1:]
    *before, current = words or [""]
    parser = build_parser()
    subcommands = _subcommands(parser)
    known = _flags(parser)
    values: dict[str, str] = {}
    positionals: list[str] = []
    pending: str | None = None
    for word in before:
        if pending is not None:
            values[pending], pending = word, None
            continue
        name, eq, value = word.partition("=")
        if word.startswith("-"):
            if eq:
                values[name] = value
            elif known.get(name):
                pending = name
            continue
        positionals.append(word)
        if len(positionals) == 1 and word in subcommands:
            known.update(_flags(subcommands[word]))
    target = Target(
        values.get("--kubeconfig"),
        values.get("--context"),
        values.get("-n") or values.get("--namespace"),
    )
    previous = before[-1] if before else ""
    if previous in ("-n", "--namespace"):
        return Wanted("namespaces", current, target=target)
    if previous == "--context":
        return Wanted("contexts", current, target=target)
    if previous == "--kubeconfig":
        return Wanted("files", current)
    if previous in ("-o", "--output"):
        return Wanted("words", current, OUTPUTS)
    sub = subcommands.get(positionals[0]) if positionals else None
    if current.startswith("-"):
        return Wanted("words", current, tuple(sorted(_flags(sub or parser))))
    if not positionals:
        return Wanted("words", current, tuple(subcommands))
    if positionals[0] in POD_ARGUMENT and len(positionals) == 1:
        return Wanted("pods", current, target=target)
    return Wanted("words", current)


async def _names(want: Wanted) -> list[str]:
    """Pod or namespace names from the cluster (none where it cannot be read)."""
    timeouts = ApiTimeouts(connect=TIMEOUT, total=TIMEOUT)
    try:
        async with connected(want.target, timeouts) as api:
            reader = Reader(api)
            if want.what == "namespaces":
                items = await reader.items("Namespace")
            else:
                items = await reader.items("Pod", default_namespace(want.target))
    except Exception:  # completion must never fail the shell
        return []
    return sorted(str((i.get("metadata") or {}).get("name")) for i in items or [])


def candidates(want: Wanted, names: Sequence[str]) -> list[str]:
    return [n for n in names if n.startswith(want.prefix)]


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Entry point of ``kubectl_complete-dra``."""
    out = out if out is not None else sys.stdout
    want = wanted(list(argv) if argv is not None else sys.argv[1:])
    if want.what == "files":
        out.write(f":{SHELL_DEFAULT}\n")
        return 0
    if want.what == "words":
        names: Sequence[str] = want.words
    elif want.what == "contexts":
        names = context_names(want.target)
    else:
        names = asyncio.run(_names(want))
    for name in candidates(want, names):
        out.write(name + "\n")
    out.write(f":{NO_FILE_COMPLETION}\n")
    return 0
