"""What a test needs from the machine, and the one rule for when it is not there.

A missing program skips the test, naming the program: on a developer's machine it may be
optional. Under ``CI=true`` it fails instead: CI installs everything, so a skip there would
hide a check that silently stopped running.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NoReturn

import pytest

from operators.localcluster import controlplane


def under_ci() -> bool:
    """``CI=true`` (any case), as CI services set it."""
    return os.environ.get("CI", "").lower() == "true"


def unavailable(message: str) -> NoReturn:
    """Skip with ``message`` (what the machine lacks); under ``CI=true`` fail with it."""
    if under_ci():
        pytest.fail(message + " (CI=true: a missing prerequisite is a failure)")
    pytest.skip(message)


def require_program(name: str, purpose: str) -> str:
    """The path of ``name`` on PATH; without it, ``unavailable`` naming it and its ``purpose``."""
    path = shutil.which(name)
    if path is None:
        unavailable(f"{name} is not on PATH ({purpose})")
    return path


def require_control_plane() -> Path:
    """The local control plane's bin directory (kube-apiserver, etcd), built unless cached.

    Building needs go; a cached build (``make control-plane`` ran once) does not. openssl
    makes its certificates either way.
    """
    require_program("openssl", "makes the local control plane's certificates")
    cached = controlplane.cache_root() / controlplane.kubernetes_version() / "bin"
    if not all(os.access(cached / b, os.X_OK) for b in ("kube-apiserver", "etcd")):
        require_program("go", "builds the local control plane's kube-apiserver and etcd")
    return controlplane.ensure_binaries()
