"""Settings: a flag beats the environment variable of the same name, which beats the default."""

from __future__ import annotations

import argparse

import pytest

from operators.settings import Settings, SettingsError, env_name, flag_name


class ExampleSettings(Settings):
    binding_timeout: float = 600.0
    scheduler_names: list[str] = ["kopf-dra"]
    all_pods: bool = False


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    ExampleSettings.add_arguments(parser)
    return parser.parse_args(argv)


def test_names_match_between_flag_and_environment() -> None:
    assert flag_name("binding_timeout") == "--binding-timeout"
    assert env_name("binding_timeout") == "KOPF_DRA_BINDING_TIMEOUT"


def test_defaults_apply_without_flags_or_environment() -> None:
    settings = ExampleSettings.load(parse([]), environ={})
    assert settings.binding_timeout == 600.0
    assert settings.scheduler_names == ["kopf-dra"]
    assert settings.all_pods is False


def test_environment_beats_default_and_flag_beats_environment() -> None:
    environ = {
        "KOPF_DRA_BINDING_TIMEOUT": "30",
        "KOPF_DRA_SCHEDULER_NAMES": "a,b",
        "KOPF_DRA_ALL_PODS": "true",
    }
    from_env = ExampleSettings.load(parse([]), environ=environ)
    assert (from_env.binding_timeout, from_env.scheduler_names, from_env.all_pods) == (
        30.0,
        ["a", "b"],
        True,
    )
    from_flags = ExampleSettings.load(
        parse(["--binding-timeout", "5", "--scheduler-names", "x", "--no-all-pods"]),
        environ=environ,
    )
    assert (from_flags.binding_timeout, from_flags.scheduler_names, from_flags.all_pods) == (
        5.0,
        ["x"],
        False,
    )


def test_bad_value_names_flag_and_variable() -> None:
    with pytest.raises(SettingsError, match="--binding-timeout / KOPF_DRA_BINDING_TIMEOUT"):
        ExampleSettings.load(parse([]), environ={"KOPF_DRA_BINDING_TIMEOUT": "soon"})


def test_unknown_settings_are_rejected() -> None:
    with pytest.raises(ValueError, match="extra"):
        ExampleSettings.model_validate({"bogus": 1})
