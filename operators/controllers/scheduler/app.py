"""Wiring of the scheduler controller (``kopf-dra run scheduler``); nothing runs at import."""

from __future__ import annotations

from operators.controllers.scheduler.handlers import COMPONENT, Scheduler
from operators.controllers.scheduler.settings import SchedulerSettings
from operators.runtime.app import OperatorApp

APP = OperatorApp(COMPONENT, SchedulerSettings, Scheduler)
