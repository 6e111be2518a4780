"""The reservation-cleanup operator: ``kopf-dra run reservations``, or with kopf's own CLI
``kopf run -m operators.controllers.reservations.app`` (settings from the environment)."""

from __future__ import annotations

import argparse

import kopf

from operators.controllers.common.runner import main_for, register_login
from operators.controllers.reservations.handlers import COMPONENT, ReservationController
from operators.controllers.reservations.settings import ReservationSettings
from operators.settings import Settings


def build_registry(settings: Settings) -> kopf.OperatorRegistry:
    assert isinstance(settings, ReservationSettings)
    registry = kopf.OperatorRegistry()
    register_login(registry, settings.kubeconfig)
    ReservationController(settings).register(registry)
    return registry


def add_arguments(parser: argparse.ArgumentParser) -> None:
    ReservationSettings.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return main_for(COMPONENT, build_registry, ReservationSettings.load(args))


# `kopf run -m` runs kopf's default registry: point it at this operator's.
kopf.set_default_registry(build_registry(ReservationSettings.load()))
