"""Wiring of the claim-templates controller (``kopf-dra run claim-templates``); nothing runs at
import time."""

from __future__ import annotations

from operators.controllers.claim_templates.handlers import COMPONENT, ClaimTemplateController
from operators.controllers.claim_templates.settings import ClaimTemplateSettings
from operators.runtime.app import OperatorApp

APP = OperatorApp(COMPONENT, ClaimTemplateSettings, ClaimTemplateController)
