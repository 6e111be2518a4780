"""The fabric controller: ``kopf-dra run fabric``, or with kopf's own CLI
``kopf run -m operators.controllers.fabric.app`` (settings from the environment)."""

from __future__ import annotations

import argparse

import kopf

from operators.controllers.common.runner import main_for, register_login
from operators.controllers.fabric.handlers import COMPONENT, FabricController
from operators.controllers.fabric.settings import FabricSettings
from operators.settings import Settings


def build_registry(settings: Settings) -> kopf.OperatorRegistry:
    assert isinstance(settings, FabricSettings)
    registry = kopf.OperatorRegistry()
    register_login(registry, settings.kubeconfig)
    FabricController(settings).register(registry)
    return registry


def add_arguments(parser: argparse.ArgumentParser) -> None:
    FabricSettings.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return main_for(COMPONENT, build_registry, FabricSettings.load(args))


# `kopf run -m` runs kopf's default registry: point it at this operator's.
kopf.set_default_registry(build_registry(FabricSettings.load()))
