"""Certificates made with the openssl CLI: the local control plane's PKI and webhook serving
certificates for local runs (in a cluster they come from a Secret, e.g. cert-manager's)."""

from __future__ import annotations

import ipaddress
import subprocess
from pathlib import Path


class CertificateError(RuntimeError):
    """openssl is missing or failed."""


def openssl(*args: str, cwd: Path) -> None:
    try:
        proc = subprocess.run(
            ["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        raise CertificateError("openssl is not installed") from None
    if proc.returncode != 0:
        raise CertificateError(f"openssl {' '.join(args[:2])} failed: {proc.stderr[-2000:]}")


def subject_alt_names(hosts: list[str]) -> str:
    """``IP:`` for addresses, ``DNS:`` for names, as x509v3 subjectAltName wants them."""
    entries = []
    for host in hosts:
        try:
            ipaddress.ip_address(host)
            entries.append(f"IP:{host}")
        except ValueError:
            entries.append(f"DNS:{host}")
    return ",".join(entries)


def self_signed(directory: Path, hosts: list[str], name: str = "tls") -> tuple[Path, Path]:
    """A self-signed serving certificate for ``hosts`` (it is its own CA bundle): cert, key."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "365",
        "-subj",
        f"/CN={hosts[0]}",
        "-addext",
        f"subjectAltName={subject_alt_names(hosts)}",
        "-keyout",
        key.name,
        "-out",
        cert.name,
        cwd=directory,
    )
    return cert, key
