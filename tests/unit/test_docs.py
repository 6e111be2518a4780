"""Docs and configs that must agree with the code: the README's configuration reference, the
kind config's feature gates, the example scenarios' files."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.localcluster.cluster import CONTROLLERS
from operators.localcluster.controlplane import default_version, feature_gates, runtime_config
from operators.localcluster.manifests import render

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "manifests" / "examples"


def test_the_readme_configuration_reference_is_up_to_date() -> None:
    script = runpy.run_path(str(ROOT / "hack" / "config_reference.py"))
    readme = (ROOT / "README.md").read_text()
    assert script["render"](readme) == readme, "run `make docs`"
    assert "`--binding-timeout` | `KOPF_DRA_BINDING_TIMEOUT` | `600.0`" in readme


def _kind() -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load((ROOT / "e2e" / "kind" / "cluster.yaml").read_text())
    return config


def test_the_kind_config_switches_the_gates_of_the_local_control_plane() -> None:
    config = _kind()
    assert (config["kind"], config["apiVersion"]) == ("Cluster", "kind.x-k8s.io/v1alpha4")
    # kind runs the default release (the Makefile's KIND_NODE_IMAGE).
    assert config["featureGates"] == feature_gates(default_version())
    pairs = (item.partition("=") for item in runtime_config(default_version()).split(","))
    assert config["runtimeConfig"] == {group: value for group, _, value in pairs}


def test_the_kind_config_disables_the_upstream_claim_controller_and_labels_workers() -> None:
    config = _kind()
    (control_plane,) = [n for n in config["nodes"] if n["role"] == "control-plane"]
    (patch,) = [yaml.safe_load(p) for p in control_plane["kubeadmConfigPatches"]]
    assert patch["kind"] == "ClusterConfiguration"
    assert {"name": "controllers", "value": CONTROLLERS} in patch["controllerManager"]["extraArgs"]
    workers = [n for n in config["nodes"] if n["role"] == "worker"]
    assert len(workers) == 2
    for worker in workers:
        assert worker["labels"] == {
            "example.kopf-dra.io/rack": "rack-a",
            "resource.kopf-dra.io/fabric": "fabric1",
        }


SCENARIOS = sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir())


def test_the_sixteen_scenarios_exist() -> None:
    assert SCENARIOS == [
        "admin-access",
        "compatibility-groups",
        "composite-training",
        "derived-attributes",
        "extended-resources",
        "fabric-gpu",
        "fractional-capacity",
        "gang-training",
        "mig-partitions",
        "multi-host-shared-claim",
        "node-allocatable",
        "numa-alignment",
        "prioritized-alternatives",
        "priority-preemption",
        "rack-training",
        "shared-nic-bandwidth",
    ]


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_scenario_has_a_readme_and_lists_all_its_files(name: str) -> None:
    directory = EXAMPLES / name
    assert (directory / "README.md").read_text().startswith("# ")
    listed = yaml.safe_load((directory / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(
        p.name for p in directory.glob("*.yaml") if p.name != "kustomization.yaml"
    )
    objects = render(directory)
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert pods
    for pod in pods:
        assert pod["spec"]["schedulerName"] == "kopf-dra"
        # Every claim a container uses is declared, and the reverse; a pod without claims asks
        # for an extended resource backed by DRA (KEP-5004) instead.
        resources = pod["spec"]["containers"][0]["resources"]
        declared = {c["name"] for c in pod["spec"].get("resourceClaims") or []}
        used = {c["name"] for c in resources.get("claims") or []}
        assert declared == used
        assert declared or "example.kopf-dra.io/gpu" in (resources.get("limits") or {})
