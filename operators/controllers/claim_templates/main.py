"""Imported by ``kopf run -m operators.controllers.claim_templates.main``: installs the
claim-templates controller in kopf's default registry, its settings from the environment
(``KOPF_DRA_*``)."""

from __future__ import annotations

from operators.controllers.claim_templates.app import APP

APP.install_as_kopf_default()
