"""Local state: CDI spec files, the checkpoint, settings and the CLI entry point."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from operators.driver import app
from operators.driver.cdi import CDIWriter, env_name, qualified_id
from operators.driver.checkpoint import Checkpoint, CheckpointError, PreparedClaim, PreparedDevice
from operators.driver.plugin import dra_socket, registration_socket
from operators.driver.settings import DriverSettings

DRIVER = "example.kopf-dra.io"


def test_cdi_specs_are_written_whole_and_removed(tmp_path: Path) -> None:
    writer = CDIWriter(tmp_path / "cdi", DRIVER)
    spec = {"cdiVersion": "0.5.0", "kind": f"{DRIVER}/claim", "devices": []}
    path = writer.write("uid-1", spec)
    assert path.name == f"{DRIVER}-claim_uid-1.json"
    assert json.loads(path.read_text()) == spec
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left
    assert writer.exists("uid-1")
    assert writer.remove("uid-1")
    assert not writer.remove("uid-1")
    assert qualified_id(DRIVER, "x") == f"{DRIVER}/claim=x"
    assert env_name("DEVICE", "gpu-0-mig-1g.5gb") == "KOPF_DRA_DEVICE_GPU_0_MIG_1G_5GB"


def test_checkpoint_survives_a_new_instance(tmp_path: Path) -> None:
    path = tmp_path / "state" / "checkpoint.json"
    checkpoint = Checkpoint(path)
    record = PreparedClaim(
        uid="u1",
        namespace="ns",
        name="c",
        devices=[PreparedDevice(pool="p", device="gpu-0", cdi_device_ids=["k=n"])],
        cdi_spec={"kind": "k"},
    )
    checkpoint.add(record)
    reread = Checkpoint(path)
    assert reread.get("u1") == record
    assert reread.remove("u1")
    assert not reread.remove("u1")
    assert Checkpoint(path).claims() == []


def test_corrupt_checkpoint_is_an_error_not_an_empty_state(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    path.write_text("{not json")
    with pytest.raises(CheckpointError, match="unreadable"):
        Checkpoint(path)
    path.write_text(json.dumps({"version": 99, "claims": {}}))
    with pytest.raises(CheckpointError, match="version 99"):
        Checkpoint(path)


def test_socket_paths_follow_the_kubelet_layout() -> None:
    assert registration_socket("/var/lib/kubelet", DRIVER) == Path(
        f"/var/lib/kubelet/plugins_registry/{DRIVER}-reg.sock"
    )
    assert dra_socket("/var/lib/kubelet", DRIVER) == Path(
        f"/var/lib/kubelet/plugins/{DRIVER}/dra.sock"
    )


def test_settings_from_flags_and_environment() -> None:
    parser = argparse.ArgumentParser()
    app.add_arguments(parser)
    args = parser.parse_args(["--node-name", "n1", "--resync-seconds", "2.5"])
    settings = DriverSettings.load(args, environ={"KOPF_DRA_KUBELET_DIR": "/tmp/k"})
    assert (settings.node_name, settings.resync_seconds, settings.kubelet_dir) == (
        "n1",
        2.5,
        "/tmp/k",
    )
    assert settings.driver_name == DRIVER


def test_run_refuses_without_node_name_or_with_a_bad_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    app.add_arguments(parser)
    assert app.run(parser.parse_args([])) == 2
    assert "--node-name" in capsys.readouterr().err
    bad = tmp_path / "p.yaml"
    bad.write_text("gpus: [{partitions: h100}]\n")
    assert app.run(parser.parse_args(["--node-name", "n", "--profiles", str(bad)])) == 2
    assert "unknown partition table" in capsys.readouterr().err
