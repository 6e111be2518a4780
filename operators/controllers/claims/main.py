"""Imported by ``kopf run -m operators.controllers.claims.main``: installs both claim controllers
in kopf's default registry, their settings from the environment (``KOPF_DRA_*``)."""

from __future__ import annotations

from operators.controllers.claims.app import APP

APP.install_as_kopf_default()
