"""Which cluster, as whom, in which namespace, as kubectl chooses them.

The kubeconfig is ``--kubeconfig``, else the first file of ``$KUBECONFIG``, else
``~/.kube/config``, else the pod's service account; the context is ``--context``, else the
file's current one; the namespace is ``-n``, else the context's, else the service account's,
else ``default``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from kubernetes_asyncio.config.config_exception import ConfigException

from operators.kube.api import ApiError, ApiTimeouts, KubeAPI, NotFoundError
from operators.kube.client import ClientConfigError, make_api_client
from operators.simulate.cluster import is_forbidden

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
UNAUTHORIZED = 401


class UsageError(Exception):
    """What the user asked cannot be answered as asked: an unknown pod (exit code 2)."""


class Unreachable(Exception):
    """No answer from the cluster: no usable kubeconfig, no connection, credentials refused,
    or a read the answer cannot do without forbidden (exit code 3)."""


@dataclasses.dataclass(frozen=True)
class Target:
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None


def kubeconfig_path(explicit: str | None) -> Path | None:
    """The kubeconfig file kubectl would read first (None: in a pod, the service account)."""
    if explicit:
        return Path(explicit)
    listed = os.environ.get("KUBECONFIG")
    if listed:
        return Path(listed.split(os.pathsep)[0])
    default = Path.home() / ".kube" / "config"
    return default if default.exists() else None


def kubeconfig(target: Target) -> dict[str, Any]:
    """The kubeconfig's contents ({} where there is none or it cannot be read)."""
    path = kubeconfig_path(target.kubeconfig)
    try:
        loaded = yaml.safe_load(path.read_text()) if path is not None else None
    except (OSError, yaml.YAMLError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def context_names(target: Target) -> list[str]:
    return sorted(str(c.get("name")) for c in kubeconfig(target).get("contexts") or [])


def default_namespace(target: Target) -> str:
    if target.namespace:
        return target.namespace
    loaded = kubeconfig(target)
    if loaded:
        name = target.context or loaded.get("current-context")
        for entry in loaded.get("contexts") or []:
            if entry.get("name") == name:
                return str((entry.get("context") or {}).get("namespace") or "default")
        return "default"
    with contextlib.suppress(OSError):
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
    return "default"


@contextlib.asynccontextmanager
async def connected(target: Target, timeouts: ApiTimeouts | None = None) -> AsyncIterator[KubeAPI]:
    """The API of the target; any failure to reach or be heard by it is ``Unreachable``."""
    try:
        api_client = await make_api_client(target.kubeconfig, context=target.context)
    except (ClientConfigError, ConfigException, OSError, ValueError) as e:
        raise Unreachable(f"no usable cluster configuration: {e}") from None
    async with api_client:
        try:
            yield KubeAPI(api_client, timeouts or ApiTimeouts(connect=5.0, total=30.0))
        except (OSError, TimeoutError, aiohttp.ClientError) as e:
            server = api_client.configuration.host
            raise Unreachable(f"cannot reach the API server at {server}: {e}") from None
        except ApiError as e:
            if e.status == UNAUTHORIZED:
                raise Unreachable(
                    f"the API server at {api_client.configuration.host} did not accept the "
                    f"credentials (401 {e.reason}): log in again or choose another context"
                ) from None
            raise Unreachable(f"the API server answered {e}") from None


async def get_pod(api: KubeAPI, namespace: str, name: str) -> dict[str, Any]:
    """The pod; an unknown pod is a ``UsageError``, a refused read ``Unreachable``."""
    try:
        return await api.get("Pod", name, namespace)
    except NotFoundError:
        raise UsageError(f'pod "{name}" not found in namespace "{namespace}"') from None
    except ApiError as e:
        if not is_forbidden(e):
            raise
        raise Unreachable(
            f'forbidden: cannot get pods in namespace "{namespace}": {e.message}'
        ) from None
