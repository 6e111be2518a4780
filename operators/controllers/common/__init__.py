"""Plumbing shared by the kopf operators: work queue, operator runner, dependencies."""
