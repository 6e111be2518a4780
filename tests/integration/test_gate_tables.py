"""The generated gate tables (operators/api/gate_tables.py) against each pinned release's own
kube-scheduler: every gate its ``--help`` lists (alpha, beta and deprecated ones: GA gates are
not listed) is in the table of that release, with the same stage and default; so kopf-dra takes
every name that kube-scheduler takes."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from operators.api.features import (
    SUPPORTED_RELEASES,
    KubernetesVersion,
    Release,
    gates_of,
    known_anywhere,
)
from operators.api.gate_tables import SOURCES

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "hack" / "controlplane" / "build-upstream.sh"
#: "kube:DRAConsumableCapacity=true|false (BETA - default=true)", with a trailing
#: "if --min-compatibility-version>=1.37" where the default needs it.
HELP_LINE = re.compile(
    r"kube:(?P<name>\w+)=true\|false \((?P<stage>\w+) - default=(?P<default>true|false)\)"
    r"(?: if --min-compatibility-version>=(?P<compat>[\d.]+))?"
)
STAGES = {"ALPHA": "Alpha", "BETA": "Beta", "DEPRECATED": "Deprecated"}


def scheduler_help(git_version: str) -> str:
    """``kube-scheduler --help`` of the pinned build of ``git_version`` (built if missing)."""
    env = {**os.environ, "KOPF_DRA_KUBERNETES_VERSION": git_version}
    built = subprocess.run(
        ["bash", str(BUILD)], capture_output=True, text=True, check=True, env=env, timeout=3600
    )
    binary = Path(built.stdout.strip().splitlines()[-1]) / "kube-scheduler"
    done = subprocess.run(
        [str(binary), "--help"], capture_output=True, text=True, check=False, timeout=60
    )
    return done.stdout + done.stderr


@pytest.mark.parametrize("release", SUPPORTED_RELEASES, ids=str)
def test_every_gate_kube_scheduler_lists_is_in_its_releases_table(release: Release) -> None:
    text = scheduler_help(SOURCES[str(release)])
    listed = [m.groupdict() for m in HELP_LINE.finditer(text)]
    assert len(listed) > 100, "kube-scheduler --help lists its gates"
    version = KubernetesVersion(release)
    gates = gates_of(version)
    missing = sorted(g["name"] for g in listed if g["name"] not in gates)
    assert missing == [], f"kube-scheduler {release} accepts gates kopf-dra does not know"
    for entry in listed:
        at = version
        if entry["compat"]:
            at = KubernetesVersion.of(str(release), min_compatibility=entry["compat"])
        gate = gates_of(at)[entry["name"]]
        assert gate.stage == STAGES[entry["stage"]], entry
        assert gate.default == (entry["default"] == "true"), entry
        assert known_anywhere(entry["name"])
