"""The claim-template operator: ``kopf-dra run claim-templates``, or with kopf's own CLI
``kopf run -m operators.controllers.claim_templates.app`` (settings from the environment)."""

from __future__ import annotations

from operators.controllers.claim_templates.handlers import COMPONENT, ClaimTemplateController
from operators.controllers.claim_templates.settings import ClaimTemplateSettings
from operators.controllers.common.runner import OperatorApp

APP = OperatorApp(COMPONENT, ClaimTemplateSettings, ClaimTemplateController)
build_registry = APP.build_registry
add_arguments = APP.add_arguments
run = APP.run

APP.install_as_kopf_default()
