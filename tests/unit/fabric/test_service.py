"""The simulator's HTTP API through the HTTP client (aiohttp on loopback, no mock server), and
every refusal of a caller without a credential, of another cluster's, or with too much."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from operators.fabric.auth import StaticTokens
from operators.fabric.client import HTTPFabricManager
from operators.fabric.model import MAX_BODY_BYTES, FabricError, FabricUnavailableError, FaultRequest
from operators.fabric.service import FabricService
from operators.fabric.simulator import FabricSimulator, parse_config

TOKENS = {"c1": "c1-token-0123456789abcdef", "c2": "c2-token-0123456789abcdef"}


def service_of(
    *, faults: bool = True, keep_finished: int = 500, max_running: int = 256
) -> FabricService:
    config = parse_config(
        {"attachSeconds": 0.2, "detachSeconds": 0.05, "devices": [{"model": "A100", "count": 2}]}
    )
    sim = FabricSimulator(
        config,
        clock=time.time,
        rng=random.Random(0),
        keep_finished=keep_finished,
        max_running=max_running,
    )
    return FabricService(sim, StaticTokens(TOKENS), faults=faults)


@pytest.fixture
async def service() -> AsyncIterator[FabricService]:
    svc = service_of()
    await svc.start()
    yield svc
    await svc.stop()


@pytest.fixture
async def ours(service: FabricService) -> AsyncIterator[HTTPFabricManager]:
    client = HTTPFabricManager(service.url, TOKENS["c1"])
    yield client
    await client.close()


@pytest.fixture
async def theirs(service: FabricService) -> AsyncIterator[HTTPFabricManager]:
    client = HTTPFabricManager(service.url, TOKENS["c2"])
    yield client
    await client.close()


async def raw(
    service: FabricService,
    method: str,
    path: str,
    *,
    token: str | None = TOKENS["c1"],
    body: Any = None,
    data: bytes | None = None,
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """One request as sent, with no client in between: (status, JSON answer, headers)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        aiohttp.ClientSession() as session,
        session.request(
            method, service.url + path, json=body, data=data, headers=headers
        ) as response,
    ):
        return response.status, await response.json(), dict(response.headers)


async def test_attach_long_poll_and_detach(ours: HTTPFabricManager) -> None:
    assert [d.id for d in await ours.devices()] == ["a100-0", "a100-1"]
    op = await ours.attach("op-1", "a100-0", "n1", labels={"claim": "ns/c"})
    assert op.state == "running"
    assert op.labels == {"claim": "ns/c"}
    done = await ours.operation("op-1", wait=5)
    assert done is not None
    assert done.state == "succeeded"
    [device] = [d for d in await ours.devices() if d.id == "a100-0"]
    assert (device.state, device.node, device.cluster) == ("attached", "n1", "c1")
    assert [o.id for o in await ours.operations()] == ["op-1"]
    # Retrying the same id answers the same operation.
    assert (await ours.attach("op-1", "a100-0", "n1")).state == "succeeded"
    detach = await ours.detach("op-2", "a100-0")
    assert (await ours.operation(detach.id, wait=5) or detach).state == "succeeded"


async def test_other_cluster_is_refused_and_sees_only_its_operations(
    ours: HTTPFabricManager, theirs: HTTPFabricManager
) -> None:
    await ours.attach("mine", "a100-0", "n1")
    taken = await theirs.attach("theirs", "a100-0", "x")
    assert (taken.state, taken.reason, taken.cluster) == ("failed", "DeviceTaken", "c2")
    assert "c1" not in taken.message
    assert [o.id for o in await theirs.operations()] == ["theirs"]
    assert [o.id for o in await ours.operations()] == ["mine"]


async def test_errors_carry_the_managers_reason(ours: HTTPFabricManager) -> None:
    with pytest.raises(FabricError) as missing:
        await ours.attach("op", "nope", "n1")
    assert (missing.value.status, missing.value.reason) == (404, "DeviceNotFound")
    await ours.attach("op", "a100-0", "n1")
    with pytest.raises(FabricError) as reused:
        await ours.attach("op", "a100-1", "n1")
    assert reused.value.reason == "OperationConflict"
    with pytest.raises(FabricError) as bad:
        await ours.attach("bad id!", "a100-0", "n1")
    assert bad.value.status == 400
    assert await ours.operation("unknown") is None


async def test_injected_fault_through_the_api(ours: HTTPFabricManager) -> None:
    await ours.inject_fault(FaultRequest(device="a100-1", count=1, message="link down"))
    await ours.attach("op", "a100-1", "n1")
    done = await ours.operation("op", wait=5)
    assert done is not None
    assert (done.state, done.reason, done.message) == ("failed", "AttachFailed", "link down")


async def test_unreachable_manager_is_transient() -> None:
    client = HTTPFabricManager("http://127.0.0.1:9", TOKENS["c1"], timeout=2)
    try:
        with pytest.raises(FabricUnavailableError):
            await client.devices()
    finally:
        await client.close()


async def test_long_poll_returns_after_the_wait_when_not_done(ours: HTTPFabricManager) -> None:
    await ours.attach("op", "a100-0", "n1")
    loop = asyncio.get_running_loop()
    started = loop.time()
    op = await ours.operation("op", wait=0.05)
    assert op is not None
    assert op.state == "running"
    assert loop.time() - started < 0.2


# --- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/snapshot"),
        ("GET", "/v1/devices"),
        ("GET", "/v1/devices/a100-0"),
        ("GET", "/v1/operations"),
        ("GET", "/v1/operations/any"),
        ("POST", "/v1/operations"),
        ("POST", "/v1/faults"),
    ],
)
@pytest.mark.parametrize("token", [None, "not-a-token-of-anyone-at-all"])
async def test_every_route_needs_a_known_token(
    service: FabricService, method: str, path: str, token: str | None
) -> None:
    body = {"id": "x", "kind": "detach", "device": "a100-0"} if method == "POST" else None
    status, answer, headers = await raw(service, method, path, token=token, body=body)
    assert (status, answer["reason"]) == (401, "Unauthorized")
    assert headers["WWW-Authenticate"].startswith("Bearer")
    assert service.sim.operations == {}
    assert (await raw(service, "GET", "/healthz", token=None))[0] == 200


async def test_the_client_without_a_token_gets_401(service: FabricService) -> None:
    client = HTTPFabricManager(service.url, None)
    try:
        with pytest.raises(FabricError) as refused:
            await client.snapshot()
    finally:
        await client.close()
    assert (refused.value.status, refused.value.reason) == (401, "Unauthorized")


async def test_the_cluster_is_the_credentials_not_the_requests(
    service: FabricService, ours: HTTPFabricManager
) -> None:
    body = {"id": "op", "kind": "attach", "device": "a100-0", "node": "n1", "cluster": "c2"}
    status, answer, _ = await raw(service, "POST", "/v1/operations", body=body)
    assert (status, answer["reason"]) == (403, "Forbidden")
    assert answer["message"].startswith("cluster:")
    status, answer, _ = await raw(service, "GET", "/v1/operations?cluster=c2")
    assert status == 403
    op = await ours.attach("op", "a100-0", "n1")
    assert op.cluster == "c1"
    assert (await ours.snapshot()).cluster == "c1"


async def test_another_clusters_device_and_operation_are_403(
    service: FabricService, ours: HTTPFabricManager, theirs: HTTPFabricManager
) -> None:
    await ours.attach("mine", "a100-0", "n1")
    await ours.operation("mine", wait=5)
    with pytest.raises(FabricError) as detach:
        await theirs.detach("steal", "a100-0")
    assert (detach.value.status, detach.value.reason) == (403, "Forbidden")
    with pytest.raises(FabricError) as read:
        await theirs.operation("mine")
    assert read.value.status == 403
    with pytest.raises(FabricError) as reuse:
        await theirs.attach("mine", "a100-0", "n1")
    assert reuse.value.status == 403
    [device] = [d for d in await ours.devices() if d.id == "a100-0"]
    assert (device.state, device.cluster, device.node) == ("attached", "c1", "n1")


async def test_devices_of_another_cluster_show_held_without_whose_or_where(
    service: FabricService, ours: HTTPFabricManager, theirs: HTTPFabricManager
) -> None:
    await ours.attach("mine", "a100-0", "secret-node")
    listed = {d.id: d for d in await theirs.devices()}
    assert (listed["a100-0"].state, listed["a100-0"].cluster, listed["a100-0"].node) == (
        "attaching",
        None,
        None,
    )
    assert listed["a100-0"].operation is None
    assert listed["a100-1"].state == "free"
    status, one, _ = await raw(service, "GET", "/v1/devices/a100-0", token=TOKENS["c2"])
    assert status == 200
    assert "c1" not in str(one)
    assert "secret-node" not in str(one)
    snapshot = await theirs.snapshot()
    assert "secret-node" not in snapshot.model_dump_json()
    assert snapshot.operations == []


async def test_faults_are_off_unless_enabled() -> None:
    svc = service_of(faults=False)
    await svc.start()
    client = HTTPFabricManager(svc.url, TOKENS["c1"])
    try:
        with pytest.raises(FabricError) as refused:
            await client.inject_fault(FaultRequest(rate=1.0))
    finally:
        await client.close()
        await svc.stop()
    assert (refused.value.status, refused.value.reason) == (403, "Forbidden")
    assert "--enable-faults" in refused.value.message
    assert svc.sim.failure_rate == 0.0


@pytest.mark.parametrize(
    ("labels", "field"),
    [
        ({f"k{i}": "v" for i in range(17)}, "labels:"),
        ({"claim": "x" * 513}, "labels.claim:"),
        ({"bad key!": "v"}, "labels.bad key!.[key]:"),
    ],
)
async def test_oversized_or_malformed_labels_are_400_naming_the_field(
    service: FabricService, labels: dict[str, str], field: str
) -> None:
    body = {"id": "op", "kind": "attach", "device": "a100-0", "node": "n1", "labels": labels}
    status, answer, _ = await raw(service, "POST", "/v1/operations", body=body)
    assert (status, answer["reason"]) == (400, "Invalid")
    assert answer["message"].startswith(field)
    assert service.sim.operations == {}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"device": "a100-0", "message": "m" * 1025}, "message:"),
        ({"device": "a100-0", "reason": "not camel"}, "reason:"),
        ({"device": "d" * 64}, "device:"),
    ],
)
async def test_oversized_fault_fields_are_400_naming_the_field(
    service: FabricService, body: dict[str, Any], field: str
) -> None:
    status, answer, _ = await raw(service, "POST", "/v1/faults", body=body)
    assert (status, answer["reason"]) == (400, "Invalid")
    assert answer["message"].startswith(field)


async def test_a_body_over_the_limit_is_413_naming_the_body(service: FabricService) -> None:
    labels = {"claim": "x" * MAX_BODY_BYTES}
    body = {"id": "op", "kind": "attach", "device": "a100-0", "node": "n1", "labels": labels}
    status, answer, _ = await raw(service, "POST", "/v1/operations", body=body)
    assert (status, answer["reason"]) == (413, "RequestTooLarge")
    assert answer["message"].startswith("body:")
    status, answer, _ = await raw(service, "POST", "/v1/operations", data=b"{not json")
    assert (status, answer["message"][:5]) == (400, "body:")


async def test_too_many_running_operations_are_429() -> None:
    svc = service_of(max_running=1)
    await svc.start()
    client = HTTPFabricManager(svc.url, TOKENS["c1"])
    try:
        await client.attach("first", "a100-0", "n1")
        with pytest.raises(FabricError) as refused:
            await client.attach("second", "a100-1", "n1")
    finally:
        await client.close()
        await svc.stop()
    assert (refused.value.status, refused.value.reason) == (429, "TooManyOperations")


async def test_finished_operations_beyond_the_retention_are_forgotten() -> None:
    svc = service_of(keep_finished=1)
    await svc.start()
    client = HTTPFabricManager(svc.url, TOKENS["c1"])
    try:
        for op_id in ("first", "second"):
            await client.attach(op_id, "a100-0", "n1")
            await client.operation(op_id, wait=5)
            await client.detach(f"{op_id}-detach", "a100-0")
            await client.operation(f"{op_id}-detach", wait=5)
        assert [o.id for o in await client.operations()] == ["second-detach"]
        assert await client.operation("first") is None
    finally:
        await client.close()
        await svc.stop()
