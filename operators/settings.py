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

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from operators.api.features import (
    DEFAULT_VERSION,
    FeatureGateError,
    KubernetesVersion,
    Release,
    check_names,
    gates_of,
    parse_feature_gates,
    resolve,
)

ENV_PREFIX = "KOPF_DRA_"
# kube-controller-manager's resourceclaim controller syncs 50 objects at once by default
# (ConcurrentSyncs): fewer serialise the claim writes, and each then costs etcd a wake-up of its
# own (measured: etcd's CPU 2.2 -> 1.5 s on the default benchmark going from 4 to 50).
CLAIM_CONTROLLER_WORKERS = 50


def _text(release: Release | None) -> str | None:
    return str(release) if release is not None else None


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


def bind_address(value: str) -> tuple[str, int] | None:
    """``host:port`` or ``:port`` (every interface) as (host, port); empty or ``0`` is off."""
    if value in ("", "0"):
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{value!r} is not host:port or :port")
    return (host.strip("[]") or "0.0.0.0"), int(port)


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
    metrics_bind_address: str = Field(
        default="",
        description="host:port (or :port, every interface) of /metrics, /healthz and /readyz; "
        "empty: off",
    )
    metrics_secure: bool = Field(
        default=False,
        description="HTTPS, and /metrics only for bearer tokens the API server authenticates and "
        "authorizes (get on the path), as kube-scheduler serves it",
    )
    metrics_cert_dir: str | None = Field(
        default=None,
        description="Directory with tls.crt and tls.key for --metrics-secure (default: a "
        "self-signed certificate made at start, needs openssl)",
    )
    stuck_reconcile_after: float = Field(
        default=300.0,
        gt=0,
        description="Seconds one reconcile may run before /healthz fails (a wedged worker)",
    )
    feature_gates: dict[str, bool] = Field(
        default_factory=dict,
        description="Kubernetes' feature gates, Name=true|false,...: the cluster's own, as its "
        "kube-scheduler has them (defaults: those of the cluster's version)",
    )
    kubernetes_version: str | None = Field(
        default=None,
        description="The cluster's Kubernetes release (1.36 or 1.37), whose gates and API "
        "kopf-dra follows; default: the API server's /version, read at start",
    )
    emulated_version: str | None = Field(
        default=None,
        description="The version the cluster emulates (component-base's --emulated-version); "
        "default: the API server's, else --kubernetes-version",
    )
    version_check_interval: float = Field(
        default=30.0,
        ge=0,
        description="Seconds between reads of the API server's /version: when it reports another "
        "version than the one followed (a control plane upgrade), the component restarts in "
        "place with that version's defaults; 0: never (also when --kubernetes-version is given)",
    )
    min_compatibility_version: str | None = Field(
        default=None,
        description="The cluster's minimum compatibility version (component-base's "
        "--min-compatibility-version; some gates' defaults follow it); default: the API "
        "server's, else one minor below the emulated version",
    )
    api_timeout: float = Field(
        default=30.0, gt=0, description="Seconds any API request may take (watches excepted)"
    )
    api_connect_timeout: float = Field(
        default=5.0, gt=0, description="Seconds to connect to the API server"
    )

    @field_validator("metrics_bind_address")
    @classmethod
    def _bind_address(cls, value: str) -> str:
        bind_address(value)
        return value

    @field_validator("feature_gates", mode="before")
    @classmethod
    def _feature_gates(cls, value: Any) -> dict[str, bool]:
        return check_names(value)

    @model_validator(mode="after")
    def _version(self) -> Self:
        self.version()  # a version that is not one, or not supported, is refused at once
        if self.kubernetes_version is not None:
            try:
                self.gates()  # so are gates that version refuses
            except FeatureGateError as e:
                where = f"{flag_name('feature_gates')} / {env_name('feature_gates')}"
                raise ValueError(f"{where}: {e}") from None
        return self

    def version(self) -> KubernetesVersion:
        """The cluster's version: as the flags (or, for settings built in a process rather than
        loaded, $KOPF_DRA_KUBERNETES_VERSION, the local control plane's choice) name it, else
        the project's default until the API server has said (``runtime.app`` asks it)."""
        release = self.kubernetes_version or os.environ.get(env_name("kubernetes_version"))
        if not release:
            return DEFAULT_VERSION
        return KubernetesVersion.of(release, self.emulated_version, self.min_compatibility_version)

    def gates(self) -> dict[str, bool]:
        """Every gate's value at the cluster's version: the flag's, else that version's
        default. Raises FeatureGateError for a value that version's kube-scheduler refuses."""
        version = self.version()
        return resolve(parse_feature_gates(self.feature_gates, version), version)

    def gate(self, name: str) -> bool:
        assert name in gates_of(self.version()), name
        return self.gates()[name]

    def group_claims(self) -> bool:
        """1.37's PodGroup claims (DRAWorkloadResourceClaims, with GenericWorkload): on 1.36 the
        gates exist (alpha) but kopf-dra follows no PodGroup API there, so they count as off."""
        if self.version().release < Release(1, 37):
            return False
        return self.gate("GenericWorkload") and self.gate("DRAWorkloadResourceClaims")

    def with_version(self, version: KubernetesVersion) -> Self:
        """These settings at the cluster's version (as read from its /version), unless the
        flags named one."""
        if self.kubernetes_version is not None:
            return self
        return self.model_copy(
            update={
                "kubernetes_version": str(version.release),
                "emulated_version": self.emulated_version or _text(version.emulation),
                "min_compatibility_version": self.min_compatibility_version
                or _text(version.min_compatibility),
            }
        )

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
                f"{flag_name(str(err['loc'][0]))} / {env_name(str(err['loc'][0]))}: "
                + str(err["msg"]).removeprefix("Value error, ")
                if err["loc"]
                else str(err["msg"]).removeprefix("Value error, ")
                for err in e.errors()
            )
            raise SettingsError(f"{cls.__name__}: {problems}") from None


class LeaderElectionSettings(Settings):
    """Settings of a component that writes only while it holds a Lease (kube-scheduler's)."""

    leader_elect: bool = Field(
        default=True,
        description="Campaign for the Lease with other replicas; off means 'the single "
        "replica': it still takes the Lease before writing, and a second one waits",
    )
    lease_name: str = Field(default="kopf-dra", description="Name of the Lease")
    lease_namespace: str = Field(default="kube-system", description="Namespace of the Lease")
    lease_duration: float = Field(
        default=15.0, gt=0, description="Seconds a standby waits without renewal before taking over"
    )
    renew_deadline: float = Field(
        default=10.0,
        gt=0,
        description="Seconds the leader may go without a successful renewal before it stops "
        "writing (less than --lease-duration)",
    )
    retry_period: float = Field(
        default=2.0, gt=0, description="Seconds between renewals and between campaign rounds"
    )
    identity: str | None = Field(
        default=None, description="This replica's identity (default: hostname + random suffix)"
    )

    @model_validator(mode="after")
    def _timings(self) -> Self:
        if not self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "need --retry-period < --renew-deadline < --lease-duration, got "
                f"{self.retry_period:g} < {self.renew_deadline:g} < {self.lease_duration:g}"
            )
        return self
