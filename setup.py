"""The wheel carries manifests/, crds/ and hack/{controlplane,node,cluster}/ as
operators/_share/ (see operators/localcluster/files.py): everything else is in pyproject.toml."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SHARED = ("manifests", "crds", "hack/controlplane", "hack/node", "hack/cluster")


class BuildWithShare(build_py):
    def run(self) -> None:
        super().run()
        root = Path(__file__).resolve().parent
        for name in SHARED:
            target = Path(self.build_lib) / "operators" / "_share" / name
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(root / name, target, ignore=shutil.ignore_patterns("__pycache__"))


setup(cmdclass={"build_py": BuildWithShare})
