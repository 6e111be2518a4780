"""The claim-template operator: ``kopf-dra run claim-templates``, or with kopf's own CLI
``kopf run -m operators.controllers.claim_templates.app`` (settings from the environment)."""

from __future__ import annotations

import argparse

import kopf

from operators.controllers.claim_templates.handlers import COMPONENT, ClaimTemplateController
from operators.controllers.claim_templates.settings import ClaimTemplateSettings
from operators.controllers.common.runner import main_for, register_login
from operators.settings import Settings


def build_registry(settings: Settings) -> kopf.OperatorRegistry:
    """The operator's own registry (CONVENTIONS.md #6), with a fresh controller behind it."""
    assert isinstance(settings, ClaimTemplateSettings)
    registry = kopf.OperatorRegistry()
    register_login(registry, settings.kubeconfig)
    ClaimTemplateController(settings).register(registry)
    return registry


def add_arguments(parser: argparse.ArgumentParser) -> None:
    ClaimTemplateSettings.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return main_for(COMPONENT, build_registry, ClaimTemplateSettings.load(args))


# `kopf run -m` runs kopf's default registry: point it at this operator's.
kopf.set_default_registry(build_registry(ClaimTemplateSettings.load()))
