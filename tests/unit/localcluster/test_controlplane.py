"""The releases the local control plane is built of: which one is chosen, its gates, its flags."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from operators.api.features import DEFAULT_RELEASE, Release
from operators.localcluster.controlplane import (
    BUILD_SCRIPT,
    VERSION_ENV,
    ControlPlane,
    ControlPlaneError,
    default_version,
    feature_gates,
    free_port,
    generate_pki,
    kubernetes_version,
    runtime_config,
    supported_versions,
)

HACK = Path(__file__).resolve().parents[3] / "hack" / "controlplane"


def test_every_supported_release_has_its_go_module_and_its_gates() -> None:
    assert default_version() in supported_versions()
    for version in supported_versions():
        module = (HACK / version / "go.mod").read_text()
        assert f"\tk8s.io/kubernetes {version}\n" in module, version
        assert "replace kopf-dra.local/etcd => ../etcd" in module, version
        assert feature_gates(version), version


def test_the_release_assumed_without_a_cluster_is_the_local_control_planes_default() -> None:
    assert Release.parse(default_version()) == DEFAULT_RELEASE


def test_1_37_turns_on_fractional_capacity_ranges_and_pod_groups_besides_the_gates_of_1_36() -> (
    None
):
    assert feature_gates("v1.37.0") == {
        **feature_gates("v1.36.0"),
        "DRAFractionalCapacityRange": True,
        "GenericWorkload": True,
        "DRAWorkloadResourceClaims": True,
        "TopologyAwareWorkloadScheduling": True,
        "CompositePodGroup": True,
    }
    assert "scheduling.k8s.io/v1beta1=true" in runtime_config("v1.37.2").split(",")
    assert "scheduling.k8s.io/v1beta1=true" not in runtime_config("v1.36.3").split(",")


def test_composite_pod_groups_are_served_where_their_gate_is_on() -> None:
    """1.37 serves CompositePodGroup in scheduling.k8s.io/v1alpha3 only; 1.38 in v1beta1, and
    in v1alpha3 where switched on, as here (one example manifest for both releases)."""
    assert feature_gates("v1.38.0-beta.0")["CompositePodGroup"] is True
    for version in ("v1.37.2", "v1.38.0-beta.0"):
        assert "scheduling.k8s.io/v1alpha3=true" in runtime_config(version).split(",")
    assert "scheduling.k8s.io/v1alpha3=true" not in runtime_config("v1.36.3").split(",")
    assert "scheduling.k8s.io/v1beta1=true" in runtime_config("v1.38.0-beta.0").split(",")
    assert "CompositePodGroup" not in feature_gates("v1.36.3")


def test_the_environment_chooses_a_listed_release(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(VERSION_ENV, raising=False)
    assert kubernetes_version() == default_version()
    monkeypatch.setenv(VERSION_ENV, "")
    assert kubernetes_version() == default_version()
    for version in supported_versions():
        monkeypatch.setenv(VERSION_ENV, version)
        assert kubernetes_version() == version
    monkeypatch.setenv(VERSION_ENV, "v1.35.0")
    with pytest.raises(ControlPlaneError, match=f"{VERSION_ENV}=v1.35.0: not a supported"):
        kubernetes_version()


def test_the_build_scripts_refuse_an_unlisted_release_as_the_python_side_does() -> None:
    supported = " ".join(supported_versions())
    for script in (
        BUILD_SCRIPT,
        HACK / "build-upstream.sh",
        HACK.parent / "node" / "build.sh",
        HACK.parent / "cluster" / "build.sh",
    ):
        proc = subprocess.run(
            ["bash", str(script)],
            env={**os.environ, VERSION_ENV: "v1.35.0"},
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 1, script
        assert proc.stderr == (
            f"{VERSION_ENV}=v1.35.0: not a supported Kubernetes version; supported: {supported}"
            " (hack/controlplane/VERSIONS)\n"
        ), script


def test_only_a_loopback_control_plane_runs_without_the_endpoint_reconciler(
    tmp_path: Path,
) -> None:
    """Loopback cannot be the ``kubernetes`` Service's endpoint (1.37 refuses to start with it);
    the host's address can, and pods on real nodes reach the API server through it."""
    for version in supported_versions():
        loopback = ControlPlane(state_dir=tmp_path, bin_dir=tmp_path, version=version)
        host = ControlPlane(
            state_dir=tmp_path, bin_dir=tmp_path, version=version, address="192.0.2.1"
        )
        assert "--endpoint-reconciler-type=none" in loopback.apiserver_argv()
        assert not [a for a in host.apiserver_argv() if "endpoint-reconciler" in a]


def test_the_api_server_gets_its_releases_gates(tmp_path: Path) -> None:
    for version in supported_versions():
        argv = ControlPlane(state_dir=tmp_path, bin_dir=tmp_path, version=version).apiserver_argv()
        (flag,) = [a for a in argv if a.startswith("--feature-gates=")]
        given = dict(item.split("=") for item in flag.removeprefix("--feature-gates=").split(","))
        assert given == {g: str(on).lower() for g, on in feature_gates(version).items()}


def test_a_free_port_is_below_the_ephemeral_range_where_no_client_takes_it() -> None:
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {free_port() for _ in range(20)}
    assert all(p < low for p in ports), ports
    assert len(ports) > 1, "chosen at random: two control planes started at once differ"


def test_the_aggregation_layer_has_its_own_ca_also_for_a_state_dir_made_before(
    tmp_path: Path,
) -> None:
    """Kueue's visibility API is served through the aggregation layer: the API server proxies
    as front-proxy-client, signed by a CA of its own (not the cluster's), as kubeadm does."""
    pki = tmp_path / "pki"
    generate_pki(pki)
    (pki / "front-proxy-client.crt").unlink()  # a state directory from before the layer
    generate_pki(pki)
    client = str(pki / "front-proxy-client.crt")
    subject = subprocess.run(
        ["openssl", "x509", "-noout", "-subject", "-issuer", "-in", client],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "CN = front-proxy-client" in subject
    assert "kopf-dra-front-proxy-ca" in subject
    argv = ControlPlane(state_dir=tmp_path, bin_dir=tmp_path).apiserver_argv()
    assert f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}" in argv
    assert "--requestheader-allowed-names=front-proxy-client" in argv
