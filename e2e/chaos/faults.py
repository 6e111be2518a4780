"""Fault injectors: what goes wrong in a real cluster, done to the local one.

Processes get signals to their whole process group (each component runs in its own, see
``operators.demo.supervision.Supervisor``). Nodes are virtual, so the injectors play the parts
of the missing components: the kubelet (node readiness, pod phases, confirming deletions) and
the pod and garbage collectors of kube-controller-manager (a deleted node's pods and slices).
Each injector says what it did on the system's timeline.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import signal
from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

from e2e.chaos.system import ChaosSystem, retrying
from operators.kube.api import NotFoundError, resource_of


async def _signal(system: ChaosSystem, name: str, sig: signal.Signals) -> int:
    component = system.components[name]
    with contextlib.suppress(ProcessLookupError):
        os.killpg(component.pid, sig)
    return component.pid


async def kill(system: ChaosSystem, name: str, *, restart: bool = True) -> None:
    """SIGKILL a component (no cleanup handler runs), then start it again at once."""
    pid = await _signal(system, name, signal.SIGKILL)
    await asyncio.to_thread(system.components[name].child.process.wait)
    if not restart:
        system.components[name].stopped = True
        system.say(f"SIGKILL {name} (pid {pid}); left down")
        return
    new = system.restart(name)
    system.say(f"SIGKILL {name} (pid {pid}); restarted as pid {new.pid}")


def restart(system: ChaosSystem, name: str) -> None:
    new = system.restart(name)
    system.say(f"started {name} again (pid {new.pid})")


async def pause(system: ChaosSystem, name: str) -> None:
    """SIGSTOP: the process keeps its connections and state but does nothing."""
    pid = await _signal(system, name, signal.SIGSTOP)
    system.say(f"SIGSTOP {name} (pid {pid})")


async def resume(system: ChaosSystem, name: str) -> None:
    pid = await _signal(system, name, signal.SIGCONT)
    system.say(f"SIGCONT {name} (pid {pid})")


async def restart_apiserver(system: ChaosSystem) -> None:
    """Stop kube-apiserver (gracefully) and start it again on the same etcd and port."""
    old = system.cp.apiserver.pid if system.cp.apiserver is not None else None
    system.say(f"stopping kube-apiserver (pid {old})")
    await asyncio.to_thread(system.cp.restart_apiserver)
    new = system.cp.apiserver.pid if system.cp.apiserver is not None else None
    system.say(f"kube-apiserver ready again (pid {new})")


# --- nodes ---------------------------------------------------------------------------------


async def cordon(system: ChaosSystem, node: str) -> None:
    await retrying(
        lambda: system.api.patch("Node", node, {"spec": {"unschedulable": True}}),
        f"cordoning {node}",
    )
    system.say(f"cordoned node {node} (spec.unschedulable)")


async def mark_not_ready(system: ChaosSystem, node: str) -> None:
    """As a node lifecycle controller would once the kubelet stops reporting."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {
        "type": "Ready",
        "status": "False",
        "reason": "KubeletNotReady",
        "message": "chaos: the kubelet stopped reporting",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }

    async def write() -> dict[str, Any]:
        body = await system.api.get("Node", node)
        conditions = [c for c in body["status"].get("conditions") or [] if c["type"] != "Ready"]
        body["status"]["conditions"] = [*conditions, condition]
        return await system.api.replace_status(body)

    await retrying(write, f"marking {node} NotReady")
    system.say(f"marked node {node} NotReady (Ready=False)")


async def delete_node(system: ChaosSystem, node: str) -> None:
    """The node is gone: its driver stops, then the Node, its slices (garbage collector) and
    its pods (pod GC) are deleted."""
    driver = f"driver-{node}"
    if driver in system.components:
        await _signal(system, driver, signal.SIGTERM)
        await asyncio.to_thread(system.components[driver].child.process.wait)
        system.components[driver].stopped = True
    await retrying(lambda: system.api.delete("Node", node), f"deleting node {node}")
    slices = await retrying(
        lambda: system.api.list("ResourceSlice", field_selector=f"spec.nodeName={node}"),
        "listing slices",
    )
    for s in slices["items"]:
        name = s["metadata"]["name"]
        await retrying(partial(system.api.delete, "ResourceSlice", name), "deleting a slice")
    pods = await retrying(
        lambda: system.api.list("Pod", field_selector=f"spec.nodeName={node}"), "listing pods"
    )
    await delete_pods(system, pods["items"], quiet=True)
    system.say(
        f"deleted node {node}: its driver stopped, {len(slices['items'])} slices and "
        f"{len(pods['items'])} pods deleted"
    )


# --- pods ----------------------------------------------------------------------------------


def _names(pods: Iterable[Mapping[str, Any]]) -> str:
    return ", ".join(p["metadata"]["name"] for p in pods) or "none"


async def delete_pods(
    system: ChaosSystem, pods: Iterable[Mapping[str, Any]], *, quiet: bool = False
) -> None:
    """Delete at once (grace period 0): no kubelet would confirm a graceful deletion."""
    pods = list(pods)
    for pod in pods:
        meta = pod["metadata"]
        path = resource_of("Pod").path(meta["namespace"], meta["name"])
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
        with contextlib.suppress(NotFoundError):
            await retrying(partial(system.api.call, "DELETE", path, body=body), "deleting")
    if not quiet:
        system.say(f"deleted pods {_names(pods)}")


async def finish_pods(
    system: ChaosSystem, pods: Iterable[Mapping[str, Any]], phase: str = "Succeeded"
) -> None:
    """As the kubelet reports a pod whose containers all exited."""
    pods = list(pods)
    for pod in pods:
        meta = pod["metadata"]
        with contextlib.suppress(NotFoundError):
            patch = {"status": {"phase": phase}}
            await retrying(
                partial(
                    system.api.patch, "Pod", meta["name"], patch, meta["namespace"],
                    subresource="status",
                ),
                "finishing a pod",
            )  # fmt: skip
    system.say(f"marked pods {phase}: {_names(pods)}")
