"""The table of kopf-dra's components: what ``kopf-dra run <name>`` starts.

Its own module, imported by the CLI, the demo, the docs generator and the tests, so that none
of them has to import another's module (or any component) to learn the names.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
from typing import Final, Protocol

from operators.settings import Settings


class Runnable(Protocol):
    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def _attribute(spec: str) -> object:
    module, _, name = spec.partition(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, name) if name else loaded


@dataclasses.dataclass(frozen=True)
class Component:
    name: str
    app: str  # "module:attribute" of a Runnable ("module" alone: the module is one)
    settings: str  # "module:Class" of its settings (flags, environment, the docs' reference)
    controller: bool = True  # a kopf operator built on operators.runtime
    summary: str = ""  # one line for ``kopf-dra run --help``

    def runnable(self) -> Runnable:
        found: Runnable = _attribute(self.app)  # type: ignore[assignment]
        return found

    def settings_class(self) -> type[Settings]:
        """The settings class, without importing the component's operator."""
        cls: type[Settings] = _attribute(self.settings)  # type: ignore[assignment]
        return cls

    @property
    def module(self) -> str:
        return self.app.partition(":")[0]


def _controller(name: str, settings_class: str, summary: str) -> Component:
    package = f"operators.controllers.{name.replace('-', '_')}"
    return Component(
        name, f"{package}.app:APP", f"{package}.settings:{settings_class}", summary=summary
    )


COMPONENTS: Final[dict[str, Component]] = {
    c.name: c
    for c in (
        _controller(
            "claim-templates",
            "ClaimTemplateSettings",
            "a pod's ResourceClaims from its ResourceClaimTemplates (KEP-4381)",
        ),
        _controller(
            "reservations",
            "ReservationSettings",
            "removes reservations of finished pods, deallocates, deletes generated claims",
        ),
        _controller(
            "claims",
            "ClaimsSettings",
            "claim-templates and reservations in one process, one pod and one claim watch",
        ),
        _controller(
            "pool-validator",
            "PoolValidatorSettings",
            "checks pools and shared counters; ResourcePoolStatus and the slice webhook",
        ),
        _controller(
            "scheduler",
            "SchedulerSettings",
            "allocates claims with the structured-parameters allocator and binds pods",
        ),
        _controller(
            "fabric",
            "FabricSettings",
            "attaches composable fabric devices and sets their binding conditions",
        ),
        Component(
            "driver",
            "operators.driver.app",
            "operators.driver.settings:DriverSettings",
            False,
            "the example DRA driver on one node: slices, kubelet plugin, CDI",
        ),
        Component(
            "fabric-manager-sim",
            "operators.fabric.app",
            "operators.fabric.app:FabricSimSettings",
            False,
            "a simulated fabric manager for the fabric controller (demo and tests)",
        ),
    )
}
