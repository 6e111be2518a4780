"""Imported by ``kopf run -m operators.controllers.pool_validator.main``: installs the
pool-validator controller in kopf's default registry, its settings from the environment
(``KOPF_DRA_*``)."""

from __future__ import annotations

from operators.controllers.pool_validator.app import APP

APP.install_as_kopf_default()
