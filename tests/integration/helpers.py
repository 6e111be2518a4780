"""Helpers of integration tests: wait on conditions with deadlines, run operators in-process."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import kopf

from operators.controllers.common.runner import run_operator

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T | None]], *, within: float = 30.0, what: str = "condition"
) -> T:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` after ``within`` s."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        last = await probe()
        if last:
            return last
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}; last: {last!r}")
        await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def running_operator(registry: kopf.OperatorRegistry, component: str) -> AsyncIterator[None]:
    """Run a kopf operator in a thread of its own until the block ends (as KopfRunner does).

    A thread with its own event loop keeps kopf's end-of-run task cleanup away from the
    test's tasks, and lets a test run two operators, or restart one, like separate processes.
    """
    stop, ready = threading.Event(), threading.Event()
    failure: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(
                run_operator(
                    registry=registry, component=component, stop_flag=stop, ready_flag=ready
                )
            )
        except BaseException as e:  # reported to the test below
            failure.append(e)
            ready.set()

    thread = threading.Thread(target=target, name=f"operator-{component}", daemon=True)
    thread.start()
    try:
        await asyncio.to_thread(ready.wait, 60)
        if failure:
            raise failure[0]
        yield
    finally:
        stop.set()
        await asyncio.to_thread(thread.join, 60)
        if thread.is_alive():
            raise AssertionError(f"operator {component} did not stop within 60 s")


def pod_body(
    name: str, namespace: str, *claims: dict[str, Any], scheduler: str = "kopf-dra"
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
            "resourceClaims": list(claims),
        },
    }


def template_body(
    name: str, namespace: str, device_class: str = "gpu.example.com"
) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "metadata": {"labels": {"from-template": name}},
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]
                }
            },
        },
    }


def claim_body(name: str, namespace: str, device_class: str = "gpu.example.com") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}
        },
    }


ALLOCATION = {
    "devices": {
        "results": [
            {"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}
        ]
    },
    "nodeSelector": {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
        ]
    },
}
