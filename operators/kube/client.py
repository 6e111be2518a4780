"""The kubernetes-asyncio client factory: explicit kubeconfig, KUBECONFIG, or in-cluster."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

import yaml
from kubernetes_asyncio import client, config
from kubernetes_asyncio.config.config_exception import ConfigException

from operators.kube.api import ApiTimeouts, KubeAPI
from operators.kube.http import Transport
from operators.settings import Settings


class ClientConfigError(RuntimeError):
    """No usable cluster configuration was found."""


class ApiClient(client.ApiClient):
    """kubernetes-asyncio's client, carrying kopf-dra's transport for plain requests
    (``kube.http``; None behind a proxy, which aiohttp's session handles), closed with it."""

    transport: Transport | None = None

    async def close(self) -> None:
        if self.transport is not None:
            await self.transport.close()
        await super().close()


def ssl_context(configuration: client.Configuration) -> ssl.SSLContext:
    """The TLS settings kubernetes-asyncio's own session uses for ``configuration``."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if configuration.disable_strict_ssl_verification:
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return context


async def make_configuration(
    kubeconfig: str | Path | None = None, *, context: str | None = None
) -> client.Configuration:
    """Load a client configuration, in the order a user expects from kubectl.

    An explicit path wins, then $KUBECONFIG, then the in-cluster service account, then
    ~/.kube/config. ``context``: that context of the kubeconfig instead of its current one
    (kubectl's ``--context``; a pod's service account has none).
    """
    configuration = client.Configuration()
    path = str(kubeconfig) if kubeconfig else os.environ.get("KUBECONFIG")
    if path:
        first = path.split(os.pathsep)[0]
        await _load_kubeconfig(first, configuration, context)
        return configuration
    if context is None:
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            return configuration
        except ConfigException:
            pass
    default = Path.home() / ".kube" / "config"
    if default.exists():
        await _load_kubeconfig(str(default), configuration, context)
        return configuration
    if context is not None:
        raise ClientConfigError(f"context {context}: no kubeconfig to find it in")
    raise ClientConfigError(
        "no cluster configuration: pass --kubeconfig, set KUBECONFIG, or run in a pod"
    )


def _check_readable(path: str) -> None:
    if not os.path.isfile(path):
        raise ClientConfigError(f"kubeconfig {path}: no such file")
    if not os.access(path, os.R_OK):
        raise ClientConfigError(f"kubeconfig {path}: not readable")


async def _load_kubeconfig(
    path: str, configuration: client.Configuration, context: str | None = None
) -> None:
    """Load ``path`` or say what is wrong with it, naming it: retrying cannot fix a file."""
    _check_readable(path)
    try:
        await config.load_kube_config(
            config_file=path, context=context, client_configuration=configuration
        )
    except (ConfigException, yaml.YAMLError, ValueError, TypeError, KeyError, AttributeError) as e:
        reason = " ".join(str(e).split())  # YAML errors span lines
        raise ClientConfigError(f"kubeconfig {path}: {reason}") from None


PROXY_VARIABLES = ("https_proxy", "http_proxy", "all_proxy", "no_proxy")


def proxy_from_env() -> bool:
    """Whether proxy variables are set, so that requests must consult the environment."""
    return any(os.environ.get(v) or os.environ.get(v.upper()) for v in PROXY_VARIABLES)


async def make_api_client(
    kubeconfig: str | Path | None = None, *, context: str | None = None
) -> client.ApiClient:
    """An ApiClient the caller must close (``async with`` or ``await c.close()``), with
    kopf-dra's transport for plain requests unless a proxy is configured.

    kubernetes-asyncio's session trusts the environment, which costs two thread-pool round
    trips per request (~/.netrc and proxy lookup), a visible share of a busy scheduler's time
    (bench/README.md). We trust it only when proxy variables are set, as kopf's own session
    (``trust_env``) does too.
    """
    configuration = await make_configuration(kubeconfig, context=context)
    api_client = ApiClient(configuration=configuration)
    session = api_client.rest_client.pool_manager
    proxied = proxy_from_env()
    session._trust_env = proxied  # no public setter; read back as ``trust_env``
    if not proxied and not configuration.proxy:
        api_client.transport = Transport(
            str(configuration.host),
            ssl_context(configuration),
            server_hostname=configuration.tls_server_name,
        )
    return api_client


async def make_api(settings: Settings) -> KubeAPI:
    """API access with the settings' timeouts, reading each kind where the settings' cluster
    release serves it; the caller closes ``api.api_client``."""
    api_client = await make_api_client(settings.kubeconfig)
    return KubeAPI(
        api_client,
        ApiTimeouts(settings.api_connect_timeout, settings.api_timeout),
        release=settings.version().release,
    )


def connection_fields(configuration: client.Configuration) -> dict[str, object]:
    """The fields of a kopf ConnectionInfo for the same endpoint and credentials.

    kopf logs in by itself; handing it what kubernetes-asyncio loaded keeps one source of truth
    for "which cluster, as whom" (kubeconfig with client certificates or tokens).
    """
    fields: dict[str, object] = {"server": configuration.host, "trust_env": proxy_from_env()}
    if configuration.ssl_ca_cert:
        fields["ca_path"] = configuration.ssl_ca_cert
    if not configuration.verify_ssl:
        fields["insecure"] = True
    if configuration.cert_file:
        fields["certificate_path"] = configuration.cert_file
    if configuration.key_file:
        fields["private_key_path"] = configuration.key_file
    token = (configuration.api_key or {}).get("BearerToken") or (configuration.api_key or {}).get(
        "authorization"
    )
    if token:
        scheme, _, value = str(token).partition(" ")
        fields["scheme"], fields["token"] = (scheme, value) if value else ("Bearer", scheme)
    return fields
