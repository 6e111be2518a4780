"""Wiring of the pool-validator controller (``kopf-dra run pool-validator``); nothing runs at
import time."""

from __future__ import annotations

from operators.controllers.pool_validator.handlers import COMPONENT, PoolValidatorController
from operators.controllers.pool_validator.settings import PoolValidatorSettings
from operators.runtime.app import OperatorApp

APP = OperatorApp(COMPONENT, PoolValidatorSettings, PoolValidatorController)
