"""The scheduler: ``kopf-dra run scheduler``, or with kopf's own CLI
``kopf run -m operators.controllers.scheduler.app`` (settings from the environment)."""

from __future__ import annotations

import argparse

import kopf

from operators.controllers.common.runner import main_for, register_login
from operators.controllers.scheduler.handlers import COMPONENT, Scheduler
from operators.controllers.scheduler.settings import SchedulerSettings
from operators.settings import Settings


def build_registry(settings: Settings) -> kopf.OperatorRegistry:
    assert isinstance(settings, SchedulerSettings)
    registry = kopf.OperatorRegistry()
    register_login(registry, settings.kubeconfig)
    Scheduler(settings).register(registry)
    return registry


def add_arguments(parser: argparse.ArgumentParser) -> None:
    SchedulerSettings.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return main_for(COMPONENT, build_registry, SchedulerSettings.load(args))


# `kopf run -m` runs kopf's default registry: point it at this operator's.
kopf.set_default_registry(build_registry(SchedulerSettings.load()))
