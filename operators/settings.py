"""Settings from flags and environment with the same names.

A field ``binding_timeout`` of a settings class is the flag ``--binding-timeout`` and the
environment variable ``KOPF_DRA_BINDING_TIMEOUT``; a flag beats the environment, which beats the
default. Each component has its ``<Area>Settings`` subclass; the docs' configuration reference is
generated from these classes.
"""

from __future__ import annotations

import argparse
import os
import types
import typing
from collections.abc import Mapping
from typing import Any, Self, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError

ENV_PREFIX = "KOPF_DRA_"


class SettingsError(ValueError):
    """A flag or environment variable has a value its setting cannot take."""


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def env_name(field: str) -> str:
    return ENV_PREFIX + field.upper()


def _is_bool(annotation: Any) -> bool:
    if annotation is bool:
        return True
    if get_origin(annotation) in (typing.Union, types.UnionType):
        return bool in get_args(annotation)
    return False


def _is_list(annotation: Any) -> bool:
    return get_origin(annotation) in (list, tuple)


class Settings(BaseModel):
    """Common settings of every component."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kubeconfig: str | None = Field(
        default=None, description="Path of a kubeconfig; default: $KUBECONFIG, in-cluster, ~/.kube"
    )
    log_level: str = Field(default="INFO", description="DEBUG, INFO, WARNING or ERROR")
    log_json: bool | None = Field(
        default=None, description="JSON logs (default: when stderr is not a terminal)"
    )
    metrics_port: int = Field(default=0, description="Port of /metrics (0: off)")

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        for name, info in cls.model_fields.items():
            help_text = f"{info.description or ''} [env {env_name(name)}]".strip()
            if _is_bool(info.annotation):
                parser.add_argument(
                    flag_name(name),
                    dest=name,
                    default=None,
                    action=argparse.BooleanOptionalAction,
                    help=help_text,
                )
            elif _is_list(info.annotation):
                parser.add_argument(
                    flag_name(name), dest=name, default=None, action="append", help=help_text
                )
            else:
                parser.add_argument(flag_name(name), dest=name, default=None, help=help_text)

    @classmethod
    def load(
        cls, args: argparse.Namespace | None = None, environ: Mapping[str, str] | None = None
    ) -> Self:
        """Flags beat environment variables, which beat defaults."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name, info in cls.model_fields.items():
            flag_value = getattr(args, name, None) if args is not None else None
            if flag_value is not None:
                values[name] = flag_value
            elif env_name(name) in environ:
                raw = environ[env_name(name)]
                values[name] = raw.split(",") if _is_list(info.annotation) else raw
        try:
            return cls.model_validate(values)
        except ValidationError as e:
            problems = "; ".join(
                f"{flag_name(str(err['loc'][0]))} / {env_name(str(err['loc'][0]))}: {err['msg']}"
                for err in e.errors()
            )
            raise SettingsError(f"{cls.__name__}: {problems}") from None
