"""The scheduler: ``kopf-dra run scheduler``, or with kopf's own CLI
``kopf run -m operators.controllers.scheduler.app`` (settings from the environment)."""

from __future__ import annotations

from operators.controllers.common.runner import OperatorApp
from operators.controllers.scheduler.handlers import COMPONENT, Scheduler
from operators.controllers.scheduler.settings import SchedulerSettings

APP = OperatorApp(COMPONENT, SchedulerSettings, Scheduler)
build_registry = APP.build_registry
add_arguments = APP.add_arguments
run = APP.run

APP.install_as_kopf_default()
