"""Imported by ``kopf run -m operators.controllers.fabric.main``: installs the fabric
controller in kopf's default registry, its settings from the environment (``KOPF_DRA_*``)."""

from __future__ import annotations

from operators.controllers.fabric.app import APP

APP.install_as_kopf_default()
