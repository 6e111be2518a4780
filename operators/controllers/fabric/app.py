"""The fabric controller: ``kopf-dra run fabric``, or with kopf's own CLI
``kopf run -m operators.controllers.fabric.app`` (settings from the environment)."""

from __future__ import annotations

from operators.controllers.common.runner import OperatorApp
from operators.controllers.fabric.handlers import COMPONENT, FabricController
from operators.controllers.fabric.settings import FabricSettings

APP = OperatorApp(COMPONENT, FabricSettings, FabricController)
build_registry = APP.build_registry
add_arguments = APP.add_arguments
run = APP.run

APP.install_as_kopf_default()
