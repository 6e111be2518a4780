"""The simulator's HTTP API through the HTTP client (aiohttp on loopback, no mock server)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator

import pytest

from operators.fabric.client import HTTPFabricManager
from operators.fabric.model import FabricError, FabricUnavailableError, FaultRequest
from operators.fabric.service import FabricService
from operators.fabric.simulator import FabricSimulator, parse_config


@pytest.fixture
async def service() -> AsyncIterator[FabricService]:
    config = parse_config(
        {"attachSeconds": 0.2, "detachSeconds": 0.05, "devices": [{"model": "A100", "count": 2}]}
    )
    svc = FabricService(FabricSimulator(config, clock=time.time, rng=random.Random(0)))
    await svc.start()
    yield svc
    await svc.stop()


@pytest.fixture
async def ours(service: FabricService) -> AsyncIterator[HTTPFabricManager]:
    client = HTTPFabricManager(service.url, "c1")
    yield client
    await client.close()


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
    service: FabricService, ours: HTTPFabricManager
) -> None:
    other = HTTPFabricManager(service.url, "c2")
    try:
        await ours.attach("mine", "a100-0", "n1")
        theirs = await other.attach("theirs", "a100-0", "x")
        assert (theirs.state, theirs.reason) == ("failed", "DeviceTaken")
        assert [o.id for o in await other.operations()] == ["theirs"]
    finally:
        await other.close()


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
    client = HTTPFabricManager("http://127.0.0.1:9", "c1", timeout=2)
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
