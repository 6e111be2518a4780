"""The driver's manifests agree with the code: models round-trip, classes select the profiles,
the ConfigMap is the built-in demo node, the DaemonSet's env names are real settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.api.resource import DeviceClass
from operators.api.validation import validate
from operators.cel import CELEnvironment, build_device_view
from operators.driver.opaque import parse_device_config
from operators.driver.profiles import A100_40GB, build_inventory, default_config, parse_config
from operators.driver.settings import DEFAULT_DRIVER, DriverSettings
from operators.settings import env_name

MANIFESTS = Path(__file__).resolve().parents[3] / "manifests" / "driver"


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d]


def _classes() -> list[dict[str, Any]]:
    return _docs("deviceclasses.yaml")


def _selected(doc: dict[str, Any]) -> set[str]:
    env = CELEnvironment()
    inventory = build_inventory(default_config(), "node-a")
    selectors = [env.compile(s["cel"]["expression"]) for s in doc["spec"]["selectors"]]
    return {
        d.name or ""
        for d in inventory.devices
        if all(s.evaluate(build_device_view(DEFAULT_DRIVER, d)) for s in selectors)
    }


def test_kustomization_lists_every_file() -> None:
    """Every file, and the DaemonSet's own kustomization (host-paths/ is a component that
    overlays add, not a resource)."""
    (kustomization,) = _docs("kustomization.yaml")
    files = {p.name for p in MANIFESTS.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == files | {"daemonset"}
    (daemonset,) = _docs("daemonset/kustomization.yaml")
    assert daemonset["resources"] == ["daemonset.yaml"]
    (component,) = _docs("host-paths/kustomization.yaml")
    assert component["kind"] == "Component"


@pytest.mark.parametrize("doc", _classes(), ids=lambda d: d["metadata"]["name"])
def test_device_classes_round_trip_and_validate(doc: dict[str, Any]) -> None:
    model = DeviceClass.load(doc)
    assert model.dump() == doc
    assert validate(model) == []
    for config in model.spec.config:
        assert config.opaque is not None
        assert config.opaque.driver == DEFAULT_DRIVER
        parse_device_config(config.opaque.parameters)
    assert _selected(doc), "a class that selects no device of the demo node"


def test_classes_select_exactly_their_profile() -> None:
    by_name = {d["metadata"]["name"]: d for d in _classes()}
    suffix = f".{DEFAULT_DRIVER}"
    assert _selected(by_name[f"gpu{suffix}"]) == {"gpu-0", "gpu-1"}
    assert _selected(by_name[f"nic{suffix}"]) == {"nic-0"}
    assert len(_selected(by_name[f"mig{suffix}"])) == 25
    placements = {p.name: len(p.placements) for p in A100_40GB.profiles}
    for profile in A100_40GB.profiles:
        chosen = _selected(by_name[f"mig-{profile.device_suffix}{suffix}"])
        assert len(chosen) == placements[profile.name]
        assert all(f"-mig-{profile.device_suffix}-" in name for name in chosen)


def test_configmap_is_the_built_in_demo_node() -> None:
    (configmap,) = _docs("configmap.yaml")
    assert parse_config(yaml.safe_load(configmap["data"]["profiles.yaml"])) == default_config()


def test_daemonset_env_are_settings_and_paths_match_the_defaults() -> None:
    (daemonset,) = _docs("daemonset/daemonset.yaml")
    pod = daemonset["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    known = {env_name(f) for f in DriverSettings.model_fields}
    env = {e["name"]: e for e in container["env"]}
    assert set(env) <= known
    assert env["KOPF_DRA_NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert env["KOPF_DRA_DRIVER_NAME"]["value"] == DEFAULT_DRIVER
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    defaults = DriverSettings()
    assert f"{defaults.kubelet_dir}/plugins_registry" in mounts
    assert f"{defaults.kubelet_dir}/plugins/{DEFAULT_DRIVER}" in mounts
    assert defaults.cdi_dir in mounts
    assert pod["serviceAccountName"] == _docs("serviceaccount.yaml")[0]["metadata"]["name"]


def test_rbac_names_exactly_what_the_driver_writes() -> None:
    role = next(d for d in _docs("rbac.yaml") if d["kind"] == "ClusterRole")
    rules = {(r["apiGroups"][0], r["resources"][0]): r for r in role["rules"]}
    assert set(rules) == {
        ("resource.k8s.io", "resourceslices"),
        ("resource.k8s.io", "resourceclaims"),
        ("", "nodes"),
        ("resource.k8s.io", "resourceclaims/status"),
        ("resource.k8s.io", "resourceclaims/driver"),
    }
    assert rules[("resource.k8s.io", "resourceclaims")]["verbs"] == ["get"]
    assert rules[("", "nodes")]["verbs"] == ["get"]
    driver_rule = rules[("resource.k8s.io", "resourceclaims/driver")]
    assert driver_rule["resourceNames"] == [DEFAULT_DRIVER]
    assert all(v.startswith("associated-node:") for v in driver_rule["verbs"])
