"""Raw JSON access to the API server for the kinds kopf-dra uses.

Controllers work with plain dicts parsed into our models, never with kubernetes-asyncio's
generated classes (which drop unknown fields). This module is the one place that maps a kind to
its URL and an HTTP status to a typed error; retries and preconditions live in the callers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, Final
from urllib.parse import quote, urlencode

import aiohttp
import structlog
from kubernetes_asyncio import client
from pydantic_core import from_json, to_json

from operators.api.features import DEFAULT_RELEASE, Release
from operators.api.resource import api_version_of

# NotSentError is defined beside the transport that raises it; callers import it from here.
from operators.kube.http import NotSentError as NotSentError
from operators.kube.http import Transport


@dataclasses.dataclass(frozen=True)
class Resource:
    """Where a kind lives in the API."""

    group_version: str
    plural: str
    namespaced: bool
    kind: str

    def path(self, namespace: str | None = None, name: str | None = None, sub: str = "") -> str:
        base = "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"
        if self.namespaced:
            if namespace is None and name is not None:
                raise ValueError(f"{self.kind} {name}: a namespace is required")
            if namespace is not None:
                base += f"/namespaces/{quote(namespace, safe='')}"
        path = f"{base}/{self.plural}"
        if name is not None:
            path += f"/{quote(name, safe='')}"
        if sub:
            path += f"/{sub}"
        return path


RESOURCE_V1: Final = "resource.k8s.io/v1"
RESOURCES: Final[dict[str, Resource]] = {
    r.kind: r
    for r in (
        Resource(RESOURCE_V1, "deviceclasses", False, "DeviceClass"),
        Resource(RESOURCE_V1, "resourceslices", False, "ResourceSlice"),
        Resource(RESOURCE_V1, "resourceclaims", True, "ResourceClaim"),
        Resource(RESOURCE_V1, "resourceclaimtemplates", True, "ResourceClaimTemplate"),
        Resource("resource.k8s.io/v1beta2", "devicetaintrules", False, "DeviceTaintRule"),
        Resource(
            "resource.k8s.io/v1alpha3",
            "resourcepoolstatusrequests",
            False,
            "ResourcePoolStatusRequest",
        ),
        Resource("v1", "pods", True, "Pod"),
        Resource("v1", "nodes", False, "Node"),
        Resource("v1", "namespaces", False, "Namespace"),
        # What a namespace's device quota is (the claim controllers report its refusals).
        Resource("v1", "resourcequotas", True, "ResourceQuota"),
        # What kube-scheduler's volume plugins read (the scheduler's snapshot).
        Resource("v1", "persistentvolumeclaims", True, "PersistentVolumeClaim"),
        Resource("v1", "persistentvolumes", False, "PersistentVolume"),
        Resource("storage.k8s.io/v1", "storageclasses", False, "StorageClass"),
        Resource("storage.k8s.io/v1", "csinodes", False, "CSINode"),
        Resource("storage.k8s.io/v1", "csidrivers", False, "CSIDriver"),
        Resource("storage.k8s.io/v1", "csistoragecapacities", True, "CSIStorageCapacity"),
        Resource("v1", "events", True, "Event"),
        Resource("v1", "serviceaccounts", True, "ServiceAccount"),
        Resource("v1", "configmaps", True, "ConfigMap"),
        Resource("scheduling.k8s.io/v1", "priorityclasses", False, "PriorityClass"),
        # Served only with GenericWorkload on and scheduling.k8s.io/v1beta1 in the runtime
        # config (1.37; kopf-dra's local control plane serves both).
        Resource("scheduling.k8s.io/v1beta1", "podgroups", True, "PodGroup"),
        Resource("scheduling.k8s.io/v1beta1", "workloads", True, "Workload"),
        # CompositePodGroup on (1.37: v1alpha3 in the runtime config; 1.38: v1beta1).
        Resource("scheduling.k8s.io/v1beta1", "compositepodgroups", True, "CompositePodGroup"),
        Resource("policy/v1", "poddisruptionbudgets", True, "PodDisruptionBudget"),
        # What PodTopologySpread's system defaults select a pod's peers by (and Services,
        # below, which the deployment manifests hold too).
        Resource("v1", "replicationcontrollers", True, "ReplicationController"),
        Resource("apps/v1", "replicasets", True, "ReplicaSet"),
        Resource("apps/v1", "statefulsets", True, "StatefulSet"),
        Resource("coordination.k8s.io/v1", "leases", True, "Lease"),
        Resource("apps/v1", "deployments", True, "Deployment"),
        Resource("apps/v1", "daemonsets", True, "DaemonSet"),
        Resource(
            "apiextensions.k8s.io/v1",
            "customresourcedefinitions",
            False,
            "CustomResourceDefinition",
        ),
        # What the deployment manifests hold (operators/localcluster/manifests.py applies them).
        Resource("v1", "services", True, "Service"),
        Resource("v1", "secrets", True, "Secret"),
        Resource("networking.k8s.io/v1", "networkpolicies", True, "NetworkPolicy"),
        Resource("rbac.authorization.k8s.io/v1", "clusterroles", False, "ClusterRole"),
        Resource(
            "rbac.authorization.k8s.io/v1", "clusterrolebindings", False, "ClusterRoleBinding"
        ),
        Resource("rbac.authorization.k8s.io/v1", "roles", True, "Role"),
        Resource("rbac.authorization.k8s.io/v1", "rolebindings", True, "RoleBinding"),
        Resource(
            "admissionregistration.k8s.io/v1",
            "validatingadmissionpolicies",
            False,
            "ValidatingAdmissionPolicy",
        ),
        Resource(
            "admissionregistration.k8s.io/v1",
            "validatingadmissionpolicybindings",
            False,
            "ValidatingAdmissionPolicyBinding",
        ),
        Resource(
            "admissionregistration.k8s.io/v1",
            "validatingwebhookconfigurations",
            False,
            "ValidatingWebhookConfiguration",
        ),
        Resource("dra.kopf-dra.io/v1alpha1", "resourcepoolstatuses", False, "ResourcePoolStatus"),
    )
}


def register_resource(resource: Resource) -> None:
    """Make one of our own CRDs addressable by kind."""
    RESOURCES[resource.kind] = resource


def resource_of(kind: str, release: Release = DEFAULT_RELEASE) -> Resource:
    """Where ``kind`` is on a cluster of ``release`` (a kind that moved between releases, as
    DeviceTaintRule to v1 in 1.37, is read where that release serves it)."""
    try:
        resource = RESOURCES[kind]
    except KeyError:
        raise ValueError(f"kind {kind!r} is not known to kopf-dra's API access") from None
    moved = api_version_of(kind, release)
    if moved is not None and moved != resource.group_version:
        return dataclasses.replace(resource, group_version=moved)
    return resource


class ApiError(Exception):
    """An error status from the API server, with its Status reason and message."""

    def __init__(self, status: int, reason: str, message: str, body: Mapping[str, Any]) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body


class NotFoundError(ApiError):
    """404: the object (or its namespace) does not exist."""


class ConflictError(ApiError):
    """409: a resourceVersion precondition failed or the object already exists."""


class InvalidError(ApiError):
    """422: the API server rejected the object; ``causes`` name the fields."""

    @property
    def causes(self) -> list[dict[str, Any]]:
        details = self.body.get("details") or {}
        causes: list[dict[str, Any]] = details.get("causes") or []
        return causes


def _error(status: int, raw: bytes) -> ApiError:
    try:
        body = json.loads(raw)
    except ValueError:
        body = {"message": raw.decode(errors="replace")}
    reason = str(body.get("reason", "")) or "Unknown"
    message = str(body.get("message", ""))
    cls = {404: NotFoundError, 409: ConflictError, 422: InvalidError}.get(status, ApiError)
    return cls(status, reason, message, body)


log = structlog.get_logger(__name__)

# RFC 7234's warning-value as the API server writes it: ``299 - "text"`` (the text a quoted
# string with backslash escapes; a date may follow).
_WARNING: Final = re.compile(r'\s*(\d{3})\s+(\S+)\s+"((?:[^"\\]|\\.)*)"(?:\s+"[^"]*")?\s*(?:,|$)')


def parse_warnings(headers: Iterable[str]) -> list[str]:
    """The texts of the ``299`` warnings in ``Warning`` header values, as client-go keeps them
    (other codes are not the API server's deprecation or admission warnings)."""
    texts = []
    for value in headers:
        for match in _WARNING.finditer(value):
            code, _agent, text = match.groups()
            if code == "299":
                texts.append(re.sub(r"\\(.)", r"\1", text))
    return texts


def log_warning(text: str) -> None:
    """client-go's default: every warning the API server returns is logged."""
    log.warning("API server warning", warning=text)


PATCH_TYPES: Final = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}


@dataclasses.dataclass(frozen=True)
class ApiTimeouts:
    """Every request is bounded: kubernetes-asyncio's default waits forever, and a hung
    request would hold whatever waits for it (a lease renewal, a pod in flight) for good."""

    connect: float = 5.0
    total: float = 30.0

    def client_timeout(self, total: float | None = None) -> aiohttp.ClientTimeout:
        """``connect`` bounds opening a connection only: aiohttp's own ``connect`` also counts
        the wait for a free connection of the pool, and a burst of writes queued there (a
        scheduler binding hundreds of pods while the API server is slow) would fail as
        "connection timeout" with their outcome unknown though none was sent."""
        limit = self.total if total is None else min(total, self.total)
        return aiohttp.ClientTimeout(total=limit, sock_connect=min(self.connect, limit))


class KubeAPI:
    """Typed-error JSON access on top of a kubernetes-asyncio ApiClient.

    Timeouts surface as ``TimeoutError``: for a write, the outcome is then unknown and the
    caller must re-read before deciding anything. Warnings the API server returns (deprecated
    APIs, Pod Security in ``warn`` mode, admission policies) go to ``on_warning``. ``release``
    is the cluster's: a kind is read and watched where that release serves it (``resource_of``).
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        timeouts: ApiTimeouts | None = None,
        *,
        on_warning: Callable[[str], None] = log_warning,
        release: Release = DEFAULT_RELEASE,
    ) -> None:
        self.api_client = api_client
        #: kopf-dra's own transport for plain requests (``kube.http``), where the client
        #: has one (``client.make_api_client``); watches and the rest go through aiohttp.
        self.transport: Transport | None = getattr(api_client, "transport", None)
        self.timeouts = timeouts or ApiTimeouts()
        self.on_warning = on_warning
        self.release = release

    def resource(self, kind: str) -> Resource:
        """Where ``kind`` is on this cluster."""
        return resource_of(kind, self.release)

    def _resource_of(self, obj: Mapping[str, Any]) -> Resource:
        """Where to write ``obj``: a kind that moved between versions goes where its own
        apiVersion says (the server refuses a body of another version), else as read."""
        kind = str(obj["kind"])
        resource = self.resource(kind)
        stated = obj.get("apiVersion")
        if stated and api_version_of(kind, self.release) is not None:
            return dataclasses.replace(resource, group_version=str(stated))
        return resource

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Mapping[str, str | int | bool] | None = None,
        content_type: str = "application/json",
        request_timeout: float | None = None,
    ) -> Any:
        raw = await self.request_bytes(
            method,
            path,
            body=body,
            query=query,
            content_type=content_type,
            request_timeout=request_timeout,
        )
        return from_json(raw) if raw else None

    async def request_bytes(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Mapping[str, str | int | bool] | None = None,
        content_type: str = "application/json",
        request_timeout: float | None = None,
        accept: str = "application/json",
    ) -> bytes:
        """The response body as it came (pod logs are text); errors raise as in ``request``."""
        headers = {"Accept": accept, "Content-Type": content_type}
        query_params = [
            (k, str(v).lower() if isinstance(v, bool) else v) for k, v in (query or {}).items()
        ]
        timeout = self.timeouts.client_timeout(request_timeout)
        try:
            async with asyncio.timeout(timeout.total):
                if self.transport is not None:
                    await self._authorize(headers, query_params)
                    target = f"{path}?{urlencode(query_params)}" if query_params else path
                    direct = await self.transport.request(
                        method,
                        target,
                        headers,
                        None if body is None else to_json(body),
                        connect_timeout=timeout.sock_connect or self.timeouts.connect,
                    )
                    status, raw, warnings = direct.status, direct.body, direct.getall("Warning")
                else:
                    response = await self._send(method, path, query_params, headers, body, timeout)
                    # Without preloading, kubernetes-asyncio returns error responses instead
                    # of raising.
                    raw = await response.read()
                    status, warnings = int(response.status), response.headers.getall("Warning", [])
        except aiohttp.ServerTimeoutError as e:
            raise TimeoutError(f"{method} {path}: {e}") from None
        except aiohttp.ClientConnectorError as e:
            raise NotSentError(f"{method} {path}: {e}") from None
        except aiohttp.ClientConnectionError as e:
            if isinstance(e, OSError):
                raise
            # Disconnected mid-request (an API server restart): an OSError like the others.
            raise ConnectionError(f"{method} {path}: {e!r}") from None
        for warning in parse_warnings(warnings):
            self.on_warning(warning)
        if status >= 400:
            raise _error(status, raw)
        return raw

    async def _authorize(self, headers: dict[str, str], query: list[tuple[str, Any]]) -> None:
        """kubernetes-asyncio's default headers and credentials (a token it refreshes)."""
        api_client = self.api_client
        headers.update(api_client.default_headers)
        if api_client.cookie:
            headers["Cookie"] = api_client.cookie
        await api_client.update_params_for_auth(headers, query, ["BearerToken"])

    async def _send(
        self,
        method: str,
        path: str,
        query: list[tuple[str, Any]],
        headers: dict[str, str],
        body: Any,
        client_timeout: aiohttp.ClientTimeout,
    ) -> Any:
        """The request, on kubernetes-asyncio's session (its TLS, proxy and credentials) but
        past its ``call_api``, which copies every body, header and query parameter through
        ``sanitize_for_serialization`` (a tenth of a busy scheduler's CPU for bodies that are
        JSON already), and past its REST client's ``request``, which encodes with ``json``
        (pydantic-core's encoder is several times faster)."""
        api_client = self.api_client
        headers = dict(headers)
        await self._authorize(headers, query)
        url = f"{api_client.configuration.host}{path}"
        rest = api_client.rest_client
        args: dict[str, Any] = {
            "method": method,
            "url": f"{url}?{urlencode(query)}" if query else url,
            "timeout": client_timeout,
            "headers": headers,
        }
        if rest.proxy:
            args["proxy"] = rest.proxy
        if rest.proxy_headers:
            args["proxy_headers"] = rest.proxy_headers
        if rest.server_hostname:
            args["server_hostname"] = rest.server_hostname
        if body is not None:
            args["data"] = to_json(body)
        return await rest.pool_manager.request(**args)

    async def pod_log(self, namespace: str, name: str, container: str | None = None) -> str:
        """What the container printed, read through the API server (which asks the kubelet)."""
        query = {"container": container} if container else None
        raw = await self.request_bytes(
            "GET",
            resource_of("Pod").path(namespace, name) + "/log",
            query=query,
            accept="*/*",
        )
        return raw.decode(errors="replace")

    async def version_info(self) -> dict[str, Any]:
        """The API server's ``/version`` (its release, emulated and minimum compatibility
        versions): whose gates and API kopf-dra follows."""
        info = await self.call("GET", "/version")
        if not isinstance(info, dict):
            raise ApiError(0, "Invalid", f"/version answered {info!r}", {})
        return info

    async def call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            return await self.request(method, path, **kwargs)
        except client.ApiException as e:
            raise _error(
                int(e.status or 0),
                (e.body or b"") if isinstance(e.body, bytes) else str(e.body or "").encode(),
            ) from None

    async def get(
        self,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        request_timeout: float | None = None,
    ) -> dict[str, Any]:
        result: dict[str, Any] = await self.call(
            "GET", self.resource(kind).path(namespace, name), request_timeout=request_timeout
        )
        return result

    async def get_or_none(
        self, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """The object, or None when it does not exist (other errors raise)."""
        try:
            return await self.get(kind, name, namespace)
        except NotFoundError:
            return None

    async def list(
        self,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> dict[str, Any]:
        """The List object (items + metadata.resourceVersion for a following watch)."""
        query: dict[str, str | int | bool] = {}
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        result: dict[str, Any] = await self.call(
            "GET", self.resource(kind).path(namespace), query=query
        )
        return result

    async def create(
        self,
        obj: Mapping[str, Any],
        *,
        dry_run: bool = False,
        request_timeout: float | None = None,
    ) -> dict[str, Any]:
        meta = obj.get("metadata") or {}
        query: dict[str, str | int | bool] = {"dryRun": "All"} if dry_run else {}
        result: dict[str, Any] = await self.call(
            "POST",
            self._resource_of(obj).path(meta.get("namespace")),
            body=dict(obj),
            query=query,
            request_timeout=request_timeout,
        )
        return result

    async def replace(
        self,
        obj: Mapping[str, Any],
        *,
        subresource: str = "",
        request_timeout: float | None = None,
    ) -> dict[str, Any]:
        """PUT; the object's resourceVersion is the precondition (409 on a stale read)."""
        meta = obj["metadata"]
        path = self._resource_of(obj).path(meta.get("namespace"), meta["name"], subresource)
        result: dict[str, Any] = await self.call(
            "PUT", path, body=dict(obj), request_timeout=request_timeout
        )
        return result

    async def replace_status(
        self, obj: Mapping[str, Any], *, request_timeout: float | None = None
    ) -> dict[str, Any]:
        return await self.replace(obj, subresource="status", request_timeout=request_timeout)

    async def patch(
        self,
        kind: str,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        patch_type: str = "merge",
        subresource: str = "",
        field_manager: str | None = None,
        request_timeout: float | None = None,
    ) -> dict[str, Any]:
        query: dict[str, str | int | bool] = {}
        if field_manager:
            query["fieldManager"] = field_manager
        if patch_type == "apply":
            query["force"] = True
        path = self.resource(kind).path(namespace, name, subresource)
        result: dict[str, Any] = await self.call(
            "PATCH",
            path,
            body=patch,
            content_type=PATCH_TYPES[patch_type],
            query=query,
            request_timeout=request_timeout,
        )
        return result

    async def delete(
        self,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        request_timeout: float | None = None,
    ) -> dict[str, Any] | None:
        """DELETE with optional UID/resourceVersion preconditions; None when already gone."""
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        preconditions = {
            k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v
        }
        if preconditions:
            body["preconditions"] = preconditions
        try:
            result: dict[str, Any] = await self.call(
                "DELETE",
                self.resource(kind).path(namespace, name),
                body=body,
                request_timeout=request_timeout,
            )
        except NotFoundError:
            return None
        return result

    async def post_subresource(
        self,
        kind: str,
        name: str,
        namespace: str | None,
        sub: str,
        body: Mapping[str, Any],
        *,
        request_timeout: float | None = None,
    ) -> dict[str, Any]:
        """POST to a subresource (pods/binding, serviceaccounts/token)."""
        result: dict[str, Any] = await self.call(
            "POST",
            self.resource(kind).path(namespace, name, sub),
            body=dict(body),
            request_timeout=request_timeout,
        )
        return result

    async def watch(
        self,
        kind: str,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[dict[str, Any]]:
        """Raw watch events ({type, object}); the caller re-lists on 410 Gone / ERROR events."""
        query: dict[str, str | int | bool] = {
            "watch": True,
            "allowWatchBookmarks": True,
            "timeoutSeconds": timeout_seconds,
        }
        if resource_version:
            query["resourceVersion"] = resource_version
        headers = {"Accept": "application/json"}
        response = await self._send(
            "GET",
            self.resource(kind).path(namespace),
            list(query.items()),
            headers,
            None,
            # The server ends the watch after timeout_seconds; the connect timeout is ours.
            aiohttp.ClientTimeout(total=timeout_seconds + 10, sock_connect=self.timeouts.connect),
        )
        try:
            if int(response.status) >= 400:
                raise _error(int(response.status), await response.read())
            async for line in response.content:
                if line.strip():
                    yield from_json(line)
        finally:
            response.release()
