"""The pool validator: ``kopf-dra run pool-validator``, or with kopf's own CLI
``kopf run -m operators.controllers.pool_validator.app`` (settings from the environment).

Needs the ResourcePoolStatus CRD (crds/resourcepoolstatuses.yaml) installed first.
"""

from __future__ import annotations

from operators.controllers.common.runner import OperatorApp
from operators.controllers.pool_validator.handlers import COMPONENT, PoolValidatorController
from operators.controllers.pool_validator.settings import PoolValidatorSettings

APP = OperatorApp(COMPONENT, PoolValidatorSettings, PoolValidatorController)
build_registry = APP.build_registry
add_arguments = APP.add_arguments
run = APP.run

APP.install_as_kopf_default()
