"""Where the project's non-Python files are: ``manifests/``, ``crds/``, ``hack/controlplane/``,
``hack/node/`` and ``hack/cluster/`` of a checkout, or the copy a wheel carries in
``operators/_share/`` (setup.py puts it there), so that ``kopf-dra demo``, ``control-plane up``
and ``cluster up`` work from ``pip install kopf-dra`` as from a clone."""

from __future__ import annotations

from pathlib import Path
from typing import Final

PACKAGE: Final = Path(__file__).resolve().parents[1]
CHECKOUT: Final = PACKAGE.parent


def project_root() -> Path:
    """The checkout when run from one, else the installed package's copy."""
    if (CHECKOUT / "hack" / "controlplane" / "build.sh").is_file():
        return CHECKOUT
    return PACKAGE / "_share"
