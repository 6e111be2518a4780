"""The webhook: where its certificate comes from (a clear error when missing), its answers."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import kopf
import pytest

from operators.controllers.pool_validator.handlers import PoolValidatorController, webhook_server
from operators.controllers.pool_validator.settings import PoolValidatorSettings
from operators.kube.certs import self_signed, subject_alt_names
from tests.unit.pool_validator import builders
from tests.unit.pool_validator.builders import slice_


def test_subject_alt_names_tell_addresses_from_names() -> None:
    assert subject_alt_names(["127.0.0.1", "svc.ns.svc", "::1"]) == (
        "IP:127.0.0.1,DNS:svc.ns.svc,IP:::1"
    )


def test_a_mounted_secret_serves_with_its_own_ca(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path, ["kopf-dra-pool-validator-webhook.kopf-dra.svc"])
    cert.rename(tmp_path / "tls.crt")
    key.rename(tmp_path / "tls.key")
    (tmp_path / "ca.crt").write_text((tmp_path / "tls.crt").read_text())
    server = webhook_server(PoolValidatorSettings(webhook=True, webhook_cert_dir=str(tmp_path)))
    assert (server.certfile, server.pkeyfile) == (
        str(tmp_path / "tls.crt"),
        str(tmp_path / "tls.key"),
    )
    assert server.cafile == str(tmp_path / "ca.crt")


def test_a_missing_secret_is_a_clear_startup_error(tmp_path: Path) -> None:
    with pytest.raises(kopf.PermanentError, match=r"no tls\.crt and tls\.key in"):
        webhook_server(PoolValidatorSettings(webhook=True, webhook_cert_dir=str(tmp_path)))


def test_local_runs_get_a_self_signed_certificate_for_the_host() -> None:
    server = webhook_server(PoolValidatorSettings(webhook=True, webhook_host="127.0.0.1"))
    assert server.certfile is not None
    assert server.cafile == server.certfile
    context = ssl.create_default_context(cafile=str(server.cafile))
    context.load_cert_chain(str(server.certfile), str(server.pkeyfile))
    assert (server.host, server.port) == ("127.0.0.1", 9443)


def _slice(name: str, device: str) -> dict[str, Any]:
    return slice_(name, builders.device(device), count=2).dump()


def test_admission_answers_name_the_slice_pool_and_problem() -> None:
    controller = PoolValidatorController(PoolValidatorSettings(webhook=True))
    stored = _slice("a", "gpu-0")
    controller.indices.add("slices_by_pool", {("gpu.example.com", "node-1"): [stored]})
    controller.admit(_slice("b", "gpu-1"))  # nothing wrong: no exception
    with pytest.raises(kopf.AdmissionError) as refused:
        controller.admit(_slice("b", "gpu-0"))
    assert str(refused.value) == (
        "ResourceSlice b: pool gpu.example.com/node-1 generation 1 would get "
        "DuplicateDeviceName: duplicate device name gpu-0 (device gpu-0)"
    )
    assert refused.value.code == 422
    controller.admit({**_slice("c", "gpu-0"), "spec": {"devices": "not a list"}})  # API's job
