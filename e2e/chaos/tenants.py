"""Tenant abuse: one namespace misbehaves, another's pod must still be served.

Each scenario lets tenant A do something hostile (expensive selectors, thousands of unique
selectors, the largest opaque configs the API allows, an Event flood, a queue full of pods that
never fit), then times a plain pod of tenant B from creation to binding and reads the
scheduler's memory. The bound is generous (the machine is shared): the scenario fails only when
B's pod is not served within ``BOUND`` seconds or the scheduler's memory passes ``MEMORY_MIB``.
Tenant A then leaves (its pods and claims are deleted), and the invariants are checked on what
remains, as for every scenario.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

from e2e.chaos.scenarios import GPU_CLASS, Context, Scenario, canary
from e2e.chaos.system import retrying
from operators.demo.bringup import ensure_default_service_account
from operators.kube.api import KubeAPI

HOSTILE: Final = "tenant-a"
PLAIN: Final = "tenant-b"
BOUND: Final = 10.0  # seconds for tenant B's pod, whatever tenant A does
MEMORY_MIB: Final = 768.0  # the manifests' scheduler limit is 1 GiB
CREATORS: Final = 16  # tenant A's concurrent requests


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def expensive_selector(constant: int) -> str:
    """Passes the API server's cost estimate; hundreds of thousands of steps per device."""
    numbers = ", ".join(str(i) for i in range(300))
    return f"[{numbers}].exists(x, [{numbers}].exists(y, x * y == -{constant}))"


def claim(name: str, namespace: str, **exactly: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, **exactly}}]
            }
        },
    }


def pod(name: str, namespace: str, claim_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": "kopf-dra",
            "containers": [{"name": "c", "image": "pause"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
        },
    }


async def tenants(ctx: Context) -> None:
    for name in (HOSTILE, PLAIN):
        await retrying(
            lambda name=name: ctx.api.create(  # type: ignore[misc]
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            ),
            f"namespace {name}",
        )
        await ensure_default_service_account(ctx.api, name)


async def create_many(
    ctx: Context, count: int, body: Callable[[int], list[dict[str, Any]]]
) -> None:
    sem = asyncio.Semaphore(CREATORS)

    async def one(i: int) -> None:
        async with sem:
            for obj in body(i):
                await retrying(lambda obj=obj: ctx.api.create(obj), "tenant A's objects")  # type: ignore[misc]

    await asyncio.gather(*(one(i) for i in range(count)))


async def plain_pod_served(ctx: Context, name: str) -> float:
    """Seconds from creating tenant B's claim and pod to the pod's binding."""
    started = time.monotonic()
    await retrying(lambda: ctx.api.create(claim(name, PLAIN)), "tenant B's claim")
    await retrying(lambda: ctx.api.create(pod(name, PLAIN, name)), "tenant B's pod")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + BOUND
    while True:
        body = await retrying(lambda: ctx.api.get("Pod", name, PLAIN), "tenant B's pod")
        if body["spec"].get("nodeName"):
            return time.monotonic() - started
        if loop.time() > deadline:
            raise AssertionError(f"tenant B's pod {name} not bound within {BOUND:g} s")
        await asyncio.sleep(0.05)  # polling a condition with the deadline above


async def leave(api: KubeAPI) -> None:
    """Tenant A leaves: its pods and claims go (the invariants judge what remains)."""
    for kind in ("Pod", "ResourceClaim"):
        for item in (await retrying(lambda kind=kind: api.list(kind, HOSTILE), "list"))["items"]:  # type: ignore[misc]
            await api.delete(kind, item["metadata"]["name"], HOSTILE)


def abuse(
    what: str, hostile: Callable[[Context], Awaitable[None]]
) -> Callable[[Context], Awaitable[None]]:
    async def scenario(ctx: Context) -> None:
        await canary(ctx)
        await tenants(ctx)
        scheduler = ctx.system.components[ctx.schedulers[0]]
        before = rss_mib(scheduler.pid)
        calm = await plain_pod_served(ctx, "calm")
        ctx.say(f"tenant B's pod bound in {calm:.2f} s before tenant A starts")
        started = time.monotonic()
        await hostile(ctx)
        ctx.say(f"tenant A: {what} ({time.monotonic() - started:.1f} s)")
        served = await plain_pod_served(ctx, "during")
        memory = rss_mib(scheduler.pid)
        ctx.say(
            f"tenant B's pod bound in {served:.2f} s during it; scheduler RSS {before:.0f} -> "
            f"{memory:.0f} MiB"
        )
        if memory > MEMORY_MIB:
            raise AssertionError(f"scheduler RSS {memory:.0f} MiB > {MEMORY_MIB:g} MiB")
        await leave(ctx.api)

    return scenario


async def expensive_selectors(ctx: Context) -> None:
    await create_many(
        ctx,
        3,
        lambda i: [
            claim(
                f"x-{i}", HOSTILE, selectors=[{"cel": {"expression": expensive_selector(i + 1)}}]
            ),
            pod(f"x-{i}", HOSTILE, f"x-{i}"),
        ],
    )


async def unique_selectors(ctx: Context) -> None:
    await create_many(
        ctx,
        2000,
        lambda i: [
            claim(
                f"u-{i}",
                HOSTILE,
                selectors=[{"cel": {"expression": f'device.driver == "unique-{i}.example.com"'}}],
            ),
            pod(f"u-{i}", HOSTILE, f"u-{i}"),
        ],
    )


async def huge_configs(ctx: Context) -> None:
    """The largest opaque parameters the API accepts (10 KiB each), on claims that never fit
    (so that tenant B's pod has devices left: a full cluster would say nothing about
    fairness)."""
    blob = "x" * 10_000

    def body(i: int) -> list[dict[str, Any]]:
        c = claim(f"h-{i}", HOSTILE, count=1000)
        c["spec"]["devices"]["config"] = [
            {"opaque": {"driver": "example.kopf-dra.io", "parameters": {"blob": blob}}}
        ]
        return [c, pod(f"h-{i}", HOSTILE, f"h-{i}")]

    await create_many(ctx, 200, body)


async def event_flood(ctx: Context) -> None:
    await create_many(
        ctx,
        5000,
        lambda i: [
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"flood.{i}", "namespace": HOSTILE},
                "involvedObject": {"kind": "Pod", "name": "nobody", "namespace": HOSTILE},
                "reason": "Flood",
                "message": "x" * 512,
                "type": "Warning",
            }
        ],
    )


async def queue_hog(ctx: Context) -> None:
    """Pods that never fit (more devices than any node has): the scheduler keeps retrying
    them."""
    await create_many(
        ctx,
        500,
        lambda i: [claim(f"q-{i}", HOSTILE, count=1000), pod(f"q-{i}", HOSTILE, f"q-{i}")],
    )


TENANT_SCENARIOS: Final = tuple(
    Scenario(
        f"tenants/{name}",
        f"tenant A: {what}; tenant B's plain pod served within {BOUND:g} s",
        abuse(what, hostile),
        seeds=(1,),
    )
    for name, what, hostile in (
        ("expensive-selectors", "3 claims with expensive selectors", expensive_selectors),
        ("unique-selectors", "2000 claims with unique selectors", unique_selectors),
        ("huge-configs", "200 claims with 10 KiB opaque configs", huge_configs),
        ("event-flood", "5000 Events of 512 bytes", event_flood),
        ("queue-hog", "500 pods that never fit", queue_hog),
    )
)
