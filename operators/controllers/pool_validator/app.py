"""The pool validator: ``kopf-dra run pool-validator``, or with kopf's own CLI
``kopf run -m operators.controllers.pool_validator.app`` (settings from the environment).

Needs the ResourcePoolStatus CRD (crds/resourcepoolstatuses.yaml) installed first.
"""

from __future__ import annotations

import argparse

import kopf

from operators.controllers.common.runner import main_for, register_login
from operators.controllers.pool_validator.handlers import COMPONENT, PoolValidatorController
from operators.controllers.pool_validator.settings import PoolValidatorSettings
from operators.settings import Settings


def build_registry(settings: Settings) -> kopf.OperatorRegistry:
    assert isinstance(settings, PoolValidatorSettings)
    registry = kopf.OperatorRegistry()
    register_login(registry, settings.kubeconfig)
    PoolValidatorController(settings).register(registry)
    return registry


def add_arguments(parser: argparse.ArgumentParser) -> None:
    PoolValidatorSettings.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return main_for(COMPONENT, build_registry, PoolValidatorSettings.load(args))


# `kopf run -m` runs kopf's default registry: point it at this operator's.
kopf.set_default_registry(build_registry(PoolValidatorSettings.load()))
