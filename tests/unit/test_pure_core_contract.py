"""import-linter's "pure core does no I/O" contract forbids modules by name, so a module missing
from its list may be imported by the pure core unnoticed. This test derives the modules that
must be there and fails naming those that are not.

The rule, true today: every module of a component's package (operators/components.py: the
package of its app) and of the runtime is I/O, reads the environment or the clock, or wires
those together, except

- each controller's ``planning`` (the pure core itself) and the runtime's ``actions`` (the
  writes planning returns) and ``claim_writes`` (the claim writes two controllers share);
- ``PURE_HELPERS``: data models and protocols that planning shares with its component, held to
  the pure core's rules by the same check of their imports as the pure core
  (test_architecture.py's).

Settings modules are I/O by this rule: they read flags and the environment. Every package under
operators/controllers must be a component: one that is not would escape the rule.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from operators.components import COMPONENTS

from .test_architecture import _clock_reads, _forbidden, _imports

ROOT = Path(__file__).resolve().parents[2]
PURE = {"operators.runtime.actions", "operators.runtime.claim_writes"}
PURE_HELPERS = {
    "operators.controllers.pool_validator.model",  # ResourcePoolStatus, planning's output
    "operators.fabric.model",  # the fabric manager's wire model, read by fabric planning
    "operators.fabric.manager",  # the FabricManager protocol
}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package(module: str) -> str:
    """The package a component's app belongs to (``operators.driver.app`` -> the driver)."""
    path = ROOT / Path(*module.split("."))
    return module if path.is_dir() else module.rpartition(".")[0]


def _io_modules() -> set[str]:
    packages = {_package(c.module) for c in COMPONENTS.values()} | {"operators.runtime"}
    found = set()
    for package in packages:
        for path in (ROOT / Path(*package.split("."))).rglob("*.py"):
            module = _module(path)
            if path.name == "__init__.py" or module.endswith(".planning"):
                continue
            if module not in PURE | PURE_HELPERS:
                found.add(module)
    return found


def _forbidden_list() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c["name"] == "The pure core does no I/O"
    ]
    return list(contract["forbidden_modules"])


def _covers(expression: str, module: str) -> bool:
    """import-linter's reading: ``*`` is one name, ``**`` any; a package covers its modules."""
    pattern = re.escape(expression).replace(r"\*\*", ".+").replace(r"\*", "[^.]+")
    return re.fullmatch(rf"{pattern}(\..+)?", module) is not None


def test_every_io_module_of_a_component_is_forbidden_to_the_pure_core() -> None:
    listed = _forbidden_list()
    missing = sorted(m for m in _io_modules() if not any(_covers(e, m) for e in listed))
    assert missing == [], f"add to forbidden_modules in pyproject.toml: {missing}"


def test_every_controller_package_is_a_component() -> None:
    components = {_package(c.module) for c in COMPONENTS.values() if c.controller}
    on_disk = {
        _module(p.parent) for p in (ROOT / "operators" / "controllers").glob("*/__init__.py")
    }
    assert on_disk - components == set(), "add it to operators/components.py"


@pytest.mark.parametrize("module", sorted(PURE_HELPERS))
def test_pure_helpers_import_no_io_or_clock(module: str) -> None:
    path = ROOT / Path(*module.split(".")).with_suffix(".py")
    assert not _forbidden(_imports(path)), f"{module} imports {_forbidden(_imports(path))}"
    assert not _clock_reads(path), f"{module} reads the clock"
    listed = _forbidden_list()
    assert not {i for i in _imports(path) if any(_covers(e, i) for e in listed)}


def test_the_pattern_reading() -> None:
    assert _covers("operators.driver", "operators.driver.slices")
    assert _covers("operators.controllers.*.handlers", "operators.controllers.claims.handlers")
    assert not _covers("operators.controllers.*.handlers", "operators.controllers.claims.app")
    assert not _covers("operators.fabric.app", "operators.fabric.application")
