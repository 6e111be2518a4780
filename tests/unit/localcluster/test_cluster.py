"""The complete local cluster without starting it: the order of a control plane upgrade."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from operators.localcluster import cluster, controlplane
from operators.localcluster.files import project_root


def _cluster(tmp_path: Path, version: str) -> cluster.Cluster:
    cp = controlplane.ControlPlane(state_dir=tmp_path, bin_dir=tmp_path, version=version)
    return cluster.Cluster(cp, tmp_path, "192.0.2.2", tmp_path, tmp_path, "")


@pytest.mark.parametrize(
    ("upgrade", "what"),
    [
        (lambda c: c.upgrade_components("v1.37.2"), "kube-controller-manager and kube-scheduler"),
        (
            lambda c: c.upgrade_kubelet("kopf-dra-worker", "v1.37.2"),
            "the kubelet of kopf-dra-worker",
        ),
        (lambda c: c.upgrade_proxy("v1.37.2"), "kube-proxy"),
    ],
)
def test_nothing_is_upgraded_before_the_api_server(
    tmp_path: Path, upgrade: object, what: str
) -> None:
    """Kubernetes' order: no component may be newer than kube-apiserver, so it goes first."""
    assert callable(upgrade)
    with pytest.raises(cluster.ClusterError) as refused:
        upgrade(_cluster(tmp_path, "v1.36.3"))
    assert str(refused.value) == (
        f"{what} v1.37.2 before kube-apiserver v1.37.2 (it runs v1.36.3): Kubernetes upgrades "
        "the API server first"
    )


def test_the_components_get_the_control_planes_release_gates(tmp_path: Path) -> None:
    old, new = _cluster(tmp_path, "v1.36.3"), _cluster(tmp_path, "v1.37.2")
    assert "DRAFractionalCapacityRange" not in old.gates
    assert "DRAFractionalCapacityRange=true" in new.gates


def test_kueues_values_name_the_version_built_and_a_gpu_class_the_driver_has() -> None:
    """The local values name the image hack/kueue/build.sh makes; the user's values turn DRA
    accounting on and map a DeviceClass the example driver installs."""
    root = cluster.KUEUE_BUILD_SCRIPT.parent
    version = (root / "VERSION").read_text().strip()
    local = yaml.safe_load((root / "values-local.yaml").read_text())
    assert local["controllerManager"]["manager"]["image"]["tag"] == version
    assert '"$(hack/kueue/build.sh)/chart"' in cluster.KUEUE_HELM_COMMAND
    values = yaml.safe_load((project_root() / "manifests" / "kueue" / "values.yaml").read_text())
    assert {"name": "DynamicResourceAllocation", "enabled": True} in values["controllerManager"][
        "featureGates"
    ]
    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    classes = {c for m in config["resources"]["deviceClassMappings"] for c in m["deviceClassNames"]}
    installed = {
        d["metadata"]["name"]
        for d in yaml.safe_load_all(
            (project_root() / "manifests" / "driver" / "deviceclasses.yaml").read_text()
        )
        if d
    }
    assert classes
    assert classes <= installed
    assert {"batch/job", "pod"} <= set(config["integrations"]["frameworks"])
