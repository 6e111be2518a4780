"""Wiring of the ``claims`` component (``kopf-dra run claims``); nothing runs at import time."""

from __future__ import annotations

from operators.controllers.claims.handlers import COMPONENT, ClaimsController
from operators.controllers.claims.settings import ClaimsSettings
from operators.runtime.app import OperatorApp

APP = OperatorApp(COMPONENT, ClaimsSettings, ClaimsController)
