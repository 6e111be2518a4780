"""Wiring of the fabric controller (``kopf-dra run fabric``); nothing runs at import."""

from __future__ import annotations

from operators.controllers.fabric.handlers import COMPONENT, FabricController
from operators.controllers.fabric.settings import FabricSettings
from operators.runtime.app import OperatorApp

APP = OperatorApp(COMPONENT, FabricSettings, FabricController)
