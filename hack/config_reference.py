"""README's configuration reference, generated from the settings classes (``make docs``).

``--write`` rewrites the block between the markers in README.md; ``--check`` (what
tests/unit/test_docs.py runs) exits 1 when the README is out of date.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from operators.components import COMPONENTS
from operators.settings import LeaderElectionSettings, Settings, env_name, flag_name

README = Path(__file__).resolve().parents[1] / "README.md"
START = "<!-- config-reference:start (make docs) -->"
END = "<!-- config-reference:end -->"


def _default(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | dict):
        return ",".join(str(v) for v in value) or "-"
    return str(value) if str(value) else '""'


def _rows(cls: type[Settings], skip: set[str]) -> list[str]:
    rows = []
    for name, info in cls.model_fields.items():
        inherited = LeaderElectionSettings.model_fields.get(name)
        if name in skip and (inherited is None or inherited.default == info.default):
            continue
        description = (info.description or "").replace("|", "\\|")
        rows.append(
            f"| `{flag_name(name)}` | `{env_name(name)}` | "
            f"`{_default(info.get_default(call_default_factory=True))}` | "
            f"{description} |"
        )
    return rows


def reference() -> str:
    header = ["| flag | environment | default | what |", "|---|---|---|---|"]
    common = set(Settings.model_fields)
    leader = set(LeaderElectionSettings.model_fields) - common
    out = [
        "Every component (`kopf-dra run <component> --help`):",
        "",
        *header,
        *_rows(Settings, set()),
        "",
        "Every controller (all but `driver` and `fabric-manager-sim`): leader election, with",
        "write fencing (see Operations):",
        "",
        *header,
        *_rows(LeaderElectionSettings, common),
    ]
    for name in sorted(COMPONENTS):
        out += ["", f"`kopf-dra run {name}`:", "", *header]
        out += _rows(COMPONENTS[name].settings_class(), common | leader)
    return "\n".join(out) + "\n"


def render(readme: str) -> str:
    head, start, rest = readme.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise SystemExit(f"README.md lacks the markers {START!r} ... {END!r}")
    return f"{head}{START}\n{reference()}{END}{tail}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    current = README.read_text()
    wanted = render(current)
    if args.write:
        README.write_text(wanted)
        return 0
    if current != wanted:
        print("README.md's configuration reference is out of date: run `make docs`")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
