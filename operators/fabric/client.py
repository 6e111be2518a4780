"""A FabricManager over HTTP/JSON (the API of ``service.py``).

Transport trouble and 5xx become ``FabricUnavailableError`` (retry later); 4xx answers become
``FabricError`` with the manager's reason, so callers can tell "taken" from "try again". Every
request carries the cluster's bearer token; the manager knows the cluster from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import aiohttp

from operators.fabric.auth import TokenError
from operators.fabric.model import (
    ATTACH,
    DETACH,
    FabricDevice,
    FabricError,
    FabricSnapshot,
    FabricUnavailableError,
    FaultRequest,
    Operation,
    OperationRequest,
)

#: The token, or where to get it from (``auth.TokenFile``: re-read when rotated).
Token = str | Callable[[], str] | None


class HTTPFabricManager:
    """Client of one fabric manager as one cluster (the one ``token`` belongs to); ``close``
    releases its session."""

    def __init__(self, base_url: str, token: Token, *, timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    def _headers(self) -> dict[str, str]:
        if self._token is None:
            return {}
        try:
            token = self._token if isinstance(self._token, str) else self._token()
        except TokenError as e:
            raise FabricError(401, "NoCredential", str(e)) from None
        return {"Authorization": f"Bearer {token}"}

    def _session_or_new(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Mapping[str, str] | None = None,
        limit: float | None = None,
        not_found_ok: bool = False,
    ) -> Any:
        url = f"{self.base_url}{path}"
        headers = self._headers()
        try:
            async with self._session_or_new().request(
                method,
                url,
                json=body,
                params=dict(query or {}),
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=limit or self._timeout),
            ) as response:
                if response.status >= 500:
                    text = await response.text()
                    raise FabricUnavailableError(f"{method} {url}: {response.status} {text}")
                data = await response.json(content_type=None)
                if response.status == 404 and not_found_ok:
                    return None
                if response.status >= 400:
                    data = data if isinstance(data, dict) else {}
                    raise FabricError(
                        response.status,
                        str(data.get("reason") or "Unknown"),
                        str(data.get("message") or ""),
                    )
                return data
        except (aiohttp.ClientError, TimeoutError, ValueError) as e:
            raise FabricUnavailableError(f"{method} {url}: {type(e).__name__}: {e}") from None

    async def snapshot(self) -> FabricSnapshot:
        return FabricSnapshot.model_validate(await self._call("GET", "/v1/snapshot"))

    async def devices(self) -> list[FabricDevice]:
        data = await self._call("GET", "/v1/devices")
        return [FabricDevice.model_validate(d) for d in data.get("items", [])]

    async def operations(self) -> list[Operation]:
        data = await self._call("GET", "/v1/operations")
        return [Operation.model_validate(o) for o in data.get("items", [])]

    async def operation(self, op_id: str, *, wait: float = 0.0) -> Operation | None:
        """One operation; with ``wait``, the manager answers once it is done (long poll)."""
        query = {"wait": str(wait)} if wait else {}
        data = await self._call(
            "GET",
            f"/v1/operations/{op_id}",
            query=query,
            limit=self._timeout + wait,
            not_found_ok=True,
        )
        return None if data is None else Operation.model_validate(data)

    async def _submit(self, request: OperationRequest) -> Operation:
        # Built without validation: the manager validates, and answers 400 with its reason.
        data = await self._call("POST", "/v1/operations", body=request.wire())
        return Operation.model_validate(data)

    async def attach(
        self, op_id: str, device: str, node: str, labels: Mapping[str, str] | None = None
    ) -> Operation:
        return await self._submit(
            OperationRequest.model_construct(
                id=op_id,
                kind=ATTACH,
                device=device,
                node=node,
                labels=dict(labels or {}),
            )
        )

    async def detach(
        self, op_id: str, device: str, labels: Mapping[str, str] | None = None
    ) -> Operation:
        return await self._submit(
            OperationRequest.model_construct(
                id=op_id,
                kind=DETACH,
                device=device,
                labels=dict(labels or {}),
            )
        )

    async def inject_fault(self, fault: FaultRequest) -> None:
        """Simulator only: fail the next attaches of a device, or set a failure rate."""
        await self._call("POST", "/v1/faults", body=fault.wire())
