"""The reservation-cleanup operator: ``kopf-dra run reservations``, or with kopf's own CLI
``kopf run -m operators.controllers.reservations.app`` (settings from the environment)."""

from __future__ import annotations

from operators.controllers.common.runner import OperatorApp
from operators.controllers.reservations.handlers import COMPONENT, ReservationController
from operators.controllers.reservations.settings import ReservationSettings

APP = OperatorApp(COMPONENT, ReservationSettings, ReservationController)
build_registry = APP.build_registry
add_arguments = APP.add_arguments
run = APP.run

APP.install_as_kopf_default()
