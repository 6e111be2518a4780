"""Real nodes without starting any: what is missing, the configs each node gets, the host record."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from operators.localcluster import controlplane, realnode


def node(index: int, tmp_path: Path) -> realnode.RealNode:
    return realnode.RealNode(
        f"worker-{index}",
        index,
        tmp_path / f"n{index}",
        {"rack": "a"},
        tmp_path,
        "192.0.2.2",
        10250,
    )


def test_missing_tools_are_named_with_their_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(realnode, "CNI_BIN_DIR", Path("/nonexistent"))
    missing = " | ".join(realnode.missing_prerequisites())
    assert "runc (hack/node/install-deps.sh)" in missing
    assert "busybox" in missing
    assert "CNI plugins bridge, host-local, loopback in /nonexistent" in missing


def test_two_nodes_share_no_directory_port_socket_cgroup_or_bridge(tmp_path: Path) -> None:
    a, b = node(0, tmp_path), node(1, tmp_path)
    for one, other in ((a, b), (b, a)):
        config = one.containerd_config()
        assert str(one.containerd_socket) in config
        assert str(other.home) not in config
        assert f'cdi_spec_dirs = ["{one.cdi_dir}"]' in config
        assert "restrict_oom_score_adj = true" in config
        assert f'sandbox = "{realnode.SANDBOX_IMAGE}"' in config
    assert a.cni_config()["plugins"][0]["bridge"] != b.cni_config()["plugins"][0]["bridge"]
    assert a.cgroup_parent != b.cgroup_parent
    kubelet = a.kubelet_config(controlplane.feature_gates())
    assert (kubelet["failCgroupV1"], kubelet["cgroupDriver"], kubelet["failSwapOn"]) == (
        False,
        "cgroupfs",
        False,
    )
    assert kubelet["authorization"] == {"mode": "AlwaysAllow"}
    assert kubelet["containerRuntimeEndpoint"] == f"unix://{a.containerd_socket}"
    assert kubelet["podLogsDir"].startswith(str(a.home))


def test_host_state_restores_sysctls_and_removes_only_what_was_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    existed, created = tmp_path / "existed", tmp_path / "created"
    existed.mkdir()
    monkeypatch.setattr(realnode, "FIXED_PATHS", (created, existed))
    monkeypatch.setattr(realnode, "SYSCTLS", ())
    state = realnode.HostState.record()
    assert state.absent == [created]
    created.mkdir()
    (existed / "kept").write_text("x")
    assert state.restore() == []
    assert not created.exists()
    assert (existed / "kept").exists()


def test_kubelets_default_to_the_control_planes_release(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(realnode.NODE_VERSION_ENV, raising=False)
    assert realnode.node_versions(2, "v1.37.2") == ["v1.37.2", "v1.37.2"]


def test_kubelets_one_minor_behind_as_the_skew_policy_allows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(realnode.NODE_VERSION_ENV, "v1.36.3, v1.37.2")
    assert realnode.node_versions(3, "v1.37.2") == ["v1.36.3", "v1.37.2", "v1.37.2"]
    assert realnode.node_versions(2, "v1.37.2", given=["v1.36.3"]) == ["v1.36.3", "v1.36.3"]


@pytest.mark.parametrize(
    ("kubelet", "server", "words"),
    [
        ("v1.37.2", "v1.36.3", "a v1.37.2 kubelet with a v1.36.3 kube-apiserver"),
        ("v1.35.0", "v1.37.2", "v1.35.0 is not a supported Kubernetes version"),
    ],
)
def test_kubelets_the_skew_policy_or_the_build_refuse(
    kubelet: str, server: str, words: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(realnode.NODE_VERSION_ENV, kubelet)
    with pytest.raises(realnode.RealNodeError, match=words) as refused:
        realnode.node_versions(1, server)
    assert realnode.NODE_VERSION_ENV in str(refused.value)


def test_each_kubelet_gets_its_own_releases_gates(tmp_path: Path) -> None:
    """A 1.36 kubelet refuses a gate name only 1.37 knows: each gets its release's."""
    old = dataclasses.replace(node(0, tmp_path), version="v1.36.3")
    new = dataclasses.replace(node(1, tmp_path), version="v1.37.2")
    (tmp_path / "kubeconfig").write_text("{}")
    for n in (old, new):
        n.write_config(tmp_path / "kubeconfig")
    gates = [json.loads((n.home / "kubelet.json").read_text())["featureGates"] for n in (old, new)]
    assert "DRAFractionalCapacityRange" not in gates[0]
    assert gates[1]["DRAFractionalCapacityRange"] is True
    assert gates[0] == controlplane.feature_gates("v1.36.3")
