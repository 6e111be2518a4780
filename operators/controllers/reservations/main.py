"""Imported by ``kopf run -m operators.controllers.reservations.main``: installs the reservations
controller in kopf's default registry, its settings from the environment (``KOPF_DRA_*``)."""

from __future__ import annotations

from operators.controllers.reservations.app import APP

APP.install_as_kopf_default()
