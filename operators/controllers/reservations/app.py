"""Wiring of the reservations controller (``kopf-dra run reservations``); nothing runs at import."""

from __future__ import annotations

from operators.controllers.reservations.handlers import COMPONENT, ReservationController
from operators.controllers.reservations.settings import ReservationSettings
from operators.runtime.app import OperatorApp

APP = OperatorApp(COMPONENT, ReservationSettings, ReservationController)
